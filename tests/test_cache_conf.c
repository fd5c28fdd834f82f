/*
 * Unit tests of the cache's kiln.conf (store/cache_conf.c): read, written
 * atomically, malformed lines refused.
 */
#include "store_fixture.h"

/* kiln.conf: parsed with comments and spaces, refused with the line named,
 * written so that it reads back the same. */
START_TEST(test_cache_conf)
{
	struct cache_conf cc;
	char err[400];
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	static const char good[] = "# settings\n\n  max-size =  20G  # the budget\r\n";
	ck_assert_int_eq(cache_conf_parse(good, strlen(good), &cc, err, sizeof(err)), 0);
	ck_assert(cc.has_max_size);
	ck_assert_uint_eq(cc.max_size, (uint64_t)20 << 30);
	static const char *const bad[][2] = {
		{ "max-size = 20G\nmax-sise = 1G\n", "line 2: unknown setting \"max-sise\"" },
		{ "max-size = 12x\n", "line 1: max-size: \"12x\" is not a size" },
		{ "max-size = 0\n", "is not a size" },
		{ "max-size\n", "line 1: expected \"key = value\"" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(cache_conf_parse(bad[i][0], strlen(bad[i][0]), &cc, err, sizeof(err)), -1);
		ck_assert_msg(strstr(err, bad[i][1]) != NULL, "%s: %s", bad[i][0], err);
	}
	ck_assert_int_eq(cache_conf_read(dir, &cc, err, sizeof(err)), 0);   /* no file */
	ck_assert(!cc.has_max_size);
	static const char *const sizes[] = { "1", "1536", "20G", "3M", "1.5G", "7T" };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct cache_conf w = { 0 }, r;
		uint64_t want;
		ck_assert_int_eq(cache_conf_set(&w, "max-size", sizes[i], err, sizeof(err)), 0);
		ck_assert_int_eq(util_parse_size(sizes[i], &want), 0);
		ck_assert_int_eq(cache_conf_write(dir, &w, err, sizeof(err)), 0);
		ck_assert_int_eq(cache_conf_read(dir, &r, err, sizeof(err)), 0);
		ck_assert(r.has_max_size);
		ck_assert_uint_eq(r.max_size, want);
	}
	ck_assert_int_eq(cache_conf_set(&cc, "max-size", NULL, err, sizeof(err)), 0);
	ck_assert_int_eq(cache_conf_write(dir, &cc, err, sizeof(err)), 0);
	ck_assert_int_eq(cache_conf_read(dir, &cc, err, sizeof(err)), 0);
	ck_assert(!cc.has_max_size);
	ck_assert_int_eq(cache_conf_set(&cc, "maxsize", "1G", err, sizeof(err)), -1);

	/* kiln config's read-modify-write: reads only with -1; sets and
	 * unsets; a file that does not parse is an error to read, and is
	 * replaced (said) when a value is written. */
	bool replaced = true;
	ck_assert_int_eq(cache_conf_update(dir, 1 << 20, &cc, &replaced, err, sizeof(err)), 0);
	ck_assert(!replaced && cc.has_max_size && cc.max_size == 1 << 20);
	ck_assert_int_eq(cache_conf_update(dir, -1, &cc, &replaced, err, sizeof(err)), 0);
	ck_assert(!replaced && cc.has_max_size && cc.max_size == 1 << 20);
	ck_assert_int_eq(cache_conf_update(dir, 0, &cc, &replaced, err, sizeof(err)), 0);
	ck_assert(!cc.has_max_size);
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s", dir, CACHE_CONF_NAME);
	ck_assert_int_eq(util_replace_file_at(AT_FDCWD, path, "max-size = lots\n", 16, false), 0);
	ck_assert_int_eq(cache_conf_update(dir, -1, &cc, &replaced, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "line 1") != NULL, "%s", err);
	ck_assert_int_eq(cache_conf_update(dir, 5 << 20, &cc, &replaced, err, sizeof(err)), 0);
	ck_assert(replaced);
	ck_assert_msg(strstr(err, "line 1") != NULL, "%s", err);
	ck_assert_int_eq(cache_conf_read(dir, &cc, err, sizeof(err)), 0);
	ck_assert(cc.has_max_size && cc.max_size == 5 << 20);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("cache_conf");
	TCase *tc = store_tcase("cache_conf");
	tcase_add_test(tc, test_cache_conf);
	suite_add_tcase(su, tc);
	return unit_run(su);
}
