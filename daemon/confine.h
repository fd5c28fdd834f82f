/*
 * Confining a compiler run to its build directory with Landlock (confine.c),
 * used by kiln-exec before it starts the compiler, and by kilnd to know at
 * start whether the kernel has it.
 */
#ifndef KILN_DAEMON_CONFINE_H
#define KILN_DAEMON_CONFINE_H

#include <stddef.h>

/* The kernel's Landlock ABI version, or 0 when it has none (or it is
 * disabled), with the reason in why. */
int confine_abi(char *why, size_t cap);

/*
 * Restricts this process and everything it starts: files may be read and
 * run anywhere, but created, written, truncated, renamed, linked or removed
 * only below dir and the nextra directories of extra (and /dev/null
 * written). Irreversible. 0, or a negative
 * errno with the reason in why.
 */
int confine_writes(const char *dir, const char *const *extra, size_t nextra, char *why, size_t cap);

#endif
