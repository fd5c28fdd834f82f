/*
 * Integration test harness: temporary directories and their cleanup, the real
 * kilnd and CLI as child processes, and the CLI's JSON. The client side is in
 * harness_clients.c. See harness.h for why the fixtures are split between
 * parent and child.
 */
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_ARGS 64
#define TAIL_BYTES 3000

struct harness harness;

static const char *env_or_null(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

static const char *env_required(const char *name)
{
	const char *v = env_or_null(name);

	ck_assert_msg(v != NULL, "%s is not set; run the tests through meson test", name);
	return v;
}

const char *harness_kilnd(void)
{
	return env_required("KILN_TEST_KILND");
}

const char *harness_cli_path(void)
{
	return env_required("KILN_TEST_CLI");
}

const char *harness_kiln_exec(void)
{
	return env_required("KILN_TEST_EXEC");
}

const char *harness_data(void)
{
	return env_required("KILN_TEST_DATA");
}

void harness_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

double harness_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

bool harness_contains(const char *s, const char *needle)
{
	return s && needle && strstr(s, needle) != NULL;
}

char *harness_path(char *buf, const char *fmt, ...)
{
	char rel[HARNESS_PATH];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rel, sizeof(rel), fmt, ap);
	va_end(ap);
	/* The directory is short (see fixture_setup); the bounds keep it so. */
	snprintf(buf, HARNESS_PATH, "%.200s/%.300s", harness.dir, rel);
	return buf;
}

void harness_write_file(const char *path, const char *text)
{
	char tmp[HARNESS_PATH + 8];
	FILE *f;

	/* Write and rename, so that a reader never sees a half-written file. */
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	ck_assert_msg(f != NULL, "cannot write %s: %s", tmp, strerror(errno));
	ck_assert_int_eq(fputs(text, f) >= 0, 1);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_msg(rename(tmp, path) == 0, "rename %s: %s", path, strerror(errno));
}

char *harness_read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0, cap = 0, n;

	if (!f)
		return NULL;
	for (;;) {
		if (cap - len < 4097) {
			char *nb;

			cap = cap ? cap * 2 : 8192;
			nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = nb;
		}
		n = fread(buf + len, 1, cap - len - 1, f);
		if (n == 0)
			break;
		len += n;
	}
	fclose(f);
	buf[len] = '\0';
	return buf;
}

int harness_count_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

bool harness_exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* The last TAIL_BYTES of a file, for failure messages; static buffer. */
static const char *tail_of(const char *path)
{
	static char buf[TAIL_BYTES + 1];
	char *text = harness_read_file(path);
	size_t len;

	if (!text) {
		snprintf(buf, sizeof(buf), "(no %s)", path);
		return buf;
	}
	len = strlen(text);
	snprintf(buf, sizeof(buf), "%s", len > TAIL_BYTES ? text + len - TAIL_BYTES : text);
	free(text);
	return buf;
}

/* Fixtures. */

static int rm_visit(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP || flag == FTW_D)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

static int chmod_visit(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)ftw;
	/* The daemon may leave read-only directories; make them removable. */
	if (flag == FTW_D || flag == FTW_DNR)
		chmod(path, (st->st_mode & 07777) | S_IRWXU);
	return 0;
}

static void remove_tree(const char *dir)
{
	nftw(dir, chmod_visit, 16, FTW_PHYS);
	nftw(dir, rm_visit, 16, FTW_PHYS | FTW_DEPTH);
}

/* Reads /proc/<pid>/<what> (NUL-separated) into buf; returns its length. */
static size_t read_proc(pid_t pid, const char *what, char *buf, size_t len)
{
	char path[64];
	ssize_t n;
	size_t have = 0;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	while (have < len && (n = read(fd, buf + have, len - have)) > 0)
		have += (size_t)n;
	close(fd);
	return have;
}

/* Does the process mention the test directory in its argv or environment? */
static bool proc_mentions_dir(pid_t pid)
{
	static char buf[1 << 17];
	size_t n, dlen = strlen(harness.dir);

	if (dlen == 0)
		return false;
	n = read_proc(pid, "cmdline", buf, sizeof(buf));
	if (memmem(buf, n, harness.dir, dlen))
		return true;
	n = read_proc(pid, "environ", buf, sizeof(buf));
	return memmem(buf, n, harness.dir, dlen) != NULL;
}

/* The state letter of /proc/<pid>/stat, or 0 when the process is gone. */
static char proc_state(pid_t pid)
{
	char buf[512], *p;
	size_t n = read_proc(pid, "stat", buf, sizeof(buf) - 1);

	if (n == 0)
		return 0;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

bool harness_alive(pid_t pid)
{
	char st;

	if (pid <= 0 || kill(pid, 0) == -1)
		return false;
	st = proc_state(pid);
	return st != 0 && st != 'Z' && st != 'X';
}

bool harness_wait_gone(pid_t pid, double timeout_s)
{
	double end = harness_now_s() + timeout_s;

	for (;;) {
		/* Reap it when it is our own child. */
		waitpid(pid, NULL, WNOHANG);
		if (!harness_alive(pid))
			return true;
		if (harness_now_s() > end)
			return false;
		harness_sleep_ms(20);
	}
}

unsigned harness_fd_table_size(pid_t pid)
{
	char path[64], line[128];
	unsigned size = 0;
	bool found = false;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	ck_assert_msg(f != NULL, "cannot read %s: %s", path, strerror(errno));
	while (!found && fgets(line, sizeof(line), f) != NULL)
		found = sscanf(line, "FDSize: %u", &size) == 1;
	fclose(f);
	ck_assert_msg(found, "no FDSize in %s", path);
	return size;
}

unsigned harness_fd_room(unsigned n)
{
	struct rlimit rl;

	ck_assert(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	return rl.rlim_max != RLIM_INFINITY && rl.rlim_max < n ? (unsigned)rl.rlim_max : n;
}

unsigned harness_nofile_soft(pid_t pid)
{
	char path[64], line[256], soft[32] = "";
	bool found = false;

	snprintf(path, sizeof(path), "/proc/%d/limits", (int)pid);
	FILE *f = fopen(path, "re");
	ck_assert_msg(f != NULL, "cannot read %s: %s", path, strerror(errno));
	while (!found && fgets(line, sizeof(line), f) != NULL)
		found = sscanf(line, "Max open files %31s", soft) == 1;
	fclose(f);
	ck_assert_msg(found, "no \"Max open files\" in %s", path);
	return strcmp(soft, "unlimited") == 0 ? UINT_MAX : (unsigned)strtoul(soft, NULL, 10);
}

/* Kills every process but this one that mentions the test directory. */
static int kill_strays(void)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int killed = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)) != NULL) {
		pid_t pid = (pid_t)atoi(de->d_name);

		if (pid <= 1 || pid == getpid() || !harness_alive(pid))
			continue;
		if (proc_mentions_dir(pid)) {
			kill(pid, SIGKILL);
			killed++;
		}
	}
	closedir(d);
	return killed;
}

static void fixture_setup(void)
{
	const char *tmp = env_or_null("TMPDIR");
	char templ[HARNESS_PATH];

	/* Socket paths are limited to 108 bytes, so keep the directory short. */
	if (!tmp || strlen(tmp) > 40)
		tmp = "/tmp";
	memset(&harness, 0, sizeof(harness));
	snprintf(templ, sizeof(templ), "%s/kiln-it-XXXXXX", tmp);
	if (!mkdtemp(templ)) {
		fprintf(stderr, "mkdtemp %s: %s\n", templ, strerror(errno));
		abort();
	}
	snprintf(harness.dir, sizeof(harness.dir), "%s", templ);
	/* A suite run inside a Slurm job must not pace the daemons it starts
	 * by that job's size (the tests that want a size set one). */
	static const char *const job_env[] = { "KILN_JOB_NODES", "SLURM_JOB_NUM_NODES",
					       "SLURM_NNODES", "SLURM_JOB_NODELIST" };
	for (size_t i = 0; i < sizeof(job_env) / sizeof(job_env[0]); i++)
		unsetenv(job_env[i]);
	harness_path(harness.socket, "kilnd.sock");
	harness_path(harness.cache, "cache");
	harness_path(harness.log, "kilnd.log");
	harness_path(harness.out, "kilnd.out");
}

static void checked_teardown(void)
{
	char path[HARNESS_PATH];

	/* Check skips this when the test failed; its absence tells the
	 * parent to show the daemon's logs. */
	harness_write_file(harness_path(path, ".passed"), "");
}

static void fixture_teardown(void)
{
	char path[HARNESS_PATH];
	int round;

	if (!harness_exists(harness_path(path, ".passed"))) {
		fprintf(stderr, "--- test failed; kilnd output (%s):\n%s\n", harness.out,
			tail_of(harness.out));
		fprintf(stderr, "--- kilnd log (%s):\n%s\n---\n", harness.log, tail_of(harness.log));
	}
	for (round = 0; round < 100 && kill_strays() > 0; round++)
		harness_sleep_ms(50);
	if (env_or_null("KILN_TEST_KEEP")) {
		fprintf(stderr, "kept %s\n", harness.dir);
		return;
	}
	remove_tree(harness.dir);
}

TCase *harness_tcase(const char *name, const TTest *test, double timeout_s)
{
	TCase *tc = tcase_create(name);

	tcase_add_unchecked_fixture(tc, fixture_setup, fixture_teardown);
	tcase_add_checked_fixture(tc, NULL, checked_teardown);
	tcase_set_timeout(tc, timeout_s);
	tcase_add_test(tc, test);
	return tc;
}

TCase *harness_add(Suite *s, const char *name, const TTest *test, double timeout_s)
{
	TCase *tc = harness_tcase(name, test, timeout_s);

	suite_add_tcase(s, tc);
	return tc;
}

int harness_main(Suite *s)
{
	SRunner *sr;
	int failed;

	if (!env_or_null("KILN_TEST_KILND") || !env_or_null("KILN_TEST_CLI")) {
		fprintf(stderr, "KILN_TEST_KILND and KILN_TEST_CLI are not set; "
				"run the tests through meson test\n");
		return 77;
	}
	/* Nothing of the user's own daemon or cache may leak into a test. */
	unsetenv("KILN_SOCKET");
	unsetenv("KILN_CACHE_DIR");
	unsetenv("KILN_AUTOSPAWN");
	unsetenv("KILN_KILND");
	/* Children must not inherit unflushed output. */
	setvbuf(stdout, NULL, _IONBF, 0);
	sr = srunner_create(s);
	/* The cleanup design depends on each test running in its own child. */
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_VERBOSE);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* Processes. */

pid_t harness_spawn(const char *const *argv, const char *const *env_add, const char *out_path,
		    const char *err_path)
{
	pid_t pid = fork();

	ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		int in = open("/dev/null", O_RDONLY);
		int out = open(out_path ? out_path : "/dev/null",
			       O_WRONLY | O_CREAT | O_APPEND, 0600);
		int err = err_path ? open(err_path, O_WRONLY | O_CREAT | O_APPEND, 0600) : out;

		if (in < 0 || out < 0 || err < 0)
			_exit(126);
		dup2(in, 0);
		dup2(out, 1);
		dup2(err, 2);
		for (size_t i = 0; env_add && env_add[i]; i++)
			putenv((char *)env_add[i]);
		/* Leave the test's process group alone; Check kills it after each test. */
		execv(argv[0], (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	return pid;
}

int harness_wait(pid_t pid, double timeout_s)
{
	double end = harness_now_s() + timeout_s;
	int status;

	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return status;
		if (r < 0 && errno != EINTR)
			return -1;
		if (harness_now_s() > end)
			return -1;
		harness_sleep_ms(10);
	}
}

int harness_run(const char *const *argv, const char *out_path, const char *err_path,
		double timeout_s)
{
	pid_t pid = harness_spawn(argv, NULL, out_path, err_path);
	int status = harness_wait(pid, timeout_s);

	if (status == -1) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	return status;
}

bool harness_socket_answers(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, r;

	if (strlen(path) >= sizeof(sa.sun_path))
		return false;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	close(fd);
	return r == 0;
}

/* kilnd's command line for a socket, cache and log, debug logging, the test
 * directory writable for compilers (the tests' toolchain wrappers log and
 * keep their gates there; kilnd confines compilers to their build directory
 * otherwise), then the NULL-terminated extra arguments. */
static void kilnd_argv(const char **argv, const char *sock, const char *cache, const char *log,
			 const char *const *extra)
{
	size_t n = 0;

	argv[n++] = harness_kilnd();
	argv[n++] = "--socket";
	argv[n++] = sock;
	argv[n++] = "--cache-dir";
	argv[n++] = cache;
	argv[n++] = "--log-file";
	argv[n++] = log;
	argv[n++] = "--log-level";
	argv[n++] = "debug";
	argv[n++] = "--allow-write";
	argv[n++] = harness.dir;
	for (size_t i = 0; extra && extra[i]; i++) {
		ck_assert(n < MAX_ARGS - 1);
		argv[n++] = extra[i];
	}
	argv[n] = NULL;
}

pid_t harness_startv(const char *const *extra)
{
	return harness_start_env(extra, NULL);
}

pid_t harness_start_env(const char *const *extra, const char *const *env_add)
{
	const char *argv[MAX_ARGS];
	double end;
	pid_t pid;

	ck_assert_msg(harness.pid == 0, "a kilnd started by the test is still running");
	kilnd_argv(argv, harness.socket, harness.cache, harness.log, extra);
	pid = harness_spawn(argv, env_add, harness.out, NULL);
	end = harness_now_s() + 30;
	for (;;) {
		int status;

		if (harness_socket_answers(harness.socket))
			break;
		if (waitpid(pid, &status, WNOHANG) == pid)
			ck_abort_msg("kilnd exited (status 0x%x) before its socket answered:\n%s\nlog:\n%s",
				     status, tail_of(harness.out), tail_of(harness.log));
		if (harness_now_s() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			ck_abort_msg("kilnd's socket %s did not answer within 30 s:\n%s",
				     harness.socket, tail_of(harness.out));
		}
		harness_sleep_ms(10);
	}
	harness.pid = pid;
	return pid;
}

pid_t harness_start(const char *arg, ...)
{
	const char *extra[MAX_ARGS];
	size_t n = 0;
	va_list ap;

	va_start(ap, arg);
	for (const char *a = arg; a && n < MAX_ARGS - 1; a = va_arg(ap, const char *))
		extra[n++] = a;
	va_end(ap);
	extra[n] = NULL;
	return harness_startv(extra);
}

pid_t harness_start_named(const char *name, const char *const *extra,
			  const char *const *env_add, char sock[HARNESS_PATH])
{
	char cache[HARNESS_PATH], log[HARNESS_PATH], out[HARNESS_PATH];
	const char *argv[MAX_ARGS];
	double end;
	pid_t pid;

	harness_path(sock, "%s.sock", name);
	kilnd_argv(argv, sock, harness_path(cache, "%s.cache", name),
		       harness_path(log, "%s.log", name), extra);
	pid = harness_spawn(argv, env_add, harness_path(out, "%s.out", name), NULL);
	end = harness_now_s() + 30;
	while (!harness_socket_answers(sock)) {
		ck_assert_msg(harness_alive(pid), "kilnd %s exited before it answered:\n%s", name,
			      tail_of(out));
		ck_assert_msg(harness_now_s() < end, "kilnd %s did not answer within 30 s", name);
		harness_sleep_ms(10);
	}
	return pid;
}

cJSON *harness_status_at(const char *sock)
{
	int fd = harness_raw_connect(sock);
	cJSON *r;

	harness_raw_send(fd, "{\"op\":\"hello\",\"id\":1,\"proto\":3}");
	cJSON_Delete(harness_raw_recv(fd));
	harness_raw_send(fd, "{\"op\":\"status\",\"id\":2}");
	r = harness_raw_recv(fd);
	close(fd);
	ck_assert_msg(cJSON_IsTrue(cJSON_GetObjectItem(r, "ok")), "status of the kilnd at %s failed",
		      sock);
	return r;
}

int64_t harness_status_num_at(const char *sock, const char *field)
{
	cJSON *st = harness_status_at(sock);
	int64_t v = harness_num(st, field);

	cJSON_Delete(st);
	return v;
}

void harness_stop(void)
{
	pid_t pid = harness.pid;
	int status;

	ck_assert_msg(pid > 0, "no kilnd to stop");
	ck_assert_int_eq(kill(pid, SIGTERM), 0);
	status = harness_wait(pid, 30);
	harness.pid = 0;
	if (status == -1) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		ck_abort_msg("kilnd did not exit within 30 s of SIGTERM:\n%s", tail_of(harness.log));
	}
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "kilnd did not exit cleanly on SIGTERM (status 0x%x):\n%s", status,
		      tail_of(harness.out));
	ck_assert_msg(!harness_exists(harness.socket),
		      "kilnd left its socket %s behind after SIGTERM", harness.socket);
}

void harness_kill9(void)
{
	ck_assert_msg(harness.pid > 0, "no kilnd to kill");
	ck_assert_int_eq(kill(harness.pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(harness.pid, NULL, 0), harness.pid);
	harness.pid = 0;
}

/* CLI. */

static int run_cli(bool json, char **out, char **err, const char *const *args)
{
	const char *argv[MAX_ARGS];
	char out_path[HARNESS_PATH], err_path[HARNESS_PATH];
	size_t n = 0;
	int status;

	argv[n++] = harness_cli_path();
	argv[n++] = "--socket";
	argv[n++] = harness.socket;
	argv[n++] = "--cache-dir";
	argv[n++] = harness.cache;
	if (json)
		argv[n++] = "--json";
	for (size_t i = 0; args[i]; i++) {
		ck_assert(n < MAX_ARGS - 1);
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	harness_path(out_path, "cli.out");
	harness_path(err_path, "cli.err");
	unlink(out_path);
	unlink(err_path);
	status = harness_run(argv, out_path, err_path, 60);
	if (out)
		*out = harness_read_file(out_path);
	if (err)
		*err = harness_read_file(err_path);
	if (out && !*out)
		*out = strdup("");
	if (err && !*err)
		*err = strdup("");
	if (status == -1 || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

static void collect_args(const char **args, size_t max, const char *arg, va_list ap)
{
	size_t n = 0;

	for (const char *a = arg; a && n < max - 1; a = va_arg(ap, const char *))
		args[n++] = a;
	args[n] = NULL;
}

int harness_cliv(char **out, char **err, const char *const *args)
{
	return run_cli(false, out, err, args);
}

int harness_cli(char **out, char **err, const char *arg, ...)
{
	const char *args[MAX_ARGS];
	va_list ap;

	va_start(ap, arg);
	collect_args(args, MAX_ARGS, arg, ap);
	va_end(ap);
	return run_cli(false, out, err, args);
}

cJSON *harness_cli_json(const char *arg, ...)
{
	const char *args[MAX_ARGS];
	char *out, *err;
	cJSON *v;
	va_list ap;
	int rc;

	va_start(ap, arg);
	collect_args(args, MAX_ARGS, arg, ap);
	va_end(ap);
	rc = run_cli(true, &out, &err, args);
	ck_assert_msg(rc == 0, "kiln --json %s exited with %d; stderr: %s", args[0], rc, err);
	v = cJSON_Parse(out);
	ck_assert_msg(v != NULL, "kiln --json %s printed no JSON: '%s'", args[0], out);
	free(out);
	free(err);
	return v;
}

cJSON *harness_status(void)
{
	cJSON *st = harness_cli_json("status", NULL);

	ck_assert_msg(cJSON_IsObject(st), "kiln --json status did not print an object");
	return st;
}

const cJSON *harness_find_entry(const cJSON *ls, const char *member, const char *value)
{
	const cJSON *e;

	cJSON_ArrayForEach(e, ls) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, member);

		if (cJSON_IsString(v) && strcmp(v->valuestring, value) == 0)
			return e;
	}
	return NULL;
}

void harness_wait_cache_checked(double timeout_s)
{
	double end = harness_now_s() + timeout_s;
	for (;;) {
		cJSON *st = harness_status();
		bool checking = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "checking_cache"));
		cJSON_Delete(st);
		if (!checking)
			return;
		ck_assert_msg(harness_now_s() < end, "the cache check after the unclean stop did "
			      "not finish in %.0f s", timeout_s);
		harness_sleep_ms(20);
	}
}

void harness_wait_status(const char *field, int64_t value, double timeout_s)
{
	double end = harness_now_s() + timeout_s;

	for (;;) {
		cJSON *st = harness_status();
		int64_t v = harness_num(st, field);

		if (v >= value) {
			cJSON_Delete(st);
			return;
		}
		if (harness_now_s() > end) {
			char *s = cJSON_PrintUnformatted(st);

			ck_abort_msg("status %s stayed below %lld for %.0f s: %s", field,
				     (long long)value, timeout_s, s);
		}
		cJSON_Delete(st);
		harness_sleep_ms(50);
	}
}

int64_t harness_num(const cJSON *obj, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);

	if (!cJSON_IsNumber(v)) {
		char *s = cJSON_PrintUnformatted(obj);

		ck_abort_msg("no number \"%s\" in %s", name, s ? s : "(null)");
	}
	return (int64_t)v->valuedouble;
}

const char *harness_str(const cJSON *obj, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);

	if (!cJSON_IsString(v)) {
		char *s = cJSON_PrintUnformatted(obj);

		ck_abort_msg("no string \"%s\" in %s", name, s ? s : "(null)");
	}
	return v->valuestring;
}

int harness_find_procs(const char *exe, pid_t *pids, int max)
{
	char want[PATH_MAX], link[PATH_MAX + 1], path[64];
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;

	ck_assert(d != NULL);
	ck_assert_msg(realpath(exe, want) != NULL, "realpath %s: %s", exe, strerror(errno));
	while ((de = readdir(d)) != NULL) {
		pid_t pid = (pid_t)atoi(de->d_name);
		ssize_t len;

		if (pid <= 0 || !harness_alive(pid))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
		len = readlink(path, link, sizeof(link) - 1);
		if (len <= 0)
			continue;
		link[len] = '\0';
		if (strcmp(link, want) != 0 || !proc_mentions_dir(pid))
			continue;
		if (n < max)
			pids[n] = pid;
		n++;
	}
	closedir(d);
	return n < max ? n : max;
}

char *harness_data_file(const char *name)
{
	char path[HARNESS_PATH];
	char *text;

	snprintf(path, sizeof(path), "%s/%s", harness_data(), name);
	text = harness_read_file(path);
	ck_assert_msg(text != NULL, "cannot read %s", path);
	return text;
}

const char *harness_module_compiler(char *path, int version)
{
	char dir[HARNESS_PATH], text[256];
	mkdir(harness_path(dir, "opt"), 0755);
	mkdir(harness_path(dir, "opt/gcc"), 0755);
	mkdir(harness_path(dir, "opt/gcc/bin"), 0755);
	snprintf(text, sizeof(text), "#!/bin/sh\n# module gcc %d\nexec /usr/bin/g++ \"$@\"\n", version);
	harness_write_file(harness_path(path, "opt/gcc/bin/g++"), text);
	ck_assert_int_eq(chmod(path, 0755), 0);
	return path;
}
