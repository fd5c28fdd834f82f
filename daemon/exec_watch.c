/*
 * The images a toolchain runs, as the kernel reports them (exec_watch.h).
 * kiln-observe.so's hooks see an exec only where it passes through libc's
 * exported functions; a program that has no interposer (static, started
 * with LD_PRELOAD removed) or execs past libc leaves no record of its own.
 * The kernel reports every exec to a tracer: kiln-exec seizes the
 * compiler before it runs and follows every fork, vfork and clone, and at
 * each exec writes the new image's identity (K). kilnd then requires each
 * such image to answer with its own start record (trace.c): one that does
 * not ran unobserved. Only exec, fork and clone stop a process (and the
 * signals it gets, passed on at once): a compile's few processes cost a
 * few context switches each.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec_watch.h"
#include "observe_image.h"
#include "trace_rec.h"

static void watch_record(int fd, const char *token, const char *head, const char *path)
{
	char rec[PATH_MAX * 2 + 256];
	int n = snprintf(rec, sizeof(rec), "%s %s\t%s", token, head, path);
	if (fd >= 0 && n > 0 && (size_t)n < sizeof(rec))
		(void)!write(fd, rec, (size_t)n + 1);
}

/* pid has just exec'd: the image the kernel started, with its identity. */
static void note_image(int fd, const char *token, pid_t pid)
{
	char link[64], exe[PATH_MAX], head[256];
	struct stat st;
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
	ssize_t n = readlink(link, exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	if (stat(link, &st) != 0) {
		/* It cannot be named: an image nothing can answer for. */
		memset(&st, 0, sizeof(st));
	}
	image_ident_head(head, sizeof(head), REC_IMAGE, (long)pid, "", &st);
	watch_record(fd, token, head, exe);
}

/* One stop of a traced process, then on with it. */
static void resume(int fd, const char *token, pid_t pid, int status)
{
	int sig = WSTOPSIG(status), event = (unsigned)status >> 16, pass = 0;
	if (event == PTRACE_EVENT_EXEC)
		note_image(fd, token, pid);
	else if (event == 0 && sig != (SIGTRAP | 0x80))
		pass = sig; /* a signal for it: delivered as if nobody watched */
	/* PTRACE_EVENT_STOP (a new child's first stop, a group stop) and the
	 * fork, vfork and clone events go on with no signal. */
	ptrace(PTRACE_CONT, pid, NULL, (void *)(long)pass);
}

static int wait_plain(pid_t child)
{
	int status;
	while (waitpid(child, &status, 0) < 0) {
		if (errno != EINTR)
			return -1;
	}
	return status;
}

int exec_watch_run(pid_t child, int go, int trace_fd, const char *token)
{
	long opts = PTRACE_O_TRACEEXEC | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK |
		    PTRACE_O_TRACECLONE | PTRACE_O_EXITKILL;
	bool watched = ptrace(PTRACE_SEIZE, child, NULL, (void *)opts) == 0;
	if (!watched) {
		char head[32];
		snprintf(head, sizeof(head), "%c 0", REC_UNWATCHED);
		watch_record(trace_fd, token, head, strerror(errno));
	}
	/* Only now may the child go on to exec the compiler. */
	(void)!write(go, "g", 1);
	close(go);
	if (!watched)
		return wait_plain(child);
	for (;;) {
		int status;
		pid_t pid = waitpid(-1, &status, __WALL);
		if (pid < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (WIFSTOPPED(status))
			resume(trace_fd, token, pid, status);
		else if (pid == child)
			return status;
	}
}
