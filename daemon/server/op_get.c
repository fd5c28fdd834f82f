/*
 * The get operation (docs/protocol.md, "get"): once keying.c has the
 * request key, a get joins the key's flight, is served a valid entry from
 * the store, parks until a changed input is hashed, waits for another
 * client's source text, or starts a build; a flight's end answers it
 * through conn_waiter. Loop thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "flight.h"
#include "alias.h"
#include "headers.h"
#include "hit.h"
#include "hit_reply.h"
#include "keying.h"
#include "kilnd.h"
#include "msg.h"
#include "msg_artifact.h"
#include "ops.h"
#include "pch.h"
#include "server.h"
#include "stats.h"
#include "text_turn.h"

/* A connection waiting on a flight (flight.h's waiter_ops). */
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
	struct flight *b = flight_find(d, in->rkey);
	int rc = 0;
	conn_ref(c);
	if (b != NULL) {
		d->c.joined++;
		rc = flight_add_waiter(b, &conn_waiter, c, id, in->req.alias, in->req.alias_data, true);
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
	struct flight *b = in->req.no_build ? NULL : flight_find(d, in->rkey);
	if (b != NULL) {
		stats_miss(d, in->req.toolchain);
		join_or_start(c, in);
		return true;
	}
	struct hit h;
	const struct hit_query q = { .rkey = in->rkey, .may_wait = in->hash_waits < HASH_WAITS_MAX };
	int v = hit_find(d, &q, &h);
	if (v == HIT_PENDING && park_get(c, in, fd)) {
		hit_free(&h);
		return false;
	}
	if (v == HIT_VALID || v == HIT_UNOPENED) {
		if (v == HIT_UNOPENED)
			conn_reply_error(c, id, ERR_IO, NULL, "cannot open the artifact: %s",
					 strerror(-h.err));
		else if (reply_hit(c, id, &h, in->req.alias, in->req.alias_data) == 0)
			stats_hit(d, in->req.toolchain);
		hit_free(&h);
		build_input_free(in);
		free(in);
		return true;
	}
	hit_free(&h);
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

void op_get(struct conn *c, struct msg_request *req)
{
	/* The build of a claimed alias has come (from any connection: kiln.dace
	 * builds over one of its own): its producer is alive and working, so
	 * the claim's expiry starts again (daemon/claims.h). */
	if (req->alias != NULL)
		alias_claim_progress(c->d, req->alias);
	for (size_t i = 0; i < req->nsources; i++) {
		if (req->sources[i].text != NULL) {
			c->d->c.source_texts++;
			break;
		}
	}
	keying_request(c, req, -1, resolve_get);
}

