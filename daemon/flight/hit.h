/*
 * The hit's owner (hit.c): is there a valid, intact entry for a request
 * key, a key or an alias, here and now? Every caller asks here: a get
 * (op_get.c), a lookup (op_lookup.c), a precompiled header (pch.c). Loop
 * thread.
 */
#ifndef KILN_DAEMON_HIT_H
#define KILN_DAEMON_HIT_H

#include <stdbool.h>

#include "msg_artifact.h"
#include "store.h"

struct fdref;
struct kilnd;

enum hit_state {
	HIT_NONE,      /* no valid, intact entry (h->err: 0, or the index's error) */
	HIT_VALID,     /* h->entry, its object open in h->ref and checked */
	HIT_PENDING,   /* an entry waits for a dependency hashed on the pool:
	                * headers_wait (headers.h), then ask again */
	HIT_UNOPENED,  /* a valid entry whose intact object cannot be opened now
	                * (out of descriptors, say: h->err); building would not help */
};

struct hit_query {
	const char *rkey;      /* exactly one of rkey (its entries, first valid
	                        * wins), key and alias (where it points now,
	                        * alias.h) */
	const char *key;
	const char *alias;
	/* Only entries this accepts count (a lookup's toolchain); NULL: any. */
	bool (*accept)(const struct store_entry *e, const void *arg);
	const void *accept_arg;
	/* A dependency being hashed: HIT_PENDING when true, else that entry
	 * is not valid (the caller cannot wait, or waited enough). */
	bool may_wait;
};

struct hit {
	struct store_entry entry;   /* HIT_VALID: the entry */
	struct fdref *ref;          /* HIT_VALID: its object (fdcache.h), size and
	                             * SHA-256 checked (verify_served); a reply may
	                             * take it (then set NULL) */
	struct msg_file_id file;    /* HIT_VALID: the checked file's device and inode */
	char *alias_data;           /* HIT_VALID by alias: what is stored with it
	                             * (malloc'd, or NULL) */
	int err;                    /* a negative errno, or 0 */
};

/*
 * The validation of a hit, in one order: the entry (by rkey, key, or the
 * alias's current target), the caller's filter, its recorded inputs here
 * (headers_check), its object borrowed from the descriptor cache and
 * checked (verify_served). A damaged or lost object is logged and counted,
 * never served, and the next entry of the rkey tried. Fills h (hit_free
 * after any answer) and returns the enum hit_state.
 */
int hit_find(struct kilnd *d, const struct hit_query *q, struct hit *h);
void hit_free(struct hit *h);

#endif
