/*
 * The C++ sources of an nvcc build compiled by nvcc's host compiler itself,
 * as CMake's CUDA support (and so DaCe's build) does: only .cu goes through
 * nvcc (docs/cuda.md, "Host sources"). This module knows what nvcc would
 * hand its host compiler: the toolkit's include directories (from nvcc's
 * profile, probed once per toolchain) and the host's share of nvcc's
 * arguments. Pure but for hostcc_profile's input; no state between calls.
 */
#ifndef KILN_DAEMON_HOSTCC_H
#define KILN_DAEMON_HOSTCC_H

#include <stdbool.h>
#include <stddef.h>

/* The include arguments nvcc gives its host compiler, at most this many. */
#define HOSTCC_MAX_INCS 16

/*
 * The include arguments of nvcc's profile ("-I<dir>", "-isystem", "<dir>")
 * from the output of `nvcc -dryrun` (its INCLUDES= and SYSTEM_INCLUDES=
 * lines), as a NULL-terminated array the caller frees with hostcc_free;
 * NULL when there are none (then no source is compiled apart from nvcc) or
 * out of memory.
 */
char **hostcc_profile(const char *dryrun);

/*
 * The host compiler's arguments for a C++ source of an nvcc request whose
 * arguments are args (n entries; libraries, which only the link takes, are
 * left out), with kilnd's NVCC_PREPEND_FLAGS before them and
 * NVCC_APPEND_FLAGS after, as nvcc reads them: the values of -Xcompiler,
 * the preprocessor's, -O, -std, -g, -w, -m64; nvcc's own options (the
 * architecture, device code, -Xptxas, ...) dropped. NULL-terminated, the
 * caller frees it with hostcc_free; NULL when an argument is not one this
 * table knows (the source then goes through nvcc, as before) or out of
 * memory. *nout (may be NULL) gets the count.
 */
char **hostcc_args(const char *const *args, size_t n, size_t *nout);

/* Whether hostcc_args understands args (it allocates and frees). */
bool hostcc_understood(const char *const *args, size_t n);

void hostcc_free(char **v);

#endif
