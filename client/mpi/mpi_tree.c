/* The planner of kiln_mpi_warm's trees (mpi_tree.h): pure code. qsort_r is
 * GNU C's (the project builds with _GNU_SOURCE). */
#include <stdlib.h>
#include <string.h>

#include "mpi_tree.h"

int mpi_tree_rec_cmp(const void *a, const void *b)
{
	const struct mpi_tree_rec *x = a, *y = b;
	int c = memcmp(x->id, y->id, 32);
	return c != 0 ? c : (x->node > y->node) - (x->node < y->node);
}

unsigned mpi_tree_rotated(const uint8_t id[32], int node, int nn)
{
	uint32_t h = (uint32_t)id[0] << 24 | (uint32_t)id[1] << 16 | (uint32_t)id[2] << 8 | id[3];
	return (unsigned)(((uint64_t)node + h) % (uint64_t)nn);
}

int mpi_tree_plan_init(struct mpi_tree_plan *p, int nn)
{
	memset(p, 0, sizeof(*p));
	p->nn = nn;
	p->load_build = calloc((size_t)nn + 1, sizeof(size_t));
	p->load_send = calloc((size_t)nn + 1, sizeof(size_t));
	p->tree = calloc((size_t)nn + 1, sizeof(int));
	if (p->load_build == NULL || p->load_send == NULL || p->tree == NULL) {
		mpi_tree_plan_fini(p);
		return -1;
	}
	return 0;
}

void mpi_tree_plan_fini(struct mpi_tree_plan *p)
{
	free(p->load_build);
	free(p->load_send);
	free(p->tree);
	memset(p, 0, sizeof(*p));
}

/* The root of a program (its records r[0..n)): a node that has it (fewest
 * copies to send so far), else a node that lacks it and can build (fewest
 * builds so far); ties by the rotated order. -1 when none. */
static int choose_root(const struct mpi_tree_plan *p, const struct mpi_tree_rec *r, size_t n)
{
	int best = -1;
	for (int pass = 0; pass < 2 && best < 0; pass++) {
		const size_t *load = pass == 0 ? p->load_send : p->load_build;
		unsigned char want = pass == 0 ? MPI_TREE_HAS : MPI_TREE_BUILDS;
		for (size_t j = 0; j < n; j++) {
			int i = r[j].node;
			if (r[j].state != want)
				continue;
			if (best < 0 || load[i] < load[best] ||
			    (load[i] == load[best] &&
			     mpi_tree_rotated(r[j].id, i, p->nn) < mpi_tree_rotated(r[j].id, best, p->nn)))
				best = i;
		}
	}
	return best;
}

struct order {
	const uint8_t *id;
	const size_t *load;
	int nn;
};

/* Receivers that sent the fewest copies so far first; ties by the rotated
 * order. */
static int receiver_cmp(const void *a, const void *b, void *arg)
{
	const struct order *o = arg;
	int i = *(const int *)a, j = *(const int *)b;
	if (o->load[i] != o->load[j])
		return o->load[i] < o->load[j] ? -1 : 1;
	unsigned x = mpi_tree_rotated(o->id, i, o->nn), y = mpi_tree_rotated(o->id, j, o->nn);
	return (x > y) - (x < y);
}

static bool lacks(unsigned char state)
{
	return state == MPI_TREE_BUILDS || state == MPI_TREE_LACKS;
}

long mpi_tree_of(struct mpi_tree_plan *p, const struct mpi_tree_rec *r, size_t n)
{
	size_t k = 1;
	bool lacking = false;
	for (size_t j = 0; j < n; j++)
		lacking = lacking || lacks(r[j].state);
	if (!lacking)
		return 0;
	int root = choose_root(p, r, n);
	if (root < 0)
		return -1;
	bool root_has = false;
	for (size_t j = 0; j < n; j++) {
		root_has = root_has || (r[j].node == root && r[j].state == MPI_TREE_HAS);
		if (r[j].node != root && lacks(r[j].state))
			p->tree[k++] = r[j].node;
	}
	p->load_build[root] += !root_has;
	p->tree[0] = root;
	struct order o = { .id = r[0].id, .load = p->load_send, .nn = p->nn };
	qsort_r(p->tree + 1, k - 1, sizeof(int), receiver_cmp, &o);
	for (size_t pos = 0; pos < k; pos++) {
		size_t first = MPI_TREE_FANOUT * pos + 1;
		size_t kids = first >= k ? 0 : k - first < MPI_TREE_FANOUT ? k - first : MPI_TREE_FANOUT;
		p->load_send[p->tree[pos]] += kids;
	}
	return (long)k;
}

bool mpi_tree_place(const int *tree, size_t k, int me, int *parent, int kids[MPI_TREE_FANOUT],
		    int *nkids)
{
	size_t pos = k;
	for (size_t i = 0; i < k; i++)
		if (tree[i] == me)
			pos = i;
	*parent = -1;
	*nkids = 0;
	if (pos == k)
		return false;
	if (pos > 0)
		*parent = tree[(pos - 1) / MPI_TREE_FANOUT];
	for (size_t c = MPI_TREE_FANOUT * pos + 1; c <= MPI_TREE_FANOUT * pos + MPI_TREE_FANOUT && c < k;
	     c++)
		kids[(*nkids)++] = tree[c];
	return true;
}
