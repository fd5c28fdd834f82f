/*
 * A string-keyed hash table with open addressing, for the daemon's in-memory
 * maps and libkiln's process-local program table. Not thread-safe: callers
 * lock. Keys are copied; values are opaque pointers owned by the caller.
 */
#ifndef KILN_PROTO_TABLE_H
#define KILN_PROTO_TABLE_H

#include <stddef.h>
#include <stdint.h>

struct table;

/* The table's string hash (64-bit, fast, not cryptographic). */
uint64_t table_hash(const char *key, size_t len);

struct table *table_new(void);
/* Frees the table and its key copies; calls free_val (may be NULL) on values. */
void table_free(struct table *t, void (*free_val)(void *));
void *table_get(const struct table *t, const char *key);
/* Inserts or replaces; returns the previous value through *old (may be NULL).
 * Returns 0 or -ENOMEM. */
int table_put(struct table *t, const char *key, void *val, void **old);
/* Removes key and returns its value, or NULL. */
void *table_del(struct table *t, const char *key);
size_t table_count(const struct table *t);
/* Calls fn for every entry; fn must not modify the table. */
void table_foreach(const struct table *t, void (*fn)(const char *key, void *val, void *ctx),
		   void *ctx);

#endif
