/*
 * Open descriptors of recently served objects. A warm hit would otherwise
 * open() its object by path (a path walk of the cache directory, about a
 * fifth of kilnd's time per hit); with the cache it borrows a descriptor
 * that is already open. Objects are immutable, so a cached descriptor shows the
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
 * A descriptor shared by the cache and the replies that carry it: closed
 * when the last holder lets go (fdref_put). A hit borrows the cached
 * descriptor rather than dup'ing it, so that neither a dup nor a close is
 * paid per reply, and an eviction while a reply still waits to be written
 * closes nothing under it. Loop thread only, as the cache.
 */
struct fdref;

int fdref_fd(const struct fdref *r);
void fdref_put(struct fdref *r);

/*
 * Key's object (of kind output) in store s, as of store generation gen: the
 * cached descriptor, or one opened through the store's held objects/
 * directory (O_RDONLY, close-on-exec) and cached. On success *ref holds a
 * reference the caller gives back with fdref_put once it is done with the
 * descriptor (fdref_fd); the caller must not close it. Returns 0 or a
 * negative errno (-ENOENT: the object is gone).
 */
int fdcache_borrow(struct fdcache *fc, uint64_t gen, struct store *s, const char *key,
		   const char *output, struct fdref **ref);

#endif
