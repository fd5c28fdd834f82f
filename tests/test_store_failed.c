/*
 * Unit tests of the logs of failed builds (store/store_failed.c): pruned by
 * age and by count, never a log of another kind.
 */
#include "store_fixture.h"

/* Writes logs/failed/NAME with its mtime age_s seconds before now. */
static void failed_file(struct store *s, const char *name, int64_t now, int64_t age_s)
{
	int fd = openat(store_failed_fd(s), name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "x", 1), 1);
	struct timespec ts[2] = { { now - age_s, 0 }, { now - age_s, 0 } };
	ck_assert_int_eq(futimens(fd, ts), 0);
	close(fd);
}

static bool failed_exists(struct store *s, const char *name)
{
	struct stat st;
	return fstatat(store_failed_fd(s), name, &st, 0) == 0;
}

/* The logs of failed builds: pruned by age, then by count (the oldest
 * first), stale temporary files too; entries' logs and young temporary
 * files are left alone. */
START_TEST(test_prune_failed)
{
	struct store *s = open_store(0);
	int64_t now = util_wall_s();
	uint64_t removed = 99;
	char name[96], key[65];

	ck_assert_int_ge(store_failed_fd(s), 0);
	ck_assert_int_eq(store_prune_failed(s, now, 3600, 10, &removed), 0);
	ck_assert_uint_eq(removed, 0);
	for (int i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "%064d.log", i);
		failed_file(s, name, now, i * 1000);   /* 0, 1000, ..., 4000 s old */
	}
	failed_file(s, "alias-aa.failed", now, 7200);
	failed_file(s, "0001.log.tmp12.3", now, 7200);   /* a crashed writer's */
	failed_file(s, "0002.log.tmp12.4", now, 60);     /* being written */
	failed_file(s, "README", now, 999999);           /* not ours */
	/* An entry's log lives in logs/, never pruned here. */
	hexkey("kept", key);
	snprintf(name, sizeof(name), "%s.log", key);
	int fd = openat(store_logs_fd(s), name, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);

	/* Older than an hour: the logs at 4000 s and the alias file, and the
	 * old temporary file. */
	ck_assert_int_eq(store_prune_failed(s, now, 3600, 10, &removed), 0);
	ck_assert_uint_eq(removed, 3);
	ck_assert(!failed_exists(s, "alias-aa.failed"));
	ck_assert(!failed_exists(s, "0001.log.tmp12.3"));
	ck_assert(failed_exists(s, "0002.log.tmp12.4"));
	ck_assert(failed_exists(s, "README"));
	snprintf(name, sizeof(name), "%064d.log", 4);
	ck_assert(!failed_exists(s, name));
	/* At most 2 files: the newest (0 and 1000 s) stay. */
	ck_assert_int_eq(store_prune_failed(s, now, 3600, 2, &removed), 0);
	ck_assert_uint_eq(removed, 2);
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "%064d.log", i);
		ck_assert_int_eq(failed_exists(s, name), i < 2);
	}
	snprintf(name, sizeof(name), "%s.log", key);
	ck_assert_int_eq(faccessat(store_logs_fd(s), name, F_OK, 0), 0);
	store_close(s);

	/* Read-only: nothing is removed. */
	s = open_store(STORE_READONLY);
	ck_assert_int_eq(store_prune_failed(s, now, 0, 0, &removed), -EROFS);
	ck_assert_uint_eq(removed, 0);
	store_close(s);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("store_failed");
	TCase *tc = store_tcase("store_failed");
	tcase_add_test(tc, test_prune_failed);
	suite_add_tcase(su, tc);
	return unit_run(su);
}
