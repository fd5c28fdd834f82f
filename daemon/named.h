/*
 * Toolchains a request names by path (docs/design.md, "Toolchains named by
 * the client"): "/opt/gcc/bin/g++", or nvcc with its host compiler. Each is
 * identified once, on the pool, exactly as a configured one is at start
 * (key_toolchain_init), kept, and checked again cheaply (the driver's and
 * host's resolved path, inode, size and times, and who may change them)
 * at most once a second; a changed one is identified again. Loop thread.
 */
#ifndef KILN_DAEMON_NAMED_H
#define KILN_DAEMON_NAMED_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct kilnd;
struct toolchain;

/* At most this many named toolchains known at once; when full, those that
 * failed or went unused for ten minutes are let go. */
#define NAMED_MAX 256

enum named_result { NAMED_READY, NAMED_PENDING, NAMED_REFUSED };

/*
 * The toolchain a request names: a configured name (host NULL), or a
 * compiler's absolute path with nvcc's host compiler (or NULL). uid: the
 * client's. NAMED_READY with *out; NAMED_PENDING: it is being identified,
 * and cb(arg) runs on the loop once that is over (ask again then);
 * NAMED_REFUSED with a sentence in why (an unknown name, a compiler this
 * client may not name, one that is not a compiler).
 */
enum named_result named_find(struct kilnd *d, const char *name, const char *host, uid_t uid,
			     const struct toolchain **out, void (*cb)(void *arg), void *arg,
			     char *why, size_t cap);
/* Whether uid may name the compiler at path (the rules of named.c), with
 * its resolved path in real (PATH_MAX bytes); why says why not. Any
 * thread. */
bool named_may(const struct kilnd *d, const char *path, uid_t uid, char *real, char *why,
	       size_t cap);
/* Identifies the toolchain an entry's "toolchain" names (a configured
 * name, or "PATH" or "PATH -ccbin HOST" of a named one) on this node, for
 * the daemon's owner, blocking (a pool job): 0 with *owned (free with
 * key_toolchain_fini and free) or *conf set, or -1 with why. */
int named_of_entry(const struct kilnd *d, const char *name, const struct toolchain **conf,
		   struct toolchain **owned, char *why, size_t cap);
/*
 * Whether tc, as this node has it, built e: the same toolchain name, and its
 * driver (and nvcc's host compiler), as configured or resolved, among the
 * files the build read. (Their content is checked with the other
 * dependencies.) Any thread: reads tc's names only.
 */
struct store_entry;
bool named_built_by(const struct store_entry *e, const struct toolchain *tc);
/* Frees them all (at stop, once no build runs). */
void named_fini(struct kilnd *d);
/* fn on each toolchain named by path and identified now (status). */
void named_foreach(struct kilnd *d, void (*fn)(const struct toolchain *tc, void *arg), void *arg);

#endif
