/*
 * kiln-exec: the supervisor kilnd starts for every compiler run and load
 * check. kilnd spawns it as the leader of a new session, so the compiler and
 * everything it starts share one process group. It asks the kernel for
 * SIGTERM when kilnd dies and answers it by killing that whole group, so a
 * killed daemon leaves no compiler burning CPU or writing into the cache.
 *
 *   kiln-exec run PARENT_PID -- PROGRAM [ARG]...   run a compiler
 *   kiln-exec check PARENT_PID FILE                dlopen(FILE, RTLD_NOW)
 */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static void kill_group(int sig)
{
	(void)sig;
	/* SIGKILL to our own group takes this process down with the rest. */
	kill(0, SIGKILL);
	_exit(137);
}

/* Dies with the parent: the kernel sends SIGTERM when kilnd exits, and the
 * parent check closes the race of kilnd dying before prctl ran. */
static int watch_parent(const char *ppid_arg)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = kill_group;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGHUP, &sa, NULL) != 0)
		return -1;
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0)
		return -1;
	pid_t want = (pid_t)strtol(ppid_arg, NULL, 10);
	if (getppid() != want)
		kill_group(SIGTERM);
	return 0;
}

static int run(char **argv)
{
	/* One stream: diagnostics from stdout and stderr stay in order. */
	if (dup2(STDOUT_FILENO, STDERR_FILENO) < 0)
		return 127;
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "kiln-exec: fork: %s\n", strerror(errno));
		return 127;
	}
	if (pid == 0) {
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		execv(argv[0], argv);
		fprintf(stderr, "kiln-exec: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return 127;
	}
	if (WIFSIGNALED(status)) {
		fprintf(stderr, "kiln-exec: %s was killed by signal %d (%s)\n", argv[0],
			WTERMSIG(status), strsignal(WTERMSIG(status)));
		return 128 + WTERMSIG(status);
	}
	return WEXITSTATUS(status);
}

static int check(const char *file)
{
	if (dup2(STDOUT_FILENO, STDERR_FILENO) < 0)
		return 127;
	void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		printf("%s\n", e != NULL ? e : "dlopen failed");
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 5 && strcmp(argv[1], "run") == 0 && strcmp(argv[3], "--") == 0) {
		if (watch_parent(argv[2]) != 0)
			return 127;
		return run(argv + 4);
	}
	if (argc == 4 && strcmp(argv[1], "check") == 0) {
		if (watch_parent(argv[2]) != 0)
			return 127;
		return check(argv[3]);
	}
	fprintf(stderr,
		"usage: kiln-exec run PARENT_PID -- PROGRAM [ARG]...\n"
		"       kiln-exec check PARENT_PID FILE\n"
		"kiln-exec is started by kilnd; it is not meant to be run by hand.\n");
	return 2;
}
