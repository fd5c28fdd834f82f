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
bool build_is_pch(const struct build_input *in);
/* True for names that are headers (placed beside the sources, not compiled). */
bool build_is_header(const char *name);
/* True when nvcc's host compiler compiles in's source name itself (a C++
 * source of an nvcc build whose arguments hostcc.h understands), or, with
 * name NULL, any C++ source of in (hostcc.h; docs/cuda.md). */
bool build_host_direct(const struct build_input *in, const char *name);

/* Attaches a waiter: ops->done(ctx, id, ...) answers it. alias (may be NULL)
 * is pointed at the artifact on success, with alias_data (may be NULL). The build calls ops->release(ctx)
 * once, when it is freed; on failure (-ENOMEM) nothing was attached. */
int build_add_waiter(struct build *b, const struct waiter_ops *ops, void *ctx, uint64_t id,
		     const char *alias, const char *alias_data, bool joined);

#endif
