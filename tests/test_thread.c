/*
 * Unit tests of the thread-ownership checks (daemon/thread.c): ASSERT_LOOP
 * and ASSERT_POOL pass before the loop thread is known, and after it tell
 * the loop thread from any other.
 */
#include <check.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "thread.h"
#include "unit.h"

static void *other(void *arg)
{
	bool *r = arg;
	r[0] = thread_is(true);
	r[1] = thread_is(false);
	return NULL;
}

START_TEST(the_loop_thread_is_told_from_the_pool)
{
	bool r[2];
	pthread_t t;

	ck_assert(thread_is(true) && thread_is(false));
	thread_set_loop();
	ck_assert(thread_is(true));
	ck_assert(!thread_is(false));
	ck_assert_int_eq(pthread_create(&t, NULL, other, r), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert(!r[0]);
	ck_assert(r[1]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("thread");
	TCase *tc = tcase_create("thread");

	tcase_add_test(tc, the_loop_thread_is_told_from_the_pool);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
