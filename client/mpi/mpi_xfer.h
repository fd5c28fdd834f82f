/*
 * Moving artifacts between node leaders (mpi_xfer.c): each program travels
 * down a binary tree of the nodes that need it, rooted at the node that has
 * it, so that no node sends more than two copies of any artifact and the
 * time grows with log N. Every message is a header (magic, sequence number
 * per sender and receiver, program id, outcome, metadata, size) followed by
 * the bytes in chunks; a header that is not the one expected is a clear
 * error for that program, never a desync. Everything is nonblocking and has
 * a deadline.
 */
#ifndef KILN_CLIENT_MPI_XFER_H
#define KILN_CLIENT_MPI_XFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#include "mpi_tree.h"

/* One program this node sends or receives in a round. */
struct xfer_item {
	uint8_t id[32];
	int parent;           /* the node it comes from; -1: this node is the root */
	int kids[MPI_TREE_FANOUT];  /* the nodes this node passes it on to */
	int nkids;
	/* The root fills these (borrowed); a receiver gets them (owned). */
	int code;             /* 0, or the kiln code of the program's failure */
	char *text;           /* code 0: the export metadata; else the message */
	const char *data;
	size_t size;
	/* Receiver's outcome: lost when nothing usable arrived (then code is
	 * KILN_EIO or KILN_EPROTO and text says what went wrong); otherwise it
	 * came whole and on_complete ran. */
	bool lost;            /* nothing usable arrived (deadline, protocol) */
	/* Internal. */
	int state;
	char *own_data;
	MPI_Request *rq;
	int nrq;
};

/*
 * Runs one round among the leaders: items (sorted by id, each with its
 * parent and kids) are sent, received and passed on. on_complete(ctx,
 * item) runs for each item received whole, after it was passed on, and
 * for each failure that arrived; it must be quick (the caller queues the
 * import for mpi_import.c and returns). round makes the tags
 * of this round its own. Returns when every item is complete or lost and
 * every send is done, or at the deadline (timeout_s; then what has not
 * arrived is lost, with a message naming the node it waited for).
 */
void xfer_run(MPI_Comm leaders, int round, struct xfer_item *items, size_t n, double timeout_s,
	      void (*on_complete)(void *ctx, struct xfer_item *item), void *ctx);
/* Frees what xfer_run allocated in the items (received bytes and texts). */
void xfer_free(struct xfer_item *items, size_t n);


/* The deadline of a round: kiln_mpi_set_timeout's, else $KILN_MPI_TIMEOUT
 * seconds, else 300. */
double xfer_timeout(void);

#endif
