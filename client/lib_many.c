/*
 * kiln_get_many: a batch of gets in flight at once. A rank that asks for its
 * programs one after another lets the daemon build only one at a time while
 * the other --jobs slots idle; a batch fills them. Each get runs in a worker
 * thread on the shared, pipelined connection (lib_conn.c), so the requests
 * reach the daemon together and each reply wakes its own waiter.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib_internal.h"

#define MANY_THREADS_MAX 64

struct many {
	struct kiln *k;
	const struct kiln_request *reqs;
	struct kiln_program **out;
	int *status;
	size_t n;
	atomic_size_t next;
	pthread_mutex_t lock;
	size_t first_failed;      /* index of the first failure seen, or n */
	int first_rc;
	char msg[4096];           /* its kiln_errmsg, for the calling thread */
};

static void *many_worker(void *arg)
{
	struct many *m = arg;
	for (;;) {
		size_t i = atomic_fetch_add(&m->next, 1);
		if (i >= m->n)
			return NULL;
		int rc = kiln_get(m->k, &m->reqs[i], &m->out[i]);
		if (m->status != NULL)
			m->status[i] = rc;
		if (rc != KILN_OK) {
			pthread_mutex_lock(&m->lock);
			if (i < m->first_failed) {
				m->first_failed = i;
				m->first_rc = rc;
				snprintf(m->msg, sizeof(m->msg), "request %zu: %s", i, kiln_errmsg(m->k));
			}
			pthread_mutex_unlock(&m->lock);
		}
	}
}

int kiln_get_many(struct kiln *k, const struct kiln_request *reqs, size_t n,
		  struct kiln_program **out, int *status)
{
	struct many m = { .k = k, .reqs = reqs, .out = out, .status = status, .n = n,
			  .first_failed = n };
	pthread_t threads[MANY_THREADS_MAX];
	size_t nthreads = n < MANY_THREADS_MAX ? n : MANY_THREADS_MAX, started = 0;

	if (!k || (n > 0 && (!reqs || !out)))
		return lib_err_set(KILN_EINVAL, "kiln_get_many: k, reqs and out must not be NULL");
	memset(out, 0, n * sizeof(*out));
	atomic_init(&m.next, 0);
	pthread_mutex_init(&m.lock, NULL);
	/* The calling thread works too; the others only add parallelism, so a
	 * thread that cannot be created just means fewer at once. */
	for (size_t t = 1; t < nthreads; t++) {
		if (pthread_create(&threads[started], NULL, many_worker, &m) != 0)
			break;
		started++;
	}
	many_worker(&m);
	for (size_t t = 0; t < started; t++)
		pthread_join(threads[t], NULL);
	pthread_mutex_destroy(&m.lock);
	if (m.first_failed == n)
		return KILN_OK;
	return lib_err_set(m.first_rc, "%s", m.msg);
}
