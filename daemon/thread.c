/*
 * The loop thread, recorded for ASSERT_LOOP and ASSERT_POOL (thread.h).
 */
#include <pthread.h>
#include <stdatomic.h>

#include "thread.h"

static pthread_t loop_thread;
static atomic_bool loop_set;

void thread_set_loop(void)
{
	loop_thread = pthread_self();
	atomic_store(&loop_set, true);
}

bool thread_is(bool want_loop)
{
	if (!atomic_load(&loop_set))
		return true;
	return (pthread_equal(pthread_self(), loop_thread) != 0) == want_loop;
}
