/*
 * kiln_mpi_warm's plan of a round (mpi_warm_int.h): every leader gathers
 * every node's (program, state) records, sorts them by program, and makes
 * the same decisions in the same order: each program's root (a node that
 * has it, else one that lacks it and can build, the least loaded, ties
 * spread by the program's id) and its tree of receivers.
 */
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"
#include "mpi_warm_int.h"
#include "mpi_tree.h"
#include "mpi_xfer.h"

int id_cmp(const void *a, const void *b)
{
	return memcmp(a, b, 32);
}

struct need *need_find(struct warm *w, const uint8_t id[32])
{
	return bsearch(id, w->needs, w->nneeds, sizeof(*w->needs), id_cmp);
}

static int gid_cmp(const void *a, const void *b)
{
	const struct need *x = *(const struct need *const *)a, *y = *(const struct need *const *)b;
	return memcmp(x->gid, y->gid, 32);
}

static int gid_key_cmp(const void *key, const void *elem)
{
	return memcmp(key, (*(const struct need *const *)elem)->gid, 32);
}

void need_index_gids(struct warm *w)
{
	free(w->by_gid);
	w->by_gid = calloc(w->nneeds + 1, sizeof(*w->by_gid));
	if (!w->by_gid)
		mpi_oom();
	for (size_t i = 0; i < w->nneeds; i++)
		w->by_gid[i] = &w->needs[i];
	qsort(w->by_gid, w->nneeds, sizeof(*w->by_gid), gid_cmp);
}

struct need *need_find_gid(struct warm *w, const uint8_t gid[32])
{
	struct need **p = w->by_gid != NULL
		? bsearch(gid, w->by_gid, w->nneeds, sizeof(*w->by_gid), gid_key_cmp) : NULL;
	return p != NULL ? *p : NULL;
}

void need_fail(struct need *nd, int code, const char *msg)
{
	nd->code = code;
	free(nd->msg);
	nd->msg = strdup(msg ? msg : kiln_strerror(code));
}

/* This node's record of a need for the round: its state (1, 2 or 3, above), or
 * 0 when it takes no part in the round. */
static unsigned char need_state(const struct warm *w, const struct need *nd, int round)
{
	if (round == 0)
		return nd->have ? 2 : w->kilnd_trouble ? 3 : 1;
	return nd->retry ? (w->kilnd_trouble ? 3 : 1) : 0;
}

/* Every leader's (id, state) records, gathered on every leader: *all with
 * counts and displacements per node (free all three). */
static size_t gather_records(struct warm *w, int round, unsigned char **all, int **counts,
			     int **displs)
{
	int nn = w->t.nnodes, mine;
	size_t nrec = 0, total = 0;
	unsigned char *rec = malloc(w->nneeds * 33 + 1);
	*counts = calloc((size_t)nn, sizeof(int));
	*displs = calloc((size_t)nn, sizeof(int));
	if (!rec || !*counts || !*displs)
		mpi_oom(); /* every leader must make the same plan, or none */
	for (size_t j = 0; j < w->nneeds; j++) {
		unsigned char st = need_state(w, &w->needs[j], round);
		if (st == 0)
			continue;
		memcpy(rec + nrec * 33, w->needs[j].gid, 32);
		rec[nrec++ * 33 + 32] = st;
	}
	if (mpi_count(nrec * 33, "the program list", &mine) != 0)
		mpi_oom();
	MPI_Allgather(&mine, 1, MPI_INT, *counts, 1, MPI_INT, w->t.leaders);
	for (int i = 0; i < nn; i++) {
		(*displs)[i] = (int)total;
		total += (size_t)(*counts)[i];
	}
	if (total > INT32_MAX || !(*all = malloc(total ? total : 1)))
		mpi_oom();
	MPI_Allgatherv(rec, mine, MPI_BYTE, *all, *counts, *displs, MPI_BYTE, w->t.leaders);
	free(rec);
	return total;
}

static struct mpi_tree_rec *sorted_records(const unsigned char *all, const int *counts, const int *displs,
				  int nn, size_t *nrec)
{
	size_t total = 0, k = 0;
	for (int i = 0; i < nn; i++)
		total += (size_t)counts[i] / 33;
	struct mpi_tree_rec *r = calloc(total + 1, sizeof(*r));
	if (!r)
		mpi_oom();
	for (int i = 0; i < nn; i++) {
		for (size_t off = (size_t)displs[i]; off + 33 <= (size_t)displs[i] + (size_t)counts[i];
		     off += 33) {
			memcpy(r[k].id, all + off, 32);
			r[k].node = i;
			r[k++].state = all[off + 32];
		}
	}
	qsort(r, k, sizeof(*r), mpi_tree_rec_cmp);
	*nrec = k;
	return r;
}

static void fail_unbuildable(struct need *nd)
{
	if (nd != NULL && !nd->have)
		need_fail(nd, KILN_EDAEMON, "no node of the job that needs this program has a "
			  "working kilnd to build it");
}

/* A program's tree, for each program of the records r[0..nrec) (sorted by
 * program) in turn: fn(ctx, its records, their number, k, tree) with k and
 * tree as mpi_tree_of gives them. The loads are shared by all of them. */
typedef void (*tree_fn)(void *ctx, const struct mpi_tree_rec *r, size_t n, long k,
			const int *tree);

static void each_tree(const struct mpi_tree_rec *r, size_t nrec, int nn, tree_fn fn, void *ctx)
{
	struct mpi_tree_plan p;
	if (mpi_tree_plan_init(&p, nn) != 0)
		mpi_oom();
	for (size_t j = 0, end; j < nrec; j = end) {
		for (end = j + 1; end < nrec && memcmp(r[end].id, r[j].id, 32) == 0; end++)
			;
		long k = mpi_tree_of(&p, &r[j], end - j);
		fn(ctx, &r[j], end - j, k, p.tree);
	}
	mpi_tree_plan_fini(&p);
}

/* One program's decision: this node's part in its tree. */
static void decide_one(void *ctx, const struct mpi_tree_rec *r, size_t n, long k,
		       const int *tree)
{
	struct warm *w = ctx;
	struct need *nd = need_find_gid(w, r[0].id);
	(void)n;
	if (k < 0)
		fail_unbuildable(nd);
	if (k <= 0 || nd == NULL)
		return;
	nd->in_tree = mpi_tree_place(tree, (size_t)k, w->t.node_index, &nd->parent, nd->kids,
				     &nd->nkids);
	nd->serve = tree[0] == w->t.node_index;
}


/*
 * The plan made by coordinators, for large jobs: the records of a program
 * go to the leader its id hashes to (one MPI_Alltoallv), which decides its
 * tree and tells each node of it its part (another MPI_Alltoallv). A leader
 * then holds its own records, those of the programs it coordinates, and
 * one role per program it takes part in: O(P) on average instead of every
 * node's records. The loads that balance roots and inner places are each
 * coordinator's own (the programs it coordinates), not the job's.
 */
/* A role on the wire: the program's id, the parent, MPI_TREE_FANOUT kids
 * (-1 where none), the fan-out it was planned with, and flags. */
#define ROLE_BYTES (32 + 4 + 4 * MPI_TREE_FANOUT + 1 + 1)
enum { ROLE_SERVE = 1, ROLE_FAIL = 2 };

static int coordinator(const uint8_t gid[32], int nn)
{
	uint32_t h = (uint32_t)gid[4] << 24 | (uint32_t)gid[5] << 16 | (uint32_t)gid[6] << 8 | gid[7];
	return (int)(h % (uint32_t)nn);
}

/* Sends bytes[i] (sizes in counts, by destination) to every leader;
 * returns what came, with counts and displacements by source. */
static unsigned char *alltoallv(MPI_Comm comm, int nn, const unsigned char *data, const int *counts,
				int **rcounts, int **rdispls)
{
	int *sdispls = calloc((size_t)nn, sizeof(int));
	*rcounts = calloc((size_t)nn, sizeof(int));
	*rdispls = calloc((size_t)nn, sizeof(int));
	if (!sdispls || !*rcounts || !*rdispls)
		mpi_oom();
	size_t so = 0, ro = 0;
	for (int i = 0; i < nn; i++) {
		sdispls[i] = (int)so;
		so += (size_t)counts[i];
	}
	MPI_Alltoall(counts, 1, MPI_INT, *rcounts, 1, MPI_INT, comm);
	for (int i = 0; i < nn; i++) {
		(*rdispls)[i] = (int)ro;
		ro += (size_t)(*rcounts)[i];
	}
	unsigned char *in = malloc(ro ? ro : 1);
	if (!in || ro > INT32_MAX || so > INT32_MAX)
		mpi_oom();
	MPI_Alltoallv(data, counts, sdispls, MPI_BYTE, in, *rcounts, *rdispls, MPI_BYTE, comm);
	free(sdispls);
	return in;
}

/* Appends a role for node to the per-destination buffers. */
static void add_role(struct buf *out, int node, const uint8_t gid[32], int parent, const int *kids,
		     int nkids, unsigned char flags)
{
	unsigned char fanout = MPI_TREE_FANOUT;
	buf_put(&out[node], gid, 32);
	buf_u32(&out[node], (uint32_t)parent);
	for (int c = 0; c < MPI_TREE_FANOUT; c++)
		buf_u32(&out[node], (uint32_t)(c < nkids ? kids[c] : -1));
	buf_put(&out[node], &fanout, 1);
	buf_put(&out[node], &flags, 1);
}

/* A coordinator's decision for one program: the part of every node of its
 * tree (or that it fails, for every node that asked), to be sent to it. */
static void coordinate_one(void *ctx, const struct mpi_tree_rec *r, size_t n, long k,
			   const int *tree)
{
	struct buf *out = ctx;
	if (k < 0) {
		for (size_t q = 0; q < n; q++)
			add_role(out, r[q].node, r[q].id, -1, NULL, 0, ROLE_FAIL);
		return;
	}
	for (long pos = 0; pos < k; pos++) {
		int parent, kids[MPI_TREE_FANOUT], nkids;
		mpi_tree_place(tree, (size_t)k, tree[pos], &parent, kids, &nkids);
		add_role(out, tree[pos], r[0].id, parent, kids, nkids, pos == 0 ? ROLE_SERVE : 0);
	}
}

/* This node's part in a program's tree, as its coordinator sent it. */
static void take_role(struct warm *w, const unsigned char *role)
{
	struct rd rr = { .p = (const char *)role + 32, .len = ROLE_BYTES - 32 };
	struct need *nd = need_find_gid(w, role);
	int parent = (int)rd_u32(&rr), kids[MPI_TREE_FANOUT];
	for (int c = 0; c < MPI_TREE_FANOUT; c++)
		kids[c] = (int)rd_u32(&rr);
	unsigned char fanout = role[ROLE_BYTES - 2], flags = role[ROLE_BYTES - 1];
	if (nd == NULL)
		return;
	if (fanout != MPI_TREE_FANOUT) {
		/* Same role size, another fan-out: a libkiln-mpi of another
		 * version on another node of the job. */
		need_fail(nd, KILN_EPROTO, "the job's nodes plan their trees with different fan-outs: "
			  "use one libkiln-mpi on every node");
		return;
	}
	if (flags & ROLE_FAIL) {
		fail_unbuildable(nd);
		return;
	}
	nd->in_tree = true;
	nd->serve = (flags & ROLE_SERVE) != 0;
	nd->parent = parent;
	nd->nkids = 0;
	for (int c = 0; c < MPI_TREE_FANOUT; c++)
		if (kids[c] >= 0)
			nd->kids[nd->nkids++] = kids[c];
}

/* The per-destination buffers end to end in all, with their sizes in
 * counts; the buffers are emptied. */
static void flatten(struct buf *to, int nn, int *counts, struct buf *all)
{
	for (int i = 0; i < nn; i++) {
		if (to[i].oom || to[i].len > INT32_MAX)
			mpi_oom();
		counts[i] = (int)to[i].len;
		buf_put(all, to[i].data, to[i].len);
		buf_free(&to[i]);
	}
	if (all->oom)
		mpi_oom();
}

static void plan_distributed(struct warm *w, int round)
{
	int nn = w->t.nnodes;
	struct buf *to = calloc((size_t)nn, sizeof(*to));
	int *counts = calloc((size_t)nn, sizeof(int)), *rcounts = NULL, *rdispls = NULL;
	if (!to || !counts)
		mpi_oom();
	/* 1. Each record to its program's coordinator. */
	for (size_t j = 0; j < w->nneeds; j++) {
		unsigned char st = need_state(w, &w->needs[j], round);
		if (st == 0)
			continue;
		int c = coordinator(w->needs[j].gid, nn);
		buf_put(&to[c], w->needs[j].gid, 32);
		buf_put(&to[c], &st, 1);
	}
	struct buf all = { 0 };
	flatten(to, nn, counts, &all);
	unsigned char *in = alltoallv(w->t.leaders, nn, (unsigned char *)all.data, counts, &rcounts,
				      &rdispls);
	buf_free(&all);
	size_t nrec = 0;
	struct mpi_tree_rec *r = sorted_records(in, rcounts, rdispls, nn, &nrec);
	free(in);
	free(rcounts);
	free(rdispls);
	/* 2. Decisions, and each node's roles back to it. */
	each_tree(r, nrec, nn, coordinate_one, to);
	free(r);
	flatten(to, nn, counts, &all);
	in = alltoallv(w->t.leaders, nn, (unsigned char *)all.data, counts, &rcounts, &rdispls);
	buf_free(&all);
	size_t total = 0;
	for (int i = 0; i < nn; i++)
		total += (size_t)rcounts[i];
	/* 3. This node's parts. */
	for (size_t off = 0; off + ROLE_BYTES <= total; off += ROLE_BYTES)
		take_role(w, in + off);
	free(in);
	free(rcounts);
	free(rdispls);
	free(counts);
	free(to);
}

/* Whether the plan is made by coordinators: $KILN_MPI_PLAN=distributed or
 * gathered, else distributed once every node's records together would
 * pass 2 MiB (65,536 node-program pairs, as 1,024 nodes x 64 programs):
 * below, the gathered plan balances the load a little better, and costs
 * every leader at most that. The same on every leader. */
static bool distributed(struct warm *w, int round)
{
	const char *v = getenv("KILN_MPI_PLAN");
	if (v != NULL && strcmp(v, "distributed") == 0)
		return true;
	if (v != NULL && strcmp(v, "gathered") == 0)
		return false;
	long long mine = 0, all = 0;
	for (size_t j = 0; j < w->nneeds; j++)
		mine += need_state(w, &w->needs[j], round) != 0;
	MPI_Allreduce(&mine, &all, 1, MPI_LONG_LONG, MPI_SUM, w->t.leaders);
	return all > (1LL << 16);
}

void plan(struct warm *w, int round)
{
	unsigned char *all = NULL;
	int *counts = NULL, *displs = NULL;
	for (size_t j = 0; j < w->nneeds; j++) {
		struct need *nd = &w->needs[j];
		nd->serve = nd->in_tree = false;
		nd->parent = -1;
		nd->nkids = 0;
	}
	if (distributed(w, round)) {
		plan_distributed(w, round);
		return;
	}
	size_t nrec = 0;
	gather_records(w, round, &all, &counts, &displs);
	struct mpi_tree_rec *r = sorted_records(all, counts, displs, w->t.nnodes, &nrec);
	free(all);
	/* The same decisions on every leader: same input, same order. */
	each_tree(r, nrec, w->t.nnodes, decide_one, w);
	free(r);
	free(counts);
	free(displs);
}

