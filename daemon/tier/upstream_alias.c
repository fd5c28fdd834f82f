/*
 * Aliases in the upstream tier, on the loop thread: when kilnd points an
 * alias at an entry of this node's toolchain, the entry (if it is not there
 * yet) and an alias record go upstream; a lookup by alias that misses
 * locally asks the tier, and takes a record only when the entry it names
 * passes every check an upstream entry passes (upfs_take: dependencies
 * hashed here, key recomputed, object digest; the toolchain's name and
 * identity; recheck.c's observation of this node's toolchain). The
 * filesystem work runs on the pool (upstream_alias_fs.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flight.h"
#include "claims.h"
#include "deps.h"
#include "key.h"
#include "kilnd.h"
#include "log.h"
#include "named.h"
#include "alias.h"
#include "publish.h"
#include "recheck.h"
#include "thread.h"
#include "upstream.h"
#include "upstream_int.h"
#include "util.h"

/* The compiler output published with an entry, read from the local cache. */
#define LOG_MAX ((size_t)16 << 20)

/* What a pool job needs of a toolchain: its names and identity, copied
 * (a named toolchain may be let go on the loop while the job runs). */
int upstream_tc_copy(struct toolchain *dst, const struct toolchain *tc)
{
	memset(dst, 0, sizeof(*dst));
	memcpy(dst->id, tc->id, sizeof(dst->id));
	if ((dst->name = strdup(tc->name)) == NULL || (dst->path = strdup(tc->path)) == NULL ||
	    (dst->real_path = strdup(tc->real_path)) == NULL ||
	    (tc->host != NULL && (dst->host = strdup(tc->host)) == NULL) ||
	    (tc->host_real != NULL && (dst->host_real = strdup(tc->host_real)) == NULL))
		return -ENOMEM;
	return 0;
}

void upstream_tc_free(struct toolchain *tc)
{
	free(tc->name);
	free(tc->path);
	free(tc->real_path);
	free(tc->host);
	free(tc->host_real);
	memset(tc, 0, sizeof(*tc));
}

/* ---- publishing a record ----------------------------------------------- */

struct record_job {
	struct kilnd *d;
	struct store_entry entry;
	struct up_alias rec;
	char *obj_path;
	struct up_lease *lease;          /* the alias's lease, ended after the record */
	int rc;
	bool wrote_entry;
};

struct tc_find {
	const char *name;
	const struct toolchain *tc;
};

static void match_named(const struct toolchain *tc, void *arg)
{
	struct tc_find *f = arg;
	if (f->tc == NULL && strcmp(tc->name, f->name) == 0)
		f->tc = tc;
}

/* The toolchain of this name kilnd has now (configured, or named by path
 * and identified), or NULL. */
static const struct toolchain *toolchain_now(struct kilnd *d, const char *name)
{
	struct tc_find f = { .name = name, .tc = kilnd_toolchain(d, name) };
	if (f.tc == NULL)
		named_foreach(d, match_named, &f);
	return f.tc;
}

static void record_work(void *arg)
{
	struct record_job *j = arg;
	const struct up_dirs *fs = upstream_dirs(j->d);
	/* The entry first (a build's own publish may still be on its way;
	 * upfs_publish keeps an entry that is there and verifies), so that a
	 * record present names an entry present. */
	if (!upfs_has_entry(fs, j->entry.rkey, j->entry.key)) {
		char *log = NULL, *path = store_log_path(j->d->store, j->entry.key);
		size_t len = 0;
		if (path == NULL || util_read_file(path, LOG_MAX, &log, &len) != 0)
			log = NULL;
		free(path);
		j->rc = upfs_publish(fs, &j->entry, j->obj_path, log, len);
		free(log);
		j->wrote_entry = j->rc == 1;
		if (j->rc < 0)
			return;
		if (!upfs_has_entry(fs, j->entry.rkey, j->entry.key)) {
			j->rc = 0;   /* not publishable (a dependency changed during its build) */
			return;
		}
	}
	j->rc = upfs_alias_publish(fs, &j->rec);
	if (j->rc == 0)
		j->rc = 1;
}

static void record_job_free(struct record_job *j)
{
	if (j->lease != NULL)
		upstream_lease_record_end(j->d, j->lease);
	store_entry_free(&j->entry);
	upfs_alias_free(&j->rec);
	free(j->obj_path);
	free(j);
}

static void record_done(void *arg, int status)
{
	struct record_job *j = arg;
	struct kilnd *d = j->d;
	if (status != 0)
		j->rc = status;
	if (j->wrote_entry)
		d->c.upstream_publishes++;
	if (j->rc == 1) {
		d->c.upstream_alias_records++;
		log_debug("alias record of %.16s published upstream", j->entry.key);
	} else if (j->rc < 0) {
		d->c.upstream_errors++;
		log_warn("cannot publish the alias record of %.16s to the upstream tier: %s",
			 j->entry.key, strerror(-j->rc));
	}
	record_job_free(j);
}

/* Fills rec from e (the entry alias now names) and tc (its toolchain). */
static int record_of(struct up_alias *rec, const char *alias, const struct store_entry *e,
		     const struct toolchain *tc, const char *data)
{
	memset(rec, 0, sizeof(*rec));
	memcpy(rec->key, e->key, sizeof(rec->key));
	memcpy(rec->rkey, e->rkey, sizeof(rec->rkey));
	memcpy(rec->tc_id, tc->id, sizeof(rec->tc_id));
	if ((rec->alias = strdup(alias)) == NULL || (rec->output = strdup(e->output)) == NULL ||
	    (rec->toolchain = strdup(tc->name)) == NULL ||
	    (data != NULL && (rec->data = strdup(data)) == NULL))
		return -ENOMEM;
	return 0;
}

void upstream_alias_set(struct kilnd *d, const char *alias, const char *key, const char *data)
{
	ASSERT_LOOP();
	if (d->up == NULL || upstream_alias_quiet(d))
		return;
	struct record_job *j = calloc(1, sizeof(*j));
	if (j == NULL)
		return;
	j->d = d;
	const struct toolchain *tc = NULL;
	/* Only what another node could take: an entry recorded by
	 * observation, of a toolchain kilnd knows now (its identity goes into
	 * the record), never a precompiled header (node-local). */
	if (store_get(d->store, key, &j->entry) != 0 || j->entry.output == NULL ||
	    strcmp(j->entry.output, "pch") == 0 || j->entry.deps_source != STORE_DEPS_OBSERVED ||
	    j->entry.toolchain == NULL || (tc = toolchain_now(d, j->entry.toolchain)) == NULL ||
	    record_of(&j->rec, alias, &j->entry, tc, data) != 0 ||
	    (j->obj_path = store_object_path(d->store, key, j->entry.output)) == NULL) {
		record_job_free(j);
		return;
	}
	/* The claim's lease (if any) goes only once the record is there: a
	 * node that finds the lease gone finds the record. */
	j->lease = upstream_lease_record_begin(d, alias);
	if (kilnd_work(d, POOL_UP_ALIAS, record_work, record_done, j) != 0)
		record_job_free(j);
}

/* ---- a lookup by alias ------------------------------------------------- */

struct find_job {
	struct kilnd *d;
	char *alias;
	struct toolchain tc;             /* the lookup's, copied */
	void (*done)(void *arg, bool found);
	void *arg;
	bool found;
	char key[65];
	char *data;
	unsigned bad;
	int err;
};

/* Every check beyond upfs_take's: the lookup's toolchain built it, and
 * this node's toolchain, observed, reads nothing the entry does not list. */
static bool entry_fits(struct find_job *j, const struct store_entry *e, const char *tmp)
{
	char why[768];
	if (!named_built_by(e, &j->tc)) {
		log_debug("upstream alias record of %.16s: not built by toolchain %s here", e->key,
			  j->tc.name);
		return false;
	}
	struct build_input *in = recheck_input_of_entry(j->d, e, why, sizeof(why));
	bool ok = in != NULL && recheck_peer(j->d, in, e->deps, e->ndeps, tmp, why, sizeof(why)) == 0;
	recheck_input_free(in);
	if (!ok) {
		log_info("upstream entry %.16s of alias record not taken: %s", e->key, why);
		j->bad++;
	}
	return ok;
}

/* Whether the record's entry is in the local cache already (another alias
 * of the same code, another rank's tables, taken or built before) and fits:
 * the record's request key and output (never a .gch), built by the lookup's
 * toolchain, every dependency as it is here now (deps_check_here, as an
 * upstream entry's). Then nothing is fetched: the alias points at it, and
 * the lookup's hit checks it as any local entry. Otherwise the record is
 * tried as before, from the tier. */
static bool entry_here(struct find_job *j, const struct up_alias *rec)
{
	struct store_entry e = { 0 };
	char why[512];
	bool here = store_get_any_thread(j->d->store, rec->key, &e) == 0 && strcmp(e.rkey, rec->rkey) == 0 &&
		    e.output != NULL && strcmp(e.output, rec->output) == 0 &&
		    strcmp(e.output, "pch") != 0 && named_built_by(&e, &j->tc);
	for (size_t i = 0; here && i < e.ndeps; i++) {
		struct store_dep now = e.deps[i];
		here = deps_check_here(&now, why, sizeof(why)) == 0;
	}
	if (here)
		log_debug("upstream alias record of %.16s: its entry is here already", rec->key);
	store_entry_free(&e);
	return here;
}

/* One record: 1 taken into the local cache, 0 not. */
static int try_record(struct find_job *j, const struct up_alias *rec, const char *tmp)
{
	struct kilnd *d = j->d;
	struct store_entry e = { 0 };
	char *log = NULL;
	if (strcmp(rec->toolchain, j->tc.name) != 0 || memcmp(rec->tc_id, j->tc.id, 32) != 0)
		return 0;   /* another toolchain's (another node's compiler): not for this lookup */
	if (entry_here(j, rec))
		return 1;
	if ((e.output = strdup(rec->output)) == NULL || (e.toolchain = strdup(j->tc.name)) == NULL) {
		store_entry_free(&e);
		return 0;
	}
	int rc = upfs_take(upstream_dirs(d), rec->rkey, rec->key, rec->output, tmp, &e, &log);
	if (rc == -EBADMSG)
		j->bad++;
	if (rc == 0)
		log_info("upstream alias record of %.16s: its entry is missing or not for this node",
			 rec->key);
	if (rc == 1 && !entry_fits(j, &e, tmp))
		rc = 0;
	if (rc == 1) {
		e.created = e.last_used = util_wall_s();
		e.key_format = KEY_FORMAT_VERSION;
		if (log != NULL)
			publish_write_log(d, e.key, log, strlen(log));
		rc = store_publish(d->store, &e, AT_FDCWD, tmp);
		if (rc != 0) {
			log_warn("cannot publish upstream entry %.16s into the cache: %s", e.key,
				 strerror(-rc));
			j->err = rc;
		}
		rc = rc == 0;
	}
	if (rc != 1)
		unlink(tmp);
	free(log);
	store_entry_free(&e);
	return rc;
}

int upstream_alias_take(struct kilnd *d, const char *alias, const struct toolchain *tc,
			char key[65], char **data, unsigned *bad, int *err)
{
	struct find_job j = { .d = d, .alias = (char *)alias, .tc = *tc };
	struct up_alias *v = NULL;
	size_t n = 0;
	char *tmpdir = store_tmp_dir(d->store), tmp[4200];
	*data = NULL;
	if (tmpdir == NULL) {
		*err = -ENOMEM;
		return 0;
	}
	snprintf(tmp, sizeof(tmp), "%s/ua-%d", tmpdir, (int)gettid());
	free(tmpdir);
	int rc = upfs_alias_list(upstream_dirs(d), alias, &v, &n, bad);
	if (rc != 0)
		*err = rc;
	/* Newest first: a re-pointed alias's latest target that verifies. */
	for (size_t i = 0; i < n && !j.found; i++) {
		if (try_record(&j, &v[i], tmp) == 1) {
			j.found = true;
			memcpy(key, v[i].key, 65);
			*data = v[i].data;
			v[i].data = NULL;
		}
	}
	for (size_t i = 0; i < n; i++)
		upfs_alias_free(&v[i]);
	free(v);
	*bad += j.bad;
	if (j.err != 0)
		*err = j.err;
	return j.found;
}

static void find_work(void *arg)
{
	struct find_job *j = arg;
	j->found = upstream_alias_take(j->d, j->alias, &j->tc, j->key, &j->data, &j->bad,
				       &j->err) == 1;
}

void upstream_alias_taken(struct kilnd *d, const char *alias, const char *key, const char *data)
{
	d->c.upstream_alias_hits++;
	/* Here as a local alias now, without writing its record back. */
	upstream_alias_quiet_set(d, true);
	alias_point(d, alias, key, data);
	upstream_alias_quiet_set(d, false);
	kilnd_refresh_totals(d);   /* the entry it brought, in status and --max-size */
}

static void find_done(void *arg, int status)
{
	struct find_job *j = arg;
	struct kilnd *d = j->d;
	if (status != 0)
		j->err = status;
	d->c.upstream_errors += j->bad + (j->err != 0);
	if (j->err != 0)
		log_warn("upstream tier, alias lookup: %s; going on as if it missed", strerror(-j->err));
	if (j->found && d->up != NULL)
		upstream_alias_taken(d, j->alias, j->key, j->data);
	j->done(j->arg, j->found);
	free(j->alias);
	free(j->data);
	upstream_tc_free(&j->tc);
	free(j);
}

int upstream_alias_find(struct kilnd *d, const char *alias, const struct toolchain *tc,
			void (*done)(void *arg, bool found), void *arg)
{
	ASSERT_LOOP();
	if (d->up == NULL || tc == NULL || d->stopping)
		return -ENOENT;
	struct find_job *j = calloc(1, sizeof(*j));
	if (j == NULL || (j->alias = strdup(alias)) == NULL || upstream_tc_copy(&j->tc, tc) != 0) {
		if (j != NULL) {
			free(j->alias);
			upstream_tc_free(&j->tc);
		}
		free(j);
		return -ENOMEM;
	}
	j->d = d;
	j->done = done;
	j->arg = arg;
	if (kilnd_work(d, POOL_UP_ALIAS, find_work, find_done, j) != 0) {
		free(j->alias);
		upstream_tc_free(&j->tc);
		free(j);
		return -EAGAIN;
	}
	return 0;
}
