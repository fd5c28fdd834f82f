/*
 * The harnesses' checks: abort, not assert, so that the replays of the
 * corpora (fuzz_replay_*, also in release builds where NDEBUG empties
 * assert) check as much as the fuzzers do.
 */
#ifndef KILN_FUZZ_CHECK_H
#define KILN_FUZZ_CHECK_H

#include <stdlib.h>

#define FUZZ_CHECK(cond) \
	do { \
		if (!(cond)) \
			abort(); \
	} while (0)

#endif
