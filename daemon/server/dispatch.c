/*
 * The operations of the protocol (docs/protocol.md). Everything here runs on
 * the loop thread; reads of the index use the store's reader connection, and
 * writes, file reads and hashing of large inputs go to the thread pool.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "args.h"
#include "build.h"
#include "flight.h"
#include "cachedir.h"
#include "claims.h"
#include "dispatch.h"
#include "entry_codec.h"
#include "fdcache.h"
#include "headers.h"
#include "hit_reply.h"
#include "lookup_op.h"
#include "import.h"
#include "keying.h"
#include "kilnd.h"
#include "msg_artifact.h"
#include "stats.h"
#include "log.h"
#include "named.h"
#include "msg.h"
#include "pch.h"
#include "server.h"
#include "settings_op.h"
#include "text_turn.h"
#include "status_op.h"
#include "upstream.h"
#include "upgrade.h"
#include "util.h"
#include "transfer.h"
#include "verify.h"
#include "verify_op.h"
#include "thread.h"

static cJSON *ok_reply(uint64_t id)
{
	cJSON *r = cJSON_CreateObject();
	if (r == NULL)
		return NULL;
	msg_add_int(r, "id", (int64_t)id);
	cJSON_AddBoolToObject(r, "ok", 1);
	return r;
}

static void send_ok(struct conn *c, cJSON *r)
{
	if (r == NULL) {
		log_error("out of memory building a reply");
		return;
	}
	conn_reply(c, r, -1);
}

#define STR_(x) #x
#define STR(x) STR_(x)

/* hello's reply after its id, ok and heartbeat members: the daemon's
 * protocol, version, pid, socket and cache, closing the object. */
static char *hello_tail_print(const struct kilnd *d)
{
	cJSON *r = cJSON_CreateObject();
	char *text = NULL;
	if (r != NULL && msg_add_int(r, "proto", KILN_PROTO_VERSION) &&
	    cJSON_AddStringToObject(r, "version", KILN_VERSION_STR) &&
	    msg_add_int(r, "pid", (int64_t)getpid()) &&
	    cJSON_AddStringToObject(r, "socket", d->cfg->socket_path) &&
	    cJSON_AddStringToObject(r, "cache_dir", d->cfg->cache_dir))
		text = cJSON_PrintUnformatted(r);
	cJSON_Delete(r);
	/* Without its opening brace: the caller writes the members before it. */
	if (text != NULL)
		memmove(text, text + 1, strlen(text));
	return text;
}

static void op_hello(struct conn *c, struct msg_request *req)
{
	struct kilnd *d = c->d;
	if (req->proto != KILN_PROTO_VERSION) {
		struct msg_error err = { .code = ERR_PROTO_MISMATCH };
		snprintf(err.message, sizeof(err.message),
			 "client speaks protocol %lld, kilnd %s speaks protocol %d",
			 (long long)req->proto, KILN_VERSION_STR, KILN_PROTO_VERSION);
		cJSON *r = msg_error_reply(req->id, &err);
		if (r != NULL)
			cJSON_AddNumberToObject(cJSON_GetObjectItem(r, "error"), "proto", KILN_PROTO_VERSION);
		send_ok(c, r);
		return;
	}
	c->hello = true;
	c->heartbeat = req->heartbeat;
	if (req->job_nodes > 0)
		upstream_job_hint(d, (long)req->job_nodes);
	/* Every fresh process's first reply: what never changes is printed
	 * once (cJSON would print each number with sprintf, check it with
	 * sscanf, and ask for the pid each time), the id and heartbeat here. */
	if (d->hello_tail == NULL && (d->hello_tail = hello_tail_print(d)) == NULL) {
		conn_reply_error(c, req->id, ERR_INTERNAL, NULL, "out of memory");
		return;
	}
	char *text = NULL;
	int len = asprintf(&text, "{\"id\":%llu,\"ok\":true,%s%s", (unsigned long long)req->id,
			   req->heartbeat ? "\"heartbeat_ms\":" STR(SERVER_HEARTBEAT_MS) "," : "",
			   d->hello_tail);
	if (len < 0) {
		conn_reply_error(c, req->id, ERR_INTERNAL, NULL, "out of memory");
		return;
	}
	conn_reply_text(c, text, (size_t)len, -1);
	free(text);
}

/* A connection waiting on a flight (build.h's waiter_ops). */
static bool conn_gone(void *ctx)
{
	return ((struct conn *)ctx)->dead;
}

static cJSON *build_error_reply(uint64_t id, const struct build_result *r)
{
	struct msg_error err = { .code = (enum msg_err)r->err_code };
	if (r->err_code == ERR_NEED_SOURCES)
		snprintf(err.field, sizeof(err.field), "sources");
	snprintf(err.message, sizeof(err.message), "%s", r->err_msg);
	cJSON *reply = msg_error_reply(id, &err);
	cJSON *eo = reply != NULL ? cJSON_GetObjectItem(reply, "error") : NULL;
	if (eo != NULL) {
		cJSON_AddStringToObject(eo, "key", r->rkey);
		if (r->err_code == ERR_BUILD_FAILED || r->err_code == ERR_BUILD_TIMEOUT)
			cJSON_AddStringToObject(eo, "log", r->log);
	}
	return reply;
}

static bool conn_done(void *ctx, uint64_t id, bool joined, const struct build_result *r)
{
	struct conn *c = ctx;
	if (r->err_code != ERR_NONE) {
		cJSON *reply = build_error_reply(id, r);
		if (reply != NULL)
			conn_reply(c, reply, -1);
		return false;
	}
	/* The same schema and printer as a hit's (proto/msg_artifact.h); a
	 * compiler that ran and said something (warnings): the caller sees it. */
	const struct msg_artifact a = {
		.id = id, .fd = true, .key = r->entry->key, .rkey = r->rkey, .path = r->path,
		.output = r->entry->output, .size = r->entry->size, .cached = r->cached,
		.joined = joined, .build_ms = r->entry->build_ms, .uncacheable = r->uncacheable,
		.log = !r->cached && r->log != NULL && r->log[0] != '\0' ? r->log : NULL,
	};
	size_t len = msg_artifact_print(&a, NULL, 0);
	char *text = malloc(len + 1);
	/* Close-on-exec, as every descriptor of kilnd's: a kiln-exec started
	 * while this reply waits to be sent must not inherit it. */
	int fd = fcntl(r->fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0 || text == NULL) {
		if (fd >= 0)
			close(fd);
		free(text);
		conn_reply_error(c, id, ERR_INTERNAL, NULL, "out of descriptors or memory");
		return false;
	}
	msg_artifact_print(&a, text, len + 1);
	conn_reply_text(c, text, len, fd);
	free(text);
	return true;
}

static void conn_release(void *ctx)
{
	conn_unref(ctx);
}

static const struct waiter_ops conn_waiter = {
	.gone = conn_gone,
	.done = conn_done,
	.release = conn_release,
};

/* Joins the flight of in's key, or starts one. */
static void join_or_start(struct conn *c, struct build_input *in)
{
	struct kilnd *d = c->d;
	uint64_t id = in->req.id;
	struct build *b = flight_find(d, in->rkey);
	int rc = 0;
	conn_ref(c);
	if (b != NULL) {
		d->c.joined++;
		rc = build_add_waiter(b, &conn_waiter, c, id, in->req.alias, in->req.alias_data, true);
		flight_join_input(b, in);
	} else {
		rc = flight_start(d, in, &conn_waiter, c, id);
	}
	if (rc != 0)
		conn_unref(c);
	free(in);
	if (rc == -ESHUTDOWN)
		conn_reply_error(c, id, ERR_SHUTTING_DOWN, NULL, "kilnd is shutting down");
	else if (rc == -EBUSY) {
		struct flight_counts fc;
		flight_counts(d, &fc);
		conn_reply_error(c, id, ERR_BUSY, NULL,
				 "%u builds wait for a compiler already (--max-queue); try again later",
				 fc.queued);
	}
	else if (rc != 0)
		conn_reply_error(c, id, ERR_INTERNAL, NULL, "out of memory");
}

static void resolve_get(struct conn *c, struct build_input *in, int fd);

/* A get waiting for a large changed input to be hashed on the pool. */
struct parked_get {
	struct conn *c;
	struct build_input *in;
	int fd;
};

static void unpark_get(void *arg)
{
	struct parked_get *p = arg;
	struct conn *c = p->c;
	if (!c->dead) {
		resolve_get(c, p->in, p->fd);
	} else {
		/* Gone while it waited: its claims ended with it, and none may
		 * be taken in its name now (the claims would outlive it). */
		build_input_free(p->in);
		free(p->in);
	}
	conn_unref(c);
	free(p);
}

/* Parks the request until the hash its check waits for is over; false
 * when it cannot (it is then answered now, the input counted as changed). */
static bool park_get(struct conn *c, struct build_input *in, int fd)
{
	struct parked_get *p = calloc(1, sizeof(*p));
	if (p == NULL)
		return false;
	*p = (struct parked_get){ .c = c, .in = in, .fd = fd };
	in->hash_waits++;
	conn_ref(c);
	if (headers_wait(c->d, unpark_get, p) == 0)
		return true;
	conn_unref(c);
	free(p);
	return false;
}

/* A probe ("build": false) that missed: not_found, with the request key,
 * which tells a client which nodes' compilers agree (libkiln-mpi groups
 * the nodes by it). */
static void probe_missed(struct conn *c, struct build_input *in)
{
	stats_miss(c->d, in->req.toolchain);
	struct msg_error err = { .code = ERR_NOT_FOUND };
	snprintf(err.message, sizeof(err.message), "no valid entry for this request");
	cJSON *r = msg_error_reply(in->req.id, &err);
	if (r != NULL) {
		cJSON_AddStringToObject(r, "rkey", in->rkey);
		conn_reply(c, r, -1);
	}
	build_input_free(in);
	free(in);
}

/* After the key is known: join a build, serve a hit, or start a build. A
 * probe ("build": false) only serves a hit. False when the get was parked
 * until an input is hashed (it comes back here), true when it was answered
 * or joined a flight, or waits for another client's text. */
static bool resolve_once(struct conn *c, struct build_input *in, int fd)
{
	struct kilnd *d = c->d;
	uint64_t id = in->req.id;
	struct build *b = in->req.no_build ? NULL : flight_find(d, in->rkey);
	if (b != NULL) {
		stats_miss(d, in->req.toolchain);
		join_or_start(c, in);
		return true;
	}
	struct store_entry *list = NULL;
	size_t n = 0;
	if (store_get_by_rkey(d->store, in->rkey, &list, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			int v = headers_check(d, &list[i]);
			if (v == HEADERS_PENDING && in->hash_waits < HASH_WAITS_MAX &&
			    park_get(c, in, fd)) {
				store_entries_free(list, n);
				return false;
			}
			int rc = v == HEADERS_VALID ? reply_hit(c, id, &list[i], in->req.alias, in->req.alias_data) : -1;
			if (rc >= 0) {
				if (rc == 0)
					stats_hit(d, in->req.toolchain);
				store_entries_free(list, n);
				build_input_free(in);
				free(in);
				return true;
			}
		}
		store_entries_free(list, n);
	}
	if (in->req.no_build) {
		probe_missed(c, in);
	} else if (in->by_digest && d->up == NULL) {
		/* Nothing to build from: a client sends the text next. */
		text_turn_need(c, in, resolve_get);
	} else {
		/* By digest (with --upstream), the miss is counted when upstream
		 * answered, unless it was need_sources after all (upstream.c). */
		if (!in->by_digest)
			stats_miss(d, in->req.toolchain);
		/* Headers to precompile: their .gch, found or set building (pch.c). */
		pch_settle(d, in);
		join_or_start(c, in);
	}
	return true;
}

/* resolve_once; a get with the text ends its key's turn (text_turn.h) once
 * it is answered or joined its flight, so the gets waiting for that text
 * look again then. */
static void resolve_get(struct conn *c, struct build_input *in, int fd)
{
	char rkey[65];
	bool text = !in->by_digest;
	memcpy(rkey, in->rkey, sizeof(rkey));
	if (resolve_once(c, in, fd) && text)
		text_turn_done(c->d, rkey);
}

static void op_get(struct conn *c, struct msg_request *req)
{
	/* The build of a claimed alias has come (from any connection: kiln.dace
	 * builds over one of its own): its producer is alive and working, so
	 * the claim's expiry starts again (daemon/claims.h). */
	if (req->alias != NULL)
		claims_progress(c->d, req->alias);
	for (size_t i = 0; i < req->nsources; i++) {
		if (req->sources[i].text != NULL) {
			c->d->c.source_texts++;
			break;
		}
	}
	keying_request(c, req, -1, resolve_get);
}


#define ADD_NUM(obj, name, v) cJSON_AddNumberToObject(obj, name, (double)(v))

static void op_list(struct conn *c, struct msg_request *req)
{
	struct kilnd *d = c->d;
	struct store_entry *list = NULL;
	size_t n = 0;
	int rc = store_list(d->store, &list, &n);
	if (rc != 0) {
		conn_reply_error(c, req->id, ERR_IO, NULL, "cannot read the index: %s", strerror(-rc));
		return;
	}
	cJSON *r = ok_reply(req->id);
	cJSON *arr = r != NULL ? cJSON_AddArrayToObject(r, "entries") : NULL;
	for (size_t i = 0; arr != NULL && i < n; i++) {
		kilnd_pending_uses(d, &list[i]);
		cJSON_AddItemToArray(arr, store_entry_json(d->store, &list[i], false));
	}
	store_entries_free(list, n);
	send_ok(c, r);
}

/* Resolves req->ref; on failure answers the request and returns non-zero. */
/* An ambiguous key prefix: the error names the entries it matches (the
 * first eight, by key) in its message and in "matches". */
static void ambiguous_ref(struct conn *c, const struct msg_request *req)
{
	char keys[8][65], list[8 * 14 + 16] = "";
	size_t n = 0;
	(void)store_keys_with_prefix(c->d->store, req->ref, keys, 8, &n);
	bool label = n == 0;
	if (label)
		(void)store_keys_with_label(c->d->store, req->ref, keys, 8, &n);
	for (size_t i = 0; i < n; i++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%.12s", i ? ", " : "",
			 keys[i]);
	struct msg_error err = { .code = ERR_AMBIGUOUS };
	snprintf(err.field, sizeof(err.field), "ref");
	snprintf(err.message, sizeof(err.message), "\"%.64s\" %s several entries (%s%s); %s",
		 req->ref, label ? "labels" : "matches", list, n == 8 ? ", ..." : "",
		 label ? "name one by its key" : "give more digits");
	cJSON *reply = msg_error_reply(req->id, &err);
	cJSON *eo = reply != NULL ? cJSON_GetObjectItem(reply, "error") : NULL;
	cJSON *arr = eo != NULL ? cJSON_AddArrayToObject(eo, "matches") : NULL;
	for (size_t i = 0; arr != NULL && i < n; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(keys[i]));
	if (reply != NULL)
		conn_reply(c, reply, -1);
	else
		conn_reply_error(c, req->id, ERR_INTERNAL, NULL, "out of memory");
}

static int resolve_ref(struct conn *c, struct msg_request *req, struct store_entry *e)
{
	int rc = store_resolve(c->d->store, req->ref, e);
	if (rc == -ENOENT && strlen(req->ref) < 4 && strspn(req->ref, "0123456789abcdefABCDEF") == strlen(req->ref))
		conn_reply_error(c, req->id, ERR_NOT_FOUND, "ref",
				 "no entry matches \"%s\" (a key prefix needs at least 4 hex digits)", req->ref);
	else if (rc == -ENOENT)
		conn_reply_error(c, req->id, ERR_NOT_FOUND, "ref", "no entry matches \"%s\"", req->ref);
	else if (rc == -ENOTUNIQ)
		ambiguous_ref(c, req);
	else if (rc != 0)
		conn_reply_error(c, req->id, ERR_IO, NULL, "cannot read the index: %s", strerror(-rc));
	return rc;
}

static void op_show(struct conn *c, struct msg_request *req)
{
	struct store_entry e = { 0 };
	if (resolve_ref(c, req, &e) != 0)
		return;
	kilnd_pending_uses(c->d, &e);
	cJSON *r = ok_reply(req->id);
	if (r != NULL)
		cJSON_AddItemToObject(r, "entry", store_entry_json(c->d->store, &e, true));
	store_entry_free(&e);
	send_ok(c, r);
}

/* remove, pin, unpin and gc write the index, so they run on the pool. */
struct write_job {
	struct conn *c;
	enum msg_op op;
	uint64_t id;
	char key[65];
	uint64_t max_size;
	bool stale;         /* gc --stale */
	void *touches;      /* gc: uses to write before choosing what to evict */
	int rc;
	uint64_t removed, freed, pinned_removed;
	uint64_t index, other;  /* gc: store_overhead after it */
	uint64_t logs_removed;  /* gc: logs of failed builds pruned */
};

static void write_work(void *arg)
{
	ASSERT_POOL();
	struct write_job *j = arg;
	struct store *s = j->c->d->store;
	switch (j->op) {
	case OP_REMOVE:
		j->rc = store_remove(s, j->key);
		break;
	case OP_PIN:
	case OP_UNPIN:
		j->rc = store_set_pinned(s, j->key, j->op == OP_PIN);
		break;
	default:
		kilnd_touches_write(j->touches);
		j->touches = NULL;
		j->rc = j->stale ? store_remove_stale(s, &j->removed, &j->freed, &j->pinned_removed)
				 : store_evict(s, j->max_size, &j->removed, &j->freed);
		/* The eviction's result stands whatever the logs' pruning does. */
		int prc = j->rc == 0 ? store_prune_failed(s, util_wall_s(), STORE_FAILED_MAX_AGE_S,
							  STORE_FAILED_MAX_FILES, &j->logs_removed)
				     : 0;
		if (prc < 0)
			log_warn("gc: cannot prune the logs of failed builds: %s", strerror(-prc));
		store_overhead(s, &j->index, &j->other);
		break;
	}
}

static void write_done(void *arg, int status)
{
	struct write_job *j = arg;
	struct conn *c = j->c;
	struct kilnd *d = c->d;
	if (status != 0)
		j->rc = status;
	if (j->op == OP_GC && status == 0)
		kilnd_set_overhead(d, j->index, j->other);
	kilnd_refresh_totals(d);
	if (j->rc == 0 && j->op == OP_GC) {
		d->c.evicted += j->removed;
		d->c.evicted_bytes += j->freed;
		upgrade_count_formats(d);
		char sz[32];
		if (j->stale && j->removed > 0)
			log_info("gc --stale: removed %llu entries of an older or unknown key format "
				 "(%llu pinned), %s", (unsigned long long)j->removed,
				 (unsigned long long)j->pinned_removed,
				 util_format_size(j->freed, sz, sizeof(sz)));
	}
	if (j->rc == -ENOENT) {
		conn_reply_error(c, j->id, ERR_NOT_FOUND, "ref", "entry %s is gone", j->key);
	} else if (j->rc != 0) {
		conn_reply_error(c, j->id, ERR_IO, NULL, "cannot update the index: %s", strerror(-j->rc));
	} else {
		cJSON *r = ok_reply(j->id);
		if (r != NULL && j->op == OP_GC) {
			ADD_NUM(r, "removed", j->removed);
			ADD_NUM(r, "freed", j->freed);
			ADD_NUM(r, "failed_logs_removed", j->logs_removed);
			if (j->stale)
				ADD_NUM(r, "pinned_removed", j->pinned_removed);
			ADD_NUM(r, "entries", d->entries);
			ADD_NUM(r, "bytes", d->bytes);
			ADD_NUM(r, "disk", d->disk.total);
		} else if (r != NULL) {
			cJSON_AddStringToObject(r, "key", j->key);
		}
		send_ok(c, r);
	}
	conn_unref(c);
	free(j);
}

static void op_write(struct conn *c, struct msg_request *req)
{
	struct write_job *j = calloc(1, sizeof(*j));
	if (j == NULL) {
		conn_reply_error(c, req->id, ERR_INTERNAL, NULL, "out of memory");
		return;
	}
	j->c = c;
	j->op = req->op;
	j->id = req->id;
	j->max_size = req->max_size >= 0 ? (uint64_t)req->max_size : c->d->cfg->max_size;
	j->stale = req->stale;
	if (req->op != OP_GC) {
		struct store_entry e = { 0 };
		if (resolve_ref(c, req, &e) != 0) {
			free(j);
			return;
		}
		memcpy(j->key, e.key, sizeof(j->key));
		store_entry_free(&e);
	} else {
		j->touches = kilnd_touches_take(c->d);
	}
	conn_ref(c);
	if (kilnd_work(c->d, POOL_WRITE, write_work, write_done, j) != 0) {
		conn_unref(c);
		kilnd_touches_write(j->touches);
		free(j);
		conn_reply_error(c, req->id, ERR_INTERNAL, NULL, "cannot queue work");
	}
}

static void op_shutdown(struct conn *c, struct msg_request *req)
{
	log_info("shutdown requested by pid %d", (int)c->pid);
	send_ok(c, ok_reply(req->id));
	kilnd_stop(c->d);
}

/* What the policy in dispatch_frame applies to an operation. */
enum {
	OPF_BEFORE_HELLO = 1 << 0,  /* allowed before hello */
	OPF_STOPPING = 1 << 1,      /* allowed while kilnd stops */
	OPF_CACHE = 1 << 2,         /* needs the cache: refused with the reason while unusable */
	OPF_ARGS = 1 << 3,          /* carries compiler arguments (code into the toolchain) */
	OPF_PENDING = 1 << 4,       /* counts against --max-pending */
	OPF_FD = 1 << 5,            /* takes a descriptor sent with it */
	OPF_READ = 1 << 6,          /* allowed to a status-only peer (root) */
};

/* The operations: one line each, the policy applied once, where it is read. */
static const struct {
	void (*run)(struct conn *c, struct msg_request *req);
	unsigned flags;
} op_table[OP__COUNT] = {
	[OP_HELLO] = { op_hello, OPF_BEFORE_HELLO | OPF_STOPPING | OPF_READ },
	[OP_GET] = { op_get, OPF_CACHE | OPF_ARGS | OPF_PENDING },
	[OP_LOOKUP] = { op_lookup, OPF_CACHE },
	[OP_PUT] = { op_put, OPF_CACHE | OPF_ARGS | OPF_PENDING | OPF_FD },
	[OP_STATUS] = { op_status, OPF_STOPPING | OPF_READ },
	[OP_LIST] = { op_list, OPF_CACHE },
	[OP_SHOW] = { op_show, OPF_CACHE },
	[OP_REMOVE] = { op_write, OPF_CACHE },
	[OP_PIN] = { op_write, OPF_CACHE },
	[OP_UNPIN] = { op_write, OPF_CACHE },
	[OP_GC] = { op_write, OPF_CACHE },
	[OP_SHUTDOWN] = { op_shutdown, 0 },
	[OP_VERIFY] = { op_verify, OPF_CACHE },
	[OP_EXPORT] = { op_transfer, OPF_CACHE },
	[OP_IMPORT] = { op_transfer, OPF_CACHE },
	[OP_CONFIG] = { op_config, 0 },
	[OP_ZERO] = { op_zero, 0 },
	[OP_RELEASE] = { op_release, 0 },
};

/* The policy: 0 when req may run, else answers it and returns -1. */
static int admit(struct conn *c, const struct msg_request *req, unsigned flags)
{
	struct kilnd *d = c->d;
	if (!c->hello && !(flags & OPF_BEFORE_HELLO)) {
		conn_reply_error(c, req->id, ERR_BAD_REQUEST, "op", "send hello first");
	} else if (c->status_only && !(flags & OPF_READ)) {
		conn_reply_error(c, req->id, ERR_DENIED, "op", "kilnd serves uid %d; root may read its "
				 "status, and do nothing else", (int)geteuid());
	} else if (d->stopping && !(flags & OPF_STOPPING)) {
		conn_reply_error(c, req->id, ERR_SHUTTING_DOWN, NULL, "kilnd is shutting down");
	} else if ((flags & OPF_CACHE) && d->cache_why[0] != '\0' && cachedir_check(d) != 0) {
		conn_reply_error(c, req->id, ERR_IO, NULL, "%s", d->cache_why);
	} else if ((flags & OPF_ARGS) && req->code_arg != 0 && !d->cfg->allow_toolchain_code) {
		char why[256];
		validate_args((const char *const *)req->args, req->nargs, NULL, why, sizeof(why));
		conn_reply_error(c, req->id, ERR_BAD_ARG, "args", "%s", why);
	} else if ((flags & OPF_PENDING) && server_pending(d) > d->cfg->max_pending) {
		d->c.busy++;
		conn_reply_error(c, req->id, ERR_BUSY, NULL,
				 "%u requests are in progress (--max-pending); try again later",
				 server_pending(d) - 1);
	} else {
		return 0;
	}
	return -1;
}

void dispatch_frame(struct conn *c, const char *payload, size_t len)
{
	ASSERT_LOOP();
	struct msg_request req;
	struct msg_error err;
	c->d->c.requests++;
	if (msg_request_parse_memo(payload, len, &req, &err, &c->d->args_memo) != 0) {
		conn_reply_error(c, req.id, err.code, err.field[0] != '\0' ? err.field : NULL, "%s",
				 err.message);
		if (err.code == ERR_BAD_JSON) {
			/* Not even an object: the peer does not speak this protocol. */
			conn_close_after_reply(c);
		}
		return;
	}
	if (req.op < 0 || req.op >= OP__COUNT || op_table[req.op].run == NULL) {
		conn_reply_error(c, req.id, ERR_UNKNOWN_OP, "op", "unknown operation");
	} else if (admit(c, &req, op_table[req.op].flags) == 0) {
		log_debug("pid %d: %s id %llu", (int)c->pid, msg_op_name(req.op),
			  (unsigned long long)req.id);
		op_table[req.op].run(c, &req);
	}
	msg_request_free(&req);
}
