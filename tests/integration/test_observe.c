/*
 * Integration tests of what a build observed (inputs changed while a build
 * runs: test_observe_during.c): every input that went into an
 * artifact must be seen as an input, so that a change to it is never
 * answered with the artifact built from the old content. Each test changes
 * one input in a way the dependency files, the header watches or the
 * toolchain's identity may miss, then requires the new value:
 *
 *   - inputs outside the dependency file: a source named in the arguments,
 *     an assembler .incbin, a relative include leaving the build directory;
 *   - files named by options: a header forced in with -include, a linker
 *     script passed with -Wl;
 *   - inputs that were looked for and not found: a header or a library that
 *     now shadows the one found in a later directory, __has_include;
 *   - changes the watches do not see: a write through another hard link,
 *     through a shared mapping, a mount over the include directory, a large
 *     header rewritten while kilnd was down with size and times kept;
 *   - the assembler found through PATH, which belongs to the toolchain;
 *
 * Mounting needs root: without it the mount test is left out, saying why.
 */
#include "harness.h"
#include "observe_util.h"

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
	start_and_build(&r);
	write_extra(extra, 2);
	expect_twice(&r, 2, 2, "after changing extra.c");
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
	start_and_build(&r);
	harness_write_file(data, "2");
	expect_twice(&r, 2, 2, "after changing data.bin");
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
	oreq_program(&r, a);
	oreq_arg(&r, "-I%s", b);
	start_and_build(&r);
	write_header(harness_path(path, "a/h.h"), 2);
	expect_twice(&r, 2, 2, "after creating a/h.h");
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
	expect_twice(&r, 2, 2, "after creating opt.h");
	oreq_free(&r);
	harness_stop();
}
END_TEST

/*
 * #include "h.h" with a directory h.h.gch next to it: gcc lists it and
 * tries every file in it as a precompiled h.h. A valid .gch dropped into it
 * changes what a fresh build makes (H_VALUE 2 instead of 1): a miss that
 * builds the new value; taken out again, the first entry is a hit again.
 */
START_TEST(gch_directory_listing)
{
	char inc[HARNESS_PATH], gch[HARNESS_PATH], other[HARNESS_PATH], hdr[HARNESS_PATH];
	char tmp[HARNESS_PATH], pch[HARNESS_PATH];
	struct oreq r;

	make_dir(inc, "inc");
	make_dir(gch, "inc/h.h.gch");
	make_dir(other, "other");
	write_header(harness_path(hdr, "inc/h.h"), 1);
	write_header(harness_path(hdr, "other/h.h"), 2);
	const char *cc[] = { "/usr/bin/cc", "-fPIC", "-x", "c-header", hdr, "-o",
			     harness_path(tmp, "other/x.gch"), NULL };
	run_ok(cc);
	oreq_program(&r, inc);
	start_and_build(&r);
	ck_assert_int_eq(rename(tmp, harness_path(pch, "inc/h.h.gch/x.gch")), 0);
	expect_twice(&r, 2, 2, "after a .gch was put into h.h.gch/");
	ck_assert_int_eq(unlink(pch), 0);
	expect(&r, 1, 2, "after the .gch was taken out again");
	oreq_free(&r);
	harness_stop();
}
END_TEST

/*
 * A toolchain wrapper that picks its arguments by listing a directory (a
 * shell glob: bash lists it with opendir): a file added there changes what
 * a fresh build makes, and is a miss.
 */
START_TEST(wrapper_listing_a_directory)
{
	char flags[HARNESS_PATH], wrapper[HARNESS_PATH], path[HARNESS_PATH], arg[HARNESS_PATH + 8];
	char *script;
	struct oreq r;

	make_dir(flags, "flags");
	ck_assert(asprintf(&script, "#!/bin/bash\nn=1\nfor f in %s/*.flag; do\n"
			   "\t[ -e \"$f\" ] && n=$((n + 1))\ndone\n"
			   "exec /usr/bin/cc -DH_VALUE=$n \"$@\"\n", flags) > 0);
	write_script(harness_path(wrapper, "cc-wrapper"), script);
	free(script);
	oreq_init(&r, "int kiln_test_value(void) { return H_VALUE; }\n");
	start_with_wrapper(wrapper, arg, sizeof(arg));
	expect_twice(&r, 1, 1, "no flag files");
	harness_write_file(harness_path(path, "flags/a.flag"), "");
	expect_twice(&r, 2, 2, "after a flag file was added");
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
	start_and_build(&r);
	build_libfoo(a, 2);
	expect_twice(&r, 2, 2, "after putting libfoo.a into the earlier directory");
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
	oreq_program(&r, inc);
	start_and_build(&r);

	ck_assert_int_eq(stat(hdr, &st), 0);
	text = header_text(2, 0);
	ck_assert_int_eq(strlen(text), st.st_size);
	overwrite_in_place(hdr, text, 0);
	free(text);
	restore_times(hdr, &st);
	check_same_stat(link_path, &st);
	ck_assert_int_eq(header_value(link_path), 2);
	expect_twice(&r, 2, 2, "after rewriting the other name of h.h");
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
	oreq_program(&r, inc);
	start_and_build(&r);

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
	oreq_program(&r, inc);
	start_and_build(&r);
	ck_assert_msg(mount("tmpfs", inc, "tmpfs", 0, "size=1m,mode=0700") == 0,
		      "mount tmpfs on %s: %s", inc, strerror(errno));
	write_header(hdr, 2);
	expect_twice(&r, 2, 2, "with a tmpfs mounted over the include directory");

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

/* r: the program of program_text, but including name instead of "h.h". */
static void oreq_including(struct oreq *r, const char *name)
{
	char *text = NULL;

	ck_assert(asprintf(&text, "#include \"%s\"\n\nint kiln_test_value(void)\n{\n"
			   "\treturn H_VALUE;\n}\n", name) > 0);
	oreq_init(r, text);
	free(text);
}

/* #include "../../..//<absolute path of h.h>": relative to the source in
 * the build directory, so the dependency file names it relatively, yet it
 * is a file outside the build like any other header. */
START_TEST(include_path_leaving_the_build_directory)
{
	char inc[HARNESS_PATH], hdr[HARNESS_PATH], up[3 * UP_LEVELS + 1];
	struct oreq r;

	make_dir(inc, "inc");
	write_header(harness_path(hdr, "inc/h.h"), 1);
	char name[sizeof(up) + HARNESS_PATH];
	snprintf(name, sizeof(name), "%s%s", up_to_root(up), hdr);
	oreq_including(&r, name);
	start_and_build(&r);
	header_change_counts(&r, hdr);
}
END_TEST

/* -I../../.. (up to /) resolved in the build directory, and the header
 * named by its absolute path without the leading slash. */
START_TEST(relative_include_dir_leaving_the_build_directory)
{
	char inc[HARNESS_PATH], hdr[HARNESS_PATH], up[3 * UP_LEVELS + 1];
	struct oreq r;

	make_dir(inc, "inc");
	write_header(harness_path(hdr, "inc/h.h"), 1);
	oreq_including(&r, hdr + 1);
	oreq_arg(&r, "-I%s..", up_to_root(up));
	start_and_build(&r);
	header_change_counts(&r, hdr);
}
END_TEST

/* "PATH=<dir>:<the tests' PATH>", malloc'd. */
static char *path_with(const char *dir)
{
	const char *path_now = getenv("PATH");
	char *path_env = NULL;
	ck_assert(asprintf(&path_env, "PATH=%s:%s", dir,
			   path_now ? path_now : "/usr/local/bin:/usr/bin:/bin") > 0);
	return path_env;
}

/* An "as" at rel that touches marker (<dir>/as-ran) and runs the real one. */
static void marking_as(const char *rel, char as[HARNESS_PATH], char marker[HARNESS_PATH])
{
	char *text = NULL;
	harness_path(marker, "as-ran");
	ck_assert(asprintf(&text, "#!/bin/sh\n: > '%s'\nexec /usr/bin/as \"$@\"\n", marker) > 0);
	write_script(harness_path(as, "%s", rel), text);
	free(text);
}

/*
 * gcc runs the assembler and the linker it finds through PATH (its
 * -print-prog-name=as is just "as"). A kilnd started again on the same cache
 * with another "as" first in PATH has another toolchain: the program is
 * built again, with that assembler. The assembler stands for both here.
 */
START_TEST(assembler_and_linker_found_through_path)
{
	char bin[HARNESS_PATH], as[HARNESS_PATH], marker[HARNESS_PATH];
	char *prog = harness_program("through_path", 12), *path_env;
	struct oreq r;

	make_dir(bin, "bin");
	marking_as("bin/as", as, marker);
	path_env = path_with(bin);
	oreq_init(&r, prog);
	free(prog);

	harness_start(NULL);
	expect(&r, 12, 1, "built with the assembler of the normal PATH");
	harness_stop();
	ck_assert_msg(!harness_exists(marker), "the first build already ran %s", as);

	harness_start_env(NULL, (const char *const[]){ path_env, NULL });
	/* builds_started is kept across the restart: one more is a rebuild. */
	expect(&r, 12, 2, "after a restart with another as first in PATH");
	ck_assert_msg(harness_exists(marker), "the program was served without running %s", as);
	oreq_free(&r);
	free(path_env);
	harness_stop();
}
END_TEST

/*
 * A kilnd started again with a PATH that gained a directory (a module
 * loaded) holding no program the toolchain looks for: PATH is no input,
 * what was looked up along it is, so the entry is a hit. The same
 * directory holding an "as" afterwards is a miss (the test above).
 */
START_TEST(path_gained_a_directory_without_toolchain_programs)
{
	char bin[HARNESS_PATH], tool[HARNESS_PATH], as[HARNESS_PATH], marker[HARNESS_PATH];
	char *prog = harness_program("path_gained", 13), *path_env;
	struct oreq r;

	make_dir(bin, "module");
	make_dir(bin, "module/bin");
	write_script(harness_path(tool, "module/bin/some-tool"), "#!/bin/sh\nexit 0\n");
	path_env = path_with(bin);
	oreq_init(&r, prog);
	free(prog);

	harness_start(NULL);
	expect(&r, 13, 1, "built with the normal PATH");
	harness_stop();

	harness_start_env(NULL, (const char *const[]){ path_env, NULL });
	/* builds_started is kept across the restart: still one is a hit. */
	expect(&r, 13, 1, "after a restart with a module's directory first in PATH");
	harness_stop();

	/* The module's directory gets an "as" while kilnd runs: a miss. */
	harness_start_env(NULL, (const char *const[]){ path_env, NULL });
	expect(&r, 13, 1, "again with the module's directory first");
	marking_as("module/bin/as", as, marker);
	expect(&r, 13, 2, "after the module's directory got an as");
	ck_assert_msg(harness_exists(marker), "the program was served without running %s", as);
	oreq_free(&r);
	free(path_env);
	harness_stop();
}
END_TEST

/*
 * A dangling link on PATH (<dir>/pa/as -> <dir>/pb/as, missing): the
 * toolchain finds no "as" there. Once <dir>/pb/as appears the link leads
 * to it, in a directory no watch on the way as written covers: the next
 * request builds again, with that "as".
 */
START_TEST(dangling_link_on_path_comes_alive)
{
	char pa[HARNESS_PATH], pb[HARNESS_PATH], link[HARNESS_PATH], target[HARNESS_PATH];
	char as[HARNESS_PATH], marker[HARNESS_PATH];
	char *prog = harness_program("dangling", 14), *path_env;
	struct oreq r;

	make_dir(pa, "pa");
	make_dir(pb, "pb");
	harness_path(target, "pb/as");
	ck_assert_int_eq(symlink(target, harness_path(link, "pa/as")), 0);
	path_env = path_with(pa);
	oreq_init(&r, prog);
	free(prog);
	harness_start_env(NULL, (const char *const[]){ path_env, NULL });
	expect(&r, 14, 1, "built with the link dangling");
	expect(&r, 14, 1, "a hit");
	marking_as("pb/as", as, marker);
	expect(&r, 14, 2, "after the link's target appeared");
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
	oreq_program(&r, inc);
	harness_start(NULL);
	expect_twice(&r, 1, 1, "first request");
	harness_stop();

	ck_assert_int_eq(stat(hdr, &st), 0);
	text = header_text(2, pad);
	overwrite_in_place(hdr, text, O_TRUNC);
	free(text);
	restore_times(hdr, &st);
	check_same_stat(hdr, &st);

	harness_start(NULL);
	/* builds_started is kept across the restart: one more is a rebuild. */
	expect(&r, 2, 2, "after the rewrite, in the restarted kilnd");
	expect(&r, 2, 2, "again after the rewrite");
	oreq_free(&r);
	harness_stop();
}
END_TEST

/* A header forced in with -include, named by an absolute path: read by cc1
 * like any header, though the source never names it. */
START_TEST(forced_include_changed)
{
	static const char prog[] =
		"int kiln_test_value(void)\n"
		"{\n"
		"\treturn H_VALUE;\n"
		"}\n";
	char inc[HARNESS_PATH], hdr[HARNESS_PATH];
	struct oreq r;

	make_dir(inc, "forced");
	write_header(harness_path(hdr, "forced/h.h"), 1);
	oreq_init(&r, prog);
	oreq_arg(&r, "-include");
	oreq_arg(&r, "%s", hdr);
	start_and_build(&r);
	write_header(hdr, 2);
	expect(&r, 2, 2, "after changing the forced header");
	oreq_free(&r);
	harness_stop();
}
END_TEST

/* A linker script named through -Wl: read by ld alone, never by the
 * compiler; it defines the symbol the program returns. */
START_TEST(linker_script_changed)
{
	static const char prog[] =
		"extern char kiln_script_value[];\n"
		"\n"
		"int kiln_test_value(void)\n"
		"{\n"
		"\treturn (int)(long)kiln_script_value;\n"
		"}\n";
	char dir[HARNESS_PATH], script[HARNESS_PATH];
	struct oreq r;

	make_dir(dir, "ld");
	harness_write_file(harness_path(script, "ld/values.ld"), "kiln_script_value = 1;\n");
	oreq_init(&r, prog);
	oreq_arg(&r, "-Wl,%s", script);
	start_and_build(&r);
	harness_write_file(script, "kiln_script_value = 2;\n");
	expect(&r, 2, 2, "after changing the linker script");
	oreq_free(&r);
	harness_stop();
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

/* Adds a test case holding one test (see harness_tcase). */
int main(void)
{
	Suite *s = suite_create("observe");
	char why[256];

	harness_add(s, "source_in_arguments", source_path_in_arguments, 90);
	harness_add(s, "incbin", assembler_incbin_input, 90);
	harness_add(s, "shadowing_header", header_shadowing_an_earlier_include_dir, 90);
	harness_add(s, "has_include", has_include_absent_then_present, 90);
	harness_add(s, "gch_listing", gch_directory_listing, 90);
	harness_add(s, "wrapper_listing", wrapper_listing_a_directory, 90);
	harness_add(s, "shadowing_library", library_shadowing_an_earlier_library_dir, 90);
	harness_add(s, "hard_link", hard_link_rewritten_elsewhere, 90);
	harness_add(s, "shared_mapping", write_through_shared_mapping, 90);
	if (can_mount(why, sizeof(why))) {
		/* Its teardown runs before the harness's, which removes the
		 * directory (Check runs teardowns in reverse order). */
		tcase_add_unchecked_fixture(harness_add(s, "mount", mount_over_include_dir, 90), NULL,
					    unmount_teardown);
	} else {
		printf("SKIP mount_over_include_dir: %s\n", why);
	}
	harness_add(s, "forced_include", forced_include_changed, 90);
	harness_add(s, "linker_script", linker_script_changed, 90);
	harness_add(s, "include_leaving_build", include_path_leaving_the_build_directory, 90);
	harness_add(s, "include_dir_leaving_build", relative_include_dir_leaving_the_build_directory, 90);
	harness_add(s, "as_through_path", assembler_and_linker_found_through_path, 90);
	harness_add(s, "path_gained_a_directory", path_gained_a_directory_without_toolchain_programs, 120);
	harness_add(s, "dangling_link_on_path", dangling_link_on_path_comes_alive, 120);
	harness_add(s, "large_header_restart", large_header_rewritten_with_same_size_and_mtime_after_restart,
	    90);
	return harness_main(s);
}
