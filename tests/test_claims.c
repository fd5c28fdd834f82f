/*
 * Unit tests of the claims table (daemon/claims.c), on a real libuv loop
 * and no server: who holds a claim, waiters answered once each in the
 * order they came, a takeover from inside a callback, deadlines, the
 * limits, an owner's end, and kilnd stopping.
 */
#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "claims.h"
#include "config.h"
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
		w->took = claims_take(&d, w->alias, CLAIM_ALIAS, w->owner);
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

/* The owners end, as their connections would: the table keeps each on
 * its process's list until then. NULL-terminated. */
static void gone(struct claim_owner *o, ...)
{
	va_list ap;
	va_start(ap, o);
	for (; o != NULL; o = va_arg(ap, struct claim_owner *))
		claims_owner_gone(&d, o);
	va_end(ap);
}

START_TEST(a_claim_is_its_owners)
{
	struct claim_owner a = { 0 }, b = { 0 };
	ck_assert_int_eq(claims_take(&d, "x", CLAIM_ALIAS, &a), CLAIM_GRANTED);
	ck_assert_int_eq(claims_take(&d, "x", CLAIM_ALIAS, &a), CLAIM_HELD);
	ck_assert_int_eq(claims_take(&d, "x", CLAIM_ALIAS, &b), CLAIM_OTHER);
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
	ck_assert_int_eq(claims_take(&d, "x", CLAIM_ALIAS, &b), CLAIM_GRANTED);
	ck_assert_uint_eq(d.c.claims, 0);   /* counted by the server layer, per kind */
	claims_owner_gone(&d, &b);
	ck_assert_uint_eq(claims_count(&d), 0);
	gone(&a, NULL);
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
	ck_assert_int_eq(claims_take(&d, "r", CLAIM_ALIAS, &a), CLAIM_GRANTED);
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
	ck_assert_int_eq(claims_take(&d, "x", CLAIM_ALIAS, &a), CLAIM_GRANTED);
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
	gone(&a, &b, &c, NULL);
}
END_TEST

START_TEST(publication_answers_every_waiter)
{
	struct claim_owner a = { 0 }, b = { 0 };
	struct waiter w[3] = { { 0 } };
	answered = 0;
	ck_assert_int_eq(claims_take(&d, "x", CLAIM_ALIAS, &a), CLAIM_GRANTED);
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
	gone(&a, &b, NULL);
}
END_TEST

START_TEST(a_deadline_ends_only_its_wait)
{
	struct claim_owner a = { 0 }, b = { 0 };
	struct waiter soon = { 0 }, late = { 0 };
	ck_assert_int_eq(claims_take(&d, "x", CLAIM_ALIAS, &a), CLAIM_GRANTED);
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
	gone(&a, &b, NULL);
}
END_TEST

START_TEST(limits_hold)
{
	struct claim_owner a = { 0 }, b = { 0 }, c = { 0 };
	char alias[32];
	for (int i = 0; i < CLAIMS_PER_OWNER; i++) {
		snprintf(alias, sizeof(alias), "a%d", i);
		ck_assert_int_eq(claims_take(&d, alias, CLAIM_ALIAS, &a), CLAIM_GRANTED);
	}
	ck_assert_int_eq(claims_take(&d, "one more", CLAIM_ALIAS, &a), CLAIM_OWNER_FULL);
	ck_assert_int_eq(claims_take(&d, "one more", CLAIM_ALIAS, &b), CLAIM_GRANTED);
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
	gone(&a, &b, &c, NULL);
}
END_TEST

/* A waiter's answer ends the owner of a waiter not yet answered (a reply
 * that fails closes its connection): that one is still answered once,
 * with the claim's end, and nothing freed is touched. */
START_TEST(an_answer_may_end_another_owner)
{
	struct claim_owner a = { 0 }, b = { 0 }, c = { 0 };
	struct waiter wb = { 0 }, wc = { 0 };
	ck_assert_int_eq(claims_take(&d, "x", CLAIM_ALIAS, &a), CLAIM_GRANTED);
	ck_assert_int_eq(claims_take(&d, "y", CLAIM_ALIAS, &c), CLAIM_GRANTED);
	wait_on(&wb, "x", &b, 60000);
	wait_on(&wc, "x", &c, 60000);
	wb.end = &c;
	claims_owner_gone(&d, &a);
	ck_assert_int_eq(wb.calls, 1);
	ck_assert_int_eq(wc.calls, 1);
	ck_assert_int_eq(wc.why, CLAIM_FREE);
	ck_assert_uint_eq(claims_count(&d), 0);
	ck_assert_ptr_null(c.claims);
	gone(&a, &b, &c, NULL);
}
END_TEST

START_TEST(stopping_answers_everyone)
{
	struct claim_owner a = { 0 }, b = { 0 };
	struct waiter w[3] = { { .take_over = true }, { .end = &a }, { 0 } };
	ck_assert_int_eq(claims_take(&d, "x", CLAIM_ALIAS, &a), CLAIM_GRANTED);
	ck_assert_int_eq(claims_take(&d, "y", CLAIM_ALIAS, &a), CLAIM_GRANTED);
	ck_assert_int_eq(claims_take(&d, "z", CLAIM_ALIAS, &b), CLAIM_GRANTED);
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
	ck_assert_int_eq(claims_take(&d, "x", CLAIM_ALIAS, &a), CLAIM_STOPPED);
	ck_assert(!claims_release(&d, "x", &a));
	claims_owner_gone(&d, &a);
	ck_assert_uint_eq(claims_count(&d), 0);
	gone(&a, &b, NULL);
}
END_TEST

/* ---- the node's claims shared out ----------------------------------- */

/* owners[0..n) of one process (uid 1000, pid). */
static void of_process(struct claim_owner *owners, int n, pid_t pid)
{
	memset(owners, 0, (size_t)n * sizeof(*owners));
	for (int i = 0; i < n; i++)
		claims_owner_init(&owners[i], 1000, pid);
}

/* Claims "PREFIX:i" for i in [from, to) on owner. */
static void take_many(struct claim_owner *owner, const char *prefix, int from, int to)
{
	char alias[64];
	for (int i = from; i < to; i++) {
		snprintf(alias, sizeof(alias), "%s:%d", prefix, i);
		ck_assert_int_eq(claims_take(&d, alias, CLAIM_ALIAS, owner), CLAIM_GRANTED);
	}
}

/* However many connections one process opens, it holds CLAIMS_PER_PEER
 * claims (text turns included); another process still claims; status
 * names the holder with its connections. */
START_TEST(one_process_holds_at_most_its_share)
{
	static struct claim_owner p[5], q;
	of_process(p, 5, 42);
	of_process(&q, 1, 43);
	for (int i = 0; i < 4; i++) {
		char prefix[16];
		snprintf(prefix, sizeof(prefix), "p%d", i);
		take_many(&p[i], prefix, 0, CLAIMS_PER_OWNER);
	}
	ck_assert_int_eq(claims_take(&d, "more", CLAIM_ALIAS, &p[4]), CLAIM_PEER_FULL);
	ck_assert_int_eq(claims_take(&d, "text more", CLAIM_TURN, &p[4]), CLAIM_PEER_FULL);
	ck_assert_int_eq(claims_take(&d, "more", CLAIM_ALIAS, &q), CLAIM_GRANTED);
	ck_assert_int_eq(claims_take(&d, "text q", CLAIM_TURN, &q), CLAIM_GRANTED);
	struct claim_holder h[4];
	ck_assert_uint_eq(claims_holders(&d, h, 4), 2);
	ck_assert_int_eq(h[0].pid, 42);
	ck_assert_uint_eq(h[0].claims, CLAIMS_PER_PEER);
	ck_assert_uint_eq(h[0].connections, 5);
	ck_assert_int_eq(h[1].pid, 43);
	ck_assert_uint_eq(h[1].claims, 1);
	ck_assert_uint_eq(h[1].turns, 1);
	/* one of its claims ends: it may claim one more, on any connection */
	ck_assert(claims_release(&d, "p0:0", &p[0]));
	ck_assert_int_eq(claims_take(&d, "more2", CLAIM_ALIAS, &p[4]), CLAIM_GRANTED);
	for (int i = 0; i < 5; i++)
		claims_owner_gone(&d, &p[i]);
	ck_assert_uint_eq(claims_holders(&d, h, 4), 1);
	gone(&q, NULL);
	ck_assert_uint_eq(claims_holders(&d, h, 4), 0);
	ck_assert_uint_eq(claims_count(&d), 0);
}
END_TEST

/*
 * A full table: a process that holds none still claims. The process that
 * holds the most gives up its least recent claim, whose waiter (of a
 * third process) takes it over; that takes the place again, so a second
 * claim of the same process ends and the newcomer gets its place. A
 * process at or above the average share is refused.
 */
START_TEST(a_full_table_makes_room_for_a_lighter_process)
{
	static struct claim_owner big[4], rest[16][4], w, v;
	char prefix[32];
	of_process(big, 4, 1);
	for (int i = 0; i < 4; i++) {
		snprintf(prefix, sizeof(prefix), "big%d", i);
		take_many(&big[i], prefix, 0, CLAIMS_PER_OWNER);
	}
	/* sixteen more processes of 3,840 claims each: the table is full */
	for (int pid = 0; pid < 16; pid++) {
		of_process(rest[pid], 4, 10 + pid);
		for (int i = 0; i < 4; i++) {
			snprintf(prefix, sizeof(prefix), "r%d.%d", pid, i);
			take_many(&rest[pid][i], prefix, 0, 960);
		}
	}
	ck_assert_uint_eq(claims_count(&d), CLAIMS_MAX);
	of_process(&w, 1, 100);
	of_process(&v, 1, 101);
	struct waiter ww = { .take_over = true };
	wait_on(&ww, "big0:0", &w, 60000);
	ck_assert_int_eq(claims_take(&d, "new", CLAIM_ALIAS, &v), CLAIM_GRANTED);
	ck_assert_int_eq(ww.calls, 1);
	ck_assert_int_eq(ww.why, CLAIM_FREE);
	ck_assert_int_eq(ww.took, CLAIM_GRANTED);
	ck_assert_uint_eq(d.c.claims_displaced, 2);
	ck_assert_uint_eq(claims_count(&d), CLAIMS_MAX);
	ck_assert_int_eq(claims_take(&d, "big0:1", CLAIM_ALIAS, &w), CLAIM_GRANTED);   /* ended too */
	ck_assert_uint_eq(d.c.claims_displaced, 3);
	/* at or above the average: no room made */
	ck_assert_int_eq(claims_take(&d, "more", CLAIM_ALIAS, &rest[0][0]), CLAIM_FULL);
	ck_assert_int_eq(claims_take(&d, "more", CLAIM_ALIAS, &big[0]), CLAIM_FULL);
	ck_assert_uint_eq(d.c.claims_displaced, 3);
	struct claim_holder h[2];
	ck_assert_uint_eq(claims_holders(&d, h, 2), 19);
	ck_assert_int_eq(h[0].pid, 1);
	ck_assert_uint_eq(h[0].claims, CLAIMS_PER_PEER - 3);
	gone(&big[0], &big[1], &big[2], &big[3], &w, &v, NULL);
	for (int pid = 0; pid < 16; pid++)
		gone(&rest[pid][0], &rest[pid][1], &rest[pid][2], &rest[pid][3], NULL);
	ck_assert_uint_eq(claims_count(&d), 0);
}
END_TEST

/* An owner whose end has run takes nothing and waits for nothing, even
 * when a callback ended it while it asked. */
START_TEST(a_gone_owner_takes_nothing)
{
	struct claim_owner a = { 0 }, b = { 0 };
	ck_assert_int_eq(claims_take(&d, "x", CLAIM_ALIAS, &b), CLAIM_GRANTED);
	claims_owner_gone(&d, &a);
	ck_assert_int_eq(claims_take(&d, "y", CLAIM_ALIAS, &a), CLAIM_STOPPED);
	ck_assert_int_eq(claims_wait(&d, "x", 1000, &a, on_end, NULL), -ENOENT);
	ck_assert_uint_eq(claims_count(&d), 1);
	gone(&b, NULL);
}
END_TEST

static void renew_busy(uv_timer_t *t)
{
	(void)t;
	claims_progress(&d, "busy");
}

/*
 * With an expiry of 200 ms, a claim without progress ends as if its owner
 * had gone (its waiter takes it over), while one renewed at 100 ms lives
 * on. Timers run in the order they are due, so the renewal always comes
 * first, however late the loop runs.
 */
START_TEST(a_claim_without_progress_expires)
{
	static struct config cfg;
	cfg.claim_expiry_s = 0.2;
	claims_fini(&d);
	uv_run(&loop, UV_RUN_DEFAULT);
	d.cfg = &cfg;
	ck_assert_int_eq(claims_init(&d), 0);
	struct claim_owner a = { 0 }, b = { 0 }, c = { 0 };
	ck_assert_int_eq(claims_take(&d, "idle", CLAIM_ALIAS, &a), CLAIM_GRANTED);
	ck_assert_int_eq(claims_take(&d, "busy", CLAIM_ALIAS, &b), CLAIM_GRANTED);
	struct waiter w = { .take_over = true };
	wait_on(&w, "idle", &c, 60000);
	static uv_timer_t renew;   /* closed by the teardown's loop run */
	uv_timer_init(&loop, &renew);
	uv_timer_start(&renew, renew_busy, 100, 0);
	while (w.calls == 0)
		uv_run(&loop, UV_RUN_ONCE);
	ck_assert_int_eq(w.why, CLAIM_FREE);
	ck_assert_int_eq(w.took, CLAIM_GRANTED);
	ck_assert_uint_eq(d.c.claims_expired, 1);
	ck_assert_uint_eq(a.nclaims, 0);
	ck_assert_int_eq(claims_take(&d, "busy", CLAIM_ALIAS, &b), CLAIM_HELD);
	ck_assert(!claims_release(&d, "idle", &a));
	uv_close((uv_handle_t *)&renew, NULL);
	gone(&a, &b, &c, NULL);
	d.cfg = NULL;
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
	tcase_add_test(tc, one_process_holds_at_most_its_share);
	tcase_add_test(tc, a_full_table_makes_room_for_a_lighter_process);
	tcase_add_test(tc, a_gone_owner_takes_nothing);
	tcase_add_test(tc, a_claim_without_progress_expires);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
