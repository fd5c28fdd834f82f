/*
 * Private declarations shared by the files of libkiln: the connection with
 * its pipelined calls (lib_conn.c), the process-local program table
 * (lib_prog.c), autospawn (lib_spawn.c) and per-thread errors (lib_err.c).
 */
#ifndef KILN_CLIENT_LIB_INTERNAL_H
#define KILN_CLIENT_LIB_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "kiln/kiln.h"
#include "lib_alias.h"
#include "msg.h"
#include "util.h"

struct lib_conn;
struct table;

/* A loaded artifact. Owned by the by_key table of its struct kiln. */
struct kiln_program {
	char key[KILN_KEY_HEX + 1];
	char *path;      /* the path the daemon named, owned */
	int fd;          /* the artifact's descriptor, owned */
	bool fd_named;   /* loaded as /proc/self/fd/<fd>: the fd must outlive us */
	void *handle;    /* dlopen handle; NULL for GPU outputs and once released */
	bool loaded;     /* loaded (dlopen or mapped); false: got as a file only, or
			  * released (load_lock guards it) */
	atomic_int refs; /* references taken by gets and lookups that loaded it;
			  * at 0 kiln_release unloads it */
	char output[8];  /* "shared", "cubin", "fatbin" or "ptx" */
	void *data;      /* GPU outputs: the bytes, mapped read-only, until released */
	size_t size;
	size_t map_len;  /* the length of data's mapping */
};

/*
 * One handle of the library. Configuration is fixed by kiln_open_with();
 * everything else is guarded as noted, so that any number of threads may
 * call into the same handle.
 */
struct kiln {
	/* Configuration, immutable after open; strings owned. */
	char *socket_path;
	char *kilnd_path;
	char *cache_dir;      /* NULL: the daemon's default */
	bool autospawn;
	atomic_int timeout_ms;  /* a silent kilnd fails calls after this; 0: never */

	/* The connection and its pending requests (lib_conn.c). */
	pthread_mutex_t lock;          /* guards conn and every lib_conn field it names */
	pthread_cond_t cond;           /* signalled when a reply arrives or the baton is free */
	pthread_mutex_t connect_lock;  /* one thread (re)connects at a time */
	struct lib_conn *conn;         /* NULL or broken: the next call reconnects */
	atomic_uint_least64_t next_id;

	/* The program table (lib_prog.c). load_lock serialises loads and
	 * guards by_key and the writers of by_alias, which the fast path
	 * reads without a lock (lib_alias.c). */
	pthread_mutex_t load_lock;
	struct table *by_key;       /* key -> struct kiln_program, owns them */
	struct alias_map by_alias;  /* alias -> struct kiln_program, borrowed */

	atomic_uint_least64_t requests;
	atomic_uint_least64_t local_hits;
	atomic_uint_least64_t loads;
};

/* lib_err.c: the calling thread's last error. */

/* Sets the calling thread's error text (printf-style) and returns code. */
int lib_err_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * Turns a failed reply ({"ok": false, "error": {...}}) into a status code and
 * the calling thread's error text; build errors get the compiler's log.
 */
int lib_err_from_reply(const cJSON *reply);
/* The status code for a daemon error code. */
int lib_err_map(enum msg_err err);

/* lib_conn.c: the connection. */

/* Connects now (used by kiln_open so that errors surface there). */
int lib_conn_start(struct kiln *k);
/* Drops the handle's connection; no call may be in flight. */
void lib_conn_stop(struct kiln *k);
/*
 * Sends req (its id is assigned here) and waits for its reply, while other
 * threads do the same on the shared connection. On success returns 0, *reply
 * gets the reply object ("ok": true; the caller frees it with cJSON_Delete)
 * and *fd the descriptor it carried, or -1 (the caller owns it). On failure
 * returns a status code with the thread's error text set, and nothing to free.
 */
int lib_conn_call(struct kiln *k, struct msg_request *req, cJSON **reply, int *fd);

/*
 * The reply to request i of a batch: rc 0 with reply ("ok": true; fn frees it
 * with cJSON_Delete) and fd (-1 or owned by fn), or a status code with the
 * thread's error text set, reply NULL and fd -1. Called without locks held.
 */
/* A reply of lib_conn_call_many: rc 0 with the reply (and its descriptor,
 * or -1), or a failure's status with its reply (NULL when none came); the
 * callback owns the reply and the descriptor. */
typedef void (*lib_reply_fn)(void *arg, size_t i, int rc, cJSON *reply, int fd);
/*
 * Sends the n requests of a batch together (ids are assigned here) and hands
 * each reply to fn as it arrives, in the calling thread. Returns 0 once fn
 * has seen every reply, or a status code (with the error text set) when the
 * batch could not be sent: then fn has seen none.
 */
int lib_conn_call_many(struct kiln *k, struct msg_request *const *reqs, size_t n,
		       lib_reply_fn fn, void *arg);

/*
 * A daemon's answer that a get by digest missed (need_sources): internal to
 * the library, which then sends the text; never returned to callers.
 */
#define LIB_ENEEDSRC (-1000)

/* kiln.c: checks a get request with the daemon's rules and fills its wire
 * form (strings borrowed from req; free m->sources). 0 or a status code.
 * Inline sources go by digest (msg_source.has_digest): a hit needs no text.
 * lib_request_with_text turns them back into text for the second try. */
int lib_request_build(const struct kiln_request *req, struct msg_request *m);
void lib_request_with_text(struct msg_request *m);
/* lib_request_build without the digests, for a batch: then
 * lib_request_digests of all its requests, which hashes the inline sources
 * two at a time (sha256_buf2). prev: the batch's last request that passed
 * this check, or NULL; arguments equal to its are not walked again. */
int lib_request_check(const struct kiln_request *req, struct msg_request *m,
		      const struct kiln_request *prev);
void lib_request_digests(struct msg_request *const *ms, size_t n);

/* lib_spawn.c: autospawn. */

/*
 * Starts k->kilnd_path with --daemonize for k's socket and waits until it has
 * exited, which kilnd does once its socket accepts connections (or another
 * kilnd serves it). Returns 0, or a status code with the error text set.
 */
int lib_spawn_kilnd(const struct kiln *k);

/* lib_prog.c: the process-local program table. */

/* Creates and frees the tables; frees every program (without dlclose). */
int lib_prog_init(struct kiln *k);
void lib_prog_fini(struct kiln *k);
/* The fast path: the program an alias maps to in this process, loaded, with
 * a reference taken for the caller; NULL when there is none (or it is being
 * released). No allocation, no system call, no lock. */
struct kiln_program *lib_prog_by_alias(struct kiln *k, const char *alias);
/*
 * Turns a successful get or lookup reply into a loaded program: reuses the
 * program of the same key when this process has it (and closes fd), else
 * loads the artifact. Takes ownership of fd in every case. Maps alias (may be
 * NULL) to the program. *out stays owned by k.
 */
int lib_prog_from_reply(struct kiln *k, const cJSON *reply, int fd, const char *alias, bool load,
			struct kiln_program **out);

#endif
