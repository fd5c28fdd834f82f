/*
 * The rest of the upstream tier's filesystem side, private to daemon/tier/:
 * claims (upstream_fs.c) and the sweep of tmp/. The directory's format
 * (opening it, finding and publishing entries) is in upstream_fs.h. None of
 * these touches the daemon's loop-owned state; all but upfs_mkdir block.
 */
#ifndef KILN_DAEMON_UPSTREAM_INT_H
#define KILN_DAEMON_UPSTREAM_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "store.h"
#include "upstream_fs.h"

/* What one daemon saw of another node's claim, to tell when it went stale:
 * the claim must have stayed the same file with the same mtime for stale_s
 * by this daemon's monotonic clock (no clock skew enters). */
struct up_seen {
	bool valid;
	uint64_t dev, ino;
	int64_t mtime_ns;
	uint64_t since_ns;     /* CLOCK_MONOTONIC when first seen like this */
	double age_s;          /* its mtime's age by this node's clock, when last seen */
	char owner[160];       /* the claim's text, for the log */
};

static inline int64_t upfs_mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}
/* mkdir with mode 0700; an existing directory is fine. 0 or a negative errno. */
int upfs_mkdir(const char *path);

/* Makes objects/, entries/, claims/ and tmp/ where missing (removed by hand
 * while kilnd runs). 0 or a negative errno. */
int upfs_ensure_dirs(const struct up_dirs *u);

/* The claim file of rkey, malloc'd (NULL on ENOMEM). */
char *upfs_claim_path(const struct up_dirs *u, const char *rkey);
/*
 * Tries to claim rkey: creates its claim with O_CREAT|O_EXCL. When another
 * node holds it, updates *seen and takes the claim over once it is stale
 * (seen unchanged for stale_s, or its mtime older than twice that by this
 * node's clock: a leftover of an ended job). Returns 0 with *fd open (for
 * refreshing) and *took_over set, 1 while another node holds the claim, or a
 * negative errno when the claim cannot be made at all.
 */
int upfs_claim(const struct up_dirs *u, const char *rkey, struct up_seen *seen, int *fd,
	       bool *took_over);
/* Looks at rkey's claim without making one (updating *seen): 1 while
 * another node holds it, 0 when there is none or it is stale, or a negative
 * errno. */
int upfs_watch(const struct up_dirs *u, const char *rkey, struct up_seen *seen);
/* Sets the claim's mtime to now (a refresh). */
int upfs_touch(int fd);
/* Removes the claim at path if it is still the file fd holds (a claim that
 * another node took over is theirs), and closes fd. */
void upfs_unclaim(const char *path, int fd);

/* Makes a file in tmp/ (named after tag and key) from data or from the
 * file src; read-only, fsync'ed, closed. With src, reports its size and
 * SHA-256. Its path in path. 0 or a negative errno. */
int upfs_write_tmp(const struct up_dirs *u, const char *tag, const char *key, const char *data,
		   size_t len, const char *src, uint64_t *size, uint8_t digest[32], char *path,
		   size_t pathlen);
/* After placing tmp into dir (rc: 0 or 1 placed, or a negative errno):
 * dir fsync'ed; on an error tmp removed. rc, or the fsync's error. */
int upfs_placed(int rc, const char *tmp, const char *dir);

/* The tier's directory (loop thread, or a pool job of the tier). */
struct kilnd;
const struct up_dirs *upstream_dirs(struct kilnd *d);
/* While set, an alias pointed at an entry is not recorded upstream (one
 * just taken from there). Loop thread. */
bool upstream_alias_quiet(struct kilnd *d);
void upstream_alias_quiet_set(struct kilnd *d, bool quiet);

/*
 * One waiter on another node's claim, polled by the tier's timer with the
 * back-off and pace of every waiter (upstream.c): a flight waiting for a
 * build, or a lookup waiting for an alias's lease (upstream_lease.c). Its
 * owner zeroes it and sets look, stop and key. Loop thread.
 */
struct up_poller {
	struct up_poller *prev, *next;
	bool waiting;                    /* on the list */
	bool alias;                      /* key names an alias lease, not a request key */
	uint64_t due_ns, interval_ms;
	unsigned looks;                  /* looks while waiting (status) */
	void (*look)(struct up_poller *p);   /* its turn: starts one pool job, nothing else */
	void (*stop)(struct up_poller *p);   /* kilnd stops: answer shutting_down */
	char key[24];                    /* for status: the first 16 hex of its key */
};
/* Waits (again: the interval grows) for p's next turn; off the list at its turn. */
void upstream_poll_add(struct kilnd *d, struct up_poller *p);
void upstream_poll_del(struct kilnd *d, struct up_poller *p);

/* The waiting list and its pace (upstream_pace.c), held by the tier. */
#define UP_PACE_HINTS 8                  /* distinct job sizes remembered */
struct up_pace {
	struct kilnd *d;
	uv_timer_t poll;                 /* runs while pollers wait */
	bool poll_on, closed;
	uint64_t tick_ms, max_ms;        /* the first interval; the longest (a claim's refresh) */
	double tokens;                   /* looks that may be made now */
	struct up_poller *waiting, *waiting_tail;   /* in turn: the tail looked last */
	struct {                         /* job sizes clients said, and when last */
		long nodes;
		uint64_t ns;
	} hints[UP_PACE_HINTS];
};
void up_pace_init(struct up_pace *p, struct kilnd *d, uint64_t tick_ms, uint64_t max_ms);
void up_pace_add(struct up_pace *p, struct up_poller *w);
void up_pace_del(struct up_pace *p, struct up_poller *w);
/* Every waiter's stop, then the timer closed (kilnd stops). */
void up_pace_stop(struct up_pace *p);
/* job_nodes, job_nodes_source, upstream_looks_per_s, upstream_waiting. */
void up_pace_status(const struct up_pace *p, cJSON *r);
/* The tier's pace, or NULL without --upstream. */
struct up_pace *upstream_pace(struct kilnd *d);

/* A claim file this daemon holds (fd open on it, path malloc'd: both
 * taken), refreshed by the tier's timer until dropped; NULL on ENOMEM
 * (nothing taken). Dropping removes it on the pool when it is still this
 * daemon's file, then gone(arg) runs on the loop (gone may be NULL). */
struct up_claim;
struct up_claim *upstream_claim_keep(struct kilnd *d, int fd, char *path);
void upstream_claim_drop(struct kilnd *d, struct up_claim *c, void (*gone)(void *arg), void *arg);

/* Alias records (upstream_alias.c) for the leases: a pool job's look for
 * alias's records, taking the newest whose entry passes every check (into
 * the local cache); 1 with key and *data (malloc'd or NULL), 0 none; *bad
 * and *err as upstream_alias_find counts them. */
struct toolchain;
int upstream_alias_take(struct kilnd *d, const char *alias, const struct toolchain *tc,
			char key[65], char **data, unsigned *bad, int *err);
/* On the loop: alias, just taken from the tier, points at key here. */
void upstream_alias_taken(struct kilnd *d, const char *alias, const char *key, const char *data);
/* A pool job's copy of a toolchain's names and identity, and its end. */
int upstream_tc_copy(struct toolchain *dst, const struct toolchain *tc);
void upstream_tc_free(struct toolchain *tc);

/* Alias leases (upstream_lease.c). A record of alias is being written:
 * the lease of its claim (if held) ends only after it (the handle returned
 * to record_end, or NULL). */
struct up_lease;
struct up_lease *upstream_lease_record_begin(struct kilnd *d, const char *alias);
void upstream_lease_record_end(struct kilnd *d, struct up_lease *l);
/* At upstream_init (sets the claims' end hook) and upstream_fini. The
 * leases' table is the tier's (upstream.c). */
int upstream_lease_init(struct kilnd *d);
void upstream_lease_fini(struct kilnd *d);
struct table *upstream_lease_table(struct kilnd *d);

/* Removes files left in tmp/ for more than a day (crashed writers). */
void upfs_sweep(const struct up_dirs *u);

#endif
