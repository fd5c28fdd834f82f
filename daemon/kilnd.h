/*
 * The daemon's shared state. One struct kilnd lives for the life of the
 * process; only the loop thread touches it, except where a field says so.
 */
#ifndef KILN_DAEMON_KILND_H
#define KILN_DAEMON_KILND_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "counters.h"
#include "config.h"
#include "key.h"
#include "msg.h"
#include "store.h"

struct table;
struct headers;
struct claims;
struct server;
struct flight;
struct flights;
struct aliases;
struct stats_saver;
struct prewarm;
struct fdcache;
struct child_watch;
struct build_tier;
struct upstream;
struct named_retired;
struct named;

/* kilnd's counters: one member per row of proto/counters.h's KILN_COUNTERS,
 * which also names them for status, the index, kiln stats and Prometheus. */
#define KILND_COUNTER_FIELD(name, upstream, help) uint64_t name;
struct counters {
	KILN_COUNTERS(KILND_COUNTER_FIELD)
};
#undef KILND_COUNTER_FIELD

/* Hits and misses per toolchain, build times (stats.c). */
struct stats_toolchain {
	uint64_t hits, misses, builds_ok, builds_failed;
};

/* One failed build of this run, for status (the Slurm epilogue names them). */
#define STATS_FAILED_KEPT 8
struct stats_failed {
	char name[257];      /* the label, else the alias, else the first source:
	                      * each fits whole, never a cut UTF-8 sequence (stats.c) */
	char rkey[17];       /* kiln log takes it */
};

struct stats_extra {
	struct stats_toolchain tc[CONFIG_MAX_TOOLCHAINS];     /* parallel to kilnd's toolchains */
	struct stats_failed failed[STATS_FAILED_KEPT];        /* the latest, a ring */
	uint64_t nfailed;                  /* failed builds put in the ring */
	uint64_t build_buckets[STORE_BUILD_BUCKETS];  /* builds by duration (not cumulative) */
	uint64_t build_ms_sum;
	int64_t since;                     /* Unix seconds: counting since (zeroed, or first start) */
};

/* Stores of removed cache directories, kept until no pool job can use them. */
#define KILND_MAX_OLD_STORES 8

struct kilnd {
	uv_loop_t *loop;
	struct config *cfg;
	/* Atomic: pool jobs read it while the loop thread may replace it when
	 * the cache directory is made again (cachedir.h). */
	struct store *_Atomic store;
	struct store *old_stores[KILND_MAX_OLD_STORES];
	size_t nold_stores;
	int cache_fd;                /* the cache directory, held open */
	uint64_t cache_dev, cache_ino;
	char cache_why[5000];         /* why the cache is unusable now, or "" */
	struct toolchain toolchains[CONFIG_MAX_TOOLCHAINS];
	size_t ntoolchains;
	struct table *named;          /* toolchains named by path (named.h) */
	struct table *named_ok;       /* names found permitted lately (named.c) */
	struct table *variants;       /* program -> request keys built (variants.c) */
	struct named_retired *named_retired;  /* their replaced identities */
	size_t nnamed_retired;
	unsigned named_running;       /* identifications on the pool */
	struct named *named_queue, *named_queue_tail;  /* waiting for one */
	uint8_t cpu_id[32];
	uint64_t start_ns;

	struct counters c;
	struct stats_extra stats;    /* per toolchain, build times, since (stats.h) */
	struct stats_saver *saver;   /* what was saved of them, and the timer (stats.c) */
	bool evicting, measuring;    /* an eviction, a measurement on the pool now (kilnd.c) */
	bool evict_over_said;        /* "over the limit, all pinned" logged (kilnd.c) */
	uint64_t entries, bytes;     /* cache totals, refreshed after every write */
	struct store_footprint disk; /* what the cache takes: max-size bounds disk.total;
	                              * its index and other parts measured on the pool */
	uint64_t overhead_ns;        /* when they were (util_now_ns) */
	struct store_formats formats; /* entries by key format, at start and after gc */
	bool remove_new_cache;       /* a failed start removes the cache it made */
	const char *max_size_source; /* "command line", "kiln.conf" or "default" */

	struct server *server;
	struct headers *headers;
	struct prewarm *prewarm;     /* checks recent entries before the first request */
	struct flights *fl;          /* the flight layer's own state, private to daemon/flight/ */
	struct aliases *aliases;     /* where aliases point now (flight/alias.c) */
	struct table *tc_hashed;     /* toolchain programs whose digests were taken (prewarm.c) */
	struct table *touches;       /* key -> struct touch, uses not yet written */
	struct claims *claims;       /* alias -> its claim (claims.h) */
	struct fdcache *fds;         /* open descriptors of served objects (fdcache.h) */
	struct child_watch *children;  /* the build steps' kiln-exec processes (child.h) */
	struct table *verified;      /* key -> stamp of objects checked intact (verify.h) */
	struct upstream *up;         /* the --upstream tier (upstream.h), or NULL */
	const struct build_tier *tier;  /* its hooks into the flights (flight.h), or NULL */
	struct gpus *gpus;           /* detected at start (gpu.h) */
	char *observe_lib;           /* kiln-observe.so next to kiln-exec, or NULL */
	char *hello_tail;            /* hello's reply after id, ok and heartbeat (op_hello.c) */
	struct msg_args_memo args_memo; /* the last accepted argument list's verdict (msg.h);
	                              * the loop's parser only */
	int landlock_abi;            /* > 0: compilers write only in their build directory */
	char landlock_why[160];      /* why not, when 0 */
	bool activated;              /* the socket came from systemd (sdnotify.h) */
	int activated_fd;

	uint64_t work_pending;       /* thread-pool jobs not yet completed */
	bool sweep_pending;          /* the check after an unclean stop has not finished */
	bool stopping;
	int exit_code;
	uv_signal_t sig_term, sig_int, sig_hup;
	uv_timer_t touch_timer;
	uv_timer_t prune_timer;      /* logs of failed builds: pruned now and then */
	uv_timer_t idle_timer;
	uv_timer_t cache_timer;      /* the cache directory checked (cachedir.h) */
	void (*stop)(struct kilnd *d);  /* the stop sequence (lifecycle.h) */
	uint64_t last_activity_ns;
};

/* Finds a configured toolchain by name, or NULL. */
const struct toolchain *kilnd_toolchain(const struct kilnd *d, const char *name);
/* Begins a graceful stop: stop accepting, fail waiters, kill compilers
 * (d->stop, lifecycle.c's, set by main). */
void kilnd_stop(struct kilnd *d);
/* Marks the daemon busy now (for --idle-exit). */
void kilnd_activity(struct kilnd *d);

/*
 * The jobs kilnd runs on libuv's thread pool, all listed here (as redis's
 * bio.c lists its background jobs). Why a pool: each blocks on the disk, a
 * shared filesystem or a child process, or hashes megabytes, and the loop
 * must go on answering hits meanwhile. The contract: the job's function
 * runs on a pool thread and touches only what its argument hands it (never
 * the loop's tables, a build or a connection, which it may carry as opaque
 * pointers back to the loop); its completion runs on the loop thread. The
 * funnel (kilnd_work) asserts both, counts the jobs pending (a stop waits
 * for them) and passes libuv's status on: 0, or UV_ECANCELED when the job
 * was cancelled before it ran (its function did not run, and its
 * completion must treat its work as not done).
 */
#define KILND_POOL_JOBS(X) \
	X(PREPARE, "prepare")          /* a build's directory and sources (publish.c) */ \
	X(PUBLISH, "publish")          /* a build into the store: hash, place, index (publish.c) */ \
	X(CLEANUP, "cleanup")          /* a build's directory removed, its log kept (publish.c) */ \
	X(ALIAS_FLUSH, "alias_flush")  /* alias re-points written to the index (alias.c) */ \
	X(TC_DIGESTS, "tc_digests")    /* a toolchain's programs hashed (prewarm.c) */ \
	X(PREHASH, "prehash")          /* a compiling build's inputs hashed so far (prehash.c) */ \
	X(HASH, "hash")                /* a dependency hashed for hit validation (headers.c) */ \
	X(TOUCH, "touch")              /* batched uses written to the index (kilnd.c) */ \
	X(MEASURE, "measure")          /* the cache's parts outside the entries measured (kilnd.c) */ \
	X(EVICT, "evict")              /* eviction down to --max-size (kilnd.c) */ \
	X(SWEEP, "sweep")              /* the check of the cache after an unclean stop (kilnd.c) */ \
	X(PRUNE, "prune")              /* old logs of failed builds removed (kilnd.c) */ \
	X(STATS_SAVE, "stats_save")    /* statistics written to the index (stats.c) */ \
	X(IDENT, "ident")              /* a toolchain named by path identified (named.c) */ \
	X(KEYING, "keying")            /* a request's sources read and hashed (keying.c) */ \
	X(WRITE, "write")              /* rm, pin, label, gc: index writes for a client (op_entries.c) */ \
	X(CONFIG, "config")            /* kiln.conf read or written (op_settings.c) */ \
	X(IMPORT, "import")            /* put: an artifact checked and imported (op_put.c) */ \
	X(TRANSFER, "transfer")        /* export or import of a directory (op_transfer.c) */ \
	X(VERIFY, "verify")            /* objects checked against their SHA-256 (op_verify.c) */ \
	X(UP_LOOK, "up_look")          /* the upstream tier looked at, a claim made (upstream.c) */ \
	X(UP_PUBLISH, "up_publish")    /* a build published upstream (upstream.c) */ \
	X(UP_ALIAS, "up_alias")        /* an alias record written or looked up (upstream_alias.c) */ \
	X(UP_REFRESH, "up_refresh")    /* this node's claims kept fresh (upstream.c) */ \
	X(UP_UNCLAIM, "up_unclaim")    /* a claim removed (upstream.c) */ \
	X(UP_SWEEP, "up_sweep")        /* the tier's tmp/ swept (upstream.c) */

#define KILND_POOL_JOB_ENUM(id, name) POOL_##id,
enum pool_job { KILND_POOL_JOBS(KILND_POOL_JOB_ENUM) POOL__COUNT };
#undef KILND_POOL_JOB_ENUM
/* The job's name, for the log. */
const char *kilnd_pool_job_name(enum pool_job kind);

/*
 * Runs fn(arg) on the thread pool, then done(arg, status) on the loop
 * thread (done may be NULL). Returns 0 or a negative libuv error (then
 * neither callback runs: the caller still owns arg).
 */
int kilnd_work(struct kilnd *d, enum pool_job kind, void (*fn)(void *arg),
	       void (*done)(void *arg, int status), void *arg);
/* What a request or build is told when kilnd_work failed (the one wording:
 * the server's conn_queue_work, a flight's stages, the tier). */
#define KILND_WORK_REFUSED "cannot queue work on the thread pool"

/* Queues a use of key for the batched last_used/uses update. */
void kilnd_touch(struct kilnd *d, const char *key);
/* Adds the uses of e not yet written to the index, so replies are current. */
void kilnd_pending_uses(struct kilnd *d, struct store_entry *e);
/* Takes the queued uses, for a pool job that needs them in the index first
 * (eviction); NULL when there are none. kilnd_touches_write (on the pool)
 * writes and frees the batch; NULL is fine. */
void *kilnd_touches_take(struct kilnd *d);
void kilnd_touches_write(void *batch);
/* Writes queued uses now (blocking: shutdown only). */
void kilnd_flush_touches(struct kilnd *d);
/* Starts and stops the use-flushing timer. */
int kilnd_timers_start(struct kilnd *d);
void kilnd_timers_stop(struct kilnd *d);
/* After an unclean stop: checks the cache in the background, a step at a
 * time on the pool (store_sweep_step), while kilnd serves; every object is
 * checked anyway before its first serve (verify.h). sweep_pending stays set
 * until it finished, so a stop before that leaves no clean mark. */
void kilnd_sweep_start(struct kilnd *d);
/* The files outside the entries as a pool job measured them (store_overhead). */
void kilnd_set_overhead(struct kilnd *d, uint64_t index, uint64_t other);
/* Re-reads entries and bytes from the index (the files outside the entries
 * measured again on the pool, at most once a second); evicts when over
 * --max-size. */
void kilnd_refresh_totals(struct kilnd *d);

#endif
