/*
 * The flight's transition table (daemon/flight/flight_state.c): every move
 * a flight makes is accepted, every other refused. The moves are written
 * out here once more, as a list of edges from what each stage does (not
 * copied from the table), so that a change to the table must be a change
 * to this list too.
 */
#include <string.h>

#include "flight_state.h"
#include "unit.h"

#define N FLIGHT__COUNT

/* Every legal move, and why a flight makes it. */
static const struct { enum flight_state from, to; } legal[] = {
	{ FLIGHT_NEW, FLIGHT_UPSTREAM },          /* --upstream: the tier first */
	{ FLIGHT_NEW, FLIGHT_QUEUED },            /* no tier: wait for a slot */
	{ FLIGHT_NEW, FLIGHT_DONE },              /* failed before it began */
	{ FLIGHT_UPSTREAM, FLIGHT_QUEUED },       /* the tier missed */
	{ FLIGHT_UPSTREAM, FLIGHT_DONE },         /* a tier hit, need_sources, or failed */
	{ FLIGHT_QUEUED, FLIGHT_CLAIMING },       /* a slot, and a tier to claim in */
	{ FLIGHT_QUEUED, FLIGHT_PREPARING },      /* a slot, no tier */
	{ FLIGHT_QUEUED, FLIGHT_DONE },           /* cancelled, or the stop */
	{ FLIGHT_CLAIMING, FLIGHT_PREPARING },    /* claimed: build here */
	{ FLIGHT_CLAIMING, FLIGHT_UPSTREAM },     /* another node builds: wait for the tier */
	{ FLIGHT_CLAIMING, FLIGHT_QUEUED },       /* the claim must wait for a slot again */
	{ FLIGHT_CLAIMING, FLIGHT_DONE },
	{ FLIGHT_PREPARING, FLIGHT_COMPILING },
	{ FLIGHT_PREPARING, FLIGHT_CHECKING },    /* nothing to compile: the load check */
	{ FLIGHT_PREPARING, FLIGHT_PUBLISHING },  /* no step at all (a .gch copied) */
	{ FLIGHT_PREPARING, FLIGHT_QUEUED },      /* an input changed: built again once */
	{ FLIGHT_PREPARING, FLIGHT_DONE },
	{ FLIGHT_COMPILING, FLIGHT_COMPILING },   /* the next compiler step */
	{ FLIGHT_COMPILING, FLIGHT_CHECKING },
	{ FLIGHT_COMPILING, FLIGHT_PUBLISHING },
	{ FLIGHT_COMPILING, FLIGHT_QUEUED },
	{ FLIGHT_COMPILING, FLIGHT_DONE },
	{ FLIGHT_CHECKING, FLIGHT_COMPILING },    /* a step after the check */
	{ FLIGHT_CHECKING, FLIGHT_PUBLISHING },
	{ FLIGHT_CHECKING, FLIGHT_QUEUED },
	{ FLIGHT_CHECKING, FLIGHT_DONE },
	{ FLIGHT_PUBLISHING, FLIGHT_QUEUED },     /* an input changed while it ran */
	{ FLIGHT_PUBLISHING, FLIGHT_DONE },
};

static bool is_legal(enum flight_state from, enum flight_state to)
{
	for (size_t i = 0; i < sizeof(legal) / sizeof(legal[0]); i++)
		if (legal[i].from == from && legal[i].to == to)
			return true;
	return false;
}

START_TEST(test_every_pair)
{
	unsigned accepted = 0;
	for (int from = 0; from < N; from++) {
		for (int to = 0; to < N; to++) {
			bool want = is_legal((enum flight_state)from, (enum flight_state)to);
			ck_assert_msg(flight_may_move((enum flight_state)from, (enum flight_state)to) == want,
				      "%s -> %s: %s", flight_state_name((enum flight_state)from),
				      flight_state_name((enum flight_state)to),
				      want ? "refused, but a flight makes it" : "accepted, but no flight may");
			accepted += want;
		}
	}
	ck_assert_uint_eq(accepted, sizeof(legal) / sizeof(legal[0]));
}
END_TEST

/* DONE is the end: nothing leaves it; nothing comes back to NEW. */
START_TEST(test_ends)
{
	for (int s = 0; s < N; s++) {
		ck_assert(!flight_may_move(FLIGHT_DONE, (enum flight_state)s));
		ck_assert(!flight_may_move((enum flight_state)s, FLIGHT_NEW));
	}
}
END_TEST

START_TEST(test_out_of_range)
{
	ck_assert(!flight_may_move(FLIGHT__COUNT, FLIGHT_DONE));
	ck_assert(!flight_may_move(FLIGHT_NEW, FLIGHT__COUNT));
	ck_assert(!flight_may_move((enum flight_state)-1, FLIGHT_QUEUED));
	ck_assert_str_eq(flight_state_name(FLIGHT__COUNT), "?");
	ck_assert_str_eq(flight_state_name((enum flight_state)-1), "?");
}
END_TEST

/* Each state has its own name (kiln status and kiln top show them). */
START_TEST(test_names)
{
	for (int a = 0; a < N; a++) {
		ck_assert_str_ne(flight_state_name((enum flight_state)a), "?");
		for (int b = a + 1; b < N; b++)
			ck_assert_str_ne(flight_state_name((enum flight_state)a),
					 flight_state_name((enum flight_state)b));
	}
	ck_assert_str_eq(flight_state_name(FLIGHT_COMPILING), "compiling");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("flight_state");
	TCase *tc = tcase_create("moves");
	tcase_add_test(tc, test_every_pair);
	tcase_add_test(tc, test_ends);
	tcase_add_test(tc, test_out_of_range);
	tcase_add_test(tc, test_names);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
