/*
 * libkiln-mpi: kiln across the ranks and nodes of an MPI job. Each program is
 * compiled once per job, whatever the number of nodes: node leaders (the
 * lowest rank of each node) talk to their node's kilnd, the job's missing
 * programs are shared out among the nodes, and the artifacts travel between
 * nodes over MPI. A separate library, so that libkiln needs no MPI; link with
 * pkg-config kiln-mpi. See docs/mpi.md.
 *
 * Every function here is collective over comm: all its ranks call it, in the
 * same order. A rank's failure is reported on that rank; no rank is left
 * waiting in a collective because another one failed.
 */
#ifndef KILN_KILN_MPI_H
#define KILN_KILN_MPI_H

#include <stddef.h>

#include <mpi.h>

#include "kiln/kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * What kiln_mpi_warm did, counted over the distinct programs that the ranks
 * of the caller's node asked for; every rank of a node gets the same report.
 */
struct kiln_warm_report {
	size_t built_here;      /* built (or got from upstream) by this node's daemon */
	size_t received;        /* built by another node, imported into this one */
	size_t already_cached;  /* this node's daemon had them already */
	size_t failed;          /* failed, on whichever node built them */
};

/*
 * Connects each rank to its node's daemon. socket_path NULL means
 * $KILN_SOCKET, else libkiln's default. A "%n" in the path is replaced by
 * the node's index (0 .. nodes-1), so that tests can run one kilnd per
 * simulated node. Nodes are found with MPI_Comm_split_type(
 * MPI_COMM_TYPE_SHARED); $KILN_MPI_NODE_SIZE=n instead makes every n
 * consecutive ranks of comm a node. Each rank gets its own result: a rank
 * whose node's kilnd does not answer gets the error and *out NULL, and the
 * others go on. Such a rank must still call the later collective functions
 * (with k NULL: it takes part with nothing and gets KILN_EINVAL), so that
 * nobody waits for it. *out: as kiln_open().
 */
int kiln_mpi_open(MPI_Comm comm, const char *socket_path, struct kiln **out);

/*
 * kiln_get for a request that every rank of comm makes (the same program on
 * every rank). The program is built once for the whole job: by one node,
 * then imported by the others' daemons. On each node only the leader sends
 * the request with its sources to the daemon; the other ranks get the
 * artifact by its key. A rank whose request differs from its leader's gets
 * its own with kiln_get. A build failure is returned on every rank with the
 * same code and the same kiln_errmsg text (the compiler's diagnostics).
 */
int kiln_mpi_get(struct kiln *k, MPI_Comm comm, const struct kiln_request *req,
		 struct kiln_program **out);

/*
 * Makes every rank's n requests cached on its node, building each distinct
 * program once for the whole job. The union of all ranks' requests is
 * deduplicated job-wide; node leaders ask their daemons what they have; each
 * program that a node lacks comes from a node that has it or is built by
 * exactly one node that needs it (shared out evenly), and is sent to the
 * other nodes that need it, in chunks, and imported into their daemons
 * (put). Afterwards every rank's kiln_get or kiln_lookup of these requests is
 * a local hit. Loads nothing into the process. Returns KILN_OK when all of
 * the caller's requests are cached, else the code of its first failed one
 * (by index), with that program's diagnostics in kiln_errmsg, identical on
 * every rank that asked for it. report may be NULL. n may differ by rank,
 * and may be 0.
 */
int kiln_mpi_warm(struct kiln *k, MPI_Comm comm, const struct kiln_request *reqs, size_t n,
		  struct kiln_warm_report *report);

/*
 * The deadline of each round of transfers between nodes in kiln_mpi_warm
 * (and kiln_mpi_get): what has not arrived after this many seconds is lost
 * and goes to the next round (docs/mpi.md). 0 restores the default:
 * $KILN_MPI_TIMEOUT, else 300 s. The builds before a round are bounded by
 * libkiln's own deadline (kiln_set_timeout, $KILN_TIMEOUT). Process-wide;
 * not collective. KILN_OK, or KILN_EINVAL for a negative value.
 */
int kiln_mpi_set_timeout(double seconds);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KILN_MPI_H */
