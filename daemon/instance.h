/*
 * One daemon per socket and per cache directory: exclusive locks on
 * "<socket>.lock" and "<cache-dir>/kilnd.lock", and --daemonize, whose parent
 * returns only once the child accepts connections (or found another kilnd).
 */
#ifndef KILN_DAEMON_INSTANCE_H
#define KILN_DAEMON_INSTANCE_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

/*
 * Forks. The parent waits for the child's instance_ready() and exits with
 * its status (printing the daemon's pid); the child returns 0 in a new
 * session. Returns a negative errno when fork fails.
 */
int instance_daemonize(void);
/*
 * Raises RLIMIT_NOFILE's soft limit to INSTANCE_NOFILE where the hard limit
 * allows, then grows this process's descriptor table to hold at least n
 * descriptors (at most the soft limit), once, at start. The kernel grows the
 * table of a process with threads only after an RCU grace period
 * (synchronize_rcu in expand_fdtable): milliseconds during which the thread
 * that opened the descriptor sleeps. Grown later, that thread is the loop's.
 * Best effort: nothing is said when it cannot.
 */
void instance_reserve_fds(unsigned n);
/* The soft descriptor limit kilnd raises itself to (or to the hard limit). */
#define INSTANCE_NOFILE 65536
/*
 * Tells a waiting --daemonize parent the outcome: status 0 with the serving
 * daemon's pid, or 1 with an error message. A no-op in the foreground.
 */
/* True while the --daemonize parent waits for instance_ready (it prints
 * the message of a failed start itself). */
bool instance_parent_waits(void);
void instance_ready(int status, long pid, const char *msg);

/*
 * Takes both locks. A lock that is held is waited for (up to 10 s): when its
 * owner's socket accepts, returns 1 with *other_pid and msg describing that
 * kilnd; when the owner lets go (it was stopping), takes the lock. Returns
 * 0 when this process owns both, INSTANCE_CACHE_IN_USE with msg, or a
 * negative errno with msg (-EBUSY: the owner holds on without answering).
 */
int instance_lock(const struct config *cfg, long *other_pid, char *msg, size_t msglen);
/* instance_lock: the cache directory is served by another kilnd on another
 * socket (kilnd then exits KILND_EXIT_CACHE_IN_USE). */
#define INSTANCE_CACHE_IN_USE 2
/* kilnd's exit status when its cache directory is another kilnd's. */
#define KILND_EXIT_CACHE_IN_USE 3
/*
 * The cache directory's lock again, after the directory was removed and
 * made anew (cachedir.c). 0 when taken, 1 with msg when another kilnd holds
 * it, or a negative errno with msg.
 */
int instance_relock_cache(const struct config *cfg, long *other_pid, char *msg, size_t msglen);
/* True while the cache lock kilnd holds is the kilnd.lock in the directory
 * cache_dir_fd (a removed lock file lets a second kilnd in). */
bool instance_cache_lock_intact(int cache_dir_fd);
/* Lets go of both locks, removing their files (no .lock is left behind). */
void instance_unlock(void);

#endif
