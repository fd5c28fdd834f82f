/*
 * Programs kilnd starts from its loop (kiln-exec for each compile step and
 * load check) without copying kilnd's address space, and their exits
 * reported back on the loop (child.c).
 */
#ifndef KILN_DAEMON_CHILD_H
#define KILN_DAEMON_CHILD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

struct child;
struct child_watch;

/* Called on the loop once c's process has exited and been reaped: its exit
 * status, or the signal that killed it (then exit_status is 0). c is off
 * the watch by then; the callback may free it or start it again. */
typedef void (*child_exit_cb)(struct child *c, int64_t exit_status, int term_signal);

/* One started program. The caller owns the struct and keeps it alive until
 * its exit callback has run (or child_spawn failed). */
struct child {
	pid_t pid;
	child_exit_cb on_exit;
	void *data;                 /* the caller's */
	int wstatus;                /* waitpid's, once reaped */
	bool handed;                /* its start went to a standby (child_standby) */
	struct child *next;         /* the watch's list, while it runs */
};

struct child_start {
	const char *file;           /* a path: no $PATH search */
	char *const *argv;
	char *const *env;           /* the whole environment */
	const char *cwd;            /* NULL: kilnd's */
	int stdout_fd;              /* becomes its stdout; stdin and stderr are /dev/null */
};

/* The watch of loop's children: one SIGCHLD handle. NULL when out of
 * memory. Loop thread. */
struct child_watch *child_watch_new(uv_loop_t *loop);

/*
 * Starts o->file as a new session (its own process group, pid == pgid),
 * its signal mask empty and every signal's disposition the default, and
 * puts c on the watch; on_exit runs on the loop when it has exited.
 * Returns 0, or a negative errno when it could not start (the program
 * missing or not executable included): then nothing runs and on_exit never
 * comes. Loop thread.
 */
int child_spawn(struct child_watch *w, struct child *c, const struct child_start *o,
		child_exit_cb on_exit);

/*
 * Marks every descriptor kilnd was started with beyond 0-2 close-on-exec (a
 * Slurm prologue's or a test harness's files, systemd's socket): kilnd
 * keeps them, no compiler or helper it starts inherits them. Once, first
 * thing in main(), before any thread.
 */
void child_seal_inherited(void);

/*
 * Keeps up to n copies of file (kiln-exec) started and waiting in its
 * standby mode (`file standby PID`, exec_standby.c), started with env
 * (kept, not copied: it must last as long as the watch), so that a child_spawn
 * of that file hands the start to one of them, through a socket, instead
 * of starting a process: in a herd a new process waits behind every
 * process already runnable, a woken one runs at once. One taken is
 * replaced a little later, off the path of the start that took it. n 0:
 * none. Loop thread.
 */
void child_standby(struct child_watch *w, const char *file, char *const *env, unsigned n);

/* Standbys waiting now (for tests and the debug log). */
unsigned child_standbys(const struct child_watch *w);

/* Programs started and not yet reaped (standbys not counted). */
unsigned child_running(const struct child_watch *w);

/* Ends the standbys (their sockets closed, each killed and reaped), closes
 * the watch's handles and frees it once their close callbacks ran; w may
 * be NULL. Only with no child running (anything still running would never
 * be reported). Loop thread. */
void child_watch_close(struct child_watch *w);

#endif
