/*
 * put: an artifact built on another node, imported into this cache. The
 * request names the program as a get does, plus the artifact's key, size and
 * SHA-256 and the dependencies (headers, libraries) it was built against, and
 * carries the artifact as a descriptor. Nothing is taken on trust:
 *
 *   1. the request key is computed here, with this node's toolchain identity;
 *   2. every dependency is hashed here and must match the recorded digest
 *      (another node's header is only good if this node has the same bytes);
 *   3. the artifact key from (1) and (2) must equal the key that was sent, so
 *      an artifact can only enter the cache under the key this node computes;
 *   4. the bytes are copied into tmp/ while hashing, and size and SHA-256 must
 *      match before the copy is published like a local build.
 *
 * A mismatch in 1-3 is the error "mismatch" (the sender then builds it on
 * this node); in 4 it is "mismatch" too, and nothing is published.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flight.h"
#include "alias.h"
#include "publish.h"
#include "deps.h"
#include "keying.h"
#include "hit.h"
#include "ops.h"
#include "kilnd.h"
#include "log.h"
#include "recheck.h"
#include "server.h"
#include "util.h"
#include "thread.h"

struct import_job {
	struct conn *c;
	struct build_input *in;
	int fd;
	struct store_entry entry;
	struct msg_error err;
};

static void import_free(struct import_job *j)
{
	if (j->fd >= 0)
		close(j->fd);
	store_entry_free(&j->entry);
	build_input_free(j->in);
	free(j->in);
	free(j);
}

/* Checks the dependencies against this node's files and fills entry.deps. */
static int import_deps(struct import_job *j)
{
	const struct msg_request *r = &j->in->req;
	struct store_entry *e = &j->entry;
	if (r->ndeps > 0 && (e->deps = calloc(r->ndeps, sizeof(*e->deps))) == NULL)
		return msg_error_set(&j->err, ERR_INTERNAL, NULL, "out of memory");
	char why[512];
	for (size_t i = 0; i < r->ndeps; i++) {
		struct store_dep *dep = &e->deps[i];
		if ((dep->path = strdup(r->deps[i].path)) == NULL)
			return msg_error_set(&j->err, ERR_INTERNAL, NULL, "out of memory");
		e->ndeps = i + 1;
		dep->kind = (uint8_t)r->deps[i].kind;
		dep->mode = r->deps[i].mode;
		memcpy(dep->digest, r->deps[i].digest, 32);
		if (deps_check_here(dep, why, sizeof(why)) != 0)
			return msg_error_set(&j->err, ERR_MISMATCH, "deps", "%s", why);
	}
	return 0;
}

/* Copies the artifact into a new file at tmp while hashing it; checks size
 * and digest. */
static int import_copy(struct import_job *j, const char *tmp)
{
	const struct msg_request *r = &j->in->req;
	struct stat st;
	if (fstat(j->fd, &st) != 0 || !S_ISREG(st.st_mode))
		return msg_error_set(&j->err, ERR_BAD_REQUEST, "fd",
				     "the descriptor sent with put is not a regular file");
	if ((uint64_t)st.st_size != (uint64_t)r->art_size)
		return msg_error_set(&j->err, ERR_MISMATCH, "size",
				     "the artifact has %lld bytes, the request says %lld",
				     (long long)st.st_size, (long long)r->art_size);
	int out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (out < 0)
		return msg_error_set(&j->err, ERR_IO, NULL, "cannot create %s: %s", tmp, strerror(errno));
	uint8_t digest[32];
	uint64_t off = 0;
	int rc = util_copy_sha256(j->fd, out, &off, digest);
	if (close(out) != 0 && rc == 0)
		rc = -errno;
	if (rc != 0)
		return msg_error_set(&j->err, ERR_IO, NULL,
				     "cannot copy the artifact into the cache: %s", strerror(-rc));
	if (off != (uint64_t)r->art_size || memcmp(digest, r->art_digest, 32) != 0)
		return msg_error_set(&j->err, ERR_MISMATCH, "sha256",
				     "the artifact's bytes do not match its size and SHA-256 (%llu bytes read)",
				     (unsigned long long)off);
	j->entry.size = off;
	memcpy(j->entry.sha256, digest, 32);
	j->entry.has_sha256 = true;
	return 0;
}

/* Thread pool: the checks, the copy and the publish. */
static void import_work(void *arg)
{
	ASSERT_POOL();
	struct import_job *j = arg;
	struct build_input *in = j->in;
	struct kilnd *d = j->c->d;
	struct store_entry *e = &j->entry;
	if (import_deps(j) != 0)
		return;
	key_artifact(in->rkey, e->deps, e->ndeps, e->key);
	if (strcmp(e->key, in->req.key) != 0) {
		msg_error_set(&j->err, ERR_MISMATCH, "key",
			      "this node computes key %.16s for the request, not %.16s: its "
			      "compiler, environment or CPU differ; build it here instead",
			      e->key, in->req.key);
		return;
	}
	char *tmpdir = store_tmp_dir(d->store);
	char tmp[4200];
	if (tmpdir == NULL) {
		msg_error_set(&j->err, ERR_INTERNAL, NULL, "out of memory");
		return;
	}
	snprintf(tmp, sizeof(tmp), "%s/put-%.16s-%d", tmpdir, e->key, (int)gettid());
	free(tmpdir);
	unlink(tmp);
	if (import_copy(j, tmp) != 0) {
		unlink(tmp);
		return;
	}
	/* The sender's list is a hint: this node observes its own toolchain. */
	char why[768];
	if (recheck_peer(d, in, e->deps, e->ndeps, tmp, why, sizeof(why)) != 0) {
		unlink(tmp);
		msg_error_set(&j->err, ERR_MISMATCH, "deps", "%s", why);
		return;
	}
	e->deps_source = STORE_DEPS_OBSERVED;
	memcpy(e->rkey, in->rkey, sizeof(e->rkey));
	e->created = e->last_used = util_wall_s();
	e->key_format = KEY_FORMAT_VERSION;   /* keyed by this kilnd's request key */
	e->build_ms = in->req.build_ms >= 0 ? (uint64_t)in->req.build_ms : 0;
	if (publish_names(e, in) != 0) {
		unlink(tmp);
		msg_error_set(&j->err, ERR_INTERNAL, NULL, "out of memory");
		return;
	}
	int rc = store_publish(d->store, e, AT_FDCWD, tmp);
	if (rc != 0)
		msg_error_set(&j->err, ERR_IO, NULL, "cannot publish the artifact into the cache: %s",
			      strerror(-rc));
	else if (in->req.log != NULL)
		publish_write_log(d, e->key, in->req.log, strlen(in->req.log));
}

static void put_reply(struct conn *c, uint64_t id, const char *key, bool imported)
{
	cJSON *r = msg_ok_reply(id);
	if (r == NULL)
		return;
	cJSON_AddStringToObject(r, "key", key);
	cJSON_AddBoolToObject(r, "imported", imported);
	conn_reply(c, r, -1);
}

/* The put's alias, pointed at key as a get's is (loop thread): with its
 * data, the waiters of its claim answered, and, with --upstream, its record
 * written for the other nodes (store_publish set the bare alias already). */
static void import_alias(struct kilnd *d, const struct msg_request *r, const char *key)
{
	if (r->alias != NULL)
		alias_point(d, r->alias, key, r->alias_data);
}

static void import_done(void *arg, int status)
{
	struct import_job *j = arg;
	struct conn *c = j->c;
	struct kilnd *d = c->d;
	uint64_t id = j->in->req.id;
	if (status != 0)
		msg_error_set(&j->err, ERR_INTERNAL, NULL, "the import did not run: %s",
			      uv_strerror(status));
	if (j->err.code != ERR_NONE) {
		log_info("put of %.16s refused: %s", j->in->req.key, j->err.message);
		conn_reply_error(c, id, j->err.code, j->err.field[0] != '\0' ? j->err.field : NULL,
				 "%s", j->err.message);
	} else {
		d->c.imports++;
		kilnd_refresh_totals(d);
		char sz[32];
		log_info("imported %.16s (%s, %s)", j->entry.key,
			 j->entry.label != NULL ? j->entry.label : "no label",
			 util_format_size(j->entry.size, sz, sizeof(sz)));
		import_alias(d, &j->in->req, j->entry.key);
		put_reply(c, id, j->entry.key, true);
	}
	conn_unref(c);
	import_free(j);
}

/* The entry the put names was built for the request key this node computes. */
static bool same_rkey(const struct store_entry *e, const void *rkey)
{
	return strcmp(e->rkey, rkey) == 0;
}

/* Once the request key is known (loop thread). */
static void import_keyed(struct conn *c, struct build_input *in, int fd)
{
	struct kilnd *d = c->d;
	uint64_t id = in->req.id;
	struct hit h;
	const struct hit_query q = { .key = in->req.key, .accept = same_rkey, .accept_arg = in->rkey };
	int v = hit_find(d, &q, &h);
	hit_free(&h);
	if (v == HIT_VALID) {
		/* Already here (built or imported before), inputs and object
		 * intact: nothing to copy. */
		close(fd);
		import_alias(d, &in->req, in->req.key);
		put_reply(c, id, in->req.key, false);
		build_input_free(in);
		free(in);
		return;
	}
	struct import_job *j = calloc(1, sizeof(*j));
	if (j == NULL) {
		close(fd);
		build_input_free(in);
		free(in);
		conn_reply_error(c, id, ERR_INTERNAL, NULL, "out of memory");
		return;
	}
	j->c = c;
	j->in = in;
	j->fd = fd;
	if (conn_queue_work(c, id, POOL_IMPORT, import_work, import_done, j) != 0)
		import_free(j);
}

void op_put(struct conn *c, struct msg_request *req)
{
	int fd = conn_take_fd(c);    /* admit (dispatch.c) made sure one came: OPF_FD */
	if (fd < 0) {
		conn_reply_error(c, req->id, ERR_INTERNAL, "fd", "the put's descriptor is gone");
		return;
	}
	for (size_t i = 0; i < req->nsources; i++) {
		if (req->sources[i].text != NULL) {
			c->d->c.source_texts++;
			break;
		}
	}
	keying_request(c, req, fd, import_keyed);
}
