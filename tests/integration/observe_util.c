/*
 * The helpers of observe_util.h.
 */
#include "observe_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The program of most tests: it returns what h.h defines. */
const char program_text[] =
	"#include \"h.h\"\n"
	"\n"
	"int kiln_test_value(void)\n"
	"{\n"
	"\treturn H_VALUE;\n"
	"}\n";


/* A request for text (copied) with no arguments yet. */
void oreq_init(struct oreq *r, const char *text)
{
	memset(r, 0, sizeof(*r));
	r->text = strdup(text);
	ck_assert_ptr_nonnull(r->text);
	harness_request(&r->req, &r->src, "prog.c", r->text);
	r->req.args = r->args;
}

/* Appends one compiler argument to r. */
void oreq_arg(struct oreq *r, const char *fmt, ...)
{
	size_t n = r->req.nargs;
	va_list ap;
	int len;

	ck_assert(n < OREQ_ARGS);
	va_start(ap, fmt);
	len = vsnprintf(r->arg[n], sizeof(r->arg[n]), fmt, ap);
	va_end(ap);
	ck_assert(len > 0 && (size_t)len < sizeof(r->arg[n]));
	r->args[n] = r->arg[n];
	r->req.nargs = n + 1;
}

void oreq_free(struct oreq *r)
{
	free(r->text);
}

/* The content of h.h defining H_VALUE as value, padded with a comment of
 * pad bytes; one-digit values give files of the same size. */
char *header_text(int value, size_t pad)
{
	char *text = NULL;
	char *fill = malloc(pad + 1);

	ck_assert_ptr_nonnull(fill);
	memset(fill, 'x', pad);
	fill[pad] = '\0';
	ck_assert(asprintf(&text, "/* %s */\n#define H_VALUE %d\n", fill, value) > 0);
	free(fill);
	return text;
}

/* Writes h.h for value at path, replacing the file (a new inode). */
void write_header(const char *path, int value)
{
	char *text = header_text(value, 0);

	harness_write_file(path, text);
	free(text);
}

/* The value the header at path defines now. */
int header_value(const char *path)
{
	char *text = harness_read_file(path);
	const char *at = text ? strstr(text, "H_VALUE ") : NULL;
	int value = 0;

	ck_assert_msg(at != NULL && sscanf(at + 8, "%d", &value) == 1,
		      "%s defines no H_VALUE", path);
	free(text);
	return value;
}

/* Creates the directory <dir>/<rel>; its path goes to buf. */
char *make_dir(char *buf, const char *rel)
{
	harness_path(buf, "%s", rel);
	ck_assert_msg(mkdir(buf, 0700) == 0, "mkdir %s: %s", buf, strerror(errno));
	return buf;
}

/* Writes an executable script (a toolchain wrapper, an assembler). */
void write_script(const char *path, const char *text)
{
	harness_write_file(path, text);
	ck_assert_int_eq(chmod(path, 0755), 0);
}

/* Runs argv, failing the test unless it exits with status 0. */
void run_ok(const char *const *argv)
{
	char err[HARNESS_PATH];
	int status = harness_run(argv, harness_path(err, "run.err"), NULL, 60);

	ck_assert_msg(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "%s failed (status 0x%x)", argv[0], status);
}

/* Polls until path exists; the deadline only ends a test that would hang. */
void wait_for_file(const char *path, double timeout_s, const char *what)
{
	double end = harness_now_s() + timeout_s;

	while (!harness_exists(path)) {
		ck_assert_msg(harness_now_s() < end, "%s never happened (no %s after %.0f s)", what,
			      path, timeout_s);
		harness_sleep_ms(20);
	}
}

/* Sets the access and modification times of path to those in st. */
void restore_times(const char *path, const struct stat *st)
{
	struct timespec ts[2] = { st->st_atim, st->st_mtim };

	ck_assert_msg(utimensat(AT_FDCWD, path, ts, 0) == 0, "utimensat %s: %s", path,
		      strerror(errno));
}

/* Requires that path has the size and modification time in st. */
void check_same_stat(const char *path, const struct stat *st)
{
	struct stat now;

	ck_assert_int_eq(stat(path, &now), 0);
	ck_assert_int_eq(now.st_size, st->st_size);
	ck_assert_int_eq(now.st_mtim.tv_sec, st->st_mtim.tv_sec);
	ck_assert_int_eq(now.st_mtim.tv_nsec, st->st_mtim.tv_nsec);
}

/* Overwrites the file at path in place (the same inode) with text. */
void overwrite_in_place(const char *path, const char *text, int flags)
{
	size_t len = strlen(text);
	int fd = open(path, O_WRONLY | flags);

	ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
	ck_assert_msg(write(fd, text, len) == (ssize_t)len, "write %s: %s", path, strerror(errno));
	ck_assert_int_eq(close(fd), 0);
}

int64_t builds_started(void)
{
	cJSON *st = harness_status();
	int64_t n = harness_num(st, "builds_started");

	cJSON_Delete(st);
	return n;
}

/* Requires that a result is a loaded program returning value. */
void check_result(const struct harness_result *res, int value, const char *what)
{
	ck_assert_msg(res->rc == KILN_OK, "%s: get failed in %s with %s: %s", what, res->stage,
		      kiln_strerror(res->rc), res->msg);
	ck_assert_msg(res->value == value, "%s: the program returned %d, expected %d "
		      "(an artifact built from the old input)", what, res->value, value);
}

/*
 * Gets r in a separate process (a fresh process-local table, so that every
 * request reaches the daemon), requires that it loads and returns value, and
 * that the daemon's builds_started is then builds: the same as before for a
 * hit, one more for a miss. what says which step of the test this is.
 */
void expect(const struct oreq *r, int value, int64_t builds, const char *what)
{
	struct harness_result res = harness_in_child(&r->req, NULL);
	int64_t n;

	check_result(&res, value, what);
	n = builds_started();
	ck_assert_msg(n == builds, "%s: builds_started is %lld, expected %lld (%s)", what,
		      (long long)n, (long long)builds,
		      n < builds ? "a stale hit where a rebuild was due" : "a rebuild where a hit was due");
}

void expect_twice(const struct oreq *r, int value, int64_t builds, const char *what)
{
	char again[256];

	expect(r, value, builds, what);
	snprintf(again, sizeof(again), "%s, asked again", what);
	expect(r, value, builds, again);
}

void oreq_program(struct oreq *r, const char *inc)
{
	oreq_init(r, program_text);
	oreq_arg(r, "-I%s", inc);
}

void start_and_build(const struct oreq *r)
{
	harness_start(NULL);
	expect_twice(r, 1, 1, "first request");
}

void header_change_counts(struct oreq *r, const char *hdr)
{
	write_header(hdr, 2);
	expect_twice(r, 2, 2, "after changing h.h");
	oreq_free(r);
	harness_stop();
}

/* As expect(), for a step where a rebuild and a reuse are both right. */
void expect_value(const struct oreq *r, int value, const char *what)
{
	struct harness_result res = harness_in_child(&r->req, NULL);

	check_result(&res, value, what);
}

/* Starts kilnd with wrapper as its "cc" toolchain; buf (len bytes) holds
 * the argument. */
void start_with_wrapper(const char *wrapper, char *buf, size_t len)
{
	snprintf(buf, len, "cc=%s", wrapper);
	harness_start("--toolchain", buf, NULL);
}