/*
 * The thread-pool side of a build: creating the private build directory,
 * reading the compiler's dependency files, hashing the headers, publishing
 * the artifact crash-safely through the store, and cleaning up. Nothing here
 * runs on the loop thread except the completion callbacks.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "pch.h"
#include "publish.h"
#include "flight.h"
#include "flight_int.h"
#include "deps.h"
#include "claims.h"
#include "kilnd.h"
#include "log.h"
#include "table.h"
#include "util.h"
#include "verify.h"
#include "thread.h"


/* The build directory's name within tmp/ (b->dir is its path). */
static const char *dir_name(const char *dir)
{
	const char *slash = strrchr(dir, '/');
	return slash != NULL ? slash + 1 : dir;
}

/* Makes a new directory "b-<rkey>-<random>" in tmp/ through its held
 * descriptor; the name into name (cap bytes). 0 or -errno. */
static int make_build_dir(int tmp, const char *rkey, char *name, size_t cap)
{
	for (int tries = 0; tries < 64; tries++) {
		uint32_t r;
		if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
			return -errno;
		snprintf(name, cap, "b-%.16s-%08x", rkey, (unsigned)r);
		if (mkdirat(tmp, name, 0700) == 0)
			return 0;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

/* Thread pool: the build directory with src/ holding the sources and out/.
 * Made and filled through tmp/'s descriptor; its path goes to the compiler. */
void prepare_work(void *arg)
{
	ASSERT_POOL();
	static const char *const subs[] = { "src", "out", "tmp", "trace" };
	struct flight *b = arg;
	struct store *store = b->d->store;
	int tmp = store_tmp_fd(store);
	char *tmpdir = store_tmp_dir(store), name[64], rel[4200];
	int rc = tmpdir != NULL ? make_build_dir(tmp, b->in.rkey, name, sizeof(name)) : -ENOMEM;
	if (rc == 0 && asprintf(&b->dir, "%s/%s", tmpdir, name) < 0) {
		b->dir = NULL;
		rc = -ENOMEM;
	}
	free(tmpdir);
	if (rc != 0) {
		flight_fail(b, ERR_IO, "cannot create a build directory in the cache: %s", strerror(-rc));
		return;
	}
	for (size_t i = 0; rc == 0 && i < sizeof(subs) / sizeof(subs[0]); i++) {
		snprintf(rel, sizeof(rel), "%s/%s", name, subs[i]);
		if (mkdirat(tmp, rel, 0700) != 0)
			rc = -errno;
	}
	for (size_t i = 0; rc == 0 && i < b->in.nsrc; i++) {
		/* Sources in folders ("src/cpu/p.cpp") get them; names were
		 * checked: relative, no "..", no file inside another. */
		snprintf(rel, sizeof(rel), "%s/src", name);
		rc = util_mkdir_parents_at(tmp, rel, b->in.src[i].name, 0700);
		if (rc != 0)
			break;
		snprintf(rel, sizeof(rel), "%s/src/%s", name, b->in.src[i].name);
		int fd = openat(tmp, rel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
		rc = fd >= 0 ? util_write_all(fd, b->in.src[i].text, b->in.src[i].len) : -errno;
		if (fd >= 0 && close(fd) != 0 && rc == 0)
			rc = -errno;
	}
	if (rc == 0)
		rc = pch_place(store, name, &b->in);
	if (rc != 0)
		flight_fail(b, ERR_IO, "cannot write the build directory %s: %s", b->dir, strerror(-rc));
}

static char *json_strings(char *const *v, size_t n, size_t stride)
{
	cJSON *a = cJSON_CreateArray();
	for (size_t i = 0; a != NULL && i < n; i++) {
		const char *s = *(char *const *)((const char *)v + i * stride);
		cJSON_AddItemToArray(a, cJSON_CreateString(s));
	}
	char *out = a != NULL ? cJSON_PrintUnformatted(a) : NULL;
	cJSON_Delete(a);
	return out;
}

static int fill_entry(struct flight *b)
{
	struct store_entry *e = &b->entry;
	const struct msg_request *r = &b->in.req;
	char rel[4200];
	struct stat st;
	int tmp = store_tmp_fd(b->d->store);
	snprintf(rel, sizeof(rel), "%s/out/artifact.%s", dir_name(b->dir), store_output_ext(r->output));
	if (fstatat(tmp, rel, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || util_sha256_file_at(tmp, rel, e->sha256) != 0)
		return -EIO;
	e->has_sha256 = true;
	e->key_format = KEY_FORMAT_VERSION;
	key_artifact(b->in.rkey, e->deps, e->ndeps, e->key);
	memcpy(e->rkey, b->in.rkey, sizeof(e->rkey));
	e->size = (uint64_t)st.st_size;
	e->created = e->last_used = util_wall_s();
	e->uses = 0;
	e->build_ms = (util_now_ns() - b->start_ns) / 1000000;
	return publish_names(e, &b->in);
}

int publish_names(struct store_entry *e, const struct build_input *in)
{
	const struct msg_request *r = &in->req;
	e->alias = r->alias != NULL ? strdup(r->alias) : NULL;
	e->label = r->label != NULL ? strdup(r->label) : NULL;
	e->toolchain = strdup(in->tc->name);
	e->output = strdup(r->output);
	e->args_json = json_strings(r->args, r->nargs, sizeof(char *));
	e->sources_json = json_strings(&r->sources[0].name, r->nsources, sizeof(struct msg_source));
	if (e->toolchain == NULL || e->output == NULL || e->args_json == NULL || e->sources_json == NULL)
		return -ENOMEM;
	return 0;
}

/* The log of the last build of key, replaced atomically. */
void publish_write_log(struct kilnd *d, const char *key, const char *log, size_t len)
{
	char name[80];

	snprintf(name, sizeof(name), "%.64s.log", key);
	util_replace_file_at(store_logs_fd(d->store), name, log != NULL ? log : "",
			     log != NULL ? len : 0, false);
}

/* logs/failed/alias-<SHA-256 of the alias>.failed: the request key of the
 * alias's last build when it failed (kiln log ALIAS), removed when one
 * succeeds (also from logs/, where kiln 0.1 kept it). */
static void failed_alias_name(const char *alias, char name[96])
{
	uint8_t digest[32];
	char hex[65];
	util_sha256(alias, strlen(alias), digest);
	util_hex(digest, sizeof(digest), hex);
	snprintf(name, 96, "alias-%s.failed", hex);
}

static void publish_failed_alias(struct kilnd *d, const char *alias, const char *rkey)
{
	char name[96], text[600];
	failed_alias_name(alias, name);
	if (rkey == NULL) {
		unlinkat(store_failed_fd(d->store), name, 0);
		unlinkat(store_logs_fd(d->store), name, 0);
		return;
	}
	int n = snprintf(text, sizeof(text), "%.64s\n%s\n", rkey, alias);
	util_replace_file_at(store_failed_fd(d->store), name, text,
			     (size_t)n < sizeof(text) ? (size_t)n : sizeof(text) - 1, false);
	unlinkat(store_logs_fd(d->store), name, 0);   /* kiln 0.1's, now out of date */
}

/*
 * The build read a pseudo-file that decides what it makes (pseudo.h): its
 * artifact goes to the clients waiting for it, through a descriptor of the
 * file in the build directory, and nowhere else: no entry, no alias, no
 * log. Its key is its own (the content's digest in it), so that a client
 * never takes it for a cached entry's or for another such build's.
 */
static void serve_unindexed(struct flight *b, const char *why)
{
	char rel[4200], hex[65], text[160];
	uint8_t digest[32];
	int tmp = store_tmp_fd(b->d->store);
	int rc = fill_entry(b);
	if (rc != 0) {
		flight_fail(b, ERR_IO, "cannot read the build's outputs: %s", strerror(-rc));
		return;
	}
	util_hex(b->entry.sha256, 32, hex);
	snprintf(text, sizeof(text), "kiln-uncacheable\n%.64s\n%s", b->entry.key, hex);
	util_sha256(text, strlen(text), digest);
	util_hex(digest, sizeof(digest), b->entry.key);
	snprintf(rel, sizeof(rel), "%s/out/artifact.%s", dir_name(b->dir),
		 store_output_ext(b->entry.output));
	fchmodat(tmp, rel, 0444, 0);
	b->fd = openat(tmp, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (b->fd < 0 || (b->uncacheable = strdup(why)) == NULL ||
	    asprintf(&b->obj_path, "%s/%s", b->dir, strchr(rel, '/') + 1) < 0) {
		b->obj_path = NULL;
		flight_fail(b, ERR_IO, "cannot open the artifact: %s", strerror(errno));
		return;
	}
	/* The descriptor keeps the file; the clients load through it. */
	store_rm_tree_at(tmp, dir_name(b->dir));
	free(b->dir);
	b->dir = NULL;
}

static void publish_work(void *arg)
{
	ASSERT_POOL();
	struct flight *b = arg;
	char path[4096], why[768];
	const struct deps_build db = { .dir = b->dir, .token = b->trace_token,
				       .exec_helper = b->d->cfg->exec_helper, .rkey = b->in.rkey,
				       .start_wall_ns = b->start_wall_ns,
				       .cpu_in_key = key_args_native(b->in.req.args, b->in.req.nargs) };
	uint64_t t0 = util_now_ns();
	int rc = deps_collect(&db, &b->entry, why, sizeof(why));
	uint64_t t_deps = util_now_ns();
	if (rc == DEPS_UNCACHEABLE || rc == DEPS_UNOBSERVED) {
		b->unobserved = rc == DEPS_UNOBSERVED;
		serve_unindexed(b, why);
		return;
	}
	if (rc == 0 && (rc = pch_merge_deps(&b->in, &b->entry, why, sizeof(why))) == -EAGAIN) {
		/* Built once more, without the .gch (still with the headers). */
		pch_drop(&b->in);
		b->in.pch_refused = true;
	}
	if (rc == -EAGAIN) {
		flight_fail(b, ERR_INPUTS_CHANGED, "an input changed while the build ran: %s", why);
		return;
	}
	if (rc == -EBADMSG) {
		flight_fail(b, ERR_BUILD_FAILED, "%s; an argument made the toolchain write there, so "
			   "what it read is unknown and nothing is recorded", why);
		return;
	}
	if (rc == 0)
		rc = fill_entry(b);
	if (rc != 0) {
		flight_fail(b, ERR_IO, "cannot read the build's outputs: %s", strerror(-rc));
		return;
	}
	uint64_t t_fill = util_now_ns();
	publish_write_log(b->d, b->entry.key, b->log, b->loglen);
	if (b->in.req.alias != NULL)
		publish_failed_alias(b->d, b->in.req.alias, NULL);
	struct store *store = b->d->store;
	snprintf(path, sizeof(path), "%s/out/artifact.%s", dir_name(b->dir),
		 store_output_ext(b->entry.output));
	rc = store_publish_open(store, &b->entry, store_tmp_fd(store), path, &b->fd);
	if (rc != 0) {
		flight_fail(b, ERR_IO, "cannot publish the artifact into the cache: %s",
			   strerror(-rc));
		return;
	}
	b->obj_path = store_object_path(store, b->entry.key, b->entry.output);
	/* The build directory is removed after the replies (flight.c). */
	log_debug("build %.16s: published in %.1f ms (dependencies %.1f, outputs %.1f, log, "
		  "files and row %.1f)", b->in.rkey, (double)(util_now_ns() - t0) / 1e6,
		  (double)(t_deps - t0) / 1e6, (double)(t_fill - t_deps) / 1e6,
		  (double)(util_now_ns() - t_fill) / 1e6);
}

static void on_published(void *arg, int status)
{
	struct flight *b = arg;
	b->in_pool = false;
	if (status != 0)
		flight_fail(b, ERR_INTERNAL, "the publish did not run: %s", uv_strerror(status));
	if (b->d->stopping && b->err_code == ERR_NONE)
		log_debug("build %.16s published during shutdown", b->in.rkey);
	/* publish_work hashed the object it placed (fill_entry, store_publish). */
	if (b->err_code == ERR_NONE && b->fd >= 0 && b->uncacheable == NULL)
		verify_record(b->d, b->entry.key, b->fd);
	flight_published(b);
}

void publish_start(struct flight *b)
{
	b->in_pool = true;
	if (kilnd_work(b->d, POOL_PUBLISH, publish_work, on_published, b) != 0) {
		b->in_pool = false;
		flight_fail(b, ERR_INTERNAL, KILND_WORK_REFUSED);
		flight_published(b);
	}
}

struct cleanup_job {
	struct kilnd *d;
	char *dir;
	char rkey[65];
	char *alias;     /* of a failed build: kiln log ALIAS finds its log */
	char *log;
	size_t loglen;
};

static void cleanup_work(void *arg)
{
	struct cleanup_job *j = arg;
	/* A failed build keeps its output under the request key for `kiln log`,
	 * in logs/failed/ (pruned by age and count: store_prune_failed). */
	if (j->log != NULL) {
		char name[80];
		snprintf(name, sizeof(name), "%.64s.log", j->rkey);
		util_replace_file_at(store_failed_fd(j->d->store), name, j->log, j->loglen, false);
		unlinkat(store_logs_fd(j->d->store), name, 0);   /* kiln 0.1's place */
	}
	if (j->log != NULL && j->alias != NULL)
		publish_failed_alias(j->d, j->alias, j->rkey);
	store_rm_tree_at(store_tmp_fd(j->d->store), dir_name(j->dir));
}

static void cleanup_done(void *arg, int status)
{
	struct cleanup_job *j = arg;
	/* Not run: the directory stays in tmp/, which the next start empties. */
	(void)status;
	free(j->dir);
	free(j->log);
	free(j->alias);
	free(j);
}

void publish_cleanup(struct kilnd *d, struct flight *b)
{
	struct cleanup_job *j = calloc(1, sizeof(*j));
	if (j == NULL)
		return;
	j->d = d;
	j->dir = b->dir;
	b->dir = NULL;
	memcpy(j->rkey, b->in.rkey, sizeof(j->rkey));
	if (b->err_code == ERR_BUILD_FAILED || b->err_code == ERR_BUILD_TIMEOUT) {
		j->log = b->log;
		j->loglen = b->loglen;
		j->alias = b->in.req.alias != NULL ? strdup(b->in.req.alias) : NULL;
		b->log = NULL;
		b->loglen = b->logcap = 0;
	}
	if (kilnd_work(d, POOL_CLEANUP, cleanup_work, cleanup_done, j) != 0)
		cleanup_done(j, UV_ECANCELED);
}

