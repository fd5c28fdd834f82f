/*
 * Builds and the single-flight table. A build is keyed by its request key;
 * every request for a key that is being built attaches to that build as a
 * waiter, and all waiters get the same reply. Builds wait in a FIFO for one
 * of the --jobs slots. Each runs as a sequence of compiler steps started
 * through kiln-exec, then a load check, then a publish on the thread pool.
 */
#ifndef KILN_DAEMON_BUILD_H
#define KILN_DAEMON_BUILD_H

#include <stdbool.h>
#include <stdint.h>

#include "key.h"
#include "msg.h"

struct kilnd;
struct build;
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
 * connection. ctx is the waiter's (a connection, for dispatch.c).
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
bool build_is_pch(const struct build_input *in);
/* True for names that are headers (placed beside the sources, not compiled). */
bool build_is_header(const char *name);

/* Attaches a waiter: ops->done(ctx, id, ...) answers it. alias (may be NULL)
 * is pointed at the artifact on success. The build calls ops->release(ctx)
 * once, when it is freed; on failure (-ENOMEM) nothing was attached. */
int build_add_waiter(struct build *b, const struct waiter_ops *ops, void *ctx, uint64_t id,
		     const char *alias, bool joined);

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
	struct tier_flight *(*flight_new)(struct kilnd *d, struct build *b);
	/* The first look, instead of the queue; a verdict follows. */
	void (*flight_start)(struct build *b, struct tier_flight *f);
	/* The flight got a --jobs slot: claim its key; a verdict follows. */
	void (*claim)(struct build *b, struct tier_flight *f);
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
void flight_verdict(struct build *b, struct tier_result *r);
/* What the tier may read of a flight: its input (request key, sources,
 * toolchain), read-only. */
const struct build_input *flight_input(const struct build *b);

#endif
