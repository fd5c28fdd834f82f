/*
 * A lock-free-read hash map for the process-local alias table (see
 * lib_alias.h). Open addressing; keys are never removed (a released
 * program's aliases map to NULL, a miss). A slot is filled
 * value first, then key with a release store, so a reader that sees the key
 * sees the value. Growing copies into a new array that is published with a
 * release store; old arrays stay allocated (readers may still be in them)
 * until the map is freed, which costs at most the size of the final array.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lib_alias.h"
#include "table.h"

#define ALIAS_MIN_CAP 64

struct alias_slot {
	_Atomic(const char *) key;        /* owned by the map once set */
	_Atomic(struct kiln_program *) val;
	uint64_t hash;
};

struct alias_arr {
	size_t mask;
	struct alias_arr *older;          /* arrays replaced by growing */
	struct alias_slot slots[];
};

static struct alias_arr *arr_new(size_t cap, struct alias_arr *older)
{
	struct alias_arr *a = calloc(1, sizeof(*a) + cap * sizeof(a->slots[0]));
	if (a == NULL)
		return NULL;
	a->mask = cap - 1;
	a->older = older;
	return a;
}

int alias_map_init(struct alias_map *m)
{
	struct alias_arr *a = arr_new(ALIAS_MIN_CAP, NULL);
	if (a == NULL)
		return -ENOMEM;
	atomic_init(&m->cur, a);
	m->count = 0;
	return 0;
}

void alias_map_fini(struct alias_map *m)
{
	struct alias_arr *a = atomic_load(&m->cur);
	/* Keys belong to the newest array; older ones share the same pointers. */
	for (size_t i = 0; a != NULL && i <= a->mask; i++)
		free((char *)atomic_load_explicit(&a->slots[i].key, memory_order_relaxed));
	while (a != NULL) {
		struct alias_arr *older = a->older;
		free(a);
		a = older;
	}
	atomic_store(&m->cur, NULL);
}

struct kiln_program *alias_map_get(struct alias_map *m, const char *alias)
{
	size_t len = strlen(alias);
	uint64_t h = table_hash(alias, len);
	struct alias_arr *a = atomic_load_explicit(&m->cur, memory_order_acquire);
	for (size_t i = (size_t)h & a->mask;; i = (i + 1) & a->mask) {
		const char *k = atomic_load_explicit(&a->slots[i].key, memory_order_acquire);
		if (k == NULL)
			return NULL;
		if (a->slots[i].hash == h && strcmp(k, alias) == 0)
			return atomic_load_explicit(&a->slots[i].val, memory_order_acquire);
	}
}

/* Places key in a (which has room); the writer lock is held. */
static void arr_insert(struct alias_arr *a, const char *key, uint64_t h, struct kiln_program *p)
{
	size_t i = (size_t)h & a->mask;
	while (atomic_load_explicit(&a->slots[i].key, memory_order_relaxed) != NULL)
		i = (i + 1) & a->mask;
	a->slots[i].hash = h;
	atomic_store_explicit(&a->slots[i].val, p, memory_order_relaxed);
	atomic_store_explicit(&a->slots[i].key, key, memory_order_release);
}

static int alias_grow(struct alias_map *m, struct alias_arr *a)
{
	struct alias_arr *n = arr_new((a->mask + 1) * 2, a);
	if (n == NULL)
		return -ENOMEM;
	for (size_t i = 0; i <= a->mask; i++) {
		const char *k = atomic_load_explicit(&a->slots[i].key, memory_order_relaxed);
		if (k != NULL)
			arr_insert(n, k, a->slots[i].hash,
				   atomic_load_explicit(&a->slots[i].val, memory_order_relaxed));
	}
	atomic_store_explicit(&m->cur, n, memory_order_release);
	return 0;
}

int alias_map_put(struct alias_map *m, const char *alias, struct kiln_program *p)
{
	size_t len = strlen(alias);
	uint64_t h = table_hash(alias, len);
	struct alias_arr *a = atomic_load_explicit(&m->cur, memory_order_relaxed);
	for (size_t i = (size_t)h & a->mask;; i = (i + 1) & a->mask) {
		const char *k = atomic_load_explicit(&a->slots[i].key, memory_order_relaxed);
		if (k == NULL)
			break;
		if (a->slots[i].hash == h && strcmp(k, alias) == 0) {
			atomic_store_explicit(&a->slots[i].val, p, memory_order_release);
			return 0;
		}
	}
	/* Grow at 50 % load: probe runs stay short for the lock-free readers. */
	if ((m->count + 1) * 2 > a->mask + 1) {
		if (alias_grow(m, a) != 0)
			return -ENOMEM;
		a = atomic_load_explicit(&m->cur, memory_order_relaxed);
	}
	char *key = strdup(alias);
	if (key == NULL)
		return -ENOMEM;
	arr_insert(a, key, h, p);
	m->count++;
	return 0;
}

void alias_map_drop(struct alias_map *m, const struct kiln_program *p)
{
	/* The older arrays too: a reader may still be in one. A reader that
	 * got p before this store still finds p's references at zero. */
	for (struct alias_arr *a = atomic_load_explicit(&m->cur, memory_order_relaxed); a != NULL;
	     a = a->older)
		for (size_t i = 0; i <= a->mask; i++)
			if (atomic_load_explicit(&a->slots[i].val, memory_order_relaxed) == p)
				atomic_store_explicit(&a->slots[i].val, NULL, memory_order_release);
}
