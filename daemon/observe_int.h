/*
 * Inside kiln-observe.so: what its hooks on files (observe.c) and its hooks
 * on the programs a toolchain starts (observe_exec.c) share: the trace they
 * write and the real functions they call through.
 */
#ifndef KILN_DAEMON_OBSERVE_INT_H
#define KILN_DAEMON_OBSERVE_INT_H

#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#define OBSERVE_HIDDEN __attribute__((visibility("hidden")))

/* The real function a hook calls: each file keeps its own pointers,
 * resolved on first use past the interposer (RTLD_NEXT). */
#define REAL(name) static __typeof__(name) *real_##name
#define RESOLVE(name) (real_##name != NULL ? 0 : (real_##name = dlsym(RTLD_NEXT, #name), 0))

/* Whether this process records (its trace file opened on first use). */
OBSERVE_HIDDEN bool observe_tracing(void);
/* Appends one record: head ("K pid fields"), a tab, path (signed). */
OBSERVE_HIDDEN void observe_emit(const char *head, const char *path);
/* A record of this process with a file's identity. */
OBSERVE_HIDDEN void observe_emit_ident(char kind, const char *path, const struct stat *st);
/* A probe's outcome: rc < 0 with err, or success with the mode. */
OBSERVE_HIDDEN void observe_note_probe(int dirfd, const char *path, int rc, int err, unsigned mode);
/* name's value in env, read without libc (no hook may recurse). */
OBSERVE_HIDDEN const char *observe_env_get(char *const *env, const char *name);

#endif
