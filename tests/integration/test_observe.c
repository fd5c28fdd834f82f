/*
 * Integration tests of what a build observed: every input that went into an
 * artifact must be seen as an input, so that a change to it is never
 * answered with the artifact built from the old content. Each test changes
 * one input in a way the dependency files, the header watches or the
 * toolchain's identity may miss, then requires the new value:
 *
 *   - a header replaced while the compiler ran, or on every compile;
 *   - inputs outside the dependency file: a source named in the arguments,
 *     an assembler .incbin, a relative include leaving the build directory;
 *   - inputs that were looked for and not found: a header or a library that
 *     now shadows the one found in a later directory, __has_include;
 *   - changes the watches do not see: a write through another hard link,
 *     through a shared mapping, a mount over the include directory, a large
 *     header rewritten while kilnd was down with size and times kept;
 *   - the assembler found through PATH, which belongs to the toolchain;
 *   - an alias that must follow the last get, however the pool orders jobs;
 *   - put requests whose claims the importing node must not take on trust.
 *
 * Mounting needs root: without it the mount test is left out, saying why.
 */
#include "harness.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "key.h"
#include "kiln_x.h"
#include "util.h"

#define OREQ_ARGS 4
/* How many "../" reach / from any directory the build may run in. */
#define UP_LEVELS 24

/* The program of most tests: it returns what h.h defines. */
static const char program_text[] =
	"#include \"h.h\"\n"
	"\n"
	"int kiln_test_value(void)\n"
	"{\n"
	"\treturn H_VALUE;\n"
	"}\n";

/* One request of a test: its arguments and its source kept together. */
struct oreq {
	struct kiln_request req;
	struct kiln_source src;
	char arg[OREQ_ARGS][HARNESS_PATH + 128];
	const char *args[OREQ_ARGS];
	char *text;
};

/* A request for text (copied) with no arguments yet. */
static void oreq_init(struct oreq *r, const char *text)
{
	memset(r, 0, sizeof(*r));
	r->text = strdup(text);
	ck_assert_ptr_nonnull(r->text);
	harness_request(&r->req, &r->src, "prog.c", r->text);
	r->req.args = r->args;
}

/* Appends one compiler argument to r. */
static void oreq_arg(struct oreq *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void oreq_arg(struct oreq *r, const char *fmt, ...)
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

static void oreq_free(struct oreq *r)
{
	free(r->text);
}

/* The content of h.h defining H_VALUE as value, padded with a comment of
 * pad bytes; one-digit values give files of the same size. */
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

/* The value the header at path defines now. */
static int header_value(const char *path)
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
static char *make_dir(char *buf, const char *rel)
{
	harness_path(buf, "%s", rel);
	ck_assert_msg(mkdir(buf, 0700) == 0, "mkdir %s: %s", buf, strerror(errno));
	return buf;
}

/* Writes an executable script (a toolchain wrapper, an assembler). */
static void write_script(const char *path, const char *text)
{
	harness_write_file(path, text);
	ck_assert_int_eq(chmod(path, 0755), 0);
}

/* Runs argv, failing the test unless it exits with status 0. */
static void run_ok(const char *const *argv)
{
	char err[HARNESS_PATH];
	int status = harness_run(argv, harness_path(err, "run.err"), NULL, 60);

	ck_assert_msg(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "%s failed (status 0x%x)", argv[0], status);
}

/* Polls until path exists; the deadline only ends a test that would hang. */
static void wait_for_file(const char *path, double timeout_s, const char *what)
{
	double end = harness_now_s() + timeout_s;

	while (!harness_exists(path)) {
		ck_assert_msg(harness_now_s() < end, "%s never happened (no %s after %.0f s)", what,
			      path, timeout_s);
		harness_sleep_ms(20);
	}
}

/* Sets the access and modification times of path to those in st. */
static void restore_times(const char *path, const struct stat *st)
{
	struct timespec ts[2] = { st->st_atim, st->st_mtim };

	ck_assert_msg(utimensat(AT_FDCWD, path, ts, 0) == 0, "utimensat %s: %s", path,
		      strerror(errno));
}

/* Requires that path has the size and modification time in st. */
static void check_same_stat(const char *path, const struct stat *st)
{
	struct stat now;

	ck_assert_int_eq(stat(path, &now), 0);
	ck_assert_int_eq(now.st_size, st->st_size);
	ck_assert_int_eq(now.st_mtim.tv_sec, st->st_mtim.tv_sec);
	ck_assert_int_eq(now.st_mtim.tv_nsec, st->st_mtim.tv_nsec);
}

/* Overwrites the file at path in place (the same inode) with text. */
static void overwrite_in_place(const char *path, const char *text, int flags)
{
	size_t len = strlen(text);
	int fd = open(path, O_WRONLY | flags);

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

/* Requires that a result is a loaded program returning value. */
static void check_result(const struct harness_result *res, int value, const char *what)
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
static void expect(const struct oreq *r, int value, int64_t builds, const char *what)
{
	struct harness_result res = harness_in_child(&r->req, NULL);
	int64_t n;

	check_result(&res, value, what);
	n = builds_started();
	ck_assert_msg(n == builds, "%s: builds_started is %lld, expected %lld (%s)", what,
		      (long long)n, (long long)builds,
		      n < builds ? "a stale hit where a rebuild was due" : "a rebuild where a hit was due");
}

/* As expect(), for a step where a rebuild and a reuse are both right. */
static void expect_value(const struct oreq *r, int value, const char *what)
{
	struct harness_result res = harness_in_child(&r->req, NULL);

	check_result(&res, value, what);
}

/* Starts kilnd with wrapper as its "cc" toolchain; buf (len bytes) holds
 * the argument. */
static void start_with_wrapper(const char *wrapper, char *buf, size_t len)
{
	snprintf(buf, len, "cc=%s", wrapper);
	harness_start("--toolchain", buf, NULL);
}

/*
 * A toolchain wrapper that runs the compiler and then, after its first run
 * that writes an output, creates compiled and waits (at most about 60 s)
 * until gate exists: the compiler has read its inputs, the build has not
 * finished. Later runs and version probes go straight through.
 */
static void write_pausing_wrapper(const char *path, const char *first, const char *compiled,
				  const char *gate)
{
	char *text = NULL;

	ck_assert(asprintf(&text,
		"#!/bin/sh\n"
		"# Written by it_observe: pauses the first build after its compiler ran.\n"
		"/usr/bin/cc \"$@\" || exit $?\n"
		"build=0\n"
		"for a in \"$@\"; do\n"
		"\tcase \"$a\" in -o|-o?*) build=1 ;; esac\n"
		"done\n"
		"[ $build = 1 ] || exit 0\n"
		"[ -e '%s' ] && exit 0\n"
		": > '%s'\n"
		": > '%s'\n"
		"# The gate is the test's, not an input: kiln-observe.so leaves it out\n"
		"# of the record of the shell that waits for it.\n"
		"KILN_OBSERVE_IGNORE='%s' sh -c 'i=0; while [ ! -e \"$1\" ] && [ $i -lt 1200 ]; do "
		"sleep 0.05; i=$((i + 1)); done' sh '%s'\n"
		"exit 0\n",
		first, first, compiled, gate, gate) > 0);
	write_script(path, text);
	free(text);
}

/* Replaces the header at path with one for value whose mtime is an hour in
 * the past (older than the build), renamed over it. */
static void replace_with_old_mtime(const char *path, int value)
{
	char tmp[HARNESS_PATH + 8];
	char *text = header_text(value, 0);
	struct timespec ts[2];

	snprintf(tmp, sizeof(tmp), "%s.new", path);
	harness_write_file(tmp, text);
	free(text);
	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= 3600;
	ts[1] = ts[0];
	ck_assert_msg(utimensat(AT_FDCWD, tmp, ts, 0) == 0, "utimensat %s: %s", tmp,
		      strerror(errno));
	ck_assert_msg(rename(tmp, path) == 0, "rename %s: %s", tmp, strerror(errno));
}

/* h.h is replaced after the compiler read it and before the build ended, by
 * a file whose mtime is older than the build: the artifact holds the old
 * value, so it must not be served for the new header. */
START_TEST(input_replaced_during_build)
{
	char inc[HARNESS_PATH], hdr[HARNESS_PATH], wrapper[HARNESS_PATH], tc[HARNESS_PATH + 8];
	char first[HARNESS_PATH], compiled[HARNESS_PATH], gate[HARNESS_PATH];
	struct harness_fleet *f;
	struct oreq r;

	make_dir(inc, "inc");
	write_header(harness_path(hdr, "inc/h.h"), 1);
	write_pausing_wrapper(harness_path(wrapper, "cc-wrapper"), harness_path(first, "first-run"),
			      harness_path(compiled, "compiled"), harness_path(gate, "gate"));
	oreq_init(&r, program_text);
	oreq_arg(&r, "-I%s", inc);
	start_with_wrapper(wrapper, tc, sizeof(tc));

	/* The client waits in the background while the build is held. */
	f = harness_fleet_start(1, &(struct harness_fleet_opts){
		.socket = harness.socket, .reqs = &r.req, .nreqs = 1 });
	wait_for_file(compiled, 60, "the first compile");
	replace_with_old_mtime(hdr, 2);
	harness_write_file(gate, "");
	harness_fleet_wait(f, 120);
	check_result(&f->results[0], 2, "the request whose build saw h.h replaced");
	harness_fleet_free(f);

	expect(&r, 2, 2, "a second request in a fresh connection");
	oreq_free(&r);
	harness_stop();
}
END_TEST

/*
 * A toolchain wrapper that, after each run that writes an output, replaces
 * hdr with the next value (a new file renamed over it), counting in counter,
 * until stop exists.
 */
static void write_changing_wrapper(const char *path, const char *hdr, const char *counter,
				   const char *stop)
{
	char *text = NULL;

	ck_assert(asprintf(&text,
		"#!/bin/sh\n"
		"# Written by it_observe: changes h.h after every compile.\n"
		"/usr/bin/cc \"$@\" || exit $?\n"
		"build=0\n"
		"for a in \"$@\"; do\n"
		"\tcase \"$a\" in -o|-o?*) build=1 ;; esac\n"
		"done\n"
		"[ $build = 1 ] || exit 0\n"
		"[ -e '%s' ] && exit 0\n"
		"n=$(($(cat '%s') + 1))\n"
		"echo $n > '%s'\n"
		"printf '#define H_VALUE %%d\\n' $n > '%s.new'\n"
		"mv -f '%s.new' '%s'\n",
		stop, counter, counter, hdr, hdr, hdr) > 0);
	write_script(path, text);
	free(text);
}

/* Every compile changes h.h: no build ever saw one consistent input, so the
 * get fails saying so, and once the changes stop the current header counts. */
START_TEST(input_changing_on_every_build_is_an_error)
{
	char inc[HARNESS_PATH], hdr[HARNESS_PATH], wrapper[HARNESS_PATH], tc[HARNESS_PATH + 8];
	char counter[HARNESS_PATH], stop[HARNESS_PATH];
	struct harness_result res;
	struct oreq r;
	int now;

	make_dir(inc, "inc");
	write_header(harness_path(hdr, "inc/h.h"), 1);
	harness_write_file(harness_path(counter, "counter"), "1\n");
	write_changing_wrapper(harness_path(wrapper, "cc-wrapper"), hdr, counter,
			       harness_path(stop, "stop"));
	oreq_init(&r, program_text);
	oreq_arg(&r, "-I%s", inc);
	start_with_wrapper(wrapper, tc, sizeof(tc));

	res = harness_in_child(&r.req, NULL);
	ck_assert_msg(res.rc != KILN_OK, "the get succeeded with value %d although h.h (now %d) "
		      "changed during every build", res.value, header_value(hdr));
	ck_assert_msg(harness_contains(res.msg, "changed"),
		      "the error does not say that the inputs changed: %s", res.msg);

	/* The changes stop: whatever was built before must not be served. */
	harness_write_file(stop, "");
	now = header_value(hdr);
	expect_value(&r, now, "after the changes stopped");
	expect_value(&r, now, "again after the changes stopped");
	oreq_free(&r);
	harness_stop();
}
END_TEST

/* The source of extra_value() returning value, at path. */
static void write_extra(const char *path, int value)
{
	char *text = NULL;

	ck_assert(asprintf(&text, "int extra_value(void)\n{\n\treturn %d;\n}\n", value) > 0);
	harness_write_file(path, text);
	free(text);
}

/* A second C file named by its absolute path in the arguments is compiled
 * into the artifact: it is an input like the request's own source. */
START_TEST(source_path_in_arguments)
{
	static const char prog[] =
		"int extra_value(void);\n"
		"\n"
		"int kiln_test_value(void)\n"
		"{\n"
		"\treturn extra_value();\n"
		"}\n";
	char lib[HARNESS_PATH], extra[HARNESS_PATH];
	struct oreq r;

	make_dir(lib, "lib");
	write_extra(harness_path(extra, "lib/extra.c"), 1);
	oreq_init(&r, prog);
	oreq_arg(&r, "%s", extra);
	harness_start(NULL);

	expect(&r, 1, 1, "first request");
	expect(&r, 1, 1, "second request");
	write_extra(extra, 2);
	expect(&r, 2, 2, "after changing extra.c");
	expect(&r, 2, 2, "again after changing extra.c");
	oreq_free(&r);
	harness_stop();
}
END_TEST

/* The assembler includes data.bin (.incbin) into .rodata: its bytes are in
 * the artifact, so it is an input although no dependency file names it. */
START_TEST(assembler_incbin_input)
{
	static const char fmt[] =
		"/* The bytes of data.bin, placed by the assembler. */\n"
		"__asm__(\".section .rodata\\n\"\n"
		"\t\".globl kiln_blob\\n\"\n"
		"\t\"kiln_blob:\\n\"\n"
		"\t\".incbin \\\"%s\\\"\\n\"\n"
		"\t\".previous\\n\");\n"
		"\n"
		"extern const char kiln_blob[];\n"
		"\n"
		"int kiln_test_value(void)\n"
		"{\n"
		"\treturn kiln_blob[0] - '0';\n"
		"}\n";
	char data[HARNESS_PATH];
	char *text = NULL;
	struct oreq r;

	harness_write_file(harness_path(data, "data.bin"), "1");
	ck_assert(asprintf(&text, fmt, data) > 0);
	oreq_init(&r, text);
	free(text);
	harness_start(NULL);

	expect(&r, 1, 1, "first request");
	expect(&r, 1, 1, "second request");
	harness_write_file(data, "2");
	expect(&r, 2, 2, "after changing data.bin");
	expect(&r, 2, 2, "again after changing data.bin");
	oreq_free(&r);
	harness_stop();
}
END_TEST

/* -I<a> -I<b> with h.h only in b: an h.h created in a is found first from
 * then on, so the absence of a/h.h was an input of the build. */
START_TEST(header_shadowing_an_earlier_include_dir)
{
	char a[HARNESS_PATH], b[HARNESS_PATH], path[HARNESS_PATH];
	struct oreq r;

	make_dir(a, "a");
	make_dir(b, "b");
	write_header(harness_path(path, "b/h.h"), 1);
	oreq_init(&r, program_text);
	oreq_arg(&r, "-I%s", a);
	oreq_arg(&r, "-I%s", b);
	harness_start(NULL);

	expect(&r, 1, 1, "first request");
	expect(&r, 1, 1, "second request");
	write_header(harness_path(path, "a/h.h"), 2);
	expect(&r, 2, 2, "after creating a/h.h");
	expect(&r, 2, 2, "again after creating a/h.h");
	oreq_free(&r);
	harness_stop();
}
END_TEST

/* __has_include("opt.h") was false at the build; once opt.h exists the
 * program means something else. */
START_TEST(has_include_absent_then_present)
{
	static const char prog[] =
		"#if __has_include(\"opt.h\")\n"
		"#include \"opt.h\"\n"
		"#else\n"
		"#define OPT_VALUE 1\n"
		"#endif\n"
		"\n"
		"int kiln_test_value(void)\n"
		"{\n"
		"\treturn OPT_VALUE;\n"
		"}\n";
	char dir[HARNESS_PATH], path[HARNESS_PATH];
	struct oreq r;

	make_dir(dir, "opt");
	oreq_init(&r, prog);
	oreq_arg(&r, "-I%s", dir);
	harness_start(NULL);

	expect(&r, 1, 1, "first request without opt.h");
	expect(&r, 1, 1, "second request without opt.h");
	harness_write_file(harness_path(path, "opt/opt.h"), "#define OPT_VALUE 2\n");
	expect(&r, 2, 2, "after creating opt.h");
	expect(&r, 2, 2, "again after creating opt.h");
	oreq_free(&r);
	harness_stop();
}
END_TEST

/* Builds <dir>/libfoo.a whose foo() returns value. */
static void build_libfoo(const char *dir, int value)
{
	char c[HARNESS_PATH], o[HARNESS_PATH], lib[HARNESS_PATH];
	const char *cc[] = { "/usr/bin/cc", "-c", "-fPIC", "-O2", "-o", o, c, NULL };
	const char *ar[] = { "/usr/bin/ar", "rcs", lib, o, NULL };
	char *text = NULL;

	snprintf(c, sizeof(c), "%.400s/foo.c", dir);
	snprintf(o, sizeof(o), "%.400s/foo.o", dir);
	snprintf(lib, sizeof(lib), "%.400s/libfoo.a", dir);
	ck_assert(asprintf(&text, "int foo(void)\n{\n\treturn %d;\n}\n", value) > 0);
	harness_write_file(c, text);
	free(text);
	run_ok(cc);
	run_ok(ar);
}

/* -L<a> -L<b> -lfoo with libfoo.a only in b: a libfoo.a put into a is the
 * one the linker takes from then on. */
START_TEST(library_shadowing_an_earlier_library_dir)
{
	static const char prog[] =
		"int foo(void);\n"
		"\n"
		"int kiln_test_value(void)\n"
		"{\n"
		"\treturn foo();\n"
		"}\n";
	char a[HARNESS_PATH], b[HARNESS_PATH];
	struct oreq r;

	make_dir(a, "a");
	make_dir(b, "b");
	build_libfoo(b, 1);
	oreq_init(&r, prog);
	oreq_arg(&r, "-L%s", a);
	oreq_arg(&r, "-L%s", b);
	oreq_arg(&r, "-lfoo");
	harness_start(NULL);

	expect(&r, 1, 1, "first request");
	expect(&r, 1, 1, "second request");
	build_libfoo(a, 2);
	expect(&r, 2, 2, "after putting libfoo.a into the earlier directory");
	expect(&r, 2, 2, "again after putting libfoo.a into the earlier directory");
	oreq_free(&r);
	harness_stop();
}
END_TEST

/* inc/h.h is a hard link of other/h.h, which is rewritten in place (same
 * size, old times restored) through the other name. */
START_TEST(hard_link_rewritten_elsewhere)
{
	char inc[HARNESS_PATH], other[HARNESS_PATH], hdr[HARNESS_PATH], link_path[HARNESS_PATH];
	struct stat st;
	struct oreq r;
	char *text;

	make_dir(inc, "inc");
	make_dir(other, "other");
	write_header(harness_path(hdr, "other/h.h"), 1);
	ck_assert_int_eq(link(hdr, harness_path(link_path, "inc/h.h")), 0);
	oreq_init(&r, program_text);
	oreq_arg(&r, "-I%s", inc);
	harness_start(NULL);

	expect(&r, 1, 1, "first request");
	expect(&r, 1, 1, "second request");

	ck_assert_int_eq(stat(hdr, &st), 0);
	text = header_text(2, 0);
	ck_assert_int_eq(strlen(text), st.st_size);
	overwrite_in_place(hdr, text, 0);
	free(text);
	restore_times(hdr, &st);
	check_same_stat(link_path, &st);
	ck_assert_int_eq(header_value(link_path), 2);
	expect(&r, 2, 2, "after rewriting the other name of h.h");
	expect(&r, 2, 2, "again after rewriting the other name of h.h");
	oreq_free(&r);
	harness_stop();
}
END_TEST

/*
 * h.h changed through a shared writable mapping: no write() call, and no
 * close either while the mapping lasts (it holds the file open, so its
 * descriptor's close(), before the change, tells of nothing). A program that
 * keeps a file mapped changes it this way.
 */
START_TEST(write_through_shared_mapping)
{
	char inc[HARNESS_PATH], hdr[HARNESS_PATH];
	struct stat st;
	struct oreq r;
	char *map, *digit;
	int fd;

	make_dir(inc, "inc");
	write_header(harness_path(hdr, "inc/h.h"), 1);
	/* A user's header: kilnd trusts events for the content of files only
	 * root can write (no mapping writes there); run as root, the test
	 * hands the header to another user to be one. */
	if (geteuid() == 0)
		ck_assert_int_eq(chown(hdr, 65534, 65534), 0);
	oreq_init(&r, program_text);
	oreq_arg(&r, "-I%s", inc);
	harness_start(NULL);

	expect(&r, 1, 1, "first request");
	expect(&r, 1, 1, "second request");

	fd = open(hdr, O_RDWR);
	ck_assert_msg(fd >= 0, "open %s: %s", hdr, strerror(errno));
	ck_assert_int_eq(fstat(fd, &st), 0);
	map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert_msg(map != MAP_FAILED, "mmap %s: %s", hdr, strerror(errno));
	ck_assert_int_eq(close(fd), 0);
	expect(&r, 1, 1, "with h.h mapped, before the change");

	digit = memmem(map, (size_t)st.st_size, "H_VALUE 1", 9);
	ck_assert_ptr_nonnull(digit);
	digit[8] = '2';
	ck_assert_int_eq(msync(map, (size_t)st.st_size, MS_SYNC), 0);
	ck_assert_int_eq(header_value(hdr), 2);
	expect(&r, 2, 2, "after changing h.h through the mapping, still mapped");

	ck_assert_int_eq(munmap(map, (size_t)st.st_size), 0);
	expect(&r, 2, 2, "after unmapping h.h");
	oreq_free(&r);
	harness_stop();
}
END_TEST

/* The include directory of the mount test; the teardown needs it too. */
static char *mounted_dir(char buf[HARNESS_PATH])
{
	return harness_path(buf, "inc");
}

/* Runs in the parent after the mount test, before the directory is
 * removed: a mount left by a failed test would stop the removal. */
static void unmount_teardown(void)
{
	char dir[HARNESS_PATH];

	umount2(mounted_dir(dir), MNT_DETACH);
}

/* A tmpfs mounted over the include directory brings another h.h; the
 * original comes back when it is unmounted. */
START_TEST(mount_over_include_dir)
{
	char inc[HARNESS_PATH], hdr[HARNESS_PATH];
	struct oreq r;

	ck_assert_int_eq(mkdir(mounted_dir(inc), 0700), 0);
	write_header(harness_path(hdr, "inc/h.h"), 1);
	oreq_init(&r, program_text);
	oreq_arg(&r, "-I%s", inc);
	harness_start(NULL);

	expect(&r, 1, 1, "first request");
	expect(&r, 1, 1, "second request");
	ck_assert_msg(mount("tmpfs", inc, "tmpfs", 0, "size=1m,mode=0700") == 0,
		      "mount tmpfs on %s: %s", inc, strerror(errno));
	write_header(hdr, 2);
	expect(&r, 2, 2, "with a tmpfs mounted over the include directory");
	expect(&r, 2, 2, "again with a tmpfs mounted over the include directory");

	/* Unmounted: the first h.h is back, rebuilt or found again. */
	ck_assert_int_eq(umount2(inc, MNT_DETACH), 0);
	ck_assert_int_eq(header_value(hdr), 1);
	expect_value(&r, 1, "after unmounting");
	oreq_free(&r);
	harness_stop();
}
END_TEST

/* UP_LEVELS times "../" into buf (at least 3 * UP_LEVELS + 1 bytes). */
static char *up_to_root(char *buf)
{
	buf[0] = '\0';
	for (int i = 0; i < UP_LEVELS; i++)
		strcat(buf, "../");
	return buf;
}

/* #include "../../..//<absolute path of h.h>": relative to the source in
 * the build directory, so the dependency file names it relatively, yet it
 * is a file outside the build like any other header. */
START_TEST(include_path_leaving_the_build_directory)
{
	char inc[HARNESS_PATH], hdr[HARNESS_PATH], up[3 * UP_LEVELS + 1];
	char *text = NULL;
	struct oreq r;

	make_dir(inc, "inc");
	write_header(harness_path(hdr, "inc/h.h"), 1);
	ck_assert(asprintf(&text, "#include \"%s%s\"\n\nint kiln_test_value(void)\n{\n"
			   "\treturn H_VALUE;\n}\n", up_to_root(up), hdr) > 0);
	oreq_init(&r, text);
	free(text);
	harness_start(NULL);

	expect(&r, 1, 1, "first request");
	expect(&r, 1, 1, "second request");
	write_header(hdr, 2);
	expect(&r, 2, 2, "after changing h.h");
	expect(&r, 2, 2, "again after changing h.h");
	oreq_free(&r);
	harness_stop();
}
END_TEST

/* -I../../.. (up to /) resolved in the build directory, and the header
 * named by its absolute path without the leading slash. */
START_TEST(relative_include_dir_leaving_the_build_directory)
{
	char inc[HARNESS_PATH], hdr[HARNESS_PATH], up[3 * UP_LEVELS + 1];
	char *text = NULL;
	struct oreq r;

	make_dir(inc, "inc");
	write_header(harness_path(hdr, "inc/h.h"), 1);
	ck_assert(asprintf(&text, "#include \"%s\"\n\nint kiln_test_value(void)\n{\n"
			   "\treturn H_VALUE;\n}\n", hdr + 1) > 0);
	oreq_init(&r, text);
	free(text);
	oreq_arg(&r, "-I%s..", up_to_root(up));
	harness_start(NULL);

	expect(&r, 1, 1, "first request");
	expect(&r, 1, 1, "second request");
	write_header(hdr, 2);
	expect(&r, 2, 2, "after changing h.h");
	expect(&r, 2, 2, "again after changing h.h");
	oreq_free(&r);
	harness_stop();
}
END_TEST

/*
 * gcc runs the assembler and the linker it finds through PATH (its
 * -print-prog-name=as is just "as"). A kilnd started again on the same cache
 * with another "as" first in PATH has another toolchain: the program is
 * built again, with that assembler. The assembler stands for both here.
 */
START_TEST(assembler_and_linker_found_through_path)
{
	char bin[HARNESS_PATH], as[HARNESS_PATH], marker[HARNESS_PATH];
	const char *path_now = getenv("PATH");
	char *text = NULL, *path_env = NULL, *prog = harness_program("through_path", 12);
	struct oreq r;

	make_dir(bin, "bin");
	harness_path(marker, "as-ran");
	ck_assert(asprintf(&text, "#!/bin/sh\n: > '%s'\nexec /usr/bin/as \"$@\"\n", marker) > 0);
	write_script(harness_path(as, "bin/as"), text);
	free(text);
	ck_assert(asprintf(&path_env, "PATH=%s:%s", bin,
			   path_now ? path_now : "/usr/local/bin:/usr/bin:/bin") > 0);
	oreq_init(&r, prog);
	free(prog);

	harness_start(NULL);
	expect(&r, 12, 1, "built with the assembler of the normal PATH");
	harness_stop();
	ck_assert_msg(!harness_exists(marker), "the first build already ran %s", as);

	harness_start_env(NULL, (const char *const[]){ path_env, NULL });
	expect(&r, 12, 1, "after a restart with another as first in PATH");
	ck_assert_msg(harness_exists(marker), "the program was served without running %s", as);
	oreq_free(&r);
	free(path_env);
	harness_stop();
}
END_TEST

/* A header above 1 MiB rewritten in place while kilnd was down, keeping its
 * size and its access and modification times. */
START_TEST(large_header_rewritten_with_same_size_and_mtime_after_restart)
{
	const size_t pad = (size_t)3 << 19;
	char inc[HARNESS_PATH], hdr[HARNESS_PATH];
	struct stat st;
	struct oreq r;
	char *text;

	make_dir(inc, "inc");
	harness_path(hdr, "inc/h.h");
	text = header_text(1, pad);
	harness_write_file(hdr, text);
	free(text);
	oreq_init(&r, program_text);
	oreq_arg(&r, "-I%s", inc);
	harness_start(NULL);
	expect(&r, 1, 1, "first request");
	expect(&r, 1, 1, "second request");
	harness_stop();

	ck_assert_int_eq(stat(hdr, &st), 0);
	text = header_text(2, pad);
	overwrite_in_place(hdr, text, O_TRUNC);
	free(text);
	restore_times(hdr, &st);
	check_same_stat(hdr, &st);

	harness_start(NULL);
	expect(&r, 2, 1, "after the rewrite, in the restarted kilnd");
	expect(&r, 2, 1, "again after the rewrite");
	oreq_free(&r);
	harness_stop();
}
END_TEST

/* Gets program name (returning value) with alias in a fresh connection of
 * this process, so that the request reaches the daemon, and waits for it. */
static void get_with_alias(const char *name, int value, const char *alias)
{
	char key[72];

	harness_get_program(NULL, name, value, alias, key);
}

/* kiln_lookup(alias) in a fresh connection; returns the program's value. */
static int lookup_value(const char *alias)
{
	struct kiln *k = NULL;
	struct kiln_program *p = NULL;
	int (*fn)(void);
	int rc, value;

	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	rc = kiln_lookup(k, alias, &p);
	ck_assert_msg(rc == KILN_OK, "kiln_lookup %s: %s: %s", alias, kiln_strerror(rc),
		      kiln_errmsg(k));
	*(void **)&fn = kiln_sym(p, "kiln_test_value");
	ck_assert_ptr_nonnull(fn);
	value = fn();
	kiln_close(k);
	return value;
}

/* An alias points at the program of the last get that named it, even when
 * every get is a hit and their alias updates run on the thread pool. */
START_TEST(alias_follows_the_last_get)
{
	char key[72];

	harness_start(NULL);
	harness_get_program(NULL, "x", 141, NULL, key);
	harness_get_program(NULL, "y", 142, NULL, key);
	for (int round = 1; round <= 20; round++) {
		int value;

		get_with_alias("x", 141, "a");
		get_with_alias("y", 142, "a");
		get_with_alias("x", 141, "a");
		value = lookup_value("a");
		ck_assert_msg(value == 141, "round %d: after getting x, y, x with alias a, the alias "
			      "gives the program returning %d, not x's 141", round, value);
	}
	ck_assert_int_eq(builds_started(), 2);
	harness_stop();
}
END_TEST

/* What a put of one artifact carries: its skeleton, its export metadata and
 * its bytes. */
struct exported {
	char *skel;
	char *meta;
	char *bytes;
	size_t size;
	char key[72];
};

/* Gets req on the harness daemon and exports its artifact. */
static void export_request(struct exported *x, const struct kiln_request *req)
{
	struct kiln *k;
	struct kiln_program *p;

	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	ck_assert_msg(kiln_get(k, req, &p) == KILN_OK, "%s", kiln_errmsg(k));
	snprintf(x->key, sizeof(x->key), "%s", kiln_program_key(p));
	x->skel = kiln_x_skeleton(req);
	ck_assert_ptr_nonnull(x->skel);
	x->size = (size_t)lseek(kiln_program_fd(p), 0, SEEK_END);
	x->bytes = malloc(x->size);
	ck_assert_ptr_nonnull(x->bytes);
	ck_assert_int_eq(pread(kiln_program_fd(p), x->bytes, x->size, 0), (ssize_t)x->size);
	ck_assert_msg(kiln_x_export(k, x->key, x->bytes, x->size, &x->meta) == KILN_OK, "%s",
		      kiln_errmsg(k));
	kiln_close(k);
}

static void exported_free(struct exported *x)
{
	free(x->skel);
	free(x->meta);
	free(x->bytes);
}

/* Puts skeleton skel with meta and bytes into the kilnd at sock; its error
 * text goes to msg. */
static int put_to(const char *sock, const char *skel, const char *meta, const char *bytes,
		  size_t size, char *msg, size_t msglen)
{
	struct kiln *k;
	int fd = memfd_create("observe-put", MFD_CLOEXEC), rc;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, bytes, size), (ssize_t)size);
	ck_assert_int_eq(kiln_open(sock, &k), KILN_OK);
	rc = kiln_x_put(k, skel, meta, fd);
	snprintf(msg, msglen, "%s", rc == KILN_OK ? "" : kiln_errmsg(k));
	kiln_close(k);
	close(fd);
	return rc;
}

static int64_t status_num(const char *sock, const char *field)
{
	cJSON *st = harness_status_at(sock);
	int64_t v = harness_num(st, field);

	cJSON_Delete(st);
	return v;
}

/* meta with member name replaced by value (taken over); malloc'd. */
static char *meta_with(const char *meta, const char *name, cJSON *value)
{
	cJSON *m = cJSON_Parse(meta);
	char *out;

	ck_assert_msg(cJSON_IsObject(m), "export metadata is no JSON object: %s", meta);
	cJSON_DeleteItemFromObjectCaseSensitive(m, name);
	cJSON_AddItemToObject(m, name, value);
	out = cJSON_PrintUnformatted(m);
	ck_assert_ptr_nonnull(out);
	cJSON_Delete(m);
	return out;
}

/* 64 hex digits into 32 bytes. */

/* The artifact key of x's entry computed from its meta's deps (NULL: none)
 * with kilnd's own function, for the request key the daemon recorded. */
static void artifact_key(const struct exported *x, const cJSON *deps, char out[65])
{
	cJSON *ls = harness_cli_json("ls", NULL);
	const cJSON *e = harness_find_entry(ls, "key", x->key);
	int n = cJSON_GetArraySize(deps);
	struct store_dep *d = calloc((size_t)n + 1, sizeof(*d));
	const cJSON *dep;
	int i = 0;

	ck_assert_ptr_nonnull(e);
	ck_assert_ptr_nonnull(d);
	cJSON_ArrayForEach(dep, deps) {
		/* The wire form of a dep is the store's JSON form. */
		ck_assert_int_eq(store_dep_from_json(dep, &d[i]), 0);
		i++;
	}
	key_artifact(harness_str(e, "rkey"), d, (size_t)n, out);
	for (i = 0; i < n; i++)
		free(d[i].path);
	free(d);
	cJSON_Delete(ls);
}

/* A put whose deps are emptied, with the key recomputed to match: the
 * artifact was built with h.h, so the importing node cannot take the claim
 * that it depends on nothing. */
START_TEST(put_with_empty_deps_is_refused)
{
	char inc[HARNESS_PATH], hdr[HARNESS_PATH], sock[HARNESS_PATH], msg[4096], key[65];
	struct exported x;
	cJSON *m, *deps;
	char *meta, *forged;
	struct oreq r;
	int rc;

	make_dir(inc, "inc");
	write_header(harness_path(hdr, "inc/h.h"), 1);
	oreq_init(&r, program_text);
	oreq_arg(&r, "-I%s", inc);
	harness_start(NULL);
	export_request(&x, &r.req);

	/* The key is recomputed the way kilnd computes it; first check that
	 * the recorded deps give the key the build got. */
	m = cJSON_Parse(x.meta);
	deps = cJSON_GetObjectItemCaseSensitive(m, "deps");
	ck_assert_msg(cJSON_GetArraySize(deps) > 0, "the export names no deps: %s", x.meta);
	artifact_key(&x, deps, key);
	ck_assert_str_eq(key, x.key);
	cJSON_Delete(m);
	artifact_key(&x, NULL, key);
	meta = meta_with(x.meta, "deps", cJSON_CreateArray());
	forged = meta_with(meta, "key", cJSON_CreateString(key));
	free(meta);

	harness_start_named("b", NULL, NULL, sock);
	rc = put_to(sock, x.skel, forged, x.bytes, x.size, msg, sizeof(msg));
	ck_assert_msg(rc != KILN_OK, "node b imported an artifact built with h.h from a put "
		      "that claimed it depends on nothing");
	ck_assert_msg(rc == KILN_EREFUSED && harness_contains(msg, "(mismatch)"),
		      "a put claiming no deps got %s, not mismatch: %s", kiln_strerror(rc), msg);
	ck_assert_int_eq(status_num(sock, "entries"), 0);
	ck_assert_int_eq(status_num(sock, "imports"), 0);
	free(forged);
	exported_free(&x);
	oreq_free(&r);
}
END_TEST

/* Builds <dir>/bad.so, which refers to a variable nobody defines: its
 * relocation fails at load time however it is loaded. */
static void build_unloadable(char path[HARNESS_PATH])
{
	char c[HARNESS_PATH];
	const char *cc[] = { "/usr/bin/cc", "-shared", "-fPIC", "-o", path, c, NULL };

	harness_write_file(harness_path(c, "bad.c"),
			   "extern int kiln_test_missing_variable;\n"
			   "\n"
			   "int kiln_test_value(void)\n"
			   "{\n"
			   "\treturn kiln_test_missing_variable;\n"
			   "}\n");
	run_ok(cc);
	/* Even lazy binding resolves data references at load time. */
	ck_assert_msg(dlopen(path, RTLD_LAZY | RTLD_LOCAL) == NULL, "%s loads after all", path);
}

/* As harness_in_child(), for the kilnd at sock. */
static struct harness_result in_child_at(const char *sock, const struct kiln_request *req)
{
	struct harness_fleet *f = harness_fleet_start(1, &(struct harness_fleet_opts){
		.socket = sock, .reqs = req, .nreqs = 1 });
	struct harness_result res;

	harness_fleet_wait(f, 60);
	res = f->results[0];
	harness_fleet_free(f);
	return res;
}

/* A put whose key, deps and digest all match, but whose bytes are a shared
 * object that does not load: the importing node must check it as a build. */
START_TEST(put_of_an_artifact_that_does_not_load_is_refused)
{
	char sock[HARNESS_PATH], msg[4096], bad[HARNESS_PATH], hex[65];
	char *text = harness_program("loads", 16), *bytes, *meta, *forged;
	uint8_t digest[32];
	struct harness_result res;
	struct exported x;
	struct oreq r;
	size_t size;
	int rc;

	oreq_init(&r, text);
	free(text);
	harness_start(NULL);
	export_request(&x, &r.req);

	harness_path(bad, "bad.so");
	build_unloadable(bad);
	bytes = harness_read_file(bad);
	ck_assert_ptr_nonnull(bytes);
	{
		struct stat st;

		ck_assert_int_eq(stat(bad, &st), 0);
		size = (size_t)st.st_size;
	}
	util_sha256(bytes, size, digest);
	util_hex(digest, sizeof(digest), hex);
	meta = meta_with(x.meta, "sha256", cJSON_CreateString(hex));
	forged = meta_with(meta, "size", cJSON_CreateNumber((double)size));
	free(meta);

	harness_start_named("b", NULL, NULL, sock);
	rc = put_to(sock, x.skel, forged, bytes, size, msg, sizeof(msg));
	ck_assert_msg(rc != KILN_OK, "an artifact that does not load was imported");
	ck_assert_int_eq(status_num(sock, "entries"), 0);

	/* Node b builds the program itself instead. */
	res = in_child_at(sock, &r.req);
	check_result(&res, 16, "a get on node b after the refused put");
	free(forged);
	free(bytes);
	exported_free(&x);
	oreq_free(&r);
}
END_TEST

/* Can this process mount a tmpfs? When it cannot, why goes to why. */
static bool can_mount(char *why, size_t len)
{
	char probe[] = "/tmp/kiln-mount-probe-XXXXXX";
	bool ok;

	if (geteuid() != 0) {
		snprintf(why, len, "it needs root");
		return false;
	}
	if (mkdtemp(probe) == NULL) {
		snprintf(why, len, "mkdtemp: %s", strerror(errno));
		return false;
	}
	ok = mount("tmpfs", probe, "tmpfs", 0, "size=64k") == 0;
	if (!ok)
		snprintf(why, len, "cannot mount a tmpfs here: %s", strerror(errno));
	else
		umount(probe);
	rmdir(probe);
	return ok;
}

/* The default toolchain is observed: status says so, and an entry lists
 * what the compiler looked for and did not find as well as what it read. */
START_TEST(status_and_show_name_the_mechanism)
{
	char inc[HARNESS_PATH], hdr[HARNESS_PATH], *out = NULL;
	struct oreq r;

	make_dir(inc, "inc");
	write_header(harness_path(hdr, "inc/h.h"), 1);
	oreq_init(&r, program_text);
	oreq_arg(&r, "-I%s", inc);
	harness_start(NULL);
	expect(&r, 1, 1, "first request");

	cJSON *st = harness_status();
	const cJSON *tcs = cJSON_GetObjectItemCaseSensitive(st, "toolchains");
	ck_assert_str_eq(harness_str(cJSON_GetArrayItem(tcs, 0), "observe"), "preload");
	ck_assert_int_eq(harness_num(st, "depfile_fallbacks"), 0);
	cJSON_Delete(st);

	cJSON *ls = harness_cli_json("ls", NULL);
	cJSON *e = harness_cli_json("show", harness_str(cJSON_GetArrayItem(ls, 0), "key"), NULL);
	ck_assert_str_eq(harness_str(e, "deps_source"), "observed");
	const cJSON *paths = cJSON_GetObjectItemCaseSensitive(e, "deps");
	const cJSON *kinds = cJSON_GetObjectItemCaseSensitive(e, "dep_kinds");
	bool header = false, absent = false;
	for (int i = 0; i < cJSON_GetArraySize(paths); i++) {
		const char *p = cJSON_GetStringValue(cJSON_GetArrayItem(paths, i));
		const char *k = cJSON_GetStringValue(cJSON_GetArrayItem(kinds, i));
		header = header || (strcmp(p, hdr) == 0 && strcmp(k, "file") == 0);
		absent = absent || strcmp(k, "absent") == 0;
	}
	ck_assert_msg(header, "the entry does not list %s as a file it read", hdr);
	ck_assert_msg(absent, "the entry lists no path looked for and not found");
	ck_assert_int_eq(harness_cli(&out, NULL, "show", harness_str(e, "key"), NULL), 0);
	ck_assert_msg(strstr(out, "observed: every file the toolchain read or looked for") != NULL,
		      "kiln show does not say how the dependencies were recorded:\n%s", out);
	free(out);
	cJSON_Delete(e);
	cJSON_Delete(ls);
	oreq_free(&r);
	harness_stop();
}
END_TEST

/* A compiler that escapes the interposer (here: started with LD_PRELOAD
 * removed, as a static program would be) leaves no start record: the
 * build falls back to the dependency files, says so, and a header change
 * is still a miss. */
START_TEST(untraced_compiler_falls_back_to_dependency_files)
{
	char inc[HARNESS_PATH], hdr[HARNESS_PATH], wrapper[HARNESS_PATH], tc[HARNESS_PATH + 8];
	struct oreq r;

	make_dir(inc, "inc");
	write_header(harness_path(hdr, "inc/h.h"), 1);
	write_script(harness_path(wrapper, "cc-untraced"),
		     "#!/bin/sh\nexec env -u LD_PRELOAD /usr/bin/cc \"$@\"\n");
	oreq_init(&r, program_text);
	oreq_arg(&r, "-I%s", inc);
	start_with_wrapper(wrapper, tc, sizeof(tc));
	expect(&r, 1, 1, "first request");
	expect(&r, 1, 1, "second request");
	cJSON *st = harness_status();
	ck_assert_int_eq(harness_num(st, "depfile_fallbacks"), 1);
	cJSON_Delete(st);
	cJSON *ls = harness_cli_json("ls", NULL);
	cJSON *e = harness_cli_json("show", harness_str(cJSON_GetArrayItem(ls, 0), "key"), NULL);
	ck_assert_str_eq(harness_str(e, "deps_source"), "depfile");
	cJSON_Delete(e);
	cJSON_Delete(ls);
	write_header(hdr, 2);
	expect(&r, 2, 2, "after changing h.h");
	oreq_free(&r);
	harness_stop();
}
END_TEST

/* Adds a test case holding one test (see harness_tcase). */
static TCase *add(Suite *s, const char *name, const TTest *test, double timeout_s)
{
	TCase *tc = harness_tcase(name, test, timeout_s);

	suite_add_tcase(s, tc);
	return tc;
}

int main(void)
{
	Suite *s = suite_create("observe");
	char why[256];

	add(s, "replaced_during_build", input_replaced_during_build, 180);
	add(s, "changing_every_build", input_changing_on_every_build_is_an_error, 120);
	add(s, "source_in_arguments", source_path_in_arguments, 90);
	add(s, "incbin", assembler_incbin_input, 90);
	add(s, "shadowing_header", header_shadowing_an_earlier_include_dir, 90);
	add(s, "has_include", has_include_absent_then_present, 90);
	add(s, "shadowing_library", library_shadowing_an_earlier_library_dir, 90);
	add(s, "hard_link", hard_link_rewritten_elsewhere, 90);
	add(s, "shared_mapping", write_through_shared_mapping, 90);
	if (can_mount(why, sizeof(why))) {
		/* Its teardown runs before the harness's, which removes the
		 * directory (Check runs teardowns in reverse order). */
		tcase_add_unchecked_fixture(add(s, "mount", mount_over_include_dir, 90), NULL,
					    unmount_teardown);
	} else {
		printf("SKIP mount_over_include_dir: %s\n", why);
	}
	add(s, "include_leaving_build", include_path_leaving_the_build_directory, 90);
	add(s, "include_dir_leaving_build", relative_include_dir_leaving_the_build_directory, 90);
	add(s, "as_through_path", assembler_and_linker_found_through_path, 90);
	add(s, "large_header_restart", large_header_rewritten_with_same_size_and_mtime_after_restart,
	    90);
	add(s, "alias_last_get", alias_follows_the_last_get, 120);
	add(s, "put_empty_deps", put_with_empty_deps_is_refused, 90);
	add(s, "put_unloadable", put_of_an_artifact_that_does_not_load_is_refused, 90);
	add(s, "mechanism", status_and_show_name_the_mechanism, 90);
	add(s, "untraced", untraced_compiler_falls_back_to_dependency_files, 90);
	return harness_main(s);
}
