/*
 * Pseudo-files among what a toolchain read: files of procfs or sysfs,
 * devices, FIFOs and sockets, whose content is made by the kernel or
 * another process when read and so cannot be recorded by a digest. A few
 * are known not to decide what the toolchain produces (its own process's
 * state, the number of CPUs, random bytes, /dev/null) and are no input;
 * any other one makes the build uncacheable (docs/design.md, "Pseudo-files").
 */
#ifndef KILN_DAEMON_PSEUDO_H
#define KILN_DAEMON_PSEUDO_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

enum pseudo_kind {
	PSEUDO_NO,        /* an ordinary file, directory or path: an input */
	PSEUDO_HARMLESS,  /* no input: it cannot change what is built */
	PSEUDO_UNTRUSTED, /* its content decides and cannot be recorded */
};

/*
 * Pure: the verdict for a path under /proc or /sys by its name (the
 * interposer has resolved the magic links, so it is a genuine procfs or
 * sysfs path, "/proc/self/..." for the toolchain's own process), or
 * PSEUDO_NO for a path elsewhere. cpu_in_key: the request's key holds the
 * CPU's identity (an argument says "native"), so files that describe the
 * CPU decide nothing the key does not. *why gets a static phrase.
 */
enum pseudo_kind pseudo_by_name(const char *path, bool cpu_in_key, const char **why);
/*
 * Pure: the verdict for a found object that is not a regular file,
 * directory or symlink (st from stat), or on a filesystem of type fs_type
 * (statfs). *why gets a static phrase.
 */
enum pseudo_kind pseudo_by_stat(const char *path, const struct stat *st, long fs_type,
				const char **why);
/*
 * The verdict for path on this node: pseudo_by_name, else what stat and
 * statfs find there. A path that does not exist is PSEUDO_NO (its absence
 * is recorded like any other) unless its name decides.
 */
enum pseudo_kind pseudo_classify(const char *path, bool cpu_in_key, const char **why);

#endif
