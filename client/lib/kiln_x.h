/*
 * The private interface of libkiln for kiln's own libraries (libkiln-mpi):
 * exported under the kiln_x_ prefix because a separate shared library has to
 * reach it, but not installed and without any stability promise. Programs
 * use kiln.h, kiln_mpi.h and kiln_cuda.h only.
 *
 * A "skeleton" is a request as the protocol's get object, with every inline
 * source named by its SHA-256 and without id, alias and label: small enough
 * to send to every node, and equal for equal programs (its SHA-256 is the
 * program's identity across ranks).
 */
#ifndef KILN_CLIENT_KILN_X_H
#define KILN_CLIENT_KILN_X_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/kiln.h"

/* The skeleton of req (malloc'd, NUL-terminated, owned by the caller), or
 * NULL with the error text set (the request is invalid, or ENOMEM). */
char *kiln_x_skeleton(const struct kiln_request *req);

/*
 * Asks the daemon whether it has each skeleton's program, building nothing
 * ("build": false). status[i] gets KILN_OK (keys[i] filled), KILN_ENOTFOUND,
 * or another code; rkeys (may be NULL) the request key this daemon computes
 * for it, hit or miss ("" when it did not say): nodes whose keys agree have
 * the same compilers and can share artifacts. Returns KILN_OK when the batch
 * was answered.
 */
int kiln_x_probe_many(struct kiln *k, const char *const *skels, size_t n, char (*keys)[65],
		      char (*rkeys)[65], int *status);

/* Points each request's alias (those that have one) at the daemon's entry
 * for it, with probes that build nothing. KILN_OK, or the first failure. */
int kiln_x_alias_many(struct kiln *k, const struct kiln_request *reqs, size_t n);

/* kiln_get_many, plus each failed request's kiln_errmsg text in errs[i]
 * (malloc'd, caller frees; NULL for successes). errs may be NULL. */
int kiln_x_get_many(struct kiln *k, const struct kiln_request *reqs, size_t n,
		    struct kiln_program **out, int *status, char **errs);

/* As kiln_x_get_many, but loads nothing: fds[i] gets the artifact's
 * descriptor (owned by the caller, -1 on failure) and keys[i] its key. */
int kiln_x_fetch_many(struct kiln *k, const struct kiln_request *reqs, size_t n, int *fds,
		      char (*keys)[65], int *status, char **errs);

/*
 * What another node needs to import the artifact key (its bytes: data, size): a JSON object with key, sha256,
 * size, deps ([{path, sha256}]), build_ms, label and log (malloc'd, caller
 * frees). Asks the daemon for the entry and hashes the bytes.
 */
int kiln_x_export(struct kiln *k, const char *key, const void *data, size_t size, char **meta);

/*
 * Imports an artifact (fd, read from offset 0; not closed) built for
 * skeleton elsewhere, as meta describes it (kiln_x_export). Uses a
 * connection of its own, because the artifact travels as a descriptor.
 * KILN_OK, or KILN_EREFUSED when the daemon finds that it does not fit this
 * node ("mismatch": another compiler, header or environment), or another code.
 */
int kiln_x_put(struct kiln *k, const char *skeleton, const char *meta, int fd);

/* Gets the entry with this key (lookup by key; never builds) and loads it;
 * alias (may be NULL) is mapped to it in this process. */
int kiln_x_lookup_key(struct kiln *k, const char *key, const char *alias,
		      struct kiln_program **out);

/* Sets the calling thread's kiln_errmsg text and returns code. */
int kiln_x_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
