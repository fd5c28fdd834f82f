/*
 * The importer of mpi_import.h: a queue of jobs and, when MPI allows it,
 * threads that run them while the caller goes on moving bytes.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "mpi_import.h"
#include "mpi_int.h"

#define MAX_THREADS 64

struct importer {
	void (*run)(void *ctx, void *job);
	void *ctx;
	pthread_t threads[MAX_THREADS];
	int nthreads;     /* started; 0: a batch */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	void **jobs;      /* the queue: jobs[head..n) still to run */
	size_t n, cap, head;
	bool closing;     /* no more jobs come: the threads end once the queue is empty */
};

enum import_mode import_mode(void)
{
	const char *v = getenv("KILN_MPI_IMPORT");
	if (v != NULL && strcmp(v, "batch") == 0)
		return IMPORT_BATCH;
	if (v != NULL && strcmp(v, "thread") == 0)
		return IMPORT_THREAD;
	int provided = MPI_THREAD_SINGLE;
	MPI_Query_thread(&provided);
	return provided >= MPI_THREAD_FUNNELED ? IMPORT_THREAD : IMPORT_BATCH;
}

int import_threads(void)
{
	const char *v = getenv("KILN_MPI_IMPORT_THREADS");
	char *end;
	long n = v != NULL ? strtol(v, &end, 10) : 0;
	if (v == NULL || *v == '\0' || *end != '\0' || n < 1 || n > MAX_THREADS)
		return IMPORT_THREADS_DEFAULT;
	return (int)n;
}

static void *importer_main(void *arg)
{
	struct importer *im = arg;
	pthread_mutex_lock(&im->lock);
	for (;;) {
		while (im->head == im->n && !im->closing)
			pthread_cond_wait(&im->cond, &im->lock);
		if (im->head == im->n)
			break;
		void *job = im->jobs[im->head++];
		pthread_mutex_unlock(&im->lock);
		im->run(im->ctx, job);
		pthread_mutex_lock(&im->lock);
	}
	pthread_mutex_unlock(&im->lock);
	return NULL;
}

struct importer *importer_start(enum import_mode mode, int nthreads,
				void (*run)(void *ctx, void *job), void *ctx)
{
	struct importer *im = calloc(1, sizeof(*im));
	if (im == NULL)
		return NULL;
	im->run = run;
	im->ctx = ctx;
	pthread_mutex_init(&im->lock, NULL);
	pthread_cond_init(&im->cond, NULL);
	if (nthreads > MAX_THREADS)
		nthreads = MAX_THREADS;
	/* Those that start run the jobs; none started makes it a batch. */
	for (int i = 0; mode == IMPORT_THREAD && i < nthreads; i++) {
		if (pthread_create(&im->threads[im->nthreads], NULL, importer_main, im) != 0)
			break;
		im->nthreads++;
	}
	return im;
}

void importer_add(struct importer *im, void *job)
{
	pthread_mutex_lock(&im->lock);
	if (im->n == im->cap) {
		size_t cap = im->cap ? im->cap * 2 : 64;
		void **p = realloc(im->jobs, cap * sizeof(*p));
		if (p == NULL)
			mpi_oom();
		im->jobs = p;
		im->cap = cap;
	}
	im->jobs[im->n++] = job;
	pthread_cond_signal(&im->cond);
	pthread_mutex_unlock(&im->lock);
}

void importer_finish(struct importer *im)
{
	if (im->nthreads > 0) {
		pthread_mutex_lock(&im->lock);
		im->closing = true;
		pthread_cond_broadcast(&im->cond);
		pthread_mutex_unlock(&im->lock);
		for (int i = 0; i < im->nthreads; i++)
			pthread_join(im->threads[i], NULL);
	} else {
		for (; im->head < im->n; im->head++)
			im->run(im->ctx, im->jobs[im->head]);
	}
	pthread_mutex_destroy(&im->lock);
	pthread_cond_destroy(&im->cond);
	free(im->jobs);
	free(im);
}

int importer_threads(const struct importer *im)
{
	return im->nthreads;
}

void *importer_ctx(const struct importer *im)
{
	return im->ctx;
}
