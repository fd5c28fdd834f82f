/*
 * Unit tests of the store's budget (store/store_budget.c): eviction by last
 * use that keeps pinned entries, the cache's footprint on disk against du,
 * and the totals kept in the index.
 */
#include "store_fixture.h"


START_TEST(test_pin_evict)
{
	char k[4][65], *obj;
	const char *content = "0123456789";  /* every object is 10 bytes */
	uint64_t removed = 0, freed = 0, n, bytes;
	struct store_entry e;
	int i;
	struct store *s = open_store(0);

	for (i = 0; i < 4; i++) {
		char seed[16];

		snprintf(seed, sizeof(seed), "ev%d", i);
		hexkey(seed, k[i]);
		ck_assert_int_eq(put(s, k[i], k[i], NULL, content, 10 * (i + 1)), 0);
	}
	ck_assert_int_eq(store_set_pinned(s, k[0], true), 0);
	ck_assert_int_eq(store_set_pinned(s, "0000", true), -ENOENT);
	ck_assert_int_eq(store_get(s, k[1], &e), 0);
	uint64_t disk = e.disk;   /* what one entry takes: object and meta */
	store_entry_free(&e);
	ck_assert_uint_ge(disk, 20);
	ck_assert_int_eq(store_get(s, k[0], &e), 0);
	ck_assert(e.pinned);
	ck_assert_uint_eq(e.disk, disk);
	store_entry_free(&e);

	/* Nothing to do when the cache already fits. */
	uint64_t total = settled_total(s);
	ck_assert_int_eq(store_evict(s, total, &removed, &freed), 0);
	ck_assert_uint_eq(removed, 0);
	/* One byte over: k[0] is the oldest but pinned, so k[1] goes, and
	 * what it freed is what it took on disk. */
	ck_assert_int_eq(store_evict(s, total - 1, &removed, &freed), 0);
	ck_assert_uint_eq(removed, 1);
	ck_assert_uint_eq(freed, disk);
	ck_assert_int_eq(store_get(s, k[1], &e), -ENOENT);
	obj = store_object_path(s, k[1], "shared");
	ck_assert(!exists(obj));
	free(obj);
	ck_assert_int_eq(store_totals(s, &n, &bytes), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_uint_eq(bytes, 30);

	/* Pins hold even when the target cannot be reached. */
	ck_assert_int_eq(store_evict(s, 0, &removed, &freed), 0);
	ck_assert_uint_eq(removed, 2);
	ck_assert_uint_eq(freed, 2 * disk);
	ck_assert_int_eq(store_get(s, k[0], &e), 0);
	store_entry_free(&e);
	ck_assert_int_eq(store_get(s, k[3], &e), -ENOENT);
	ck_assert_int_eq(store_set_pinned(s, k[0], false), 0);
	ck_assert_int_eq(store_evict(s, 0, &removed, &freed), 0);
	ck_assert_uint_eq(removed, 1);
	ck_assert_int_eq(store_totals(s, &n, &bytes), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_uint_eq(bytes, 0);
	store_close(s);
}
END_TEST

/* What du counts in the cache directory, tmp/'s content aside. */
static uint64_t du_total;
static char du_tmp[PATH_MAX + 8];

static int du_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)flag;
	(void)ftw;
	size_t n = strlen(du_tmp);
	if (strncmp(path, du_tmp, n) == 0 && path[n] == '/')
		return 0;
	du_total += (uint64_t)sb->st_blocks * 512;
	return 0;
}

static uint64_t du(void)
{
	du_total = 0;
	snprintf(du_tmp, sizeof(du_tmp), "%s/tmp", dir);
	ck_assert_int_eq(nftw(dir, du_one, 16, FTW_PHYS), 0);
	return du_total;
}

/* The footprint is what the directory takes on disk: objects, metas, logs,
 * the index with its WAL, failed builds' logs, the directories. */
START_TEST(test_footprint)
{
	struct store_footprint f;
	char k[3][65], log[80];
	struct store *s = open_store(0);

	for (int i = 0; i < 3; i++) {
		char seed[16];
		snprintf(seed, sizeof(seed), "fp%d", i);
		hexkey(seed, k[i]);
		/* The log is in place before the publish, as kilnd writes it. */
		snprintf(log, sizeof(log), "%s.log", k[i]);
		ck_assert_int_eq(util_replace_file_at(store_logs_fd(s), log, "warning: x\n", 11,
						      false), 0);
		ck_assert_int_eq(put(s, k[i], k[i], NULL, i == 2 ? "a longer object" : "obj", 5), 0);
	}
	ck_assert_int_eq(util_replace_file_at(store_failed_fd(s), "failed.log", "error\n", 6,
					      false), 0);
	ck_assert_int_eq(store_footprint(s, &f), 0);
	ck_assert_uint_eq(f.entries, 3);
	ck_assert_uint_eq(f.bytes, 3 + 3 + 15);
	ck_assert_uint_gt(f.entries_disk, f.bytes);
	ck_assert_uint_gt(f.index, 0);
	ck_assert_uint_eq(f.total, f.entries_disk + f.index + f.other);
	ck_assert_uint_eq(f.total, du());
	/* Each entry carries its own share: the three add up to the entries'. */
	uint64_t sum = 0;
	for (int i = 0; i < 3; i++) {
		struct store_entry e;
		ck_assert_int_eq(store_get(s, k[i], &e), 0);
		sum += e.disk;
		store_entry_free(&e);
	}
	ck_assert_uint_eq(sum, f.entries_disk);
	ck_assert_int_eq(store_remove(s, k[0]), 0);
	ck_assert_int_eq(store_footprint(s, &f), 0);
	ck_assert_uint_eq(f.total, du());
	store_close(s);
}
END_TEST

/* The totals follow every write, and a version 1 index gets them on open. */
START_TEST(test_totals_kept)
{
	char a[65], b[65], err[256] = "";
	uint64_t n, bytes;
	struct store_entry e;
	struct store *s = open_store(0);

	hexkey("tot-a", a);
	hexkey("tot-b", b);
	ck_assert_int_eq(put(s, a, a, NULL, "12345", 1), 0);
	ck_assert_int_eq(put(s, b, b, NULL, "123", 1), 0);
	ck_assert_int_eq(store_totals(s, &n, &bytes), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(bytes, 8);
	/* Publishing a key again replaces its row: counted once. */
	fill_entry(&e, a, a, NULL, 3);
	char *path = write_tmp(s, "12345");
	ck_assert_int_eq(store_publish(s, &e, AT_FDCWD, path), 0);
	free(path);
	ck_assert_int_eq(store_totals(s, &n, &bytes), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(bytes, 8);
	ck_assert_int_eq(store_remove(s, b), 0);
	ck_assert_int_eq(store_totals(s, &n, &bytes), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(bytes, 5);
	store_close(s);

	/* Back to version 1 (no totals table, no sha256 column), as an older
	 * kiln left it. */
	sql("DROP TRIGGER totals_insert; DROP TRIGGER totals_delete; DROP TRIGGER totals_size;"
	    " DROP TABLE totals; DROP TABLE writers; DROP INDEX entries_format;"
	    " DROP INDEX entries_label;"
	    " ALTER TABLE entries DROP COLUMN sha256;"
	    " ALTER TABLE entries DROP COLUMN disk; ALTER TABLE entries DROP COLUMN key_format;"
	    " PRAGMA user_version = 1");
	s = NULL;
	ck_assert_int_eq(store_open(dir, STORE_READONLY, &s, err, sizeof(err)), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "upgrade"));
	ck_assert_int_eq(store_open(dir, 0, &s, err, sizeof(err)), 0);
	ck_assert_int_eq(store_totals(s, &n, &bytes), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(bytes, 5);
	/* Version 4: rows from before get an estimate of their disk (the
	 * object in 4 KiB blocks, a block each for meta and log) and no key
	 * format; the totals sum it. */
	ck_assert_int_eq(store_get(s, a, &e), 0);
	ck_assert_uint_eq(e.disk, 4096 + 8192);
	ck_assert_int_eq(e.key_format, 0);
	store_entry_free(&e);
	struct store_footprint f;
	ck_assert_int_eq(store_footprint(s, &f), 0);
	ck_assert_uint_eq(f.entries_disk, 4096 + 8192);
	store_close(s);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("store_budget");
	TCase *tc = store_tcase("store_budget");
	tcase_add_test(tc, test_pin_evict);
	tcase_add_test(tc, test_footprint);
	tcase_add_test(tc, test_totals_kept);
	suite_add_tcase(su, tc);
	return unit_run(su);
}
