/*
 * What kiln cannot observe is never a hit that can go wrong: a program of
 * the toolchain that runs without the interposer (a static launcher that
 * execs the compiler in its own pid, a Go program, a compiler started with
 * LD_PRELOAD removed) makes the build served and not cached; a script's
 * `#!` interpreter is an input like the script; a file the toolchain read
 * stays an input whatever else it did to it (a refused or empty write).
 * Each case changes what the build would read and expects the new value.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "observe_util.h"

/* A launcher that reads one compiler argument from the file FLAGS and
 * execs the compiler with it in front of its own arguments. RAW reads it
 * with system calls of its own, past libc (as Go does); GO_NOTE gives the
 * program the build ID note the Go linker writes into every binary. */
static const char launcher_text[] =
	"#include <fcntl.h>\n"
	"#include <string.h>\n"
	"#include <sys/syscall.h>\n"
	"#include <unistd.h>\n"
	"#ifdef GO_NOTE\n"
	"__attribute__((used, section(\".note.go.buildid\"), aligned(4)))\n"
	"static const struct { unsigned nsz, dsz, type; char name[4]; char desc[8]; }\n"
	"\tgo_note = { 4, 8, 4, \"Go\", \"buildid!\" };\n"
	"#endif\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"\tstatic char flag[4096], *args[256];\n"
	"\tint n = 0;\n"
	"#ifdef RAW\n"
	"\tint fd = (int)syscall(SYS_openat, AT_FDCWD, FLAGS, O_RDONLY);\n"
	"\tlong got = fd >= 0 ? syscall(SYS_read, fd, flag, sizeof(flag) - 1) : 0;\n"
	"#else\n"
	"\tint fd = open(FLAGS, O_RDONLY);\n"
	"\tlong got = fd >= 0 ? read(fd, flag, sizeof(flag) - 1) : 0;\n"
	"#endif\n"
	"\tflag[got > 0 ? got : 0] = '\\0';\n"
	"\tflag[strcspn(flag, \"\\n\")] = '\\0';\n"
	"\targs[n++] = \"/usr/bin/cc\";\n"
	"\tif (flag[0] != '\\0')\n"
	"\t\targs[n++] = flag;\n"
	"\tfor (int i = 1; i < argc && n < 255; i++)\n"
	"\t\targs[n++] = argv[i];\n"
	"\targs[n] = 0;\n"
	"\texecv(args[0], args);\n"
	"\treturn 127;\n"
	"}\n";

/* Two include directories, h.h defining 1 in the first and 2 in the
 * second, and a flags file naming the first. */
struct two_incs {
	char inc1[HARNESS_PATH], inc2[HARNESS_PATH], flags[HARNESS_PATH];
};

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ck_assert_msg(f != NULL, "cannot write %s", path);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
}

static void two_incs(struct two_incs *t)
{
	char hdr[HARNESS_PATH], flag[HARNESS_PATH + 8];
	make_dir(t->inc1, "inc1");
	make_dir(t->inc2, "inc2");
	write_header(harness_path(hdr, "inc1/h.h"), 1);
	write_header(harness_path(hdr, "inc2/h.h"), 2);
	harness_path(t->flags, "flags");
	snprintf(flag, sizeof(flag), "-I%s\n", t->inc1);
	write_text(t->flags, flag);
}

/* The flags file names the second directory now (renamed into place:
 * a new file, as an editor writes it). */
static void flags_to_second(const struct two_incs *t)
{
	char flag[HARNESS_PATH + 8], tmp[HARNESS_PATH + 8];
	snprintf(flag, sizeof(flag), "-I%s\n", t->inc2);
	snprintf(tmp, sizeof(tmp), "%s.new", t->flags);
	write_text(tmp, flag);
	ck_assert_int_eq(rename(tmp, t->flags), 0);
}

/* Compiles the launcher into path with extra cc arguments (NULL-ended). */
static void build_launcher(const char *path, const struct two_incs *t, const char *a1,
			   const char *a2)
{
	char src[HARNESS_PATH + 8], def[HARNESS_PATH + 16];
	snprintf(src, sizeof(src), "%s.c", path);
	write_text(src, launcher_text);
	snprintf(def, sizeof(def), "-DFLAGS=\"%s\"", t->flags);
	const char *argv[] = { "/usr/bin/cc", "-O1", def, "-o", path, src, a1, a2, NULL };
	run_ok(argv);
}

/* Each request builds and gets what it reads now; nothing is indexed;
 * status counts the builds as unobserved. */
static void served_not_cached(const struct oreq *r, const struct two_incs *t)
{
	expect(r, 1, 1, "first request");
	flags_to_second(t);
	expect(r, 2, 2, "after the flags file named another include directory");
	expect(r, 2, 3, "asked again");
	cJSON *st = harness_status();
	ck_assert_int_eq(harness_num(st, "unobserved"), 3);
	ck_assert_int_eq(harness_num(st, "uncacheable"), 3);
	ck_assert_int_eq(harness_num(st, "entries"), 0);
	cJSON_Delete(st);
}

static void start_launcher(const char *launcher)
{
	char tc[HARNESS_PATH + 8];
	start_with_wrapper(launcher, tc, sizeof(tc));
}

/* A statically linked launcher (no interposer) that reads a flags file
 * and execs the observed compiler in its own pid: the compiler's start
 * does not answer for the launcher's image, and what it read is unknown. */
START_TEST(static_launcher_exec_is_not_cached)
{
	char launcher[HARNESS_PATH];
	struct two_incs t;
	struct oreq r;

	two_incs(&t);
	build_launcher(harness_path(launcher, "launcher"), &t, "-static", NULL);
	oreq_init(&r, program_text);
	start_launcher(launcher);
	served_not_cached(&r, &t);

	/* The reply says why, and how to fix it. */
	struct harness_result res = harness_in_child(&r.req, NULL);
	check_result(&res, 2, "a fourth request");
	char *log = NULL;
	ck_assert_int_eq(harness_cli(&log, NULL, "status", NULL), 0);
	ck_assert_msg(strstr(log, "not observed") != NULL, "status names no unobserved builds:\n%s",
		      log);
	free(log);
	oreq_free(&r);
	harness_stop();
}
END_TEST

/* A dynamically linked wrapper that starts the static launcher with
 * fexecve, which glibc runs past every exported exec function (no hook
 * records it): only the kernel's word (kiln-exec's watch) tells that an
 * image ran that never said hello. */
static const char fexecve_text[] =
	"#include <fcntl.h>\n"
	"#include <unistd.h>\n"
	"extern char **environ;\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"\tint fd = open(LAUNCHER, O_RDONLY | O_CLOEXEC);\n"
	"\t(void)argc;\n"
	"\tfexecve(fd, argv, environ);\n"
	"\treturn 127;\n"
	"}\n";

START_TEST(static_launcher_started_past_the_hooks_is_not_cached)
{
	char launcher[HARNESS_PATH], wrapper[HARNESS_PATH], src[HARNESS_PATH + 8],
		def[HARNESS_PATH + 16];
	struct two_incs t;
	struct oreq r;

	two_incs(&t);
	build_launcher(harness_path(launcher, "launcher"), &t, "-static", NULL);
	snprintf(src, sizeof(src), "%s.c", harness_path(wrapper, "cc-fexecve"));
	write_text(src, fexecve_text);
	snprintf(def, sizeof(def), "-DLAUNCHER=\"%s\"", launcher);
	const char *argv[] = { "/usr/bin/cc", "-O1", def, "-o", wrapper, src, NULL };
	run_ok(argv);
	oreq_init(&r, program_text);
	start_launcher(wrapper);
	served_not_cached(&r, &t);
	oreq_free(&r);
	harness_stop();
}
END_TEST

/* A program carrying Go's build ID note makes its system calls past libc:
 * this one reads its flags file with raw system calls, unseen by any
 * hook, so only the note tells; the build is not cached. */
START_TEST(go_program_is_not_cached)
{
	char launcher[HARNESS_PATH];
	struct two_incs t;
	struct oreq r;

	two_incs(&t);
	build_launcher(harness_path(launcher, "launcher"), &t, "-DRAW", "-DGO_NOTE");
	oreq_init(&r, program_text);
	start_launcher(launcher);
	served_not_cached(&r, &t);
	oreq_free(&r);
	harness_stop();
}
END_TEST

/* A wrapper that starts the compiler with LD_PRELOAD removed: the
 * compiler's start is never recorded; served and not cached, the reply
 * saying why. */
START_TEST(compiler_started_without_the_interposer_is_not_cached)
{
	char wrapper[HARNESS_PATH], body[2 * HARNESS_PATH + 64];
	struct two_incs t;
	struct oreq r;

	two_incs(&t);
	snprintf(body, sizeof(body), "#!/bin/sh\nexec env -u LD_PRELOAD /usr/bin/cc $(cat %s) \"$@\"\n",
		 t.flags);
	write_script(harness_path(wrapper, "cc-untraced"), body);
	oreq_init(&r, program_text);
	start_launcher(wrapper);
	served_not_cached(&r, &t);
	cJSON *st = harness_status();
	const cJSON *tcs = cJSON_GetObjectItemCaseSensitive(st, "toolchains");
	ck_assert_str_eq(harness_str(cJSON_GetArrayItem(tcs, 0), "observe"), "preload");
	cJSON_Delete(st);
	oreq_free(&r);
	harness_stop();
}
END_TEST

/* The compiler's dependency file holds no path it probed and did not
 * find: a header added to an earlier -I directory must still be seen
 * when the compiler ran unobserved (until format 6 the build was cached
 * from that file, and served stale). */
START_TEST(header_added_to_an_earlier_directory_is_seen_unobserved)
{
	char wrapper[HARNESS_PATH], inc1[HARNESS_PATH], inc2[HARNESS_PATH], hdr[HARNESS_PATH];
	struct oreq r;

	make_dir(inc1, "inc1");
	make_dir(inc2, "inc2");
	write_header(harness_path(hdr, "inc2/h.h"), 2);
	write_script(harness_path(wrapper, "cc-untraced"),
		     "#!/bin/sh\nexec env -u LD_PRELOAD /usr/bin/cc \"$@\"\n");
	oreq_init(&r, program_text);
	oreq_arg(&r, "-I%s", inc1);
	oreq_arg(&r, "-I%s", inc2);
	start_launcher(wrapper);
	expect(&r, 2, 1, "first request");
	write_header(harness_path(hdr, "inc1/h.h"), 1);
	expect(&r, 1, 2, "after h.h appeared in the first include directory");
	oreq_free(&r);
	harness_stop();
}
END_TEST

/* Copies the file from to to (a new inode), executable. */
static void copy_program(const char *from, const char *to)
{
	char tmp[HARNESS_PATH + 8];
	snprintf(tmp, sizeof(tmp), "%s.new", to);
	const char *argv[] = { "/bin/cp", from, tmp, NULL };
	run_ok(argv);
	ck_assert_int_eq(rename(tmp, to), 0);
}

/* A wrapper script whose `#!` names a shell of its own: the shell is an
 * input like the script, so replacing it (dash for bash) is a miss. */
START_TEST(script_interpreter_is_an_input)
{
	char shell[HARNESS_PATH], wrapper[HARNESS_PATH], body[HARNESS_PATH + 64], inc[HARNESS_PATH],
		hdr[HARNESS_PATH];
	struct oreq r;

	make_dir(inc, "inc");
	write_header(harness_path(hdr, "inc/h.h"), 1);
	copy_program("/bin/dash", harness_path(shell, "sh"));
	snprintf(body, sizeof(body), "#!%s\nexec /usr/bin/cc \"$@\"\n", shell);
	write_script(harness_path(wrapper, "cc-wrap"), body);
	oreq_program(&r, inc);
	start_launcher(wrapper);
	expect_twice(&r, 1, 1, "first request");

	cJSON *ls = harness_cli_json("ls", NULL);
	cJSON *e = harness_cli_json("show", harness_str(cJSON_GetArrayItem(ls, 0), "key"), NULL);
	const cJSON *paths = cJSON_GetObjectItemCaseSensitive(e, "deps");
	bool listed = false;
	for (int i = 0; i < cJSON_GetArraySize(paths); i++)
		listed = listed || strcmp(cJSON_GetStringValue(cJSON_GetArrayItem(paths, i)), shell) == 0;
	ck_assert_msg(listed, "the entry does not list the interpreter %s", shell);
	cJSON_Delete(e);
	cJSON_Delete(ls);

	copy_program("/bin/bash", shell);
	expect_twice(&r, 1, 2, "after the interpreter was replaced");
	oreq_free(&r);
	harness_stop();
}
END_TEST

/* A wrapper that reads its flags file and also opens it for writing
 * (appending nothing): the path stays an input, whether the write is
 * refused (Landlock) or allowed (--no-landlock). */
static void read_and_written(const char *extra)
{
	char wrapper[HARNESS_PATH], body[3 * HARNESS_PATH + 64], tc[HARNESS_PATH + 8];
	struct two_incs t;
	struct oreq r;

	two_incs(&t);
	snprintf(body, sizeof(body),
		 "#!/bin/sh\nf=$(cat %s)\n: >> %s 2>/dev/null\nexec /usr/bin/cc $f \"$@\"\n", t.flags,
		 t.flags);
	write_script(harness_path(wrapper, "cc-flags"), body);
	oreq_init(&r, program_text);
	snprintf(tc, sizeof(tc), "cc=%s", wrapper);
	harness_start("--toolchain", tc, extra, NULL);
	expect_twice(&r, 1, 1, "first request");
	flags_to_second(&t);
	expect_twice(&r, 2, 2, "after the flags file named another include directory");
	oreq_free(&r);
	harness_stop();
}

START_TEST(flags_file_read_and_refused_a_write_is_an_input)
{
	read_and_written(NULL);
}
END_TEST

START_TEST(flags_file_read_and_opened_for_writing_is_an_input)
{
	read_and_written("--no-landlock");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("unobserved");

	harness_add(s, "static_launcher", static_launcher_exec_is_not_cached, 120);
	harness_add(s, "go_program", go_program_is_not_cached, 120);
	harness_add(s, "past_the_hooks", static_launcher_started_past_the_hooks_is_not_cached, 120);
	harness_add(s, "preload_removed", compiler_started_without_the_interposer_is_not_cached, 120);
	harness_add(s, "earlier_dir", header_added_to_an_earlier_directory_is_seen_unobserved, 120);
	harness_add(s, "interpreter", script_interpreter_is_an_input, 120);
	harness_add(s, "read_refused_write", flags_file_read_and_refused_a_write_is_an_input, 120);
	harness_add(s, "read_and_written", flags_file_read_and_opened_for_writing_is_an_input, 120);
	return harness_main(s);
}
