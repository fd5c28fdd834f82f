/*
 * A process-wide cache of file digests by identity (device, inode, size,
 * mtime and ctime in ns), shared by the loop (validating hits) and the pool
 * (publishing builds), so that an unchanged file is hashed once per kilnd:
 * the 30 MB cc1plus every C++ build executes, libc, the headers. ctime
 * moves with every change to a file and cannot be set by its owner, so an
 * unchanged identity stands for unchanged content, except within the
 * timestamp granularity: a digest taken less than DIGESTS_RACY_NS after the
 * file's last change is not kept (the "racily clean" rule of git).
 */
#ifndef KILN_DAEMON_DIGESTS_H
#define KILN_DAEMON_DIGESTS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#define DIGESTS_RACY_NS 2000000000LL

/* True when a digest of st taken now may stand for the content later. */
bool digests_settled(const struct stat *st);
/*
 * The SHA-256 of the regular file at path into out, from the cache when its
 * identity is unchanged, else hashed (and kept when settled). *st gets the
 * identity that stands for the digest: the file is stat'ed before and after
 * hashing, and a change in between is -EAGAIN. 0 or a negative errno.
 * Thread-safe.
 */
int digests_file(const char *path, uint8_t out[32], struct stat *st);
/* Files hashed (and their bytes) and answers from the cache since the
 * start (status "digests"): an import of a program whose dependencies a
 * build or an earlier import already hashed reads none of them again. */
void digests_counts(uint64_t *hashed, uint64_t *hashed_bytes, uint64_t *cached);
/*
 * Saves the cache as dirfd/name (written in tmpfd, the cache's tmp/, which
 * a start empties, and renamed: atomic; blocking: at a clean stop),
 * tagged with the kernel's boot id; digests_load puts such a file's digests
 * into the cache at the next start, when it is of this boot (a reboot may
 * give device numbers, which the identities hold, to other devices).
 * digests_save: 0 or a negative errno; digests_load: the number loaded, or
 * a negative errno (-ESTALE: another boot's, or not a digest file).
 */
#define DIGESTS_FILE "digests"
int digests_save(int dirfd, const char *name, int tmpfd);
long digests_load(int dirfd, const char *name);
/* Frees the cache (at exit). */
void digests_fini(void);

#endif
