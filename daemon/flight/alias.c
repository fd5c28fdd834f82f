/*
 * The alias's owner (flight layer): where an alias points now, every
 * re-point of it, and its claim. An alias names one entry, with the data stored beside it
 * (store.h's alias_data); kilnd re-points it on the loop as it replies (a
 * build's waiters, a hit for a get naming it, a put, the tier's record),
 * writes the re-points to the index behind the replies, one pool job at a
 * time, and answers "where does it point" from the re-points not yet
 * written before the index. A re-point tells the tier (the hook it
 * installed with alias_set_hook) and ends the alias's claim: the lookups
 * waiting for it look again. Every claim of an alias is taken, waited
 * for, renewed and given up here too (claims.c is the node's table of
 * claims, of aliases and of text turns).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "alias.h"
#include "claims.h"
#include "kilnd.h"
#include "log.h"
#include "store.h"
#include "table.h"
#include "thread.h"

/*
 * Aliases are re-pointed in the order of the replies. The loop keeps the
 * latest target of every alias whose write is not yet done (d->aliases->pending),
 * lookups read it before the index, and one pool job at a time writes
 * them all: a later reply can never be overtaken by an earlier one's
 * write, and a lookup never sees an older target once a newer one was
 * replied.
 */
/* The re-points not yet written, and the tier's hook. */
struct aliases {
	struct table *pending;       /* alias -> struct alias_target, write not yet done */
	bool flushing;               /* a pool job writes them now */
	alias_hook hook;             /* the tier's, or NULL */
};

struct alias_flush {
	struct kilnd *d;
	size_t n;
	char **alias;
	struct alias_target **to;
};

/* One allocation (freed with free(), as the flights' table frees it). */
static struct alias_target *target_new(const char *key, const char *data)
{
	size_t nk = strlen(key) + 1, nd = data != NULL ? strlen(data) + 1 : 0;
	struct alias_target *t = malloc(sizeof(*t) + nk + nd);
	if (t == NULL)
		return NULL;
	char *buf = (char *)(t + 1);
	memcpy(buf, key, nk);
	t->key = buf;
	t->data = NULL;
	if (data != NULL) {
		memcpy(buf + nk, data, nd);
		t->data = buf + nk;
	}
	return t;
}

static bool same_data(const char *a, const char *b)
{
	return a == NULL ? b == NULL : b != NULL && strcmp(a, b) == 0;
}

static bool target_same(const struct alias_target *a, const struct alias_target *b)
{
	return strcmp(a->key, b->key) == 0 && same_data(a->data, b->data);
}

static void alias_flush_free(struct alias_flush *j)
{
	for (size_t i = 0; i < j->n; i++) {
		free(j->alias[i]);
		free(j->to[i]);
	}
	free(j->alias);
	free(j->to);
	free(j);
}

static void alias_flush_work(void *arg)
{
	struct alias_flush *j = arg;
	for (size_t i = 0; i < j->n; i++) {
		int rc = store_set_alias_data(j->d->store, j->alias[i], j->to[i]->key, j->to[i]->data);
		if (rc != 0)
			log_warn("cannot point alias %s at %.16s: %s", j->alias[i], j->to[i]->key,
				 strerror(-rc));
	}
}

static void take_alias(const char *alias, void *val, void *arg)
{
	struct alias_flush *j = arg;
	const struct alias_target *t = val;
	if ((j->alias[j->n] = strdup(alias)) == NULL)
		return;
	if ((j->to[j->n] = target_new(t->key, t->data)) == NULL) {
		free(j->alias[j->n]);
		return;
	}
	j->n++;
}

static void alias_flush_start(struct kilnd *d);

static void alias_flush_done(void *arg, int status)
{
	struct alias_flush *j = arg;
	struct kilnd *d = j->d;
	/* Written: forget those not re-pointed again meanwhile. Not run: all
	 * stay pending, for the next re-point's flush. */
	for (size_t i = 0; status == 0 && i < j->n; i++) {
		struct alias_target *cur = table_get(d->aliases->pending, j->alias[i]);
		if (cur != NULL && target_same(cur, j->to[i]))
			free(table_del(d->aliases->pending, j->alias[i]));
	}
	alias_flush_free(j);
	d->aliases->flushing = false;
	if (status == 0)
		alias_flush_start(d);
}

static struct alias_flush *alias_snapshot(struct kilnd *d)
{
	size_t n = table_count(d->aliases->pending);
	struct alias_flush *j = calloc(1, sizeof(*j));
	if (j == NULL || (j->alias = calloc(n, sizeof(char *))) == NULL ||
	    (j->to = calloc(n, sizeof(*j->to))) == NULL) {
		if (j != NULL)
			free(j->alias);
		free(j);
		return NULL;
	}
	j->d = d;
	table_foreach(d->aliases->pending, take_alias, j);
	return j;
}

static void alias_flush_start(struct kilnd *d)
{
	if (d->aliases->flushing || d->aliases->pending == NULL || table_count(d->aliases->pending) == 0)
		return;
	struct alias_flush *j = alias_snapshot(d);
	if (j == NULL)
		return;
	d->aliases->flushing = true;
	if (kilnd_work(d, POOL_ALIAS_FLUSH, alias_flush_work, alias_flush_done, j) != 0) {
		d->aliases->flushing = false;
		alias_flush_free(j);
	}
}

void alias_point(struct kilnd *d, const char *alias, const char *key, const char *data)
{
	ASSERT_LOOP();
	struct alias_target *t = target_new(key, data);
	void *old = NULL;
	struct table *pending = d->aliases != NULL ? d->aliases->pending : NULL;
	if (t == NULL || pending == NULL || table_put(pending, alias, t, &old) != 0) {
		free(t);
	} else {
		free(old);
		alias_flush_start(d);
	}
	if (d->aliases != NULL && d->aliases->hook != NULL)
		d->aliases->hook(d, alias, key, data);
	/* Even unrecorded, the alias names an entry (the entry's own): the
	 * lookups waiting for its claim look again (daemon/claims.h). */
	claims_published(d, alias);
}

const struct alias_target *alias_pending(const struct kilnd *d, const char *alias)
{
	const struct table *pending = d->aliases != NULL ? d->aliases->pending : NULL;
	return pending != NULL ? table_get(pending, alias) : NULL;
}

void alias_flush_all(struct kilnd *d)
{
	if (d->aliases == NULL || d->aliases->pending == NULL)
		return;
	struct alias_flush *j = alias_snapshot(d);
	if (j != NULL) {
		alias_flush_work(j);
		alias_flush_free(j);
	}
	table_free(d->aliases->pending, free);
	d->aliases->pending = NULL;
}


int alias_entry(struct kilnd *d, const char *alias, struct store_entry *e)
{
	const struct alias_target *pending = alias_pending(d, alias);
	return pending != NULL ? store_get(d->store, pending->key, e)
			       : store_get_by_alias(d->store, alias, e);
}

int alias_data(struct kilnd *d, const char *alias, const char *key, char **data)
{
	*data = NULL;
	const struct alias_target *pending = alias_pending(d, alias);
	if (pending == NULL)
		return store_alias_data(d->store, alias, key, data);
	if (strcmp(pending->key, key) != 0)
		return -ENOENT;
	if (pending->data != NULL && (*data = strdup(pending->data)) == NULL)
		return -ENOMEM;
	return 0;
}

/* The re-point not yet written first, then the entry's own alias (no
 * lookup on the warm path), then the index. */
bool alias_names(struct kilnd *d, const char *alias, const char *data, const struct store_entry *e)
{
	const struct alias_target *pending = alias_pending(d, alias);
	if (pending != NULL)
		return strcmp(pending->key, e->key) == 0 &&
		       (data == NULL || same_data(pending->data, data));
	struct store_entry cur = { 0 };
	bool same = (e->alias != NULL && strcmp(e->alias, alias) == 0) ||
		    (store_get_by_alias(d->store, alias, &cur) == 0 && strcmp(cur.key, e->key) == 0);
	store_entry_free(&cur);
	char *stored = NULL;
	if (same && data != NULL)
		same = store_alias_data(d->store, alias, e->key, &stored) == 0 &&
		       same_data(stored, data);
	free(stored);
	return same;
}

void alias_found(struct kilnd *d, const char *alias, const char *data, const struct store_entry *e)
{
	if (!alias_names(d, alias, data, e))
		alias_point(d, alias, e->key, data);
	else
		claims_published(d, alias);   /* a claim's producer found it: done */
}

enum claim_take alias_claim(struct kilnd *d, const char *alias, struct claim_owner *owner,
			    bool takeover)
{
	enum claim_take took = claims_take(d, alias, CLAIM_ALIAS, owner);
	if (took == CLAIM_GRANTED) {
		d->c.claims++;   /* aliases' claims: the text turns are not counted here */
		d->c.claim_takeovers += takeover;
	}
	return took;
}

int alias_claim_wait(struct kilnd *d, const char *alias, uint64_t ms, struct claim_owner *owner,
		     bool takeover, claim_cb cb, void *arg)
{
	int rc = claims_wait(d, alias, ms, owner, cb, arg);
	if (rc == 0 && !takeover)
		d->c.claim_waits++;   /* a wait after a takeover was counted when it began */
	return rc;
}

void alias_claim_progress(struct kilnd *d, const char *alias)
{
	claims_progress(d, alias);
}

bool alias_release(struct kilnd *d, const char *alias, const struct claim_owner *owner)
{
	return claims_release(d, alias, owner);
}

bool alias_abandon(struct kilnd *d, const char *alias, const struct claim_owner *owner)
{
	return claims_abandon(d, alias, owner);
}

int alias_init(struct kilnd *d)
{
	struct aliases *a = calloc(1, sizeof(*a));
	if (a == NULL || (a->pending = table_new()) == NULL) {
		free(a);
		return -ENOMEM;
	}
	d->aliases = a;
	return 0;
}

void alias_fini(struct kilnd *d)
{
	if (d->aliases == NULL)
		return;
	table_free(d->aliases->pending, free);   /* struct alias_target: one block each */
	free(d->aliases);
	d->aliases = NULL;
}

void alias_set_hook(struct kilnd *d, alias_hook hook)
{
	if (d->aliases != NULL)
		d->aliases->hook = hook;
}
