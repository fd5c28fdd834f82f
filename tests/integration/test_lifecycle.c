/*
 * Integration tests of the daemon's life: one daemon per cache directory and
 * socket (also with --daemonize and autospawn), idle exit, and a graceful
 * stop while builds run.
 */
#include "harness.h"

#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define RACERS 4
#define AUTOSPAWNERS 8

/*
 * The kilnd processes of this test, once the losers of a start-up race have
 * had time to exit (they exit at once, but not necessarily before the
 * winner's clients are done). Returns how many remain, at most max.
 */
static int settled_daemons(pid_t *found, int max)
{
	double end = harness_now_s() + 10;
	int n;

	while ((n = harness_find_procs(harness_kilnd(), found, max)) > 1 && harness_now_s() < end)
		harness_sleep_ms(50);
	return n;
}

/* Does text say that another daemon is running? Case-insensitive. */
static bool says_already_running(const char *text, pid_t first)
{
	char pid[32], *lower;
	bool yes;

	if (!text || !*text)
		return false;
	lower = strdup(text);
	ck_assert_ptr_nonnull(lower);
	for (char *p = lower; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	snprintf(pid, sizeof(pid), "%d", (int)first);
	yes = strstr(lower, "already") || strstr(lower, pid);
	free(lower);
	return yes;
}

/* Runs a second kilnd with the given paths in the foreground; returns its
 * wait status, with its stdout and stderr in *said (caller frees). */
static int second_daemon(const char *socket_path, const char *cache, char **said)
{
	char out_path[HARNESS_PATH];
	const char *argv[] = { harness_kilnd(), "--socket", socket_path, "--cache-dir", cache,
			       NULL };
	int status;

	harness_path(out_path, "second.out");
	unlink(out_path);
	status = harness_run(argv, out_path, NULL, 30);
	ck_assert_msg(status != -1, "a second kilnd (socket %s, cache %s) did not exit",
		      socket_path, cache);
	*said = harness_read_file(out_path);
	return status;
}

/* The same socket and cache: the second exits 0 at once, saying that the
 * first one runs (an idempotent start). */
static void second_daemon_yields(const char *socket_path, const char *cache, pid_t first)
{
	char *out;
	int status = second_daemon(socket_path, cache, &out);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "a second kilnd exited with status 0x%x: %s", status, out);
	ck_assert_msg(says_already_running(out, first),
		      "a second kilnd did not say that pid %d runs: '%s'", (int)first, out);
	free(out);
}

/* Another socket on the cache, or another cache on the socket: not the
 * daemon asked for, so the second fails, naming the first and what it
 * serves. */
static void second_daemon_refused(const char *socket_path, const char *cache, pid_t first,
				  const char *names, int exit_status)
{
	char *out, pid[32];
	int status = second_daemon(socket_path, cache, &out);
	snprintf(pid, sizeof(pid), "pid %d", (int)first);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == exit_status,
		      "a second kilnd (socket %s, cache %s) exited with status 0x%x, not %d: %s",
		      socket_path, cache, status, exit_status, out);
	ck_assert_msg(strstr(out, pid) != NULL && strstr(out, names) != NULL,
		      "a second kilnd did not name %s and %s: '%s'", pid, names, out);
	free(out);
}

static void expect_served_by(pid_t pid)
{
	cJSON *st;

	ck_assert_msg(harness_exists(harness.socket), "the first daemon's socket was removed");
	st = harness_status();
	ck_assert_int_eq(harness_num(st, "pid"), pid);
	cJSON_Delete(st);
}

START_TEST(second_daemon_on_one_cache)
{
	char other_socket[HARNESS_PATH], other_cache[HARNESS_PATH];
	pid_t first = harness_start(NULL);

	second_daemon_yields(harness.socket, harness.cache, first);
	expect_served_by(first);
	/* The cache on another socket: 3, which a job's prologue takes for
	 * "another job of this user: use a cache of your own". */
	second_daemon_refused(harness_path(other_socket, "other.sock"), harness.cache, first,
			      harness.socket, 3);
	expect_served_by(first);
	ck_assert_msg(!harness_exists(other_socket), "a socket appeared at %s", other_socket);
	second_daemon_refused(harness.socket, harness_path(other_cache, "other-cache"), first,
			      harness.cache, 1);
	expect_served_by(first);
	/* Held while it runs; no .lock file is left behind when it stops (nor
	 * by the second daemons, which held the socket's lock for a moment). */
	char lock[HARNESS_PATH + 8], cache_lock[HARNESS_PATH + 16];
	snprintf(lock, sizeof(lock), "%s.lock", harness.socket);
	snprintf(cache_lock, sizeof(cache_lock), "%s/kilnd.lock", harness.cache);
	ck_assert(harness_exists(lock) && harness_exists(cache_lock));
	ck_assert_msg(!harness_exists(harness_path(other_socket, "other.sock.lock")),
		      "the refused daemon left %s", other_socket);
	harness_stop();
	ck_assert_msg(!harness_exists(lock), "%s is left behind", lock);
	ck_assert_msg(!harness_exists(cache_lock), "%s is left behind", cache_lock);
	/* And the next kilnd starts as usual. */
	harness_start(NULL);
	expect_served_by(harness.pid);
	harness_stop();
}
END_TEST

/* --socket naming a file that is not a socket: refused, named, and the file
 * is left as it was (a stale socket is the only thing kilnd replaces). */
START_TEST(socket_path_that_is_not_a_socket_is_kept)
{
	char file[HARNESS_PATH], dir[HARNESS_PATH], out_path[HARNESS_PATH];
	const char *kinds[] = { "a regular file", "a directory" };
	const char *paths[] = { harness_path(file, "notes.txt"), harness_path(dir, "adir") };
	harness_write_file(file, "the user's notes\n");
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	for (int i = 0; i < 2; i++) {
		const char *argv[] = { harness_kilnd(), "--socket", paths[i], "--cache-dir",
				       harness.cache, "--daemonize", NULL };
		harness_path(out_path, "start%d.out", i);
		int status = harness_run(argv, out_path, NULL, 30);
		char *out = harness_read_file(out_path);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) != 0,
			      "kilnd --socket %s exited 0: %s", paths[i], out);
		ck_assert_msg(strstr(out, kinds[i]) != NULL && strstr(out, "not a socket") != NULL,
			      "kilnd did not say that %s is %s: '%s'", paths[i], kinds[i], out);
		/* Said once, by the --daemonize parent, not once per process. */
		char *again = strstr(out, "not a socket");
		ck_assert_msg(strstr(again + 1, "not a socket") == NULL, "said twice: '%s'", out);
		free(out);
	}
	char *text = harness_read_file(file);
	ck_assert_str_eq(text, "the user's notes\n");
	free(text);
	struct stat st;
	ck_assert(stat(dir, &st) == 0 && S_ISDIR(st.st_mode));
}
END_TEST

/* Starts "kilnd --daemonize" for the harness paths, its stdout going to
 * <dir>/<name> and its stderr to <dir>/<name>.err; returns its pid. */
static pid_t spawn_daemonize(const char *name)
{
	char out_path[HARNESS_PATH], err_path[HARNESS_PATH + 8];
	const char *argv[] = { harness_kilnd(), "--socket", harness.socket, "--cache-dir",
			       harness.cache, "--log-file", harness.log, "--daemonize", NULL };

	harness_path(out_path, "%s", name);
	snprintf(err_path, sizeof(err_path), "%s.err", out_path);
	return harness_spawn(argv, NULL, out_path, err_path);
}

/* Waits for a spawn_daemonize() process and requires exit status 0. Returns
 * the pid it printed on stdout (0 when none); *said gets stdout and stderr
 * (caller frees). */
static pid_t wait_daemonize(pid_t pid, const char *name, char **said)
{
	char out_path[HARNESS_PATH], err_path[HARNESS_PATH + 8];
	int status = harness_wait(pid, 30);
	char *out, *err;
	pid_t printed;

	ck_assert_msg(status != -1, "kilnd --daemonize (%s) did not return within 30 s", name);
	harness_path(out_path, "%s", name);
	snprintf(err_path, sizeof(err_path), "%s.err", out_path);
	out = harness_read_file(out_path);
	err = harness_read_file(err_path);
	ck_assert(asprintf(said, "%s%s", out ? out : "", err ? err : "") >= 0);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "kilnd --daemonize (%s) exited with status 0x%x: %s", name, status, *said);
	printed = out ? (pid_t)strtol(out, NULL, 10) : 0;
	free(out);
	free(err);
	return printed;
}

START_TEST(daemonize_returns_ready_and_yields_to_the_first)
{
	pid_t pids[RACERS], found[8], first, printed;
	char name[32], *said, *out, *err;
	int n;

	/* Several at once: each returns 0, only once the socket accepts
	 * connections, and exactly one daemon remains. */
	for (int i = 0; i < RACERS; i++) {
		snprintf(name, sizeof(name), "race%d.out", i);
		pids[i] = spawn_daemonize(name);
	}
	for (int i = 0; i < RACERS; i++) {
		snprintf(name, sizeof(name), "race%d.out", i);
		printed = wait_daemonize(pids[i], name, &said);
		ck_assert_msg(harness_socket_answers(harness.socket),
			      "kilnd --daemonize %d returned before the socket answered", i);
		pids[i] = printed;
		free(said);
	}
	n = settled_daemons(found, 8);
	ck_assert_msg(n == 1, "%d daemons run after %d concurrent starts", n, RACERS);
	first = found[0];
	/* The daemon (the fork's child) has its descriptor table sized for the
	 * descriptor cache and 1024 connections, not the parent. */
	unsigned room = harness_fd_room(1024 + 1024 + 64);
	ck_assert_msg(harness_fd_table_size(first) >= room,
		      "the daemon's descriptor table holds %u, not %u", harness_fd_table_size(first),
		      room);
	for (int i = 0; i < RACERS; i++)
		ck_assert_msg(pids[i] == 0 || pids[i] == first,
			      "kilnd --daemonize %d printed pid %d, but %d runs", i, (int)pids[i],
			      (int)first);
	expect_served_by(first);

	/* One more, alone: it says so and leaves the first running. */
	wait_daemonize(spawn_daemonize("again.out"), "again.out", &said);
	ck_assert_msg(says_already_running(said, first),
		      "a second kilnd --daemonize did not say that pid %d runs: '%s'", (int)first,
		      said);
	free(said);
	n = settled_daemons(found, 8);
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(found[0], first);
	expect_served_by(first);

	/* kiln stop ends it and removes the socket. */
	ck_assert_int_eq(harness_cli(&out, &err, "stop", NULL), 0);
	ck_assert_msg(harness_wait_gone(first, 30), "kilnd %d still runs after kiln stop", (int)first);
	ck_assert(!harness_exists(harness.socket));
	free(out);
	free(err);
}
END_TEST

/*
 * Relative --socket, --cache-dir and --log-file name paths in the directory
 * kilnd was started from, even with --daemonize (which changes to "/"), and
 * its compilers (which run in their build directories) find their sources.
 */
START_TEST(relative_paths_are_the_start_directory_s)
{
	char sock[HARNESS_PATH], index[HARNESS_PATH], log[HARNESS_PATH], cmd[HARNESS_PATH * 2];
	struct kiln *k;

	snprintf(cmd, sizeof(cmd), "cd '%s' && exec '%s' --socket rel.sock --cache-dir rel-cache "
		 "--log-file rel.log --daemonize", harness.dir, harness_kilnd());
	const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	ck_assert_int_eq(harness_run(argv, NULL, NULL, 60), 0);
	harness_path(sock, "rel.sock");
	ck_assert_msg(harness_socket_answers(sock), "nothing answers at %s", sock);
	ck_assert_msg(harness_exists(harness_path(index, "rel-cache/index.db")), "no %s", index);
	ck_assert_msg(harness_exists(harness_path(log, "rel.log")), "no %s", log);
	ck_assert_msg(!harness_exists("/rel.sock") && !harness_exists("/rel-cache"),
		      "kilnd took the relative paths from /");
	ck_assert_int_eq(kiln_open(sock, &k), KILN_OK);
	char key[72];
	harness_get_program(k, "relative", 7, NULL, key);
	kiln_close(k);
	const char *stop[] = { harness_cli_path(), "--socket", sock, "stop", NULL };
	ck_assert_int_eq(harness_run(stop, NULL, NULL, 60), 0);
}
END_TEST

START_TEST(idle_exit_stops_an_idle_daemon)
{
	pid_t pid = harness_start("--idle-exit", "1", NULL);
	int status = harness_wait(pid, 60);

	harness.pid = 0;
	ck_assert_msg(status != -1, "kilnd --idle-exit 1 still runs after 60 s");
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit status 0x%x", status);
	ck_assert(!harness_exists(harness.socket));
}
END_TEST

START_TEST(stop_during_a_build_kills_the_compiler)
{
	char wrapper[HARNESS_PATH], log[HARNESS_PATH], gate[HARNESS_PATH], tmp[HARNESS_PATH];
	char toolchain[HARNESS_PATH + 8];
	char *text = harness_program("stopped", 9);
	struct harness_wrapper_log wl;
	struct kiln_request req;
	struct kiln_source src;
	struct harness_fleet *f;
	cJSON *st;
	int n;

	harness_write_wrapper(harness_path(wrapper, "cc-wrapper"), harness_path(log, "wrapper.log"),
			      harness_path(gate, "gate"), 0);
	snprintf(toolchain, sizeof(toolchain), "cc=%s", wrapper);
	harness_start("--toolchain", toolchain, NULL);
	harness_request(&req, &src, "stopped.c", text);
	f = harness_fleet_start(3, &(struct harness_fleet_opts){
		.socket = harness.socket, .reqs = &req, .nreqs = 1 });
	harness_wait_wrapper_starts(log, 1, 60);
	harness_wait_status("joined", 2, 60);
	harness_stop();

	harness_fleet_wait(f, 60);
	for (int i = 0; i < 3; i++)
		ck_assert_msg(f->results[i].rc == KILN_EBUSY,
			      "waiter %d got %s, expected KILN_EBUSY (shutting down): %s", i,
			      kiln_strerror(f->results[i].rc), f->results[i].msg);
	harness_wrapper_log_read(log, &wl);
	ck_assert_int_eq(wl.starts, 1);
	ck_assert_msg(harness_wait_gone(wl.pids[0], 10), "the compiler %d survived the stop",
		      (int)wl.pids[0]);

	harness_start(NULL);
	st = harness_status();
	ck_assert_int_eq(harness_num(st, "entries"), 0);
	cJSON_Delete(st);
	n = harness_count_dir(harness_path(tmp, "cache/tmp"));
	ck_assert_msg(n <= 0, "%d leftovers in %s after a stop during a build", n, tmp);
	harness_fleet_free(f);
	harness_stop();
	free(text);
}
END_TEST

START_TEST(autospawn_from_many_processes_gives_one_daemon)
{
	char *text = harness_program("spawned", 31);
	struct kiln_request req;
	struct kiln_source src;
	struct harness_fleet *f;
	pid_t found[16];
	cJSON *st;
	char *out, *err;
	int n;

	ck_assert_int_eq(setenv("KILN_AUTOSPAWN", "1", 1), 0);
	ck_assert_int_eq(setenv("KILN_KILND", harness_kilnd(), 1), 0);
	ck_assert_int_eq(setenv("KILN_SOCKET", harness.socket, 1), 0);
	ck_assert_int_eq(setenv("KILN_CACHE_DIR", harness.cache, 1), 0);
	harness_request(&req, &src, "spawned.c", text);
	f = harness_fleet_start(AUTOSPAWNERS, &(struct harness_fleet_opts){
		.socket = NULL, .reqs = &req, .nreqs = 1, .open_after_barrier = true });
	harness_fleet_wait(f, 120);
	for (int i = 0; i < AUTOSPAWNERS; i++) {
		struct harness_result *r = &f->results[i];

		ck_assert_msg(r->rc == KILN_OK, "client %d failed in %s with %s: %s", i, r->stage,
			      kiln_strerror(r->rc), r->msg);
		ck_assert_int_eq(r->value, 31);
		ck_assert_str_eq(r->key, f->results[0].key);
	}
	n = settled_daemons(found, 16);
	ck_assert_msg(n == 1, "%d daemons run after %d concurrent autospawns", n, AUTOSPAWNERS);
	st = harness_status();
	ck_assert_int_eq(harness_num(st, "pid"), found[0]);
	ck_assert_int_eq(harness_num(st, "builds_started"), 1);
	cJSON_Delete(st);
	ck_assert_int_eq(harness_cli(&out, &err, "stop", NULL), 0);
	ck_assert_msg(harness_wait_gone(found[0], 30), "the autospawned daemon survived kiln stop");
	free(out);
	free(err);
	harness_fleet_free(f);
	free(text);
}
END_TEST

START_TEST(autospawn_option_starts_a_daemon)
{
	struct kiln_options opts = { 0 };
	struct kiln *k = NULL;
	pid_t found[4];
	cJSON *st;
	char *out, *err;
	int rc;

	/* No environment: everything comes from the options. */
	unsetenv("KILN_AUTOSPAWN");
	unsetenv("KILN_SOCKET");
	opts.socket_path = harness.socket;
	opts.autospawn = 1;
	opts.kilnd_path = harness_kilnd();
	opts.cache_dir = harness.cache;
	rc = kiln_open_with(&opts, &k);
	ck_assert_msg(rc == KILN_OK, "kiln_open_with autospawn: %s: %s", kiln_strerror(rc),
		      kiln_errmsg(NULL));
	kiln_close(k);
	ck_assert_int_eq(settled_daemons(found, 4), 1);
	st = harness_status();
	ck_assert_int_eq(harness_num(st, "pid"), found[0]);
	ck_assert_str_eq(harness_str(st, "socket"), harness.socket);
	ck_assert_str_eq(harness_str(st, "cache_dir"), harness.cache);
	cJSON_Delete(st);
	ck_assert_int_eq(harness_cli(&out, &err, "stop", NULL), 0);
	ck_assert(harness_wait_gone(found[0], 30));
	free(out);
	free(err);

	/* Without autospawn, no daemon means KILN_ECONNECT. */
	opts.autospawn = 0;
	rc = kiln_open_with(&opts, &k);
	ck_assert_msg(rc == KILN_ECONNECT, "kiln_open_with without a daemon gave %s",
		      kiln_strerror(rc));
	ck_assert_ptr_null(k);
	ck_assert_msg(*kiln_errmsg(NULL) != '\0', "no message after a failed kiln_open");
}
END_TEST

/*
 * In a child running as uid 65534: connects to path, says hello and reads one
 * reply. Exits 0 when the reply is a "denied" error, 1 when the connection
 * could not be made, 2 for any other outcome.
 */
static void foreign_client(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	static const char hello[] = "{\"op\":\"hello\",\"id\":1,\"proto\":3}";
	unsigned char hdr[4] = { 0, 0, 0, sizeof(hello) - 1 };
	char buf[4096];
	size_t have = 0;
	ssize_t n;
	int fd;

	if (setgid(65534) != 0 || setuid(65534) != 0)
		_exit(3);
	if (strlen(path) >= sizeof(sa.sun_path))
		_exit(1);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		_exit(1);
	/* The daemon may already have closed; what it sent is still readable. */
	(void)!send(fd, hdr, 4, MSG_NOSIGNAL);
	(void)!send(fd, hello, sizeof(hello) - 1, MSG_NOSIGNAL);
	while (have < sizeof(buf) - 1 && (n = read(fd, buf + have, sizeof(buf) - 1 - have)) > 0)
		have += (size_t)n;
	buf[have] = '\0';
	_exit(have > 4 && strstr(buf + 4, "\"denied\"") ? 0 : 2);
}

START_TEST(socket_is_private_to_its_user)
{
	char run[HARNESS_PATH], sock[HARNESS_PATH];
	const char *args[] = { "--socket", sock, NULL };
	struct stat st;
	pid_t pid;
	int status;

	/* The daemon creates a missing socket directory, private to its user. */
	harness_path(run, "run/kiln");
	harness_path(sock, "run/kiln/kilnd.sock");
	snprintf(harness.socket, sizeof(harness.socket), "%s", sock);
	harness_startv(args);
	ck_assert_int_eq(stat(run, &st), 0);
	ck_assert_msg((st.st_mode & 0777) == 0700, "socket directory mode %o", st.st_mode & 0777);
	ck_assert_int_eq(stat(sock, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	ck_assert_msg((st.st_mode & 0777) == 0600, "socket mode %o", st.st_mode & 0777);
	ck_assert_int_eq(stat(harness.cache, &st), 0);
	ck_assert_msg((st.st_mode & 0777) == 0700, "cache directory mode %o", st.st_mode & 0777);

	/* Even when the file modes let another user through, kilnd refuses it.
	 * Only root can play another user. */
	if (geteuid() == 0) {
		ck_assert_int_eq(chmod(harness.dir, 0755), 0);
		ck_assert_int_eq(chmod(harness_path(run, "run"), 0755), 0);
		ck_assert_int_eq(chmod(harness_path(run, "run/kiln"), 0755), 0);
		ck_assert_int_eq(chmod(sock, 0666), 0);
		pid = fork();
		ck_assert(pid >= 0);
		if (pid == 0)
			foreign_client(sock);
		status = harness_wait(pid, 30);
		ck_assert_msg(status != -1, "the foreign client hangs");
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			      "a client of another uid was not refused with \"denied\" (status %d)",
			      WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		ck_assert_int_eq(chmod(harness.dir, 0700), 0);
	}
	expect_served_by(harness.pid);
	harness_stop();

	/* A socket in a shared sticky directory (/tmp's kind) is refused,
	 * once, with advice that does not break the node: no chmod of it.
	 * A failed start leaves no cache directory behind. */
	char shared[HARNESS_PATH], cache[HARNESS_PATH], *said;
	ck_assert_int_eq(mkdir(harness_path(shared, "shared"), 0700), 0);
	ck_assert_int_eq(chmod(shared, 01777), 0);
	harness_path(sock, "shared/kilnd.sock");
	status = second_daemon(sock, harness_path(cache, "cache-never"), &said);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) != 0, "%s", said);
	ck_assert_msg(harness_contains(said, "do not chmod it") &&
		      !harness_contains(said, "run chmod go-w"), "%s", said);
	ck_assert_msg(strstr(strstr(said, "writable by") + 1, "writable by") == NULL,
		      "said twice: %s", said);
	ck_assert_msg(!harness_exists(cache), "a failed start made %s", cache);
	free(said);
}
END_TEST

/* KILN_AUTOSPAWN=1 reaches the CLI too: a command that needs kilnd starts
 * one (KILN_KILND names it); kiln stop never starts one; a KILN_KILND that
 * is not there is named in the error. */
START_TEST(cli_autospawn)
{
	char out[HARNESS_PATH], env_kilnd[HARNESS_PATH + 16];
	const char *status_argv[] = { harness_cli_path(), "--socket", harness.socket, "--cache-dir",
				      harness.cache, "status", NULL };
	const char *stop_argv[] = { harness_cli_path(), "--socket", harness.socket, "stop", NULL };
	snprintf(env_kilnd, sizeof(env_kilnd), "KILN_KILND=%s", harness_kilnd());
	const char *env[] = { "KILN_AUTOSPAWN=1", env_kilnd, NULL };
	const char *bad_env[] = { "KILN_AUTOSPAWN=1", "KILN_KILND=/nonexistent/kilnd", NULL };

	pid_t pid = harness_spawn(stop_argv, env, harness_path(out, "stop.out"), NULL);
	harness_wait(pid, 30);
	ck_assert_msg(!harness_socket_answers(harness.socket), "kiln stop started a daemon");

	pid = harness_spawn(status_argv, bad_env, harness_path(out, "bad.out"), NULL);
	ck_assert_int_ne(harness_wait(pid, 30), 0);
	char *said = harness_read_file(out);
	ck_assert_msg(strstr(said, "KILN_KILND") != NULL, "%s", said);
	free(said);

	pid = harness_spawn(status_argv, env, harness_path(out, "status.out"), NULL);
	int st = harness_wait(pid, 60);
	said = harness_read_file(out);
	ck_assert_msg(st == 0 && strstr(said, "pid:") != NULL, "status 0x%x: %s", st, said);
	free(said);
	ck_assert(harness_socket_answers(harness.socket));
	char *o = NULL, *e = NULL;
	ck_assert_int_eq(harness_cli(&o, &e, "stop", NULL), 0);
	free(o);
	free(e);
}
END_TEST

/*
 * A start that fails after making its cache directory (a toolchain that
 * does not exist) leaves none behind; one that fails on a cache that was
 * there keeps it and what it holds.
 */
START_TEST(failed_start_leaves_no_new_cache)
{
	char sock[HARNESS_PATH], cache[HARNESS_PATH], out[HARNESS_PATH], keep[HARNESS_PATH + 16];
	harness_path(sock, "failed.sock");
	harness_path(cache, "failed-cache");
	harness_path(out, "failed.out");
	const char *argv[] = { harness_kilnd(), "--socket", sock, "--cache-dir", cache,
			       "--toolchain", "cc=/nonexistent/cc", NULL };
	int status = harness_run(argv, out, NULL, 30);
	char *said = harness_read_file(out);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) != 0,
		      "kilnd with a missing toolchain exited with 0x%x: %s", status, said);
	ck_assert_msg(harness_contains(said, "/nonexistent/cc"), "kilnd said: %s", said);
	free(said);
	ck_assert_msg(!harness_exists(cache), "the failed start left %s", cache);

	/* A cache that was there stays, with what it holds. */
	ck_assert_int_eq(mkdir(cache, 0700), 0);
	snprintf(keep, sizeof(keep), "%s/kiln.conf", cache);
	FILE *f = fopen(keep, "w");
	ck_assert_ptr_nonnull(f);
	fputs("max-size = 1G\n", f);
	fclose(f);
	status = harness_run(argv, out, NULL, 30);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0);
	ck_assert_msg(harness_exists(keep), "a failed start removed the existing cache's files");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("lifecycle");

	suite_add_tcase(s, harness_tcase("two_daemons", second_daemon_on_one_cache, 90));
	suite_add_tcase(s, harness_tcase("socket_not_socket", socket_path_that_is_not_a_socket_is_kept, 60));
	suite_add_tcase(s, harness_tcase("daemonize",
					 daemonize_returns_ready_and_yields_to_the_first, 90));
	suite_add_tcase(s, harness_tcase("socket_private", socket_is_private_to_its_user, 60));
	suite_add_tcase(s, harness_tcase("failed_start", failed_start_leaves_no_new_cache, 60));
	suite_add_tcase(s, harness_tcase("relative_paths", relative_paths_are_the_start_directory_s, 90));
	suite_add_tcase(s, harness_tcase("cli_autospawn", cli_autospawn, 90));
	suite_add_tcase(s, harness_tcase("idle_exit", idle_exit_stops_an_idle_daemon, 90));
	suite_add_tcase(s, harness_tcase("stop_build", stop_during_a_build_kills_the_compiler, 90));
	suite_add_tcase(s, harness_tcase("autospawn", autospawn_from_many_processes_gives_one_daemon,
					 150));
	suite_add_tcase(s, harness_tcase("autospawn_option", autospawn_option_starts_a_daemon, 60));
	return harness_main(s);
}
