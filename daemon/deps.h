/*
 * The dependencies of a finished build, collected on the thread pool before
 * it is published (daemon/deps.c).
 */
#ifndef KILN_DAEMON_DEPS_H
#define KILN_DAEMON_DEPS_H

#include <stddef.h>

struct build;

/*
 * Fills b->entry.deps and deps_source from the build's trace (and its
 * dependency files where the trace is incomplete), each checked and
 * hashed. Returns 0, -EAGAIN with a sentence in why when an input changed
 * while the build ran, or another negative errno.
 */
int deps_collect(struct build *b, char *why, size_t cap);

/*
 * Checks a dependency recorded on another node (put, upstream) against
 * this node: a file's content, a found path's type and permissions, a
 * missing path's absence, a variable's value. Fills a file's identity
 * here. 0, or -1 with a sentence in why. Thread pool.
 */
struct store_dep;
int deps_check_here(struct store_dep *d, char *why, size_t cap);

#endif
