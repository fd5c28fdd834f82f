/*
 * The artifact reply, one schema for both sides (docs/protocol.md, "get"):
 * what kilnd answers a get, lookup or put with when it hands out an artifact,
 * whether a hit or a build, and what libkiln and the CLI read. One struct,
 * one printer (no allocation: the warm path's one reply), one parser.
 */
#ifndef KILN_PROTO_MSG_ARTIFACT_H
#define KILN_PROTO_MSG_ARTIFACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

/* Which file a descriptor is open on: kilnd's fstat of the descriptor it
 * attaches, so that the client need not fstat it again (0, 0: not said). */
struct msg_file_id {
	uint64_t dev, ino;
};

struct msg_artifact {
	uint64_t id;
	bool fd;                     /* a descriptor rides with the reply (always, from kilnd) */
	const char *key;             /* the artifact's key: 64 hex */
	const char *rkey;            /* the request key kilnd computed: 64 hex, or NULL */
	const char *path;            /* where the object lives (absolute) */
	const char *output;          /* "shared", "cubin", "fatbin", "ptx", "pch" */
	uint64_t size;
	bool cached;                 /* no compiler ran for this request */
	bool joined;                 /* attached to a build another request started */
	uint64_t build_ms;           /* the build that produced it */
	const char *uncacheable;     /* served and not cached: why; else NULL */
	const char *log;             /* a compiler ran and printed this; else NULL */
	const char *alias_data;      /* a lookup by alias: the data stored with
	                                it (base64), else NULL */
	struct msg_file_id file;     /* the descriptor's device and inode; ino 0, or
	                                either past 2^53: not printed */
};

/*
 * Prints a as one JSON object into buf (cap bytes, NUL-terminated when it
 * fits). Returns the length the text needs (without the NUL), as snprintf
 * does: when that is cap or more nothing usable was written, and the caller
 * may print again into a buffer that large.
 */
size_t msg_artifact_print(const struct msg_artifact *a, char *buf, size_t cap);

/*
 * Reads an artifact reply (ok: true) into a; its strings point into reply.
 * Returns 0, or -1 with *why a sentence: key not 64 lower-case hex, path
 * not absolute, a member of the wrong type.
 */
int msg_artifact_parse(const cJSON *reply, struct msg_artifact *a, const char **why);

/* The members the printer writes, in order (optional ones included), NULL
 * ended: for tests that hold them against docs/protocol.md. */
extern const char *const msg_artifact_members[];

#endif
