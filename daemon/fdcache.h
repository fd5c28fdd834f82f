/*
 * Open descriptors of recently served objects. A warm hit would otherwise
 * open() its object by path (a path walk of the cache directory, about a
 * fifth of kilnd's time per hit); with the cache it dups a descriptor that
 * is already open. Objects are immutable, so a cached descriptor shows the
 * same bytes as a fresh open for as long as the entry stands. When the
 * index changes (the store's generation moves), the descriptors of the
 * entries written since go (store_changes_since: an object replaced under
 * its key); after changes of many rows everything goes, as it does when
 * the cache is full. Its size is bounded so that it never takes more than
 * a quarter of the daemon's descriptor limit.
 */
#ifndef KILN_DAEMON_FDCACHE_H
#define KILN_DAEMON_FDCACHE_H

#include <stddef.h>
#include <stdint.h>

struct fdcache;

/* Descriptors kilnd keeps open at most (a warm job holds ~50-500 programs). */
#define FDCACHE_MAX 1024

/* NULL on ENOMEM. max is the most descriptors held (clamped to the limit). */
struct fdcache *fdcache_new(size_t max);
/* The objects it keeps open at most: max, or a quarter of the descriptor
 * limit when that is less. */
size_t fdcache_capacity(const struct fdcache *fc);
void fdcache_free(struct fdcache *fc);
struct store;

/*
 * A new descriptor (O_RDONLY, close-on-exec; the caller owns it) of key's
 * object (of kind output) in store s, as of store generation gen: a dup of
 * the cached one, or opened through the store's held objects/ directory and
 * cached. Returns the descriptor or a negative errno (-ENOENT: the object
 * is gone).
 */
int fdcache_open(struct fdcache *fc, uint64_t gen, struct store *s, const char *key,
		 const char *output);

#endif
