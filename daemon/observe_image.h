/*
 * What the kernel runs for an exec (observe_image.c): a script's `#!`
 * interpreter, read the way the kernel reads it. Shared by kiln-observe.so
 * (every exec and spawn of the toolchain) and kiln-exec (the first
 * program), so that each names the image that will answer for the exec.
 * Allocates nothing and calls no hooked function: it also runs in vfork
 * children.
 */
#ifndef KILN_DAEMON_OBSERVE_IMAGE_H
#define KILN_DAEMON_OBSERVE_IMAGE_H

#include <stdbool.h>
#include <stddef.h>

/* The kernel reads this much of a file to find its `#!` line
 * (BINPRM_BUF_SIZE), and follows at most this many interpreters that are
 * scripts themselves (fs/exec.c's recursion limit). */
#define IMAGE_HEAD 256
#define IMAGE_MAX_DEPTH 4

/*
 * Whether the n bytes at head (the start of a file) make it a script, as
 * fs/binfmt_script.c decides; if so its interpreter's name (up to the
 * first blank, as written: absolute or relative to the exec'ing
 * process's working directory) goes into interp (cap bytes). False for
 * anything else, also a `#!` line the kernel refuses (no interpreter, or
 * one cut off by the end of the head). Pure.
 */
__attribute__((visibility("hidden")))
bool image_shebang(const char *head, size_t n, char *interp, size_t cap);

/*
 * The interpreter the kernel starts for executing path, read from the
 * file with plain system calls (no libc wrapper a hook sits on); false
 * when path is no script or cannot be read (then the kernel runs it as
 * it is, or fails). shell: the exec is execvp's, which runs a file that
 * is neither a script nor an ELF binary with /bin/sh.
 */
__attribute__((visibility("hidden")))
bool image_interpreter(const char *path, bool shell, char *interp, size_t cap);

/*
 * A trace record's head with a file's identity, as every writer of the
 * trace spells it (trace.c reads it): kind, pid, the numbers in pre (may
 * be empty, else starting with a space), then dev ino size mtime ctime
 * mode (mode octal, times in ns).
 */
struct stat;
__attribute__((visibility("hidden")))
void image_ident_head(char *head, size_t cap, char kind, long pid, const char *pre,
		      const struct stat *st);

#endif
