/*
 * Precompiled headers managed by kilnd (docs/pch.md). A request may name
 * headers to precompile ("pch": ["dace/dace.h"]). Before such a request
 * builds, kilnd settles its precompiled header: an entry of output "pch"
 * keyed like any other (toolchain, arguments, the generated header that
 * includes the named ones), found valid in the store or built by a flight
 * of its own that every request needing it joins. The request's compile
 * then runs with -include of that header, its .gch beside it in the build
 * directory; the artifact's dependencies are its own plus the .gch's, so a
 * hit is checked against every header the .gch holds.
 */
#ifndef KILN_DAEMON_PCH_H
#define KILN_DAEMON_PCH_H

#include <stdbool.h>
#include <stddef.h>

struct build_input;
struct kilnd;
struct store;
struct store_entry;

/* Where the build directory holds the precompiled header, by language. */
#define PCH_DIR "pch"

/* Called on the loop once in's precompiled header is settled. */
typedef void (*pch_next_fn)(void *ctx, struct build_input *in);

/*
 * Settles in's precompiled header and calls next(ctx, in): at once when in
 * names none, its toolchain is not gcc's, or a valid one is in the store;
 * after the flight that builds it otherwise. in->pch_key is then the .gch
 * entry's key, or "" when there is none to use (a failed precompile only
 * costs the speed-up: the request builds without). Sets in->pch_done.
 * Loop thread.
 */
void pch_settle(struct kilnd *d, struct build_input *in, pch_next_fn next, void *ctx);

/* The generated header's name in the build directory ("pch/kiln.hxx" for
 * C++, "pch/kiln.h" for C), or NULL when in uses no precompiled header. */
const char *pch_include(const struct build_input *in);
/* Whether a compile of source name gets the precompiled header (a source of
 * the header's language). */
bool pch_applies(const struct build_input *in, const char *name);

/*
 * Places the precompiled header in the build directory dir (its name under
 * the store's tmp/): the generated header and, beside it, a link to the
 * .gch object (objects are never rewritten, and the compiler, confined to
 * the build directory, cannot write through it). 0 or a negative errno.
 * Thread pool.
 */
int pch_place(struct store *s, const char *dir, const struct build_input *in);

/*
 * Adds the .gch entry's dependencies (in->pch_deps) to e's: the compiler
 * read the headers inside it through the .gch, so its trace lacks them.
 * -EAGAIN with a sentence in why when one is recorded in two states (it
 * changed between the precompile and the build); -ENOMEM. Thread pool.
 */
int pch_merge_deps(const struct build_input *in, struct store_entry *e, char *why, size_t cap);

#endif
