/*
 * Running a helper program to its end from a thread that may block (start-up
 * probes of a toolchain, checks on the thread pool): its output captured,
 * its whole process group killed when it exits or runs out of time.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runner.h"

extern char **environ;

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Appends what fd has to *buf (capped at 1 MiB); false at end of file. */
static bool capture_some(int fd, char **buf, size_t *len, size_t *cap)
{
	char chunk[4096];
	ssize_t n = read(fd, chunk, sizeof(chunk));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return true;
	if (n <= 0)
		return false;
	size_t take = *len + (size_t)n < (1u << 20) ? (size_t)n : (1u << 20) - *len;
	if (*len + take + 1 > *cap) {
		size_t ncap = (*len + take + 1) * 2;
		char *nb = realloc(*buf, ncap);
		if (nb == NULL)
			return false;
		*buf = nb;
		*cap = ncap;
	}
	memcpy(*buf + *len, chunk, take);
	*len += take;
	return true;
}

char *spawn_capture(char *const *argv, const char *cwd, int timeout_ms, int *status_out)
{
	return spawn_capture_env(argv, NULL, cwd, timeout_ms, status_out);
}

char *spawn_capture_env(char *const *argv, char *const *envp, const char *cwd, int timeout_ms,
			int *status_out)
{
	int fds[2];
	if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
		return NULL;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
	posix_spawn_file_actions_adddup2(&fa, fds[1], STDERR_FILENO);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	if (cwd != NULL)
		posix_spawn_file_actions_addchdir_np(&fa, cwd);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
	pid_t pid;
	int rc = posix_spawnp(&pid, argv[0], &fa, &attr, argv, envp != NULL ? envp : environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	close(fds[1]);
	if (rc != 0) {
		close(fds[0]);
		return NULL;
	}
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	bool exited = false, open_ = true;
	int status;
	/* Until the program exits: its output ends first, and then it exits
	 * within moments, so the wait after the end starts short. */
	int64_t deadline = now_us() + (int64_t)timeout_ms * 1000, nap_us = 100;
	while (buf != NULL && !exited && now_us() < deadline) {
		struct pollfd pfd = { .fd = fds[0], .events = POLLIN };
		if (open_) {
			if (poll(&pfd, 1, 10) > 0)
				open_ = capture_some(fds[0], &buf, &len, &cap);
		} else {
			usleep((useconds_t)nap_us);
			nap_us = nap_us < 10000 ? nap_us * 2 : 10000;
		}
		exited = waitpid(pid, &status, WNOHANG) == pid;
	}
	/* Whatever is left of the group (or the program itself, on a timeout) goes. */
	kill(-pid, SIGKILL);
	while (buf != NULL && open_ && capture_some(fds[0], &buf, &len, &cap) && len < (1u << 20)) {
		struct pollfd pfd = { .fd = fds[0], .events = POLLIN };
		if (poll(&pfd, 1, 0) <= 0)
			break;
	}
	close(fds[0]);
	if (!exited)
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
	if (buf != NULL)
		buf[len] = '\0';
	if (status_out != NULL)
		*status_out = exited ? status : -1;
	return buf;
}

