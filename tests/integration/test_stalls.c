/*
 * Integration tests of the loop's liveness against hostile files: kilnd
 * keeps answering while a dependency is swapped for a FIFO (or a device)
 * between its stat and its hash, while a large changed dependency is
 * hashed, and while another user floods a watched directory with events.
 * Every lookup goes to kilnd over a raw connection (the client's own fast
 * path would answer without asking) with a receive deadline: a loop that
 * stalls fails the test instead of hanging it.
 */
#include "observe_util.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

/* Lookups while a header flips between a file and a FIFO: the window
 * between kilnd's stat and its open is a few microseconds wide. */
#define FIFO_LOOKUPS 4000

/* Seconds a reply may take before the loop counts as stalled. */
#define REPLY_DEADLINE_S 20

/* A raw connection with a receive deadline, after hello. */
static int connect_with_deadline(void)
{
	struct timeval tv = { .tv_sec = REPLY_DEADLINE_S };
	int fd = harness_raw_connect(harness.socket);

	ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	harness_raw_send(fd, "{\"op\":\"hello\",\"id\":1,\"proto\":3,\"client\":\"kiln-tests\"}");
	cJSON *r = harness_raw_recv(fd);
	ck_assert_msg(r != NULL && cJSON_IsTrue(cJSON_GetObjectItem(r, "ok")), "no hello");
	cJSON_Delete(r);
	return fd;
}

/* One lookup of alias over fd: 1 for a hit, 0 for not_found; the time it
 * took goes to *wait_s. Fails the test when no answer comes in time. */
static int raw_lookup(int fd, const char *alias, int id, double *wait_s)
{
	char req[256];
	double t0 = harness_now_s();

	snprintf(req, sizeof(req), "{\"op\":\"lookup\",\"id\":%d,\"alias\":\"%s\"}", id, alias);
	harness_raw_send(fd, req);
	cJSON *r = harness_raw_recv(fd);
	*wait_s = harness_now_s() - t0;
	ck_assert_msg(r != NULL, "kilnd closed the connection on lookup %d", id);
	int hit = cJSON_IsTrue(cJSON_GetObjectItem(r, "ok"));
	if (!hit)
		ck_assert_str_eq(harness_error_code(r), "not_found");
	/* A hit hands out the artifact's descriptor; it was not kept. */
	cJSON_Delete(r);
	return hit;
}

/* Builds r under alias and requires the value. */
static void build_with_alias(struct oreq *r, const char *alias, int value)
{
	r->req.alias = alias;
	expect(r, value, builds_started() + 1, "the first build");
}

/* kilnd answers a status at once: its loop is free. */
static void loop_answers(void)
{
	int fd = connect_with_deadline();

	harness_raw_send(fd, "{\"op\":\"status\",\"id\":2}");
	cJSON *r = harness_raw_recv(fd);
	ck_assert_msg(r != NULL && cJSON_IsTrue(cJSON_GetObjectItem(r, "ok")), "no status");
	cJSON_Delete(r);
	close(fd);
}

/*
 * A child that swaps h.h with a FIFO (and back) as fast as it can, touching
 * the file each time so that kilnd never has its digest by identity and
 * must open it: a stat that finds the file and an open that finds the
 * FIFO. Runs until killed, or for at most limit_s.
 */
static pid_t start_swapper(const char *hdr, const char *other, double limit_s)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid > 0)
		return pid;
	int fd = open(hdr, O_WRONLY);
	double end = harness_now_s() + limit_s;
	while (fd >= 0 && harness_now_s() < end) {
		if (renameat2(AT_FDCWD, hdr, AT_FDCWD, other, RENAME_EXCHANGE) != 0)
			_exit(2);
		futimens(fd, NULL);
	}
	_exit(0);
}

static void stop_child(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/*
 * A dependency that stat finds as a file and that is a FIFO when kilnd
 * opens it to hash it (swapped in between, over and over): every lookup is
 * answered, and kilnd still answers a status afterwards. Before, the loop
 * stayed in open() for good at the first swap that fell between the two.
 */
START_TEST(dependency_swapped_for_a_fifo_between_stat_and_open)
{
	char inc[HARNESS_PATH], hdr[HARNESS_PATH], fifo[HARNESS_PATH];
	struct oreq r;
	double wait, longest = 0;
	int hits = 0;

	make_dir(inc, "inc");
	write_header(harness_path(hdr, "inc/h.h"), 1);
	ck_assert_int_eq(mkfifo(harness_path(fifo, "inc/h.fifo"), 0600), 0);
	oreq_program(&r, inc);
	harness_start(NULL);
	build_with_alias(&r, "fifo-prog", 1);

	pid_t swapper = start_swapper(hdr, fifo, 60);
	int fd = connect_with_deadline();
	for (int i = 0; i < FIFO_LOOKUPS; i++) {
		hits += raw_lookup(fd, "fifo-prog", 10 + i, &wait);
		if (wait > longest)
			longest = wait;
	}
	stop_child(swapper);
	close(fd);
	printf("FIFO swaps: %d lookups answered, %d hits, longest wait %.1f ms\n", FIFO_LOOKUPS, hits,
	       longest * 1e3);
	loop_answers();
	oreq_free(&r);
	harness_stop();
}
END_TEST

/*
 * Dependencies replaced outright by what is not a file: a FIFO, a symlink
 * to /dev/zero (endless) and to a directory. Each is a changed input (a
 * miss), answered at once, and the original back is a hit again.
 */
START_TEST(dependency_replaced_by_what_is_not_a_file)
{
	static const char *const what[] = { "fifo", "/dev/zero", "dir" };
	char inc[HARNESS_PATH], hdr[HARNESS_PATH], keep[HARNESS_PATH], sub[HARNESS_PATH];
	struct oreq r;
	double wait;

	make_dir(inc, "inc");
	make_dir(sub, "inc/sub");
	write_header(harness_path(hdr, "inc/h.h"), 1);
	harness_path(keep, "inc/h.keep");
	oreq_program(&r, inc);
	harness_start(NULL);
	build_with_alias(&r, "odd-prog", 1);
	int fd = connect_with_deadline();
	for (size_t i = 0; i < sizeof(what) / sizeof(what[0]); i++) {
		ck_assert_int_eq(rename(hdr, keep), 0);
		if (strcmp(what[i], "fifo") == 0)
			ck_assert_int_eq(mkfifo(hdr, 0600), 0);
		else
			ck_assert_int_eq(symlink(strcmp(what[i], "dir") == 0 ? sub : what[i], hdr), 0);
		ck_assert_msg(raw_lookup(fd, "odd-prog", 100 + (int)i, &wait) == 0,
			      "h.h replaced by %s is still a hit", what[i]);
		ck_assert_int_eq(unlink(hdr), 0);
		ck_assert_int_eq(rename(keep, hdr), 0);
		ck_assert_msg(raw_lookup(fd, "odd-prog", 200 + (int)i, &wait) == 1,
			      "h.h back after %s is no hit", what[i]);
	}
	close(fd);
	oreq_free(&r);
	harness_stop();
}
END_TEST

/*
 * A header replaced by a symlink to a procfs file that claims to be a
 * regular file of size 0: /proc/self/pagemap (256 GiB when read to its
 * end) and /proc/self/comm. Each is a miss at once, not a read on the
 * loop; kilnd answers a status after them.
 */
START_TEST(dependency_swapped_for_a_procfs_file)
{
	static const char *const what[] = { "/proc/self/pagemap", "/proc/self/comm" };
	char inc[HARNESS_PATH], hdr[HARNESS_PATH], keep[HARNESS_PATH];
	struct oreq r;
	double wait;

	make_dir(inc, "inc");
	write_header(harness_path(hdr, "inc/h.h"), 1);
	harness_path(keep, "inc/h.keep");
	oreq_program(&r, inc);
	harness_start(NULL);
	build_with_alias(&r, "procfs-prog", 1);
	harness_sleep_ms(2100);
	int fd = connect_with_deadline();
	for (size_t i = 0; i < sizeof(what) / sizeof(what[0]); i++) {
		ck_assert_int_eq(rename(hdr, keep), 0);
		ck_assert_int_eq(symlink(what[i], hdr), 0);
		ck_assert_msg(raw_lookup(fd, "procfs-prog", 300 + (int)i, &wait) == 0,
			      "h.h replaced by a symlink to %s is still a hit", what[i]);
		ck_assert_int_eq(unlink(hdr), 0);
		ck_assert_int_eq(rename(keep, hdr), 0);
	}
	close(fd);
	loop_answers();
	oreq_free(&r);
	harness_stop();
}
END_TEST

/*
 * A header above the loop's inline hashing size (1 MiB) whose identity
 * changed is hashed on the pool while the lookup waits: touched (same
 * content) it is a hit, and rewritten with another value (same size) a
 * miss that rebuilds the new value.
 */
START_TEST(large_changed_dependency_hashed_off_the_loop)
{
	char inc[HARNESS_PATH], hdr[HARNESS_PATH];
	struct oreq r;
	double wait;

	make_dir(inc, "inc");
	harness_path(hdr, "inc/h.h");
	char *text = header_text(1, 1 << 20);
	harness_write_file(hdr, text);
	free(text);
	oreq_program(&r, inc);
	harness_start(NULL);
	build_with_alias(&r, "big-prog", 1);
	/* Newer times (beyond the 2 s a digest needs to settle). */
	struct timespec later[2] = { { .tv_nsec = UTIME_NOW }, { .tv_nsec = UTIME_NOW } };
	harness_sleep_ms(2100);
	ck_assert_int_eq(utimensat(AT_FDCWD, hdr, later, 0), 0);
	int fd = connect_with_deadline();
	ck_assert_msg(raw_lookup(fd, "big-prog", 2, &wait) == 1, "a touched large header is no hit");
	cJSON *st = harness_status();
	const cJSON *obs = cJSON_GetObjectItem(st, "observation");
	ck_assert_msg(harness_num(obs, "hashed_on_pool") >= 1, "the large header was not hashed "
		      "on the pool");
	cJSON_Delete(st);
	text = header_text(7, 1 << 20);
	harness_write_file(hdr, text);
	free(text);
	ck_assert_msg(raw_lookup(fd, "big-prog", 3, &wait) == 0, "a changed large header is a hit");
	close(fd);
	expect(&r, 7, builds_started() + 1, "after changing the large header");
	oreq_free(&r);
	harness_stop();
}
END_TEST

#define STORM_HEADERS 2000

/* A program that includes STORM_HEADERS headers of its own directory. */
static void storm_program(struct oreq *r, const char *inc)
{
	size_t cap = STORM_HEADERS * 32 + 256, o = 0;
	char *text = malloc(cap), path[HARNESS_PATH];

	ck_assert(text != NULL);
	for (int i = 0; i < STORM_HEADERS; i++) {
		char rel[64], def[64];
		snprintf(rel, sizeof(rel), "inc/s%04d.h", i);
		snprintf(def, sizeof(def), "#define S%04d %d\n", i, i % 2);
		harness_write_file(harness_path(path, "%s", rel), def);
		o += (size_t)snprintf(text + o, cap - o, "#include \"s%04d.h\"\n", i);
	}
	snprintf(text + o, cap - o, "int kiln_test_value(void) { return 1 + S0000; }\n");
	oreq_init(r, text);
	free(text);
	oreq_arg(r, "-I%s", inc);
}

/* Another user (nobody, when the tests run as root) renames its own file
 * back and forth in /tmp, the directory above every tracked header, as
 * fast as it can, for at most limit_s. */
static pid_t start_storm(double limit_s)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid > 0)
		return pid;
	struct passwd *pw = getuid() == 0 ? getpwnam("nobody") : NULL;
	if (pw != NULL && (setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0))
		_exit(2);
	char a[64], b[64];
	snprintf(a, sizeof(a), "/tmp/kiln-storm-%d-a", (int)getpid());
	snprintf(b, sizeof(b), "/tmp/kiln-storm-%d-b", (int)getpid());
	int fd = open(a, O_CREAT | O_WRONLY, 0600);
	if (fd < 0)
		_exit(3);
	close(fd);
	double end = harness_now_s() + limit_s;
	for (unsigned long n = 0; harness_now_s() < end; n++) {
		if (rename(n % 2 ? b : a, n % 2 ? a : b) != 0)
			break;
	}
	unlink(a);
	unlink(b);
	_exit(0);
}

/*
 * One entry of 2,000 headers in a directory under /tmp, and another user
 * renaming its own files in /tmp nonstop: every lookup is answered (and a
 * hit, nothing changed), and the longest wait is printed. Before, each
 * event scanned every tracked path and the loop read events until none
 * were left: no lookup was answered while the renames went on.
 */
START_TEST(event_storm_from_another_user_leaves_lookups_answered)
{
	char inc[HARNESS_PATH];
	struct oreq r;
	double wait, longest = 0, sum = 0;
	int n = 0;

	ck_assert_msg(strncmp(harness.dir, "/tmp/", 5) == 0, "the test directory %s is not "
		      "in /tmp", harness.dir);
	make_dir(inc, "inc");
	storm_program(&r, inc);
	harness_start(NULL);
	build_with_alias(&r, "storm-prog", 1);
	int fd = connect_with_deadline();
	ck_assert_int_eq(raw_lookup(fd, "storm-prog", 2, &wait), 1);

	pid_t storm = start_storm(60);
	harness_sleep_ms(500);
	for (double end = harness_now_s() + 8; harness_now_s() < end; n++) {
		ck_assert_msg(raw_lookup(fd, "storm-prog", 10 + n, &wait) == 1,
			      "lookup %d under the storm is no hit", n);
		sum += wait;
		if (wait > longest)
			longest = wait;
		harness_sleep_ms(5);
	}
	int alive = waitpid(storm, NULL, WNOHANG) == 0;
	stop_child(storm);
	ck_assert_msg(alive, "the storm ended before the lookups did");
	cJSON *st = harness_status();
	const cJSON *obs = cJSON_GetObjectItem(st, "observation");
	printf("event storm: %d lookups in 8 s, all hits, mean wait %.2f ms, longest %.2f ms; "
	       "%lld events read, %lld floods\n", n, sum / n * 1e3, longest * 1e3,
	       (long long)harness_num(obs, "events"), (long long)harness_num(obs, "event_floods"));
	cJSON_Delete(st);
	close(fd);
	oreq_free(&r);
	harness_stop();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("stalls");

	harness_add(s, "fifo_swap", dependency_swapped_for_a_fifo_between_stat_and_open, 120);
	harness_add(s, "not_a_file", dependency_replaced_by_what_is_not_a_file, 90);
	harness_add(s, "procfs_file", dependency_swapped_for_a_procfs_file, 90);
	harness_add(s, "large_changed", large_changed_dependency_hashed_off_the_loop, 90);
	harness_add(s, "event_storm", event_storm_from_another_user_leaves_lookups_answered, 180);
	return harness_main(s);
}
