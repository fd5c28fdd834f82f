/*
 * Integration tests of the confinement of compiler runs (issue 16, first
 * part): where the kernel has Landlock, a compiler, its assembler and
 * linker, and the load check's constructors write only in their build
 * directory (and in directories kilnd was told with --allow-write), however
 * an argument asks them to write elsewhere; kiln status says whether this is
 * in force; kilnd still builds without it (--no-landlock).
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
 * two); the exit status. */
static int build_with(const char *src, const char *arg)
{
	char first[HARNESS_PATH * 2], *second = NULL;
	snprintf(first, sizeof(first), "%s", arg);
	char *space = strchr(first, ' ');
	if (space != NULL) {
		*space = '\0';
		second = space + 1;
	}
	return harness_cli(NULL, NULL, "build", src, "--", first, second, NULL);
}

/* Options that write a file where the client says: none may land outside
 * the build directory, whether the build then fails or not. */
START_TEST(writes_outside_the_build_directory_are_refused)
{
	/* Each option is the text before the outside directory and after it. */
	static const char *const opts[][2] = {
		{ "-Wl,-Map=", "/map" }, { "-fdump-tree-original=", "/dump" },
		{ "-fopt-info-all=", "/opt" }, { "-fdump-final-insns=", "/final" },
		{ "-Wa,-adhln=", "/listing" }, { "-Xassembler -a=", "/listing2" },
		{ "-fprofile-note=", "/note" }, { "-aux-info ", "/aux" },
		{ "-Wl,--dependency-file=", "/dep" }, { "-fcallgraph-info -dumpdir ", "/" },
		{ "-save-temps=obj -dumpdir ", "/" },
	};
	char src[HARNESS_PATH], out[HARNESS_PATH], arg[HARNESS_PATH * 2];

	if (!kernel_has_landlock()) {
		printf("writes_outside_the_build_directory_are_refused: no Landlock here\n");
		return;
	}
	harness_write_file(harness_path(src, "prog.c"), "int prog_value(void) { return 1; }\n");
	outside_dir(out);
	harness_start(NULL);
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		snprintf(arg, sizeof(arg), "%s%s%s", opts[i][0], out, opts[i][1]);
		build_with(src, arg);
		int n = harness_count_dir(out);
		if (n != 0)
			remove_outside(out);
		ck_assert_msg(n == 0, "with %s, the compiler wrote %d file(s) into %s", arg, n, out);
	}
	/* And a plain build still works. */
	ck_assert_int_eq(harness_cli(NULL, NULL, "build", src, NULL), 0);
	remove_outside(out);
	harness_stop();
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

/* kiln status says whether compilers are confined, and a directory named
 * with --allow-write is writable (the harness names the test directory). */
START_TEST(status_says_whether_compilers_are_confined)
{
	char src[HARNESS_PATH], map[HARNESS_PATH], arg[HARNESS_PATH + 16], *out = NULL;

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
	snprintf(arg, sizeof(arg), "-Wl,-Map=%s", harness_path(map, "allowed.map"));
	ck_assert_int_eq(build_with(src, arg), 0);
	ck_assert_msg(harness_exists(map), "the map was not written into the allowed directory");
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

int main(void)
{
	Suite *s = suite_create("confine");

	suite_add_tcase(s, harness_tcase("writes_outside", writes_outside_the_build_directory_are_refused, 180));
	suite_add_tcase(s, harness_tcase("ctor", the_load_checks_constructors_cannot_write_outside, 90));
	suite_add_tcase(s, harness_tcase("status", status_says_whether_compilers_are_confined, 90));
	suite_add_tcase(s, harness_tcase("no_landlock", without_landlock_builds_still_work, 90));
	return harness_main(s);
}
