/*
 * The lookup operation: an entry by alias or key, never built
 * (docs/protocol.md, "lookup"), and lookups that claim an alias or wait for
 * another client's claim (daemon/claims.h), and the release operation.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "flight.h"
#include "alias.h"
#include "claims.h"
#include "headers.h"
#include "hit.h"
#include "hit_reply.h"
#include "key.h"
#include "kilnd.h"
#include "ops.h"
#include "msg.h"
#include "named.h"
#include "server.h"
#include "stats.h"
#include "store.h"
#include "thread.h"
#include "upstream.h"

/*
 * A lookup naming a toolchain takes only an entry that toolchain, as kilnd
 * has it configured now, built: the same name, and its driver (as
 * configured or resolved) among the programs the build ran. An alias knows nothing of the
 * toolchain, so without this a kilnd restarted with another compiler would
 * answer with the old one's program while that one is still installed.
 * (The driver's content, and everything else it read, is then checked as
 * for any hit.) No name: any entry, as before.
 */

/* A lookup waiting for a large changed input to be hashed on the pool:
 * what it asked, copied (the request itself is freed when op_lookup
 * returns). */
struct parked_lookup {
	struct conn *c;
	struct msg_request req;
	char *alias, *key, *toolchain, *host;
	unsigned waits;
	uint64_t deadline;     /* a claim's wait: when it ends (uv_now, ms) */
};

static void lookup_resolve(struct conn *c, struct msg_request *req, unsigned waits,
			   uint64_t deadline);

static void parked_lookup_free(struct parked_lookup *p)
{
	free(p->alias);
	free(p->key);
	free(p->toolchain);
	free(p->host);
	free(p);
}

static void unpark_lookup(void *arg)
{
	struct parked_lookup *p = arg;
	struct conn *c = p->c;
	if (!c->dead)
		lookup_resolve(c, &p->req, p->waits, p->deadline);
	conn_unref(c);
	parked_lookup_free(p);
}

/* A copy of what req asks, to answer it later. */
static struct parked_lookup *parked_lookup_new(struct conn *c, const struct msg_request *req,
					       unsigned waits)
{
	struct parked_lookup *p = calloc(1, sizeof(*p));
	if (p == NULL)
		return NULL;
	p->c = c;
	p->waits = waits;
	p->req.id = req->id;
	p->req.op = req->op;
	p->req.claim = req->claim;
	p->req.wait_ms = req->wait_ms;
	p->req.claim_takeover = req->claim_takeover;
	p->req.counted = req->counted;
	p->req.upstream_looked = req->upstream_looked;
	if ((req->alias != NULL && (p->alias = strdup(req->alias)) == NULL) ||
	    (req->key != NULL && (p->key = strdup(req->key)) == NULL) ||
	    (req->toolchain != NULL && (p->toolchain = strdup(req->toolchain)) == NULL) ||
	    (req->host_compiler != NULL && (p->host = strdup(req->host_compiler)) == NULL)) {
		parked_lookup_free(p);
		return NULL;
	}
	p->req.alias = p->alias;
	p->req.key = p->key;
	p->req.toolchain = p->toolchain;
	p->req.host_compiler = p->host;
	return p;
}

static bool park_lookup(struct conn *c, const struct msg_request *req, unsigned waits,
			uint64_t deadline)
{
	struct parked_lookup *p = parked_lookup_new(c, req, waits + 1);
	if (p == NULL)
		return false;
	p->deadline = deadline;
	conn_ref(c);
	if (headers_wait(c->d, unpark_lookup, p) == 0)
		return true;
	conn_unref(c);
	parked_lookup_free(p);
	return false;
}

/*
 * The toolchain a lookup names: a configured one, or one named by path,
 * identified first (the lookup waits for that). false when the lookup was
 * answered (refused) or parked; *tc NULL for an unknown configured name
 * (then nothing matches: not found).
 */
static bool lookup_toolchain(struct conn *c, struct msg_request *req, unsigned waits,
			     uint64_t deadline, const struct toolchain **tc)
{
	char why[1024];
	*tc = NULL;
	if (req->toolchain == NULL)
		return true;
	if (req->toolchain[0] != '/' && req->host_compiler == NULL) {
		*tc = kilnd_toolchain(c->d, req->toolchain);
		return true;
	}
	struct parked_lookup *p = parked_lookup_new(c, req, waits);
	if (p == NULL) {
		conn_reply_error(c, req->id, ERR_INTERNAL, NULL, "out of memory");
		return false;
	}
	p->deadline = deadline;
	switch (named_find(c->d, req->toolchain, req->host_compiler, c->uid, tc, unpark_lookup, p,
			   why, sizeof(why))) {
	case NAMED_READY:
		parked_lookup_free(p);
		return true;
	case NAMED_PENDING:
		conn_ref(c);
		return false;
	default:
		parked_lookup_free(p);
		conn_reply_error(c, req->id, ERR_BAD_TOOLCHAIN,
				 req->host_compiler != NULL ? "host_compiler" : "toolchain", "%s", why);
		return false;
	}
}

static void claim_or_wait(struct conn *c, struct msg_request *req, uint64_t deadline,
			  const struct toolchain *tc);

static void upstream_answered(void *arg, bool found)
{
	struct parked_lookup *p = arg;
	(void)found;   /* found or not, the local index answers now */
	unpark_lookup(p);
}

/*
 * An alias that misses here may be in the upstream tier, published by
 * another node (docs/design.md, "Upstream tier": aliases). Asked once per
 * lookup, before a claim, on the pool; only for a lookup that names its
 * toolchain (the record's entry must be that toolchain's, with this node's
 * identity). true when the lookup was parked for it.
 */
static bool ask_upstream(struct conn *c, struct msg_request *req, unsigned waits,
			 uint64_t deadline, const struct toolchain *tc)
{
	if (req->alias == NULL || req->upstream_looked || tc == NULL || c->d->up == NULL)
		return false;
	req->upstream_looked = true;
	struct parked_lookup *p = parked_lookup_new(c, req, waits);
	if (p == NULL)
		return false;
	p->deadline = deadline;
	conn_ref(c);
	if (upstream_alias_find(c->d, req->alias, tc, upstream_answered, p) == 0)
		return true;
	conn_unref(c);
	parked_lookup_free(p);
	return false;
}

/* The toolchain a lookup names, as kilnd has it now (hit_query's filter). */
static bool accept_built_by(const struct store_entry *e, const void *arg)
{
	return named_built_by(e, arg);
}

static void lookup_resolve(struct conn *c, struct msg_request *req, unsigned waits,
			   uint64_t deadline)
{
	struct kilnd *d = c->d;
	const struct toolchain *tc;
	if (!lookup_toolchain(c, req, waits, deadline, &tc))
		return;
	struct hit h;
	const struct hit_query q = {
		.key = req->alias == NULL ? req->key : NULL, .alias = req->alias,
		.accept = req->toolchain != NULL ? accept_built_by : NULL, .accept_arg = tc,
		.may_wait = waits < HASH_WAITS_MAX,
	};
	int v = hit_find(d, &q, &h);
	if (v == HIT_PENDING && park_lookup(c, req, waits, deadline)) {
		hit_free(&h);
		return;
	}
	bool readable = h.err == 0;   /* the index answered (or the object could not be opened) */
	if (v != HIT_VALID && v != HIT_UNOPENED && readable &&
	    ask_upstream(c, req, waits, deadline, tc)) {
		hit_free(&h);
		return;
	}
	/* A lookup that waited for a claim counted as a miss when it arrived;
	 * its answer after the wait is not counted again (claim_waits says
	 * how many waited). */
	int hit = v == HIT_VALID ? reply_lookup_hit(c, req->id, &h) : -1;
	if (v == HIT_UNOPENED)
		conn_reply_error(c, req->id, ERR_IO, NULL, "cannot open the artifact: %s",
				 strerror(-h.err));
	else if (hit == 0 && !req->counted)
		stats_hit(d, h.entry.toolchain);
	else if (hit < 0 && !req->counted)
		stats_miss(d, req->toolchain);
	if (hit < 0 && v != HIT_UNOPENED && readable && req->claim) {
		req->counted = true;
		claim_or_wait(c, req, deadline, tc);
	} else if (hit < 0 && v != HIT_UNOPENED) {
		conn_reply_error(c, req->id, readable ? ERR_NOT_FOUND : ERR_IO, NULL,
				 "no valid entry for %s \"%s\"", req->alias != NULL ? "alias" : "key",
				 req->alias != NULL ? req->alias : req->key);
	}
	hit_free(&h);
}

void op_lookup(struct conn *c, struct msg_request *req)
{
	lookup_resolve(c, req, 0, uv_now(c->d->loop) + req->wait_ms);
}

/* ---- claims: one producer per alias (daemon/claims.h) ---------------- */

static void claim_wake(void *arg, enum claim_end why)
{
	struct parked_lookup *p = arg;
	struct conn *c = p->c;
	if (c->dead || why == CLAIM_LEFT) {
		/* gone while it waited: nothing to answer */
	} else if (why == CLAIM_TIMEOUT) {
		c->d->c.claim_timeouts++;
		conn_reply_error(c, p->req.id, ERR_NOT_FOUND, "claim",
				 "no valid entry for alias \"%s\": it is claimed by another client, "
				 "and the wait of %llu ms ran out", p->alias,
				 (unsigned long long)p->req.wait_ms);
	} else if (why == CLAIM_GONE) {
		conn_reply_error(c, p->req.id, ERR_SHUTTING_DOWN, NULL, "kilnd is shutting down");
	} else if (why == CLAIM_RELEASED) {
		/* Its producer finished without publishing (its build failed,
		 * or went elsewhere): what failed for one would most likely
		 * fail for the next, so the waiters do not take turns at it
		 * one after another. Looked up once more (published since?),
		 * without a claim: a hit, or not_found and they produce it. */
		p->req.claim = false;
		lookup_resolve(c, &p->req, 0, p->deadline);
	} else {
		/* Published: found now. Ended without it: one waiter takes it
		 * over (the first to look), the others wait on the new claim. */
		if (why == CLAIM_FREE)
			p->req.claim_takeover = true;
		lookup_resolve(c, &p->req, 0, p->deadline);
	}
	conn_unref(c);
	parked_lookup_free(p);
}

static void reply_claimed(struct conn *c, const struct msg_request *req)
{
	conn_reply_error(c, req->id, ERR_CLAIMED, NULL,
			 "no valid entry for alias \"%s\"; this client holds its claim now: "
			 "build it with this alias, or release the claim", req->alias);
}

/* The tier's answer on the claim's job-wide lease (upstream.h). */
static void lease_wake(void *arg, bool held, enum claim_end why)
{
	struct parked_lookup *p = arg;
	struct conn *c = p->c;
	if (held || why != CLAIM_TIMEOUT) {
		if (held && !c->dead)
			reply_claimed(c, &p->req);
		if (held) {
			conn_unref(c);
			parked_lookup_free(p);
		} else {
			claim_wake(p, why);
		}
		return;
	}
	/* Another node produces it, and this lookup's wait ran out (or it
	 * does not wait): answered as a local wait that ran out, and the node's
	 * claim, held for it meanwhile, goes to the next local waiter, whose
	 * own wait for the lease begins. */
	alias_abandon(c->d, p->alias, &c->claims);
	if (p->req.wait_ms > 0) {
		claim_wake(p, CLAIM_TIMEOUT);
		return;
	}
	if (!c->dead)
		conn_reply_error(c, p->req.id, ERR_NOT_FOUND, "claim",
				 "no valid entry for alias \"%s\": another node holds its claim "
				 "(this lookup does not wait: wait_ms 0)", p->alias);
	conn_unref(c);
	parked_lookup_free(p);
}

/*
 * The claim was granted here: with --upstream it is made job-wide first
 * (the tier's lease; docs/design.md, "Upstream tier"), the lookup parked
 * meanwhile. true when the lookup was parked or answered.
 */
static bool claim_job_wide(struct conn *c, struct msg_request *req, uint64_t deadline,
			   const struct toolchain *tc)
{
	if (c->d->up == NULL || tc == NULL)
		return false;
	struct parked_lookup *p = parked_lookup_new(c, req, 0);
	if (p == NULL)
		return false;
	p->deadline = deadline;
	int rc = upstream_lease_take(c->d, req->alias, tc, &c->claims, deadline, req->wait_ms > 0,
				     lease_wake, p);
	if (rc == 1) {
		conn_ref(c);
		return true;
	}
	parked_lookup_free(p);
	if (rc != -EALREADY)
		return false;
	conn_reply_error(c, req->id, ERR_NOT_FOUND, "claim",
			 "no valid entry for alias \"%s\": another lookup of this connection waits "
			 "for its claim across nodes", req->alias);
	return true;
}

/* A claim refused at a limit: not_found, as without kiln (the client
 * produces the program itself), saying which limit, and whose. */
static void claim_refused(struct conn *c, const struct msg_request *req, enum claim_take why)
{
	c->d->c.claims_refused++;
	if (why == CLAIM_OWNER_FULL)
		conn_reply_error(c, req->id, ERR_NOT_FOUND, NULL,
				 "no valid entry for alias \"%s\", and no claim: this connection holds "
				 "%d claims, the limit for one connection; produce it unclaimed",
				 req->alias, CLAIMS_PER_OWNER);
	else if (why == CLAIM_PEER_FULL)
		conn_reply_error(c, req->id, ERR_NOT_FOUND, NULL,
				 "no valid entry for alias \"%s\", and no claim: this process (pid %ld) "
				 "holds %d claims, the limit for one process; produce it unclaimed",
				 req->alias, (long)c->pid, CLAIMS_PER_PEER);
	else
		conn_reply_error(c, req->id, ERR_NOT_FOUND, NULL,
				 "no valid entry for alias \"%s\", and no claim: the node's %d claims "
				 "are held, and this process (pid %ld) holds at least an equal share of "
				 "them; produce it unclaimed", req->alias, CLAIMS_MAX, (long)c->pid);
}

/* A lookup with "claim" that missed: claims the alias, or waits for
 * another client's claim until deadline, or says why not. */
static void claim_or_wait(struct conn *c, struct msg_request *req, uint64_t deadline,
			  const struct toolchain *tc)
{
	struct kilnd *d = c->d;
	enum claim_take took = alias_claim(d, req->alias, &c->claims, req->claim_takeover);
	switch (took) {
	case CLAIM_GRANTED:
	case CLAIM_HELD:
		if (!claim_job_wide(c, req, deadline, tc))
			reply_claimed(c, req);
		return;
	case CLAIM_OWNER_FULL:
	case CLAIM_PEER_FULL:
	case CLAIM_FULL:
		claim_refused(c, req, took);
		return;
	case CLAIM_STOPPED:
		conn_reply_error(c, req->id, ERR_SHUTTING_DOWN, NULL, "kilnd is shutting down");
		return;
	case CLAIM_OTHER:
		break;
	}
	uint64_t now = uv_now(d->loop);
	if (deadline <= now && req->wait_ms == 0) {
		conn_reply_error(c, req->id, ERR_NOT_FOUND, "claim",
				 "no valid entry for alias \"%s\": it is claimed by another client "
				 "(this lookup does not wait: wait_ms 0)", req->alias);
		return;
	}
	if (deadline <= now) {   /* looking again after a claim ended, its time spent */
		d->c.claim_timeouts++;
		conn_reply_error(c, req->id, ERR_NOT_FOUND, "claim",
				 "no valid entry for alias \"%s\": it is claimed by another client, "
				 "and the wait of %llu ms ran out", req->alias,
				 (unsigned long long)req->wait_ms);
		return;
	}
	struct parked_lookup *p = parked_lookup_new(c, req, 0);
	int rc = p != NULL ? alias_claim_wait(d, req->alias, deadline - now, &c->claims,
					      req->claim_takeover, claim_wake, p)
			   : -ENOMEM;
	if (rc == 0) {
		p->deadline = deadline;
		conn_ref(c);
		return;
	}
	if (p != NULL)
		parked_lookup_free(p);
	if (rc == -EBUSY)   /* as for a wait that ran out: the client produces it */
		conn_reply_error(c, req->id, ERR_NOT_FOUND, "claim",
				 "no valid entry for alias \"%s\": another client holds its claim, and "
				 "%d lookups wait for it already", req->alias, CLAIM_WAITERS_MAX);
	else
		conn_reply_error(c, req->id, ERR_INTERNAL, NULL,
				 "cannot wait for the claim on alias \"%s\": %s", req->alias,
				 strerror(rc == -ENOENT ? ENOMEM : -rc));
}

void op_release(struct conn *c, struct msg_request *req)
{
	cJSON *r = cJSON_CreateObject();
	if (r == NULL || cJSON_AddNumberToObject(r, "id", (double)req->id) == NULL ||
	    cJSON_AddTrueToObject(r, "ok") == NULL ||
	    cJSON_AddBoolToObject(r, "released", alias_release(c->d, req->alias, &c->claims)) == NULL) {
		cJSON_Delete(r);
		conn_reply_error(c, req->id, ERR_INTERNAL, NULL, "out of memory");
		return;
	}
	conn_reply(c, r, -1);
}
