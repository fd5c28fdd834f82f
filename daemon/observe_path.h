/*
 * The paths kiln-observe.so records (observe_path.c), apart from the hooks
 * in observe.c.
 */
#ifndef KILN_DAEMON_OBSERVE_PATH_H
#define KILN_DAEMON_OBSERVE_PATH_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Makes path absolute into out (cap bytes), relative to dirfd (AT_FDCWD:
 * the working directory), squashes "//" and "/./", and resolves what it
 * names under /proc and /dev in this process (the toolchain's own magic
 * links, ".." out of /dev: see observe_path.c). *resolved (may be NULL)
 * turns true when a link was followed: what a probe saw of the link itself
 * is then not the type of what the record names. errno is kept. False when
 * the path cannot be told.
 */
__attribute__((visibility("hidden")))
bool observe_absolute(int dirfd, const char *path, char *out, size_t cap, bool *resolved);

#endif
