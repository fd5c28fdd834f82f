/*
 * Claims: one producer per alias on this node (docs/design.md, "Claims:
 * one producer per alias"). A client about to produce what an alias will
 * name (GT4Py lowering a program before it sends the build: kiln.gt4py)
 * claims the alias with a lookup; other clients' lookups of that alias
 * wait until the alias is published (then they are answered from the
 * cache), the claim ends without it (then one of them takes it over), or
 * their own deadline passes. A claim belongs to an owner (a connection,
 * opaque here) and ends with it. Loop thread only. The server layer
 * parks and answers the requests (dispatch_claims.c); publish calls
 * claims_published.
 */
#ifndef KILN_CLAIMS_H
#define KILN_CLAIMS_H

#include <stdbool.h>
#include <stdint.h>

struct kilnd;

#define CLAIMS_MAX 65536            /* claims at once, on the node */
#define CLAIMS_PER_OWNER 1024       /* claims one owner may hold */
#define CLAIM_WAITERS_MAX 4096      /* lookups waiting on one claim */

enum claim_end {
	CLAIM_PUBLISHED,   /* the alias was published: look it up again */
	CLAIM_FREE,        /* the claim ended without it: try to take it over */
	CLAIM_TIMEOUT,     /* the waiter's own deadline passed */
	CLAIM_GONE,        /* kilnd stops */
};

typedef void (*claim_cb)(void *arg, enum claim_end why);

int claims_init(struct kilnd *d);
/* Ends every wait with CLAIM_GONE and frees every claim (kilnd stops). */
void claims_fini(struct kilnd *d);

enum claim_take {
	CLAIM_GRANTED,     /* owner holds it now */
	CLAIM_HELD,        /* owner held it already */
	CLAIM_OTHER,       /* another owner holds it */
	CLAIM_FULL,        /* a limit (CLAIMS_MAX, per_owner): not granted */
};
/* Claims alias for owner; *owned counts the owner's claims (the owner
 * keeps it, and it must live until claims_owner_gone: at most
 * CLAIMS_PER_OWNER; every end of a claim counts it down). */
enum claim_take claims_take(struct kilnd *d, const char *alias, const void *owner,
			    unsigned *owned);
/* Waits for another owner's claim on alias to end: cb(arg, why) runs once,
 * on the loop, within ms (CLAIM_TIMEOUT) or when the claim ends. -EBUSY
 * when the claim has CLAIM_WAITERS_MAX waiters, -ENOENT when alias has no
 * claim, -ENOMEM. */
int claims_wait(struct kilnd *d, const char *alias, uint64_t ms, claim_cb cb, void *arg);
/* Owner gives its claim on alias up; false when it held none. */
bool claims_release(struct kilnd *d, const char *alias, const void *owner);
/* Every claim of owner ends (its connection closed). */
void claims_owner_gone(struct kilnd *d, const void *owner, const unsigned *owned);
/* alias now names an entry: its claim ends, its waiters look again. */
void claims_published(struct kilnd *d, const char *alias);
/* Claims held now. */
size_t claims_count(const struct kilnd *d);

#endif
