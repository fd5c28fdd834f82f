/*
 * Integration tests of header and link input validation: a program that
 * includes "h.h" (or links a static library) is a hit while its inputs stay
 * as they are, and a miss that returns the new value as soon as they change,
 * however they change: through a symlinked header, a flipped release
 * symlink, one directory under two names, a rewrite that keeps size and
 * mtime, a header above 1 MiB, a replaced parent directory, or a rebuilt
 * static library.
 */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The program of every header test: it returns what h.h defines. */
static const char program_text[] =
	"#include \"h.h\"\n"
	"\n"
	"int kiln_test_value(void)\n"
	"{\n"
	"\treturn H_VALUE;\n"
	"}\n";

/* One request of a test, its argument and its source kept together. */
struct hreq {
	struct kiln_request req;
	struct kiln_source src;
	char arg[2][HARNESS_PATH + 4];
	const char *args[2];
	char *text;
};

/* A request for text with "-I<dir>". */
static void hreq_init(struct hreq *r, const char *text, const char *dir)
{
	memset(r, 0, sizeof(*r));
	r->text = strdup(text);
	ck_assert_ptr_nonnull(r->text);
	snprintf(r->arg[0], sizeof(r->arg[0]), "-I%s", dir);
	r->args[0] = r->arg[0];
	harness_request(&r->req, &r->src, "prog.c", r->text);
	r->req.args = r->args;
	r->req.nargs = 1;
}

static void hreq_free(struct hreq *r)
{
	free(r->text);
}

/* The content of h.h defining H_VALUE as value, padded with a comment of
 * pad bytes (so that two values can make files of the same size). */
static char *header_text(int value, size_t pad)
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
static void write_header(const char *path, int value)
{
	char *text = header_text(value, 0);

	harness_write_file(path, text);
	free(text);
}

/* Overwrites the file at path in place (the same inode, through symlinks),
 * as cp and most editors' "save in place" do. */
static void overwrite_in_place(const char *path, const char *text)
{
	size_t len = strlen(text);
	int fd = open(path, O_WRONLY | O_TRUNC);

	ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
	ck_assert_msg(write(fd, text, len) == (ssize_t)len, "write %s: %s", path, strerror(errno));
	ck_assert_int_eq(close(fd), 0);
}

static int64_t builds_started(void)
{
	cJSON *st = harness_status();
	int64_t n = harness_num(st, "builds_started");

	cJSON_Delete(st);
	return n;
}

/*
 * Gets r in a separate process (a fresh process-local table, so that every
 * request reaches the daemon), requires that it loads and returns value, and
 * that the daemon's builds_started is then builds: the same as before for a
 * hit, one more for a miss. what says which step of the test this is.
 */
static void expect(const struct hreq *r, int value, int64_t builds, const char *what)
{
	struct harness_result res = harness_in_child(&r->req, NULL);
	int64_t n;

	ck_assert_msg(res.rc == KILN_OK, "%s: get failed in %s with %s: %s", what, res.stage,
		      kiln_strerror(res.rc), res.msg);
	ck_assert_msg(res.value == value, "%s: the program returned %d, expected %d "
		      "(a stale artifact?)", what, res.value, value);
	n = builds_started();
	ck_assert_msg(n == builds, "%s: builds_started is %lld, expected %lld (%s)", what,
		      (long long)n, (long long)builds,
		      n < builds ? "a stale hit where a rebuild was due" : "a rebuild where a hit was due");
}

/* A symlinked header (inc/h.h -> ../real/h.h): editing its target counts. */
START_TEST(symlinked_header)
{
	char inc[HARNESS_PATH], dir[HARNESS_PATH], real[HARNESS_PATH], link[HARNESS_PATH];
	char *text;
	struct hreq r;

	ck_assert_int_eq(mkdir(harness_path(inc, "inc"), 0700), 0);
	ck_assert_int_eq(mkdir(harness_path(dir, "real"), 0700), 0);
	harness_path(real, "real/h.h");
	write_header(real, 1);
	ck_assert_int_eq(symlink("../real/h.h", harness_path(link, "inc/h.h")), 0);
	hreq_init(&r, program_text, inc);
	harness_start(NULL);

	expect(&r, 1, 1, "first request");
	expect(&r, 1, 1, "second request");

	/* Edited in place, the way an editor saves through the link. */
	text = header_text(22, 0);
	overwrite_in_place(real, text);
	free(text);
	expect(&r, 22, 2, "after editing the target in place");
	expect(&r, 22, 2, "again after editing the target in place");

	/* Replaced by a new file next to it (write and rename). */
	write_header(real, 333);
	expect(&r, 333, 3, "after replacing the target");
	expect(&r, 333, 3, "again after replacing the target");

	hreq_free(&r);
	harness_stop();
}
END_TEST

/* Points <dir>/current to target atomically: a new symlink renamed over it. */
static void flip_current(const char *target)
{
	char tmp[HARNESS_PATH], cur[HARNESS_PATH];

	harness_path(tmp, "current.new");
	unlink(tmp);
	ck_assert_int_eq(symlink(target, tmp), 0);
	ck_assert_msg(rename(tmp, harness_path(cur, "current")) == 0, "rename %s: %s", tmp,
		      strerror(errno));
}

/* -I<dir>/current/include, with current a symlink to a release directory
 * that is flipped to another release as deployments do. */
START_TEST(flipped_release_symlink)
{
	char path[HARNESS_PATH], v2h[HARNESS_PATH], inc[HARNESS_PATH];
	struct hreq r;

	ck_assert_int_eq(mkdir(harness_path(path, "v1"), 0700), 0);
	ck_assert_int_eq(mkdir(harness_path(path, "v1/include"), 0700), 0);
	ck_assert_int_eq(mkdir(harness_path(path, "v2"), 0700), 0);
	ck_assert_int_eq(mkdir(harness_path(path, "v2/include"), 0700), 0);
	write_header(harness_path(path, "v1/include/h.h"), 1);
	write_header(harness_path(v2h, "v2/include/h.h"), 22);
	flip_current("v1");
	hreq_init(&r, program_text, harness_path(inc, "current/include"));
	harness_start(NULL);

	expect(&r, 1, 1, "first request on v1");
	expect(&r, 1, 1, "second request on v1");

	flip_current("v2");
	expect(&r, 22, 2, "after flipping current to v2");
	expect(&r, 22, 2, "again after flipping current to v2");

	/* The new release's header is watched as well. */
	write_header(v2h, 333);
	expect(&r, 333, 3, "after editing v2's header");
	expect(&r, 333, 3, "again after editing v2's header");

	/* Back to v1: whether it rebuilds or finds the first artifact again,
	 * the program must be v1's. */
	flip_current("v1");
	{
		struct harness_result res = harness_in_child(&r.req, NULL);

		ck_assert_msg(res.rc == KILN_OK, "after flipping back to v1: %s: %s",
			      kiln_strerror(res.rc), res.msg);
		ck_assert_msg(res.value == 1, "after flipping back to v1 the program returned %d",
			      res.value);
	}

	hreq_free(&r);
	harness_stop();
}
END_TEST

/* One directory under two names (inc, and alias -> inc), used by two
 * programs: an edit must reach both. */
START_TEST(one_directory_two_names)
{
	char inc[HARNESS_PATH], alias[HARNESS_PATH], hdr[HARNESS_PATH];
	struct hreq a, b;
	char *text_b = NULL;

	ck_assert_int_eq(mkdir(harness_path(inc, "inc"), 0700), 0);
	ck_assert_int_eq(symlink("inc", harness_path(alias, "alias")), 0);
	write_header(harness_path(hdr, "inc/h.h"), 1);
	ck_assert(asprintf(&text_b, "/* Through the alias. */\n%s", program_text) > 0);
	hreq_init(&a, program_text, inc);
	hreq_init(&b, text_b, alias);
	harness_start(NULL);

	expect(&a, 1, 1, "first request through inc");
	expect(&b, 1, 2, "first request through alias");
	expect(&a, 1, 2, "second request through inc");
	expect(&b, 1, 2, "second request through alias");

	write_header(hdr, 22);
	expect(&a, 22, 3, "through inc after the edit");
	expect(&b, 22, 4, "through alias after the edit");
	expect(&a, 22, 4, "again through inc after the edit");
	expect(&b, 22, 4, "again through alias after the edit");

	/* Once more, the other one first. */
	write_header(hdr, 333);
	expect(&b, 333, 5, "through alias after the second edit");
	expect(&a, 333, 6, "through inc after the second edit");

	hreq_free(&a);
	hreq_free(&b);
	free(text_b);
	harness_stop();
}
END_TEST

/* Sets the access and modification times of path to those in st. */
static void restore_times(const char *path, const struct stat *st)
{
	struct timespec ts[2] = { st->st_atim, st->st_mtim };

	ck_assert_msg(utimensat(AT_FDCWD, path, ts, 0) == 0, "utimensat %s: %s", path,
		      strerror(errno));
}

/* Requires that path has the size and mtime in st. */
static void check_same_stat(const char *path, const struct stat *st)
{
	struct stat now;

	ck_assert_int_eq(stat(path, &now), 0);
	ck_assert_int_eq(now.st_size, st->st_size);
	ck_assert_int_eq(now.st_mtim.tv_sec, st->st_mtim.tv_sec);
	ck_assert_int_eq(now.st_mtim.tv_nsec, st->st_mtim.tv_nsec);
}

/* A rewrite with another content of the same size that keeps the mtime, as
 * cp -p (in place) and rsync -t (a new file renamed over) do. */
START_TEST(same_size_same_mtime_rewrite)
{
	char inc[HARNESS_PATH], hdr[HARNESS_PATH], tmp[HARNESS_PATH];
	struct stat st;
	char *text;
	struct hreq r;

	ck_assert_int_eq(mkdir(harness_path(inc, "inc"), 0700), 0);
	write_header(harness_path(hdr, "inc/h.h"), 11);
	hreq_init(&r, program_text, inc);
	harness_start(NULL);

	expect(&r, 11, 1, "first request");
	expect(&r, 11, 1, "second request");

	/* cp -p: truncate and write the same inode, then set the old times. */
	ck_assert_int_eq(stat(hdr, &st), 0);
	text = header_text(22, 0);
	overwrite_in_place(hdr, text);
	free(text);
	restore_times(hdr, &st);
	check_same_stat(hdr, &st);
	expect(&r, 22, 2, "after an in-place rewrite keeping size and mtime");
	expect(&r, 22, 2, "again after an in-place rewrite keeping size and mtime");

	/* rsync -t: a new file with the old times, renamed over the header. */
	ck_assert_int_eq(stat(hdr, &st), 0);
	text = header_text(33, 0);
	harness_path(tmp, "inc/.h.h.rsync");
	harness_write_file(tmp, text);
	free(text);
	restore_times(tmp, &st);
	ck_assert_int_eq(rename(tmp, hdr), 0);
	check_same_stat(hdr, &st);
	expect(&r, 33, 3, "after a rename-over keeping size and mtime");
	expect(&r, 33, 3, "again after a rename-over keeping size and mtime");

	hreq_free(&r);
	harness_stop();
}
END_TEST

/* A header above 1 MiB: unchanged, it is a hit; changed, a rebuild. */
START_TEST(large_header)
{
	char inc[HARNESS_PATH], hdr[HARNESS_PATH];
	char *text;
	struct hreq r;

	ck_assert_int_eq(mkdir(harness_path(inc, "inc"), 0700), 0);
	harness_path(hdr, "inc/h.h");
	text = header_text(1, (size_t)3 << 19);
	harness_write_file(hdr, text);
	free(text);
	hreq_init(&r, program_text, inc);
	harness_start(NULL);

	expect(&r, 1, 1, "first request");
	expect(&r, 1, 1, "second request of an unchanged large header");
	expect(&r, 1, 1, "third request of an unchanged large header");

	/* A different size. */
	text = header_text(22, ((size_t)3 << 19) + 100);
	harness_write_file(hdr, text);
	free(text);
	expect(&r, 22, 2, "after changing the large header");
	expect(&r, 22, 2, "again after changing the large header");

	hreq_free(&r);
	harness_stop();
}
END_TEST

/* The header's directory tree is moved away and a fresh one created under
 * the same name: the new file counts, and so do later edits of it. */
START_TEST(replaced_parent_directory)
{
	char path[HARNESS_PATH], old[HARNESS_PATH], inc[HARNESS_PATH], hdr[HARNESS_PATH];
	struct hreq r;

	ck_assert_int_eq(mkdir(harness_path(path, "a"), 0700), 0);
	ck_assert_int_eq(mkdir(harness_path(inc, "a/inc"), 0700), 0);
	write_header(harness_path(hdr, "a/inc/h.h"), 1);
	hreq_init(&r, program_text, inc);
	harness_start(NULL);

	expect(&r, 1, 1, "first request");
	expect(&r, 1, 1, "second request");

	ck_assert_int_eq(rename(path, harness_path(old, "old")), 0);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	ck_assert_int_eq(mkdir(inc, 0700), 0);
	write_header(hdr, 22);
	expect(&r, 22, 2, "after replacing the directory a");
	expect(&r, 22, 2, "again after replacing the directory a");

	write_header(hdr, 333);
	expect(&r, 333, 3, "after editing the header in the new directory");
	expect(&r, 333, 3, "again after editing the header in the new directory");

	hreq_free(&r);
	harness_stop();
}
END_TEST

/* Compiles <dir>/x.c into <dir>/libx.a (replacing it). */
static void build_static_lib(const char *x_text)
{
	char xc[HARNESS_PATH], xo[HARNESS_PATH], lib[HARNESS_PATH], err[HARNESS_PATH];
	const char *cc[] = { "/usr/bin/cc", "-c", "-fPIC", "-O2", "-o", xo, xc, NULL };
	const char *ar[] = { "/usr/bin/ar", "rcs", lib, xo, NULL };
	int status;

	harness_path(xc, "x.c");
	harness_path(xo, "x.o");
	harness_path(lib, "libx.a");
	harness_path(err, "ar-cc.err");
	harness_write_file(xc, x_text);
	status = harness_run(cc, err, err, 60);
	ck_assert_msg(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "cc -c x.c failed (status 0x%x)", status);
	unlink(lib);
	status = harness_run(ar, err, err, 60);
	ck_assert_msg(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "ar rcs libx.a failed (status 0x%x)", status);
}

/* A static library linked with -L<dir> -lx is an input like a header. */
START_TEST(static_library_input)
{
	static const char prog[] =
		"int x(void);\n"
		"\n"
		"int kiln_test_value(void)\n"
		"{\n"
		"\treturn x();\n"
		"}\n";
	char larg[HARNESS_PATH + 4], lib[HARNESS_PATH];
	const char *args[2] = { larg, "-lx" };
	struct kiln_request req;
	struct kiln_source src;
	struct harness_result res;
	struct stat before, after;
	int64_t n;

	build_static_lib("int x(void)\n{\n\treturn 1;\n}\n");
	ck_assert_int_eq(stat(harness_path(lib, "libx.a"), &before), 0);
	snprintf(larg, sizeof(larg), "-L%s", harness.dir);
	harness_request(&req, &src, "prog.c", prog);
	req.args = args;
	req.nargs = 2;
	harness_start(NULL);

	for (int i = 0; i < 2; i++) {
		res = harness_in_child(&req, NULL);
		ck_assert_msg(res.rc == KILN_OK, "request %d: %s: %s", i + 1, kiln_strerror(res.rc),
			      res.msg);
		ck_assert_int_eq(res.value, 1);
		ck_assert_int_eq(builds_started(), 1);
	}

	/* Another function too, so that the archive's size changes for sure. */
	build_static_lib("int x(void)\n{\n\treturn 22;\n}\n\nint x_more(void)\n{\n\treturn 7;\n}\n");
	ck_assert_int_eq(stat(lib, &after), 0);
	ck_assert_int_ne(after.st_size, before.st_size);

	res = harness_in_child(&req, NULL);
	ck_assert_msg(res.rc == KILN_OK, "after rebuilding libx.a: %s: %s", kiln_strerror(res.rc),
		      res.msg);
	n = builds_started();
	ck_assert_msg(res.value == 22 && n == 2, "after rebuilding libx.a the program returned %d "
		      "with builds_started %lld: the old artifact was served", res.value, (long long)n);
	res = harness_in_child(&req, NULL);
	ck_assert_msg(res.rc == KILN_OK, "again after rebuilding libx.a: %s: %s",
		      kiln_strerror(res.rc), res.msg);
	ck_assert_int_eq(res.value, 22);
	ck_assert_int_eq(builds_started(), 2);
	harness_stop();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("headers");

	suite_add_tcase(s, harness_tcase("symlinked_header", symlinked_header, 90));
	suite_add_tcase(s, harness_tcase("flipped_release", flipped_release_symlink, 90));
	suite_add_tcase(s, harness_tcase("two_names", one_directory_two_names, 90));
	suite_add_tcase(s, harness_tcase("same_size_mtime", same_size_same_mtime_rewrite, 90));
	suite_add_tcase(s, harness_tcase("large_header", large_header, 90));
	suite_add_tcase(s, harness_tcase("replaced_parent", replaced_parent_directory, 90));
	suite_add_tcase(s, harness_tcase("static_library", static_library_input, 90));
	return harness_main(s);
}
