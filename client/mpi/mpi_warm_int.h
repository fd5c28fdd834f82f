/*
 * The inside of kiln_mpi_warm shared by its files: mpi_warm.c (the steps
 * and the rounds) and mpi_plan.c (each round's job-wide plan).
 */
#ifndef KILN_CLIENT_MPI_WARM_INT_H
#define KILN_CLIENT_MPI_WARM_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>

#include "mpi_int.h"
#include "mpi_tree.h"

/* One distinct program a node needs (leader only). */
struct need {
	uint8_t id[32];
	uint8_t gid[32];         /* id and this node's request key: nodes whose
				  * compilers agree share it (the plan's identity) */
	char *skel;              /* owned */
	int owner_rank;          /* lowest node rank that asked for it */
	uint32_t owner_index;    /* the request's index there */
	bool have;               /* the daemon had it at the probe */
	int code;                /* outcome: 0 or a kiln code */
	char *msg;               /* its text on failure (owned) */
	char key[65];
	bool serve;              /* this node builds (or has) it and is its tree's root */
	bool in_tree;            /* this node receives it in the current round */
	int parent;              /* where it comes from in the round's tree, or -1 */
	int kids[MPI_TREE_FANOUT]; /* where this node passes it on */
	int nkids;
	bool retry;              /* the round lost it through a node's trouble */
	bool fallback;           /* a received artifact was refused: build here */
	const char *map;         /* the artifact, mapped, when this node sends it */
	size_t map_size;
};

/* A node's state for a program in a round's plan: 1 lacks it and can build,
 * 2 has it, 3 lacks it and cannot build (its kilnd failed). */

struct warm {
	struct kiln *k;
	struct topo t;
	const struct kiln_request *reqs;
	size_t n;
	char **skels;            /* by request, NULL when invalid */
	uint8_t (*ids)[32];
	int *status;             /* by request */
	char **msgs;             /* by request, failure text (owned) */
	/* leader only */
	struct need *needs;
	size_t nneeds;
	struct kiln_warm_report rep;
	bool kilnd_trouble;      /* a call to this node's kilnd failed (I/O, deadline) */
	struct need **by_gid;    /* the needs sorted by gid */
	/* $KILN_MPI_TRACE: where a leader's time went in the current round. */
	bool trace;
	uint64_t t_plan, t_builds, t_wait, t_xfer, t_tail, t_puts;   /* ns */
	unsigned nputs;
	int import_threads;      /* the round's imports ran on these (0: a batch) */
	pthread_mutex_t import_lock;   /* what the import threads share */
};

/* Compares two 32-byte program ids (qsort, bsearch). */
int id_cmp(const void *a, const void *b);
/* The node's need of a program, or NULL (leader; needs sorted by id). */
struct need *need_find(struct warm *w, const uint8_t id[32]);
/* The same by the plan's identity (gid; after need_index_gids). */
struct need *need_find_gid(struct warm *w, const uint8_t gid[32]);
/* Sorts the needs by gid into w->by_gid. */
void need_index_gids(struct warm *w);
/* Records a program's failure (code and text) for the node's ranks. */
void need_fail(struct need *nd, int code, const char *msg);

/*
 * Step 3: the job-wide plan of a round, the same on every leader
 * (collective over the leaders). Sets each need's part: serve (this node is
 * the root of its tree: builds it or has it), in_tree, parent and kids.
 * Round 0 plans every need; later rounds only those lost (retry), among
 * the nodes whose kilnd still works.
 */
void plan(struct warm *w, int round);

#endif
