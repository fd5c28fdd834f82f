/*
 * The hit's owner (hit.h): the one place that decides whether an entry may
 * be served. A request key may have several entries (one per set of
 * recorded inputs, variants.c); a key or an alias names one. Loop thread;
 * reads the index through the store's reader connection.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alias.h"
#include "fdcache.h"
#include "headers.h"
#include "hit.h"
#include "kilnd.h"
#include "log.h"
#include "store.h"
#include "verify.h"

/* e's object borrowed and checked: 0 (h->ref, h->file set), -ENOENT when
 * it is damaged or gone (not to be served: a build replaces it), another
 * negative errno when it cannot be opened now. */
static int open_checked(struct kilnd *d, const struct store_entry *e, struct hit *h)
{
	struct fdref *ref = NULL;
	int rc = fdcache_borrow(d->fds, store_generation(d->store), d->store, e->key, e->output,
				&ref);
	if (rc == -ENOENT) {
		log_warn("entry %.16s has lost its object; rebuilding", e->key);
		return rc;
	}
	if (rc < 0)
		return rc;
	char why[96];
	if (verify_served(d, e, fdref_fd(ref), &h->file, why, sizeof(why)) != 0) {
		char *path = store_object_path(d->store, e->key, e->output);
		log_error("entry %.16s: its object %s is damaged (%s); rebuilding", e->key,
			  path != NULL ? path : "", why);
		free(path);
		d->c.damaged++;
		fdref_put(ref);
		return -ENOENT;
	}
	h->ref = ref;
	return 0;
}

/* One candidate: HIT_VALID (e moved into h), HIT_PENDING, HIT_UNOPENED, or
 * HIT_NONE for the next. */
static int try_entry(struct kilnd *d, const struct hit_query *q, struct store_entry *e,
		     struct hit *h)
{
	if (q->accept != NULL && !q->accept(e, q->accept_arg))
		return HIT_NONE;
	int v = headers_check(d, e);
	if (v == HEADERS_PENDING && q->may_wait)
		return HIT_PENDING;
	if (v != HEADERS_VALID)
		return HIT_NONE;
	int rc = open_checked(d, e, h);
	if (rc == -ENOENT)
		return HIT_NONE;
	if (rc < 0) {
		h->err = rc;
		return HIT_UNOPENED;
	}
	h->entry = *e;
	memset(e, 0, sizeof(*e));
	return HIT_VALID;
}

static int by_rkey(struct kilnd *d, const struct hit_query *q, struct hit *h)
{
	struct store_entry *list = NULL;
	size_t n = 0;
	int rc = store_get_by_rkey(d->store, q->rkey, &list, &n);
	if (rc != 0) {
		h->err = rc == -ENOENT ? 0 : rc;
		return HIT_NONE;
	}
	int v = HIT_NONE;
	for (size_t i = 0; i < n && v == HIT_NONE; i++)
		v = try_entry(d, q, &list[i], h);
	store_entries_free(list, n);
	return v;
}

static int by_name(struct kilnd *d, const struct hit_query *q, struct hit *h)
{
	struct store_entry e = { 0 };
	int rc = q->alias != NULL ? alias_entry(d, q->alias, &e) : store_get(d->store, q->key, &e);
	if (rc != 0) {
		h->err = rc == -ENOENT ? 0 : rc;
		return HIT_NONE;
	}
	int v = try_entry(d, q, &e, h);
	store_entry_free(&e);
	if (v != HIT_VALID || q->alias == NULL)
		return v;
	rc = alias_data(d, q->alias, h->entry.key, &h->alias_data);
	if (rc == 0)
		return HIT_VALID;
	/* Re-pointed meanwhile, or out of memory: not served with other data. */
	h->err = rc == -ENOENT ? 0 : rc;
	store_entry_free(&h->entry);
	memset(&h->entry, 0, sizeof(h->entry));
	if (h->ref != NULL)
		fdref_put(h->ref);
	h->ref = NULL;
	return HIT_NONE;
}

int hit_find(struct kilnd *d, const struct hit_query *q, struct hit *h)
{
	memset(h, 0, sizeof(*h));
	return q->rkey != NULL ? by_rkey(d, q, h) : by_name(d, q, h);
}

void hit_free(struct hit *h)
{
	store_entry_free(&h->entry);
	if (h->ref != NULL)
		fdref_put(h->ref);
	free(h->alias_data);
	memset(h, 0, sizeof(*h));
}
