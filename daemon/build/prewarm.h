/*
 * Warm before the first request (docs/design.md, "Prewarm"): a kilnd that
 * starts on a cache checks its most recently used entries while it waits
 * for the job's first client, as their first hit would (the index read
 * into the hit cache, every dependency's state taken and watched, the
 * object opened and verified), so that the ranks' first requests find
 * them ready. On the loop, a few entries per turn, requests served in
 * between; bounded by PREWARM_MAX_ENTRIES and PREWARM_MAX_MS of loop time.
 * A check found invalid or waiting for a hash is left to the request.
 * On the pool meanwhile, the digests of the toolchains' programs are taken,
 * which the first build's publish needs.
 */
#ifndef KILN_DAEMON_PREWARM_H
#define KILN_DAEMON_PREWARM_H

#include <cjson/cJSON.h>

struct kilnd;

#define PREWARM_MAX_ENTRIES 4096
#define PREWARM_MAX_MS 3000

/* Starts it (after the loop serves); a no-op with --no-prewarm. */
void prewarm_start(struct kilnd *d);
/* Stops it and closes its handle (the stop). */
void prewarm_stop(struct kilnd *d);
/* status's "prewarm": {state, entries, checked, valid, ms}. */
void prewarm_status(const struct kilnd *d, cJSON *r);

#endif
