/*
 * Imports of received artifacts, off the transfer loop (mpi_import.c). A
 * put into the node's kilnd takes milliseconds; run inside the loop that
 * moves the bytes, it would hold up every other transfer of the node, and
 * with MPI's progress made only inside MPI calls, the children's bytes too.
 * So the loop hands each artifact to an importer: a thread of its own when
 * MPI allows threads beside the one calling it (MPI_THREAD_FUNNELED or
 * more), else a batch run once the round's transfers are over. The
 * importer never calls MPI.
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

/* An importer that runs run(ctx, job) for each job added, in order. A
 * thread that cannot be started makes it a batch. NULL only without
 * memory. */
struct importer *importer_start(enum import_mode mode, void (*run)(void *ctx, void *job),
				void *ctx);
/* Queues job (borrowed until importer_finish returns). */
void importer_add(struct importer *im, void *job);
/* Runs or waits for every queued job, then frees im. What the jobs wrote is
 * visible to the caller afterwards. */
void importer_finish(struct importer *im);
/* How the jobs run: true when on a thread of their own. */
bool importer_threaded(const struct importer *im);
/* The ctx importer_start was given. */
void *importer_ctx(const struct importer *im);

#endif
