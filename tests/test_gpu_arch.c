/*
 * Unit tests for the GPU architecture rules (daemon/gpu.c): --cuda-arch
 * values and the default list nvcc requests get. (Detection itself needs a
 * driver: it_cuda and it_gpu.)
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "unit.h"

static void parses_to(const char *in, const char *want)
{
	char *got = NULL;

	ck_assert_msg(gpu_arch_parse(in, &got) == 0, "refused \"%s\"", in);
	ck_assert_str_eq(got, want);
	free(got);
}

START_TEST(arch_values)
{
	parses_to("sm_80", "sm_80");
	parses_to("80", "sm_80");
	/* Sorted and unique, whatever the order given. */
	parses_to("sm_90,80,sm_80", "sm_80,sm_90");
	parses_to("100,sm_75", "sm_75,sm_100");

	static const char *const bad[] = { "", "sm_", "sm_8", "sm_1000", "compute_80", "sm_80,,90",
					   "sm_80 ", "-80", "sm_90a", "80;rm -rf /", "sm_80,x" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *got = (char *)"untouched";
		ck_assert_msg(gpu_arch_parse(bad[i], &got) == -1, "accepted \"%s\"", bad[i]);
		ck_assert_ptr_null(got);
	}
}
END_TEST

START_TEST(default_list)
{
	struct gpus g;
	char *l;

	memset(&g, 0, sizeof(g));
	/* No GPU and no --cuda-arch: no default at all. */
	ck_assert_ptr_null(gpu_arch_list(&g, NULL));
	/* --cuda-arch wins over what the node has. */
	g.n = 1;
	g.dev[0].major = 9;
	l = gpu_arch_list(&g, "sm_80");
	ck_assert_str_eq(l, "sm_80");
	free(l);
	/* The node's GPUs, sorted and unique (an H100 and two A100s). */
	g.n = 3;
	g.dev[0] = (struct gpu){ .major = 9, .minor = 0 };
	g.dev[1] = (struct gpu){ .major = 8, .minor = 0 };
	g.dev[2] = (struct gpu){ .major = 8, .minor = 0 };
	l = gpu_arch_list(&g, NULL);
	ck_assert_str_eq(l, "sm_80,sm_90");
	free(l);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("gpu_arch");
	TCase *tc = tcase_create("arch");

	tcase_add_test(tc, arch_values);
	tcase_add_test(tc, default_list);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
