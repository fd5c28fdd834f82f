/*
 * Unit tests of the table of dependency kinds (proto/depkind.c): every row
 * complete, names and numbers one to one, the trace records of each kind
 * made by no other kind, and the numbers the store keeps on disk.
 */
#include <check.h>
#include <string.h>

#include "depkind.h"
#include "store.h"
#include "trace_rec.h"
#include "unit.h"

START_TEST(test_rows_complete)
{
	for (int k = 0; k < DEP__COUNT; k++) {
		const struct dep_kind_info *i = dep_kind_info(k);
		ck_assert_ptr_nonnull(i);
		ck_assert_msg(i->name != NULL && i->name[0] != '\0', "kind %d has no name", k);
		ck_assert_msg(i->records != NULL, "%s: no records string", i->name);
		ck_assert_msg(i->key != NULL && i->hit != NULL, "%s: key or hit undocumented", i->name);
		/* A named kind's yes/no needs its member; only they have one. */
		ck_assert_msg(i->named == (i->flag != NULL), "%s: flag and named disagree", i->name);
		ck_assert_int_eq(dep_kind_parse(i->name), k);
		ck_assert_str_eq(dep_kind_name(k), i->name);
	}
	ck_assert_ptr_null(dep_kind_info(-1));
	ck_assert_ptr_null(dep_kind_info(DEP__COUNT));
	ck_assert_str_eq(dep_kind_name(DEP__COUNT), "unknown");
	ck_assert_int_eq(dep_kind_parse("File"), -1);
	ck_assert_int_eq(dep_kind_parse(""), -1);
	ck_assert_int_eq(dep_kind_parse(NULL), -1);
}
END_TEST

START_TEST(test_records_belong_to_one_kind)
{
	static const char all[] = { REC_HELLO, REC_OPEN, REC_WRITE, REC_STAT, REC_ABSENT,
				    REC_FAILED, REC_EXEC, REC_EXEC_FAILED, REC_SPAWN, REC_LOAD,
				    REC_ENV, REC_LISTING, REC_INCOMPLETE, REC_INTERP, REC_IMAGE,
				    REC_UNWATCHED };
	/* The letters themselves are distinct. */
	for (size_t a = 0; a < sizeof(all); a++)
		for (size_t b = a + 1; b < sizeof(all); b++)
			ck_assert_msg(all[a] != all[b], "two records are '%c'", all[a]);
	for (int k = 0; k < DEP__COUNT; k++)
		for (const char *r = dep_kinds[k].records; *r != '\0'; r++) {
			ck_assert_msg(memchr(all, *r, sizeof(all)) != NULL, "%s: no record '%c'",
				      dep_kinds[k].name, *r);
			for (int j = k + 1; j < DEP__COUNT; j++)
				ck_assert_msg(strchr(dep_kinds[j].records, *r) == NULL,
					      "'%c' makes both %s and %s", *r, dep_kinds[k].name,
					      dep_kinds[j].name);
		}
	ck_assert(strchr(dep_kinds[DEP_FILE].records, REC_OPEN) != NULL);
	ck_assert(strchr(dep_kinds[DEP_ABSENT].records, REC_ABSENT) != NULL);
	ck_assert(strchr(dep_kinds[DEP_LISTING].records, REC_LISTING) != NULL);
}
END_TEST

/* The store's numbers are on disk: they must stay these, whatever the table's
 * order becomes. */
START_TEST(test_numbers_on_disk)
{
	ck_assert_int_eq(STORE_DEP_FILE, 0);
	ck_assert_int_eq(STORE_DEP_EXISTS, 1);
	ck_assert_int_eq(STORE_DEP_ABSENT, 2);
	ck_assert_int_eq(STORE_DEP_ENV, 3);
	ck_assert_int_eq(STORE_DEP_LISTING, 4);
	ck_assert_int_eq(STORE_DEP_SEARCH, 5);
	ck_assert_str_eq(store_dep_kind_name(STORE_DEP_SEARCH), "search");
	ck_assert_int_eq(store_dep_kind_parse("listing"), STORE_DEP_LISTING);
}
END_TEST

static Suite *depkind_suite(void)
{
	Suite *s = suite_create("depkind");
	TCase *tc = tcase_create("depkind");

	tcase_add_test(tc, test_rows_complete);
	tcase_add_test(tc, test_records_belong_to_one_kind);
	tcase_add_test(tc, test_numbers_on_disk);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(depkind_suite());
}
