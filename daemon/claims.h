/*
 * Claims: one producer per alias on this node (docs/design.md, "Claims:
 * one producer per alias"). A client about to produce what an alias will
 * name (GT4Py lowering a program before it sends the build: kiln.gt4py)
 * claims the alias with a lookup; other clients' lookups of that alias
 * wait until the alias is published (then they are answered from the
 * cache), the owner goes away without it (then one of them takes it
 * over), the owner releases it (then they produce it unclaimed), or
 * their own deadline passes. A claim belongs to an owner (a connection's
 * struct claim_owner; nothing else of the connection is known here) and
 * ends with it. Loop thread only. The server layer parks and answers the
 * requests (server/lookup_op.c); publish calls claims_published. The same
 * claims hold the turn to send a request key's text, under the name
 * "text <rkey>", which no alias can have (server/text_turn.c);
 * the server layer counts what it claims (the counters' claims are
 * aliases').
 */
#ifndef KILN_CLAIMS_H
#define KILN_CLAIMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kilnd;
struct claim;
struct claim_waiter;

#define CLAIMS_MAX 65536            /* claims at once, on the node */
#define CLAIMS_PER_OWNER 1024       /* claims one owner may hold */
#define CLAIM_WAITERS_MAX 4096      /* lookups waiting on one claim */

/*
 * What an owner (a connection) keeps of its claims and of its lookups that
 * wait on others' claims, so that its end costs what it holds, not a walk
 * of every claim. Zeroed before first use; the owner calls
 * claims_owner_gone before it frees it.
 */
struct claim_owner {
	struct claim *claims;          /* the claims it holds */
	struct claim_waiter *waits;    /* its waiting lookups */
	unsigned nclaims;
};

enum claim_end {
	CLAIM_PUBLISHED,   /* the alias was published: look it up again */
	CLAIM_FREE,        /* its owner went away without it: try to take it over */
	CLAIM_RELEASED,    /* its owner gave it up without it: produce it unclaimed */
	CLAIM_TIMEOUT,     /* the waiter's own deadline passed */
	CLAIM_LEFT,        /* the waiter's owner went away: answer nothing */
	CLAIM_GONE,        /* kilnd stops */
};

/* Runs once per wait, on the loop; the waiter is no longer known to the
 * claims when it runs, so it may take, wait or release anything. */
typedef void (*claim_cb)(void *arg, enum claim_end why);

int claims_init(struct kilnd *d);
/* Ends every claim and wait with CLAIM_GONE and frees the table (kilnd
 * stops, before the connections close). Later calls find no claims:
 * claims_take answers CLAIM_STOPPED. */
void claims_fini(struct kilnd *d);

enum claim_take {
	CLAIM_GRANTED,     /* owner holds it now */
	CLAIM_HELD,        /* owner held it already */
	CLAIM_OTHER,       /* another owner holds it */
	CLAIM_FULL,        /* a limit (CLAIMS_MAX, CLAIMS_PER_OWNER) or memory: not granted */
	CLAIM_STOPPED,     /* kilnd stops: no claims any more */
};
enum claim_take claims_take(struct kilnd *d, const char *alias, struct claim_owner *owner);
/* Waits, for owner, for another owner's claim on alias to end: cb(arg, why)
 * runs once, within ms (CLAIM_TIMEOUT) or when the claim ends. 0, -EBUSY
 * when the claim has CLAIM_WAITERS_MAX waiters, -ENOENT when alias has no
 * claim, -ENOMEM. */
int claims_wait(struct kilnd *d, const char *alias, uint64_t ms, struct claim_owner *owner,
		claim_cb cb, void *arg);
/* Owner gives its claim on alias up; false when it held none. */
bool claims_release(struct kilnd *d, const char *alias, const struct claim_owner *owner);
/* Owner goes away: its waits end (CLAIM_LEFT), then its claims (CLAIM_FREE
 * for their waiters). */
void claims_owner_gone(struct kilnd *d, struct claim_owner *owner);
/* alias now names an entry: its claim ends, its waiters look again. */
void claims_published(struct kilnd *d, const char *alias);
/* Claims held now. */
size_t claims_count(const struct kilnd *d);

#endif
