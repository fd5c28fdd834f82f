/*
 * The filesystem side of the upstream tier, used by upstream.c: the
 * directory and its claims (upstream_fs.c), and its entries
 * (upstream_entry.c). Every function here blocks on a possibly slow shared
 * filesystem and is meant for the thread pool, except upfs_open, which runs
 * once at start-up. None of them touches the daemon's loop-owned state.
 *
 * Layout under DIR:
 *   objects/<2 hex>/<sha256>.<ext>             artifacts, named by their content
 *   entries/<2 hex>/<rkey>/<key>.json          one metadata file per entry
 *   claims/<rkey>.claim                        "building this now" (O_EXCL)
 *   tmp/                                       files being written; renamed from here
 */
#ifndef KILN_DAEMON_UPSTREAM_INT_H
#define KILN_DAEMON_UPSTREAM_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "store.h"

/* The metadata format is the entry codec's UPSTREAM form
 * (store/entry_codec.h, ENTRY_UPSTREAM_VERSION): 2 has dependencies with
 * kinds (key format 3). Entries of version 1 were keyed by format 2 and are
 * never asked for; they are skipped quietly. */

struct up_dirs {
	char *dir;             /* as configured: for messages */
	int fd;                /* the tier, held open from upfs_open to upfs_close */
	/* Paths kilnd uses, through the held descriptor: /proc/self/fd/N/... */
	char *objects, *entries, *claims, *tmp;
	char host[128];        /* this node, for claim owners and temporary names */
	double stale_s;        /* --upstream-stale */
};

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

/* Start-up: see upstream_init(). Fills u; 0 or a negative errno with err. */
int upfs_open(struct up_dirs *u, const char *dir, double stale_s, bool readonly, char *err,
	      size_t errlen);
void upfs_close(struct up_dirs *u);
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

/*
 * Looks for an entry of rkey whose dependencies match this node's files:
 * every dependency hashed here equals the recorded digest, the artifact key
 * recomputed from them equals the recorded key, and the object copied to
 * tmp_object has the recorded size and SHA-256. Returns 1 with e's key,
 * rkey, size, deps and build_ms filled (its label too when e has none) and
 * *log the build's output (malloc'd or NULL); 0 when no entry fits; a
 * negative errno when the directory cannot be read. *bad counts entries
 * that are malformed or whose object does not match (each logged).
 */
int upfs_find(const struct up_dirs *u, const char *rkey, const char *output,
	      const char *tmp_object, struct store_entry *e, char **log, unsigned *bad);

/*
 * Publishes e, whose artifact is at object (in the local cache): the object
 * first (tmp/, fsync, link or rename into objects/), then the metadata the
 * same way, so metadata present implies its object complete. An existing
 * entry that verifies is kept. Entries with a dependency that changed during
 * the build (zero digest) are not published. Returns 1 when it wrote the
 * metadata, 0 when it kept an existing entry or skipped e, or a negative
 * errno.
 */
int upfs_publish(const struct up_dirs *u, const struct store_entry *e, const char *object,
		 const char *log, size_t loglen);

/* Removes files left in tmp/ for more than a day (crashed writers). */
void upfs_sweep(const struct up_dirs *u);

#endif
