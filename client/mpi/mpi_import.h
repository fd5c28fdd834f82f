/*
 * Imports of received artifacts, off the transfer loop (mpi_import.c). A
 * put into the node's kilnd takes milliseconds; run inside the loop that
 * moves the bytes, it would hold up every other transfer of the node, and
 * with MPI's progress made only inside MPI calls, the children's bytes too.
 * So the loop hands each artifact to an importer: threads of their own when
 * MPI allows threads beside the one calling it (MPI_THREAD_FUNNELED or
 * more), several so that kilnd's pool checks and stores several artifacts
 * at once (a put waits mostly for kilnd: hashing, fsync); else a batch run
 * once the round's transfers are over. The importer never calls MPI.
 */
#ifndef KILN_CLIENT_MPI_IMPORT_H
#define KILN_CLIENT_MPI_IMPORT_H

#include <stdbool.h>

struct importer;

/* How imports run: a thread, or a batch after the loop. */
enum import_mode { IMPORT_BATCH, IMPORT_THREAD };

/* The mode for this process: $KILN_MPI_IMPORT ("thread" or "batch") if
 * set, else a thread when MPI's thread level allows one. */
enum import_mode import_mode(void);

/* Import threads by default, and the count for this process:
 * $KILN_MPI_IMPORT_THREADS (1 to 64) if set, else the default. */
#define IMPORT_THREADS_DEFAULT 4
int import_threads(void);

/* An importer that runs run(ctx, job) for each job added, in the order
 * added, on nthreads threads at once (IMPORT_THREAD) or one after the
 * other in importer_finish (IMPORT_BATCH, or when no thread could be
 * started). run must be safe to run concurrently with itself. NULL only
 * without memory. */
struct importer *importer_start(enum import_mode mode, int nthreads,
				void (*run)(void *ctx, void *job), void *ctx);
/* Queues job (borrowed until importer_finish returns). */
void importer_add(struct importer *im, void *job);
/* Runs or waits for every queued job, then frees im. What the jobs wrote is
 * visible to the caller afterwards. */
void importer_finish(struct importer *im);
/* The threads the jobs run on; 0: a batch. */
int importer_threads(const struct importer *im);
/* The ctx importer_start was given. */
void *importer_ctx(const struct importer *im);

#endif
