/*
 * Integration tests of the confinement of compiler runs: arguments that
 * write elsewhere are refused by the allow-list (with Landlock and without);
 * where the kernel has Landlock, a compiler, its assembler and linker, and
 * the load check's constructors write only in their build directory (and in
 * directories kilnd was told with --allow-write) whatever they do; code into
 * the toolchain needs --allow-toolchain-code; kiln status says what is in
 * force; kilnd still builds without Landlock (--no-landlock).
 */
#include "harness.h"

#include <errno.h>
#include <linux/landlock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Whether this kernel has Landlock (what kilnd asks at start). */
static bool kernel_has_landlock(void)
{
	return syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) >= 1;
}

/* A directory outside the test's (which kilnd lets compilers write in). */
static void outside_dir(char buf[HARNESS_PATH])
{
	snprintf(buf, HARNESS_PATH, "/tmp/kiln-outside-XXXXXX");
	ck_assert_msg(mkdtemp(buf) != NULL, "mkdtemp: %s", strerror(errno));
}

static void remove_outside(const char *dir)
{
	char cmd[HARNESS_PATH + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* kiln build of src with one compiler argument (split at a space into
 * two); the exit status, and the CLI's stderr in *err when err is not NULL. */
static int build_with_err(const char *src, const char *arg, char **err)
{
	char first[HARNESS_PATH * 2], *second = NULL;
	snprintf(first, sizeof(first), "%s", arg);
	char *space = strchr(first, ' ');
	if (space != NULL) {
		*space = '\0';
		second = space + 1;
	}
	return harness_cli(NULL, err, "build", src, "--", first, second, NULL);
}

static int build_with(const char *src, const char *arg)
{
	return build_with_err(src, arg, NULL);
}

/*
 * Sends a get whose arguments are arg (split at a space) straight to the
 * daemon, past the client library's own checks; returns the reply's error
 * code ("" on success) and puts its message into msg.
 */
static const char *raw_get(const char *arg, char msg[512])
{
	static char code[32];
	char first[HARNESS_PATH * 2];
	snprintf(first, sizeof(first), "%s", arg);
	char *space = strchr(first, ' ');
	if (space != NULL)
		*space++ = '\0';
	cJSON *req = cJSON_CreateObject(), *args = cJSON_AddArrayToObject(req, "args");
	cJSON *srcs = cJSON_AddArrayToObject(req, "sources"), *src = cJSON_CreateObject();
	cJSON_AddStringToObject(req, "op", "get");
	cJSON_AddNumberToObject(req, "id", 2);
	cJSON_AddItemToArray(args, cJSON_CreateString(first));
	if (space != NULL)
		cJSON_AddItemToArray(args, cJSON_CreateString(space));
	cJSON_AddStringToObject(src, "name", "raw.c");
	cJSON_AddStringToObject(src, "text", "int raw_value(void) { return 7; }\n");
	cJSON_AddItemToArray(srcs, src);
	char *text = cJSON_PrintUnformatted(req);
	cJSON_Delete(req);

	int fd = harness_raw_connect(harness.socket);
	harness_raw_send(fd, "{\"op\":\"hello\",\"id\":1,\"proto\":3,\"client\":\"kiln-tests\"}");
	cJSON_Delete(harness_raw_recv(fd));
	harness_raw_send(fd, text);
	free(text);
	cJSON *r = harness_raw_recv(fd);
	close(fd);
	ck_assert_msg(r != NULL, "no reply to a get with %s", arg);
	snprintf(code, sizeof(code), "%s", cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok"))
					   ? "" : harness_error_code(r));
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
	snprintf(msg, 512, "%s", e != NULL ? harness_str(e, "message") : "");
	cJSON_Delete(r);
	return code;
}

/* Options that write a file where the client says (the list, then
 * others of their families): each text before the outside directory and
 * after it. */
static const char *const write_opts[][2] = {
	{ "-Wl,-Map=", "/map" }, { "-fdump-tree-original=", "/dump" },
	{ "-fopt-info-all=", "/opt" }, { "-fdump-final-insns=", "/final" },
	{ "-Wa,-adhln=", "/listing" }, { "-Xassembler -a=", "/listing2" },
	{ "-fprofile-note=", "/note" }, { "-aux-info ", "/aux" },
	{ "-Wl,--dependency-file=", "/dep" }, { "-fcallgraph-info -dumpdir ", "/" },
	{ "-save-temps=obj -dumpdir ", "/" }, { "-Wa,--MD,", "/md" },
	{ "-Xlinker -Map=", "/map2" }, { "-Wl,--out-implib=", "/implib" },
	{ "-fdump-rtl-expand=", "/rtl" }, { "-fdump-ipa-all=", "/ipa" },
	{ "-fopt-info-vec-missed=", "/vec" }, { "-fprofile-generate=", "" },
	{ "-Wp,-MD,", "/cppdeps" }, { "-Wl,-Map,", "/map3" }, { "-J", "" },
	{ "-fstack-usage -dumpdir ", "/" }, { "-Xlinker --print-map -Xlinker -Map=", "/map4" },
	{ "-Wl,-rpath,/x,-o,", "/out" }, { "-Xcompiler -Wl,-Map,", "/map5" },
};

/* Builds with each option naming dir; none may write there, and each is
 * refused with a sentence that names it. */
static void expect_refused_and_nothing_written(const char *src, const char *dir)
{
	char arg[HARNESS_PATH * 2];
	for (size_t i = 0; i < sizeof(write_opts) / sizeof(write_opts[0]); i++) {
		char *err = NULL;
		snprintf(arg, sizeof(arg), "%s%s%s", write_opts[i][0], dir, write_opts[i][1]);
		int rc = build_with_err(src, arg, &err);
		int n = harness_count_dir(dir);
		if (n != 0)
			remove_outside(dir);
		ck_assert_msg(n == 0, "with %s, the compiler wrote %d file(s) into %s", arg, n, dir);
		ck_assert_msg(rc != 0, "a build with %s succeeded", arg);
		ck_assert_msg(err != NULL && strstr(err, "is not allowed") != NULL,
			      "the refusal of %s does not say so:\n%s", arg, err ? err : "");
		free(err);
		/* The daemon refuses it too, whatever the client checked. */
		char msg[512];
		const char *code = raw_get(arg, msg);
		ck_assert_msg(!strcmp(code, "bad_arg") && strstr(msg, "is not allowed") != NULL,
			      "the daemon answered %s to %s: %s", code, arg, msg);
		ck_assert_int_eq(harness_count_dir(dir), 0);
	}
}

START_TEST(writes_outside_the_build_directory_are_refused)
{
	char src[HARNESS_PATH], out[HARNESS_PATH];

	harness_write_file(harness_path(src, "prog.c"), "int prog_value(void) { return 1; }\n");
	outside_dir(out);
	harness_start(NULL);
	expect_refused_and_nothing_written(src, out);
	ck_assert_int_eq(harness_cli(NULL, NULL, "build", src, NULL), 0);
	harness_stop();
	/* Without Landlock the argument checks are the fence: the same. */
	harness_start("--no-landlock", NULL);
	expect_refused_and_nothing_written(src, out);
	ck_assert_int_eq(harness_cli(NULL, NULL, "build", src, NULL), 0);
	harness_stop();
	remove_outside(out);
}
END_TEST

/* A toolchain wrapper (kilnd's configuration, not the client's) that
 * writes where it likes when it sees -DKILN_WRAPPER_WRITE, then compiles. */
static void write_wrapper(const char *path, const char *target)
{
	char *text = NULL;
	ck_assert(asprintf(&text,
			   "#!/bin/sh\n"
			   "for a in \"$@\"; do\n"
			   "\t[ \"$a\" = -DKILN_WRAPPER_WRITE ] && echo x > '%s' 2>/dev/null\n"
			   "done\n"
			   "exec /usr/bin/cc \"$@\"\n", target) > 0);
	harness_write_file(path, text);
	free(text);
	ck_assert_int_eq(chmod(path, 0755), 0);
}

/* Landlock is the fence that holds whatever the arguments: a compiler that
 * writes elsewhere on its own is stopped where the kernel has it, and is not
 * where kilnd runs without it. Directories named with --allow-write (the
 * harness names the test's) stay writable. */
START_TEST(landlock_stops_a_compiler_that_writes_elsewhere)
{
	char src[HARNESS_PATH], out[HARNESS_PATH], target[HARNESS_PATH + 8];
	char wrapper[HARNESS_PATH], allowed[HARNESS_PATH], tc[HARNESS_PATH + 8];

	if (!kernel_has_landlock()) {
		printf("landlock_stops_a_compiler_that_writes_elsewhere: no Landlock here\n");
		return;
	}
	harness_write_file(harness_path(src, "prog.c"), "int prog_value(void) { return 1; }\n");
	outside_dir(out);
	snprintf(target, sizeof(target), "%s/w", out);
	write_wrapper(harness_path(wrapper, "wrap.sh"), target);
	snprintf(tc, sizeof(tc), "cc=%s", wrapper);
	harness_start("--toolchain", tc, NULL);
	ck_assert_int_eq(build_with(src, "-DKILN_WRAPPER_WRITE -DRUN=1"), 0);
	ck_assert_msg(!harness_exists(target), "the compiler wrote outside its build directory");
	harness_stop();

	harness_start("--toolchain", tc, "--no-landlock", NULL);
	ck_assert_int_eq(build_with(src, "-DKILN_WRAPPER_WRITE -DRUN=2"), 0);
	ck_assert_msg(harness_exists(target), "without Landlock the wrapper should have written");
	harness_stop();
	remove_outside(out);

	write_wrapper(wrapper, harness_path(allowed, "allowed"));
	harness_start("--toolchain", tc, NULL);
	ck_assert_int_eq(build_with(src, "-DKILN_WRAPPER_WRITE -DRUN=3"), 0);
	ck_assert_msg(harness_exists(allowed), "nothing written into the --allow-write directory");
	harness_stop();
}
END_TEST

/* Code into the toolchain: refused with a sentence naming the argument and
 * the kilnd option, unless kilnd was started with --allow-toolchain-code. */
START_TEST(code_into_the_toolchain_needs_the_administrators_consent)
{
	static const char *const code[] = {
		"-fplugin=/tmp/kiln-no-such-plugin.so", "-B/tmp/kiln-evil", "-B /tmp/kiln-evil",
		"--sysroot=/", "-specs=/dev/null", "-Wl,-plugin,/tmp/kiln-x.so",
		"-wrapper /bin/true", "-fuse-ld=/tmp/kiln-ld", "-Xlinker -plugin",
		"-iplugindir=/tmp", "-fplugin-arg-x-y=1",
	};
	char src[HARNESS_PATH], *out = NULL;

	harness_write_file(harness_path(src, "prog.c"), "int prog_value(void) { return 1; }\n");
	harness_start(NULL);
	for (size_t i = 0; i < sizeof(code) / sizeof(code[0]); i++) {
		char *err = NULL;
		ck_assert_msg(build_with_err(src, code[i], &err) != 0, "%s was accepted", code[i]);
		ck_assert_msg(err != NULL && strstr(err, "loads code into") != NULL &&
			      strstr(err, "--allow-toolchain-code") != NULL,
			      "the refusal of %s does not say why:\n%s", code[i], err ? err : "");
		free(err);
		char msg[512];
		const char *rc = raw_get(code[i], msg);
		ck_assert_msg(!strcmp(rc, "bad_arg") && strstr(msg, "--allow-toolchain-code") != NULL,
			      "the daemon answered %s to %s: %s", rc, code[i], msg);
	}
	ck_assert_int_eq(harness_cli(&out, NULL, "status", NULL), 0);
	ck_assert_msg(strstr(out, "toolchain code: refused") != NULL, "status:\n%s", out);
	free(out);
	harness_stop();

	harness_start("--allow-toolchain-code", NULL);
	cJSON *st = harness_status();
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(st, "confinement");
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "toolchain_code")));
	cJSON_Delete(st);
	ck_assert_int_eq(build_with(src, "--sysroot=/"), 0);
	char msg[512];
	ck_assert_str_eq(raw_get("-B /usr/bin/", msg), "");
	/* Consent covers code, not writes elsewhere. */
	ck_assert_int_ne(build_with(src, "-Wl,-Map=/tmp/kiln-map"), 0);
	harness_stop();
}
END_TEST

/*
 * nvcc runs its host compiler and linker through sh -c: an argument with
 * shell syntax would run a command. kilnd refuses such arguments for nvcc
 * toolchains (the CLI's own check, which does not know the toolchain, lets
 * them through to the daemon).
 */
START_TEST(nvcc_arguments_cannot_reach_its_shell)
{
	static const char *const hostile[][2] = {
		{ "-DB=$(touch${IFS}", ")" }, { "-Xcompiler -DA=`touch${IFS}", "`" },
		{ "-Xlinker -soname=S`touch${IFS}", "`" }, { "-UU`touch${IFS}", "`" },
	};
	char src[HARNESS_PATH], out[HARNESS_PATH], target[HARNESS_PATH + 8];
	char arg[HARNESS_PATH * 2], tc[HARNESS_PATH + 8];

	if (getenv("KILN_TEST_NVCC") == NULL) {
		printf("nvcc_arguments_cannot_reach_its_shell: no nvcc here\n");
		return;
	}
	harness_write_file(harness_path(src, "prog.cu"), "extern \"C\" int prog_value(void) { return 1; }\n");
	outside_dir(out);
	snprintf(target, sizeof(target), "%s/ran", out);
	snprintf(tc, sizeof(tc), "nvcc=%s", getenv("KILN_TEST_NVCC"));
	harness_start("--toolchain", tc, "--cuda-arch", "sm_80", NULL);
	for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
		char *err = NULL;
		snprintf(arg, sizeof(arg), "%s%s%s", hostile[i][0], target, hostile[i][1]);
		char first[HARNESS_PATH * 2], *second = NULL;
		snprintf(first, sizeof(first), "%s", arg);
		char *space = strchr(first, ' ');
		if (space != NULL) {
			*space = '\0';
			second = space + 1;
		}
		int rc = harness_cli(NULL, &err, "build", "--toolchain", "nvcc", src, "--", first,
				     second, NULL);
		ck_assert_msg(rc != 0 && err != NULL && strstr(err, "through a shell") != NULL,
			      "%s: exit %d\n%s", arg, rc, err ? err : "");
		free(err);
		ck_assert_msg(!harness_exists(target), "%s ran a command", arg);
	}
	harness_stop();
	remove_outside(out);
}
END_TEST

/* The load check runs the artifact's constructors (in kiln-exec, not in
 * kilnd): they are confined too. The CLI's build loads nothing itself. */
START_TEST(the_load_checks_constructors_cannot_write_outside)
{
	char src[HARNESS_PATH], out[HARNESS_PATH], *text = NULL;

	if (!kernel_has_landlock()) {
		printf("the_load_checks_constructors_cannot_write_outside: no Landlock here\n");
		return;
	}
	outside_dir(out);
	ck_assert(asprintf(&text,
			   "#include <stdio.h>\n"
			   "__attribute__((constructor)) static void touch(void)\n"
			   "{\n"
			   "\tFILE *f = fopen(\"%s/ctor\", \"w\");\n"
			   "\tif (f != NULL)\n"
			   "\t\tfclose(f);\n"
			   "}\n"
			   "int prog_value(void) { return 1; }\n", out) > 0);
	harness_write_file(harness_path(src, "ctor.c"), text);
	free(text);
	harness_start(NULL);
	ck_assert_int_eq(harness_cli(NULL, NULL, "build", src, NULL), 0);
	int n = harness_count_dir(out);
	remove_outside(out);
	ck_assert_msg(n == 0, "the load check's constructor wrote outside the build directory");
	harness_stop();
}
END_TEST

/* kiln status says whether compilers are confined. */
START_TEST(status_says_whether_compilers_are_confined)
{
	char src[HARNESS_PATH], *out = NULL;

	harness_write_file(harness_path(src, "prog.c"), "int prog_value(void) { return 1; }\n");
	harness_start(NULL);
	cJSON *st = harness_status();
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(st, "confinement");
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "landlock")),
			 kernel_has_landlock());
	cJSON_Delete(st);
	ck_assert_int_eq(harness_cli(&out, NULL, "status", NULL), 0);
	ck_assert_msg(strstr(out, kernel_has_landlock() ? "compilers write only in their build directory"
							: "confinement:    none") != NULL,
		      "kiln status does not say whether compilers are confined:\n%s", out);
	free(out);
	ck_assert_int_eq(harness_cli(NULL, NULL, "build", src, NULL), 0);
	harness_stop();
}
END_TEST

/* Where Landlock is missing (simulated with --no-landlock), kilnd says so
 * and builds as before. */
START_TEST(without_landlock_builds_still_work)
{
	char src[HARNESS_PATH], *out = NULL;

	harness_write_file(harness_path(src, "prog.c"), "int prog_value(void) { return 1; }\n");
	harness_start("--no-landlock", NULL);
	cJSON *st = harness_status();
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(st, "confinement");
	ck_assert(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(c, "landlock")));
	ck_assert_str_eq(harness_str(c, "why"), "off by --no-landlock");
	cJSON_Delete(st);
	ck_assert_int_eq(harness_cli(&out, NULL, "build", src, NULL), 0);
	free(out);
	harness_stop();
}
END_TEST

/* The compiler of a_compiler_inherits_no_descriptor: a program, not a
 * script (a shell opens descriptors of its own to list /proc/self/fd). It
 * names each descriptor it was started with but 0-2 and kiln-observe.so's
 * trace (900 and up), fails if there is one, else runs cc. */
static const char fd_check_c[] =
	"#include <dirent.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <unistd.h>\n"
	"int main(int argc, char **argv) {\n"
	"\t(void)argc;\n"
	"\tint bad = 0; char link[512], path[64];\n"
	"\tDIR *d = opendir(\"/proc/self/fd\");\n"
	"\tstruct dirent *e;\n"
	"\twhile (d != NULL && (e = readdir(d)) != NULL) {\n"
	"\t\tint fd = atoi(e->d_name);\n"
	"\t\tif (e->d_name[0] == '.' || fd <= 2 || fd >= 900 || fd == dirfd(d)) continue;\n"
	"\t\tsnprintf(path, sizeof(path), \"/proc/self/fd/%d\", fd);\n"
	"\t\tssize_t n = readlink(path, link, sizeof(link) - 1);\n"
	"\t\tlink[n > 0 ? n : 0] = 0;\n"
	"\t\tfprintf(stderr, \"inherited descriptor %d: %s\\n\", fd, link);\n"
	"\t\tbad = 1;\n"
	"\t}\n"
	"\tif (bad) return 1;\n"
	"\targv[0] = \"/usr/bin/cc\";\n"
	"\texecv(argv[0], argv);\n"
	"\treturn 127;\n"
	"}\n";

/* A compiler inherits no descriptor but its standard three (and
 * kiln-observe.so's trace): none of kilnd's, none that kilnd was started
 * with (a prologue's pipe; here the test's, at fd 77). The check runs for
 * kilnd's probe of the toolchain at start too. */
START_TEST(a_compiler_inherits_no_descriptor)
{
	char src[HARNESS_PATH], csrc[HARNESS_PATH], cc[HARNESS_PATH], tc[HARNESS_PATH + 8];
	char *err = NULL;
	int fds[2];

	harness_write_file(harness_path(csrc, "fdcheck.c"), fd_check_c);
	const char *argv[] = { "/usr/bin/cc", "-o", harness_path(cc, "fdcheck"), csrc, NULL };
	ck_assert_int_eq(harness_run(argv, NULL, NULL, 60), 0);
	harness_write_file(harness_path(src, "prog.c"), "int prog_value(void) { return 77; }\n");
	snprintf(tc, sizeof(tc), "cc=%s", cc);
	ck_assert_int_eq(pipe(fds), 0);
	ck_assert_int_eq(dup2(fds[0], 77), 77);
	harness_start("--toolchain", tc, NULL);
	close(77);
	close(fds[0]);
	close(fds[1]);
	int rc = harness_cli(NULL, &err, "build", src, NULL);
	ck_assert_msg(rc == 0, "kiln build: %s", err != NULL ? err : "");
	free(err);
	harness_stop();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("confine");

	suite_add_tcase(s, harness_tcase("writes_outside", writes_outside_the_build_directory_are_refused, 240));
	suite_add_tcase(s, harness_tcase("landlock", landlock_stops_a_compiler_that_writes_elsewhere, 120));
	suite_add_tcase(s, harness_tcase("code", code_into_the_toolchain_needs_the_administrators_consent, 120));
	suite_add_tcase(s, harness_tcase("nvcc_shell", nvcc_arguments_cannot_reach_its_shell, 120));
	suite_add_tcase(s, harness_tcase("ctor", the_load_checks_constructors_cannot_write_outside, 90));
	suite_add_tcase(s, harness_tcase("status", status_says_whether_compilers_are_confined, 90));
	suite_add_tcase(s, harness_tcase("no_landlock", without_landlock_builds_still_work, 90));
	suite_add_tcase(s, harness_tcase("descriptors", a_compiler_inherits_no_descriptor, 90));
	return harness_main(s);
}
