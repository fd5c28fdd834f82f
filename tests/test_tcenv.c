/*
 * Unit tests for the environment of toolchain runs (daemon/tcenv.c): the
 * list, prefixes, what is never passed, --toolchain-env, PATH's absolute
 * entries, and which variables stay out of the identity.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tcenv.h"
#include "unit.h"

static char *environment[] = {
	"HOME=/home/u", "PWD=/scratch/job42", "OLDPWD=/home/u", "TMPDIR=/tmp/job",
	"LD_LIBRARY_PATH=/opt/gcc/lib64", "GCC_EXEC_PREFIX=/opt/gcc/lib/gcc/",
	"GCC_COLORS=error=01;31", "NVCC_APPEND_FLAGS=-lineinfo", "LANG=C.UTF-8",
	"SLURM_JOB_ID=42", "CUDA_VISIBLE_DEVICES=0,1", "LD_PRELOAD=/opt/xalt/lib/libxalt.so",
	"KILN_SOCKET=/tmp/s", "KILN_OBSERVE_IGNORE=/scratch/x", "CRAY_CPU_TARGET=x86-milan",
	"PE_ENV=GNU", "PATH=/opt/gcc/bin::.:bin:/usr/bin", "LANG=de_DE.UTF-8",
	"CPATH=:/opt/inc:inc", "LIBRARY_PATH=.:", NULL,
};

START_TEST(listed_variables_are_passed_and_others_are_not)
{
	struct tcenv e;
	ck_assert_int_eq(tcenv_make(&e, environment, NULL, 0), 0);
	ck_assert_str_eq(tcenv_value(&e, "LD_LIBRARY_PATH"), "/opt/gcc/lib64");
	ck_assert_str_eq(tcenv_value(&e, "GCC_EXEC_PREFIX"), "/opt/gcc/lib/gcc/");
	ck_assert_str_eq(tcenv_value(&e, "NVCC_APPEND_FLAGS"), "-lineinfo");
	ck_assert_str_eq(tcenv_value(&e, "KILN_OBSERVE_IGNORE"), "/scratch/x");
	/* lists of directories keep their absolute elements, or go */
	ck_assert_str_eq(tcenv_value(&e, "CPATH"), "/opt/inc");
	ck_assert_ptr_null(tcenv_value(&e, "LIBRARY_PATH"));
	/* the first of two, as getenv finds it */
	ck_assert_str_eq(tcenv_value(&e, "LANG"), "C.UTF-8");
	/* where the job started, its scheduler's and the GPU's variables,
	 * kiln's own, a preloaded library, messages' colours: none */
	const char *never[] = { "HOME", "PWD", "OLDPWD", "TMPDIR", "SLURM_JOB_ID",
				"CUDA_VISIBLE_DEVICES", "LD_PRELOAD", "KILN_SOCKET", "GCC_COLORS",
				"CRAY_CPU_TARGET", "PE_ENV", NULL };
	for (size_t i = 0; never[i] != NULL; i++)
		ck_assert_msg(tcenv_value(&e, never[i]) == NULL, "%s passed", never[i]);
	/* sorted, NULL-terminated, each once */
	for (size_t i = 1; i < e.nvars; i++)
		ck_assert_int_lt(strcmp(e.vars[i - 1], e.vars[i]), 0);
	ck_assert_ptr_null(e.vars[e.nvars]);
	tcenv_fini(&e);
}
END_TEST

START_TEST(path_keeps_its_absolute_entries)
{
	struct tcenv e;
	ck_assert_int_eq(tcenv_make(&e, environment, NULL, 0), 0);
	ck_assert_str_eq(e.path, "/opt/gcc/bin:/usr/bin");
	ck_assert_str_eq(tcenv_value(&e, "PATH"), "/opt/gcc/bin:/usr/bin");
	tcenv_fini(&e);
	char *none[] = { "HOME=/h", NULL };
	ck_assert_int_eq(tcenv_make(&e, none, NULL, 0), 0);
	ck_assert_str_eq(e.path, "/bin:/usr/bin");
	tcenv_fini(&e);
	char *relative[] = { "PATH=.:bin", NULL };
	ck_assert_int_eq(tcenv_make(&e, relative, NULL, 0), 0);
	ck_assert_str_eq(e.path, "/bin:/usr/bin");
	tcenv_fini(&e);
}
END_TEST

START_TEST(extra_names_and_prefixes)
{
	struct tcenv e;
	char *extra[] = { "CRAY_*", "PE_ENV", "PWD", "KILN_*", "LD_PRELOAD" };
	ck_assert_int_eq(tcenv_make(&e, environment, extra, 5), 0);
	ck_assert_str_eq(tcenv_value(&e, "CRAY_CPU_TARGET"), "x86-milan");
	ck_assert_str_eq(tcenv_value(&e, "PE_ENV"), "GNU");
	/* what kilnd and kiln-exec set themselves cannot be asked for */
	ck_assert_ptr_null(tcenv_value(&e, "PWD"));
	ck_assert_ptr_null(tcenv_value(&e, "KILN_SOCKET"));
	ck_assert_ptr_null(tcenv_value(&e, "LD_PRELOAD"));
	tcenv_fini(&e);
}
END_TEST

START_TEST(names_and_identity)
{
	ck_assert(tcenv_name_ok("CRAY_CPU_TARGET"));
	ck_assert(tcenv_name_ok("PE_*"));
	ck_assert(tcenv_name_ok("x1"));
	ck_assert(!tcenv_name_ok(""));
	ck_assert(!tcenv_name_ok("*"));
	ck_assert(!tcenv_name_ok("1X"));
	ck_assert(!tcenv_name_ok("A=B"));
	ck_assert(!tcenv_name_ok("A*B"));
	ck_assert(!tcenv_name_ok("A-B"));
	ck_assert(tcenv_unkeyed("PATH"));
	ck_assert(tcenv_unkeyed("ASAN_OPTIONS"));
	ck_assert(!tcenv_unkeyed("LD_LIBRARY_PATH"));
	ck_assert(!tcenv_unkeyed("LANG"));
}
END_TEST

static Suite *tcenv_suite(void)
{
	Suite *s = suite_create("tcenv");
	TCase *t = tcase_create("tcenv");
	tcase_add_test(t, listed_variables_are_passed_and_others_are_not);
	tcase_add_test(t, path_keeps_its_absolute_entries);
	tcase_add_test(t, extra_names_and_prefixes);
	tcase_add_test(t, names_and_identity);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return unit_run(tcenv_suite());
}
