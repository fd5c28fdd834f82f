/*
 * Thread ownership, checked and not only written down. kilnd has one loop
 * thread (connections, flights, the queue, counters) and libuv's pool
 * (kilnd_work: blocking file and index work). A function only the loop may
 * call begins with ASSERT_LOOP(); pool work begins with ASSERT_POOL(). Both
 * are asserts: active in debug and sanitizer builds (the suite runs both),
 * gone with NDEBUG. Until main() records the loop thread (unit tests that
 * call the modules directly), every thread passes.
 */
#ifndef KILN_DAEMON_THREAD_H
#define KILN_DAEMON_THREAD_H

#include <assert.h>
#include <stdbool.h>

/* Records the calling thread as the loop thread (main, once). */
void thread_set_loop(void);
/* True when the calling thread is (want_loop) or is not the loop thread,
 * or when no loop thread was recorded. */
bool thread_is(bool want_loop);

#define ASSERT_LOOP() assert(thread_is(true))
#define ASSERT_POOL() assert(thread_is(false))

#endif
