/*
 * Unit tests for kilnd's command line (daemon/config.c): defaults, each
 * option's value read, and each malformed value refused (-1, with a message
 * on stderr) rather than run with.
 */
#include <check.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "unit.h"

/* config_parse on "kilnd" and the arguments (NULL-terminated). */
static int parse(struct config *cfg, ...)
{
	char *argv[32] = { "kilnd" };
	int argc = 1;
	va_list ap;

	va_start(ap, cfg);
	for (char *a; argc < 31 && (a = va_arg(ap, char *)) != NULL;)
		argv[argc++] = a;
	va_end(ap);
	optind = 0;   /* getopt_long starts again */
	memset(cfg, 0, sizeof(*cfg));
	return config_parse(cfg, argc, argv);
}

START_TEST(defaults)
{
	struct config cfg;

	setenv("KILN_SOCKET", "/tmp/kiln-test-config.sock", 1);
	setenv("KILN_CACHE_DIR", "/tmp/kiln-test-config-cache", 1);
	ck_assert_int_eq(parse(&cfg, NULL), 0);
	ck_assert_str_eq(cfg.socket_path, "/tmp/kiln-test-config.sock");
	ck_assert_str_eq(cfg.cache_dir, "/tmp/kiln-test-config-cache");
	ck_assert_uint_ge(cfg.jobs, 1);
	ck_assert_uint_gt(cfg.max_size, 0);
	ck_assert_uint_ge(cfg.ntoolchains, 3);   /* cc, c++, nvcc by default */
	ck_assert(cfg.toolchains[0].is_default);
	ck_assert_ptr_null(cfg.upstream_dir);
	ck_assert_ptr_null(cfg.cuda_arch);
	ck_assert(!cfg.allow_toolchain_code);
	config_fini(&cfg);
}
END_TEST

START_TEST(values_read)
{
	struct config cfg;

	ck_assert_int_eq(parse(&cfg, "--socket", "/tmp/s", "--cache-dir", "/tmp/c", "--jobs", "7",
			       "--max-size", "2G", "--toolchain", "cc=/bin/sh", "--cuda-arch",
			       "90,sm_80", "--idle-exit", "1.5", "--no-landlock",
			       "--allow-toolchain-code", "--log-level", "debug", NULL),
			 0);
	ck_assert_str_eq(cfg.socket_path, "/tmp/s");
	ck_assert_uint_eq(cfg.jobs, 7);
	ck_assert_uint_eq(cfg.max_size, 2ull << 30);
	ck_assert_str_eq(cfg.toolchains[0].name, "cc");
	ck_assert_str_eq(cfg.toolchains[0].path, "/bin/sh");
	ck_assert(!cfg.toolchains[0].is_default);
	ck_assert_str_eq(cfg.cuda_arch, "sm_80,sm_90");
	ck_assert(fabs(cfg.idle_exit_s - 1.5) < 1e-9);
	ck_assert(cfg.no_landlock);
	ck_assert(cfg.allow_toolchain_code);
	ck_assert_int_eq(cfg.log_level, LOG_DEBUG);
	config_fini(&cfg);
	/* --help and --version: exit 0 without running. */
	ck_assert_int_eq(parse(&cfg, "--version", NULL), 1);
	config_fini(&cfg);
}
END_TEST

/* Each malformed value is refused. */
START_TEST(malformed_refused)
{
	static const char *const bad[][2] = {
		{ "--jobs", "0" },
		{ "--jobs", "4097" },
		{ "--jobs", "2x" },
		{ "--max-size", "0" },
		{ "--max-size", "lots" },
		{ "--max-size", "-1G" },
		{ "--toolchain", "cc" },
		{ "--toolchain", "cc=relative/gcc" },
		{ "--toolchain", "=/usr/bin/cc" },
		{ "--toolchain", "c c=/usr/bin/cc" },
		{ "--build-timeout", "0" },
		{ "--build-timeout", "-5" },
		{ "--idle-exit", "nan" },
		{ "--idle-exit", "inf" },
		{ "--idle-exit", "1e10" },
		{ "--frame-timeout", "soon" },
		{ "--log-level", "loud" },
		{ "--cuda-arch", "sm_8" },
		{ "--cuda-arch", "" },
		{ "--allow-write", "relative/dir" },
		{ "--allow-write", "/nonexistent/kiln-test-dir" },
		{ "--upstream", "" },
		{ "--allow-uid", "no-such-user-kiln-test" },
		{ "--max-connections", "0" },
		{ "--no-such-option", NULL },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct config cfg;
		int rc = parse(&cfg, bad[i][0], bad[i][1], NULL);
		ck_assert_msg(rc == -1, "%s %s: %d", bad[i][0], bad[i][1] ? bad[i][1] : "", rc);
		config_fini(&cfg);
	}
	/* A stray argument is not an option. */
	struct config cfg;
	ck_assert_int_eq(parse(&cfg, "cache", NULL), -1);
	config_fini(&cfg);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("config");

	tcase_add_test(tc, defaults);
	tcase_add_test(tc, values_read);
	tcase_add_test(tc, malformed_refused);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
