/*
 * Unit tests of the loop's child processes (daemon/child.c): exit status
 * and signals reported once each, a start that fails reported at once,
 * and what the started program finds (its own session, no signal blocked
 * or ignored, /dev/null for stdin and stderr, the given directory and
 * environment); and standbys (child_standby): a start handed to a waiting
 * kiln-exec runs as a started one does, one taken is replaced, one that
 * ended on its own is not used or replaced, and closing the watch ends them.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uv.h>

#include "child.h"
#include "standby_msg.h"
#include "thread.h"
#include "unit.h"

#define MAX_KIDS 32

struct kid {
	struct child c;
	int exits;
	int64_t status;
	int sig;
	int again;   /* starts this many more in its callback */
};

static uv_loop_t loop;
static struct child_watch *watch;
static char *sh_env[] = { "PATH=/usr/bin:/bin", "KILN_CHILD_TEST=yes", NULL };
static int started;

static void setup(void)
{
	thread_set_loop();
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	watch = child_watch_new(&loop);
	ck_assert_ptr_nonnull(watch);
	started = 0;
}

static void teardown(void)
{
	child_watch_close(watch);
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(uv_loop_close(&loop), 0);
}

static void on_exit_cb(struct child *c, int64_t status, int sig);

/* Starts sh -c script with its stdout into out_fd (-1: /dev/null). */
static int start_sh(struct kid *k, const char *script, int out_fd, const char *cwd)
{
	char *argv[] = { "/bin/sh", "-c", (char *)script, NULL };
	int null = -1;
	if (out_fd < 0)
		out_fd = null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	struct child_start o = { .file = "/bin/sh", .argv = argv, .env = sh_env, .cwd = cwd,
				 .stdout_fd = out_fd };
	k->c.data = k;
	int rc = child_spawn(watch, &k->c, &o, on_exit_cb);
	if (null >= 0)
		close(null);
	if (rc == 0)
		started++;
	return rc;
}

static void on_exit_cb(struct child *c, int64_t status, int sig)
{
	struct kid *k = c->data;
	k->exits++;
	k->status = status;
	k->sig = sig;
	ck_assert_int_eq(c->pid, 0);
	if (k->again > 0) {
		k->again--;
		ck_assert_int_eq(start_sh(k, "exit 5", -1, NULL), 0);
	}
}

START_TEST(exit_status_and_signal)
{
	struct kid a = { 0 }, b = { 0 };
	ck_assert_int_eq(start_sh(&a, "exit 7", -1, NULL), 0);
	ck_assert_int_eq(start_sh(&b, "kill -TERM $$; sleep 5", -1, NULL), 0);
	ck_assert_uint_eq(child_running(watch), 2);
	/* The watch holds the loop while a child runs, and no longer. */
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_uint_eq(child_running(watch), 0);
	ck_assert_int_eq(a.exits, 1);
	ck_assert_int_eq(a.status, 7);
	ck_assert_int_eq(a.sig, 0);
	ck_assert_int_eq(b.exits, 1);
	ck_assert_int_eq(b.status, 0);
	ck_assert_int_eq(b.sig, SIGTERM);
}
END_TEST

START_TEST(a_failed_start_says_why_and_calls_nothing)
{
	struct kid k = { 0 };
	char *argv[] = { "/nonexistent/kiln-exec", NULL };
	struct child_start o = { .file = argv[0], .argv = argv, .env = sh_env, .stdout_fd = 1 };
	ck_assert_int_eq(child_spawn(watch, &k.c, &o, on_exit_cb), -ENOENT);
	o.cwd = "/nonexistent-dir";
	o.file = argv[0] = "/bin/true";
	ck_assert_int_lt(child_spawn(watch, &k.c, &o, on_exit_cb), 0);
	ck_assert_uint_eq(child_running(watch), 0);
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(k.exits, 0);
}
END_TEST

START_TEST(many_exits_each_reported_once)
{
	static struct kid k[MAX_KIDS];
	char script[64];
	memset(k, 0, sizeof(k));
	for (int i = 0; i < MAX_KIDS; i++) {
		/* Exits close together: their signals merge. */
		snprintf(script, sizeof(script), "exit %d", i);
		k[i].again = i % 4 == 0 ? 2 : 0;
		ck_assert_int_eq(start_sh(&k[i], script, -1, NULL), 0);
	}
	uv_run(&loop, UV_RUN_DEFAULT);
	for (int i = 0; i < MAX_KIDS; i++) {
		/* Those started again from their callback end with the last. */
		ck_assert_int_eq(k[i].exits, i % 4 == 0 ? 3 : 1);
		ck_assert_int_eq(k[i].status, i % 4 == 0 ? 5 : i);
	}
	ck_assert_int_eq(started, MAX_KIDS + 2 * (MAX_KIDS / 4));
	ck_assert_uint_eq(child_running(watch), 0);
}
END_TEST

/* Reads fd to its end into buf. */
static void read_all(int fd, char *buf, size_t cap)
{
	size_t len = 0;
	ssize_t n;
	while (len + 1 < cap && (n = read(fd, buf + len, cap - 1 - len)) > 0)
		len += (size_t)n;
	buf[len] = '\0';
}

/* Starts argv with its stdout into a pipe; runs the loop until it exited;
 * its output into out. */
static void run_capture(struct kid *k, char **argv, const char *cwd, char *out, size_t cap)
{
	int fds[2];
	ck_assert_int_eq(pipe2(fds, O_CLOEXEC), 0);
	struct child_start o = { .file = argv[0], .argv = argv, .env = sh_env, .cwd = cwd,
				 .stdout_fd = fds[1] };
	k->c.data = k;
	ck_assert_int_eq(child_spawn(watch, &k->c, &o, on_exit_cb), 0);
	close(fds[1]);
	read_all(fds[0], out, cap);
	close(fds[0]);
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(k->exits, 1);
	ck_assert_int_eq(k->status, 0);
}

START_TEST(the_program_starts_clean)
{
	struct kid k = { 0 }, k2 = { 0 };
	char out[4096];
	sigset_t usr1;
	/* What kilnd's loop thread may carry: an ignored SIGPIPE, a blocked
	 * signal. Neither may reach the compiler. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);
	/* cat, not a shell: dash clears its signal mask itself. */
	char *cat[] = { "/bin/cat", "/proc/self/status", NULL };
	run_capture(&k, cat, NULL, out, sizeof(out));
	ck_assert_ptr_nonnull(strstr(out, "SigBlk:\t0000000000000000\n"));
	/* No signal of the program's ignored: glibc's posix_spawn leaves only
	 * its own two (32 and 33, below SIGRTMIN), which no program may use. */
	const char *ign = strstr(out, "SigIgn:\t");
	ck_assert_ptr_nonnull(ign);
	unsigned long long mask = strtoull(ign + 8, NULL, 16);
	ck_assert_uint_eq(mask & ~(3ULL << 31), 0);

	char *sh[] = { "/bin/sh", "-c",
		       "echo pid=$$; echo sid=$(cut -d' ' -f6 /proc/$$/stat); "
		       "echo in=$(readlink /proc/$$/fd/0) err=$(readlink /proc/$$/fd/2); "
		       "echo cwd=$(pwd) env=$KILN_CHILD_TEST", NULL };
	run_capture(&k2, sh, "/tmp", out, sizeof(out));
	int pid = -1, sid = -2;
	const char *p = strstr(out, "pid="), *s = strstr(out, "sid=");
	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(s);
	sscanf(p, "pid=%d", &pid);
	sscanf(s, "sid=%d", &sid);
	ck_assert_int_eq(pid, sid);
	ck_assert_ptr_nonnull(strstr(out, "in=/dev/null err=/dev/null\n"));
	ck_assert_ptr_nonnull(strstr(out, "cwd=/tmp env=yes\n"));
}
END_TEST

/* Descriptors kilnd was started with are kept, and closed on exec. */
START_TEST(inherited_descriptors_are_sealed)
{
	int fds[2];
	ck_assert_int_eq(pipe(fds), 0);
	ck_assert_int_eq(dup2(fds[0], 77), 77);
	ck_assert_int_eq(fcntl(77, F_GETFD) & FD_CLOEXEC, 0);
	child_seal_inherited();
	ck_assert_int_ne(fcntl(77, F_GETFD) & FD_CLOEXEC, 0);
	ck_assert_int_ne(fcntl(fds[1], F_GETFD) & FD_CLOEXEC, 0);
	/* The standard three are not touched. */
	ck_assert_int_eq(fcntl(1, F_GETFD) & FD_CLOEXEC, 0);
	close(77);
	close(fds[0]);
	close(fds[1]);
}
END_TEST

/* The built kiln-exec (meson's KILN_EXEC). */
static const char *kiln_exec(void)
{
	const char *p = getenv("KILN_EXEC");
	ck_assert_msg(p != NULL && access(p, X_OK) == 0, "KILN_EXEC names no program");
	return p;
}

static void on_tick(uv_timer_t *t)
{
	(void)t;
}

/* Runs the loop for ms, with something that holds it (standbys do not). */
static void run_for(unsigned ms)
{
	uv_timer_t t;
	uv_timer_init(&loop, &t);
	uv_timer_start(&t, on_tick, ms, 0);
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_close((uv_handle_t *)&t, NULL);
	uv_run(&loop, UV_RUN_NOWAIT);
}

/* The pids of this process's children running "kiln-exec standby", up to max. */
static size_t standby_pids(pid_t *pids, size_t max)
{
	DIR *d = opendir("/proc");
	size_t n = 0;
	struct dirent *de;
	ck_assert_ptr_nonnull(d);
	while (n < max && (de = readdir(d)) != NULL) {
		char path[300], buf[4096];
		int pid = atoi(de->d_name), ppid = 0;
		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
		FILE *f = fopen(path, "r");
		if (f == NULL)
			continue;
		size_t len = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[len] = '\0';
		const char *close_paren = strrchr(buf, ')');
		if (close_paren == NULL || sscanf(close_paren + 2, "%*c %d", &ppid) != 1 ||
		    ppid != (int)getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
		f = fopen(path, "r");
		len = f != NULL ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
		if (f != NULL)
			fclose(f);
		buf[len] = '\0';
		if (len > 0 && memmem(buf, len, "\0standby\0", 9) != NULL)
			pids[n++] = pid;
	}
	closedir(d);
	return n;
}

/* standby_pids once it finds want of them (a process just spawned may be
 * in the middle of its exec, its command line not yet readable), or after
 * a second. */
static size_t standby_pids_wait(pid_t *pids, size_t max, size_t want)
{
	size_t n = standby_pids(pids, max);
	for (int i = 0; i < 100 && n != want; i++) {
		usleep(10000);
		n = standby_pids(pids, max);
	}
	return n;
}

START_TEST(a_start_handed_to_a_standby_runs_as_started)
{
	struct kid k = { 0 };
	char out[4096], me[24];
	snprintf(me, sizeof(me), "%d", (int)getpid());
	child_standby(watch, kiln_exec(), sh_env, 1);
	ck_assert_uint_eq(child_standbys(watch), 1);
	/* Its own process group and session, the directory and environment
	 * given, /dev/null for stdin, no signal blocked; and the kiln-exec
	 * that runs it is the one that waited (its command line says so). */
	char *argv[] = { (char *)kiln_exec(), "run", me, "--", "/bin/sh", "-c",
			 "echo sid=$(cut -d' ' -f6 /proc/$$/stat) ppid=$PPID; "
			 "echo in=$(readlink /proc/$$/fd/0); grep SigBlk /proc/$$/status; "
			 "echo cwd=$(pwd) env=$KILN_CHILD_TEST; "
			 "echo parent=$(tr '\\0' ' ' </proc/$PPID/cmdline)", NULL };
	int fds[2];
	ck_assert_int_eq(pipe2(fds, O_CLOEXEC), 0);
	struct child_start o = { .file = argv[0], .argv = argv, .env = sh_env, .cwd = "/tmp",
				 .stdout_fd = fds[1] };
	k.c.data = &k;
	ck_assert_int_eq(child_spawn(watch, &k.c, &o, on_exit_cb), 0);
	pid_t pid = k.c.pid;
	close(fds[1]);
	ck_assert_uint_eq(child_standbys(watch), 0);
	ck_assert_uint_eq(child_running(watch), 1);
	read_all(fds[0], out, sizeof(out));
	close(fds[0]);
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(k.exits, 1);
	ck_assert_int_eq(k.status, 0);
	int sid = -1, ppid = -2;
	const char *p = strstr(out, "sid=");
	ck_assert_msg(p != NULL && sscanf(p, "sid=%d ppid=%d", &sid, &ppid) == 2, "%s", out);
	ck_assert_int_eq(sid, pid);
	ck_assert_int_eq(ppid, pid);
	ck_assert_msg(strstr(out, "in=/dev/null\n") != NULL, "%s", out);
	ck_assert_msg(strstr(out, "SigBlk:\t0000000000000000\n") != NULL, "%s", out);
	ck_assert_msg(strstr(out, "cwd=/tmp env=yes\n") != NULL, "%s", out);
	char want[4200];
	snprintf(want, sizeof(want), "parent=%s standby %s\n", kiln_exec(), me);
	ck_assert_msg(strstr(out, want) != NULL, "not run by the standby:\n%s", out);
	/* The one taken is replaced, a little later. */
	run_for(200);
	ck_assert_uint_eq(child_standbys(watch), 1);

	/* A failing run's status and output come back as from a started one. */
	struct kid f = { 0 };
	char *check[] = { (char *)kiln_exec(), "check", me, "/nonexistent/lib.so", NULL };
	ck_assert_int_eq(pipe2(fds, O_CLOEXEC), 0);
	struct child_start oc = { .file = check[0], .argv = check, .env = sh_env, .cwd = "/",
				  .stdout_fd = fds[1] };
	f.c.data = &f;
	ck_assert_int_eq(child_spawn(watch, &f.c, &oc, on_exit_cb), 0);
	close(fds[1]);
	read_all(fds[0], out, sizeof(out));
	close(fds[0]);
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(f.status, 1);
	ck_assert_msg(strstr(out, "/nonexistent/lib.so") != NULL, "%s", out);
}
END_TEST

/* A start the standby cannot take (its directory is gone) ends it by
 * STANDBY_REFUSED_SIGNAL, after saying why, and the child says it was
 * handed over: kilnd reports its own failure, not the build's (step.c). */
START_TEST(a_start_a_standby_cannot_take_ends_it_by_its_signal)
{
	struct kid k = { 0 };
	char out[4096], me[24];
	snprintf(me, sizeof(me), "%d", (int)getpid());
	child_standby(watch, kiln_exec(), sh_env, 1);
	char *argv[] = { (char *)kiln_exec(), "run", me, "--", "/bin/true", NULL };
	int fds[2];
	ck_assert_int_eq(pipe2(fds, O_CLOEXEC), 0);
	struct child_start o = { .file = argv[0], .argv = argv, .env = sh_env,
				 .cwd = "/nonexistent-kiln-dir", .stdout_fd = fds[1] };
	k.c.data = &k;
	ck_assert_int_eq(child_spawn(watch, &k.c, &o, on_exit_cb), 0);
	ck_assert(k.c.handed);
	close(fds[1]);
	read_all(fds[0], out, sizeof(out));
	close(fds[0]);
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(k.exits, 1);
	ck_assert_int_eq(k.sig, STANDBY_REFUSED_SIGNAL);
	ck_assert_msg(strstr(out, "cannot enter /nonexistent-kiln-dir") != NULL, "%s", out);
	/* Without a standby the same start fails at once, as it always did. */
	child_standby(watch, kiln_exec(), sh_env, 0);
	struct kid d = { 0 };
	o.stdout_fd = 1;
	ck_assert_int_lt(child_spawn(watch, &d.c, &o, on_exit_cb), 0);
	ck_assert(!d.c.handed);
}
END_TEST

START_TEST(a_standby_that_ended_is_neither_used_nor_replaced)
{
	struct kid k = { 0 };
	char out[4096], me[24];
	pid_t pids[4];
	snprintf(me, sizeof(me), "%d", (int)getpid());
	child_standby(watch, kiln_exec(), sh_env, 1);
	ck_assert_uint_eq(standby_pids_wait(pids, 4, 1), 1);
	ck_assert_int_eq(kill(pids[0], SIGKILL), 0);
	run_for(100);
	ck_assert_uint_eq(child_standbys(watch), 0);
	char *argv[] = { (char *)kiln_exec(), "run", me, "--", "/bin/sh", "-c",
			 "echo parent=$(tr '\\0' ' ' </proc/$PPID/cmdline)", NULL };
	run_capture(&k, argv, "/", out, sizeof(out));
	ck_assert_msg(strstr(out, " standby ") == NULL, "%s", out);
	ck_assert_msg(strstr(out, " run ") != NULL, "%s", out);
	run_for(100);
	ck_assert_uint_eq(child_standbys(watch), 0);
	ck_assert_uint_eq(standby_pids(pids, 4), 0);
}
END_TEST

START_TEST(closing_the_watch_ends_the_standbys)
{
	pid_t pids[4];
	child_standby(watch, kiln_exec(), sh_env, 2);
	ck_assert_uint_eq(child_standbys(watch), 2);
	ck_assert_uint_eq(standby_pids_wait(pids, 4, 2), 2);
	child_watch_close(watch);
	uv_run(&loop, UV_RUN_DEFAULT);
	/* Reaped, not left as zombies. */
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(waitpid(pids[i], NULL, WNOHANG), -1);
	ck_assert_uint_eq(standby_pids(pids, 4), 0);
	watch = child_watch_new(&loop);   /* for the teardown */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("child");
	TCase *tc = tcase_create("child");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, exit_status_and_signal);
	tcase_add_test(tc, a_failed_start_says_why_and_calls_nothing);
	tcase_add_test(tc, many_exits_each_reported_once);
	tcase_add_test(tc, the_program_starts_clean);
	tcase_add_test(tc, inherited_descriptors_are_sealed);
	tcase_add_test(tc, a_start_handed_to_a_standby_runs_as_started);
	tcase_add_test(tc, a_start_a_standby_cannot_take_ends_it_by_its_signal);
	tcase_add_test(tc, a_standby_that_ended_is_neither_used_nor_replaced);
	tcase_add_test(tc, closing_the_watch_ends_the_standbys);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
