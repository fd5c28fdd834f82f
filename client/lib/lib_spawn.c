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
#include <unistd.h>

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

/* Turns the exit status of kilnd --daemonize into a status code; what kilnd
 * said on stderr goes into the message. */
static int spawn_status(const struct kiln *k, int status, const char *said)
{
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status))
		return lib_err_set(KILN_ECONNECT, "could not start kilnd at %s: it exited with status %d: %s",
				   k->kilnd_path, WEXITSTATUS(status), said[0] != '\0' ? said : "(no message)");
	return lib_err_set(KILN_ECONNECT, "could not start kilnd at %s: it was killed by signal %d",
			   k->kilnd_path, WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* Reads what kilnd --daemonize writes on stderr until it closes it, keeping
 * the first len - 1 bytes. */
static void read_said(int fd, char *buf, size_t len)
{
	size_t have = 0;
	char scratch[512];
	for (;;) {
		ssize_t n = read(fd, scratch, sizeof(scratch));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		size_t take = (size_t)n < len - 1 - have ? (size_t)n : len - 1 - have;
		memcpy(buf + have, scratch, take);
		have += take;
	}
	while (have > 0 && buf[have - 1] == '\n')
		have--;
	buf[have] = '\0';
}

/*
 * The daemon must not inherit what the application did to its signals (MPI
 * runtimes block or ignore some), nor read its stdin or write into its
 * stdout. Its stderr comes back through a pipe (errfd): a failing start
 * explains itself in kiln_errmsg(), and the "already running" notes of the
 * many ranks that lost the race stay off the application's stderr. 0 or a
 * positive errno; on success fa and attr need destroying.
 */
static int spawn_setup(posix_spawn_file_actions_t *fa, posix_spawnattr_t *attr, int errfd)
{
	sigset_t none, all;
	int rc = posix_spawn_file_actions_init(fa);

	if (rc != 0)
		return rc;
	rc = posix_spawn_file_actions_addopen(fa, 0, "/dev/null", O_RDONLY, 0);
	if (rc == 0)
		rc = posix_spawn_file_actions_addopen(fa, 1, "/dev/null", O_WRONLY, 0);
	if (rc == 0)
		rc = posix_spawn_file_actions_adddup2(fa, errfd, 2);
	if (rc == 0)
		rc = posix_spawnattr_init(attr);
	if (rc != 0) {
		posix_spawn_file_actions_destroy(fa);
		return rc;
	}
	sigemptyset(&none);
	sigfillset(&all);
	rc = posix_spawnattr_setsigmask(attr, &none);
	if (rc == 0)
		rc = posix_spawnattr_setsigdefault(attr, &all);
	if (rc == 0)
		rc = posix_spawnattr_setflags(attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	if (rc != 0) {
		posix_spawn_file_actions_destroy(fa);
		posix_spawnattr_destroy(attr);
	}
	return rc;
}

int lib_spawn_kilnd(const struct kiln *k)
{
	const char *argv[7];
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	int argc = 0, rc, status = 0;
	int errp[2] = { -1, -1 };
	char said[1024] = "";
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

	rc = pipe2(errp, O_CLOEXEC) != 0 ? errno : spawn_setup(&fa, &attr, errp[1]);
	if (rc == 0) {
		rc = posix_spawn(&pid, k->kilnd_path, &fa, &attr, (char *const *)argv, environ);
		posix_spawn_file_actions_destroy(&fa);
		posix_spawnattr_destroy(&attr);
	}
	if (rc != 0) {
		rc = lib_err_set(KILN_ECONNECT, "could not start kilnd at %s: %s; set KILN_KILND to "
				 "kilnd's path", k->kilnd_path, strerror(rc));
	} else {
		close(errp[1]);
		errp[1] = -1;
		read_said(errp[0], said, sizeof(said));
		rc = spawn_wait(pid, &status);
		/* With SIGCHLD ignored the child is reaped for us (ECHILD) and
		 * its status is lost; connecting tells whether it worked. */
		if (rc == -ECHILD)
			rc = 0;
		else if (rc < 0)
			rc = lib_err_set(KILN_ECONNECT, "could not start kilnd at %s: waitpid: %s",
					 k->kilnd_path, strerror(-rc));
		else
			rc = spawn_status(k, status, said);
	}
	for (int i = 0; i < 2; i++) {
		if (errp[i] >= 0)
			close(errp[i]);
	}
	return rc;
}
