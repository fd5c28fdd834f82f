/*
 * Protocol messages: the operations, the stable error codes, and the one
 * request struct that the client packs and the daemon unpacks and validates.
 * Replies are plain cJSON objects; their fields are in docs/protocol.md.
 */
#ifndef KILN_PROTO_MSG_H
#define KILN_PROTO_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "depkind.h"

#define KILN_PROTO_VERSION 3

/* Limits enforced by msg_request_parse(). */
#define MSG_MAX_SOURCES 256
#define MSG_MAX_PCH 16     /* headers in a request's "pch" */
#define MSG_MAX_ARGS 4096
#define MSG_MAX_ARG_LEN 4096
#define MSG_MAX_ALIAS 256
#define MSG_MAX_LABEL 256
#define MSG_MAX_NAME 255
#define MSG_MAX_ID 9007199254740991.0 /* 2^53 - 1 */
#define MSG_MAX_DEPS 65536
#define MSG_MAX_LOG ((size_t)1 << 20)
#define MSG_MAX_WAIT_MS 600000 /* lookup's wait_ms: ten minutes */
#define MSG_MAX_DEPTH 8 /* objects and arrays inside each other; requests need 3 */

/* The operations, in ops.def's order (one row per op). */
enum msg_op {
	OP_UNKNOWN = -1,
#define KILN_OP(id, name, parse, pack, run, family, flags) OP_##id,
#include "ops.def"
	OP__COUNT
};

enum msg_err {
	ERR_NONE = 0,
	ERR_BAD_FRAME,
	ERR_BAD_JSON,
	ERR_BAD_REQUEST,
	ERR_UNKNOWN_OP,
	ERR_PROTO_MISMATCH,
	ERR_NOT_FOUND,
	ERR_AMBIGUOUS,
	ERR_BAD_TOOLCHAIN,
	ERR_BAD_NAME,
	ERR_BAD_ARG,
	ERR_TOO_LARGE,
	ERR_BUILD_FAILED,
	ERR_BUILD_TIMEOUT,
	ERR_IO,
	ERR_BUSY,
	ERR_SHUTTING_DOWN,
	ERR_DENIED,
	ERR_INTERNAL,
	ERR_NEED_SOURCES, /* a get named its sources by digest only, and missed */
	ERR_MISMATCH,     /* a put's artifact does not fit this node (key, headers, bytes) */
	ERR_INPUTS_CHANGED, /* an input of the build changed while it ran */
	ERR_CLAIMED,      /* a lookup that claims missed: this client produces it */
	ERR__COUNT
};

/* "hello", "get", ...; NULL for OP_UNKNOWN. */
const char *msg_op_name(enum msg_op op);
enum msg_op msg_op_parse(const char *name);
/* "bad_frame", ...; msg_err_parse returns ERR_INTERNAL for unknown codes. */
const char *msg_err_name(enum msg_err err);
enum msg_err msg_err_parse(const char *code);

/* Exactly one of text, path and digest names a source's content. A source
 * by digest (its SHA-256) can only be served from the cache; on a miss kilnd
 * answers need_sources and the client sends the text. */
struct msg_source {
	char *name;
	char *text;          /* inline text, or NULL */
	size_t len;          /* length of text */
	char *path;          /* absolute path, or NULL */
	bool has_digest;     /* the content is named by digest alone */
	uint8_t digest[32];  /* SHA-256 of the text, when has_digest */
};

/* One dependency of a put, as the building node recorded it (kinds:
 * depkind.h). */
struct msg_dep {
	char *path;          /* absolute; a variable's or program's name when named */
	int kind;            /* enum dep_kind */
	uint32_t mode;       /* exists: st_mode; env: 1 when set */
	uint8_t digest[32];  /* file: SHA-256 of its content; env: of its value;
	                      * listing: of the directory's names */
};

/* One request. Strings are owned by the struct (msg_request_free). Absent
 * optional strings are NULL; absent numbers are -1. */
struct msg_request {
	enum msg_op op;
	uint64_t id;
	/* hello */
	int64_t proto;
	char *client;
	bool heartbeat;    /* the client wants heartbeats while it waits */
	int64_t job_nodes; /* the nodes of the client's job (jobsize.h); 0: not said */
	/* get */
	char *toolchain;   /* a configured name or a compiler's absolute path;
			    * defaults to "cc" when absent */
	char *host_compiler; /* nvcc's host compiler by absolute path, or NULL */
	char *output;      /* defaults to "shared" when absent */
	char **args;
	size_t nargs;
	size_t code_arg;   /* 1 + index of the first argument that loads code
			    * into the toolchain (args.h), or 0 */
	struct msg_source *sources;
	size_t nsources;
	char *alias;       /* get, lookup, put */
	char *alias_data;  /* get, put: stored with the alias (base64, at most
			    * MSG_ALIAS_DATA_MAX bytes; only with alias) */
	char *label;
	bool no_build;     /* get with "build": false: answer not_found on a miss */
	bool claim;        /* lookup with "claim": true (daemon/claims.h) */
	uint64_t wait_ms;  /* lookup: how long to wait for another client's claim */
	bool claim_takeover; /* kilnd's own: a waiter looking again after a claim ended */
	bool counted;        /* kilnd's own: counted as a miss before it waited */
	bool upstream_looked; /* kilnd's own: an alias lookup that asked --upstream already */
	char **pch;        /* headers to precompile ("dace/dace.h"), or NULL */
	size_t npch;
	/* put: the artifact (its descriptor travels beside the frame) */
	uint8_t art_digest[32];
	int64_t art_size;
	int64_t build_ms;
	struct msg_dep *deps;
	size_t ndeps;
	char *log;
	/* lookup, put */
	char *key;
	/* show, remove, pin, unpin */
	char *ref;
	/* gc; config: the size to keep in kiln.conf, 0 to remove it */
	int64_t max_size;
	/* gc: remove the entries of an older or unknown key format instead */
	bool stale;
	/* export, import: a directory in the upstream tier's layout */
	char *dir;
};

/* The most a get or put may store with its alias (store.h's bound). */
#define MSG_ALIAS_DATA_MAX (4u << 20)

/* Details of a refused request. */
struct msg_error {
	enum msg_err code;
	char field[32];     /* offending field, or "" */
	char message[256];
};

/*
 * Parses and validates one request payload. On success fills req (free with
 * msg_request_free) and returns 0. On failure returns -1 and fills err; req
 * is left freed, but req->id is set when the payload carried a valid id so
 * that the error reply can name it (0 otherwise). A payload that is not a JSON
 * object gives ERR_BAD_JSON. Validation covers every field: types, ranges,
 * source names, argument rules, alias and label rules, limits above.
 */
int msg_request_parse(const char *json, size_t len, struct msg_request *req,
		      struct msg_error *err);

/*
 * What validate_args said of the last argument list it allowed (kilnd keeps
 * one, used by its loop thread only): the requests of a batch mostly carry
 * one list (every program of a rank is compiled with the same flags), and
 * validate_args is a function of the list alone, so a list equal to the
 * kept one byte for byte takes its verdict. A refused list is never kept; a
 * list longer than MSG_ARGS_MEMO_MAX bytes in all empties the memo.
 */
#define MSG_ARGS_MEMO_MAX 4096
struct msg_args_memo {
	char text[MSG_ARGS_MEMO_MAX]; /* the arguments, each with its NUL */
	size_t len;                   /* bytes of text used; 0: nothing kept */
	size_t nargs;
	size_t code_arg;              /* as msg_request's */
};

/* msg_request_parse, with the verdict of the last accepted list in memo
 * (zeroed before its first use; NULL: none kept). With a memo the request's
 * strings are taken out of cJSON's tree rather than copied, which is right
 * only in a process that sets no cJSON allocation hooks (kilnd). */
int msg_request_parse_memo(const char *json, size_t len, struct msg_request *req,
			   struct msg_error *err, struct msg_args_memo *memo);
void msg_request_free(struct msg_request *req);
/* Sets req to a request with no fields: strings and arrays NULL, counts 0,
 * the optional numbers (proto, max_size, art_size, build_ms) -1. */
void msg_request_init(struct msg_request *req);

/*
 * Packs a request into a compact JSON string (malloc'd, owned by the caller;
 * *len gets its length). Only the fields that matter for req->op are written;
 * NULL strings and negative numbers are left out. NULL on ENOMEM.
 */
char *msg_request_pack(const struct msg_request *req, size_t *len);

/*
 * Adds an integer member to obj written exactly (cJSON_AddNumberToObject
 * rounds integers above about 10^15, ids up to 2^53-1 included). Returns the
 * new item, owned by obj, or NULL on ENOMEM. For replies as well as requests.
 */
cJSON *msg_add_int(cJSON *obj, const char *name, int64_t v);

/* Builds {"id":id,"ok":true}, for the op's own members to follow. Returns a
 * new cJSON object owned by the caller, or NULL on ENOMEM. */
cJSON *msg_ok_reply(uint64_t id);
/* Builds {"id":id,"ok":false,"error":{"code":...,"message":...}} plus "field"
 * when err->field is set. Returns a new cJSON object owned by the caller. */
cJSON *msg_error_reply(uint64_t id, const struct msg_error *err);
/* Sets err; printf-style message. Returns -1 for convenience. */
int msg_error_set(struct msg_error *err, enum msg_err code, const char *field,
		  const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
