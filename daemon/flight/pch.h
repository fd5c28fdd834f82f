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

/*
 * Settles in's precompiled header, at once (loop thread): in->pch_rkey is the
 * .gch's request key when in names headers, its first compiled source is C
 * or C++ and its output is "shared" (then every compile of that language
 * includes them); in->pch_key is a valid .gch entry of it when there is one
 * and the toolchain is gcc's. Without one, a flight builds it, never waited
 * for: in the background (when no other build runs or waits), or first in
 * the queue when builds back up, so that builds starting after it use it
 * (pch_bind).
 */
void pch_settle(struct kilnd *d, struct build_input *in);
/*
 * At a build's first compile (loop thread): takes the .gch if it became valid
 * since the request settled, and links it into the build directory dir,
 * beside the generated header (objects are never rewritten, and the
 * compiler, confined to the build directory, cannot write through the link).
 */
void pch_bind(struct kilnd *d, struct build_input *in, const char *dir);
/* Forgets the .gch in uses (its key and dependencies). */
void pch_drop(struct build_input *in);

/* The generated header's name in the build directory ("pch/kiln_pch.hxx"
 * for C++, "pch/kiln_pch.h" for C), or NULL when in names none. */
const char *pch_include(const struct build_input *in);
/* Whether a compile of source name gets the precompiled header (a source of
 * the header's language). */
bool pch_applies(const struct build_input *in, const char *name);

/* Whether in, the build of a precompiled header, runs nvcc's host compiler
 * itself (the C++ header of an nvcc toolchain whose C++ sources it
 * compiles: step_host_direct), so that they can use its .gch. */
bool pch_by_host(const struct build_input *in);

/*
 * Writes the generated header into the build directory dir (its name under
 * the store's tmp/) when in uses one. 0 or a negative errno. Thread pool.
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
