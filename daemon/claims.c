/*
 * Claims: one producer per alias on this node (claims.h). A table from
 * alias to its claim: the owner, and the lookups waiting for the claim to
 * end, each with its own deadline (a libuv timer). Ending a claim (the
 * alias published, the owner's release or its connection gone) takes it
 * out of the table first, then calls every waiter: the callbacks may
 * claim the alias again (a takeover) or wait on the new claim.
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
	uv_timer_t timer;            /* first: the handle's memory is the waiter's */
	struct claim_waiter *next;
	struct claim *claim;         /* NULL once answered */
	claim_cb cb;
	void *arg;
};

struct claim {
	const void *owner;
	unsigned *owned;             /* the owner's count of its claims */
	struct claim_waiter *waiters;
	unsigned nwaiters;
};

struct claims {
	struct table *by_alias;      /* alias -> struct claim */
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

/* Answers w once and lets its timer go (the waiter is freed with it). */
static void waiter_end(struct claim_waiter *w, enum claim_end why)
{
	w->claim = NULL;
	uv_timer_stop(&w->timer);
	uv_close((uv_handle_t *)&w->timer, waiter_closed);
	w->cb(w->arg, why);
}

/* Ends a claim already out of the table: every waiter is answered, in the
 * order they came. */
static void claim_end(struct claim *cl, enum claim_end why)
{
	struct claim_waiter *w = cl->waiters, *prev = NULL, *next;
	while (w != NULL) {      /* the list is newest first: reverse it */
		next = w->next;
		w->next = prev;
		prev = w;
		w = next;
	}
	free(cl);
	for (w = prev; w != NULL; w = next) {
		next = w->next;
		waiter_end(w, why);
	}
}

static void end_each(const char *alias, void *val, void *ctx)
{
	(void)alias;
	(void)ctx;
	struct claim *cl = val;
	(*cl->owned)--;
	claim_end(cl, CLAIM_GONE);
}

void claims_fini(struct kilnd *d)
{
	struct claims *c = d->claims;
	if (c == NULL)
		return;
	d->claims = NULL;
	table_foreach(c->by_alias, end_each, NULL);
	table_free(c->by_alias, NULL);
	free(c);
}

enum claim_take claims_take(struct kilnd *d, const char *alias, const void *owner,
			    unsigned *owned)
{
	ASSERT_LOOP();
	struct claims *c = d->claims;
	if (c == NULL)
		return CLAIM_FULL;
	struct claim *cl = table_get(c->by_alias, alias);
	if (cl != NULL)
		return cl->owner == owner ? CLAIM_HELD : CLAIM_OTHER;
	if (*owned >= CLAIMS_PER_OWNER || table_count(c->by_alias) >= CLAIMS_MAX ||
	    (cl = calloc(1, sizeof(*cl))) == NULL)
		return CLAIM_FULL;
	cl->owner = owner;
	cl->owned = owned;
	if (table_put(c->by_alias, alias, cl, NULL) != 0) {
		free(cl);
		return CLAIM_FULL;
	}
	(*owned)++;
	d->c.claims++;
	return CLAIM_GRANTED;
}

static void on_deadline(uv_timer_t *t)
{
	struct claim_waiter *w = (struct claim_waiter *)t;
	struct claim *cl = w->claim;
	struct claim_waiter **p = &cl->waiters;
	while (*p != w)
		p = &(*p)->next;
	*p = w->next;
	cl->nwaiters--;
	w->cb(w->arg, CLAIM_TIMEOUT);
	w->claim = NULL;
	uv_close((uv_handle_t *)&w->timer, waiter_closed);
}

int claims_wait(struct kilnd *d, const char *alias, uint64_t ms, claim_cb cb, void *arg)
{
	ASSERT_LOOP();
	struct claim *cl = d->claims != NULL ? table_get(d->claims->by_alias, alias) : NULL;
	if (cl == NULL)
		return -ENOENT;
	if (cl->nwaiters >= CLAIM_WAITERS_MAX)
		return -EBUSY;
	struct claim_waiter *w = calloc(1, sizeof(*w));
	if (w == NULL)
		return -ENOMEM;
	uv_timer_init(d->loop, &w->timer);
	w->claim = cl;
	w->cb = cb;
	w->arg = arg;
	w->next = cl->waiters;
	cl->waiters = w;
	cl->nwaiters++;
	uv_timer_start(&w->timer, on_deadline, ms, 0);
	return 0;
}

/* Takes alias's claim out of the table and ends it. */
static void end_claim(struct kilnd *d, const char *alias, enum claim_end why)
{
	struct claim *cl = table_del(d->claims->by_alias, alias);
	if (cl == NULL)
		return;
	(*cl->owned)--;
	claim_end(cl, why);
}

bool claims_release(struct kilnd *d, const char *alias, const void *owner)
{
	ASSERT_LOOP();
	struct claim *cl = d->claims != NULL ? table_get(d->claims->by_alias, alias) : NULL;
	if (cl == NULL || cl->owner != owner)
		return false;
	end_claim(d, alias, CLAIM_FREE);
	return true;
}

struct owned_by {
	const void *owner;
	char **aliases;
	size_t n, cap;
};

static void collect(const char *alias, void *val, void *ctx)
{
	struct owned_by *o = ctx;
	struct claim *cl = val;
	if (cl->owner != o->owner || o->n == o->cap)
		return;
	o->aliases[o->n] = strdup(alias);
	if (o->aliases[o->n] != NULL)
		o->n++;
}

void claims_owner_gone(struct kilnd *d, const void *owner, const unsigned *owned)
{
	ASSERT_LOOP();
	if (d->claims == NULL || *owned == 0)
		return;
	/* One walk to find them (a connection that held claims closing),
	 * then each ended: waiters may take the alias over, which changes
	 * the table. */
	struct owned_by o = { .owner = owner, .cap = *owned };
	o.aliases = calloc(o.cap, sizeof(char *));
	if (o.aliases != NULL)
		table_foreach(d->claims->by_alias, collect, &o);
	for (size_t i = 0; i < o.n; i++) {
		struct claim *cl = table_get(d->claims->by_alias, o.aliases[i]);
		if (cl != NULL && cl->owner == owner)
			end_claim(d, o.aliases[i], CLAIM_FREE);
		free(o.aliases[i]);
	}
	free(o.aliases);
}

void claims_published(struct kilnd *d, const char *alias)
{
	ASSERT_LOOP();
	if (d->claims != NULL)
		end_claim(d, alias, CLAIM_PUBLISHED);
}

size_t claims_count(const struct kilnd *d)
{
	return d->claims != NULL ? table_count(d->claims->by_alias) : 0;
}
