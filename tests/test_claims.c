/*
 * Unit tests of the claims table (daemon/claims.c), on a real libuv loop
 * and no server: who holds a claim, waiters answered once each in the
 * order they came, a takeover from inside a callback, deadlines, the
 * limits, an owner's end, and kilnd stopping.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "claims.h"
#include "kilnd.h"
#include "unit.h"

static uv_loop_t loop;
static struct kilnd d;

static void setup(void)
{
	memset(&d, 0, sizeof(d));
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	d.loop = &loop;
	ck_assert_int_eq(claims_init(&d), 0);
}

static void teardown(void)
{
	claims_fini(&d);
	uv_run(&loop, UV_RUN_DEFAULT);   /* the waiters' timers close */
	ck_assert_int_eq(uv_loop_close(&loop), 0);
}

/* A waiter: what it was told, and what it does then. */
struct waiter {
	const char *alias;
	struct claim_owner *owner;
	int calls;
	enum claim_end why;
	int order;                 /* when it was answered, from 1 */
	bool take_over;            /* on CLAIM_FREE: claim the alias */
	bool wait_again;           /* on CLAIM_FREE: wait on the new claim */
	struct claim_owner *end;   /* claims_owner_gone(end) first */
	enum claim_take took;
};

static int answered;

static void on_end(void *arg, enum claim_end why)
{
	struct waiter *w = arg;
	w->calls++;
	w->why = why;
	w->order = ++answered;
	if (w->end != NULL)
		claims_owner_gone(&d, w->end);
	if (why == CLAIM_FREE && w->take_over)
		w->took = claims_take(&d, w->alias, w->owner);
	if (why == CLAIM_FREE && w->wait_again) {
		w->wait_again = false;
		ck_assert_int_eq(claims_wait(&d, w->alias, 60000, w->owner, on_end, w), 0);
	}
}

static void wait_on(struct waiter *w, const char *alias, struct claim_owner *owner, uint64_t ms)
{
	w->alias = alias;
	w->owner = owner;
	ck_assert_int_eq(claims_wait(&d, alias, ms, owner, on_end, w), 0);
}

START_TEST(a_claim_is_its_owners)
{
	struct claim_owner a = { 0 }, b = { 0 };
	ck_assert_int_eq(claims_take(&d, "x", &a), CLAIM_GRANTED);
	ck_assert_int_eq(claims_take(&d, "x", &a), CLAIM_HELD);
	ck_assert_int_eq(claims_take(&d, "x", &b), CLAIM_OTHER);
	ck_assert_int_eq(claims_wait(&d, "y", 10, &b, on_end, NULL), -ENOENT);
	ck_assert_uint_eq(claims_count(&d), 1);
	ck_assert_uint_eq(a.nclaims, 1);
	ck_assert(!claims_release(&d, "x", &b));
	ck_assert(!claims_release(&d, "y", &a));
	ck_assert(claims_release(&d, "x", &a));
	ck_assert(!claims_release(&d, "x", &a));
	ck_assert_uint_eq(claims_count(&d), 0);
	ck_assert_uint_eq(a.nclaims, 0);
	ck_assert_ptr_null(a.claims);
	ck_assert_int_eq(claims_take(&d, "x", &b), CLAIM_GRANTED);
	ck_assert_uint_eq(d.c.claims, 0);   /* counted by the server layer, per kind */
	claims_owner_gone(&d, &b);
	ck_assert_uint_eq(claims_count(&d), 0);
}
END_TEST

/* The owner's end answers the waiters in order: the first takes the
 * claim over, the second waits on the new claim; that owner's end frees
 * it. A release answers every waiter CLAIM_RELEASED: none takes over. */
START_TEST(the_first_waiter_takes_over)
{
	struct claim_owner a = { 0 }, b = { 0 }, c = { 0 };
	struct waiter wb = { .take_over = true }, wc = { .take_over = true, .wait_again = true };
	answered = 0;
	ck_assert_int_eq(claims_take(&d, "r", &a), CLAIM_GRANTED);
	wait_on(&wb, "r", &b, 60000);
	wait_on(&wc, "r", &c, 60000);
	ck_assert(claims_release(&d, "r", &a));
	ck_assert_int_eq(wb.why, CLAIM_RELEASED);
	ck_assert_int_eq(wc.why, CLAIM_RELEASED);
	ck_assert_uint_eq(b.nclaims, 0);
	ck_assert_uint_eq(claims_count(&d), 0);
	wb = (struct waiter){ .take_over = true };
	wc = (struct waiter){ .take_over = true, .wait_again = true };
	answered = 0;
	ck_assert_int_eq(claims_take(&d, "x", &a), CLAIM_GRANTED);
	wait_on(&wb, "x", &b, 60000);
	wait_on(&wc, "x", &c, 60000);
	claims_owner_gone(&d, &a);
	ck_assert_int_eq(wb.calls, 1);
	ck_assert_int_eq(wb.order, 1);
	ck_assert_int_eq(wb.took, CLAIM_GRANTED);
	ck_assert_int_eq(wc.calls, 1);
	ck_assert_int_eq(wc.took, CLAIM_OTHER);
	ck_assert_uint_eq(b.nclaims, 1);
	ck_assert_ptr_nonnull(c.waits);
	wc.take_over = false;
	claims_owner_gone(&d, &b);      /* b's process died */
	ck_assert_int_eq(wc.calls, 2);
	ck_assert_int_eq(wc.why, CLAIM_FREE);
	ck_assert_ptr_null(c.waits);
	ck_assert_uint_eq(claims_count(&d), 0);
}
END_TEST

START_TEST(publication_answers_every_waiter)
{
	struct claim_owner a = { 0 }, b = { 0 };
	struct waiter w[3] = { { 0 } };
	answered = 0;
	ck_assert_int_eq(claims_take(&d, "x", &a), CLAIM_GRANTED);
	for (int i = 0; i < 3; i++)
		wait_on(&w[i], "x", &b, 60000);
	claims_published(&d, "y");      /* another alias: nothing */
	ck_assert_int_eq(w[0].calls, 0);
	claims_published(&d, "x");
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(w[i].calls, 1);
		ck_assert_int_eq(w[i].why, CLAIM_PUBLISHED);
		ck_assert_int_eq(w[i].order, i + 1);
	}
	ck_assert_ptr_null(a.claims);
	ck_assert_ptr_null(b.waits);
	ck_assert_uint_eq(a.nclaims, 0);
	ck_assert_uint_eq(claims_count(&d), 0);
}
END_TEST

START_TEST(a_deadline_ends_only_its_wait)
{
	struct claim_owner a = { 0 }, b = { 0 };
	struct waiter soon = { 0 }, late = { 0 };
	ck_assert_int_eq(claims_take(&d, "x", &a), CLAIM_GRANTED);
	wait_on(&soon, "x", &b, 10);
	wait_on(&late, "x", &b, 60000);
	while (soon.calls == 0)
		uv_run(&loop, UV_RUN_ONCE);
	ck_assert_int_eq(soon.why, CLAIM_TIMEOUT);
	ck_assert_int_eq(late.calls, 0);
	ck_assert_uint_eq(claims_count(&d), 1);
	claims_published(&d, "x");
	ck_assert_int_eq(soon.calls, 1);
	ck_assert_int_eq(late.calls, 1);
	ck_assert_int_eq(late.why, CLAIM_PUBLISHED);
}
END_TEST

START_TEST(limits_hold)
{
	struct claim_owner a = { 0 }, b = { 0 }, c = { 0 };
	char alias[32];
	for (int i = 0; i < CLAIMS_PER_OWNER; i++) {
		snprintf(alias, sizeof(alias), "a%d", i);
		ck_assert_int_eq(claims_take(&d, alias, &a), CLAIM_GRANTED);
	}
	ck_assert_int_eq(claims_take(&d, "one more", &a), CLAIM_FULL);
	ck_assert_int_eq(claims_take(&d, "one more", &b), CLAIM_GRANTED);
	static struct waiter w[CLAIM_WAITERS_MAX + 1];
	memset(w, 0, sizeof(w));
	for (int i = 0; i < CLAIM_WAITERS_MAX; i++)
		wait_on(&w[i], "a0", &b, 60000);
	ck_assert_int_eq(claims_wait(&d, "a0", 60000, &c, on_end, &w[CLAIM_WAITERS_MAX]), -EBUSY);
	/* b's waits leave with b, and make room */
	claims_owner_gone(&d, &b);
	ck_assert_int_eq(w[0].calls, 1);
	ck_assert_int_eq(w[0].why, CLAIM_LEFT);
	ck_assert_ptr_null(b.waits);
	wait_on(&w[CLAIM_WAITERS_MAX], "a0", &c, 60000);
	claims_owner_gone(&d, &a);
	ck_assert_uint_eq(a.nclaims, 0);
	ck_assert_int_eq(w[CLAIM_WAITERS_MAX].why, CLAIM_FREE);
	ck_assert_uint_eq(claims_count(&d), 0);
}
END_TEST

/* A waiter's answer ends the owner of a waiter not yet answered (a reply
 * that fails closes its connection): that one is still answered once,
 * with the claim's end, and nothing freed is touched. */
START_TEST(an_answer_may_end_another_owner)
{
	struct claim_owner a = { 0 }, b = { 0 }, c = { 0 };
	struct waiter wb = { 0 }, wc = { 0 };
	ck_assert_int_eq(claims_take(&d, "x", &a), CLAIM_GRANTED);
	ck_assert_int_eq(claims_take(&d, "y", &c), CLAIM_GRANTED);
	wait_on(&wb, "x", &b, 60000);
	wait_on(&wc, "x", &c, 60000);
	wb.end = &c;
	claims_owner_gone(&d, &a);
	ck_assert_int_eq(wb.calls, 1);
	ck_assert_int_eq(wc.calls, 1);
	ck_assert_int_eq(wc.why, CLAIM_FREE);
	ck_assert_uint_eq(claims_count(&d), 0);
	ck_assert_ptr_null(c.claims);
}
END_TEST

START_TEST(stopping_answers_everyone)
{
	struct claim_owner a = { 0 }, b = { 0 };
	struct waiter w[3] = { { .take_over = true }, { .end = &a }, { 0 } };
	ck_assert_int_eq(claims_take(&d, "x", &a), CLAIM_GRANTED);
	ck_assert_int_eq(claims_take(&d, "y", &a), CLAIM_GRANTED);
	ck_assert_int_eq(claims_take(&d, "z", &b), CLAIM_GRANTED);
	wait_on(&w[0], "x", &b, 60000);
	wait_on(&w[1], "y", &b, 60000);
	wait_on(&w[2], "z", &a, 60000);
	/* w[1]'s answer ends a (its connection closed, say): x ends then,
	 * unpublished, and w[0] may not take it over any more. */
	claims_fini(&d);
	ck_assert_int_eq(w[1].why, CLAIM_GONE);
	ck_assert_int_eq(w[0].calls, 1);
	ck_assert_int_eq(w[0].why, CLAIM_FREE);
	ck_assert_int_eq(w[0].took, CLAIM_STOPPED);
	ck_assert_int_eq(w[2].calls, 1);    /* GONE, or LEFT if a ended first */
	ck_assert_ptr_null(a.claims);
	ck_assert_ptr_null(b.waits);
	ck_assert_int_eq(claims_take(&d, "x", &a), CLAIM_STOPPED);
	ck_assert(!claims_release(&d, "x", &a));
	claims_owner_gone(&d, &a);
	ck_assert_uint_eq(claims_count(&d), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("claims");
	TCase *tc = tcase_create("claims");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, a_claim_is_its_owners);
	tcase_add_test(tc, the_first_waiter_takes_over);
	tcase_add_test(tc, publication_answers_every_waiter);
	tcase_add_test(tc, a_deadline_ends_only_its_wait);
	tcase_add_test(tc, limits_hold);
	tcase_add_test(tc, an_answer_may_end_another_owner);
	tcase_add_test(tc, stopping_answers_everyone);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
