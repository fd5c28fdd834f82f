/*
 * Unit tests of the loop's child processes (daemon/child.c): exit status
 * and signals reported once each, a start that fails reported at once,
 * and what the started program finds (its own session, no signal blocked
 * or ignored, /dev/null for stdin and stderr, the given directory and
 * environment).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "child.h"
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
	suite_add_tcase(s, tc);
	return unit_run(s);
}
