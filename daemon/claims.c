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
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "claims.h"
#include "kilnd.h"
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
	struct claim_owner *owner;
	struct claim *oprev, *onext;           /* the owner's claims */
	struct claim *aprev, *anext;           /* every claim (claims_fini) */
	struct claim_waiter *head, *tail;
	unsigned nwaiters;
};

struct claims {
	struct table *by_alias;                /* alias -> struct claim */
	struct claim *all;
	bool stopping;                         /* claims_fini runs: no new claim or wait */
};

int claims_init(struct kilnd *d)
{
	struct claims *c = calloc(1, sizeof(*c));
	if (c == NULL || (c->by_alias = table_new()) == NULL) {
		free(c);
		return -ENOMEM;
	}
	d->claims = c;
	return 0;
}

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
	if (cl->aprev != NULL)
		cl->aprev->anext = cl->anext;
	else
		c->all = cl->anext;
	if (cl->anext != NULL)
		cl->anext->aprev = cl->aprev;
}

/* Ends cl: it and its waiters leave everything first, then each waiter is
 * answered in the order they came (their own list, which nothing else
 * reaches now, carries them). */
static void claim_end(struct claims *c, struct claim *cl, enum claim_end why)
{
	claim_unlink(c, cl);
	struct claim_waiter *w = cl->head, *next;
	for (struct claim_waiter *x = w; x != NULL; x = x->next) {
		x->claim = NULL;
		waiter_leave_owner(x);
	}
	free(cl->alias);
	free(cl);
	for (; w != NULL; w = next) {
		next = w->next;
		w->prev = w->next = NULL;
		waiter_answer(w, why);
	}
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
	while (c->all != NULL)
		claim_end(c, c->all, CLAIM_GONE);
	d->claims = NULL;
	table_free(c->by_alias, NULL);
	free(c);
}

enum claim_take claims_take(struct kilnd *d, const char *alias, struct claim_owner *owner)
{
	ASSERT_LOOP();
	struct claims *c = d->claims;
	if (c == NULL || c->stopping)
		return CLAIM_STOPPED;
	struct claim *cl = table_get(c->by_alias, alias);
	if (cl != NULL)
		return cl->owner == owner ? CLAIM_HELD : CLAIM_OTHER;
	if (owner->nclaims >= CLAIMS_PER_OWNER || table_count(c->by_alias) >= CLAIMS_MAX ||
	    (cl = calloc(1, sizeof(*cl))) == NULL)
		return CLAIM_FULL;
	if ((cl->alias = strdup(alias)) == NULL || table_put(c->by_alias, alias, cl, NULL) != 0) {
		free(cl->alias);
		free(cl);
		return CLAIM_FULL;
	}
	cl->owner = owner;
	cl->onext = owner->claims;
	if (cl->onext != NULL)
		cl->onext->oprev = cl;
	owner->claims = cl;
	owner->nclaims++;
	cl->anext = c->all;
	if (cl->anext != NULL)
		cl->anext->aprev = cl;
	c->all = cl;
	return CLAIM_GRANTED;
}

int claims_wait(struct kilnd *d, const char *alias, uint64_t ms, struct claim_owner *owner,
		claim_cb cb, void *arg)
{
	ASSERT_LOOP();
	struct claims *c = d->claims;
	struct claim *cl = c != NULL && !c->stopping ? table_get(c->by_alias, alias) : NULL;
	if (cl == NULL)
		return -ENOENT;
	if (cl->nwaiters >= CLAIM_WAITERS_MAX)
		return -EBUSY;
	struct claim_waiter *w = calloc(1, sizeof(*w));
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
	uv_timer_start(&w->timer, on_deadline, ms, 0);
	return 0;
}

bool claims_release(struct kilnd *d, const char *alias, const struct claim_owner *owner)
{
	ASSERT_LOOP();
	struct claims *c = d->claims;
	struct claim *cl = c != NULL ? table_get(c->by_alias, alias) : NULL;
	if (cl == NULL || cl->owner != owner)
		return false;
	claim_end(c, cl, CLAIM_RELEASED);
	return true;
}

void claims_owner_gone(struct kilnd *d, struct claim_owner *owner)
{
	ASSERT_LOOP();
	struct claims *c = d->claims;
	if (c == NULL)
		return;
	/* Nothing adds to a gone owner's lists, and whatever the callbacks
	 * end leaves them too: take the first until none is left. */
	while (owner->waits != NULL) {
		struct claim_waiter *w = owner->waits;
		waiter_unlink(w);
		waiter_answer(w, CLAIM_LEFT);
	}
	while (owner->claims != NULL)
		claim_end(c, owner->claims, CLAIM_FREE);
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

size_t claims_count(const struct kilnd *d)
{
	return d->claims != NULL ? table_count(d->claims->by_alias) : 0;
}
