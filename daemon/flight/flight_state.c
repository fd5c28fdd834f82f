/*
 * The moves between a flight's states (flight_state.h): the table that
 * flight.c's flight_enter checks every move against. Pure.
 */
#include "flight_state.h"

static const char *const state_names[FLIGHT__COUNT] = {
	"new", "upstream", "queued", "claiming", "preparing", "compiling", "checking",
	"publishing", "done",
};

#define TO(s) (1u << (s))
/* The states each state may move to. */
static const unsigned next_states[FLIGHT__COUNT] = {
	[FLIGHT_NEW] = TO(FLIGHT_UPSTREAM) | TO(FLIGHT_QUEUED) | TO(FLIGHT_DONE),
	[FLIGHT_UPSTREAM] = TO(FLIGHT_QUEUED) | TO(FLIGHT_DONE),
	[FLIGHT_QUEUED] = TO(FLIGHT_CLAIMING) | TO(FLIGHT_PREPARING) | TO(FLIGHT_DONE),
	[FLIGHT_CLAIMING] = TO(FLIGHT_PREPARING) | TO(FLIGHT_UPSTREAM) | TO(FLIGHT_QUEUED) |
			    TO(FLIGHT_DONE),
	/* Each of the next may go back to QUEUED: built again once after an
	 * input changed (flight_retry). */
	[FLIGHT_PREPARING] = TO(FLIGHT_COMPILING) | TO(FLIGHT_CHECKING) | TO(FLIGHT_PUBLISHING) |
			     TO(FLIGHT_QUEUED) | TO(FLIGHT_DONE),
	[FLIGHT_COMPILING] = TO(FLIGHT_COMPILING) | TO(FLIGHT_CHECKING) | TO(FLIGHT_PUBLISHING) |
			     TO(FLIGHT_QUEUED) | TO(FLIGHT_DONE),
	[FLIGHT_CHECKING] = TO(FLIGHT_COMPILING) | TO(FLIGHT_PUBLISHING) | TO(FLIGHT_QUEUED) |
			    TO(FLIGHT_DONE),
	[FLIGHT_PUBLISHING] = TO(FLIGHT_QUEUED) | TO(FLIGHT_DONE),
	[FLIGHT_DONE] = 0,
};

const char *flight_state_name(enum flight_state s)
{
	return (unsigned)s < FLIGHT__COUNT ? state_names[s] : "?";
}

bool flight_may_move(enum flight_state from, enum flight_state to)
{
	if ((unsigned)from >= FLIGHT__COUNT || (unsigned)to >= FLIGHT__COUNT)
		return false;
	return (next_states[from] & TO(to)) != 0;
}
