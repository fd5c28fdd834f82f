/*
 * Unit tests of daemon/flight/recheck_memo.c: a remembered stand-in run
 * holds only while every dependency it read is in the sent list with the
 * state recorded then (kind, digest, size, mode as its kind carries them),
 * a record of the same steps replaces the last, the oldest goes when the
 * memo is full, a second check of steps being run waits for that run, and
 * the counts add up.
 */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "recheck_memo.h"
#include "store.h"
#include "table.h"
#include "unit.h"

static void key_of(int n, uint8_t key[32])
{
	memset(key, 0, 32);
	key[0] = (uint8_t)n;
	key[1] = (uint8_t)(n >> 8);
}

/* The dependencies a stand-in run of gcc reads, more or less. */
static struct store_dep deps[4];

static void deps_init(void)
{
	memset(deps, 0, sizeof(deps));
	deps[0] = (struct store_dep){ .path = "/usr/bin/ld", .kind = STORE_DEP_FILE,
				      .mode = S_IFREG | 0755, .size = 100 };
	memset(deps[0].digest, 0xab, 32);
	deps[1] = (struct store_dep){ .path = "/opt/lib/libm.so", .kind = STORE_DEP_ABSENT };
	deps[2] = (struct store_dep){ .path = "/usr/lib", .kind = STORE_DEP_EXISTS,
				      .mode = S_IFDIR | 0755 };
	deps[3] = (struct store_dep){ .path = "GCC_EXEC_PREFIX", .kind = STORE_DEP_ENV, .mode = 0 };
}

/* The memo with the run of key 1 reading deps. */
static struct recheck_memo *remembered(void)
{
	const struct store_dep *p[4] = { &deps[0], &deps[1], &deps[2], &deps[3] };
	struct recheck_memo *m = recheck_memo_new();
	uint8_t key[32];

	ck_assert_ptr_nonnull(m);
	key_of(1, key);
	ck_assert_int_eq(recheck_memo_put(m, key, p, 4), 0);
	return m;
}

/* Whether the run of key 1 holds for sent. */
static bool holds(struct recheck_memo *m, const struct store_dep *sent, size_t n)
{
	struct table *idx = recheck_sent_index(sent, n);
	uint8_t key[32];
	bool h;

	ck_assert_ptr_nonnull(idx);
	key_of(1, key);
	h = recheck_memo_holds(m, key, idx);
	table_free(idx, NULL);
	return h;
}

START_TEST(holds_for_a_list_that_has_all_it_read)
{
	struct recheck_memo *m = remembered();
	struct store_dep sent[6];

	memcpy(sent, deps, sizeof(deps));
	/* and what the preprocessor read besides */
	sent[4] = (struct store_dep){ .path = "/usr/include/stdio.h", .kind = STORE_DEP_FILE };
	sent[5] = (struct store_dep){ .path = "/usr/local/include/stdio.h", .kind = STORE_DEP_ABSENT };
	ck_assert(holds(m, sent, 6));
	recheck_memo_free(m);
}
END_TEST

START_TEST(fails_when_the_list_lacks_one)
{
	struct recheck_memo *m = remembered();

	for (int skip = 0; skip < 4; skip++) {
		struct store_dep sent[3];
		int n = 0;

		for (int i = 0; i < 4; i++) {
			if (i != skip)
				sent[n++] = deps[i];
		}
		ck_assert_msg(!holds(m, sent, 3), "holds without %s", deps[skip].path);
	}
	recheck_memo_free(m);
}
END_TEST

START_TEST(fails_when_a_state_differs)
{
	struct recheck_memo *m = remembered();
	struct store_dep sent[4];

	memcpy(sent, deps, sizeof(deps));
	sent[0].digest[31] ^= 1;                        /* the linker's content */
	ck_assert(!holds(m, sent, 4));
	memcpy(sent, deps, sizeof(deps));
	sent[0].size = 101;                             /* its size */
	ck_assert(!holds(m, sent, 4));
	memcpy(sent, deps, sizeof(deps));
	sent[2].mode = S_IFDIR | 0700;                  /* a directory's permissions */
	ck_assert(!holds(m, sent, 4));
	memcpy(sent, deps, sizeof(deps));
	sent[3].mode = 1;                               /* a variable now set */
	ck_assert(!holds(m, sent, 4));
	memcpy(sent, deps, sizeof(deps));
	sent[1].kind = STORE_DEP_FILE;                  /* the library is there now */
	ck_assert(!holds(m, sent, 4));
	memcpy(sent, deps, sizeof(deps));
	sent[0].mtime_ns = 12345;                       /* touched, same content */
	ck_assert(holds(m, sent, 4));
	recheck_memo_free(m);
}
END_TEST

START_TEST(other_steps_are_not_held)
{
	struct recheck_memo *m = remembered();
	struct table *idx = recheck_sent_index(deps, 4);
	uint8_t key[32];

	key_of(2, key);
	ck_assert(!recheck_memo_holds(m, key, idx));
	table_free(idx, NULL);
	recheck_memo_free(m);
}
END_TEST

START_TEST(a_new_record_of_the_same_steps_replaces_the_last)
{
	struct recheck_memo *m = remembered();
	struct store_dep more = { .path = "/etc/ld.so.cache", .kind = STORE_DEP_FILE };
	const struct store_dep *p[5] = { &deps[0], &deps[1], &deps[2], &deps[3], &more };
	struct store_dep sent[5];
	uint8_t key[32];

	key_of(1, key);
	ck_assert_int_eq(recheck_memo_put(m, key, p, 5), 0);
	ck_assert(!holds(m, deps, 4));                  /* now it read one more */
	memcpy(sent, deps, sizeof(deps));
	sent[4] = more;
	ck_assert(holds(m, sent, 5));
	recheck_memo_free(m);
}
END_TEST

START_TEST(the_oldest_goes_when_full)
{
	struct recheck_memo *m = remembered();
	const struct store_dep *p[1] = { &deps[0] };
	struct table *idx = recheck_sent_index(deps, 4);
	uint8_t key[32];

	for (int i = 2; i <= RECHECK_MEMO_MAX; i++) {
		key_of(i, key);
		ck_assert_int_eq(recheck_memo_put(m, key, p, 1), 0);
	}
	ck_assert(holds(m, deps, 4));                   /* exactly full */
	key_of(RECHECK_MEMO_MAX + 1, key);
	ck_assert_int_eq(recheck_memo_put(m, key, p, 1), 0);
	ck_assert(!holds(m, deps, 4));
	for (int i = 2; i <= RECHECK_MEMO_MAX + 1; i++) {
		key_of(i, key);
		ck_assert_msg(recheck_memo_holds(m, key, idx), "record %d gone", i);
	}
	table_free(idx, NULL);
	recheck_memo_free(m);
}
END_TEST

struct waiter {
	struct recheck_memo *m;
	struct table *idx;
	int got;
};

static void *enter_thread(void *arg)
{
	struct waiter *w = arg;
	uint8_t key[32];

	key_of(7, key);
	w->got = recheck_memo_enter(w->m, key, w->idx);
	return NULL;
}

/* Starts a thread entering key 7 and returns once it waits there. Without
 * the wait this never returns (the test's timeout fails it). */
static void start_waiter(struct waiter *w, pthread_t *t)
{
	struct timespec pause = { 0, 1000 * 1000 };

	ck_assert_int_eq(pthread_create(t, NULL, enter_thread, w), 0);
	while (recheck_memo_waiting(w->m) == 0)
		nanosleep(&pause, NULL);
}

/* A second check of steps another one is running waits for it, and then
 * takes what it remembered instead of running them too. */
START_TEST(a_second_check_waits_for_the_run)
{
	struct recheck_memo *m = recheck_memo_new();
	const struct store_dep *p[4] = { &deps[0], &deps[1], &deps[2], &deps[3] };
	struct waiter w = { .m = m, .idx = recheck_sent_index(deps, 4), .got = -1 };
	uint8_t key[32];
	pthread_t t;

	key_of(7, key);
	ck_assert_int_eq(recheck_memo_enter(m, key, w.idx), RECHECK_MEMO_OWN);
	start_waiter(&w, &t);
	ck_assert_int_eq(recheck_memo_put(m, key, p, 4), 0);
	recheck_memo_leave(m, key);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_eq(w.got, RECHECK_MEMO_HOLDS);
	table_free(w.idx, NULL);
	recheck_memo_free(m);
}
END_TEST

/* A check that waited for a run that remembered nothing (it failed, or the
 * record does not fit its list) runs beside the others, owning nothing. */
START_TEST(a_waiter_after_a_failed_run_owns_nothing)
{
	struct recheck_memo *m = recheck_memo_new();
	struct waiter w = { .m = m, .idx = recheck_sent_index(deps, 4), .got = -1 };
	uint8_t key[32];
	pthread_t t;

	key_of(7, key);
	ck_assert_int_eq(recheck_memo_enter(m, key, w.idx), RECHECK_MEMO_OWN);
	start_waiter(&w, &t);
	recheck_memo_leave(m, key);              /* nothing remembered */
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_eq(w.got, RECHECK_MEMO_RUN);
	/* and, owning nothing, it leaves the key free for the next owner */
	ck_assert_int_eq(recheck_memo_enter(m, key, w.idx), RECHECK_MEMO_OWN);
	recheck_memo_leave(m, key);
	table_free(w.idx, NULL);
	recheck_memo_free(m);
}
END_TEST

/* An owner that remembered nothing (its run failed) lets the next one run;
 * with every running slot taken a check runs without owning. */
START_TEST(a_failed_run_and_a_full_table)
{
	struct recheck_memo *m = recheck_memo_new();
	struct table *idx = recheck_sent_index(deps, 4);
	uint8_t key[32];

	key_of(9, key);
	ck_assert_int_eq(recheck_memo_enter(m, key, idx), RECHECK_MEMO_OWN);
	recheck_memo_leave(m, key);
	ck_assert_int_eq(recheck_memo_enter(m, key, idx), RECHECK_MEMO_OWN);
	recheck_memo_leave(m, key);
	for (int i = 0; i < RECHECK_MEMO_RUNNING; i++) {
		key_of(100 + i, key);
		ck_assert_int_eq(recheck_memo_enter(m, key, idx), RECHECK_MEMO_OWN);
	}
	key_of(99, key);
	ck_assert_int_eq(recheck_memo_enter(m, key, idx), RECHECK_MEMO_RUN);
	recheck_memo_leave(m, key);          /* owned by nobody: harmless */
	for (int i = 0; i < RECHECK_MEMO_RUNNING; i++) {
		key_of(100 + i, key);
		recheck_memo_leave(m, key);
	}
	ck_assert_int_eq(recheck_memo_enter(m, key, idx), RECHECK_MEMO_OWN);
	recheck_memo_leave(m, key);
	table_free(idx, NULL);
	recheck_memo_free(m);
}
END_TEST

START_TEST(counts)
{
	struct recheck_memo *m = recheck_memo_new();
	uint64_t checks, reused;

	recheck_memo_count(m, false);
	recheck_memo_count(m, true);
	recheck_memo_count(m, true);
	recheck_memo_counts(m, &checks, &reused);
	ck_assert_uint_eq(checks, 3);
	ck_assert_uint_eq(reused, 2);
	recheck_memo_free(m);
	recheck_memo_free(NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("recheck_memo");
	TCase *tc = tcase_create("memo");

	tcase_add_checked_fixture(tc, deps_init, NULL);
	tcase_add_test(tc, holds_for_a_list_that_has_all_it_read);
	tcase_add_test(tc, fails_when_the_list_lacks_one);
	tcase_add_test(tc, fails_when_a_state_differs);
	tcase_add_test(tc, other_steps_are_not_held);
	tcase_add_test(tc, a_new_record_of_the_same_steps_replaces_the_last);
	tcase_add_test(tc, the_oldest_goes_when_full);
	tcase_add_test(tc, a_second_check_waits_for_the_run);
	tcase_add_test(tc, a_waiter_after_a_failed_run_owns_nothing);
	tcase_add_test(tc, a_failed_run_and_a_full_table);
	tcase_add_test(tc, counts);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
