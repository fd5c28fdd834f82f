/*
 * Reading the trace that kiln-observe.so wrote during a build (format in
 * daemon/observe.c) into the list of what the toolchain looked at: files
 * read (with the identity they had when opened), files and directories
 * found, paths looked for and not found, environment variables read. Pure:
 * no I/O, so the unit tests feed it traces directly.
 */
#ifndef KILN_DAEMON_TRACE_H
#define KILN_DAEMON_TRACE_H

#include <stdbool.h>
#include <stddef.h>

#include "store.h"

struct trace_result {
	struct store_dep *deps;  /* unique paths, kinds as in store.h; FILE and
	                          * EXISTS carry the identity the trace saw
	                          * (dev, ino, size, mtime, ctime, mode; an
	                          * access() probe has mode 0) */
	size_t ndeps;
	/* Every process of the toolchain was traced: each exec was answered
	 * by the start record of the image it runs (the program, or its `#!`
	 * interpreter), naming that file; a static program, or one started
	 * with LD_PRELOAD removed, leaves none, and a program known to bypass
	 * libc (Go) says so. */
	bool complete;
	char incomplete[512];    /* why not, for the log and the error */
	/* A path seen in two states during the build (found and missing, or
	 * opened with two identities): an input changed while the build ran. */
	char changed[512];
	/* A record without the build's token, or malformed: something other
	 * than kiln-observe.so wrote into the trace directory. */
	char damaged[128];
	/* Set by deps_read_trace: a pseudo-file read that decides the build
	 * and cannot be recorded (pseudo.h); empty when none. */
	char untrusted[512];
	size_t records;          /* records read, for the log */
	/* kiln-exec's watch of the execs was refused (why); the hooks'
	 * records alone told what ran. Empty when it watched. */
	char unwatched[128];
};

/* Looks a variable up in kilnd's own environment (getenv in kilnd). */
typedef const char *(*trace_env_fn)(const char *name);

/*
 * Parses the trace text (len bytes, NUL-terminated records, each starting
 * with token and a space; others make out->damaged). bdir is the
 * build directory's real path: paths in it (the sources, outputs and
 * temporaries, which the key covers or which are the build's own) are left
 * out, as are the paths in skip (NULL-terminated: the interposer and
 * kiln-exec). Paths under /proc, /sys and /dev are kept: which of them
 * are inputs is decided on this node (deps.c, pseudo.c). Paths are made canonical without following
 * symlinks: "." and empty components go, and ".." is applied only where
 * the path so far is a prefix of bdir (known to have no symlinks), so
 * "src/../../../../abs/h.h" becomes "/abs/h.h" and "/opt/link/../h.h"
 * stays as the kernel resolves it. An environment variable counts only
 * when the toolchain saw kilnd's own value (env): variables the toolchain
 * sets for its own children are not inputs. Fills *out (free with
 * trace_result_free); returns 0 or -ENOMEM.
 */
int trace_parse(const char *text, size_t len, const char *token, const char *bdir,
		const char *const *skip, trace_env_fn env, struct trace_result *out);
void trace_result_free(struct trace_result *r);

/*
 * The canonical form described above of the absolute path in, into out
 * (cap bytes). Returns false when the path is inside bdir or too long.
 */
bool trace_normalize(const char *in, const char *bdir, char *out, size_t cap);

#endif
