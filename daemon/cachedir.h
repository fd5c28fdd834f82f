/*
 * The cache directory, held open by kilnd from start to stop, so that its
 * removal or replacement while kilnd runs is noticed (the name no longer
 * leads to the held directory) and the cache recreated without a restart:
 * a new private directory, its lock taken again (a second kilnd may have
 * started on the free name meanwhile), a new empty index, the caches of
 * the old one dropped. Where that cannot be done, every request that needs
 * the cache is answered `io` with the reason, and kilnd tries again each
 * second. Loop thread only.
 */
#ifndef KILN_DAEMON_CACHEDIR_H
#define KILN_DAEMON_CACHEDIR_H

#include <stddef.h>

struct kilnd;

/*
 * A directory another user can write to, or owns, lets them swap the
 * socket or plant objects in the cache: 0 when dir is a directory of this
 * user (or root) that group and others cannot write, else a negative errno
 * with a sentence (what names the directory's role) in err.
 */
int cachedir_check_private(const char *dir, const char *what, char *err, size_t errlen);

/* Opens the cache directory (after the store): 0, or -errno with err. */
int cachedir_open(struct kilnd *d, char *err, size_t errlen);
/*
 * Checks that the cache directory is still the one kilnd holds, and
 * recreates it when not. Returns 0 when the cache is usable, or a negative
 * errno with the reason in d->cache_why (then also kept for every reply).
 */
int cachedir_check(struct kilnd *d);
/* Closes stores replaced by a recreation once no pool job can use them. */
void cachedir_reap(struct kilnd *d);
void cachedir_close(struct kilnd *d);

#endif
