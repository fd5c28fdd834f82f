/*
 * The daemon as a whole, above every module: the timers that watch it (idle
 * exit, the cache directory each second) and the graceful stop sequence,
 * which reaches down into the server, the flights and the header table.
 * Loop thread only.
 */
#ifndef KILN_DAEMON_LIFECYCLE_H
#define KILN_DAEMON_LIFECYCLE_H

struct kilnd;

/* Starts the idle-exit and cache-directory timers. */
void lifecycle_start(struct kilnd *d);
/* The stop sequence (d->stop): stop accepting, fail the waiters, kill the
 * compilers, close the rest once builds and pool jobs are over. */
void lifecycle_stop(struct kilnd *d);

#endif
