/*
 * Unit tests of kiln_mpi_warm's tree planner (client/mpi/mpi_tree.c), pure
 * code, without MPI: every tree for N = 1 ... 4,096 nodes is a tree (each
 * receiver has one parent, which lists it among at most MPI_TREE_FANOUT
 * kids), reaches every node that lacks the program and no other, is as
 * shallow as the fan-out allows; roots are chosen as documented; loads
 * spread roots and inner places over the nodes; ties are broken the same
 * way on every node and differently for different programs.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_tree.h"
#include "unit.h"

static void id_of(uint8_t id[32], unsigned v)
{
	memset(id, 0, 32);
	for (int i = 0; i < 4; i++)
		id[i] = (uint8_t)(v * 2654435761u >> (8 * i));
	id[31] = (uint8_t)v;
}

/* Records of one program over nn nodes: node i's state is state(i). */
static struct mpi_tree_rec *records(int nn, unsigned prog, unsigned char (*state)(int i, int nn))
{
	struct mpi_tree_rec *r = calloc((size_t)nn, sizeof(*r));
	ck_assert_ptr_nonnull(r);
	for (int i = 0; i < nn; i++) {
		id_of(r[i].id, prog);
		r[i].node = i;
		r[i].state = state(i, nn);
	}
	return r;
}

static unsigned char node0_has(int i, int nn)
{
	(void)nn;
	return i == 0 ? MPI_TREE_HAS : MPI_TREE_LACKS;
}

static unsigned char all_build(int i, int nn)
{
	(void)i;
	(void)nn;
	return MPI_TREE_BUILDS;
}

static unsigned char none_can(int i, int nn)
{
	(void)i;
	(void)nn;
	return MPI_TREE_LACKS;
}

static unsigned char all_have(int i, int nn)
{
	(void)i;
	(void)nn;
	return MPI_TREE_HAS;
}

/* tree[0..k) is a tree over exactly the nodes that lack the program plus
 * its root, with the depth the fan-out allows. */
static void check_tree(const int *tree, long k, const struct mpi_tree_rec *r, int nn)
{
	char *seen = calloc((size_t)nn, 1);
	int *parents = calloc((size_t)nn, sizeof(int));
	ck_assert(seen != NULL && parents != NULL);
	for (long pos = 0; pos < k; pos++) {
		ck_assert_int_ge(tree[pos], 0);
		ck_assert_int_lt(tree[pos], nn);
		ck_assert_msg(!seen[tree[pos]], "node %d twice in the tree", tree[pos]);
		seen[tree[pos]] = 1;
	}
	for (int i = 0; i < nn; i++) {
		bool lacks = r[i].state == MPI_TREE_BUILDS || r[i].state == MPI_TREE_LACKS;
		if (i != tree[0])
			ck_assert_msg(seen[i] == lacks, "node %d (state %d) %s the tree", i, r[i].state,
				      seen[i] ? "in" : "not in");
	}
	/* Parents and kids agree; depth within ceil(log_F(k)) + 1. */
	long depth_max = 0, cap = 1, depth = 0;
	for (long total = 1; total < k; depth_max++) {
		cap *= MPI_TREE_FANOUT;
		total += cap;
	}
	for (long pos = 0; pos < k; pos++) {
		int parent, kids[MPI_TREE_FANOUT], nkids;
		ck_assert(mpi_tree_place(tree, (size_t)k, tree[pos], &parent, kids, &nkids));
		ck_assert_int_le(nkids, MPI_TREE_FANOUT);
		ck_assert_int_eq(parent, pos == 0 ? -1 : tree[(pos - 1) / MPI_TREE_FANOUT]);
		for (int c = 0; c < nkids; c++) {
			int kp, kk[MPI_TREE_FANOUT], kn;
			ck_assert(mpi_tree_place(tree, (size_t)k, kids[c], &kp, kk, &kn));
			ck_assert_int_eq(kp, tree[pos]);
		}
		depth = 0;
		for (long p = pos; p > 0; p = (p - 1) / MPI_TREE_FANOUT)
			depth++;
		ck_assert_int_le(depth, depth_max);
	}
	int parent, kids[MPI_TREE_FANOUT], nkids;
	for (int i = 0; i < nn; i++)
		if (!seen[i])
			ck_assert(!mpi_tree_place(tree, (size_t)k, i, &parent, kids, &nkids));
	free(seen);
	free(parents);
}

START_TEST(test_trees_up_to_4096_nodes)
{
	static const int sizes[] = { 17, 31, 32, 33, 63, 64, 100, 127, 128, 255, 1000, 1023, 1024,
				     2047, 4095, 4096 };
	for (size_t t = 0; t < 16 + sizeof(sizes) / sizeof(sizes[0]); t++) {
		int nn = t < 16 ? (int)t + 1 : sizes[t - 16];
		struct mpi_tree_plan p;
		ck_assert_int_eq(mpi_tree_plan_init(&p, nn), 0);
		struct mpi_tree_rec *r = records(nn, (unsigned)nn, node0_has);
		long k = mpi_tree_of(&p, r, (size_t)nn);
		ck_assert_int_eq(k, nn == 1 ? 0 : nn);
		if (k > 0) {
			ck_assert_int_eq(p.tree[0], 0);       /* the one that has it */
			check_tree(p.tree, k, r, nn);
			size_t sent = 0;
			for (int i = 0; i < nn; i++)
				sent += p.load_send[i];
			ck_assert_uint_eq(sent, (size_t)k - 1);   /* one copy per receiver */
			ck_assert_uint_eq(p.load_build[0], 0);   /* it had it: no build */
		}
		free(r);
		mpi_tree_plan_fini(&p);
	}
}
END_TEST

START_TEST(test_roots)
{
	struct mpi_tree_plan p;
	ck_assert_int_eq(mpi_tree_plan_init(&p, 8), 0);
	struct mpi_tree_rec *r = records(8, 7, none_can);
	ck_assert_int_eq(mpi_tree_of(&p, r, 8), -1);            /* nobody can be its root */
	free(r);
	r = records(8, 7, all_have);
	ck_assert_int_eq(mpi_tree_of(&p, r, 8), 0);             /* nobody lacks it */
	free(r);
	r = records(8, 7, all_build);
	long k = mpi_tree_of(&p, r, 8);
	ck_assert_int_eq(k, 8);
	ck_assert_uint_eq(p.load_build[p.tree[0]], 1);           /* its root builds it */
	check_tree(p.tree, k, r, 8);
	/* A node that has it is the root even when others could build. */
	r[5].state = MPI_TREE_HAS;
	k = mpi_tree_of(&p, r, 8);
	ck_assert_int_eq(p.tree[0], 5);
	ck_assert_int_eq(k, 8);
	free(r);
	mpi_tree_plan_fini(&p);
}
END_TEST

/* Many programs over one plan: the builds spread over the nodes (one each
 * before any node builds two), and so do the inner places. */
START_TEST(test_loads_spread)
{
	enum { NN = 16, PROGS = 64 };
	struct mpi_tree_plan p;
	ck_assert_int_eq(mpi_tree_plan_init(&p, NN), 0);
	for (unsigned prog = 0; prog < PROGS; prog++) {
		struct mpi_tree_rec *r = records(NN, prog, all_build);
		ck_assert_int_eq(mpi_tree_of(&p, r, NN), NN);
		free(r);
		size_t lo = (size_t)-1, hi = 0;
		for (int i = 0; i < NN; i++) {
			lo = p.load_build[i] < lo ? p.load_build[i] : lo;
			hi = p.load_build[i] > hi ? p.load_build[i] : hi;
		}
		ck_assert_msg(hi - lo <= 1, "after %u programs builds range %zu..%zu", prog + 1, lo, hi);
	}
	size_t lo = (size_t)-1, hi = 0;
	for (int i = 0; i < NN; i++) {
		lo = p.load_send[i] < lo ? p.load_send[i] : lo;
		hi = p.load_send[i] > hi ? p.load_send[i] : hi;
	}
	/* 64 trees of 16: 15 copies each, 60 per node on average. */
	ck_assert_msg(hi - lo <= MPI_TREE_FANOUT, "copies to send range %zu..%zu", lo, hi);
	mpi_tree_plan_fini(&p);
}
END_TEST

/* The same records give the same tree (every leader decides alone); two
 * programs with equal loads get different roots (ties rotate by id). */
START_TEST(test_ties)
{
	struct mpi_tree_plan a, b;
	ck_assert_int_eq(mpi_tree_plan_init(&a, 32), 0);
	ck_assert_int_eq(mpi_tree_plan_init(&b, 32), 0);
	struct mpi_tree_rec *r1 = records(32, 1, all_build), *r2 = records(32, 2, all_build);
	ck_assert_int_eq(mpi_tree_of(&a, r1, 32), 32);
	ck_assert_int_eq(mpi_tree_of(&b, r1, 32), 32);
	ck_assert_mem_eq(a.tree, b.tree, 32 * sizeof(int));
	int root1 = a.tree[0];
	struct mpi_tree_plan c;
	ck_assert_int_eq(mpi_tree_plan_init(&c, 32), 0);
	ck_assert_int_eq(mpi_tree_of(&c, r2, 32), 32);
	ck_assert_int_ne(c.tree[0], root1);
	/* Sorting puts a program's records together, by node. */
	struct mpi_tree_rec mixed[4] = { r2[3], r1[2], r2[1], r1[0] };
	qsort(mixed, 4, sizeof(mixed[0]), mpi_tree_rec_cmp);
	ck_assert(memcmp(mixed[0].id, mixed[1].id, 32) == 0 && mixed[0].node < mixed[1].node);
	ck_assert(memcmp(mixed[2].id, mixed[3].id, 32) == 0 && mixed[2].node < mixed[3].node);
	free(r1);
	free(r2);
	mpi_tree_plan_fini(&a);
	mpi_tree_plan_fini(&b);
	mpi_tree_plan_fini(&c);
}
END_TEST

static Suite *mpi_tree_suite(void)
{
	Suite *s = suite_create("mpi_tree");
	TCase *tc = tcase_create("mpi_tree");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_trees_up_to_4096_nodes);
	tcase_add_test(tc, test_roots);
	tcase_add_test(tc, test_loads_spread);
	tcase_add_test(tc, test_ties);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(mpi_tree_suite());
}
