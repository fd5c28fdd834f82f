/*
 * Checking an artifact built on another node before taking it (recheck.c).
 */
#ifndef KILN_DAEMON_RECHECK_H
#define KILN_DAEMON_RECHECK_H

#include <stddef.h>

struct kilnd;
struct build_input;
struct store_dep;

/*
 * Runs the request's toolchain here under observation (stand-ins of the
 * sources compiled and linked; the real sources preprocessed when in has
 * their text) and requires every dependency it observes to be in sent
 * (path and kind); then, for a shared library, requires artifact (a file)
 * to load in kiln-exec. 0, or -1 with a sentence in why. Thread pool;
 * blocks for a small compile.
 */
int recheck_peer(const struct kilnd *d, const struct build_input *in, const struct store_dep *sent,
		 size_t nsent, const char *artifact, char *why, size_t cap);

/* A copy of what recheck_peer reads of a build's input (toolchain, output,
 * arguments, source names and texts), for a pool job that must not look
 * at the build's own input; NULL when out of memory. */
struct build_input *recheck_input_copy(const struct build_input *in);
void recheck_input_free(struct build_input *in);
/* The request an entry from another cache stands for (kiln import): its
 * toolchain by name, its arguments and source names from the metadata, no
 * texts. NULL with why when it cannot be had. */
struct store_entry;
struct build_input *recheck_input_of_entry(const struct kilnd *d, const struct store_entry *e,
					   char *why, size_t cap);

#endif
