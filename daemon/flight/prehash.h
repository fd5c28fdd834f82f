/*
 * Inputs hashed while the compiler runs (docs/design.md, "Hashing inputs
 * during the compile"). A build's publish must know the SHA-256 of every
 * file its toolchain read; on a kilnd that has not seen those headers yet,
 * that was 15 ms of a herd's critical path. While a build compiles, a timer
 * reads the trace written so far on the pool and puts the digests of the
 * files it names into the digest cache (digests.h), under the cache's own
 * rules: by identity, never for a file changed in the last 2 s. The publish
 * then finds them there; nothing it checks is skipped.
 */
#ifndef KILN_DAEMON_PREHASH_H
#define KILN_DAEMON_PREHASH_H

struct flight;
struct prehash;

/* Starts hashing for b, whose first compile step starts now (loop thread).
 * Returns NULL when it cannot (no memory): the publish hashes all, as
 * before. */
struct prehash *prehash_start(struct flight *b);
/* Stops it (loop thread; NULL is a no-op). A job in flight finishes on its
 * own; the state is freed after. */
void prehash_stop(struct prehash *p);

#endif
