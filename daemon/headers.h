/*
 * Validation of the headers an entry was built with. A hit must not serve an
 * artifact whose headers changed, yet checking dozens of headers with stat()
 * on every request would put system calls on the hot path. So each header
 * directory is watched with inotify: a header's state (size, mtime, digest)
 * is computed once and trusted until an event says it changed.
 */
#ifndef KILN_DAEMON_HEADERS_H
#define KILN_DAEMON_HEADERS_H

#include <stdbool.h>
#include <stddef.h>

#include "store.h"

struct kilnd;

int headers_init(struct kilnd *d);
void headers_fini(struct kilnd *d);

/*
 * True when every dependency of e still has the recorded content. Runs on the
 * loop thread; costs one non-blocking read of the inotify descriptor when a
 * request was read since the last one (headers_requests_read), plus,
 * only for headers that changed since they were last checked (or that cannot
 * be watched: behind a symlink, or on a network filesystem), a stat and a
 * digest of the file. A changed file above 1 MiB counts as invalid (a rebuild
 * is correct, just maybe unneeded) so that the loop never hashes a large
 * file; unchanged large files (shared libraries a link read) are trusted when
 * their size and mtime still match what the build recorded.
 */
bool headers_valid(struct kilnd *d, const struct store_entry *e);
/*
 * The server calls this after each read of request bytes. A client that
 * changed a header before sending its request had the change's inotify
 * event queued before the request could be read, so one drain of the queue
 * after the read (done by the next headers_valid) sees it: one read() per
 * batch of requests instead of one per request.
 */
void headers_requests_read(struct kilnd *d);

#endif
