/*
 * Integration tests of faults around the daemon: a shutdown while a request
 * is being keyed on the thread pool, a toolchain that leaves a background
 * job holding its output, FIFOs given as source paths, and socket or cache
 * directories that other users could write to.
 */
#include "harness.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define SHUTDOWN_ROUNDS 3
#define FIFO_REQUESTS 6
#define MAX_SLEEPS 64

/* Appends one frame holding text to buf at *len (cap bytes). */
static void frame_append(char *buf, size_t cap, size_t *len, const char *text)
{
	size_t n = strlen(text);

	ck_assert(*len + 4 + n <= cap);
	buf[(*len)++] = (char)(n >> 24);
	buf[(*len)++] = (char)(n >> 16);
	buf[(*len)++] = (char)(n >> 8);
	buf[(*len)++] = (char)n;
	memcpy(buf + *len, text, n);
	*len += n;
}

/* The next reply on fd, or NULL when the daemon closed the connection;
 * fails the test, saying what was awaited, when nothing comes within
 * timeout_s (a hang guard only). */
static cJSON *recv_within(int fd, double timeout_s, const char *what)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int r;

	while ((r = poll(&pfd, 1, (int)(timeout_s * 1000))) < 0 && errno == EINTR)
		;
	ck_assert_msg(r > 0, "no reply %s within %.0f s", what, timeout_s);
	return harness_raw_recv(fd);
}

/* Writes a program to path, after a comment of pad bytes that makes reading
 * and hashing it take a while. */
static void write_padded_program(const char *path, const char *name, int value, size_t pad)
{
	char *prog = harness_program(name, value);
	size_t plen = strlen(prog);
	char *text = malloc(pad + plen + 8);

	ck_assert_ptr_nonnull(text);
	memcpy(text, "/* ", 3);
	memset(text + 3, 'x', pad);
	memcpy(text + 3 + pad, " */\n", 4);
	memcpy(text + 7 + pad, prog, plen + 1);
	harness_write_file(path, text);
	free(text);
	free(prog);
}

/*
 * hello, a get whose source is read from a path on the thread pool, and a
 * shutdown, all in one write: the get is still being keyed when the daemon
 * starts to stop. Every request must be answered and the daemon must exit.
 */
START_TEST(shutdown_while_keying)
{
	static const size_t pads[SHUTDOWN_ROUNDS] = { 0, (size_t)8 << 20, 1000 };

	for (int round = 0; round < SHUTDOWN_ROUNDS; round++) {
		char src[HARNESS_PATH], name[32], get[HARNESS_PATH + 128];
		static char buf[4096];
		bool answered[4] = { false };
		size_t len = 0;
		int fd, status;
		pid_t pid;

		snprintf(name, sizeof(name), "keyed_%d", round);
		write_padded_program(harness_path(src, "keyed_%d.c", round), name, round, pads[round]);
		snprintf(get, sizeof(get), "{\"op\":\"get\",\"id\":2,\"sources\":"
			 "[{\"name\":\"keyed.c\",\"path\":\"%s\"}]}", src);
		frame_append(buf, sizeof(buf), &len,
			     "{\"op\":\"hello\",\"id\":1,\"proto\":3,\"client\":\"kiln-tests\"}");
		frame_append(buf, sizeof(buf), &len, get);
		frame_append(buf, sizeof(buf), &len, "{\"op\":\"shutdown\",\"id\":3}");

		pid = harness_start(NULL);
		fd = harness_raw_connect(harness.socket);
		harness_raw_send_bytes(fd, buf, len);
		/* The get may be answered after the shutdown: match by id. */
		for (int i = 0; i < 3; i++) {
			char what[64];
			cJSON *r;
			int64_t id;

			snprintf(what, sizeof(what), "%d of 3 in round %d", i + 1, round);
			r = recv_within(fd, 20, what);
			ck_assert_msg(r != NULL, "round %d: the connection closed after %d of 3 replies",
				      round, i);
			id = harness_num(r, "id");
			ck_assert_msg(id >= 1 && id <= 3 && !answered[id],
				      "round %d: unexpected reply id %lld", round, (long long)id);
			answered[id] = true;
			if (id == 2 && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok")))
				ck_assert_msg(strcmp(harness_error_code(r), "shutting_down") == 0,
					      "round %d: the get failed with %s, expected ok or "
					      "shutting_down", round, harness_error_code(r));
			else
				ck_assert_msg(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok")),
					      "round %d: request %lld failed", round, (long long)id);
			cJSON_Delete(r);
		}
		close(fd);

		/* A daemon that never exits is left to the fixture to kill. */
		status = harness_wait(pid, 15);
		ck_assert_msg(status != -1, "round %d: kilnd still runs 15 s after the shutdown request",
			      round);
		harness.pid = 0;
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			      "round %d: kilnd exited with status 0x%x after the shutdown request",
			      round, status);
		ck_assert_msg(!harness_exists(harness.socket),
			      "round %d: kilnd left its socket behind", round);
	}
}
END_TEST

/*
 * Writes a toolchain wrapper to path that runs the real compiler and then
 * leaves a "sleep" in the background, holding stdout and stderr, appending
 * its pid to pidfile. With builds_only, only the compiler runs of a build
 * (those writing into out/ of a build directory) do so; the daemon's own
 * probes of the toolchain go straight to the compiler. The sleep carries
 * the test directory in its environment so that the fixture can find it.
 */
static void write_bg_wrapper(const char *path, const char *pidfile, bool builds_only)
{
	char *script = NULL;

	ck_assert(asprintf(&script,
		"#!/bin/sh\n"
		"# Toolchain wrapper written by the kiln integration tests: it runs\n"
		"# the real compiler, then leaves a background job holding stdout.\n"
		"build=0\n"
		"prev=\n"
		"for a in \"$@\"; do\n"
		"\tcase \"$prev$a\" in -oout/*) build=1 ;; esac\n"
		"\tprev=$a\n"
		"done\n"
		"if [ %d = 1 ] && [ $build = 0 ]; then\n"
		"\texec /usr/bin/cc \"$@\"\n"
		"fi\n"
		"/usr/bin/cc \"$@\"\n"
		"rc=$?\n"
		"KILN_IT_DIR='%s' sleep 60 &\n"
		"echo $! >> '%s'\n"
		"exit $rc\n", builds_only ? 1 : 0, harness.dir, pidfile) > 0);
	harness_write_file(path, script);
	free(script);
	ck_assert_int_eq(chmod(path, 0755), 0);
}

/* Reads the pids a wrapper recorded, one per line; returns how many. */
static int read_pids(const char *path, pid_t *pids, int max)
{
	char *text = harness_read_file(path);
	int n = 0;

	if (!text)
		return 0;
	for (char *line = strtok(text, "\n"); line && n < max; line = strtok(NULL, "\n"))
		if (atoi(line) > 0)
			pids[n++] = (pid_t)atoi(line);
	free(text);
	return n;
}

/* Requires that every pid in pidfile (at least min of them) is gone within
 * 10 s; what names their origin in the failure message. */
static void expect_sleeps_gone(const char *pidfile, int min, const char *what)
{
	pid_t pids[MAX_SLEEPS];
	int n = read_pids(pidfile, pids, MAX_SLEEPS), alive = 0;

	ck_assert_msg(n >= min, "the wrapper recorded %d background jobs, expected %d or more", n,
		      min);
	for (int i = 0; i < n; i++) {
		if (!harness_wait_gone(pids[i], 10)) {
			alive++;
			kill(pids[i], SIGKILL);
		}
	}
	ck_assert_msg(alive == 0, "%d of %d background jobs of %s still ran 10 s later", alive, n,
		      what);
}

/* Gets harness_program(name, value) with the toolchain "slow"; 20 s is a
 * hang guard only (the wrapper's sleep would hold a build for 60 s). */
static void get_with_slow(const char *name, int value)
{
	char *text = harness_program(name, value);
	struct kiln_request req;
	struct kiln_source src;
	struct harness_fleet *f;

	harness_request(&req, &src, "bg.c", text);
	req.toolchain = "slow";
	f = harness_fleet_start(1, &(struct harness_fleet_opts){
		.socket = harness.socket, .reqs = &req, .nreqs = 1 });
	harness_fleet_wait(f, 20);
	ck_assert_msg(f->results[0].rc == KILN_OK, "%s failed in %s with %s: %s", name,
		      f->results[0].stage, kiln_strerror(f->results[0].rc), f->results[0].msg);
	ck_assert_int_eq(f->results[0].value, value);
	harness_fleet_free(f);
	free(text);
}

/*
 * A toolchain whose build steps run the real compiler and then leave a
 * background job holding the output pipe: the build must end when the
 * compiler does (or at the latest at --build-timeout), and the job must be
 * killed with it.
 */
START_TEST(background_job_of_a_build)
{
	char wrapper[HARNESS_PATH], pidfile[HARNESS_PATH], spec[HARNESS_PATH + 8];

	write_bg_wrapper(harness_path(wrapper, "cc-bg"), harness_path(pidfile, "sleep.pids"), true);
	snprintf(spec, sizeof(spec), "slow=%s", wrapper);
	harness_start("--toolchain", spec, "--build-timeout", "3", NULL);

	get_with_slow("background", 42);
	expect_sleeps_gone(pidfile, 1, "the build's compiler");
	/* The daemon still builds with that toolchain. */
	get_with_slow("background_again", 43);
	expect_sleeps_gone(pidfile, 2, "the second build's compiler");
	harness_stop();
}
END_TEST

/*
 * The same with every run of the toolchain leaving a background job, the
 * daemon's start-up probes (--version, the linker's features) included:
 * kilnd must still start, build, and leave nothing running.
 */
START_TEST(background_job_of_a_toolchain_probe)
{
	char wrapper[HARNESS_PATH], pidfile[HARNESS_PATH], spec[HARNESS_PATH + 8];

	write_bg_wrapper(harness_path(wrapper, "cc-bg"), harness_path(pidfile, "sleep.pids"), false);
	snprintf(spec, sizeof(spec), "slow=%s", wrapper);
	/* harness_start gives up after 30 s; the probe's sleep lasts 60. */
	harness_start("--toolchain", spec, "--build-timeout", "3", NULL);
	get_with_slow("probed", 44);
	expect_sleeps_gone(pidfile, 2, "the toolchain (probes and build)");
	harness_stop();
}
END_TEST

/*
 * FIFOs given as source paths, more of them at once than the thread pool
 * has threads: each is refused with bad_request instead of blocking a
 * thread, and the daemon goes on building.
 */
START_TEST(fifo_source_path)
{
	char fifo[HARNESS_PATH], get[HARNESS_PATH + 128], key[72];
	int fds[FIFO_REQUESTS];
	cJSON *st;

	ck_assert_int_eq(mkfifo(harness_path(fifo, "fifo.c"), 0600), 0);
	snprintf(get, sizeof(get), "{\"op\":\"get\",\"id\":2,\"sources\":"
		 "[{\"name\":\"fifo.c\",\"path\":\"%s\"}]}", fifo);
	harness_start("--jobs", "2", NULL);

	/* All requests are sent before any reply is read. */
	for (int i = 0; i < FIFO_REQUESTS; i++) {
		fds[i] = harness_raw_connect(harness.socket);
		harness_raw_send(fds[i], "{\"op\":\"hello\",\"id\":1,\"proto\":3}");
		harness_raw_send(fds[i], get);
	}
	/* A pool thread blocked in open() would never answer. */
	for (int i = 0; i < FIFO_REQUESTS; i++) {
		char what[64];
		cJSON *r;

		snprintf(what, sizeof(what), "to hello on connection %d", i);
		r = recv_within(fds[i], 20, what);

		ck_assert_msg(r != NULL, "connection %d: no reply to hello", i);
		ck_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok")));
		cJSON_Delete(r);
		snprintf(what, sizeof(what), "to the get of a FIFO on connection %d", i);
		r = recv_within(fds[i], 20, what);
		ck_assert_msg(r != NULL, "connection %d: no reply to the get of a FIFO", i);
		ck_assert_int_eq(harness_num(r, "id"), 2);
		ck_assert_msg(strcmp(harness_error_code(r), "bad_request") == 0,
			      "connection %d: the get of a FIFO failed with %s, expected bad_request",
			      i, harness_error_code(r));
		cJSON_Delete(r);
		close(fds[i]);
	}

	/* Building and publishing (on the pool) still work. */
	harness_get_program(NULL, "after_fifo", 7, NULL, key);
	st = harness_status();
	ck_assert_int_eq(harness_num(st, "builds_ok"), 1);
	cJSON_Delete(st);
	harness_stop();
}
END_TEST

/* Runs kilnd with socket and cache; requires that it exits non-zero and
 * says why, naming dir. */
static void expect_refused(const char *socket, const char *cache, const char *dir)
{
	const char *argv[] = { harness_kilnd(), "--socket", socket, "--cache-dir", cache, NULL };
	char out[HARNESS_PATH], err[HARNESS_PATH];
	char *text_out, *text_err;
	int status;

	harness_path(out, "refused.out");
	harness_path(err, "refused.err");
	unlink(out);
	unlink(err);
	/* A daemon that accepts the directory runs until killed at the deadline. */
	status = harness_run(argv, out, err, 20);
	text_out = harness_read_file(out);
	text_err = harness_read_file(err);
	ck_assert_msg(status != -1, "kilnd served from %s (still running after 20 s)", dir);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) != 0,
		      "kilnd with %s exited with status 0x%x, expected a failure; stderr: %s", dir,
		      status, text_err ? text_err : "");
	ck_assert_msg(harness_contains(text_err, dir), "kilnd's message does not name %s: '%s'", dir,
		      text_err ? text_err : "");
	ck_assert_msg(!harness_socket_answers(socket), "a socket answers at %s", socket);
	free(text_out);
	free(text_err);
}

/* Directories that others can write to are refused for the socket and the
 * cache; private ones work. */
START_TEST(directories_writable_by_others)
{
	char open_dir[HARNESS_PATH], open_sock[HARNESS_PATH], open_cache[HARNESS_PATH];
	char group_cache[HARNESS_PATH];
	struct stat st;

	ck_assert_int_eq(mkdir(harness_path(open_dir, "open"), 0700), 0);
	ck_assert_int_eq(chmod(open_dir, 0777), 0);
	expect_refused(harness_path(open_sock, "open/k.sock"), harness.cache, open_dir);
	ck_assert_int_eq(stat(open_dir, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0777);

	ck_assert_int_eq(mkdir(harness_path(open_cache, "open-cache"), 0700), 0);
	ck_assert_int_eq(chmod(open_cache, 0777), 0);
	expect_refused(harness.socket, open_cache, open_cache);

	/* Writable by the group is as bad. */
	ck_assert_int_eq(mkdir(harness_path(group_cache, "group-cache"), 0700), 0);
	ck_assert_int_eq(chmod(group_cache, 0770), 0);
	expect_refused(harness.socket, group_cache, group_cache);

	/* The same daemon serves from private directories. */
	harness_start(NULL);
	harness_stop();
}
END_TEST

static void remove_tree(const char *dir)
{
	char cmd[HARNESS_PATH + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/*
 * The cache directory removed, replaced or emptied of its index while kilnd
 * runs (a user cleaning up, a scratch purge): the next build makes it again
 * and succeeds, without a restart, and status counts it. Before: every
 * build failed with "cannot create a build directory" until a restart.
 */
START_TEST(cache_directory_removed_while_running_is_made_again)
{
	char key[72], aside[HARNESS_PATH], path[HARNESS_PATH + 16];

	harness_start(NULL);
	harness_get_program(NULL, "before", 1, NULL, key);
	/* Removed: the next build makes it again, in place. */
	remove_tree(harness.cache);
	harness_get_program(NULL, "after", 2, NULL, key);
	snprintf(path, sizeof(path), "%s/index.db", harness.cache);
	ck_assert_msg(harness_exists(path), "the cache directory was not made again");
	cJSON *st = harness_status();
	ck_assert_int_eq(harness_num(st, "cache_recreated"), 1);
	ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(st, "cache_problem"));
	cJSON_Delete(st);
	/* The old program is rebuilt, and served from the new cache. */
	harness_get_program(NULL, "before", 1, NULL, key);
	ck_assert_int_eq(harness_cli(NULL, NULL, "verify", NULL), 0);

	/* Replaced by another directory under the same name. */
	ck_assert_int_eq(rename(harness.cache, harness_path(aside, "aside")), 0);
	ck_assert_int_eq(mkdir(harness.cache, 0700), 0);
	harness_get_program(NULL, "replaced", 3, NULL, key);
	/* Its index alone removed; and then tmp/ (kilnd holds it open: a new
	 * one by the same name is not the one it holds). */
	snprintf(path, sizeof(path), "%s/index.db", harness.cache);
	ck_assert_int_eq(unlink(path), 0);
	harness_get_program(NULL, "no_index", 4, NULL, key);
	snprintf(path, sizeof(path), "%s/tmp", harness.cache);
	remove_tree(path);
	harness_get_program(NULL, "no_tmp", 5, NULL, key);
	st = harness_status();
	ck_assert_int_eq(harness_num(st, "cache_recreated"), 4);
	cJSON_Delete(st);
	ck_assert_int_eq(harness_cli(NULL, NULL, "verify", NULL), 0);
	harness_stop();
}
END_TEST

/*
 * Part of the cache removed while a build runs (objects/ and the lock with
 * it): kilnd makes the store again in place but leaves tmp/, where the
 * build works, alone, so the build finishes and is served; and it takes
 * its lock again, so a second kilnd on the same directory is turned away.
 */
START_TEST(cache_emptied_under_a_running_build_keeps_the_build)
{
	char src[HARNESS_PATH], wrapper[HARNESS_PATH], log[HARNESS_PATH], gate[HARNESS_PATH];
	char tc[HARNESS_PATH + 8], cmd[HARNESS_PATH * 4], out[HARNESS_PATH], sock[HARNESS_PATH];

	harness_write_file(harness_path(src, "slow.c"), "int prog_value(void) { return 5; }\n");
	harness_write_wrapper(harness_path(wrapper, "wrap.sh"), harness_path(log, "wrap.log"),
			      harness_path(gate, "gate"), 0);
	snprintf(tc, sizeof(tc), "cc=%s", wrapper);
	harness_start("--toolchain", tc, NULL);
	const char *const build[] = { harness_cli_path(), "--socket", harness.socket, "build", src, NULL };
	pid_t pid = harness_spawn(build, NULL, harness_path(out, "build.out"), NULL);
	harness_wait_wrapper_starts(log, 1, 60);
	/* status counts the flight in its state (daemon/flight/flight.h). */
	cJSON *st = harness_status();
	const cJSON *fl = cJSON_GetObjectItemCaseSensitive(st, "flights");
	ck_assert_int_eq(harness_num(fl, "compiling"), 1);
	ck_assert_int_eq(harness_num(fl, "queued"), 0);
	cJSON_Delete(st);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s/objects' '%s/kilnd.lock' '%s/index.db'", harness.cache,
		 harness.cache, harness.cache);
	ck_assert_int_eq(system(cmd), 0);
	harness_wait_status("cache_recreated", 1, 30);
	harness_write_file(gate, "");
	int status = harness_wait(pid, 60);
	char *text = harness_read_file(out);
	ck_assert_msg(status == 0, "the build failed (status 0x%x):\n%s", status, text);
	free(text);
	/* The lock is this kilnd's again: a second one on the cache (asked for
	 * another socket) is refused with status 3, naming the first. */
	const char *const second[] = { harness_kilnd(), "--socket", harness_path(sock, "second.sock"),
				       "--cache-dir", harness.cache, NULL };
	status = harness_run(second, harness_path(out, "second.out"), NULL, 30);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 3, "status 0x%x", status);
	text = harness_read_file(out);
	ck_assert_msg(strstr(text, harness.socket) != NULL, "the second kilnd did not name the "
		      "first:\n%s", text);
	free(text);
	ck_assert_msg(!harness_socket_answers(sock), "a second kilnd serves the same cache");
	harness_stop();
}
END_TEST

/* A get on its own thread, with a deadline of 1 s (raised to two
 * heartbeats, 10 s, by libkiln). */
struct timed_get {
	pthread_t thread;
	char name[32];
	int rc;
	char msg[600];
};

static void *timed_get_run(void *arg)
{
	struct timed_get *g = arg;
	struct kiln *k = NULL;
	struct kiln_request req;
	struct kiln_source src;
	struct kiln_program *p = NULL;
	char *text = harness_program(g->name, 3);
	harness_request(&req, &src, "prog.c", text);
	g->rc = kiln_open(harness.socket, &k);
	if (g->rc == KILN_OK && (g->rc = kiln_set_timeout(k, 1)) == KILN_OK)
		g->rc = kiln_get_file(k, &req, &p);
	snprintf(g->msg, sizeof(g->msg), "%s", kiln_errmsg(k));
	kiln_close(k);
	free(text);
	return NULL;
}

/*
 * Deadlines for a silent kilnd: kilnd sends heartbeats to a waiting client,
 * so a build longer than the client's deadline is waited for; a kilnd that
 * is stopped (SIGSTOP) fails the call with KILN_EIO, saying so, instead of
 * holding the rank for ever.
 */
START_TEST(silent_kilnd_fails_calls_at_the_deadline)
{
	char wrapper[HARNESS_PATH], log[HARNESS_PATH], gate[HARNESS_PATH], tc[HARNESS_PATH + 8];
	harness_write_wrapper(harness_path(wrapper, "wrap.sh"), harness_path(log, "wrap.log"),
			      harness_path(gate, "gate"), 0);
	snprintf(tc, sizeof(tc), "cc=%s", wrapper);
	harness_start("--toolchain", tc, NULL);
	/* A build held for 12 s, past the 10 s deadline: heartbeats keep it. */
	struct timed_get slow = { .name = "heartbeat_kept" };
	ck_assert_int_eq(pthread_create(&slow.thread, NULL, timed_get_run, &slow), 0);
	harness_wait_wrapper_starts(log, 1, 60);
	harness_sleep_ms(12000);
	harness_write_file(gate, "");
	pthread_join(slow.thread, NULL);
	ck_assert_msg(slow.rc == KILN_OK, "a build longer than the deadline failed: %s: %s",
		      kiln_strerror(slow.rc), slow.msg);
	unlink(gate);
	/* kilnd stopped while a build runs: the call fails, and says why. */
	struct timed_get stopped = { .name = "kilnd_stopped" };
	ck_assert_int_eq(pthread_create(&stopped.thread, NULL, timed_get_run, &stopped), 0);
	harness_wait_wrapper_starts(log, 2, 60);
	ck_assert_int_eq(kill(harness.pid, SIGSTOP), 0);
	pthread_join(stopped.thread, NULL);   /* returns: the test's own timeout is the bound */
	ck_assert_int_eq(kill(harness.pid, SIGCONT), 0);
	ck_assert_msg(stopped.rc == KILN_EIO && strstr(stopped.msg, "sent nothing for 10 s") != NULL,
		      "a stopped kilnd gave %s: %s", kiln_strerror(stopped.rc), stopped.msg);
	harness_write_file(gate, "");
	harness_stop();
}
END_TEST

/*
 * When another kilnd has taken the cache directory's name meanwhile, this
 * one cannot make it again: every request that needs the cache is answered
 * io, saying why and what to do; status says it too.
 */
START_TEST(cache_directory_taken_by_another_kilnd_is_said_in_every_reply)
{
	char key[72], sock[HARNESS_PATH], src[HARNESS_PATH], *err = NULL;
	const char *const extra[] = { "--cache-dir", harness.cache, NULL };

	harness_start(NULL);
	harness_get_program(NULL, "before", 1, NULL, key);
	remove_tree(harness.cache);
	ck_assert_int_eq(mkdir(harness.cache, 0700), 0);
	harness_start_named("second", extra, NULL, sock);
	harness_write_file(harness_path(src, "prog.c"), "int prog_value(void) { return 9; }\n");
	for (int i = 0; i < 2; i++) {
		ck_assert_int_ne(harness_cli(NULL, &err, "build", src, NULL), 0);
		ck_assert_msg(err != NULL && strstr(err, "was removed while kilnd ran") != NULL &&
			      strstr(err, "kiln stop") != NULL, "the reply does not say why:\n%s",
			      err ? err : "");
		free(err);
		err = NULL;
	}
	cJSON *st = harness_status();
	ck_assert_msg(strstr(harness_str(st, "cache_problem"), "has taken the new directory") != NULL,
		      "status: %s", harness_str(st, "cache_problem"));
	cJSON_Delete(st);
	harness_stop();
}
END_TEST

/*
 * A toolchain named in a directory others may write (a project's software
 * tree left group-writable): they could replace the compiler kilnd runs.
 * kilnd says so at start, naming the directory; a private one is quiet.
 */
START_TEST(toolchain_others_can_replace_is_said_at_start)
{
	char dir[HARNESS_PATH], link[HARNESS_PATH + 8], tc[HARNESS_PATH + 16];

	ck_assert_int_eq(mkdir(harness_path(dir, "group-bin"), 0700), 0);
	ck_assert_int_eq(chmod(dir, 0775), 0);
	snprintf(link, sizeof(link), "%s/cc", dir);
	ck_assert_int_eq(symlink("/usr/bin/cc", link), 0);
	snprintf(tc, sizeof(tc), "grp=%s", link);
	harness_start("--toolchain", tc, NULL);
	harness_stop();
	char *log = harness_read_file(harness.log);
	ck_assert_msg(strstr(log, "toolchain grp:") != NULL &&
		      strstr(log, "they can replace the compiler") != NULL && strstr(log, dir) != NULL,
		      "no warning in the log:\n%s", log);
	free(log);
	ck_assert_int_eq(chmod(dir, 0755), 0);
	ck_assert_int_eq(truncate(harness.log, 0), 0);
	harness_start("--toolchain", tc, NULL);
	harness_stop();
	log = harness_read_file(harness.log);
	ck_assert_msg(strstr(log, "they can replace the compiler") == NULL, "%s", log);
	free(log);
}
END_TEST

/* Ctrl-C on kiln warm: it prints its summary and hangs up, leaving builds
 * nobody waits for: the running one's compiler is killed, the queued ones
 * leave the queue, all counted as cancelled, not failed; asked again later,
 * the program builds afresh. */
START_TEST(abandoned_builds_are_cancelled)
{
	char src[HARNESS_PATH], wrapper[HARNESS_PATH], log[HARNESS_PATH], gate[HARNESS_PATH];
	char tc[HARNESS_PATH + 8], manifest[HARNESS_PATH], out[HARNESS_PATH];

	for (int i = 0; i < 3; i++) {
		char name[32], text[96];
		snprintf(name, sizeof(name), "ab%d.c", i);
		snprintf(text, sizeof(text), "int kiln_test_value(void) { return %d; }\n", 50 + i);
		harness_write_file(harness_path(src, "%s", name), text);
	}
	harness_write_file(harness_path(manifest, "m.json"),
			   "{\"requests\": [{\"sources\": [\"ab0.c\"]}, {\"sources\": [\"ab1.c\"]}, "
			   "{\"sources\": [\"ab2.c\"]}]}");
	harness_write_wrapper(harness_path(wrapper, "wrap.sh"), harness_path(log, "wrap.log"),
			      harness_path(gate, "gate"), 0);
	snprintf(tc, sizeof(tc), "cc=%s", wrapper);
	harness_start("--jobs", "1", "--toolchain", tc, NULL);
	const char *const warm[] = { harness_cli_path(), "--socket", harness.socket, "warm", manifest,
				     NULL };
	pid_t pid = harness_spawn(warm, NULL, harness_path(out, "warm.out"), NULL);
	harness_wait_wrapper_starts(log, 1, 60);
	cJSON *st = harness_status();
	ck_assert_int_eq(harness_num(cJSON_GetObjectItem(st, "flights"), "compiling"), 1);
	ck_assert_int_eq(harness_num(cJSON_GetObjectItem(st, "flights"), "queued"), 2);
	cJSON_Delete(st);
	/* Ctrl-C: warm says what it did, exits 130 and hangs up. */
	kill(pid, SIGINT);
	int wst = harness_wait(pid, 30);
	ck_assert_msg(WIFEXITED(wst) && WEXITSTATUS(wst) == 130, "warm exited 0x%x", wst);
	char *said = harness_read_file(out);
	ck_assert_msg(strstr(said, "interrupted by signal 2 after 0 of 3") != NULL &&
		      strstr(said, "warmed 0 of 3 programs") != NULL, "warm said: %s", said);
	free(said);
	harness_wait_status("cancelled", 3, 30);
	harness_wait_status("in_flight", 0, 30);
	st = harness_status();
	ck_assert_int_eq(harness_num(st, "builds_failed"), 0);
	ck_assert_int_eq(harness_num(st, "queued"), 0);
	cJSON_Delete(st);
	/* The gate opens; the same program, asked again, builds. */
	harness_write_file(gate, "");
	struct kiln_request req;
	struct kiln_source one;
	char *text = harness_read_file(harness_path(src, "ab1.c"));
	harness_request(&req, &one, "ab1.c", text);
	struct harness_result r = harness_in_child(&req, NULL);
	ck_assert_msg(r.rc == KILN_OK && r.value == 51, "%s: %s", r.stage, r.msg);
	free(text);
	harness_stop();
}
END_TEST

/* A client whose connection breaks on a framing error while its get waits
 * for a build: the error's reply answers no request, so the build, which
 * nobody waits for any more, is cancelled (the reply used to consume the
 * get's count, and the check for abandoned builds was skipped). */
START_TEST(framing_error_cancels_the_build_it_waited_for)
{
	static const unsigned char zero[4] = { 0, 0, 0, 0 };
	char wrapper[HARNESS_PATH], log[HARNESS_PATH], gate[HARNESS_PATH];
	char tc[HARNESS_PATH + 8];

	harness_write_wrapper(harness_path(wrapper, "wrap.sh"), harness_path(log, "wrap.log"),
			      harness_path(gate, "gate"), 0);
	snprintf(tc, sizeof(tc), "cc=%s", wrapper);
	harness_start("--toolchain", tc, NULL);
	int fd = harness_raw_connect(harness.socket);
	harness_raw_send(fd, "{\"op\":\"hello\",\"id\":1,\"proto\":3}");
	cJSON *r = harness_raw_recv(fd);
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(r, "ok")));
	cJSON_Delete(r);
	harness_raw_send(fd, "{\"op\":\"get\",\"id\":2,\"sources\":[{\"name\":\"fe.c\","
			 "\"text\":\"int kiln_test_value(void) { return 3; }\\n\"}]}");
	harness_wait_wrapper_starts(log, 1, 60);
	harness_raw_send_bytes(fd, zero, sizeof(zero));
	r = harness_raw_recv(fd);
	ck_assert_str_eq(harness_error_code(r), "bad_frame");
	cJSON_Delete(r);
	close(fd);
	harness_wait_status("cancelled", 1, 30);
	harness_wait_status("in_flight", 0, 30);
	harness_write_file(gate, "");
	harness_stop();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("faults");

	suite_add_tcase(s, harness_tcase("cache_emptied", cache_emptied_under_a_running_build_keeps_the_build, 120));
	suite_add_tcase(s, harness_tcase("abandoned", abandoned_builds_are_cancelled, 120));
	suite_add_tcase(s, harness_tcase("framing_abandoned", framing_error_cancels_the_build_it_waited_for, 90));
	suite_add_tcase(s, harness_tcase("deadline", silent_kilnd_fails_calls_at_the_deadline, 120));
	suite_add_tcase(s, harness_tcase("toolchain_swappable", toolchain_others_can_replace_is_said_at_start, 90));

	suite_add_tcase(s, harness_tcase("cache_removed", cache_directory_removed_while_running_is_made_again, 120));
	suite_add_tcase(s, harness_tcase("cache_taken", cache_directory_taken_by_another_kilnd_is_said_in_every_reply, 120));

	suite_add_tcase(s, harness_tcase("shutdown_keying", shutdown_while_keying, 90));
	suite_add_tcase(s, harness_tcase("background_job", background_job_of_a_build, 90));
	suite_add_tcase(s, harness_tcase("background_probe", background_job_of_a_toolchain_probe, 90));
	suite_add_tcase(s, harness_tcase("fifo_source", fifo_source_path, 90));
	suite_add_tcase(s, harness_tcase("open_dirs", directories_writable_by_others, 90));
	return harness_main(s);
}
