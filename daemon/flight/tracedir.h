/*
 * A build's trace directory (tracedir.c).
 */
#ifndef KILN_DAEMON_TRACEDIR_H
#define KILN_DAEMON_TRACEDIR_H

#include <stddef.h>

/* Everything the trace files of one build may hold together. */
#define TRACE_MAX ((size_t)256 << 20)

/* A new random token (32 hex digits and NUL) to sign a build's trace. */
void tracedir_token(char out[33]);
/* The records of every file in a trace directory, concatenated (malloc'd
 * in *text; each file's end also ends a record). 0 or a negative errno. */
int tracedir_read(const char *dir, char **text, size_t *len);

#endif
