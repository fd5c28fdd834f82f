/*
 * A flight's states and the one table of the moves between them
 * (flight_state.c, pure: tested by tests/test_flight_state.c). flight.c's
 * flight_enter is the only place that moves a flight, checking each move
 * here.
 */
#ifndef KILN_DAEMON_FLIGHT_STATE_H
#define KILN_DAEMON_FLIGHT_STATE_H

#include <stdbool.h>

/*
 * In order: NEW, made. UPSTREAM: the tier is asked first (--upstream).
 * QUEUED: waiting for a --jobs slot. CLAIMING: holding a slot, claiming the
 * key in the tier. PREPARING: the build directory being made (pool).
 * COMPILING, CHECKING: a compiler step, the load check. PUBLISHING: into
 * the store (pool). DONE: answered.
 */
enum flight_state {
	FLIGHT_NEW, FLIGHT_UPSTREAM, FLIGHT_QUEUED, FLIGHT_CLAIMING, FLIGHT_PREPARING,
	FLIGHT_COMPILING, FLIGHT_CHECKING, FLIGHT_PUBLISHING, FLIGHT_DONE, FLIGHT__COUNT
};

/* "new", "upstream", ...; "?" for a value out of range. */
const char *flight_state_name(enum flight_state s);
/* Whether a flight in state from may move to state to (both in range). */
bool flight_may_move(enum flight_state from, enum flight_state to);

#endif
