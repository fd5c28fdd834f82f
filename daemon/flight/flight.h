/*
 * The flights (flight.c): one per request key in progress, every request
 * for that key attached to it as a waiter, all waiters answered alike. A
 * flight waits in a FIFO for one of the --jobs slots (flight_sched.c),
 * runs its compiler steps through kiln-exec and the load check (step.c),
 * then publishes on the thread pool (publish.c); the stages report back to
 * flight.c, the one place that moves a flight between its states. Also the
 * tier's way into a flight (struct build_tier, flight_verdict). The inside
 * of a flight is flight_int.h, for this folder only.
 */
#ifndef KILN_DAEMON_FLIGHT_H
#define KILN_DAEMON_FLIGHT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "flight_state.h"
#include "key.h"
#include "msg.h"

struct flight;
struct kilnd;
struct store_entry;

/* How a flight ended, as each waiter is told. */
struct build_result {
	int err_code;                    /* ERR_NONE (0) on success, else an enum msg_err */
	const char *err_msg;             /* the error's sentence */
	const char *rkey;                /* the request key (errors name it) */
	const char *log;                 /* the compiler's output (build errors) */
	const struct store_entry *entry; /* success: the published entry */
	const char *path;                /* success: where its object lives */
	int fd;                          /* success: its descriptor (borrowed: dup to keep) */
	bool cached;                     /* no compiler ran (an upstream hit) */
	const char *uncacheable;         /* success, not cached: why (else NULL) */
};

/*
 * Who waits on a flight, and how it is answered: the flight layer knows no
 * connection. ctx is the waiter's (a connection, for op_get.c).
 */
struct waiter_ops {
	/* True when nobody is left to answer (the client hung up). */
	bool (*gone)(void *ctx);
	/* The answer to request id; true when it was the artifact (then the
	 * build counts a use and points the waiter's alias at it). */
	bool (*done)(void *ctx, uint64_t id, bool joined, const struct build_result *r);
	/* The build lets go of ctx (after done, or unanswered at the end). */
	void (*release)(void *ctx);
};

/* What a build compiles: the request plus the text of every source. */
struct build_input {
	struct msg_request req;     /* owned */
	struct key_source *src;     /* one per source; text points into req or bufs */
	char **bufs;                /* contents read from source paths (owned), or NULL */
	size_t nsrc;
	const struct toolchain *tc;
	struct toolchain *own_tc;   /* tc, when this input owns it (an import's check) */
	char rkey[65];
	bool by_digest;             /* a source came as a digest: keyed, not buildable */
	bool text_waited;           /* it waited for another client's text (text_turn.c) */
	/* Precompiled headers (pch.c). pch_rkey: the .gch's request key once
	 * settled ("" when the request names none or the toolchain makes
	 * none); pch_key: the .gch entry the build uses, or "". */
	char pch_rkey[65];
	char pch_key[65];
	struct store_dep *pch_deps;  /* the .gch entry's dependencies (owned) */
	size_t npch_deps;
	bool pch_refused;            /* its .gch disagreed with the build: not again */
	bool background;             /* queued behind every other build (a .gch) */
	unsigned hash_waits;         /* times it waited for an input hashed on the pool */
};

void build_input_free(struct build_input *in);
/* True for the build of a precompiled header (output "pch", pch.c). */
bool build_input_is_gch(const struct build_input *in);
/* True for names that are headers (placed beside the sources, not
 * compiled; step.c). */
bool step_is_header(const char *name);
/* True when nvcc's host compiler compiles in's source name itself (a C++
 * source of an nvcc build whose arguments hostcc.h understands), or, with
 * name NULL, any C++ source of in (hostcc.h; docs/cuda.md; step.c). */
bool step_host_direct(const struct build_input *in, const char *name);

/* Attaches a waiter: ops->done(ctx, id, ...) answers it. alias (may be NULL)
 * is pointed at the artifact on success, with alias_data (may be NULL). The build calls ops->release(ctx)
 * once, when it is freed; on failure (-ENOMEM) nothing was attached. */
int flight_add_waiter(struct flight *b, const struct waiter_ops *ops, void *ctx, uint64_t id,
		     const char *alias, const char *alias_data, bool joined);


/* How many flights are in each state now. */
void flight_count_states(struct kilnd *d, unsigned counts[FLIGHT__COUNT]);

/* The flights and the --jobs slots now (status, the stop, back-pressure). */
struct flight_counts {
	size_t flights;              /* flights not yet finished */
	unsigned in_flight;          /* builds holding a --jobs slot */
	unsigned lent;               /* more slots lent to builds' compile steps */
	unsigned queued;             /* builds waiting for a slot */
	uint64_t peer_checks;        /* other nodes' artifacts checked here (recheck.c) */
	uint64_t peer_checks_remembered;  /* of those, the stand-in runs spared (recheck_memo.h) */
};
void flight_counts(const struct kilnd *d, struct flight_counts *c);

int flight_init(struct kilnd *d);
void flight_fini(struct kilnd *d);

/* The build in flight for rkey, or NULL. */
struct flight *flight_find(struct kilnd *d, const char *rkey);
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
void flight_join_input(struct flight *b, struct build_input *in);
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
void flight_promote(struct flight *b);
/* Shutdown: kills running compilers; every waiter gets shutting_down. */
void flight_abort_all(struct kilnd *d);

/*
 * The tier above the builds (upstream.c) joins a flight's life only through
 * these, installed in d->tier when it starts (NULL: no tier): the flight layer
 * never includes the tier's header. The tier decides, the flight acts: the
 * tier reports each decision with flight_verdict() and never writes a
 * flight's fields; the flight keeps the tier's state for it (tier_flight)
 * and hands it back in each call.
 */
struct tier_flight;

/* How a flight ended, for the tier (after the replies). */
struct flight_outcome {
	int err_code;                /* ERR_NONE, or the flight's error */
	bool built_here;             /* compiled here and cached: for the other nodes too */
	struct store_entry *entry;   /* built_here: the entry, the tier's to take (else NULL) */
	char *obj_path;              /* built_here: its object, the tier's to take (else NULL) */
};

struct build_tier {
	/* The tier's state for a new flight, or NULL (out of memory: the
	 * flight fails). Nothing else happens yet. */
	struct tier_flight *(*flight_new)(struct kilnd *d, struct flight *b);
	/* The first look, instead of the queue; a verdict follows. */
	void (*flight_start)(struct flight *b, struct tier_flight *f);
	/* The flight got a --jobs slot: claim its key; a verdict follows. */
	void (*claim)(struct flight *b, struct tier_flight *f);
	/* After the replies; frees f. in: the flight's input. */
	void (*flight_end)(struct tier_flight *f, const struct build_input *in,
			   struct flight_outcome *o);
	void (*stop)(struct kilnd *d);          /* the daemon stops */
};

/* A tier's decision for a flight (flight_verdict). */
enum tier_verdict {
	TIER_HIT,        /* found upstream: the flight ends with the fetched entry */
	TIER_NEED_TEXT,  /* missed, and the flight has digests only: need_sources */
	TIER_QUEUE,      /* missed, nobody builds it: wait for a --jobs slot */
	TIER_BUILD,      /* claimed here (or no claim can be made): build in the slot */
	TIER_WAIT,       /* another node builds it: give the slot back, wait for the tier */
	TIER_FAILED,     /* err_code and msg */
};

struct tier_result {
	enum tier_verdict verdict;
	struct store_entry *entry;   /* TIER_HIT: moved into the flight (left empty) */
	char *obj_path;              /* TIER_HIT: taken by the flight */
	int fd;                      /* TIER_HIT: taken by the flight */
	int err_code;                /* TIER_FAILED: an enum msg_err */
	const char *msg;             /* TIER_FAILED: the sentence */
};

/* Carries out the tier's verdict on b (loop thread). */
void flight_verdict(struct flight *b, struct tier_result *r);
/* What the tier may read of a flight: its input (request key, sources,
 * toolchain), read-only. */
const struct build_input *flight_input(const struct flight *b);

#endif
