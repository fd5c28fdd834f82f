/*
 * The single-flight table: one flight per request key in progress, its
 * states and the one way between them. The table lives in build.c beside
 * the builds it runs; this header names only what the layers above use.
 */
#ifndef KILN_DAEMON_FLIGHT_H
#define KILN_DAEMON_FLIGHT_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

struct build;
struct build_input;
struct kilnd;
struct waiter_ops;

/*
 * A flight's states, in order; flight_enter() is the one way between them.
 * UPSTREAM: the tier is asked first (--upstream). QUEUED: waiting for a
 * --jobs slot. CLAIMING: holding a slot, claiming the key in the tier.
 * PREPARING: the build directory being made (pool). COMPILING, CHECKING: a
 * compiler step, the load check. PUBLISHING: into the store (pool). DONE:
 * answered.
 */
enum flight_state {
	FLIGHT_NEW, FLIGHT_UPSTREAM, FLIGHT_QUEUED, FLIGHT_CLAIMING, FLIGHT_PREPARING,
	FLIGHT_COMPILING, FLIGHT_CHECKING, FLIGHT_PUBLISHING, FLIGHT_DONE, FLIGHT__COUNT
};
const char *flight_state_name(enum flight_state s);
/* Moves b to state s: checks the transition (a wrong one is a bug: logged
 * as an error, and an assert in debug builds) and logs it at debug level. */
void flight_enter(struct build *b, enum flight_state s);
/* How many flights are in each state now. */
void flight_count_states(struct kilnd *d, unsigned counts[FLIGHT__COUNT]);

/* The flights and the --jobs slots now (status, the stop, back-pressure). */
struct flight_counts {
	size_t flights;              /* flights not yet finished */
	unsigned in_flight;          /* builds holding a --jobs slot */
	unsigned lent;               /* more slots lent to builds' compile steps */
	unsigned queued;             /* builds waiting for a slot */
};
void flight_counts(const struct kilnd *d, struct flight_counts *c);

int flight_init(struct kilnd *d);
void flight_fini(struct kilnd *d);

/* The build in flight for rkey, or NULL. */
struct build *flight_find(struct kilnd *d, const char *rkey);
/*
 * Starts (queues) a build for in, taking ownership of in (freed on failure
 * too), with (ops, ctx, id) as its first waiter (attached before the build
 * can run, so that even an immediate failure is answered). With --upstream
 * the upstream tier is asked first; a flight whose sources are known by
 * digest only never builds: its waiters get need_sources when upstream
 * misses, unless a request with the text joined meanwhile. Returns 0, or
 * -ESHUTDOWN while the daemon stops, or -ENOMEM; then nothing was attached.
 */
int flight_start(struct kilnd *d, struct build_input *in, const struct waiter_ops *ops, void *ctx,
		 uint64_t id);
/*
 * A request with the text joined b: when b knows its sources by digest only
 * (a by-digest get waiting on the upstream tier), b takes in over, so that it
 * can build if upstream misses; otherwise in is freed. Takes ownership of
 * in's contents either way (in itself is the caller's).
 */
void flight_join_input(struct build *b, struct build_input *in);
/*
 * Stops the flights whose every waiter has gone (their clients hung up, as
 * on Ctrl-C): a queued one leaves the queue, a compiling one has its
 * compiler killed and its slot freed. Flights that publish, hold an
 * --upstream claim or have a waiter that stays (a .gch nobody waits for)
 * go on. A request that comes later starts a fresh flight. Loop thread.
 */
void flight_cancel_abandoned(struct kilnd *d);
/*
 * What kilnd does now, for status and kiln top: each build holding a slot
 * ({"key": rkey prefix, "label", "state", "elapsed_s", "waiters"}) into
 * running, and the queue in order, background last ({"key", "label",
 * "waited_s", "waiters", "background"}), at most max each. Loop thread.
 */
void flight_describe(struct kilnd *d, cJSON *running, cJSON *queue, size_t max);
/* Moves b, queued in the background, to the head of the queue. */
void flight_promote(struct build *b);
/* Shutdown: kills running compilers; every waiter gets shutting_down. */
void flight_abort_all(struct kilnd *d);

#endif
