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
 * ends with it. Loop thread only. An alias's claims are taken, waited
 * for, renewed, given up and ended through the alias's owner
 * (flight/alias.c: alias_claim and the rest; tests/check_layers.py holds
 * CLAIM_ALIAS, claims_release, claims_abandon and claims_progress to it);
 * the server layer parks and answers the requests (server/op_lookup.c). The same
 * claims hold the turn to send a request key's text, under the name
 * "text <rkey>", which no alias can have (server/text_turn.c);
 * the server layer counts what it claims (the counters' claims are
 * aliases').
 *
 * The table is the node's, so it is shared out: an owner belongs to a
 * peer, the process that connected (uid and pid, SO_PEERCRED), which may
 * hold CLAIMS_PER_PEER claims however many connections it opens; a full
 * table makes room for a process that holds fewer than the one holding
 * the most, at that one's expense; and a claim without progress for the
 * expiry (--claim-expiry) ends as if its owner had gone.
 */
#ifndef KILN_CLAIMS_H
#define KILN_CLAIMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct kilnd;
struct claim;
struct claim_waiter;
struct claim_peer;

#define CLAIMS_MAX 65536            /* claims at once, on the node */
#define CLAIMS_PER_OWNER 1024       /* claims one owner (connection) may hold */
#define CLAIMS_PER_PEER 4096        /* claims one process may hold, on all its connections */
#define CLAIM_WAITERS_MAX 4096      /* lookups waiting on one claim */

/*
 * What an owner (a connection) keeps of its claims and of its lookups that
 * wait on others' claims, so that its end costs what it holds, not a walk
 * of every claim. Zeroed, then claims_owner_init, before first use; the
 * owner calls claims_owner_gone before it frees it.
 */
struct claim_owner {
	struct claim *claims;          /* the claims it holds */
	struct claim_waiter *waits;    /* its waiting lookups */
	unsigned nclaims;
	uid_t uid;                     /* who connected (SO_PEERCRED) */
	pid_t pid;                     /* 0: unknown (another pid namespace): a peer of its own */
	struct claim_peer *peer;       /* its process's share, from its first claim or wait */
	struct claim_owner *pprev, *pnext;   /* the peer's owners */
	bool gone;                     /* claims_owner_gone ran: nothing more is taken for it */
};

enum claim_kind {
	CLAIM_ALIAS,       /* a lookup's claim of an alias */
	CLAIM_TURN,        /* the turn to send a request key's text */
};

enum claim_end {
	CLAIM_PUBLISHED,   /* the alias was published: look it up again */
	CLAIM_FREE,        /* its owner went away without it, or it expired, or it made
			    * room in a full table: try to take it over */
	CLAIM_RELEASED,    /* its owner gave it up without it: produce it unclaimed */
	CLAIM_TIMEOUT,     /* the waiter's own deadline passed */
	CLAIM_LEFT,        /* the waiter's owner went away: answer nothing */
	CLAIM_GONE,        /* kilnd stops */
};

/* Runs once per wait, on the loop; the waiter is no longer known to the
 * claims when it runs, so it may take, wait or release anything. */
typedef void (*claim_cb)(void *arg, enum claim_end why);

/* The table, with the expiry of d->cfg->claim_expiry_s (the default when
 * d->cfg is NULL; 0: claims never expire). 0 or -ENOMEM. */
int claims_init(struct kilnd *d);
/* Ends every claim and wait with CLAIM_GONE and frees the table once the
 * loop has closed its timer (kilnd stops, before the connections close).
 * Later calls find no claims: claims_take answers CLAIM_STOPPED. */
void claims_fini(struct kilnd *d);

/* Says who owner's connection came from; before its first claim or wait. */
void claims_owner_init(struct claim_owner *owner, uid_t uid, pid_t pid);

enum claim_take {
	CLAIM_GRANTED,     /* owner holds it now */
	CLAIM_HELD,        /* owner held it already (its expiry starts again) */
	CLAIM_OTHER,       /* another owner holds it */
	CLAIM_OWNER_FULL,  /* owner holds CLAIMS_PER_OWNER: not granted */
	CLAIM_PEER_FULL,   /* owner's process holds CLAIMS_PER_PEER: not granted */
	CLAIM_FULL,        /* the table holds CLAIMS_MAX, and owner's process no fewer than
			    * any other (or no memory): not granted */
	CLAIM_STOPPED,     /* kilnd stops (or owner is gone): no claims any more */
};
/* Claims name (an alias, or a text turn's name) for owner. A full table
 * may end another process's claim first (CLAIM_FREE for its waiters, who
 * may take it over), so callbacks may run. */
enum claim_take claims_take(struct kilnd *d, const char *name, enum claim_kind kind,
			    struct claim_owner *owner);
/* Waits, for owner, for another owner's claim on alias to end: cb(arg, why)
 * runs once, within ms (CLAIM_TIMEOUT) or when the claim ends. 0, -EBUSY
 * when the claim has CLAIM_WAITERS_MAX waiters, -ENOENT when alias has no
 * claim (or owner is gone), -ENOMEM. */
int claims_wait(struct kilnd *d, const char *alias, uint64_t ms, struct claim_owner *owner,
		claim_cb cb, void *arg);
/* Owner gives its claim on alias up; false when it held none. */
bool claims_release(struct kilnd *d, const char *alias, const struct claim_owner *owner);
/* Owner gives its claim on alias up as if it had gone (CLAIM_FREE: its
 * first waiter takes it over); false when it held none. */
bool claims_abandon(struct kilnd *d, const char *alias, const struct claim_owner *owner);
/*
 * The hook, when set (the upstream tier, for its leases: claims_set_end_hook
 * after claims_init), runs at the end of every alias's claim, after its
 * waiters were answered, with the claim's owner (still alive, maybe gone)
 * and why it ended (PUBLISHED, FREE, RELEASED or GONE).
 */
typedef void (*claim_end_hook)(struct kilnd *d, const char *alias,
			       const struct claim_owner *owner, enum claim_end why);
void claims_set_end_hook(struct kilnd *d, claim_end_hook hook);
/* Owner goes away: its waits end (CLAIM_LEFT), then its claims (CLAIM_FREE
 * for their waiters), and it leaves its peer. Safe after claims_fini. */
void claims_owner_gone(struct kilnd *d, struct claim_owner *owner);
/* alias now names an entry: its claim ends, its waiters look again. */
void claims_published(struct kilnd *d, const char *alias);
/* The producer of name shows progress (its build arrived): the claim's
 * expiry starts again. Nothing when name has no claim. */
void claims_progress(struct kilnd *d, const char *name);
/* Claims held now (aliases' and text turns). */
size_t claims_count(const struct kilnd *d);

/* What one process holds, for status. */
struct claim_holder {
	uid_t uid;
	pid_t pid;              /* 0: unknown */
	unsigned connections;   /* its connections that claimed or waited */
	unsigned claims;        /* aliases' claims */
	unsigned turns;         /* text turns */
	unsigned waits;         /* lookups and gets waiting on others' claims */
};
/* Fills out (max rows, caller's) with the processes that hold claims or
 * waits, those that hold the most first; returns how many such processes
 * there are (more than max when some were left out). */
size_t claims_holders(const struct kilnd *d, struct claim_holder *out, size_t max);
/* The expiry in ms (0: none). */
uint64_t claims_expiry_ms(const struct kilnd *d);

#endif
