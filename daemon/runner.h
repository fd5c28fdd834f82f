/*
 * Running a helper program to its end and capturing its output (runner.c).
 */
#ifndef KILN_DAEMON_RUNNER_H
#define KILN_DAEMON_RUNNER_H

/*
 * Runs argv (argv[0] a path or a name on $PATH, no shell) in cwd (NULL: the
 * current directory), in its own process group, and returns its output,
 * stdout and stderr together (malloc'd, at most 1 MiB), or NULL when it
 * could not start. A wrapper that leaves a background job holding the
 * output, or a program that hangs, cannot stall the caller: once the
 * program exits, or after timeout_ms, its whole group is killed.
 * *status_out (may be NULL) gets the wait status, or -1 when it was killed
 * for running out of time. Blocking; any thread.
 */
char *spawn_capture(char *const *argv, const char *cwd, int timeout_ms, int *status_out);
/* The same with envp (NULL: this process's environment). */
char *spawn_capture_env(char *const *argv, char *const *envp, const char *cwd, int timeout_ms,
			int *status_out);

#endif
