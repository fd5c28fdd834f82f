/*
 * The alias's owner (alias.c): where an alias points now, every re-point
 * of it, and its claim. Loop thread.
 */
#ifndef KILN_DAEMON_ALIAS_H
#define KILN_DAEMON_ALIAS_H

#include <stdbool.h>
#include <stdint.h>

#include "claims.h"

struct kilnd;
struct store_entry;

/* Where an alias points: its entry's key and the data stored with it
 * (store.h, store_set_alias_data; NULL: none). */
struct alias_target {
	const char *key;
	const char *data;
};

/* Points alias at key with data (may be NULL), in the order of the calls:
 * answered from now on, written to the index behind, told to the tier, and
 * the alias's claim ended. */
void alias_point(struct kilnd *d, const char *alias, const char *key, const char *data);
/* Where alias was last pointed while its write is not done, or NULL. */
const struct alias_target *alias_pending(const struct kilnd *d, const char *alias);
/* The entry alias names now (its last re-point, else the index): 0 with *e
 * filled (store_entry_free), -ENOENT, or a negative errno. */
int alias_entry(struct kilnd *d, const char *alias, struct store_entry *e);
/* What is stored with alias while it names key: 0 with *data (malloc'd,
 * NULL when none), -ENOENT when it names another entry now, -ENOMEM. */
int alias_data(struct kilnd *d, const char *alias, const char *key, char **data);
/* Whether alias names e now, with data when data is not NULL (a request
 * without data leaves what the alias holds as it is). */
bool alias_names(struct kilnd *d, const char *alias, const char *data, const struct store_entry *e);
/* A request naming alias (with data) was served e: points the alias there
 * unless it names e already; either way the alias's claim is over. */
void alias_found(struct kilnd *d, const char *alias, const char *data, const struct store_entry *e);
/*
 * The alias's claim: one producer per alias on this node (claims.h holds
 * the node's table of claims, of aliases and of text turns; every claim of
 * an alias is taken, waited for, renewed, given up and ended here).
 * alias_claim claims alias for owner (a takeover after another owner's
 * claim ended, with takeover) and counts it; alias_claim_wait waits for
 * another owner's claim to end, as claims_wait; alias_claim_progress
 * restarts its expiry (its producer's build arrived); alias_release gives
 * it up (its waiters produce it unclaimed), alias_abandon as if the owner
 * had gone (the first waiter takes it over). alias_point and alias_found
 * end it.
 */
enum claim_take alias_claim(struct kilnd *d, const char *alias, struct claim_owner *owner,
			    bool takeover);
int alias_claim_wait(struct kilnd *d, const char *alias, uint64_t ms, struct claim_owner *owner,
		     bool takeover, claim_cb cb, void *arg);
void alias_claim_progress(struct kilnd *d, const char *alias);
bool alias_release(struct kilnd *d, const char *alias, const struct claim_owner *owner);
bool alias_abandon(struct kilnd *d, const char *alias, const struct claim_owner *owner);

/* Writes the re-points not yet written and frees their table (blocking: at
 * the stop, after the loop ended). */
void alias_flush_all(struct kilnd *d);

/* The table of re-points (flight_init, flight_fini): 0 or -ENOMEM. */
int alias_init(struct kilnd *d);
void alias_fini(struct kilnd *d);
/* Told of every re-point (alias_point; data may be NULL): the tier records
 * it for the other nodes (upstream_alias.c). NULL: nobody. */
typedef void (*alias_hook)(struct kilnd *d, const char *alias, const char *key, const char *data);
void alias_set_hook(struct kilnd *d, alias_hook hook);

#endif
