/*
 * libkiln: get-or-build, load and resolve generated programs through kilnd.
 * This is the only installed header of kiln; everything else is private.
 */
#ifndef KILN_KILN_H
#define KILN_KILN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_VERSION "0.1.0"

/*
 * Status codes. Every function that can fail returns KILN_OK (0) or one of
 * the negative codes below; kiln_strerror() names them and kiln_errmsg()
 * gives the detailed text of the calling thread's last failure.
 */
enum kiln_status {
	KILN_OK = 0,
	KILN_EINVAL = -1,     /* invalid argument passed to the library */
	KILN_ENOMEM = -2,     /* out of memory */
	KILN_ECONNECT = -3,   /* no daemon answers at the socket */
	KILN_EPROTO = -4,     /* protocol error or protocol version mismatch */
	KILN_EIO = -5,        /* I/O error on the connection or a local file */
	KILN_ENOTFOUND = -6,  /* no such entry (kiln_lookup miss) */
	KILN_EBUILD = -7,     /* the compiler or the load check failed */
	KILN_ETIMEDOUT = -8,  /* the build ran past the daemon's timeout */
	KILN_ELOAD = -9,      /* dlopen of the artifact failed in this process */
	KILN_EREFUSED = -10,  /* the daemon refused the request as invalid */
	KILN_EDENIED = -11,   /* the daemon refused this peer */
	KILN_EBUSY = -12,     /* the daemon is overloaded or shutting down */
	KILN_EDAEMON = -13,   /* the daemon failed internally (disk full, I/O) */
	KILN_ECUDA = -14,     /* the CUDA driver failed (libkiln-cuda; see kiln_errmsg) */
};

/* A connection to kilnd plus the process-local program table; thread-safe. */
struct kiln;
/* A loaded artifact. Owned by its struct kiln, valid until kiln_close(). */
struct kiln_program;

/*
 * One source file of a request: either inline text (text, len; len 0 means
 * strlen(text)) or an absolute path that the daemon reads. name is a plain
 * file name (no '/'), used as the file name in the build directory, so its
 * extension selects the language as usual for the compiler.
 */
struct kiln_source {
	const char *name;
	const char *text;
	size_t len;
	const char *path;
};

struct kiln_request {
	const char *toolchain;              /* "cc", "c++", ...; NULL means "cc" */
	const char *output;                 /* "shared" (NULL means "shared") */
	const char *const *args;            /* extra compiler arguments */
	size_t nargs;
	const struct kiln_source *sources;
	size_t nsources;
	const char *alias;                  /* optional stable client key */
	const char *label;                  /* optional human-readable name */
};

/* Options for kiln_open_with(). Zero-initialise, then set what you need. */
struct kiln_options {
	const char *socket_path;  /* NULL: $KILN_SOCKET, else the default path */
	int autospawn;            /* start kilnd when none answers (also $KILN_AUTOSPAWN=1) */
	const char *kilnd_path;   /* kilnd to start; NULL: $KILN_KILND, else the installed one */
	const char *cache_dir;    /* --cache-dir for an autospawned kilnd; NULL: its default */
};

/*
 * Connects to kilnd and sends the protocol handshake. socket_path NULL means
 * $KILN_SOCKET, else $XDG_RUNTIME_DIR/kiln/kilnd.sock, else
 * /tmp/kiln-<uid>/kilnd.sock. With $KILN_AUTOSPAWN=1 a daemon is started when
 * none answers. The handshake's answer is not waited for, so that a fresh
 * process pays one round trip for its first request, not two: a protocol
 * version mismatch is reported (KILN_EPROTO) by the first call on the
 * connection. On success *out owns the connection; free it with
 * kiln_close(). On failure *out is NULL and kiln_errmsg(NULL) tells why.
 */
int kiln_open(const char *socket_path, struct kiln **out);
/* As kiln_open(), with options; opts may be NULL. */
int kiln_open_with(const struct kiln_options *opts, struct kiln **out);

/*
 * Closes the connection and unloads nothing: loaded programs stay mapped for
 * the life of the process (their code may still be running), but their
 * struct kiln_program handles become invalid. k may be NULL.
 */
void kiln_close(struct kiln *k);

/*
 * Gets the artifact for req, building it in the daemon if needed, and loads
 * it into this process. *out stays owned by k. A repeated call with the same
 * alias is answered from the process-local table without IPC. Thread-safe.
 */
int kiln_get(struct kiln *k, const struct kiln_request *req, struct kiln_program **out);

/*
 * Gets n programs at once: all n requests are in flight together, so the
 * daemon builds the missing ones in parallel (up to its --jobs) instead of
 * one after another. out[i] receives program i (NULL when it failed);
 * status, when not NULL, receives each request's code. Returns KILN_OK when
 * every request succeeded, else the code of the first failing one (by
 * index), with its text, prefixed "request I: ", in kiln_errmsg(). The
 * calling thread writes all requests at once and loads each program as its
 * reply arrives (no threads are created). Thread-safe.
 */
int kiln_get_many(struct kiln *k, const struct kiln_request *reqs, size_t n,
		  struct kiln_program **out, int *status);

/*
 * Looks an alias up (in this process first, then in the daemon) and loads
 * the artifact; never builds. Returns KILN_ENOTFOUND on a miss. Thread-safe.
 */
int kiln_lookup(struct kiln *k, const char *alias, struct kiln_program **out);

/* Resolves a symbol of a loaded program; NULL when it has no such symbol. */
void *kiln_sym(const struct kiln_program *p, const char *name);
/* The artifact's key (64 hex digits); owned by p. */
const char *kiln_program_key(const struct kiln_program *p);
/* The artifact's real path in the cache; owned by p. */
const char *kiln_program_path(const struct kiln_program *p);
/* The open descriptor of the artifact, owned by p (do not close it). */
int kiln_program_fd(const struct kiln_program *p);
/* The output kind the program was built as: "shared", "cubin", "fatbin" or
 * "ptx". */
const char *kiln_program_output(const struct kiln_program *p);
/* The bytes of a GPU output (cubin, fatbin, ptx), mapped read-only for the
 * life of the process, with *size set (may be NULL); a NUL follows the last
 * byte, so PTX is a C string. NULL (and 0) for a shared library: use
 * kiln_sym. kiln_sym returns NULL for GPU outputs. */
const void *kiln_program_data(const struct kiln_program *p, size_t *size);

/*
 * The detailed text of the calling thread's last failure, including compiler
 * output after KILN_EBUILD. Never NULL; owned by the library, valid until the
 * thread's next failing call. k may be NULL (for kiln_open failures).
 */
const char *kiln_errmsg(const struct kiln *k);
/* A static, short description of a status code. */
const char *kiln_strerror(int code);

/* Counters of one connection, for tests and diagnostics. */
struct kiln_stats {
	uint64_t requests;    /* requests sent to the daemon */
	uint64_t local_hits;  /* answers from the process-local table, no IPC */
	uint64_t loads;       /* artifacts loaded with dlopen */
};
void kiln_get_stats(struct kiln *k, struct kiln_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KILN_H */
