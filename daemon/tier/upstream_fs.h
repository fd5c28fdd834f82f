/*
 * The upstream tier's directory as a format, for the tier (upstream.c) and
 * for export and import (daemon/server/op_transfer.c), which write and read the
 * same layout: opening it, finding an entry, publishing one. Every function
 * here blocks on a possibly slow shared filesystem and is meant for the
 * thread pool, except upfs_open, which runs once at start-up. The claims,
 * the tier's own business, are in upstream_int.h.
 *
 * Layout under DIR:
 *   objects/<2 hex>/<sha256>.<ext>             artifacts, named by their content
 *   entries/<2 hex>/<rkey>/<key>.json          one metadata file per entry
 *   aliases/<2 hex>/<sha256 of alias>/<key>.json  an alias record: alias -> entry
 *   claims/<rkey>.claim                        "building this now" (O_EXCL)
 *   tmp/                                       files being written; renamed from here
 */
#ifndef KILN_DAEMON_UPSTREAM_FS_H
#define KILN_DAEMON_UPSTREAM_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* The metadata format is the entry codec's UPSTREAM form
 * (store/entry_codec.h, ENTRY_UPSTREAM_VERSION): 2 has dependencies with
 * kinds (key format 3). Entries of version 1 were keyed by format 2 and are
 * never asked for; they are skipped quietly. */

struct up_dirs {
	char *dir;             /* as configured: for messages */
	int fd;                /* the tier, held open from upfs_open to upfs_close */
	/* Paths kilnd uses, through the held descriptor: /proc/self/fd/N/... */
	char *objects, *entries, *aliases, *claims, *tmp;
	char host[128];        /* this node, for claim owners and temporary names */
	double stale_s;        /* --upstream-stale */
};

/* Start-up: see upstream_init(). Fills u; 0 or a negative errno with err
 * (then u holds nothing; upfs_close of it is harmless). */
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

/*
 * An alias record (upstream_alias_fs.c): the alias, the entry it names (key,
 * request key, output) and the toolchain that built it on the publishing
 * node (its name and identity digest: a node takes the record only for a
 * lookup naming a toolchain of that name and identity here), the alias's
 * data (kiln.gt4py's load metadata, or NULL), and when it was written.
 */
#define UP_ALIAS_VERSION 1
#define UP_ALIAS_DATA_MAX ((size_t)STORE_ALIAS_DATA_MAX)   /* base64 text, as on the wire */
struct up_alias {
	char *alias;
	char key[65], rkey[65];
	char *output;
	char *toolchain;
	uint8_t tc_id[32];
	char *data;
	double created;
};
void upfs_alias_free(struct up_alias *a);
/* The record's directory under DIR/aliases/ for alias (PATH_MAX bytes). */
void upfs_alias_dir(const struct up_dirs *u, const char *alias, char *buf, size_t len);
/*
 * Writes a's record (created: now) as aliases/<2 hex>/<sha256 of
 * alias>/<key>.json through tmp/ and fsync, replacing a record of the same
 * alias and key with rename() (a re-point back to an older target makes it
 * the newest again). 0 or a negative errno.
 */
int upfs_alias_publish(const struct up_dirs *u, const struct up_alias *a);
/*
 * The records of alias, newest first (malloc'd array in *out, *n of them;
 * free each with upfs_alias_free, then the array). A record that is not
 * what kiln writes, or whose alias, key or place do not agree, is logged
 * and counted in *bad. 0, or a negative errno when the directory cannot be
 * read (none: 0 with *n 0).
 */
int upfs_alias_list(const struct up_dirs *u, const char *alias, struct up_alias **out, size_t *n,
		    unsigned *bad);
/* As upfs_alias_list, for the folder of the alias whose SHA-256 is hex (64
 * hex digits), whatever alias that is (alias NULL: kiln import walks
 * aliases/), or only alias's. */
int upfs_alias_records(const struct up_dirs *u, const char *hex, const char *alias,
		       struct up_alias **out, size_t *n, unsigned *bad);
/*
 * As upfs_find, for one entry of rkey: the one of key, with the same checks
 * (dependencies hashed here, key recomputed, object copied to tmp_object
 * and checked). 1 taken, 0 not for this node or missing, -EBADMSG broken
 * (logged), or another negative errno.
 */
int upfs_take(const struct up_dirs *u, const char *rkey, const char *key, const char *output,
	      const char *tmp_object, struct store_entry *e, char **log);
/* Whether the metadata of rkey's entry key is in DIR (one stat). */
bool upfs_has_entry(const struct up_dirs *u, const char *rkey, const char *key);

#endif
