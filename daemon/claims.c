/*
 * Claims: one producer per alias on this node (claims.h). A table from
 * alias to its claim: the owner, and the lookups waiting for the claim to
 * end in the order they came, each with its own deadline (a libuv timer).
 * Every claim and every waiter is also on its owner's list, so that an
 * owner's end touches only what it holds. Ending a claim (the alias
 * published, the owner's release or its end) takes it and its waiters out
 * of the table and of every list first, then calls the waiters: the
 * callbacks may claim the alias again (a takeover), wait on the new claim,
 * or end other owners (a reply that fails closes its connection).
 *
 * The table is shared out by process (struct claim_peer, one per uid and
 * pid, its owners on a list): a process may hold CLAIMS_PER_PEER claims
 * however many connections it opens, and a full table makes room for a
 * process holding fewer than the one holding the most (max-min fairness:
 * that one's least recently renewed claim ends), so no client, nor any
 * number of connections of one, takes the node's claims from the others.
 * Every claim is also on a list in the order of its last progress (grant,
 * its owner asking again, its build arriving), which one timer walks to
 * end the claims without progress for the expiry.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "claims.h"
#include "config.h"
#include "kilnd.h"
#include "log.h"
#include "table.h"
#include "thread.h"

struct claim_waiter {
	uv_timer_t timer;                      /* first: the handle's memory is the waiter's */
	struct claim *claim;                   /* NULL once off the claim's list */
	struct claim_waiter *prev, *next;      /* the claim's waiters, oldest first */
	struct claim_owner *owner;             /* NULL once off the owner's list */
	struct claim_waiter *oprev, *onext;    /* the owner's waits */
	claim_cb cb;
	void *arg;
};

struct claim {
	char *alias;
	enum claim_kind kind;
	struct claim_owner *owner;
	struct claim_peer *peer;               /* the owner's */
	struct claim *oprev, *onext;           /* the owner's claims */
	struct claim *aprev, *anext;           /* every claim, least recent progress first */
	struct claim *pprev, *pnext;           /* the peer's claims, in the same order */
	struct claim_waiter *head, *tail;
	unsigned nwaiters;
	uint64_t progress;                     /* uv_now at its grant or last renewal */
};

/* One process's share: what its owners (connections) hold in all. */
struct claim_peer {
	char key[48];                          /* "uid pid", in the table (pid known) */
	uid_t uid;
	pid_t pid;
	struct claim_owner *owners;
	unsigned nowners, nclaims, nturns, nwaits;
	struct claim *head, *tail;             /* its claims, least recent progress first */
	struct claim_peer *prev, *next;        /* every peer */
	bool warned;                           /* its limit was logged */
};

struct claims {
	struct kilnd *d;
	struct table *by_alias;                /* alias -> struct claim */
	struct claim *head, *tail;             /* every claim, least recent progress first */
	struct table *peers;                   /* "uid pid" -> struct claim_peer */
	struct claim_peer *all_peers;
	size_t nholders;                       /* peers that hold a claim */
	uv_timer_t expiry;
	uint64_t expiry_ms;                    /* 0: claims never expire */
	bool stopping;                         /* claims_fini runs: no new claim or wait */
	bool making_room;                      /* a full table's claim ends: no second one */
	claim_end_hook on_end;                 /* claims_set_end_hook's, or NULL */
};

/* How many claims a full table may end for one request: each frees a
 * place, which the ended claim's first waiter may take over (that is its
 * right) before the request looks again. */
#define ROOM_TRIES 4

int claims_init(struct kilnd *d)
{
	struct claims *c = calloc(1, sizeof(*c));
	if (c == NULL || (c->by_alias = table_new()) == NULL || (c->peers = table_new()) == NULL) {
		if (c != NULL)
			table_free(c->by_alias, NULL);
		free(c);
		return -ENOMEM;
	}
	c->d = d;
	double s = d->cfg != NULL ? d->cfg->claim_expiry_s : CLAIM_EXPIRY_DEFAULT_S;
	c->expiry_ms = (uint64_t)(s * 1000.0);
	if (s > 0 && c->expiry_ms == 0)
		c->expiry_ms = 1;
	uv_timer_init(d->loop, &c->expiry);
	c->expiry.data = c;
	d->claims = c;
	return 0;
}

void claims_set_end_hook(struct kilnd *d, claim_end_hook hook)
{
	if (d->claims != NULL)
		d->claims->on_end = hook;
}

void claims_owner_init(struct claim_owner *owner, uid_t uid, pid_t pid)
{
	owner->uid = uid;
	owner->pid = pid;
}

/* ---- peers: one process's share ------------------------------------- */

/* owner's peer, found or made (and owner put on its list); NULL without
 * memory or once owner is gone. A pid kilnd cannot see (0: the client is
 * in another pid namespace) groups nothing: such an owner is its own
 * peer, still bound by CLAIMS_PER_OWNER and by the fair share. */
static struct claim_peer *peer_of(struct claims *c, struct claim_owner *owner)
{
	if (owner->peer != NULL || owner->gone)
		return owner->peer;
	char key[48];
	snprintf(key, sizeof(key), "%lu %ld", (unsigned long)owner->uid, (long)owner->pid);
	struct claim_peer *p = owner->pid > 0 ? table_get(c->peers, key) : NULL;
	if (p == NULL) {
		if ((p = calloc(1, sizeof(*p))) == NULL)
			return NULL;
		memcpy(p->key, key, sizeof(key));
		p->uid = owner->uid;
		p->pid = owner->pid;
		if (owner->pid > 0 && table_put(c->peers, key, p, NULL) != 0) {
			free(p);
			return NULL;
		}
		p->next = c->all_peers;
		if (p->next != NULL)
			p->next->prev = p;
		c->all_peers = p;
	}
	owner->peer = p;
	owner->pnext = p->owners;
	if (owner->pnext != NULL)
		owner->pnext->pprev = owner;
	p->owners = owner;
	p->nowners++;
	return p;
}

static void peer_free(struct claims *c, struct claim_peer *p)
{
	if (p->pid > 0)
		table_del(c->peers, p->key);
	if (p->prev != NULL)
		p->prev->next = p->next;
	else
		c->all_peers = p->next;
	if (p->next != NULL)
		p->next->prev = p->prev;
	free(p);
}

/* owner, which holds nothing any more, leaves its peer; the last one
 * frees it. */
static void peer_leave(struct claims *c, struct claim_owner *owner)
{
	struct claim_peer *p = owner->peer;
	if (p == NULL)
		return;
	if (owner->pprev != NULL)
		owner->pprev->pnext = owner->pnext;
	else
		p->owners = owner->pnext;
	if (owner->pnext != NULL)
		owner->pnext->pprev = owner->pprev;
	owner->peer = NULL;
	owner->pprev = owner->pnext = NULL;
	if (--p->nowners == 0)
		peer_free(c, p);
}

/* Logs, once per process, that it reached a limit: the operator learns
 * who, and kiln status says how many it holds. */
static void peer_warn(struct claim_peer *p, bool table_full)
{
	if (p->warned)
		return;
	p->warned = true;
	if (table_full)
		log_warn("pid %ld (uid %lu) asked for a claim while the node's %d were held, and "
			 "it holds %u, at least an equal share; refused (kiln status names the "
			 "holders)", (long)p->pid, (unsigned long)p->uid, CLAIMS_MAX, p->nclaims);
	else
		log_warn("pid %ld (uid %lu) holds %d claims, the most one process may hold; its "
			 "further claims are refused until it holds fewer (kiln status names the "
			 "holders)", (long)p->pid, (unsigned long)p->uid, CLAIMS_PER_PEER);
}

/* ---- waiters -------------------------------------------------------- */

static void waiter_closed(uv_handle_t *h)
{
	free(h);   /* the timer is the waiter's first member */
}

/* Takes w off its owner's list. */
static void waiter_leave_owner(struct claim_waiter *w)
{
	if (w->owner == NULL)
		return;
	if (w->oprev != NULL)
		w->oprev->onext = w->onext;
	else
		w->owner->waits = w->onext;
	if (w->onext != NULL)
		w->onext->oprev = w->oprev;
	if (w->owner->peer != NULL)
		w->owner->peer->nwaits--;
	w->owner = NULL;
	w->oprev = w->onext = NULL;
}

/* Takes w off its claim's list and its owner's. */
static void waiter_unlink(struct claim_waiter *w)
{
	struct claim *cl = w->claim;
	if (cl != NULL) {
		if (w->prev != NULL)
			w->prev->next = w->next;
		else
			cl->head = w->next;
		if (w->next != NULL)
			w->next->prev = w->prev;
		else
			cl->tail = w->prev;
		cl->nwaiters--;
		w->claim = NULL;
		w->prev = w->next = NULL;
	}
	waiter_leave_owner(w);
}

/* Answers w, which no list holds any more, and lets it go with its timer. */
static void waiter_answer(struct claim_waiter *w, enum claim_end why)
{
	claim_cb cb = w->cb;
	void *arg = w->arg;
	uv_timer_stop(&w->timer);
	uv_close((uv_handle_t *)&w->timer, waiter_closed);
	cb(arg, why);
}

static void on_deadline(uv_timer_t *t)
{
	struct claim_waiter *w = (struct claim_waiter *)t;
	waiter_unlink(w);
	waiter_answer(w, CLAIM_TIMEOUT);
}

/* ---- the lists of claims -------------------------------------------- */

/* Puts cl last on the list of every claim and on its peer's. */
static void claim_append(struct claims *c, struct claim *cl)
{
	struct claim_peer *p = cl->peer;
	cl->anext = NULL;
	cl->aprev = c->tail;
	if (c->tail != NULL)
		c->tail->anext = cl;
	else
		c->head = cl;
	c->tail = cl;
	cl->pnext = NULL;
	cl->pprev = p->tail;
	if (p->tail != NULL)
		p->tail->pnext = cl;
	else
		p->head = cl;
	p->tail = cl;
}

/* Takes cl off the list of every claim and off its peer's. */
static void claim_detach(struct claims *c, struct claim *cl)
{
	struct claim_peer *p = cl->peer;
	if (cl->aprev != NULL)
		cl->aprev->anext = cl->anext;
	else
		c->head = cl->anext;
	if (cl->anext != NULL)
		cl->anext->aprev = cl->aprev;
	else
		c->tail = cl->aprev;
	if (cl->pprev != NULL)
		cl->pprev->pnext = cl->pnext;
	else
		p->head = cl->pnext;
	if (cl->pnext != NULL)
		cl->pnext->pprev = cl->pprev;
	else
		p->tail = cl->pprev;
	cl->aprev = cl->anext = cl->pprev = cl->pnext = NULL;
}

static void on_expiry(uv_timer_t *t);

/* Sets the timer for the claim with the least recent progress, unless it
 * runs already: it is then due no later (progress only moves claims back). */
static void expiry_arm(struct claims *c)
{
	if (c->expiry_ms == 0 || c->head == NULL || c->stopping ||
	    uv_is_active((uv_handle_t *)&c->expiry))
		return;
	uint64_t now = uv_now(c->d->loop), due = c->head->progress + c->expiry_ms;
	uv_timer_start(&c->expiry, on_expiry, due > now ? due - now : 0, 0);
}

/* The claim shows progress: its expiry starts again. */
static void claim_renew(struct claims *c, struct claim *cl)
{
	cl->progress = uv_now(c->d->loop);
	claim_detach(c, cl);
	claim_append(c, cl);
	expiry_arm(c);
}

/* Takes cl out of the table and off every list. */
static void claim_unlink(struct claims *c, struct claim *cl)
{
	table_del(c->by_alias, cl->alias);
	if (cl->oprev != NULL)
		cl->oprev->onext = cl->onext;
	else
		cl->owner->claims = cl->onext;
	if (cl->onext != NULL)
		cl->onext->oprev = cl->oprev;
	cl->owner->nclaims--;
	claim_detach(c, cl);
	struct claim_peer *p = cl->peer;
	p->nturns -= cl->kind == CLAIM_TURN;
	if (--p->nclaims == 0)
		c->nholders--;
}

/* Ends cl: it and its waiters leave everything first, then each waiter is
 * answered in the order they came (their own list, which nothing else
 * reaches now, carries them). */
static void claim_end(struct claims *c, struct claim *cl, enum claim_end why)
{
	struct kilnd *d = c->d;
	claim_unlink(c, cl);
	struct claim_waiter *w = cl->head, *next;
	for (struct claim_waiter *x = w; x != NULL; x = x->next) {
		x->claim = NULL;
		waiter_leave_owner(x);
	}
	char *alias = cl->alias;
	const struct claim_owner *owner = cl->owner;
	claim_end_hook hook = cl->kind == CLAIM_ALIAS ? c->on_end : NULL;
	free(cl);
	for (; w != NULL; w = next) {
		next = w->next;
		w->prev = w->next = NULL;
		waiter_answer(w, why);
	}
	/* Last, once the waiters had their turn: a waiter that took the claim
	 * over may have been handed its job-wide part (the tier's lease). The
	 * owner still exists here (claims_owner_gone runs before it is freed). */
	if (hook != NULL)
		hook(d, alias, owner, why);
	free(alias);
}

/* Ends the claims whose last progress is older than the expiry, as if
 * their owners had gone: the first waiter takes each over. A producer that
 * still works publishes anyway; it only stops being the only one. */
static void on_expiry(uv_timer_t *t)
{
	struct claims *c = t->data;
	uint64_t now = uv_now(c->d->loop);
	unsigned n = 0;
	struct claim *cl;
	while (!c->stopping && (cl = c->head) != NULL && cl->progress + c->expiry_ms <= now) {
		/* One line for all that end now (a process that left thousands
		 * idle must not fill the log), naming the first. */
		if (n++ == 0)
			log_info("the claim on \"%s\" of pid %ld ended: no progress for %g s "
				 "(--claim-expiry)", cl->alias, (long)cl->peer->pid,
				 (double)c->expiry_ms / 1000.0);
		c->d->c.claims_expired++;
		claim_end(c, cl, CLAIM_FREE);
	}
	if (n > 1)
		log_info("%u claims ended without progress for %g s", n,
			 (double)c->expiry_ms / 1000.0);
	expiry_arm(c);
}

static void claims_closed(uv_handle_t *h)
{
	free(h->data);   /* the table, whose timer this was */
}

void claims_fini(struct kilnd *d)
{
	struct claims *c = d->claims;
	if (c == NULL)
		return;
	ASSERT_LOOP();
	/* Answering a waiter may close a connection, which ends what it
	 * holds: one claim at a time, from the list as it is then. */
	c->stopping = true;
	uv_timer_stop(&c->expiry);
	while (c->tail != NULL)
		claim_end(c, c->tail, CLAIM_GONE);   /* the newest first, as ever */
	/* Every wait was on a claim, so none is left; the owners that live on
	 * (their connections close next) forget their peers. */
	while (c->all_peers != NULL)
		peer_leave(c, c->all_peers->owners);   /* a peer's last owner frees it */
	d->claims = NULL;
	table_free(c->by_alias, NULL);
	table_free(c->peers, NULL);
	uv_close((uv_handle_t *)&c->expiry, claims_closed);
}

/* ---- taking, waiting, ending ---------------------------------------- */

/* The table is full and p asks for one more: when the process holding the
 * most holds more than p would with it, that one's least recently renewed
 * claim ends (its waiters may take it over). A process at or above the
 * average share is refused without a look at the others. true when a
 * claim ended. */
static bool make_room(struct claims *c, const struct claim_peer *p)
{
	if (c->making_room || (size_t)p->nclaims * c->nholders >= CLAIMS_MAX)
		return false;
	struct claim_peer *most = NULL;
	for (struct claim_peer *x = c->all_peers; x != NULL; x = x->next)
		if (most == NULL || x->nclaims > most->nclaims)
			most = x;
	if (most == NULL || most == p || most->nclaims <= p->nclaims + 1)
		return false;
	struct claim *cl = most->head;
	log_debug("the claims are full: the claim on \"%s\" of pid %ld (%u claims) ends for "
		  "pid %ld (%u)", cl->alias, (long)most->pid, most->nclaims, (long)p->pid,
		  p->nclaims);
	c->d->c.claims_displaced++;
	c->making_room = true;
	claim_end(c, cl, CLAIM_FREE);
	c->making_room = false;
	return true;
}

/* A new claim of name for owner (of peer p); the table has room. */
static enum claim_take claim_new(struct claims *c, const char *name, enum claim_kind kind,
				 struct claim_owner *owner, struct claim_peer *p)
{
	struct claim *cl = calloc(1, sizeof(*cl));
	if (cl == NULL || (cl->alias = strdup(name)) == NULL ||
	    table_put(c->by_alias, name, cl, NULL) != 0) {
		if (cl != NULL)
			free(cl->alias);
		free(cl);
		return CLAIM_FULL;
	}
	cl->kind = kind;
	cl->owner = owner;
	cl->peer = p;
	cl->onext = owner->claims;
	if (cl->onext != NULL)
		cl->onext->oprev = cl;
	owner->claims = cl;
	owner->nclaims++;
	if (p->nclaims++ == 0)
		c->nholders++;
	p->nturns += kind == CLAIM_TURN;
	cl->progress = uv_now(c->d->loop);
	claim_append(c, cl);
	expiry_arm(c);
	return CLAIM_GRANTED;
}

enum claim_take claims_take(struct kilnd *d, const char *name, enum claim_kind kind,
			    struct claim_owner *owner)
{
	ASSERT_LOOP();
	struct claims *c = d->claims;
	for (int tries = 0;; tries++) {
		/* Making room answered waiters, which may have ended owner (a
		 * reply that failed) or claimed name. */
		if (c == NULL || c->stopping || owner->gone)
			return CLAIM_STOPPED;
		struct claim *cl = table_get(c->by_alias, name);
		if (cl != NULL && cl->owner == owner) {
			claim_renew(c, cl);
			return CLAIM_HELD;
		}
		if (cl != NULL)
			return CLAIM_OTHER;
		if (owner->nclaims >= CLAIMS_PER_OWNER)
			return CLAIM_OWNER_FULL;
		struct claim_peer *p = peer_of(c, owner);
		if (p == NULL)
			return CLAIM_FULL;
		if (p->nclaims >= CLAIMS_PER_PEER) {
			peer_warn(p, false);
			return CLAIM_PEER_FULL;
		}
		if (table_count(c->by_alias) < CLAIMS_MAX)
			return claim_new(c, name, kind, owner, p);
		if (tries == ROOM_TRIES || !make_room(c, p)) {
			peer_warn(p, true);
			return CLAIM_FULL;
		}
	}
}

int claims_wait(struct kilnd *d, const char *alias, uint64_t ms, struct claim_owner *owner,
		claim_cb cb, void *arg)
{
	ASSERT_LOOP();
	struct claims *c = d->claims;
	struct claim *cl = c != NULL && !c->stopping && !owner->gone
				   ? table_get(c->by_alias, alias) : NULL;
	if (cl == NULL)
		return -ENOENT;
	if (cl->nwaiters >= CLAIM_WAITERS_MAX)
		return -EBUSY;
	struct claim_peer *p = peer_of(c, owner);
	struct claim_waiter *w = p != NULL ? calloc(1, sizeof(*w)) : NULL;
	if (w == NULL)
		return -ENOMEM;
	uv_timer_init(d->loop, &w->timer);
	w->cb = cb;
	w->arg = arg;
	w->claim = cl;
	w->prev = cl->tail;
	if (cl->tail != NULL)
		cl->tail->next = w;
	else
		cl->head = w;
	cl->tail = w;
	cl->nwaiters++;
	w->owner = owner;
	w->onext = owner->waits;
	if (w->onext != NULL)
		w->onext->oprev = w;
	owner->waits = w;
	p->nwaits++;
	uv_timer_start(&w->timer, on_deadline, ms, 0);
	return 0;
}

/* Ends owner's claim on alias with why; false when it held none. */
static bool end_owned(struct kilnd *d, const char *alias, const struct claim_owner *owner,
		      enum claim_end why)
{
	ASSERT_LOOP();
	struct claims *c = d->claims;
	struct claim *cl = c != NULL ? table_get(c->by_alias, alias) : NULL;
	if (cl == NULL || cl->owner != owner)
		return false;
	claim_end(c, cl, why);
	return true;
}

bool claims_release(struct kilnd *d, const char *alias, const struct claim_owner *owner)
{
	return end_owned(d, alias, owner, CLAIM_RELEASED);
}

bool claims_abandon(struct kilnd *d, const char *alias, const struct claim_owner *owner)
{
	return end_owned(d, alias, owner, CLAIM_FREE);
}

void claims_owner_gone(struct kilnd *d, struct claim_owner *owner)
{
	ASSERT_LOOP();
	struct claims *c = d->claims;
	owner->gone = true;
	if (c == NULL)
		return;   /* claims_fini ended everything, and took owner off its peer */
	/* Nothing adds to a gone owner's lists, and whatever the callbacks
	 * end leaves them too: take the first until none is left. */
	while (owner->waits != NULL) {
		struct claim_waiter *w = owner->waits;
		waiter_unlink(w);
		waiter_answer(w, CLAIM_LEFT);
	}
	while (owner->claims != NULL)
		claim_end(c, owner->claims, CLAIM_FREE);
	peer_leave(c, owner);
}

void claims_published(struct kilnd *d, const char *alias)
{
	ASSERT_LOOP();
	struct claims *c = d->claims;
	/* every warm get with an alias comes here: no hashing while nothing
	 * is claimed, the usual case */
	struct claim *cl = c != NULL && table_count(c->by_alias) != 0
				   ? table_get(c->by_alias, alias) : NULL;
	if (cl != NULL)
		claim_end(c, cl, CLAIM_PUBLISHED);
}

void claims_progress(struct kilnd *d, const char *name)
{
	ASSERT_LOOP();
	struct claims *c = d->claims;
	struct claim *cl = c != NULL && !c->stopping && table_count(c->by_alias) != 0
				   ? table_get(c->by_alias, name) : NULL;
	if (cl != NULL)
		claim_renew(c, cl);
}

size_t claims_count(const struct kilnd *d)
{
	return d->claims != NULL ? table_count(d->claims->by_alias) : 0;
}

uint64_t claims_expiry_ms(const struct kilnd *d)
{
	return d->claims != NULL ? d->claims->expiry_ms : 0;
}

/* ---- status --------------------------------------------------------- */

static int holder_cmp(const void *a, const void *b)
{
	const struct claim_holder *x = a, *y = b;
	unsigned hx = x->claims + x->turns, hy = y->claims + y->turns;
	if (hx != hy)
		return hx > hy ? -1 : 1;
	if (x->waits != y->waits)
		return x->waits > y->waits ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

size_t claims_holders(const struct kilnd *d, struct claim_holder *out, size_t max)
{
	const struct claims *c = d->claims;
	size_t n = 0, cap = 0;
	struct claim_holder *all = NULL;
	for (const struct claim_peer *p = c != NULL ? c->all_peers : NULL; p != NULL; p = p->next) {
		if (p->nclaims == 0 && p->nwaits == 0)
			continue;
		if (n == cap) {
			size_t ncap = cap != 0 ? 2 * cap : 64;
			struct claim_holder *more = realloc(all, ncap * sizeof(*all));
			if (more == NULL)
				break;   /* out of memory: the ones so far */
			all = more;
			cap = ncap;
		}
		all[n++] = (struct claim_holder){
			.uid = p->uid, .pid = p->pid, .connections = p->nowners,
			.claims = p->nclaims - p->nturns, .turns = p->nturns, .waits = p->nwaits,
		};
	}
	if (n > 1)
		qsort(all, n, sizeof(*all), holder_cmp);
	if (n > 0)
		memcpy(out, all, (n < max ? n : max) * sizeof(*out));
	free(all);
	return n;
}
