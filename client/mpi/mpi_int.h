/*
 * The inside of libkiln-mpi: the job's topology (node and leader
 * communicators), byte buffers for what travels over MPI, and the warm
 * algorithm shared by kiln_mpi_warm and kiln_mpi_get.
 */
#ifndef KILN_CLIENT_MPI_INT_H
#define KILN_CLIENT_MPI_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#include "kiln/kiln.h"
#include "kiln/kiln_mpi.h"

/* The nodes of a communicator. leaders is MPI_COMM_NULL on other ranks. */
struct topo {
	MPI_Comm node;      /* the ranks of this node */
	MPI_Comm leaders;   /* one rank per node (node rank 0), private to us */
	int rank, size;     /* in the caller's communicator */
	int node_rank, node_size;
	int node_index, nnodes;
	bool leader;
	int per_node;       /* $KILN_MPI_NODE_SIZE it was made with (0: shared memory) */
	bool cached;        /* owned by the communicator's attribute: topo_free leaves it */
};

/* Splits comm into nodes ($KILN_MPI_NODE_SIZE, else shared memory), once:
 * later calls on comm reuse the split (cached on comm). 0 or a kiln code
 * (with the error text set); collective. */
int topo_make(MPI_Comm comm, struct topo *t);
void topo_free(struct topo *t);

/* A growing byte buffer; on ENOMEM it stays failed (oom) and writes stop. */
struct buf {
	char *data;
	size_t len, cap;
	bool oom;
};

void buf_put(struct buf *b, const void *p, size_t n);
void buf_u32(struct buf *b, uint32_t v);
void buf_u64(struct buf *b, uint64_t v);
/* A string with its length; NULL is written as the length 0xffffffff. The
 * bytes are followed by a NUL, so that readers can point into the buffer. */
void buf_str(struct buf *b, const char *s, size_t len);
void buf_free(struct buf *b);

/* Reading back what buf_* wrote; any overrun sets bad and yields zeroes. */
struct rd {
	const char *p;
	size_t len, off;
	bool bad;
};

uint32_t rd_u32(struct rd *r);
uint64_t rd_u64(struct rd *r);
/* A pointer into the buffer (NUL-terminated) and its length; NULL for NULL. */
const char *rd_str(struct rd *r, size_t *len);

/* A request's full content (text included, alias left out). */
void pack_request(struct buf *b, const struct kiln_request *req);
/*
 * Reads a request packed by pack_request; strings point into r's buffer,
 * args and sources are malloc'd (free with unpack_free). 0, or -1 when the
 * bytes are malformed or memory runs out.
 */
int unpack_request(struct rd *r, struct kiln_request *req);
void unpack_free(struct kiln_request *req);

/*
 * Waiting without spinning. MPI implementations busy-poll inside blocking
 * calls, and while a node's daemon compiles, every rank spinning in a
 * collective takes a core from the compilers. These poll with a sleep that
 * grows from 20 us to 1 ms instead.
 */
void polite_wait(MPI_Request *rq);
void polite_barrier(MPI_Comm comm);
void polite_probe(int source, int tag, MPI_Comm comm, MPI_Status *st);

/* Out of memory where the ranks must stay in step: reports it and aborts
 * the job (MPI_Abort), which is better than a job that hangs. */
void mpi_oom(void) __attribute__((noreturn));

/* MPI counts are ints: refuses a size above INT_MAX with the error text. */
int mpi_count(size_t n, const char *what, int *out);

/*
 * The warm algorithm (mpi_warm.c). status (n entries) gets each request's
 * code. Returns the first failure's code with its text, or KILN_OK.
 */
int warm_run(struct kiln *k, MPI_Comm comm, const struct kiln_request *reqs, size_t n,
	     struct kiln_warm_report *report, int *status);

#endif
