/*
 * The planner of kiln_mpi_warm's trees, as pure code (no MPI, no state
 * outside its arguments): given every node's record of every program,
 * each program's root and the tree of nodes that receive it, and one
 * node's place in a tree. mpi_plan.c feeds it from MPI collectives;
 * tests/test_mpi_tree.c checks it without MPI.
 *
 * A tree is an array: tree[0] the root, then the receivers; the node at
 * position pos passes the artifact on to the nodes at positions
 * MPI_TREE_FANOUT * pos + 1 ... MPI_TREE_FANOUT * pos + MPI_TREE_FANOUT.
 * The fan-out is spelled here only; the coordinators' roles on the wire
 * carry it (mpi_plan.c), so that nodes of one job never disagree on it.
 */
#ifndef KILN_MPI_TREE_H
#define KILN_MPI_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MPI_TREE_FANOUT 2

/* A node's state for a program (a record's state). */
enum mpi_tree_state {
	MPI_TREE_NONE = 0,       /* does not take part */
	MPI_TREE_BUILDS = 1,     /* lacks it and can build it */
	MPI_TREE_HAS = 2,        /* has it */
	MPI_TREE_LACKS = 3,      /* lacks it and cannot build it (no kilnd) */
};

/* One node's record of one program. Sorted with mpi_tree_rec_cmp (by
 * program, then node), the records of a program lie together. */
struct mpi_tree_rec {
	uint8_t id[32];
	int node;
	unsigned char state;     /* enum mpi_tree_state */
};

int mpi_tree_rec_cmp(const void *a, const void *b);

/* A node's place in a program's order: rotated by the program's id, so
 * that ties (and the trees' inner places) fall on different nodes for
 * different programs instead of always on nodes 0, 1, 2... */
unsigned mpi_tree_rotated(const uint8_t id[32], int node, int nn);

/*
 * The planner over nn nodes: the loads that balance roots and inner places
 * across the programs planned with it (builds so far, copies to send so
 * far, by node), and room for one tree.
 */
struct mpi_tree_plan {
	int nn;
	size_t *load_build;
	size_t *load_send;
	int *tree;
};

/* 0, or -1 out of memory. */
int mpi_tree_plan_init(struct mpi_tree_plan *p, int nn);
void mpi_tree_plan_fini(struct mpi_tree_plan *p);

/*
 * One program's tree from its records r[0..n): into p->tree, the root (a
 * node that has it, fewest copies to send so far; else one that can build
 * it, fewest builds so far; ties by the rotated order), then the nodes
 * that lack it, those that sent the fewest copies first (they take the
 * inner places, which pass it on). Counts the root's build and every
 * node's copies in p's loads. Returns the number of nodes in the tree: 0
 * when nobody lacks it, -1 when nobody can be its root.
 */
long mpi_tree_of(struct mpi_tree_plan *p, const struct mpi_tree_rec *r, size_t n);

/* me's place in tree[0..k): its parent (-1 for the root) and its kids
 * (*nkids of them); false when me is not in the tree. */
bool mpi_tree_place(const int *tree, size_t k, int me, int *parent, int kids[MPI_TREE_FANOUT],
		    int *nkids);

#endif
