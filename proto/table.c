/*
 * String-keyed hash table: linear probing over a power-of-two array, backward-
 * shift deletion (no tombstones), growth at 70% load. Lookups are libkiln's
 * fast path, so the hash reads 8 bytes a step and slots keep hash and length.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "table.h"

#define TABLE_MIN_CAP 16

struct table_slot {
	uint64_t hash;
	char *key;     /* NULL for an empty slot */
	size_t len;
	void *val;
};

struct table {
	struct table_slot *slots;
	size_t mask;   /* capacity - 1 */
	size_t count;
};

/* The 64x64->128 multiply folded to 64 bits: one multiply that mixes every
 * input bit into the result, the core step of wyhash and similar hashes. */
static inline uint64_t mum(uint64_t a, uint64_t b)
{
#ifdef __SIZEOF_INT128__
	unsigned __int128 r = (unsigned __int128)a * b;

	return (uint64_t)r ^ (uint64_t)(r >> 64);
#else
	uint64_t r = a * b;

	return r ^ (r >> 29) ^ ((a >> 32) * (b >> 32));
#endif
}

uint64_t table_hash(const char *key, size_t len)
{
	static const uint64_t k0 = 0xa0761d6478bd642full, k1 = 0xe7037ed1a0b428dbull;
	const char *p = key;
	uint64_t h = k0 ^ len, w;
	size_t n = len;

	while (n >= 8) {
		memcpy(&w, p, 8);
		h = mum(w ^ k1, h ^ k0);
		p += 8;
		n -= 8;
	}
	if (n > 0) {
		w = 0;
		memcpy(&w, p, n);
		h = mum(w ^ k1, h ^ k0);
	}
	return mum(h ^ k1, len ^ k0);
}

struct table *table_new(void)
{
	struct table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->slots = calloc(TABLE_MIN_CAP, sizeof(*t->slots));
	if (!t->slots) {
		free(t);
		return NULL;
	}
	t->mask = TABLE_MIN_CAP - 1;
	return t;
}

void table_free(struct table *t, void (*free_val)(void *))
{
	size_t i;

	if (!t)
		return;
	for (i = 0; i <= t->mask; i++) {
		if (!t->slots[i].key)
			continue;
		free(t->slots[i].key);
		if (free_val)
			free_val(t->slots[i].val);
	}
	free(t->slots);
	free(t);
}

/* Returns the slot holding key, or the empty slot where it would go. */
static struct table_slot *find(const struct table *t, const char *key, size_t len,
			       uint64_t h)
{
	size_t i = (size_t)h & t->mask;
	struct table_slot *s;

	for (;;) {
		s = &t->slots[i];
		if (!s->key)
			return s;
		if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0)
			return s;
		i = (i + 1) & t->mask;
	}
}

void *table_get(const struct table *t, const char *key)
{
	size_t len = strlen(key);
	struct table_slot *s = find(t, key, len, table_hash(key, len));

	return s->key ? s->val : NULL;
}

/* Doubles the array and reinserts every entry by its stored hash. */
static int table_grow(struct table *t)
{
	size_t ncap = (t->mask + 1) * 2, i, j;
	struct table_slot *ns;

	ns = calloc(ncap, sizeof(*ns));
	if (!ns)
		return -ENOMEM;
	for (i = 0; i <= t->mask; i++) {
		if (!t->slots[i].key)
			continue;
		j = (size_t)t->slots[i].hash & (ncap - 1);
		while (ns[j].key)
			j = (j + 1) & (ncap - 1);
		ns[j] = t->slots[i];
	}
	free(t->slots);
	t->slots = ns;
	t->mask = ncap - 1;
	return 0;
}

int table_put(struct table *t, const char *key, void *val, void **old)
{
	size_t len = strlen(key);
	uint64_t h = table_hash(key, len);
	struct table_slot *s = find(t, key, len, h);
	char *copy;
	int rc;

	if (s->key) {
		if (old)
			*old = s->val;
		s->val = val;
		return 0;
	}
	if (old)
		*old = NULL;
	/* Keep the load at or below 70% so that probe runs stay short. */
	if ((t->count + 1) * 10 > (t->mask + 1) * 7) {
		rc = table_grow(t);
		if (rc < 0)
			return rc;
		s = find(t, key, len, h);
	}
	copy = malloc(len + 1);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, key, len + 1);
	s->hash = h;
	s->key = copy;
	s->len = len;
	s->val = val;
	t->count++;
	return 0;
}

void *table_del(struct table *t, const char *key)
{
	size_t len = strlen(key);
	struct table_slot *s = find(t, key, len, table_hash(key, len));
	size_t i, j, home;
	void *val;

	if (!s->key)
		return NULL;
	val = s->val;
	free(s->key);
	t->count--;

	/*
	 * Backward-shift deletion: pull later entries of the probe run into the
	 * hole when the hole lies between their home slot and where they sit, so
	 * that every entry stays reachable from its home without tombstones.
	 */
	i = (size_t)(s - t->slots);
	for (j = (i + 1) & t->mask; t->slots[j].key; j = (j + 1) & t->mask) {
		home = (size_t)t->slots[j].hash & t->mask;
		if (((j - home) & t->mask) >= ((j - i) & t->mask)) {
			t->slots[i] = t->slots[j];
			i = j;
		}
	}
	memset(&t->slots[i], 0, sizeof(t->slots[i]));
	return val;
}

size_t table_count(const struct table *t)
{
	return t->count;
}

void table_foreach(const struct table *t, void (*fn)(const char *key, void *val, void *ctx),
		   void *ctx)
{
	size_t i;

	for (i = 0; i <= t->mask; i++) {
		if (t->slots[i].key)
			fn(t->slots[i].key, t->slots[i].val, ctx);
	}
}
