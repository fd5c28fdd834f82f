/*
 * Unit tests of the trace reader (daemon/flight/trace.c): the path normalization
 * and the records kiln-observe.so writes (format in daemon/observe.c), fed
 * as byte arrays of NUL-terminated records, turned into dependencies.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store.h"
#include "trace.h"
#include "util.h"
#include "unit.h"

#define BDIR "/c/tmp/b-1"
#define OBSERVE_SO "/usr/lib/kiln/kiln-observe.so"
#define KILN_EXEC "/usr/libexec/kiln/kiln-exec"

static const char *const skip_list[] = { OBSERVE_SO, KILN_EXEC, NULL };
/* The build's secret every record starts with. */
#define TOKEN "5ec4e7"

/* kilnd's environment as the tests pretend it is. */
static const char *test_env(const char *name)
{
	static const char *const vars[][2] = {
		{ "FOO", "v" },
		{ "LD_PRELOAD", OBSERVE_SO },
		{ "KILN_TRACE_DIR", "/c/tmp/b-1/trace" },
		{ "KILN_TRACE_TOKEN", TOKEN },
		{ "TMPDIR", "/tmp" },
		{ "PWD", BDIR },
		{ "OLDPWD", "/home/u" },
		{ "KILN_OBSERVE_IGNORE", "/var/lock" },
		{ "EMPTY", "" },
	};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		if (strcmp(name, vars[i][0]) == 0)
			return vars[i][1];
	}
	return NULL;
}

/* Joins records into one trace as kiln-observe.so writes it: each record
 * followed by its NUL. *len gets the byte count; free the result. */
/* The records, each signed with TOKEN as kiln-observe.so signs them, and
 * joined with NULs. */
static char *join(const char *const *recs, size_t nrecs, size_t *len)
{
	size_t total = 0, o = 0, tl = strlen(TOKEN) + 1;
	for (size_t i = 0; i < nrecs; i++)
		total += tl + strlen(recs[i]) + 1;
	char *buf = malloc(total + 1);
	ck_assert_ptr_nonnull(buf);
	for (size_t i = 0; i < nrecs; i++) {
		size_t n = strlen(recs[i]);
		memcpy(buf + o, TOKEN " ", tl);
		memcpy(buf + o + tl, recs[i], n);
		buf[o + tl + n] = '\0';
		o += tl + n + 1;
	}
	*len = total;
	return buf;
}

/* Parses the records with the test's bdir, skip list and environment. */
static void parse_recs(const char *const *recs, size_t nrecs, struct trace_result *r)
{
	size_t len;
	char *text = join(recs, nrecs, &len);
	ck_assert_int_eq(trace_parse(text, len, TOKEN, BDIR, skip_list, test_env, r), 0);
	free(text);
}

#define PARSE(r, ...)                                                           \
	do {                                                                    \
		const char *const recs_[] = { __VA_ARGS__ };                    \
		parse_recs(recs_, sizeof(recs_) / sizeof(recs_[0]), (r));       \
	} while (0)

static const struct store_dep *find_dep(const struct trace_result *r, const char *path)
{
	for (size_t i = 0; i < r->ndeps; i++) {
		if (strcmp(r->deps[i].path, path) == 0)
			return &r->deps[i];
	}
	return NULL;
}

static void norm_ok(const char *in, const char *want)
{
	char out[4096];
	ck_assert_msg(trace_normalize(in, BDIR, out, sizeof(out)), "%s: refused", in);
	ck_assert_str_eq(out, want);
}

static void norm_refused(const char *in)
{
	char out[4096];
	ck_assert_msg(!trace_normalize(in, BDIR, out, sizeof(out)), "%s: accepted as %s", in, out);
}

/* ".." climbing out of the build directory is applied by text all the way
 * up, and extra ones stop at "/". */
START_TEST(normalize_climbs_out_of_bdir)
{
	norm_ok("/c/tmp/b-1/src/../../../../../x/h.h", "/x/h.h");
	norm_ok("/c/tmp/b-1/src/../../../../../../../../../x/h.h", "/x/h.h");
	norm_ok("/c/tmp/b-1/../../../../..", "/");
	norm_ok("/../../usr/include/stdio.h", "/usr/include/stdio.h");
}
END_TEST

/* Paths inside the build directory (also reached by "..") are left out;
 * a sibling whose name merely starts like bdir is not inside it. */
START_TEST(normalize_inside_bdir)
{
	norm_refused("/c/tmp/b-1/src/a.c");
	norm_refused("/c/tmp/b-1");
	norm_refused("/c/tmp/b-1/");
	norm_refused("/c/tmp/b-1/src/../out/a.o");
	norm_refused("/c/tmp/../tmp/b-1/x");
	norm_refused("/c/tmp/b-1/src/../../b-1/x");
	norm_ok("/c/tmp/b-10/x", "/c/tmp/b-10/x");
	norm_ok("/c/tmp/b-1x", "/c/tmp/b-1x");
}
END_TEST

/* Outside bdir's own path a component may be a symlink: ".." stays, as
 * the kernel resolves it. */
START_TEST(normalize_keeps_dotdot_outside)
{
	norm_ok("/opt/link/../h.h", "/opt/link/../h.h");
	norm_ok("/c/tmp/b-1/src/../../../opt/link/../h.h", "/c/opt/link/../h.h");
	/* Leaving bdir's way through a sibling ends the textual "..". */
	norm_ok("/c/tmp/b-2/../b-1/x", "/c/tmp/b-2/../b-1/x");
}
END_TEST

/* "." components and repeated or trailing slashes go. */
START_TEST(normalize_dot_and_slashes)
{
	norm_ok("/usr//include/./stdio.h", "/usr/include/stdio.h");
	norm_ok("//usr/include/", "/usr/include");
	norm_ok("/./././a", "/a");
	norm_ok("/", "/");
	norm_ok("/c/tmp/./b-1/./../b-2", "/c/tmp/b-2");
}
END_TEST

/* ".." from inside bdir into a sibling build directory: applied by text,
 * the result is outside bdir. */
START_TEST(normalize_into_sibling)
{
	norm_ok("/c/tmp/b-1/src/../../b-2/x", "/c/tmp/b-2/x");
}
END_TEST

/* Relative paths and results that do not fit are refused; one that fits
 * exactly is not. */
START_TEST(normalize_refuses)
{
	char out[8];
	ck_assert(!trace_normalize("rel/x", BDIR, out, sizeof(out)));
	ck_assert(!trace_normalize("", BDIR, out, sizeof(out)));
	ck_assert(trace_normalize("/ab", BDIR, out, 4));
	ck_assert_str_eq(out, "/ab");
	ck_assert(!trace_normalize("/abc", BDIR, out, 4));
	ck_assert(trace_normalize("/ab/cd", BDIR, out, 7));
	ck_assert_str_eq(out, "/ab/cd");
	ck_assert(!trace_normalize("/ab/cd", BDIR, out, 6));
}
END_TEST

/* An 'O' record is a FILE dep with the identity fstat gave (mode octal,
 * the other fields decimal). */
START_TEST(parse_open_identity)
{
	struct trace_result r;
	PARSE(&r, "H 100 99\t/usr/bin/cc1",
	      "O 100 2049 123456 789 1700000000123456789 1700000001987654321 100644\t"
	      "/usr/include/stdio.h");
	ck_assert(r.complete);
	ck_assert_str_eq(r.changed, "");
	ck_assert_uint_eq(r.records, 2);
	ck_assert_uint_eq(r.ndeps, 1);
	const struct store_dep *d = &r.deps[0];
	ck_assert_str_eq(d->path, "/usr/include/stdio.h");
	ck_assert_uint_eq(d->kind, STORE_DEP_FILE);
	ck_assert_uint_eq(d->dev, 2049);
	ck_assert_uint_eq(d->ino, 123456);
	ck_assert_uint_eq(d->size, 789);
	ck_assert_int_eq(d->mtime_ns, 1700000000123456789LL);
	ck_assert_int_eq(d->ctime_ns, 1700000001987654321LL);
	ck_assert_uint_eq(d->mode, S_IFREG | 0644);
	trace_result_free(&r);
}
END_TEST

/* 'A' is ABSENT; 'S' is EXISTS with its (octal) mode; 'L' and 'X' carry
 * an identity like 'O'. */
START_TEST(parse_absent_exists)
{
	struct trace_result r;
	PARSE(&r, "A 100 2\t/usr/local/include/x.h",
	      "S 100 40755\t/usr/include",
	      "S 100\t/usr/share/probe",
	      "L 100 1 2 3 4 5 100755\t/lib/libc.so.6");
	ck_assert_uint_eq(r.ndeps, 4);
	const struct store_dep *d = find_dep(&r, "/usr/local/include/x.h");
	ck_assert_ptr_nonnull(d);
	ck_assert_uint_eq(d->kind, STORE_DEP_ABSENT);
	d = find_dep(&r, "/usr/include");
	ck_assert_ptr_nonnull(d);
	ck_assert_uint_eq(d->kind, STORE_DEP_EXISTS);
	ck_assert_uint_eq(d->mode, S_IFDIR | 0755);
	d = find_dep(&r, "/usr/share/probe");
	ck_assert_ptr_nonnull(d);
	ck_assert_uint_eq(d->kind, STORE_DEP_EXISTS);
	ck_assert_uint_eq(d->mode, 0);
	d = find_dep(&r, "/lib/libc.so.6");
	ck_assert_ptr_nonnull(d);
	ck_assert_uint_eq(d->kind, STORE_DEP_FILE);
	ck_assert_uint_eq(d->ino, 2);
	ck_assert_uint_eq(d->mode, S_IFREG | 0755);
	trace_result_free(&r);
}
END_TEST

/* 'Q' (found, but failed with EACCES, ELOOP, ...) is EXISTS; its field is
 * an errno, not a mode, so the dep's mode must stay unknown (0), and a
 * later 'S' must still be able to give the real mode. */
START_TEST(parse_probe_error_no_mode)
{
	struct trace_result r;
	PARSE(&r, "Q 100 13\t/opt/secret/h.h",
	      "Q 100 40\t/opt/loop",
	      "S 100 120777\t/opt/loop");
	ck_assert_uint_eq(r.ndeps, 2);
	const struct store_dep *d = find_dep(&r, "/opt/secret/h.h");
	ck_assert_ptr_nonnull(d);
	ck_assert_uint_eq(d->kind, STORE_DEP_EXISTS);
	ck_assert_uint_eq(d->mode, 0);
	d = find_dep(&r, "/opt/loop");
	ck_assert_ptr_nonnull(d);
	ck_assert_uint_eq(d->kind, STORE_DEP_EXISTS);
	ck_assert_uint_eq(d->mode, S_IFLNK | 0777);
	trace_result_free(&r);
}
END_TEST

/* What the toolchain wrote is an output, never an input, in either order
 * and whatever else it did with the path. */
START_TEST(parse_written_dropped)
{
	struct trace_result r;
	PARSE(&r, "W 101\t/tmp/out.o",
	      "S 101 100644\t/tmp/out.o",
	      "A 100 2\t/tmp/new.o",
	      "W 100\t/tmp/new.o",
	      "O 100 1 4 3 4 5 100644\t/usr/include/keep.h");
	ck_assert_uint_eq(r.ndeps, 1);
	ck_assert_str_eq(r.deps[0].path, "/usr/include/keep.h");
	trace_result_free(&r);
}
END_TEST

/* A path that was read stays an input whatever else was done to it: a
 * wrapper that reads its flags file and touches it (in either order, in
 * one process or two), a file run or loaded and then written. */
START_TEST(parse_read_and_written_stays_an_input)
{
	struct trace_result r;
	PARSE(&r, "O 100 1 2 3 4 5 100644\t/home/u/flags",
	      "W 100\t/home/u/flags",
	      "W 101\t/home/u/flags2",
	      "O 102 1 3 3 4 5 100644\t/home/u/flags2",
	      "X 103 1 6 3 4 5 100755\t/home/u/tool",
	      "W 103\t/home/u/tool",
	      "W 104\t/home/u/only-written");
	ck_assert_uint_eq(r.ndeps, 3);
	ck_assert_ptr_nonnull(find_dep(&r, "/home/u/flags"));
	ck_assert_ptr_nonnull(find_dep(&r, "/home/u/flags2"));
	ck_assert_ptr_nonnull(find_dep(&r, "/home/u/tool"));
	ck_assert_uint_eq(find_dep(&r, "/home/u/flags")->kind, STORE_DEP_FILE);
	trace_result_free(&r);
}
END_TEST

/* A directory listed (D) is a listing with the identity it was opened
 * with, whatever probes of it came before or after; listed again with
 * another identity, or listed after it was missing, it changed. */
START_TEST(parse_listed_directories)
{
	struct trace_result r;
	PARSE(&r, "S 100 40755\t/inc/h.h.gch",
	      "D 100 8 9 4096 5 6 40755\t/inc/h.h.gch",
	      "S 100 40755\t/inc/h.h.gch",
	      "D 100 8 9 4096 5 6 40755\t/inc/h.h.gch");
	ck_assert_uint_eq(r.ndeps, 1);
	ck_assert_uint_eq(r.deps[0].kind, STORE_DEP_LISTING);
	ck_assert_uint_eq(r.deps[0].ino, 9);
	ck_assert_int_eq(r.deps[0].mtime_ns, 5);
	ck_assert_str_eq(r.changed, "");
	trace_result_free(&r);
	PARSE(&r, "D 100 8 9 4096 5 6 40755\t/inc/d", "D 100 8 9 4096 7 8 40755\t/inc/d");
	ck_assert_msg(strstr(r.changed, "/inc/d changed") != NULL, "%s", r.changed);
	trace_result_free(&r);
	PARSE(&r, "A 100 2\t/inc/d", "D 100 8 9 4096 7 8 40755\t/inc/d");
	ck_assert_msg(strstr(r.changed, "/inc/d was missing, then found") != NULL, "%s", r.changed);
	trace_result_free(&r);
}
END_TEST

/* The skip list (after normalization) and the build directory are left
 * out; paths under /proc, /sys and /dev are kept (which of them are inputs
 * is decided on the node: pseudo.c). */
START_TEST(parse_skipped_paths)
{
	struct trace_result r;
	PARSE(&r, "O 100 1 2 3 4 5 100444\t/proc/self/maps",
	      "S 100 40555\t/proc",
	      "O 100 1 2 3 4 5 100444\t/sys/devices/system/cpu/online",
	      "O 100 1 2 3 4 5 20666\t/dev/null",
	      "A 100 2\t/dev/shm/x",
	      "L 100 1 2 3 4 5 100755\t" OBSERVE_SO,
	      "L 100 1 2 3 4 5 100755\t/usr/lib/kiln/./kiln-observe.so",
	      "X 100 1 2 3 4 5 100755\t" KILN_EXEC,
	      "O 100 1 2 3 4 5 100644\t/c/tmp/b-1/src/a.c",
	      "O 100 1 2 3 4 5 100644\t/c/tmp/b-1/src/../../b-1/src/b.c",
	      "S 100 100644\t/device/x",
	      "H 100 99\t/usr/bin/cc1");
	ck_assert_uint_eq(r.ndeps, 6);
	ck_assert_str_eq(r.deps[0].path, "/proc/self/maps");
	ck_assert_str_eq(r.deps[3].path, "/dev/null");
	ck_assert_uint_eq(r.deps[4].kind, STORE_DEP_ABSENT);
	ck_assert_str_eq(r.deps[5].path, "/device/x");
	trace_result_free(&r);
}
END_TEST

/* Relative includes leaving the build directory are recorded at the
 * normalized path, once. */
START_TEST(parse_normalizes_paths)
{
	struct trace_result r;
	PARSE(&r, "O 100 1 2 3 4 5 100644\t/c/tmp/b-1/src/../../../../inc/h.h",
	      "O 100 1 2 3 4 5 100644\t/inc/./h.h",
	      "O 100 1 2 3 4 5 100644\t//inc//h.h");
	ck_assert_uint_eq(r.ndeps, 1);
	ck_assert_str_eq(r.deps[0].path, "/inc/h.h");
	ck_assert_str_eq(r.changed, "");
	trace_result_free(&r);
}
END_TEST

/* A path missing and then found, or found and then missing, or opened
 * with two identities, changed during the build. */
START_TEST(parse_changed)
{
	struct trace_result r;
	PARSE(&r, "A 100 2\t/usr/include/a.h",
	      "O 101 1 2 3 4 5 100644\t/usr/include/a.h");
	ck_assert_str_ne(r.changed, "");
	ck_assert_ptr_nonnull(strstr(r.changed, "/usr/include/a.h"));
	trace_result_free(&r);

	PARSE(&r, "S 100 100644\t/usr/include/b.h",
	      "A 101 2\t/usr/include/b.h");
	ck_assert_str_ne(r.changed, "");
	ck_assert_ptr_nonnull(strstr(r.changed, "/usr/include/b.h"));
	trace_result_free(&r);

	PARSE(&r, "O 100 1 2 3 4 5 100644\t/usr/include/c.h",
	      "O 101 1 9 3 4 5 100644\t/usr/include/c.h");
	ck_assert_str_ne(r.changed, "");
	ck_assert_ptr_nonnull(strstr(r.changed, "/usr/include/c.h"));
	trace_result_free(&r);

	/* Another size, mtime or ctime is a change too. */
	PARSE(&r, "O 100 1 2 3 4 5 100644\t/usr/include/d.h",
	      "O 101 1 2 3 4 6 100644\t/usr/include/d.h");
	ck_assert_str_ne(r.changed, "");
	trace_result_free(&r);

	/* The same identity twice is not. */
	PARSE(&r, "O 100 1 2 3 4 5 100644\t/usr/include/e.h",
	      "O 101 1 2 3 4 5 100644\t/usr/include/e.h",
	      "A 100 2\t/usr/include/f.h",
	      "A 101 2\t/usr/include/f.h");
	ck_assert_str_eq(r.changed, "");
	ck_assert_uint_eq(r.ndeps, 2);
	trace_result_free(&r);
}
END_TEST

/* An exec followed by the start record of the program it ran (the same
 * file): complete. */
START_TEST(parse_exec_started)
{
	struct trace_result r;
	PARSE(&r, "H 100 99\t/usr/bin/gcc",
	      "X 101 1 7 3 4 5 100755\t/usr/lib/gcc/cc1",
	      "H 101 100 1 7 3 4 5 100755\t/usr/lib/gcc/cc1");
	ck_assert_msg(r.complete, "incomplete: %s", r.incomplete);
	ck_assert_str_eq(r.incomplete, "");
	/* The executed program is an input. */
	const struct store_dep *d = find_dep(&r, "/usr/lib/gcc/cc1");
	ck_assert_ptr_nonnull(d);
	ck_assert_uint_eq(d->kind, STORE_DEP_FILE);
	ck_assert_uint_eq(d->ino, 7);
	trace_result_free(&r);
}
END_TEST

/* An exec never followed by a start record (a static program, or one
 * started with a cleared environment): incomplete, naming it. */
START_TEST(parse_exec_not_started)
{
	struct trace_result r;
	PARSE(&r, "H 100 99\t/usr/bin/gcc",
	      "X 101 1 7 3 4 5 100755\t/opt/static/as");
	ck_assert(!r.complete);
	ck_assert_ptr_nonnull(strstr(r.incomplete, "/opt/static/as ran without"));
	trace_result_free(&r);

	/* The start record of another process does not count. */
	PARSE(&r, "X 101 1 7 3 4 5 100755\t/opt/static/as",
	      "H 102 100 1 7 3 4 5 100755\t/opt/static/as");
	ck_assert(!r.complete);
	trace_result_free(&r);

	/* Nor does a start record that does not name its image. */
	PARSE(&r, "X 101 1 7 3 4 5 100755\t/opt/static/as",
	      "H 101 100\t/opt/static/as");
	ck_assert(!r.complete);
	trace_result_free(&r);
}
END_TEST

/* A launcher that runs without the interposer (static) and then execs an
 * observed compiler in the same pid: the compiler's start record names
 * another file, so the launcher's exec stays unanswered and what it read
 * is unknown. */
START_TEST(parse_exec_answered_by_another_image_is_incomplete)
{
	struct trace_result r;
	PARSE(&r, "X 101 1 7 3 4 5 100755\t/opt/static/launcher",
	      "H 101 100 1 9 3 4 5 100755\t/usr/bin/gcc");
	ck_assert(!r.complete);
	ck_assert_ptr_nonnull(strstr(r.incomplete, "/opt/static/launcher"));
	/* The compiler that did start is an input all the same. */
	ck_assert_ptr_nonnull(find_dep(&r, "/usr/bin/gcc"));
	trace_result_free(&r);

	/* Two execs of one pid, each answered by its own image: complete. */
	PARSE(&r, "X 101 1 7 3 4 5 100755\t/usr/bin/launcher",
	      "H 101 100 1 7 3 4 5 100755\t/usr/bin/launcher",
	      "X 101 1 9 3 4 5 100755\t/usr/bin/gcc",
	      "H 101 100 1 9 3 4 5 100755\t/usr/bin/gcc");
	ck_assert_msg(r.complete, "incomplete: %s", r.incomplete);
	trace_result_free(&r);
}
END_TEST

/* A script's exec is answered by its `#!` interpreter (I records, one per
 * level), which is an input like the script; an interpreter that leaves
 * no start record (static) makes the trace incomplete. */
START_TEST(parse_script_answered_by_its_interpreter)
{
	struct trace_result r;
	PARSE(&r, "X 101 1 7 3 4 5 100755\t/opt/wrap/cc",
	      "I 101 1 20 3 4 5 100755\t/opt/sh",
	      "H 101 100 1 20 3 4 5 100755\t/opt/sh");
	ck_assert_msg(r.complete, "incomplete: %s", r.incomplete);
	const struct store_dep *d = find_dep(&r, "/opt/sh");
	ck_assert_ptr_nonnull(d);
	ck_assert_uint_eq(d->kind, STORE_DEP_FILE);
	ck_assert_uint_eq(d->ino, 20);
	ck_assert_ptr_nonnull(find_dep(&r, "/opt/wrap/cc"));
	trace_result_free(&r);

	/* A script whose interpreter is a script. */
	PARSE(&r, "X 101 1 7 3 4 5 100755\t/opt/wrap/cc",
	      "I 101 1 21 3 4 5 100755\t/opt/wrap/interp",
	      "I 101 1 20 3 4 5 100755\t/opt/sh",
	      "H 101 100 1 20 3 4 5 100755\t/opt/sh");
	ck_assert_msg(r.complete, "incomplete: %s", r.incomplete);
	ck_assert_ptr_nonnull(find_dep(&r, "/opt/wrap/interp"));
	trace_result_free(&r);

	PARSE(&r, "X 101 1 7 3 4 5 100755\t/opt/wrap/cc",
	      "I 101 1 20 3 4 5 100755\t/opt/static-sh");
	ck_assert(!r.complete);
	ck_assert_ptr_nonnull(strstr(r.incomplete, "/opt/static-sh"));
	trace_result_free(&r);

	/* The script's own image does not answer for its interpreter. */
	PARSE(&r, "X 101 1 7 3 4 5 100755\t/opt/wrap/cc",
	      "I 101 1 20 3 4 5 100755\t/opt/static-sh",
	      "H 101 100 1 7 3 4 5 100755\t/opt/wrap/cc");
	ck_assert(!r.complete);
	trace_result_free(&r);

	/* A spawned script: the child's interpreter answers. */
	PARSE(&r, "P 100 101 1 7 3 4 5 100755\t/opt/wrap/as",
	      "I 101 1 20 3 4 5 100755\t/opt/sh",
	      "H 101 100 1 20 3 4 5 100755\t/opt/sh");
	ck_assert_msg(r.complete, "incomplete: %s", r.incomplete);
	trace_result_free(&r);
}
END_TEST

/* An exec that failed: the process goes on, nothing is missing. */
START_TEST(parse_exec_failed)
{
	struct trace_result r;
	PARSE(&r, "X 101 1 7 3 4 5 100755\t/usr/bin/noexec",
	      "F 101 13\t");
	ck_assert(r.complete);
	ck_assert_str_eq(r.incomplete, "");
	trace_result_free(&r);

	/* Also a script's whose interpreter would not run. */
	PARSE(&r, "X 101 1 7 3 4 5 100755\t/usr/bin/script",
	      "I 101 1 8 3 4 5 100755\t/usr/bin/interp",
	      "F 101 8\t");
	ck_assert(r.complete);
	trace_result_free(&r);

	/* A failure answers only the exec it follows. */
	PARSE(&r, "X 101 1 7 3 4 5 100755\t/opt/static/launcher",
	      "X 101 1 8 3 4 5 100755\t/usr/bin/noexec",
	      "F 101 13\t");
	ck_assert(!r.complete);
	trace_result_free(&r);
}
END_TEST

/* posix_spawn's child followed by its start record: complete; without
 * it, incomplete. */
START_TEST(parse_spawn)
{
	struct trace_result r;
	PARSE(&r, "P 100 101 1 8 3 4 5 100755\t/usr/bin/as",
	      "H 101 100 1 8 3 4 5 100755\t/usr/bin/as");
	ck_assert_msg(r.complete, "incomplete: %s", r.incomplete);
	ck_assert_str_eq(r.incomplete, "");
	trace_result_free(&r);

	PARSE(&r, "P 100 101 1 8 3 4 5 100755\t/usr/bin/as");
	ck_assert(!r.complete);
	ck_assert_str_ne(r.incomplete, "");
	trace_result_free(&r);
}
END_TEST

/* What observe.c writes for a posix_spawn that worked: one 'P parent
 * child' record with the program's identity (no 'X' under the parent's
 * pid, which would wait for a start record the parent never writes); the
 * child writes its 'H'. Complete, and the program is a file dependency. */
START_TEST(parse_spawn_as_observed)
{
	struct trace_result r;
	PARSE(&r, "H 100 99\t/usr/bin/gcc",
	      "P 100 101 1 8 3 4 5 100755\t/usr/bin/as",
	      "H 101 100 1 8 3 4 5 100755\t/usr/bin/as");
	ck_assert_msg(r.complete, "incomplete: %s", r.incomplete);
	trace_result_free(&r);
}
END_TEST

/* The spawned child's 'H' may reach the file before the parent's 'P': the
 * parent writes 'P' only after posix_spawn returned, while the child runs
 * its constructor concurrently. Still complete. */
START_TEST(parse_spawn_child_first)
{
	struct trace_result r;
	PARSE(&r, "H 100 99\t/usr/bin/gcc",
	      "H 101 100 1 8 3 4 5 100755\t/usr/bin/as",
	      "P 100 101 1 8 3 4 5 100755\t/usr/bin/as");
	ck_assert_msg(r.complete, "incomplete: %s", r.incomplete);
	trace_result_free(&r);
}
END_TEST

/* kiln-exec's watch (K: the kernel started this image in the pid) must be
 * answered by that image's own start record, whether or not a hook saw
 * the exec (execl, fexecve, system(), a raw execve in a static program). */
START_TEST(parse_kernel_images_must_answer)
{
	struct trace_result r;
	PARSE(&r, "K 101 1 9 3 4 5 100755\t/usr/bin/gcc",
	      "H 101 100 1 9 3 4 5 100755\t/usr/bin/gcc");
	ck_assert_msg(r.complete, "incomplete: %s", r.incomplete);
	ck_assert_ptr_nonnull(find_dep(&r, "/usr/bin/gcc"));
	trace_result_free(&r);

	/* An image no hook saw start, and that never said hello. */
	PARSE(&r, "H 100 99 1 9 3 4 5 100755\t/usr/bin/wrapper",
	      "K 101 1 7 3 4 5 100755\t/opt/static/tool");
	ck_assert(!r.complete);
	ck_assert_ptr_nonnull(strstr(r.incomplete, "/opt/static/tool"));
	ck_assert_ptr_nonnull(find_dep(&r, "/opt/static/tool"));
	trace_result_free(&r);

	/* Seen by the hook and by the kernel: one start answers both. */
	PARSE(&r, "X 101 1 9 3 4 5 100755\t/usr/bin/gcc",
	      "K 101 1 9 3 4 5 100755\t/usr/bin/gcc",
	      "H 101 100 1 9 3 4 5 100755\t/usr/bin/gcc");
	ck_assert_msg(r.complete, "incomplete: %s", r.incomplete);
	trace_result_free(&r);

	/* Each exec in a pid is its own image: two starts for two execs. */
	PARSE(&r, "K 101 1 9 3 4 5 100755\t/usr/bin/gcc",
	      "K 101 1 9 3 4 5 100755\t/usr/bin/gcc",
	      "H 101 100 1 9 3 4 5 100755\t/usr/bin/gcc");
	ck_assert(!r.complete);
	trace_result_free(&r);

	/* A watch the kernel refused says so, and changes nothing. */
	PARSE(&r, "U 0\tOperation not permitted");
	ck_assert(r.complete);
	trace_result_free(&r);
}
END_TEST

/* A process whose start no hook saw (system(), a raw execve) still names
 * its program, which is an input. */
START_TEST(parse_start_names_its_program)
{
	struct trace_result r;
	PARSE(&r, "H 105 100 1 30 3 4 5 100755\t/bin/dash");
	ck_assert(r.complete);
	const struct store_dep *d = find_dep(&r, "/bin/dash");
	ck_assert_ptr_nonnull(d);
	ck_assert_uint_eq(d->kind, STORE_DEP_FILE);
	ck_assert_uint_eq(d->ino, 30);
	trace_result_free(&r);
}
END_TEST

/* kiln-exec's 'N' record: not traced as it should be, with the reason. */
START_TEST(parse_not_traced)
{
	struct trace_result r;
	PARSE(&r, "N 0\tkiln-observe.so not found next to kiln-exec",
	      "O 100 1 2 3 4 5 100644\t/usr/include/a.h");
	ck_assert(!r.complete);
	ck_assert_str_eq(r.incomplete, "kiln-observe.so not found next to kiln-exec");
	trace_result_free(&r);
}
END_TEST

/* A variable read with kilnd's own value (or unset in both) is an ENV dep
 * named after it, mode 1 when set, digest of the value. */
START_TEST(parse_env)
{
	struct trace_result r;
	uint8_t want[32];
	PARSE(&r, "E 1 1\tFOO=v", "E 1 0\tBAR", "E 2 1\tFOO=v", "E 1 1\tEMPTY=");
	ck_assert_uint_eq(r.ndeps, 3);
	const struct store_dep *d = find_dep(&r, "FOO");
	ck_assert_ptr_nonnull(d);
	ck_assert_uint_eq(d->kind, STORE_DEP_ENV);
	ck_assert_uint_eq(d->mode, 1);
	util_sha256("v", 1, want);
	ck_assert_mem_eq(d->digest, want, 32);
	d = find_dep(&r, "BAR");
	ck_assert_ptr_nonnull(d);
	ck_assert_uint_eq(d->kind, STORE_DEP_ENV);
	ck_assert_uint_eq(d->mode, 0);
	util_sha256("", 0, want);
	ck_assert_mem_eq(d->digest, want, 32);
	/* Set but empty differs from unset by mode. */
	d = find_dep(&r, "EMPTY");
	ck_assert_ptr_nonnull(d);
	ck_assert_uint_eq(d->mode, 1);
	ck_assert_mem_eq(d->digest, want, 32);
	ck_assert_ptr_null(find_dep(&r, "$FOO"));
	trace_result_free(&r);
}
END_TEST

/* A value kilnd does not have was set by the toolchain for its children:
 * not an input, in any of the three ways it can differ. */
START_TEST(parse_env_set_by_toolchain)
{
	struct trace_result r;
	PARSE(&r, "E 1 1\tFOO=other", "E 1 0\tFOO", "E 1 1\tBAR=x", "E 1 1\tFOO=v=w");
	ck_assert_uint_eq(r.ndeps, 0);
	trace_result_free(&r);
}
END_TEST

/* The variables kiln-exec and kilnd set for the build are never inputs,
 * even when the toolchain saw kilnd's own value. */
START_TEST(parse_env_own_vars)
{
	struct trace_result r;
	PARSE(&r, "E 1 1\tLD_PRELOAD=" OBSERVE_SO,
	      "E 1 1\tKILN_TRACE_DIR=/c/tmp/b-1/trace",
	      "E 1 1\tKILN_TRACE_TOKEN=" TOKEN,
	      "E 1 1\tTMPDIR=/tmp",
	      "E 1 1\tPWD=" BDIR,
	      "E 1 1\tOLDPWD=/home/u",
	      "E 1 1\tKILN_OBSERVE_IGNORE=/var/lock");
	ck_assert_uint_eq(r.ndeps, 0);
	trace_result_free(&r);
}
END_TEST

/* Malformed records are skipped without harm and the ones after them still
 * count; a last record without its NUL is read too. */
/* A record that is not signed with the build's token (an argument made the
 * toolchain write into the trace directory) marks the trace damaged; a
 * clean trace is not. */
START_TEST(parse_unsigned_record_is_damage)
{
	struct trace_result r;
	static const char forged[] = TOKEN " O 1 1 2 3 4 5 100644\t/usr/include/a.h\0"
				     "other O 1 1 2 3 4 5 100644\t/usr/include/b.h\0"
				     "Memory map of the output file\n";
	ck_assert_int_eq(trace_parse(forged, sizeof(forged) - 1, TOKEN, BDIR, skip_list, test_env, &r), 0);
	ck_assert_str_ne(r.damaged, "");
	ck_assert_uint_eq(r.ndeps, 1);
	trace_result_free(&r);

	PARSE(&r, "O 1 1 2 3 4 5 100644\t/usr/include/a.h");
	ck_assert_str_eq(r.damaged, "");
	trace_result_free(&r);
}
END_TEST

START_TEST(parse_malformed)
{
	struct trace_result r;
	char longpath[6000], longname[400], longrec[6100], envrec[420];
	longpath[0] = '/';
	memset(longpath + 1, 'a', sizeof(longpath) - 2);
	longpath[sizeof(longpath) - 1] = '\0';
	snprintf(longrec, sizeof(longrec), "O 1 1 2 3 4 5 100644\t%s", longpath);
	memset(longname, 'N', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	snprintf(envrec, sizeof(envrec), "E 1 0\t%s", longname);
	PARSE(&r, "O 1 1 2 3 4 5 100644/usr/notab",
	      "O\t/usr/nopid",
	      "O \t/usr/nopid2",
	      "O x 1 2 3 4 5 100644\t/usr/badpid",
	      "O 1 1 2 3\t/usr/fewfields",
	      "O 1 1 2 3 4 5 6 7\t/usr/manyfields",
	      "O 1 1 2 x 4 5 100644\t/usr/badfield",
	      "O 1 1 2 3 4 5 100644 \t/usr/trailingspace",
	      "S 1 zz\t/usr/badmode",
	      "P 1\t/usr/nochild",
	      "Z 1\t/usr/unknownkind",
	      "",
	      "\t",
	      "\t/usr/onlytab",
	      "A 1 2\t",
	      "A 1 2\trelative/x.h",
	      longrec,
	      "E 1 1\t=v",
	      "E 1 1\t",
	      envrec,
	      "H",
	      "O 1 1 2 3 4 5 100644\t/usr/include/good.h");
	ck_assert_uint_eq(r.ndeps, 1);
	ck_assert_str_eq(r.deps[0].path, "/usr/include/good.h");
	ck_assert(r.complete);
	trace_result_free(&r);

	/* No NUL after the last record, and an empty trace. */
	static const char tail[] = TOKEN " A 1 2\t/usr/a.h\0" TOKEN " A 1 2\t/usr/b.h";
	ck_assert_int_eq(trace_parse(tail, sizeof(tail) - 1, TOKEN, BDIR, skip_list, test_env, &r), 0);
	ck_assert_uint_eq(r.ndeps, 2);
	ck_assert_ptr_nonnull(find_dep(&r, "/usr/b.h"));
	trace_result_free(&r);
	ck_assert_int_eq(trace_parse("", 0, TOKEN, BDIR, NULL, test_env, &r), 0);
	ck_assert_uint_eq(r.ndeps, 0);
	ck_assert(r.complete);
	trace_result_free(&r);
}
END_TEST

/* One path seen many ways is one dep: the identity of an open wins over a
 * stat seen before it, and later probes keep it. */
START_TEST(parse_duplicates)
{
	struct trace_result r;
	PARSE(&r, "S 100 100644\t/usr/include/a.h",
	      "O 100 1 5 3 4 5 100644\t/usr/include/a.h",
	      "S 101 100644\t/usr/include/a.h",
	      "O 101 1 5 3 4 5 100644\t/usr/include/a.h",
	      "A 100 2\t/usr/include/b.h",
	      "A 101 2\t/usr/include/b.h",
	      "S 100 40755\t/usr/include",
	      "S 101\t/usr/include",
	      "S 101 40755\t/usr/include/.");
	ck_assert_uint_eq(r.ndeps, 3);
	ck_assert_str_eq(r.changed, "");
	const struct store_dep *d = find_dep(&r, "/usr/include/a.h");
	ck_assert_ptr_nonnull(d);
	ck_assert_uint_eq(d->kind, STORE_DEP_FILE);
	ck_assert_uint_eq(d->ino, 5);
	d = find_dep(&r, "/usr/include");
	ck_assert_ptr_nonnull(d);
	ck_assert_uint_eq(d->kind, STORE_DEP_EXISTS);
	ck_assert_uint_eq(d->mode, S_IFDIR | 0755);
	trace_result_free(&r);
}
END_TEST

static Suite *trace_suite(void)
{
	Suite *s = suite_create("trace");
	TCase *tn = tcase_create("normalize");
	tcase_add_test(tn, normalize_climbs_out_of_bdir);
	tcase_add_test(tn, normalize_inside_bdir);
	tcase_add_test(tn, normalize_keeps_dotdot_outside);
	tcase_add_test(tn, normalize_dot_and_slashes);
	tcase_add_test(tn, normalize_into_sibling);
	tcase_add_test(tn, normalize_refuses);
	suite_add_tcase(s, tn);
	TCase *tp = tcase_create("parse");
	tcase_add_test(tp, parse_open_identity);
	tcase_add_test(tp, parse_absent_exists);
	tcase_add_test(tp, parse_probe_error_no_mode);
	tcase_add_test(tp, parse_written_dropped);
	tcase_add_test(tp, parse_read_and_written_stays_an_input);
	tcase_add_test(tp, parse_skipped_paths);
	tcase_add_test(tp, parse_listed_directories);
	tcase_add_test(tp, parse_normalizes_paths);
	tcase_add_test(tp, parse_changed);
	tcase_add_test(tp, parse_exec_started);
	tcase_add_test(tp, parse_exec_not_started);
	tcase_add_test(tp, parse_exec_answered_by_another_image_is_incomplete);
	tcase_add_test(tp, parse_script_answered_by_its_interpreter);
	tcase_add_test(tp, parse_start_names_its_program);
	tcase_add_test(tp, parse_kernel_images_must_answer);
	tcase_add_test(tp, parse_exec_failed);
	tcase_add_test(tp, parse_spawn);
	tcase_add_test(tp, parse_spawn_as_observed);
	tcase_add_test(tp, parse_spawn_child_first);
	tcase_add_test(tp, parse_not_traced);
	tcase_add_test(tp, parse_env);
	tcase_add_test(tp, parse_env_set_by_toolchain);
	tcase_add_test(tp, parse_env_own_vars);
	tcase_add_test(tp, parse_malformed);
	tcase_add_test(tp, parse_unsigned_record_is_damage);
	tcase_add_test(tp, parse_duplicates);
	suite_add_tcase(s, tp);
	return s;
}

int main(void)
{
	return unit_run(trace_suite());
}
