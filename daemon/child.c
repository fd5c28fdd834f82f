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
 *
 * Standbys (child_standby): copies of kiln-exec started ahead of need and
 * waiting on a socket for a start (standby_msg.h). A child_spawn of their
 * program writes the start to one and takes its pid; nothing is forked on
 * the way. They sit on a list of their own, reaped by the same handler,
 * and neither keep the loop alive nor count as running.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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
#include "standby_msg.h"
#include "thread.h"

/* A waiting kiln-exec: its pid and kilnd's end of the socket that is its stdin. */
struct standby {
	pid_t pid;
	int sock;
	struct standby *next;
};

/* A standby taken is replaced this long after, off the start that took it. */
#define STANDBY_REFILL_MS 20
/* The longest start handed over: well inside a Unix socket's send buffer
 * (~208 KiB), so that it is written at once or not at all. A step's start
 * is a few KiB (its arguments and the toolchain's environment). */
#define STANDBY_HANDOFF_MAX (64u << 10)

struct child_watch {
	uv_signal_t sig;            /* first: the close callback finds the struct */
	uv_timer_t refill;          /* replaces standbys taken */
	struct child *list;         /* started, not yet reaped */
	struct standby *standbys;   /* waiting */
	unsigned nstandby, want;
	char *standby_file;
	char *const *standby_env;   /* the caller's, for as long as the watch */
	bool started;
	int open_handles;           /* freed when the last one's close ran */
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
	for (struct standby **pp = &w->standbys; *pp != NULL;) {
		struct standby *sb = *pp;
		pid_t r;
		while ((r = waitpid(sb->pid, NULL, WNOHANG)) < 0 && errno == EINTR)
			;
		if (r == 0) {
			pp = &sb->next;
			continue;
		}
		/* Ended on its own: it would end again; none is started anew. */
		log_debug("a standby kiln-exec (pid %d) ended unused; no more are kept", (int)sb->pid);
		*pp = sb->next;
		close(sb->sock);
		free(sb);
		w->nstandby--;
		w->want = 0;
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

static void on_refill(uv_timer_t *t);

struct child_watch *child_watch_new(uv_loop_t *loop)
{
	struct child_watch *w = calloc(1, sizeof(*w));
	if (w == NULL || uv_signal_init(loop, &w->sig) != 0) {
		free(w);
		return NULL;
	}
	w->open_handles = 1;
	if (uv_timer_init(loop, &w->refill) == 0) {
		w->refill.data = w;
		uv_unref((uv_handle_t *)&w->refill);
		w->open_handles = 2;
	}
	return w;
}

static int start_watching(struct child_watch *w)
{
	/* Before the first start, so that no exit can come unheard. */
	if (!w->started) {
		int rc = uv_signal_start(&w->sig, on_sigchld, SIGCHLD);
		if (rc != 0)
			return rc;
		w->started = true;
		watch_ref(w);
	}
	return 0;
}

unsigned child_standbys(const struct child_watch *w)
{
	return w != NULL ? w->nstandby : 0;
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

/* Writes all of buf to fd, the first byte with the descriptor beside it. */
static int send_start(int fd, const char *buf, size_t len, int pass)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	memset(cbuf, 0, sizeof(cbuf));
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &pass, sizeof(int));
	ssize_t n;
	/* Never blocking: what does not go at once (a full buffer) fails,
	 * and the caller ends that standby and starts the program itself. */
	while ((n = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT)) < 0 && errno == EINTR)
		;
	for (size_t done = n > 0 ? (size_t)n : 0; n > 0 && done < len; done += (size_t)n)
		while ((n = send(fd, buf + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT)) < 0 &&
		       errno == EINTR)
			;
	return n > 0 ? 0 : -1;
}

/* Ends a standby taken off the list: its socket closed, killed, reaped. */
static void standby_end(struct standby *sb)
{
	close(sb->sock);
	kill(sb->pid, SIGKILL);
	while (waitpid(sb->pid, NULL, 0) < 0 && errno == EINTR)
		;
	free(sb);
}

/* o's start to a waiting standby of o's program: 0 and its pid, or -1
 * (none, or it could not take it: then the caller starts the program). */
static int hand_to_standby(struct child_watch *w, const struct child_start *o, pid_t *pid)
{
	struct standby *sb = w->standbys;
	if (sb == NULL || w->standby_file == NULL || strcmp(o->file, w->standby_file) != 0)
		return -1;
	/* A start the socket may not take at once (it would hold the loop
	 * until the standby reads) is started as before. */
	size_t len;
	char *buf = standby_pack(o->cwd, o->argv, o->env, &len);
	if (buf == NULL || len > STANDBY_HANDOFF_MAX) {
		free(buf);
		return -1;
	}
	w->standbys = sb->next;
	w->nstandby--;
	if (w->want > 0 && w->open_handles == 2)
		uv_timer_start(&w->refill, on_refill, STANDBY_REFILL_MS, 0);
	int rc = send_start(sb->sock, buf, len, o->stdout_fd);
	free(buf);
	if (rc != 0) {
		log_debug("a standby kiln-exec (pid %d) did not take its start: %s", (int)sb->pid,
			  strerror(errno));
		standby_end(sb);
		return -1;
	}
	*pid = sb->pid;
	close(sb->sock);
	free(sb);
	return 0;
}

/* One more standby: `file standby PID`, its stdin a socket, its stdout and
 * stderr /dev/null, its environment the one child_standby was given (the
 * toolchain's: what kiln-exec was started with before it waited), started
 * as child_spawn starts a program. */
static int standby_start(struct child_watch *w)
{
	int sv[2];
	char ppid[24];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return -errno;
	snprintf(ppid, sizeof(ppid), "%d", (int)getpid());
	char *argv[] = { w->standby_file, "standby", ppid, NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	int rc = posix_spawn_file_actions_init(&fa);
	if (rc == 0 && ((rc = posix_spawn_file_actions_adddup2(&fa, sv[1], STDIN_FILENO)) != 0 ||
			(rc = posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_RDWR, 0)) != 0 ||
			(rc = posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_RDWR, 0)) != 0)) {
		posix_spawn_file_actions_destroy(&fa);
	} else if (rc == 0 && (rc = spawn_attrs(&attr)) != 0) {
		posix_spawn_file_actions_destroy(&fa);
	} else if (rc == 0) {
		pid_t pid;
		rc = posix_spawn(&pid, w->standby_file, &fa, &attr, argv, w->standby_env);
		posix_spawn_file_actions_destroy(&fa);
		posix_spawnattr_destroy(&attr);
		struct standby *sb = rc == 0 ? calloc(1, sizeof(*sb)) : NULL;
		if (rc == 0 && sb == NULL) {
			kill(pid, SIGKILL);
			while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
				;
			rc = ENOMEM;
		}
		if (sb != NULL) {
			sb->pid = pid;
			sb->sock = sv[0];
			sb->next = w->standbys;
			w->standbys = sb;
			w->nstandby++;
			close(sv[1]);
			return 0;
		}
	}
	close(sv[0]);
	close(sv[1]);
	return -rc;
}

static void refill(struct child_watch *w)
{
	while (w->nstandby < w->want) {
		int rc = start_watching(w);
		if (rc == 0)
			rc = standby_start(w);
		if (rc != 0) {
			log_debug("no standby kiln-exec: %s; programs are started as needed",
				  strerror(-rc));
			w->want = 0;
		}
	}
}

static void on_refill(uv_timer_t *t)
{
	refill(t->data);
}

void child_standby(struct child_watch *w, const char *file, char *const *env, unsigned n)
{
	ASSERT_LOOP();
	/* Another program: those waiting now are of the old one. */
	bool same = w->standby_file != NULL && file != NULL && strcmp(w->standby_file, file) == 0;
	w->standby_env = env;
	free(w->standby_file);
	w->standby_file = n > 0 ? strdup(file) : NULL;
	w->want = w->standby_file != NULL ? n : 0;
	while (w->nstandby > (same ? w->want : 0)) {
		struct standby *sb = w->standbys;
		w->standbys = sb->next;
		w->nstandby--;
		standby_end(sb);
	}
	refill(w);
}

int child_spawn(struct child_watch *w, struct child *c, const struct child_start *o,
		child_exit_cb on_exit)
{
	ASSERT_LOOP();
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	pid_t pid;
	int rc = start_watching(w);
	if (rc != 0)
		return rc;
	c->handed = hand_to_standby(w, o, &pid) == 0;
	if (c->handed)
		goto started;
	if ((rc = spawn_files(&fa, o)) != 0)
		return -rc;
	if ((rc = spawn_attrs(&attr)) != 0) {
		posix_spawn_file_actions_destroy(&fa);
		return -rc;
	}
	rc = posix_spawn(&pid, o->file, &fa, &attr, o->argv, o->env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	if (rc != 0)
		return -rc;
started:
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
	struct child_watch *w = h->type == UV_TIMER ? ((uv_timer_t *)h)->data : (void *)h;
	if (--w->open_handles == 0) {
		free(w->standby_file);
		free(w);
	}
}

void child_watch_close(struct child_watch *w)
{
	if (w == NULL)
		return;
	while (w->standbys != NULL) {
		struct standby *sb = w->standbys;
		w->standbys = sb->next;
		standby_end(sb);
	}
	w->nstandby = w->want = 0;
	if (w->list != NULL)
		log_warn("%u programs still running as kilnd stops watching them", child_running(w));
	if (w->open_handles == 2)
		uv_close((uv_handle_t *)&w->refill, on_watch_closed);
	uv_close((uv_handle_t *)&w->sig, on_watch_closed);
}
