/*
 * The upstream tier's directory as a format, for the tier (upstream.c) and
 * for export and import (daemon/server/transfer.c), which write and read the
 * same layout: opening it, finding an entry, publishing one. Every function
 * here blocks on a possibly slow shared filesystem and is meant for the
 * thread pool, except upfs_open, which runs once at start-up. The claims,
 * the tier's own business, are in upstream_int.h.
 *
 * Layout under DIR:
 *   objects/<2 hex>/<sha256>.<ext>             artifacts, named by their content
 *   entries/<2 hex>/<rkey>/<key>.json          one metadata file per entry
 *   claims/<rkey>.claim                        "building this now" (O_EXCL)
 *   tmp/                                       files being written; renamed from here
 */
#ifndef KILN_DAEMON_UPSTREAM_FS_H
#define KILN_DAEMON_UPSTREAM_FS_H

#include <stdbool.h>
#include <stddef.h>

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

/* Start-up: see upstream_init(). Fills u; 0 or a negative errno with err. */
int upfs_open(struct up_dirs *u, const char *dir, double stale_s, bool readonly, char *err,
	      size_t errlen);
void upfs_close(struct up_dirs *u);
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

#endif
