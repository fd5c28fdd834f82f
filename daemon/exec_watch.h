/*
 * kiln-exec's watch over the images a toolchain runs (exec_watch.c): the
 * kernel's own word, through ptrace, on every program started in every
 * process of the run, whatever started it (a static launcher, fexecve,
 * a raw execve, glibc's internal spawns for system() and popen()).
 */
#ifndef KILN_DAEMON_EXEC_WATCH_H
#define KILN_DAEMON_EXEC_WATCH_H

#include <sys/types.h>

/*
 * Attaches to child, which waits for a byte on go before it runs
 * anything, follows it and every process it starts, and writes one
 * record of kind image (proto/trace_rec.h's REC_IMAGE, signed with token)
 * to trace_fd for each program the kernel started in any of them. When
 * the kernel refuses the attachment (a Yama or seccomp policy), the child
 * runs unwatched and a record of kind note says so. Returns the child's
 * wait status, as waitpid gives it, once the child has ended (the other
 * processes are killed with kiln-exec, as before), or -1 when waiting
 * failed.
 */
int exec_watch_run(pid_t child, int go, int trace_fd, const char *token);

#endif
