/*
 * The upstream tier (kilnd --upstream DIR): a directory on a filesystem that
 * every node sees (Lustre, GPFS, NFS), persistent across jobs, holding plain
 * immutable files only. A local miss looks there before building; a build
 * is published there; a claim file per request key keeps nodes from
 * building one program at the same time. docs/design.md, "Upstream tier",
 * has the layout and the protocol.
 *
 * Loop thread only; the filesystem work runs on the thread pool
 * (upstream_fs.c).
 */
#ifndef KILN_DAEMON_UPSTREAM_H
#define KILN_DAEMON_UPSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "claims.h"

struct kilnd;
struct flight;
struct build_input;
struct flight_outcome;
struct tier_flight;

/*
 * Opens the tier named by d->cfg->upstream_dir (nothing to do without one):
 * creates DIR when its parent exists, refuses a directory that is not the
 * user's own or is writable by others, creates its folders and proves it
 * writable. Blocking; at start-up, before the socket opens. Returns 0 or a
 * negative errno with a sentence in err.
 */
int upstream_init(struct kilnd *d, char *err, size_t errlen);
/* At a stop: closes the timers and fails the flights waiting on another
 * node's claim with shutting_down. Idempotent. */
void upstream_stop(struct kilnd *d);
/* Frees the tier once the loop has ended. */
void upstream_fini(struct kilnd *d);

/* The tier's side of a new flight (flight.c, through struct build_tier). */
struct tier_flight *upstream_flight_new(struct kilnd *d, struct flight *b);
/*
 * A new flight: looks upstream first. By digest only, a miss answers
 * need_sources; with the text, a miss queues the build for a slot, or waits
 * (without a slot) while another node holds the key's claim. Each decision
 * goes to the flight as a verdict (flight_verdict).
 */
void upstream_flight_start(struct flight *b, struct tier_flight *f);
/* A queued build got a --jobs slot: claims its key, then the verdict is to
 * build, or to give the slot back and wait when another node claimed it
 * meanwhile, or the entry that node published. */
void upstream_claim(struct flight *b, struct tier_flight *f);
/* The end of a flight (after the replies): publishes a new build upstream,
 * then releases its claim; frees f. */
void upstream_flight_end(struct tier_flight *f, const struct build_input *in,
			 struct flight_outcome *o);
/* An alias was pointed at key with data (or NULL): its entry and an alias
 * record carrying the data go upstream (on the pool), when the entry is one
 * another node could take. */
void upstream_alias_set(struct kilnd *d, const char *alias, const char *key, const char *data);
/*
 * A lookup of alias by toolchain tc missed locally: looks for its records
 * upstream (on the pool) and takes the newest whose entry passes every
 * check here into the local cache, pointing alias at it; then
 * done(arg, found) on the loop. 0, or a negative errno when nothing was
 * started (no tier, no toolchain, stopping): then done never runs.
 */
struct toolchain;
int upstream_alias_find(struct kilnd *d, const char *alias, const struct toolchain *tc,
			void (*done)(void *arg, bool found), void *arg);
/*
 * A claiming lookup's claim of alias was granted on this node to owner (or
 * asked again there): makes it job-wide with the tier's lease on alias
 * (upstream_lease.c). Returns 0 when the client may be answered `claimed`
 * now (the lease is held, or no lease is made: no tier, no toolchain,
 * stopping, out of memory); 1 when the answer comes through cb(arg, held,
 * why) once, on the loop: held true, answer `claimed` (the lease is held,
 * or none can be made); held false: CLAIM_PUBLISHED the alias is here now
 * (look again), CLAIM_TIMEOUT another node holds the lease and deadline
 * (uv_now, ms) passed or wait is false (owner still holds the local claim),
 * or the local claim ended meanwhile for the reason given (CLAIM_FREE,
 * CLAIM_RELEASED, CLAIM_GONE). -EALREADY when owner's lookup waits for the
 * lease already.
 */
typedef void (*upstream_lease_cb)(void *arg, bool held, enum claim_end why);
int upstream_lease_take(struct kilnd *d, const char *alias, const struct toolchain *tc,
			const struct claim_owner *owner, uint64_t deadline, bool wait,
			upstream_lease_cb cb, void *arg);
/* Adds the tier's members to a status reply (none without --upstream). */
void upstream_status(struct kilnd *d, cJSON *reply);
/* A client said its job has nodes nodes (hello's job_nodes): the pace of
 * polling follows the largest said in the last 15 minutes. */
void upstream_job_hint(struct kilnd *d, long nodes);

#endif
