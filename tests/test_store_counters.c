/*
 * Unit tests of the statistics kept in the index (store/store_counters.c).
 */
#include "store_fixture.h"

/* Counters: saved, read back by another open, replaced, zeroed. */
START_TEST(test_counters)
{
	struct store *s = open_store(0);
	struct store_counter *rows = NULL;
	size_t n = 9;
	ck_assert_int_eq(store_counters_read(s, &rows, &n), 0);
	ck_assert_uint_eq(n, 0);
	free(rows);
	struct store_counter c[] = { { "hits", 5 }, { "toolchain.cc.hits", 3 } };
	ck_assert_int_eq(store_counters_write(s, c, 2, false), 0);
	c[0].value = 7;
	ck_assert_int_eq(store_counters_write(s, c, 1, false), 0);   /* replaces */
	store_close(s);
	s = open_store(STORE_READONLY);
	ck_assert_int_eq(store_counters_read(s, &rows, &n), 0);
	ck_assert_uint_eq(n, 2);
	for (size_t i = 0; i < n; i++)
		ck_assert_uint_eq(rows[i].value, strcmp(rows[i].name, "hits") == 0 ? 7 : 3);
	free(rows);
	store_close(s);
	s = open_store(0);
	struct store_counter since = { "since", 42 };
	ck_assert_int_eq(store_counters_write(s, &since, 1, true), 0);   /* zeroes the rest */
	ck_assert_int_eq(store_counters_read(s, &rows, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(rows[0].name, "since");
	free(rows);
	store_close(s);
	s = open_store(STORE_READONLY);
	ck_assert_int_eq(store_counters_write(s, c, 1, false), -EROFS);
	store_close(s);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("store_counters");
	TCase *tc = store_tcase("store_counters");
	tcase_add_test(tc, test_counters);
	suite_add_tcase(su, tc);
	return unit_run(su);
}
