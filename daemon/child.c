/*
 * Programs kilnd starts from its loop, and their exits (child.h).
 *
 * libuv's uv_spawn forks: the kernel copies kilnd's page tables and marks
 * every private page copy-on-write, and until the child has exec'd, each
 * page kilnd's threads write costs a fault. On the 2-vCPU VM of
 * docs/performance.md ("Issue 32, ninth step") a uv_spawn of kiln-exec
 * took 4-11 ms of the loop in a herd, and a process of kilnd's size paid
 * 27-35 ms of faults writing 8 MiB after a fork (0.6-0.8 ms after
 * posix_spawn). glibc's posix_spawn clones with CLONE_VM | CLONE_VFORK:
 * nothing is copied, and the loop waits only until the exec.
 *
 * libuv cannot adopt a process it did not start, so the exits come here
 * the way libuv learns of its own: one SIGCHLD handle, and on each signal
 * a waitpid(pid, WNOHANG) for every program on the list (signals merge;
 * a pid on the list is ours until we reap it). Other children of kilnd
 * (the thread pool's probes, runner.c) are waited for by pid by their
 * starters, never here.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__has_include)
#if __has_include(<linux/close_range.h>)
#include <linux/close_range.h>
#endif
#endif

#include "child.h"
#include "log.h"
#include "thread.h"

struct child_watch {
	uv_signal_t sig;            /* first: the close callback finds the struct */
	struct child *list;         /* started, not yet reaped */
	bool started;
};

static void watch_ref(struct child_watch *w)
{
	/* An idle watch does not keep the loop alive; a child to reap does. */
	if (w->list != NULL)
		uv_ref((uv_handle_t *)&w->sig);
	else
		uv_unref((uv_handle_t *)&w->sig);
}

static void on_sigchld(uv_signal_t *s, int signum)
{
	struct child_watch *w = (struct child_watch *)s;
	struct child *done = NULL, **tail = &done;
	(void)signum;
	/* Reap first, call back after: a callback may start a program, which
	 * goes on the list this walk would otherwise be changing. */
	for (struct child **pp = &w->list; *pp != NULL;) {
		struct child *c = *pp;
		int status = 0;
		pid_t r;
		while ((r = waitpid(c->pid, &status, WNOHANG)) < 0 && errno == EINTR)
			;
		if (r == 0) {
			pp = &c->next;
			continue;
		}
		if (r < 0) {
			/* Not ours to wait for any more: someone reaped it. */
			log_warn("child %d: waitpid: %s; taken as killed", (int)c->pid, strerror(errno));
			status = SIGKILL;
		}
		*pp = c->next;
		c->next = NULL;
		*tail = c;
		tail = &c->next;
		c->wstatus = status;
		c->pid = 0;
	}
	watch_ref(w);
	while (done != NULL) {
		struct child *c = done;
		done = c->next;
		c->next = NULL;
		if (WIFEXITED(c->wstatus))
			c->on_exit(c, WEXITSTATUS(c->wstatus), 0);
		else
			c->on_exit(c, 0, WIFSIGNALED(c->wstatus) ? WTERMSIG(c->wstatus) : SIGKILL);
	}
}

struct child_watch *child_watch_new(uv_loop_t *loop)
{
	struct child_watch *w = calloc(1, sizeof(*w));
	if (w == NULL || uv_signal_init(loop, &w->sig) != 0) {
		free(w);
		return NULL;
	}
	return w;
}

unsigned child_running(const struct child_watch *w)
{
	unsigned n = 0;
	for (const struct child *c = w != NULL ? w->list : NULL; c != NULL; c = c->next)
		n++;
	return n;
}

/* The start's attributes: a new session, no signal blocked, every signal's
 * action the default (kilnd ignores SIGPIPE; its compilers must not). */
static int spawn_attrs(posix_spawnattr_t *attr)
{
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	int rc = posix_spawnattr_init(attr);
	if (rc != 0)
		return rc;
	if ((rc = posix_spawnattr_setsigmask(attr, &none)) != 0 ||
	    (rc = posix_spawnattr_setsigdefault(attr, &all)) != 0 ||
	    (rc = posix_spawnattr_setflags(attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
						    POSIX_SPAWN_SETSIGDEF)) != 0)
		posix_spawnattr_destroy(attr);
	return rc;
}

static int spawn_files(posix_spawn_file_actions_t *fa, const struct child_start *o)
{
	int rc = posix_spawn_file_actions_init(fa);
	if (rc != 0)
		return rc;
	if ((rc = posix_spawn_file_actions_addopen(fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0)) != 0 ||
	    (rc = posix_spawn_file_actions_adddup2(fa, o->stdout_fd, STDOUT_FILENO)) != 0 ||
	    (rc = posix_spawn_file_actions_addopen(fa, STDERR_FILENO, "/dev/null", O_RDWR, 0)) != 0 ||
	    (o->cwd != NULL && (rc = posix_spawn_file_actions_addchdir_np(fa, o->cwd)) != 0))
		posix_spawn_file_actions_destroy(fa);
	return rc;
}

int child_spawn(struct child_watch *w, struct child *c, const struct child_start *o,
		child_exit_cb on_exit)
{
	ASSERT_LOOP();
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	int rc;
	/* Before the first start, so that no exit can come unheard. */
	if (!w->started) {
		if ((rc = uv_signal_start(&w->sig, on_sigchld, SIGCHLD)) != 0)
			return rc;
		w->started = true;
		watch_ref(w);
	}
	if ((rc = spawn_files(&fa, o)) != 0)
		return -rc;
	if ((rc = spawn_attrs(&attr)) != 0) {
		posix_spawn_file_actions_destroy(&fa);
		return -rc;
	}
	pid_t pid;
	rc = posix_spawn(&pid, o->file, &fa, &attr, o->argv, o->env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	if (rc != 0)
		return -rc;
	c->pid = pid;
	c->on_exit = on_exit;
	c->next = w->list;
	w->list = c;
	watch_ref(w);
	return 0;
}

void child_seal_inherited(void)
{
#if defined(SYS_close_range) && defined(CLOSE_RANGE_CLOEXEC)
	if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
		return;
#endif
	/* Before Linux 5.11: one by one. */
	DIR *dp = opendir("/proc/self/fd");
	if (dp == NULL)
		return;
	struct dirent *de;
	while ((de = readdir(dp)) != NULL) {
		char *end;
		long fd = strtol(de->d_name, &end, 10);
		if (end == de->d_name || *end != '\0' || fd < 3 || fd == dirfd(dp))
			continue;
		int flags = fcntl((int)fd, F_GETFD);
		if (flags >= 0)
			fcntl((int)fd, F_SETFD, flags | FD_CLOEXEC);
	}
	closedir(dp);
}

static void on_watch_closed(uv_handle_t *h)
{
	free(h);
}

void child_watch_close(struct child_watch *w)
{
	if (w == NULL)
		return;
	if (w->list != NULL)
		log_warn("%u programs still running as kilnd stops watching them", child_running(w));
	uv_close((uv_handle_t *)&w->sig, on_watch_closed);
}
