/*
 * kiln_mpi_warm: every distinct program of the job built once, then cached
 * on every node that asked for it.
 *
 *  1. Each rank makes the skeleton of each request (kiln_x.h: the program
 *     without its text, sources by SHA-256); its SHA-256 is the program's
 *     identity. Skeletons are gathered at the node leader, which keeps one
 *     per distinct program (the node's "needs").
 *  2. The leader asks its daemon which of them it has (a probe that builds
 *     nothing).
 *  3. The leaders exchange (identity, state) records, and each computes the
 *     same plan (mpi_plan.c): a program some node lacks comes from a node
 *     that has it, else it is built by one node that needs it (the least
 *     loaded; ties spread by the program's id), and goes down a binary tree
 *     of the nodes that lack it.
 *  4. A leader gathers the text of what it serves from the lowest rank of
 *     its node that asked for it, and gets those with kiln_x_fetch_many (its
 *     daemon builds them in parallel, up to --jobs).
 *  5. Once every node's builds are done, the artifacts (with their
 *     metadata) or errors travel down their trees (mpi_xfer.c: nonblocking,
 *     every message checked, a deadline); each received artifact is passed
 *     on, then imported into the node's daemon with put. An artifact the
 *     daemon refuses (another compiler or header there) is built locally.
 *  6. What a node's trouble lost (its kilnd died, stalled, or could not
 *     export) the leaders agree on, and a second round gives each such
 *     program to one node whose kilnd works (steps 3 to 5 again).
 *  7. Each leader broadcasts the outcome of every program to its ranks.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiln_x.h"
#include "mpi_import.h"
#include "mpi_int.h"
#include "mpi_warm_int.h"
#include "mpi_xfer.h"
#include "sha256.h"
#include "util.h"


static int need_cmp(const void *a, const void *b)
{
	const struct need *x = a, *y = b;
	int c = memcmp(x->id, y->id, 32);

	if (c != 0)
		return c;
	if (x->owner_rank != y->owner_rank)
		return x->owner_rank < y->owner_rank ? -1 : 1;
	return x->owner_index < y->owner_index ? -1 : x->owner_index > y->owner_index;
}

/* The leader's needs from the gathered skeletons of its node's ranks. */
static int unpack_needs(struct warm *w, const char *all, const int *counts, const int *displs)
{
	size_t cap = 0;
	for (int i = 0; i < w->t.node_size; i++) {
		struct rd r = { .p = all + displs[i], .len = (size_t)counts[i] };
		uint32_t m = counts[i] ? rd_u32(&r) : 0;
		for (uint32_t j = 0; j < m && !r.bad; j++) {
			size_t sl;
			const char *s = rd_str(&r, &sl);
			if (!s)
				continue;
			if (w->nneeds == cap) {
				cap = cap ? cap * 2 : 64;
				struct need *nn = realloc(w->needs, cap * sizeof(*nn));
				if (!nn)
					return kiln_x_fail(KILN_ENOMEM, "out of memory");
				w->needs = nn;
			}
			struct need *nd = &w->needs[w->nneeds];
			memset(nd, 0, sizeof(*nd));
			sha256_buf(s, sl, nd->id);
			nd->skel = strdup(s);
			nd->owner_rank = i;
			nd->owner_index = j;
			nd->parent = -1;
			w->nneeds++;
		}
	}
	return 0;
}

/* Sorts by identity and keeps the first of duplicates: the lowest (rank,
 * index) that asked, which will send the text. */
static void dedupe_needs(struct warm *w)
{
	size_t o = 0;
	struct need *v = w->needs;
	qsort(v, w->nneeds, sizeof(*v), need_cmp);
	for (size_t i = 0; i < w->nneeds; i++) {
		if (o > 0 && memcmp(v[o - 1].id, v[i].id, 32) == 0) {
			free(v[i].skel);
			continue;
		}
		v[o++] = v[i];
	}
	w->nneeds = o;
}

/* Step 1: skeletons to the leader, deduplicated into w->needs. */
static int gather_skeletons(struct warm *w)
{
	struct buf b = { 0 };
	int len, *counts = NULL, *displs = NULL, total = 0, rc = 0, i, go = 1;
	char *all = NULL;

	buf_u32(&b, (uint32_t)w->n);
	for (size_t j = 0; j < w->n; j++)
		buf_str(&b, w->skels[j], w->skels[j] ? strlen(w->skels[j]) : 0);
	if (b.oom || mpi_count(b.len, "the request skeletons", &len) != 0)
		len = -1;
	if (w->t.leader) {
		counts = calloc((size_t)w->t.node_size, sizeof(int));
		displs = calloc((size_t)w->t.node_size, sizeof(int));
	}
	MPI_Gather(&len, 1, MPI_INT, counts, 1, MPI_INT, 0, w->t.node);
	if (w->t.leader) {
		size_t sum = 0;

		if (!counts || !displs)
			mpi_oom();
		for (i = 0; i < w->t.node_size; i++) {
			if (counts[i] < 0)
				counts[i] = 0;
			if (sum <= INT32_MAX)
				displs[i] = (int)sum;
			sum += (size_t)counts[i];
		}
		go = sum <= INT32_MAX;
		if (!go)
			rc = kiln_x_fail(KILN_EINVAL, "the node's request skeletons exceed 2 GiB");
		else if (!(all = malloc(sum ? sum : 1)))
			mpi_oom();
		total = (int)(go ? sum : 0);
	}
	/* Everyone learns whether the gather happens, so nobody waits in it. */
	MPI_Bcast(&go, 1, MPI_INT, 0, w->t.node);
	if (go)
		MPI_Gatherv(len > 0 ? b.data : NULL, len > 0 ? len : 0, MPI_BYTE, all, counts,
			    displs, MPI_BYTE, 0, w->t.node);
	buf_free(&b);
	if (w->t.leader && rc == 0 && all)
		rc = unpack_needs(w, all, counts, displs);
	(void)total;
	free(all);
	free(counts);
	free(displs);
	if (!w->t.leader || w->nneeds == 0)
		return rc;
	dedupe_needs(w);
	for (size_t j = 0; j < w->nneeds; j++)
		if (!w->needs[j].skel)
			rc = kiln_x_fail(KILN_ENOMEM, "out of memory");
	return rc;
}

/* Step 2: what the node's daemon has. */
static void mpi_probe(struct warm *w)
{
	const char **skels = calloc(w->nneeds ? w->nneeds : 1, sizeof(*skels));
	char (*keys)[65] = calloc(w->nneeds ? w->nneeds : 1, sizeof(*keys));
	char (*rkeys)[65] = calloc(w->nneeds ? w->nneeds : 1, sizeof(*rkeys));
	int *st = calloc(w->nneeds ? w->nneeds : 1, sizeof(*st));

	for (size_t i = 0; i < w->nneeds; i++)
		memcpy(w->needs[i].gid, w->needs[i].id, 32);
	if (skels && keys && rkeys && st) {
		for (size_t i = 0; i < w->nneeds; i++)
			skels[i] = w->needs[i].skel;
		if (kiln_x_probe_many(w->k, skels, w->nneeds, keys, rkeys, st) == 0) {
			for (size_t i = 0; i < w->nneeds; i++) {
				w->needs[i].have = st[i] == KILN_OK;
				if (w->needs[i].have)
					memcpy(w->needs[i].key, keys[i], 65);
				/* Nodes whose compilers differ compute another
				 * request key: a group of their own, which builds
				 * once for all its nodes. */
				if (rkeys[i][0] != '\0') {
					uint8_t both[32 + 64];
					memcpy(both, w->needs[i].id, 32);
					memcpy(both + 32, rkeys[i], 64);
					sha256_buf(both, sizeof(both), w->needs[i].gid);
				}
			}
		} else if (w->nneeds > 0) {
			/* The node's kilnd does not answer: it builds nothing for
			 * the others, and its programs come from them. */
			w->kilnd_trouble = true;
		}
	}
	free(skels);
	free(keys);
	free(rkeys);
	free(st);
	need_index_gids(w);
}

/*
 * Step 4 (collective over the node): the full requests of the needs for
 * which pick() is true, from the ranks that own them, into reqs (pointing
 * into *store, which the caller frees). Every rank calls it; only the
 * leader's arguments other than w matter.
 */
static int gather_texts(struct warm *w, bool (*pick)(const struct need *), struct need ***sel,
			struct kiln_request **reqs, size_t *nsel, char **store)
{
	int ns = w->t.node_size, mycount = 0, len, rc = 0, i, go = 1;
	int *wcounts = NULL, *wdispls = NULL, *want = NULL, *mywant = NULL;
	int *lens = NULL, *ldispls = NULL;
	struct buf b = { 0 };
	size_t nw = 0, sum = 0;

	*store = NULL;
	if (w->t.leader) {
		*sel = calloc(w->nneeds + 1, sizeof(**sel));
		*reqs = calloc(w->nneeds + 1, sizeof(**reqs));
		*nsel = 0;
		wcounts = calloc((size_t)ns, sizeof(int));
		wdispls = calloc((size_t)ns, sizeof(int));
		want = calloc(w->nneeds + 1, sizeof(int));
		lens = calloc((size_t)ns, sizeof(int));
		ldispls = calloc((size_t)ns, sizeof(int));
		/* Wanted indices grouped by owner rank, in need order. */
		for (i = 0; i < ns; i++) {
			wdispls[i] = (int)nw;
			for (size_t j = 0; j < w->nneeds; j++) {
				if (w->needs[j].owner_rank == i && pick(&w->needs[j])) {
					want[nw++] = (int)w->needs[j].owner_index;
					wcounts[i]++;
				}
			}
		}
	}
	MPI_Scatter(wcounts, 1, MPI_INT, &mycount, 1, MPI_INT, 0, w->t.node);
	mywant = calloc((size_t)mycount + 1, sizeof(int));
	MPI_Scatterv(want, wcounts, wdispls, MPI_INT, mywant, mycount, MPI_INT, 0, w->t.node);
	for (i = 0; i < mycount; i++) {
		size_t j = (size_t)mywant[i];

		if (j < w->n && w->skels[j])
			pack_request(&b, &w->reqs[j]);
	}
	if (b.oom || mpi_count(b.len, "the requests' text", &len) != 0)
		len = 0;
	MPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, w->t.node);
	if (w->t.leader) {
		for (i = 0; i < ns; i++) {
			if (sum <= INT32_MAX)
				ldispls[i] = (int)sum;
			sum += (size_t)lens[i];
		}
		go = sum <= INT32_MAX;
		if (!go) {
			rc = kiln_x_fail(KILN_EINVAL, "the node's request texts exceed 2 GiB");
			for (size_t j = 0; j < w->nneeds; j++)
				if (pick(&w->needs[j]))
					need_fail(&w->needs[j], KILN_EINVAL,
						  "the text of the programs one node builds exceeds 2 GiB "
						  "in one kiln_mpi_warm; warm them in several calls");
		} else if (!(*store = malloc(sum ? sum : 1))) {
			mpi_oom();
		}
	}
	MPI_Bcast(&go, 1, MPI_INT, 0, w->t.node);
	if (go)
		MPI_Gatherv(b.data, len, MPI_BYTE, *store, lens, ldispls, MPI_BYTE, 0, w->t.node);
	buf_free(&b);
	if (w->t.leader && rc == 0 && *store && *sel && *reqs) {
		for (i = 0; i < ns; i++) {
			struct rd r = { .p = *store + ldispls[i], .len = (size_t)lens[i] };

			for (size_t j = 0; j < w->nneeds; j++) {
				struct need *nd = &w->needs[j];

				if (nd->owner_rank != i || !pick(nd))
					continue;
				if (unpack_request(&r, &(*reqs)[*nsel]) != 0) {
					need_fail(nd, KILN_EPROTO, "the request's text did not arrive intact");
					continue;
				}
				(*sel)[(*nsel)++] = nd;
			}
		}
	}
	free(wcounts);
	free(wdispls);
	free(want);
	free(mywant);
	free(lens);
	free(ldispls);
	return rc;
}

static bool pick_serve(const struct need *nd)
{
	return nd->serve && nd->code == 0;
}

static bool pick_fallback(const struct need *nd)
{
	return nd->fallback && nd->code == 0;
}

static void map_artifact(struct need *nd, int fd);

/* Gets the selected programs through the node's daemon (leader), without
 * loading them: the leader keeps their descriptors to send them on. */
static void get_selected(struct warm *w, struct need **sel, struct kiln_request *reqs, size_t n,
			 bool count_built)
{
	int *fds = calloc(n + 1, sizeof(*fds));
	char (*keys)[65] = calloc(n + 1, sizeof(*keys));
	int *st = calloc(n + 1, sizeof(*st));
	char **errs = calloc(n + 1, sizeof(*errs));

	if (!fds || !keys || !st || !errs) {
		for (size_t i = 0; i < n; i++)
			need_fail(sel[i], KILN_ENOMEM, "out of memory");
	} else {
		for (size_t i = 0; i < n; i++)
			st[i] = 1; /* not answered */
		int rc = kiln_x_fetch_many(w->k, reqs, n, fds, keys, st, errs);
		for (size_t i = 0; i < n; i++) {
			if (st[i] == KILN_EIO || st[i] == KILN_ECONNECT || (st[i] == 1 && rc != 0))
				w->kilnd_trouble = true;
			if (st[i] == 1) {
				need_fail(sel[i], rc != 0 ? rc : KILN_EDAEMON, kiln_errmsg(w->k));
			} else if (st[i] == KILN_OK) {
				/* Kept as a mapping, not a descriptor: a node may serve
				 * thousands of programs, and the page cache holds the
				 * bytes, not this process's heap. */
				if (sel[i]->nkids > 0)
					map_artifact(sel[i], fds[i]);
				close(fds[i]);
				memcpy(sel[i]->key, keys[i], 65);
				if (count_built && !sel[i]->have)
					w->rep.built_here++;
			} else {
				need_fail(sel[i], st[i], errs[i]);
			}
			free(errs[i]);
		}
	}
	free(fds);
	free(keys);
	free(st);
	free(errs);
}

/* Maps the artifact open as fd for sending; a failure leaves map NULL. */
static void map_artifact(struct need *nd, int fd)
{
	struct stat st;
	void *m;

	if (fstat(fd, &st) != 0 || st.st_size <= 0)
		return;
	m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED)
		return;
	nd->map = m;
	nd->map_size = (size_t)st.st_size;
}

/*
 * Fault injection for the tests (tests/integration/test_mpi.c):
 * KILN_MPI_FAULT=WHAT:NODE makes that step fail on that node. "export": the
 * root cannot export what it built (as when its kilnd dies after the build),
 * the case that once sent a header and bytes that disagreed.
 */
static bool fault_here(const struct warm *w, const char *what)
{
	const char *v = getenv("KILN_MPI_FAULT");
	size_t n = strlen(what);
	return v != NULL && strncmp(v, what, n) == 0 && v[n] == ':' &&
	       atoi(v + n + 1) == w->t.node_index;
}

/* The root's side of a program in the round: its artifact and export
 * metadata, or why there is none. *meta is owned by the caller. */
static void root_item(struct warm *w, struct need *nd, struct xfer_item *it, char **meta)
{
	*meta = NULL;
	it->code = nd->code;
	it->text = nd->msg;
	it->data = NULL;
	it->size = 0;
	if (nd->code != 0)
		return;
	if (nd->map == NULL) {
		it->code = kiln_x_fail(KILN_EIO, "the serving node could not map the artifact %.16s",
				       nd->key);
	} else if (fault_here(w, "export")) {
		it->code = kiln_x_fail(KILN_EIO, "export failed (KILN_MPI_FAULT)");
	} else if ((it->code = kiln_x_export(w->k, nd->key, nd->map, nd->map_size, meta)) == 0) {
		it->text = *meta;
		it->data = nd->map;
		it->size = nd->map_size;
		return;
	} else if (it->code == KILN_EIO || it->code == KILN_ECONNECT) {
		w->kilnd_trouble = true;   /* kilnd went after the build */
	}
	/* The serving node's own trouble: its text goes down the tree, and the
	 * receivers try again in the next round. */
	*meta = strdup(kiln_errmsg(w->k));
	it->text = *meta;
}

/* Imports one received artifact into the node's daemon. */
static void import_one(struct warm *w, struct need *nd, const char *meta, const char *data,
		       size_t size)
{
	pthread_mutex_lock(&w->import_lock);
	bool trouble = w->kilnd_trouble;
	pthread_mutex_unlock(&w->import_lock);
	if (trouble) {
		/* Each put to a kilnd that stopped answering would wait for
		 * the deadline: this node's programs are lost with it. */
		nd->fallback = true;
		return;
	}
	int fd = memfd_create("kiln-put", MFD_CLOEXEC);
	int rc;
	uint64_t t0 = util_now_ns();

	if (fd < 0 || util_write_all(fd, data, size) != 0) {
		rc = kiln_x_fail(KILN_EIO, "cannot hold the received artifact in memory");
	} else {
		rc = kiln_x_put(w->k, nd->skel, meta, fd);
	}
	if (fd >= 0)
		close(fd);
	pthread_mutex_lock(&w->import_lock);
	w->t_puts += util_now_ns() - t0;
	w->nputs++;
	if (rc == 0)
		w->rep.received++;
	else if (rc == KILN_EIO || rc == KILN_ECONNECT || rc == KILN_EDAEMON)
		w->kilnd_trouble = true;
	pthread_mutex_unlock(&w->import_lock);
	/* Refused (this node's compiler or headers differ) or lost: build it
	 * here instead; the text comes from the node's ranks. */
	if (rc != 0)
		nd->fallback = true;
}

/* A program's own failure, the same wherever it is built: not retried. */
static bool program_failure(int code)
{
	return code == KILN_EBUILD || code == KILN_ETIMEDOUT || code == KILN_EREFUSED ||
	       code == KILN_EINVAL;
}

/* A received artifact's import, on the importer's threads (never calls
 * MPI). Each need is imported once; what the imports share (rep.received,
 * kilnd_trouble, the trace's sums) is under w->import_lock while the round
 * runs. */
static void import_job(void *ctx, void *job)
{
	struct warm *w = ctx;
	struct xfer_item *it = job;
	struct need *nd = need_find_gid(w, it->id);
	if (nd != NULL)
		import_one(w, nd, it->text, it->data, it->size);
}

/* What to do with a program once its bytes (or its failure) arrived; runs
 * in the transfer loop after it was passed on down the tree, so it only
 * queues the import. */
static void on_complete(void *ctx, struct xfer_item *it)
{
	struct importer *im = ctx;
	if (it->code == 0) {
		importer_add(im, it);
		return;
	}
	struct warm *w = importer_ctx(im);
	struct need *nd = need_find_gid(w, it->id);
	if (nd == NULL)
		return;
	if (program_failure(it->code))
		need_fail(nd, it->code, it->text);
	else
		nd->retry = true;   /* the serving node's trouble: the next round */
}

/* Step 5: the round's artifacts and errors between leaders. */
static void exchange(struct warm *w, int round)
{
	size_t n = 0;
	for (size_t j = 0; j < w->nneeds; j++)
		n += w->needs[j].in_tree && (w->needs[j].parent >= 0 || w->needs[j].nkids > 0);
	struct xfer_item *items = calloc(n + 1, sizeof(*items));
	char **metas = calloc(n + 1, sizeof(*metas));
	if (!items || !metas)
		mpi_oom();
	size_t k = 0;
	/* Items by the plan's identity (xfer_run looks them up by it). */
	for (size_t j = 0; j < w->nneeds; j++) {
		struct need *nd = w->by_gid[j];
		if (!nd->in_tree || (nd->parent < 0 && nd->nkids == 0))
			continue;
		struct xfer_item *it = &items[k];
		memcpy(it->id, nd->gid, 32);
		it->parent = nd->parent;
		it->nkids = nd->nkids;
		memcpy(it->kids, nd->kids, sizeof(it->kids));
		if (nd->parent < 0)
			root_item(w, nd, it, &metas[k]);
		else
			nd->retry = false;
		k++;
	}
	struct importer *im = importer_start(import_mode(), import_threads(), import_job, w);
	if (im == NULL)
		mpi_oom();
	uint64_t t0 = util_now_ns();
	xfer_run(w->t.leaders, round, items, n, xfer_timeout(), on_complete, im);
	uint64_t t1 = util_now_ns();
	w->import_threads = importer_threads(im);
	importer_finish(im);   /* the last imports, before the items go */
	w->t_xfer = t1 - t0;
	w->t_tail = util_now_ns() - t1;
	for (size_t i = 0; i < n; i++) {
		struct need *nd = need_find_gid(w, items[i].id);
		/* A root that could not build it through its node's trouble:
		 * the program is lost here too, and comes in the next round.
		 * (One that built it but could not send it has it.) */
		if (nd != NULL && items[i].parent < 0 && nd->code != 0 &&
		    !program_failure(nd->code)) {
			nd->retry = true;
			nd->code = 0;
		}
		if (nd != NULL && items[i].parent >= 0 && items[i].lost) {
			fprintf(stderr, "libkiln-mpi: node %d, program %.16s: %s\n", w->t.node_index,
				nd->key[0] ? nd->key : "(not yet built)", items[i].text);
			nd->retry = true;
			free(nd->msg);
			nd->msg = strdup(items[i].text);
		}
		free(metas[i]);
	}
	xfer_free(items, n);
	free(items);
	free(metas);
}

/* Steps 4 and the fallback: texts and gets, on the leader's node. */
static void serve_round(struct warm *w, bool (*pick)(const struct need *), bool count_built)
{
	struct need **sel = NULL;
	struct kiln_request *reqs = NULL;
	size_t nsel = 0;
	char *store = NULL;

	gather_texts(w, pick, &sel, &reqs, &nsel, &store);
	if (w->t.leader && sel && reqs)
		get_selected(w, sel, reqs, nsel, count_built);
	for (size_t i = 0; i < nsel; i++)
		unpack_free(&reqs[i]);
	free(sel);
	free(reqs);
	free(store);
}

/* Step 6: every program's outcome from the leader to its node's ranks. */
static void broadcast_results(struct warm *w)
{
	struct buf b = { 0 };
	uint64_t len = 0;

	if (w->t.leader) {
		buf_u64(&b, w->rep.built_here);
		buf_u64(&b, w->rep.received);
		buf_u64(&b, w->rep.already_cached);
		buf_u64(&b, w->rep.failed);
		buf_u32(&b, (uint32_t)w->nneeds);
		for (size_t i = 0; i < w->nneeds; i++) {
			const struct need *nd = &w->needs[i];

			buf_put(&b, nd->id, 32);
			buf_u32(&b, (uint32_t)nd->code);
			buf_str(&b, nd->code ? nd->msg : nd->key,
				strlen(nd->code ? (nd->msg ? nd->msg : "") : nd->key));
		}
		len = b.oom || b.len > INT32_MAX ? 0 : b.len;
	}
	MPI_Bcast(&len, 1, MPI_UINT64_T, 0, w->t.node);
	if (!w->t.leader) {
		b.data = malloc(len ? len : 1);
		b.len = len;
	}
	MPI_Bcast(b.data, (int)len, MPI_BYTE, 0, w->t.node);
	struct rd r = { .p = b.data, .len = b.data ? (size_t)len : 0 };
	w->rep.built_here = rd_u64(&r);
	w->rep.received = rd_u64(&r);
	w->rep.already_cached = rd_u64(&r);
	w->rep.failed = rd_u64(&r);
	uint32_t m = rd_u32(&r);
	for (uint32_t i = 0; i < m && !r.bad; i++) {
		uint8_t id[32];
		size_t tl;
		const char *p = r.p + r.off;

		if (r.len - r.off < 32)
			break;
		memcpy(id, p, 32);
		r.off += 32;
		int code = (int)rd_u32(&r);
		const char *text = rd_str(&r, &tl);
		for (size_t j = 0; j < w->n && text; j++) {
			if (!w->skels[j] || memcmp(w->ids[j], id, 32) != 0)
				continue;
			w->status[j] = code;
			if (code != 0)
				w->msgs[j] = strdup(text);
		}
	}
	/* A request the leader never reported (its bytes were lost): say so. */
	for (size_t j = 0; j < w->n; j++) {
		if (w->skels[j] && w->status[j] == 1) {
			w->status[j] = KILN_EPROTO;
			w->msgs[j] = strdup("the node leader sent no outcome for this request");
		}
	}
	buf_free(&b);
}

static void mpi_warm_free(struct warm *w)
{
	pthread_mutex_destroy(&w->import_lock);
	for (size_t i = 0; i < w->n; i++) {
		free(w->skels ? w->skels[i] : NULL);
		free(w->msgs ? w->msgs[i] : NULL);
	}
	free(w->skels);
	free(w->msgs);
	free(w->ids);
	for (size_t i = 0; i < w->nneeds; i++) {
		free(w->needs[i].skel);
		free(w->needs[i].msg);
		if (w->needs[i].map)
			munmap((void *)w->needs[i].map, w->needs[i].map_size);
	}
	free(w->needs);
	free(w->by_gid);
	topo_free(&w->t);
}

/* After the rounds: what is still lost is built here, unless this node's
 * kilnd is the trouble (then the node's ranks get why). */
static void settle_leftover(struct warm *w, struct need *nd)
{
	if (nd->code != 0 || (!nd->retry && !nd->fallback))
		return;
	if (w->kilnd_trouble) {
		need_fail(nd, KILN_EIO, "this node's kilnd failed during kiln_mpi_warm (it died, "
			  "stopped or stopped answering); the other nodes carry on without it");
		nd->fallback = false;
		return;
	}
	nd->fallback = true;
}

/* Rounds of plan, build and exchange: the first for everything, the second
 * for what the first lost through a node's trouble (its kilnd died, stalled
 * or the bytes stopped), each program then given to one surviving node. */
#define ROUNDS 2

/*
 * One round; collective over comm (every rank calls it). Returns whether
 * another round is needed: the leaders agree on it (any of them lost a
 * program), and each tells its node.
 */
/* KILN_MPI_TRACE: one line per leader and round, on stderr. */
static void trace_round(const struct warm *w, int round)
{
	fprintf(stderr, "libkiln-mpi: node %d round %d: plan %.1f ms, builds %.1f ms, waiting for "
		"the other nodes %.1f ms, transfers %.1f ms, then imports %.1f ms more (%u puts, "
		"%.1f ms in all, %s %d)\n", w->t.node_index, round, (double)w->t_plan / 1e6,
		(double)w->t_builds / 1e6, (double)w->t_wait / 1e6, (double)w->t_xfer / 1e6,
		(double)w->t_tail / 1e6, w->nputs, (double)w->t_puts / 1e6,
		w->import_threads > 0 ? "threads" : "batch", w->import_threads);
}

static bool warm_round(struct warm *w, int round)
{
	int again = 0;
	uint64_t t0 = util_now_ns();
	w->t_puts = w->t_xfer = w->t_tail = 0;
	w->nputs = 0;
	if (w->t.leader) {
		plan(w, round);
		for (size_t i = 0; round == 0 && i < w->nneeds; i++) {
			struct need *nd = &w->needs[i];
			if (!nd->have && !nd->serve && !nd->in_tree && nd->code == 0)
				need_fail(nd, KILN_EDAEMON, "no node was planned to build this program");
		}
	}
	/* The other ranks wait for the plan, then for the builds, politely. */
	uint64_t t1 = util_now_ns();
	polite_barrier(w->t.node);
	serve_round(w, pick_serve, true);
	if (w->t.leader) {
		/* Every node's builds are done: the exchange that follows is only
		 * transfers, and its deadline is theirs. */
		uint64_t t2 = util_now_ns();
		polite_barrier(w->t.leaders);
		uint64_t t3 = util_now_ns();
		exchange(w, round);
		int lost = 0;
		for (size_t i = 0; i < w->nneeds; i++)
			lost += w->needs[i].retry;
		MPI_Allreduce(&lost, &again, 1, MPI_INT, MPI_MAX, w->t.leaders);
		w->t_plan = t1 - t0;
		w->t_builds = t2 - t1;
		w->t_wait = t3 - t2;
		if (w->trace)
			trace_round(w, round);
	}
	/* The other ranks wait here while their leader builds: politely, or
	 * MPI's busy wait takes a core from the compilers. */
	MPI_Request rq;
	MPI_Ibcast(&again, 1, MPI_INT, 0, w->t.node, &rq);
	polite_wait(&rq);
	return again > 0 && round + 1 < ROUNDS;
}

int warm_run(struct kiln *k, MPI_Comm comm, const struct kiln_request *reqs, size_t n,
	     struct kiln_warm_report *report, int *status)
{
	struct warm w = { .k = k, .reqs = reqs, .n = n };
	int rc = 0;
	const char *trace = getenv("KILN_MPI_TRACE");
	pthread_mutex_init(&w.import_lock, NULL);
	w.trace = trace != NULL && *trace != '\0' && strcmp(trace, "0") != 0;

	topo_make(comm, &w.t);
	w.skels = calloc(n + 1, sizeof(*w.skels));
	w.ids = calloc(n + 1, sizeof(*w.ids));
	w.status = status;
	w.msgs = calloc(n + 1, sizeof(*w.msgs));
	if (!w.skels || !w.ids || !w.msgs)
		mpi_oom();
	for (size_t i = 0; i < n; i++) {
		if (rc == 0 && (w.skels[i] = kiln_x_skeleton(&reqs[i])) != NULL) {
			sha256_buf(w.skels[i], strlen(w.skels[i]), w.ids[i]);
			status[i] = 1; /* not yet known */
		} else {
			status[i] = rc != 0 ? rc : KILN_EINVAL;
			if (w.msgs)
				w.msgs[i] = strdup(kiln_errmsg(k));
		}
	}
	/* From here every rank takes part in every collective, whatever
	 * failed, so that nobody waits forever. */
	gather_skeletons(&w);
	if (w.t.leader) {
		mpi_probe(&w);
		for (size_t i = 0; i < w.nneeds; i++)
			w.rep.already_cached += w.needs[i].have;
	}
	for (int round = 0; round < ROUNDS; round++)
		if (!warm_round(&w, round))
			break;
	/* What two rounds could not bring: built here (also what this node's
	 * kilnd refused to import). */
	if (w.t.leader)
		for (size_t i = 0; i < w.nneeds; i++)
			settle_leftover(&w, &w.needs[i]);
	polite_barrier(w.t.node);
	serve_round(&w, pick_fallback, true);
	if (w.t.leader)
		for (size_t i = 0; i < w.nneeds; i++)
			w.rep.failed += w.needs[i].code != 0;
	polite_barrier(w.t.node);
	broadcast_results(&w);
	if (report)
		*report = w.rep;
	/* Each rank's aliases, so that kiln_lookup by alias is a hit too (the
	 * skeletons, the builds and the imports carry none). */
	{
		struct kiln_request *named = calloc(n + 1, sizeof(*named));
		size_t nn = 0;

		for (size_t i = 0; named && i < n; i++)
			if (status[i] == KILN_OK && reqs[i].alias)
				named[nn++] = reqs[i];
		if (nn > 0 && kiln_x_alias_many(k, named, nn) != 0)
			for (size_t i = 0; i < n; i++)
				if (status[i] == KILN_OK && reqs[i].alias) {
					status[i] = KILN_EDAEMON;
					w.msgs[i] = strdup(kiln_errmsg(k));
					break;
				}
		free(named);
	}
	rc = KILN_OK;
	for (size_t i = 0; i < n; i++) {
		if (status[i] != KILN_OK) {
			rc = kiln_x_fail(status[i], "%s", w.msgs && w.msgs[i] ? w.msgs[i] : "failed");
			break;
		}
	}
	mpi_warm_free(&w);
	return rc;
}
