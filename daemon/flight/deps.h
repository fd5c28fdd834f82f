/*
 * The dependencies of a finished build, collected on the thread pool before
 * it is published (daemon/flight/deps.c).
 */
#ifndef KILN_DAEMON_DEPS_H
#define KILN_DAEMON_DEPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"
#include "trace.h"

/* A finished build, as much of it as its dependencies need. */
struct deps_build {
	const char *dir;          /* the build directory: trace/, out/dep*.d */
	const char *token;        /* the secret its trace is signed with */
	const char *exec_helper;  /* kiln-exec (kiln-observe.so lies next to it) */
	const char *rkey;         /* for the log */
	int64_t start_wall_ns;    /* when it started (dependency files' mtimes) */
	bool cpu_in_key;          /* the request's key holds the CPU (pseudo.h) */
};

/* deps_collect: the build read a pseudo-file that decides what it makes
 * and cannot be recorded (pseudo.h): serve it, do not cache it. */
#define DEPS_UNCACHEABLE 1
/* deps_collect: a program of the toolchain ran unobserved (static, Go,
 * LD_PRELOAD removed: trace.h's complete): serve it, do not cache it. */
#define DEPS_UNOBSERVED 2

/*
 * Fills e->deps and e->deps_source from the build's trace, each checked
 * and hashed. Returns 0; DEPS_UNCACHEABLE or DEPS_UNOBSERVED with a
 * sentence in why (the dependencies filled all the same, unchecked for
 * DEPS_UNOBSERVED); -EAGAIN with a sentence in why when an
 * input changed while the build ran; -EBADMSG when something else wrote into the trace;
 * or another negative errno.
 */
int deps_collect(const struct deps_build *b, struct store_entry *e, char *why, size_t cap);

/*
 * Reads and parses the trace of the build directory dir (its trace/) into
 * r, leaving kiln's own programs out, and the pseudo-files that are no
 * input (pseudo.h; an untrusted one is named in r->untrusted); *have is
 * false when nothing was traced. 0 or a negative errno. (recheck.c reads
 * its runs with it too.)
 */
int deps_read_trace(const char *dir, const char *token, const char *exec_helper,
		    bool cpu_in_key, struct trace_result *r, bool *have);

/*
 * Checks a dependency recorded on another node (put, upstream) against
 * this node: a file's content, a found path's type and permissions, a
 * missing path's absence, a variable's value. Fills a file's identity
 * here. 0, or -1 with a sentence in why. Thread pool.
 */
/* The first regular file with an execute bit called name in the
 * ':'-separated absolute directories of path, into out ("" and false when
 * none): a "search" dependency's state. */
bool deps_search(const char *path, const char *name, char *out, size_t cap);
int deps_check_here(struct store_dep *d, char *why, size_t cap);

#endif
