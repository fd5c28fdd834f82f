/*
 * Validation of what an entry was built from. A hit must not serve an
 * artifact whose inputs changed, yet checking hundreds of headers and
 * probed paths with stat() on every request would put system calls on the
 * hot path. So paths are watched with inotify where its events are
 * complete, and stat'ed once per batch of requests elsewhere (headers.c).
 */
#ifndef KILN_DAEMON_HEADERS_H
#define KILN_DAEMON_HEADERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

struct kilnd;

int headers_init(struct kilnd *d);
void headers_fini(struct kilnd *d);

enum headers_verdict { HEADERS_INVALID, HEADERS_VALID, HEADERS_PENDING };

/*
 * Whether every dependency of e is still in its recorded state: files
 * with the recorded content, found paths still there with the same type
 * and permissions, missing paths still missing, environment variables as
 * recorded. Runs on the loop thread. Costs one non-blocking read of the
 * inotify descriptor when a request was read since the last one
 * (headers_requests_read); then a hash-table probe when nothing changed
 * since e was last found valid and every dependency is watched by a
 * complete event source; otherwise a stat per dependency not yet checked
 * in this batch of requests, and a digest of every file whose identity
 * changed. A changed file above 256 KiB is hashed on the pool: then
 * HEADERS_PENDING, and headers_wait says when to ask again.
 */
int headers_check(struct kilnd *d, const struct store_entry *e);
/* After HEADERS_PENDING: calls cb(arg) on the loop once the hash it waits
 * for is over (then headers_check again). 0, or -EINVAL/-ENOMEM (cb will
 * not be called). */
int headers_wait(struct kilnd *d, void (*cb)(void *arg), void *arg);
/* Events read, floods (more events than a bounded read: everything
 * stat'ed once) and files hashed on the pool since the start. */
void headers_counts(const struct kilnd *d, uint64_t *events, uint64_t *floods,
		    uint64_t *hashed_on_pool);
/* Whether inotify and the mount watch work (`kiln status`). */
bool headers_events_complete(const struct kilnd *d);
/*
 * The server calls this after each read of request bytes. A client that
 * changed a header before sending its request had the change's inotify
 * event queued before the request could be read, so one drain of the queue
 * after the read (done by the next headers_check) sees it: one read() per
 * batch of requests instead of one per request.
 */
void headers_requests_read(struct kilnd *d);

#endif
