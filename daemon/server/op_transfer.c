/*
 * export and import: entries moved between caches through a directory in
 * the upstream tier's layout (upstream_fs.h), for example to fill compute
 * nodes' caches from a login node. Export publishes entries there as a node
 * publishes to its upstream tier; import takes every entry that fits this
 * node exactly as an upstream hit is taken: each dependency hashed here,
 * the artifact key recomputed, the object's size and SHA-256 checked while
 * it is copied into the cache. An entry built by another compiler or
 * against other headers is skipped (its request key would never be asked
 * here, or its dependencies differ). Both run on the thread pool.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flight.h"
#include "publish.h"
#include "key.h"
#include "kilnd.h"
#include "named.h"
#include "log.h"
#include "recheck.h"
#include "msg.h"
#include "server.h"
#include "ops.h"
#include "upstream_fs.h"
#include "util.h"

static const char *const outputs[] = { "shared", "cubin", "fatbin", "ptx" };

struct transfer_job {
	struct conn *c;
	enum msg_op op;
	uint64_t id;
	char *dir;
	struct store_entry *list;   /* export: the entries, with their dependencies */
	size_t n;
	uint64_t done, kept, skipped, bad, aliases;
	/* The identity of the toolchain last asked for (tc_identity). */
	char *tc_name;
	uint8_t tc_id[32];
	bool tc_known;
	int rc;
	char err[512];
};

/*
 * Every entry with its dependencies, for export. Read on the pool through a
 * read-only connection of its own (the index is in WAL mode, so it reads a
 * snapshot beside the daemon's), so that a large cache does not hold up the
 * loop.
 */
static int export_entries(struct kilnd *d, struct transfer_job *j)
{
	struct store_entry *brief = NULL;
	struct store *ro = NULL;
	size_t n = 0;
	int rc = store_open(d->cfg->cache_dir, STORE_READONLY, &ro, j->err, sizeof(j->err));
	if (rc == 0)
		rc = store_list(ro, &brief, &n);
	if (rc == 0 && (j->list = calloc(n ? n : 1, sizeof(*j->list))) == NULL)
		rc = -ENOMEM;
	for (size_t i = 0; rc == 0 && i < n; i++)
		if (store_get(ro, brief[i].key, &j->list[j->n]) == 0)
			j->n++;
	store_entries_free(brief, n);
	store_close(ro);
	if (rc != 0 && j->err[0] == '\0')
		snprintf(j->err, sizeof(j->err), "cannot read the index: %s", strerror(-rc));
	return rc;
}

/*
 * The identity digest of the toolchain an entry or record names, as this
 * node has it (identified on the pool for one named by path); the last
 * one is remembered, since an export's entries are mostly one toolchain's.
 * On success *tc (conf, or owned: the caller frees it) for further checks.
 */
static bool tc_identity(struct transfer_job *j, const char *name, const struct toolchain **tc,
			struct toolchain **owned)
{
	char why[512];
	*owned = NULL;
	if (named_of_entry(j->c->d, name, tc, owned, why, sizeof(why)) != 0) {
		log_debug("%s: toolchain %s: %s", j->op == OP_EXPORT ? "export" : "import", name, why);
		return false;
	}
	if (*owned != NULL)
		*tc = *owned;
	return true;
}

static void tc_owned_free(struct toolchain *owned)
{
	if (owned != NULL) {
		key_toolchain_fini(owned);
		free(owned);
	}
}

/* The alias record of an exported entry (its alias in the index), so that
 * an import answers lookups by that alias (docs/design.md, "Upstream
 * tier", "Aliases"). */
static void export_alias(struct transfer_job *j, struct up_dirs *u, const struct store_entry *e)
{
	const struct toolchain *tc = NULL;
	struct toolchain *owned = NULL;
	if (e->alias == NULL || e->toolchain == NULL || !upfs_has_entry(u, e->rkey, e->key))
		return;
	if (j->tc_name == NULL || strcmp(j->tc_name, e->toolchain) != 0) {
		free(j->tc_name);
		j->tc_name = strdup(e->toolchain);
		j->tc_known = j->tc_name != NULL && tc_identity(j, e->toolchain, &tc, &owned);
		if (j->tc_known)
			memcpy(j->tc_id, tc->id, 32);
		tc_owned_free(owned);
	}
	if (!j->tc_known)
		return;
	char *data = NULL;
	if (store_alias_data(j->c->d->store, e->alias, e->key, &data) != 0)
		data = NULL;
	struct up_alias rec = { .alias = e->alias, .output = e->output, .toolchain = e->toolchain,
				.data = data };
	memcpy(rec.key, e->key, sizeof(rec.key));
	memcpy(rec.rkey, e->rkey, sizeof(rec.rkey));
	memcpy(rec.tc_id, j->tc_id, 32);
	if (upfs_alias_publish(u, &rec) == 0)
		j->aliases++;
	else
		log_warn("export: cannot write the alias record of %.16s", e->key);
	free(data);
}

static void export_work(struct transfer_job *j, struct up_dirs *u)
{
	struct kilnd *d = j->c->d;
	for (size_t i = 0; i < j->n; i++) {
		struct store_entry *e = &j->list[i];
		/* Precompiled headers are node-local (docs/pch.md). */
		if (strcmp(e->output, "pch") == 0)
			continue;
		char *obj = store_object_path(d->store, e->key, e->output);
		int rc = obj != NULL ? upfs_publish(u, e, obj, NULL, 0) : -ENOMEM;
		free(obj);
		if (rc >= 0)
			export_alias(j, u, e);
		if (rc == 1)
			j->done++;
		else if (rc == 0)
			j->kept++;
		else
			j->skipped++;
	}
}

/* Like a put: this node's toolchain observes the request and the
 * artifact loads (recheck.h); false, logged, when not. */
static bool import_checked(struct kilnd *d, const struct store_entry *e, const char *tmp)
{
	char why[768];
	struct build_input *in = recheck_input_of_entry(d, e, why, sizeof(why));
	bool ok = in != NULL && recheck_peer(d, in, e->deps, e->ndeps, tmp, why, sizeof(why)) == 0;
	if (!ok)
		log_warn("import: %.16s not taken: %s", e->key, why);
	recheck_input_free(in);
	return ok;
}

/* Whether an entry of rkey in the directory is in the cache already (its
 * object, of any output kind, is there): then nothing is copied. */
static bool already_here(struct kilnd *d, struct up_dirs *u, const char *rkey)
{
	char dir[4200];
	snprintf(dir, sizeof(dir), "%s/%.2s/%s", u->entries, rkey, rkey);
	DIR *dp = opendir(dir);
	struct dirent *de;
	bool here = false;
	while (!here && dp != NULL && (de = readdir(dp)) != NULL) {
		char key[65];
		if (strlen(de->d_name) != 69 || strcmp(de->d_name + 64, ".json") != 0)
			continue;
		snprintf(key, sizeof(key), "%.64s", de->d_name);
		for (size_t o = 0; !here && o < sizeof(outputs) / sizeof(outputs[0]); o++) {
			int fd = store_object_open(d->store, key, outputs[o]);
			here = fd >= 0;
			if (fd >= 0)
				close(fd);
		}
	}
	if (dp != NULL)
		closedir(dp);
	return here;
}

/* Takes rkey's entry from the directory into the cache, if one fits. */
static void import_rkey(struct transfer_job *j, struct up_dirs *u, const char *rkey)
{
	struct kilnd *d = j->c->d;
	if (already_here(d, u, rkey)) {
		/* Nothing copied, nothing of the cached entry (its pin, its
		 * names) changed. */
		j->kept++;
		return;
	}
	char *tmpdir = store_tmp_dir(d->store), tmp[4200];
	if (tmpdir == NULL)
		return;
	snprintf(tmp, sizeof(tmp), "%s/import-%.16s-%d", tmpdir, rkey, (int)gettid());
	free(tmpdir);
	for (size_t o = 0; o < sizeof(outputs) / sizeof(outputs[0]); o++) {
		struct store_entry e = { 0 };
		char *log = NULL;
		unsigned bad = 0;
		e.output = strdup(outputs[o]);
		e.toolchain = strdup("imported");
		int rc = e.output != NULL && e.toolchain != NULL ?
			 upfs_find(u, rkey, outputs[o], tmp, &e, &log, &bad) : -ENOMEM;
		j->bad += bad;
		if (rc == 1 && !import_checked(d, &e, tmp)) {
			unlink(tmp);
			j->skipped++;
			free(log);
			store_entry_free(&e);
			return;
		}
		if (rc == 1) {
			e.created = e.last_used = util_wall_s();
			if (log != NULL)
				publish_write_log(d, e.key, log, strlen(log));
			rc = store_publish(d->store, &e, AT_FDCWD, tmp);
			if (rc == 0)
				j->done++;
			else {
				unlink(tmp);
				j->skipped++;
				log_warn("import: cannot publish %.16s: %s", e.key, strerror(-rc));
			}
		}
		free(log);
		store_entry_free(&e);
		if (rc == 1 || rc == 0)
			return;
	}
	j->skipped++;
}

/*
 * One alias's records: the newest whose entry is in the cache now (imported,
 * or there before) under its request key, built by a toolchain of the
 * record's name and identity here. The alias is set only where this cache
 * has none: a local alias is this node's own, newer word.
 */
static void import_alias(struct transfer_job *j, struct up_dirs *u, const char *hex)
{
	struct kilnd *d = j->c->d;
	struct up_alias *v = NULL;
	size_t n = 0;
	unsigned bad = 0;
	upfs_alias_records(u, hex, NULL, &v, &n, &bad);
	j->bad += bad;
	for (size_t i = 0; i < n; i++) {
		struct store_entry e = { 0 }, cur = { 0 };
		const struct toolchain *tc = NULL;
		struct toolchain *owned = NULL;
		bool fits = store_get_any_thread(d->store, v[i].key, &e) == 0 && strcmp(e.rkey, v[i].rkey) == 0 &&
			    tc_identity(j, v[i].toolchain, &tc, &owned) &&
			    memcmp(tc->id, v[i].tc_id, 32) == 0 && named_built_by(&e, tc);
		tc_owned_free(owned);
		store_entry_free(&e);
		if (!fits)
			continue;
		if (store_get_by_alias_any_thread(d->store, v[i].alias, &cur) != 0 &&
		    store_set_alias_data(d->store, v[i].alias, v[i].key, v[i].data) == 0)
			j->aliases++;
		store_entry_free(&cur);
		break;
	}
	for (size_t i = 0; i < n; i++)
		upfs_alias_free(&v[i]);
	free(v);
}

/* Walks aliases/<2 hex>/<sha256>/ of the directory (none: an export of an
 * older kiln). */
static void transfer_import_aliases(struct transfer_job *j, struct up_dirs *u)
{
	DIR *top = opendir(u->aliases);
	struct dirent *a, *b;
	while (top != NULL && (a = readdir(top)) != NULL) {
		char sub[4200];
		if (a->d_name[0] == '.' || strlen(a->d_name) != 2)
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", u->aliases, a->d_name);
		DIR *mid = opendir(sub);
		while (mid != NULL && (b = readdir(mid)) != NULL)
			if (strlen(b->d_name) == 64 && strspn(b->d_name, "0123456789abcdef") == 64 &&
			    strncmp(b->d_name, a->d_name, 2) == 0)
				import_alias(j, u, b->d_name);
		if (mid != NULL)
			closedir(mid);
	}
	if (top != NULL)
		closedir(top);
}

/* Walks entries/<2 hex>/<rkey>/ of the directory. */
static void transfer_import_work(struct transfer_job *j, struct up_dirs *u)
{
	DIR *top = opendir(u->entries);
	struct dirent *a, *b;
	if (top == NULL) {
		j->rc = -errno;
		snprintf(j->err, sizeof(j->err), "cannot read %s: %s", u->entries, strerror(errno));
		return;
	}
	while ((a = readdir(top)) != NULL) {
		char sub[4200];
		if (a->d_name[0] == '.' || strlen(a->d_name) != 2)
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", u->entries, a->d_name);
		DIR *mid = opendir(sub);
		while (mid != NULL && (b = readdir(mid)) != NULL)
			if (strlen(b->d_name) == 64 && strspn(b->d_name, "0123456789abcdef") == 64)
				import_rkey(j, u, b->d_name);
		if (mid != NULL)
			closedir(mid);
	}
	closedir(top);
}

static void transfer_work(void *arg)
{
	struct transfer_job *j = arg;
	struct up_dirs u = { 0 };
	/* The same checks as --upstream: the directory must be the user's and
	 * private, since what is imported is loaded as code. */
	j->rc = upfs_open(&u, j->dir, 3600, j->op == OP_IMPORT, j->err, sizeof(j->err));
	if (j->rc != 0) {
		upfs_close(&u);   /* what it allocated before refusing */
		return;
	}
	if (j->op == OP_EXPORT) {
		j->rc = export_entries(j->c->d, j);
		if (j->rc == 0)
			export_work(j, &u);
	} else {
		transfer_import_work(j, &u);
		if (j->rc == 0)
			transfer_import_aliases(j, &u);
	}
	upfs_close(&u);
}

static void transfer_done(void *arg, int status)
{
	struct transfer_job *j = arg;
	struct conn *c = j->c;
	struct kilnd *d = c->d;
	if (status != 0) {
		j->rc = status;
		snprintf(j->err, sizeof(j->err), "the %s did not run: %s",
			 j->op == OP_IMPORT ? "import" : "export", uv_strerror(status));
	}
	if (j->op == OP_IMPORT) {
		kilnd_refresh_totals(d);
		d->c.imports += j->done;
	}
	if (j->rc != 0) {
		conn_reply_error(c, j->id, ERR_IO, "dir", "%s", j->err[0] != '\0' ? j->err : strerror(-j->rc));
	} else {
		cJSON *r = msg_ok_reply(j->id);
		if (r != NULL) {
			cJSON_AddStringToObject(r, "dir", j->dir);
			cJSON_AddNumberToObject(r, j->op == OP_EXPORT ? "exported" : "imported",
						(double)j->done);
			cJSON_AddNumberToObject(r, "kept", (double)j->kept);
			cJSON_AddNumberToObject(r, "skipped", (double)j->skipped);
			cJSON_AddNumberToObject(r, "damaged", (double)j->bad);
			cJSON_AddNumberToObject(r, "aliases", (double)j->aliases);
			conn_reply(c, r, -1);
		} else {
			conn_reply_error(c, j->id, ERR_INTERNAL, NULL, "out of memory");
		}
		log_info("%s %s: %llu entries, %llu kept, %llu skipped, %llu damaged",
			 j->op == OP_EXPORT ? "exported to" : "imported from", j->dir,
			 (unsigned long long)j->done, (unsigned long long)j->kept,
			 (unsigned long long)j->skipped, (unsigned long long)j->bad);
	}
	store_entries_free(j->list, j->n);
	free(j->dir);
	free(j->tc_name);
	conn_unref(c);
	free(j);
}

void op_transfer(struct conn *c, struct msg_request *req)
{
	struct transfer_job *j = calloc(1, sizeof(*j));
	if (j == NULL || (j->dir = strdup(req->dir)) == NULL) {
		free(j);
		conn_reply_error(c, req->id, ERR_INTERNAL, NULL, "cannot %s: out of memory",
				 msg_op_name(req->op));
		return;
	}
	j->c = c;
	j->op = req->op;
	j->id = req->id;
	if (conn_queue_work(c, req->id, POOL_TRANSFER, transfer_work, transfer_done, j) != 0) {
		free(j->dir);
		free(j);
	}
}
