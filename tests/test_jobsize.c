/*
 * Unit tests of job sizes from the batch system's environment and the
 * upstream polling pace that follows (proto/jobsize.c).
 */
#include <check.h>
#include <string.h>

#include "jobsize.h"
#include "unit.h"

START_TEST(test_hostlist)
{
	static const struct {
		const char *list;
		long n;
	} cases[] = {
		{ "nid0001", 1 },
		{ "nid[0001-0128]", 128 },
		{ "nid[0001-0128,0200]", 129 },
		{ "nid[0001-0128,0200],login1", 130 },
		{ "r[1-2]n[01-04]", 8 },
		{ "a,b,c", 3 },
		{ "node-1,node-2", 2 },
		{ "x[7]", 1 },
		{ "x[0-4095]", 4096 },
		{ "gpu[1-2]-ib", 2 },
		/* Malformed: 0, never a guess. */
		{ "", 0 }, { ",", 0 }, { "a,", 0 }, { ",a", 0 }, { "a,,b", 0 },
		{ "x[", 0 }, { "x[]", 0 }, { "x[1-]", 0 }, { "x[-1]", 0 }, { "x[5-1]", 0 },
		{ "x[1,]", 0 }, { "x[a]", 0 }, { "x]1[", 0 }, { "x[1-2", 0 },
		{ "x[1]]", 0 }, { "x[1234567890]", 0 },
		/* More than JOBSIZE_MAX, however it is reached. */
		{ "x[0-10000000]", 0 }, { "a[0-9999]b[0-9999]", 0 },
		{ "x[0-9999999],y", 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ck_assert_msg(jobsize_hostlist_count(cases[i].list) == cases[i].n,
			      "%s: %ld, not %ld", cases[i].list,
			      jobsize_hostlist_count(cases[i].list), cases[i].n);
	ck_assert_int_eq(jobsize_hostlist_count(NULL), 0);
	ck_assert_int_eq(jobsize_hostlist_count("x[0-9999998],y"), JOBSIZE_MAX);
}
END_TEST

START_TEST(test_parse)
{
	ck_assert_int_eq(jobsize_parse("4096"), 4096);
	ck_assert_int_eq(jobsize_parse("1"), 1);
	ck_assert_int_eq(jobsize_parse("10000000"), JOBSIZE_MAX);
	ck_assert_int_eq(jobsize_parse("10000001"), 0);
	ck_assert_int_eq(jobsize_parse("0"), 0);
	ck_assert_int_eq(jobsize_parse(""), 0);
	ck_assert_int_eq(jobsize_parse(NULL), 0);
	ck_assert_int_eq(jobsize_parse("-4"), 0);
	ck_assert_int_eq(jobsize_parse("4 "), 0);
	ck_assert_int_eq(jobsize_parse("4k"), 0);
	ck_assert_int_eq(jobsize_parse("99999999999999999999999"), 0);
}
END_TEST

static const char *const *env_now;

static const char *fake_getenv(const char *name)
{
	for (size_t i = 0; env_now[i] != NULL; i += 2)
		if (strcmp(env_now[i], name) == 0)
			return env_now[i + 1];
	return NULL;
}

static long from(const char *const *env)
{
	env_now = env;
	return jobsize_from_env(fake_getenv);
}

START_TEST(test_from_env)
{
	const char *const none[] = { NULL };
	const char *const prolog[] = { "SLURM_JOB_NODELIST", "nid[0001-0512]", NULL };
	const char *const step[] = { "SLURM_NNODES", "64", "SLURM_JOB_NODELIST", "n[1-2]", NULL };
	const char *const job[] = { "SLURM_JOB_NUM_NODES", "4096", "SLURM_NNODES", "64", NULL };
	const char *const own[] = { "KILN_JOB_NODES", "8", "SLURM_JOB_NUM_NODES", "4096", NULL };
	const char *const bad[] = { "KILN_JOB_NODES", "lots", "SLURM_NNODES", "16", NULL };
	const char *const allbad[] = { "SLURM_NNODES", "-1", "SLURM_JOB_NODELIST", "x[", NULL };

	ck_assert_int_eq(from(none), 0);
	ck_assert_int_eq(from(prolog), 512);
	ck_assert_int_eq(from(step), 64);
	ck_assert_int_eq(from(job), 4096);
	ck_assert_int_eq(from(own), 8);
	ck_assert_int_eq(from(bad), 16);
	ck_assert_int_eq(from(allbad), 0);
}
END_TEST

START_TEST(test_pace)
{
	/* Small jobs: each kilnd at its own cap; large ones share the job's. */
	const double job = JOBSIZE_JOB_LOOKS_PER_S;
	ck_assert_double_eq(jobsize_looks_per_s(0, job), JOBSIZE_NODE_LOOKS_PER_S);
	ck_assert_double_eq(jobsize_looks_per_s(1, job), JOBSIZE_NODE_LOOKS_PER_S);
	ck_assert_double_eq(jobsize_looks_per_s(50, job), 20.0);
	ck_assert_double_eq(jobsize_looks_per_s(100, job), 10.0);
	ck_assert_double_eq_tol(jobsize_looks_per_s(4096, job), 1000.0 / 4096, 1e-12);
	ck_assert_double_eq_tol(jobsize_looks_per_s(4096, 5000), 5000.0 / 4096, 1e-12);
	ck_assert_double_eq(jobsize_looks_per_s(4, 5000), JOBSIZE_NODE_LOOKS_PER_S);
	/* The whole job's rate stays at job from 50 to 10,000 nodes; beyond,
	 * each kilnd still looks once every 10 s. */
	for (long n = 50; n <= 10000; n *= 3)
		ck_assert_double_le(jobsize_looks_per_s(n, job) * (double)n, job + 1e-6);
	ck_assert_double_eq(jobsize_looks_per_s(10000, job), 0.1);
	ck_assert_double_eq(jobsize_looks_per_s(158976, job), JOBSIZE_NODE_MIN_LOOKS_PER_S);
	ck_assert_double_eq(jobsize_looks_per_s(JOBSIZE_MAX, job), JOBSIZE_NODE_MIN_LOOKS_PER_S);
}
END_TEST

static Suite *jobsize_suite(void)
{
	Suite *s = suite_create("jobsize");
	TCase *tc = tcase_create("jobsize");

	tcase_add_test(tc, test_hostlist);
	tcase_add_test(tc, test_parse);
	tcase_add_test(tc, test_from_env);
	tcase_add_test(tc, test_pace);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(jobsize_suite());
}
