/*
 * What each committed change touched, for the caches in front of the index
 * (store.h, "Changes"). The store's generation counts committed changes;
 * each change also leaves a record in a ring of STORE_CHANGES: the entry's
 * key and request key, the alias it set, or "anything" for changes of many
 * rows (removal, eviction, reconcile, import of rows). A cache that was
 * filled at generation g and sees the store at h forgets what the records
 * g+1..h name, or everything when a record says "anything" or the ring has
 * moved past g.
 *
 * Ordering: a writer commits, then under chg_lock writes the record and
 * only then publishes the new generation (release). A reader that sees
 * generation h (acquire) therefore finds every record up to h written;
 * records are read under the same lock, so none is overwritten meanwhile
 * (a slot holding a newer generation is detected: everything is forgotten).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "store_int.h"
#include "util.h"

struct store_change_rec {
	uint64_t gen;                    /* the generation this change made */
	bool all;                        /* rows of any entry may have changed */
	char key[KILN_KEY_HEX + 1];      /* "" when none */
	char rkey[KILN_KEY_HEX + 1];
	char *alias;                     /* NULL when none */
};

int store_changes_init(struct store *s)
{
	pthread_mutex_init(&s->chg_lock, NULL);
	if (s->readonly)
		return 0;
	s->changes = calloc(STORE_CHANGES, sizeof(*s->changes));
	return s->changes != NULL ? 0 : -ENOMEM;
}

void store_changes_fini(struct store *s)
{
	if (s->changes != NULL) {
		for (size_t i = 0; i < STORE_CHANGES; i++)
			free(s->changes[i].alias);
		free(s->changes);
		s->changes = NULL;
	}
	pthread_mutex_destroy(&s->chg_lock);
}

static void copy_key(char *dst, const char *src)
{
	size_t n = src != NULL ? strnlen(src, KILN_KEY_HEX) : 0;
	memcpy(dst, src != NULL ? src : "", n);
	dst[n] = '\0';
}

void store_changed_entry(struct store *s, const char *key, const char *rkey, const char *alias)
{
	pthread_mutex_lock(&s->chg_lock);
	uint64_t g = atomic_load_explicit(&s->gen, memory_order_relaxed) + 1;
	if (s->changes != NULL) {
		struct store_change_rec *c = &s->changes[g % STORE_CHANGES];
		free(c->alias);
		c->gen = g;
		c->all = key == NULL && rkey == NULL && alias == NULL;
		copy_key(c->key, key);
		copy_key(c->rkey, rkey);
		c->alias = alias != NULL ? strdup(alias) : NULL;
		if (alias != NULL && c->alias == NULL)
			c->all = true;   /* no memory to name it: say anything changed */
	}
	atomic_store_explicit(&s->gen, g, memory_order_release);
	pthread_mutex_unlock(&s->chg_lock);
}

void store_changed(struct store *s)
{
	store_changed_entry(s, NULL, NULL, NULL);
}

uint64_t store_generation(struct store *s)
{
	return atomic_load_explicit(&s->gen, memory_order_acquire);
}

bool store_changes_since(struct store *s, uint64_t from, uint64_t to,
			 void (*fn)(void *ctx, const char *key, const char *rkey, const char *alias),
			 void *ctx)
{
	if (s->changes == NULL || to < from || to - from >= STORE_CHANGES)
		return false;
	bool ok = true;
	pthread_mutex_lock(&s->chg_lock);
	for (uint64_t g = from + 1; ok && g <= to; g++) {
		const struct store_change_rec *c = &s->changes[g % STORE_CHANGES];
		if (c->gen != g || c->all)
			ok = false;
		else
			fn(ctx, c->key[0] ? c->key : NULL, c->rkey[0] ? c->rkey : NULL, c->alias);
	}
	pthread_mutex_unlock(&s->chg_lock);
	return ok;
}
