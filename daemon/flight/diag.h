/*
 * The compiler's messages in the user's terms. kilnd compiles each source
 * as src/NAME in a private build directory, so gcc, clang and nvcc name
 * "src/NAME" in every diagnostic; the user wrote NAME, or gave the file by
 * its path. diag_user_paths rewrites those mentions.
 */
#ifndef KILN_DAEMON_DIAG_H
#define KILN_DAEMON_DIAG_H

#include <stddef.h>

/*
 * log (len bytes) with every mention of from[i] replaced by to[i] (n pairs),
 * where a mention starts the text, a line, or follows a space, a quote or
 * '(' and is followed by ':' or '(' (gcc's "src/a.c:3:5:", "In file included
 * from src/a.c:1:", nvcc's "src/k.cu(12): error"). Longer names are tried
 * first. malloc'd, NUL-terminated, *outlen its length; NULL when out of
 * memory. Pure.
 */
char *diag_user_paths(const char *log, size_t len, const char *const *from, const char *const *to,
		      size_t n, size_t *outlen);

#endif
