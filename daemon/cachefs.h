/*
 * The filesystem the cache directory is on: a network or cluster filesystem
 * (NFS, Lustre, GPFS, BeeGFS, CephFS, SMB, ...) is refused unless
 * --allow-network-cache says otherwise. The cache's SQLite index relies on
 * file locking those filesystems do not provide reliably, and a cache there
 * makes every hit cross the network; the default ~/.cache/kiln is on one on
 * most clusters. Sharing between nodes is --upstream's job.
 */
#ifndef KILN_DAEMON_CACHEFS_H
#define KILN_DAEMON_CACHEFS_H

#include <stdbool.h>
#include <stddef.h>

/*
 * The name of a network or cluster filesystem for a statfs(2) f_type
 * ("NFS", "Lustre", ...), or NULL for any other (local disks, tmpfs,
 * overlayfs, and FUSE, whose one type covers local and remote ones alike).
 * Only the low 32 bits of magic count. The returned string is static.
 */
const char *cachefs_network_name(unsigned long magic);

/*
 * The refusal of a cache directory dir on the network filesystem of type
 * magic, into err: what and why, a node-local directory to use instead
 * (local: a suggestion such as "/tmp/kiln-1000/cache", or NULL when none
 * is known), --upstream for sharing, and --allow-network-cache.
 */
void cachefs_refusal(const char *dir, unsigned long magic, const char *local, char *err,
		     size_t errlen);

/*
 * Checks the filesystem of the cache directory dir, or of its nearest
 * existing parent when dir does not exist yet (then nothing is created on
 * it). 0 when it is not a network filesystem (or statfs cannot tell: what
 * is wrong then shows when the directory is made or opened), or when allow
 * is true (then *netfs, else NULL, names the network filesystem for a
 * warning); -EREMOTE with cachefs_refusal's sentence in err when it is one
 * and allow is false.
 */
int cachefs_check(const char *dir, bool allow, const char **netfs, char *err, size_t errlen);

#endif
