/*
 * Warm before the first request (docs/design.md, "Prewarm"): a kilnd that
 * starts on a cache checks its most recently used entries while it waits
 * for the job's first client, as their first hit would (the index read
 * into the hit cache, every dependency's state taken and watched, the
 * object opened and verified), so that the ranks' first requests find
 * them ready. On the loop, a few entries per turn, requests served in
 * between; bounded by PREWARM_MAX_ENTRIES and PREWARM_MAX_MS of loop time.
 * A check found invalid or waiting for a hash is left to the request.
 * Also here: the digests of a toolchain's programs, taken on the pool when
 * its first build begins, which that build's publish needs.
 */
#ifndef KILN_DAEMON_PREWARM_H
#define KILN_DAEMON_PREWARM_H

#include <cjson/cJSON.h>

struct kilnd;
struct toolchain;

#define PREWARM_MAX_ENTRIES 4096
#define PREWARM_MAX_MS 3000

/* Starts it (after the loop serves); a no-op with --no-prewarm. */
void prewarm_start(struct kilnd *d);
/* Stops it and closes its handle (the stop). */
void prewarm_stop(struct kilnd *d);
/* A build of tc begins: the digests of its programs not taken yet are
 * taken on the pool, while it compiles (loop thread). */
void prewarm_toolchain(struct kilnd *d, const struct toolchain *tc);
/* status's "prewarm": {state, entries, checked, valid, ms}. */
void prewarm_status(const struct kilnd *d, cJSON *r);

#endif
