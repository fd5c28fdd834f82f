/*
 * Autospawn: starting kilnd when no daemon answers. Many ranks may do this at
 * once; kilnd holds an exclusive lock on its cache and socket, so the losers
 * exit quietly and every client then connects to the winner.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "lib_internal.h"

extern char **environ;

/* Waits for pid, retrying EINTR. Returns 0 with *status set, or -errno. */
static int spawn_wait(pid_t pid, int *status)
{
	for (;;) {
		if (waitpid(pid, status, 0) == pid)
			return 0;
		if (errno != EINTR)
			return -errno;
	}
}

/* Turns the exit status of kilnd --daemonize into a status code. */
static int spawn_status(const struct kiln *k, int status)
{
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status))
		return lib_err_set(KILN_ECONNECT,
				   "could not start kilnd at %s: it exited with status %d "
				   "(see its messages on stderr)",
				   k->kilnd_path, WEXITSTATUS(status));
	return lib_err_set(KILN_ECONNECT, "could not start kilnd at %s: it was killed by signal %d",
			   k->kilnd_path, WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

int lib_spawn_kilnd(const struct kiln *k)
{
	const char *argv[7];
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, all;
	bool fa_ok = false, attr_ok = false;
	int argc = 0, rc, status = 0;
	pid_t pid;

	argv[argc++] = k->kilnd_path;
	argv[argc++] = "--daemonize";
	argv[argc++] = "--socket";
	argv[argc++] = k->socket_path;
	if (k->cache_dir) {
		argv[argc++] = "--cache-dir";
		argv[argc++] = k->cache_dir;
	}
	argv[argc] = NULL;

	/*
	 * The daemon must not inherit what the application did to its signals
	 * (MPI runtimes block or ignore some), nor read its stdin or write into
	 * its stdout; stderr stays so that a failing start explains itself.
	 */
	rc = posix_spawn_file_actions_init(&fa);
	if (rc != 0)
		goto fail;
	fa_ok = true;
	rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (rc == 0)
		rc = posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	if (rc != 0)
		goto fail;
	rc = posix_spawnattr_init(&attr);
	if (rc != 0)
		goto fail;
	attr_ok = true;
	sigemptyset(&none);
	sigfillset(&all);
	rc = posix_spawnattr_setsigmask(&attr, &none);
	if (rc == 0)
		rc = posix_spawnattr_setsigdefault(&attr, &all);
	if (rc == 0)
		rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	if (rc != 0)
		goto fail;

	rc = posix_spawn(&pid, k->kilnd_path, &fa, &attr, (char *const *)argv, environ);
	if (rc != 0)
		goto fail;
	rc = spawn_wait(pid, &status);
	/* With SIGCHLD ignored the child is reaped for us (ECHILD) and its
	 * status is lost; connecting tells whether it worked. */
	if (rc == -ECHILD)
		rc = 0;
	else if (rc < 0)
		rc = lib_err_set(KILN_ECONNECT, "could not start kilnd at %s: waitpid: %s",
				 k->kilnd_path, strerror(-rc));
	else
		rc = spawn_status(k, status);
	goto out;
fail:
	rc = lib_err_set(KILN_ECONNECT, "could not start kilnd at %s: %s", k->kilnd_path,
			 strerror(rc));
out:
	if (fa_ok)
		posix_spawn_file_actions_destroy(&fa);
	if (attr_ok)
		posix_spawnattr_destroy(&attr);
	return rc;
}
