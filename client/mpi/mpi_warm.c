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
 *  3. The leaders exchange (identity, have) lists, and each computes the
 *     same plan: a program some node lacks comes from a node that has it
 *     (the least loaded), else it is built by one of the nodes that need it
 *     (the one with the fewest builds so far), and is sent to the others.
 *  4. A leader gathers the text of what it serves from the lowest rank of
 *     its node that asked for it, and gets those with kiln_x_get_many (its
 *     daemon builds them in parallel, up to --jobs).
 *  5. Artifacts (with their metadata) or errors go to the nodes that need
 *     them, over a communicator of our own; each received artifact is
 *     imported into the node's daemon with put. An artifact the daemon
 *     refuses (another compiler or header there) is built locally instead.
 *  6. Each leader broadcasts the outcome of every program to its ranks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiln_x.h"
#include "mpi_int.h"
#include "sha256.h"
#include "util.h"

#define TAG_XFER 0x6b6c
#define CHUNK ((size_t)16 << 20)

/* One distinct program a node needs (leader only). */
struct need {
	uint8_t id[32];
	char *skel;              /* owned */
	int owner_rank;          /* lowest node rank that asked for it */
	uint32_t owner_index;    /* the request's index there */
	bool have;               /* the daemon had it at the probe */
	int code;                /* outcome: 0 or a kiln code */
	char *msg;               /* its text on failure (owned) */
	char key[65];
	int source;              /* node that serves it to us, or -1 */
	bool serve;              /* this node builds or sends it */
	bool fallback;           /* a received artifact was refused: build here */
	bool targets;            /* this node sends it to other nodes */
	const char *map;         /* the artifact, mapped, when this node sends it */
	size_t map_size;
};

/* A program of the job-wide plan (leaders only). */
struct gprog {
	uint8_t id[32];
	int from;                /* serving node, or -1 when nobody lacks it */
	unsigned char *needs;    /* by node: 0 no, 1 needs and lacks, 2 has */
};

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
};

static int id_cmp(const void *a, const void *b)
{
	return memcmp(a, b, 32);
}

static struct need *need_find(struct warm *w, const uint8_t id[32])
{
	return bsearch(id, w->needs, w->nneeds, sizeof(*w->needs), id_cmp);
}

static void need_fail(struct need *nd, int code, const char *msg)
{
	nd->code = code;
	free(nd->msg);
	nd->msg = strdup(msg ? msg : kiln_strerror(code));
}

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
	if (w->t.leader && rc == 0 && all) {
		size_t cap = 0;

		for (i = 0; i < w->t.node_size; i++) {
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
					if (!nn) {
						rc = kiln_x_fail(KILN_ENOMEM, "out of memory");
						break;
					}
					w->needs = nn;
				}
				struct need *nd = &w->needs[w->nneeds];
				memset(nd, 0, sizeof(*nd));
				sha256_buf(s, sl, nd->id);
				nd->skel = strdup(s);
				nd->owner_rank = i;
				nd->owner_index = j;
				nd->source = -1;
				w->nneeds++;
			}
		}
		total = 0;
	}
	free(all);
	free(counts);
	free(displs);
	(void)total;
	if (!w->t.leader || w->nneeds == 0)
		return rc;
	/* Sort by identity, then keep the first of duplicates: the lowest
	 * (rank, index) that asked, which will send the text. */
	{
		size_t i2, o = 0;
		struct need *v = w->needs;

		qsort(v, w->nneeds, sizeof(*v), need_cmp);
		for (i2 = 0; i2 < w->nneeds; i2++) {
			if (o > 0 && memcmp(v[o - 1].id, v[i2].id, 32) == 0) {
				free(v[i2].skel);
				continue;
			}
			v[o++] = v[i2];
		}
		w->nneeds = o;
	}
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
	int *st = calloc(w->nneeds ? w->nneeds : 1, sizeof(*st));

	if (skels && keys && st) {
		for (size_t i = 0; i < w->nneeds; i++)
			skels[i] = w->needs[i].skel;
		if (kiln_x_probe_many(w->k, skels, w->nneeds, keys, st) == 0) {
			for (size_t i = 0; i < w->nneeds; i++) {
				w->needs[i].have = st[i] == KILN_OK;
				if (w->needs[i].have)
					memcpy(w->needs[i].key, keys[i], 65);
			}
		}
	}
	free(skels);
	free(keys);
	free(st);
}

/* Step 3: the job-wide plan; fills need.source and need.serve, and returns
 * in *outs the (program, target node) pairs this node sends, in plan order. */
struct send {
	struct need *nd;
	int to;
};

static int plan(struct warm *w, struct send **outs, size_t *nouts)
{
	int nn = w->t.nnodes, me = w->t.node_index, mine, i;
	int *counts = calloc((size_t)nn, sizeof(int)), *displs = calloc((size_t)nn, sizeof(int));
	unsigned char *rec = NULL, *all = NULL;
	struct gprog *g = NULL;
	size_t ng = 0, total = 0, nsend = 0, capsend = 0;
	size_t *load_build = calloc((size_t)nn, sizeof(size_t));
	size_t *load_send = calloc((size_t)nn, sizeof(size_t));
	struct send *sends = NULL;
	int rc = 0;

	*outs = NULL;
	*nouts = 0;
	rec = malloc(w->nneeds * 33 + 1);
	if (!counts || !displs || !rec || !load_build || !load_send ||
	    mpi_count(w->nneeds * 33, "the program list", &mine) != 0)
		mpi_oom(); /* every leader must make the same plan, or none */
	for (size_t j = 0; rc == 0 && j < w->nneeds; j++) {
		memcpy(rec + j * 33, w->needs[j].id, 32);
		rec[j * 33 + 32] = w->needs[j].have ? 2 : 1;
	}
	MPI_Allgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, w->t.leaders);
	for (i = 0; i < nn; i++) {
		displs[i] = (int)total;
		total += (size_t)counts[i];
	}
	if (total > INT32_MAX || !(all = malloc(total ? total : 1)))
		mpi_oom();
	MPI_Allgatherv(rec, mine, MPI_BYTE, all, counts, displs, MPI_BYTE, w->t.leaders);
	/* The distinct programs, sorted, each with its nodes' needs. */
	g = calloc(total / 33 + 1, sizeof(*g));
	if (!g)
		mpi_oom();
	{
		uint8_t (*ids)[32] = malloc((total / 33 + 1) * 32);
		size_t nid = 0;

		if (!ids)
			mpi_oom();
		for (size_t off = 0; off + 33 <= total; off += 33)
			memcpy(ids[nid++], all + off, 32);
		qsort(ids, nid, 32, id_cmp);
		for (size_t j = 0; j < nid; j++) {
			if (ng > 0 && memcmp(g[ng - 1].id, ids[j], 32) == 0)
				continue;
			memcpy(g[ng].id, ids[j], 32);
			g[ng].from = -1;
			g[ng].needs = calloc((size_t)nn, 1);
			if (!g[ng].needs)
				mpi_oom();
			ng++;
		}
		free(ids);
		if (rc != 0)
			goto out;
		for (i = 0; i < nn; i++) {
			for (size_t off = (size_t)displs[i]; off < (size_t)displs[i] + (size_t)counts[i];
			     off += 33) {
				struct gprog *p = bsearch(all + off, g, ng, sizeof(*g), id_cmp);

				if (p)
					p->needs[i] = all[off + 32];
			}
		}
	}
	/* The same decisions on every leader: same input, same order. */
	for (size_t j = 0; j < ng; j++) {
		struct gprog *p = &g[j];
		int best = -1;
		bool lacking = false;

		for (i = 0; i < nn; i++)
			lacking = lacking || p->needs[i] == 1;
		if (!lacking)
			continue;
		for (i = 0; i < nn; i++)
			if (p->needs[i] == 2 && (best < 0 || load_send[i] < load_send[best]))
				best = i;
		if (best < 0) {
			for (i = 0; i < nn; i++)
				if (p->needs[i] == 1 && (best < 0 || load_build[i] < load_build[best]))
					best = i;
			load_build[best]++;
		}
		p->from = best;
		for (i = 0; i < nn; i++) {
			if (p->needs[i] != 1 || i == best)
				continue;
			load_send[best]++;
			if (best == me) {
				if (nsend == capsend) {
					capsend = capsend ? capsend * 2 : 64;
					struct send *ns = realloc(sends, capsend * sizeof(*ns));
					if (!ns)
						mpi_oom();
					sends = ns;
				}
				sends[nsend].nd = need_find(w, p->id);
				sends[nsend].nd->targets = true;
				sends[nsend++].to = i;
			}
		}
		struct need *nd = need_find(w, p->id);
		if (nd && best == me)
			nd->serve = true;
		else if (nd && !nd->have)
			nd->source = best;
	}
out:
	for (size_t j = 0; g && j < ng; j++)
		free(g[j].needs);
	free(g);
	free(all);
	free(rec);
	free(counts);
	free(displs);
	free(load_build);
	free(load_send);
	if (rc != 0) {
		free(sends);
		return rc;
	}
	*outs = sends;
	*nouts = nsend;
	return 0;
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
			if (st[i] == 1) {
				need_fail(sel[i], rc != 0 ? rc : KILN_EDAEMON, kiln_errmsg(w->k));
			} else if (st[i] == KILN_OK) {
				/* Kept as a mapping, not a descriptor: a node may serve
				 * thousands of programs, and the page cache holds the
				 * bytes, not this process's heap. */
				if (sel[i]->targets)
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

/* What one program's message to a target holds: a header, then its bytes. */
struct outgoing {
	struct need *nd;
	struct buf hdr;
	const char *data;        /* the need's mapping */
	size_t size;
};

static void outgoing_fill(struct warm *w, struct outgoing *o)
{
	struct need *nd = o->nd;
	char *meta = NULL;
	int code = nd->code;
	const char *msg = nd->msg;

	if (code == 0 && nd->map) {
		code = kiln_x_export(w->k, nd->key, nd->map, nd->map_size, &meta);
		o->data = nd->map;
		o->size = nd->map_size;
		if (code != 0)
			msg = kiln_errmsg(w->k);
	} else if (code == 0) {
		code = kiln_x_fail(KILN_EIO, "the serving node could not map the artifact %.16s",
				   nd->key);
		msg = kiln_errmsg(w->k);
	}
	if (o->hdr.oom)
		mpi_oom();
	buf_u32(&o->hdr, (uint32_t)code);
	buf_str(&o->hdr, code == 0 ? meta : msg, code == 0 ? strlen(meta) : strlen(msg ? msg : ""));
	buf_u64(&o->hdr, code == 0 ? o->size : 0);
	if (o->hdr.oom)
		mpi_oom();
	free(meta);
}

/* Imports one received artifact into the node's daemon. */
static void import_one(struct warm *w, struct need *nd, const char *meta, const char *data,
		       size_t size)
{
	int fd = memfd_create("kiln-put", MFD_CLOEXEC);
	int rc;

	if (fd < 0 || util_write_all(fd, data, size) != 0) {
		rc = kiln_x_fail(KILN_EIO, "cannot hold the received artifact in memory");
	} else {
		rc = kiln_x_put(w->k, nd->skel, meta, fd);
	}
	if (fd >= 0)
		close(fd);
	if (rc == 0) {
		w->rep.received++;
		return;
	}
	/* Refused (this node's compiler or headers differ) or lost: build it
	 * here instead; the text comes from the node's ranks. */
	nd->fallback = true;
}

/* Step 5: artifacts and errors between leaders. */
static int exchange(struct warm *w, struct send *sends, size_t nsends)
{
	/* One outgoing message per program, shared by its targets (the plan
	 * lists a program's targets one after another). */
	struct outgoing *outs = calloc(nsends + 1, sizeof(*outs));
	size_t *which = calloc(nsends + 1, sizeof(*which));
	MPI_Request *rq = NULL;
	size_t nouts = 0, nrq = 0, caprq = 0;
	int rc = 0;

	if (!outs || !which)
		mpi_oom();
	for (size_t i = 0; i < nsends; i++) {
		if (nouts == 0 || outs[nouts - 1].nd != sends[i].nd) {
			outs[nouts].nd = sends[i].nd;
			outgoing_fill(w, &outs[nouts++]);
		}
		which[i] = nouts - 1;
	}
	/* The header, then the chunks, per (program, target) in plan order;
	 * all without blocking, so that no two leaders wait on each other. */
	for (size_t i = 0; i < nsends && rc == 0; i++) {
		const struct outgoing *o = &outs[which[i]];
		size_t nchunks = o->hdr.len && o->data ? (o->size + CHUNK - 1) / CHUNK : 0;

		if (nrq + nchunks + 1 > caprq) {
			caprq = (nrq + nchunks + 1) * 2;
			MPI_Request *nr = realloc(rq, caprq * sizeof(*nr));
			if (!nr)
				mpi_oom(); /* the targets would wait for what we cannot send */
			rq = nr;
		}
		MPI_Isend(o->hdr.data, (int)o->hdr.len, MPI_BYTE, sends[i].to, TAG_XFER,
			  w->t.leaders, &rq[nrq++]);
		for (size_t c = 0; c < nchunks; c++) {
			size_t off = c * CHUNK, len = o->size - off < CHUNK ? o->size - off : CHUNK;

			MPI_Isend(o->data + off, (int)len, MPI_BYTE, sends[i].to, TAG_XFER,
				  w->t.leaders, &rq[nrq++]);
		}
	}
	/* What comes to us: in plan (identity) order, from each program's source. */
	for (size_t j = 0; j < w->nneeds; j++) {
		struct need *nd = &w->needs[j];
		MPI_Status st;
		int count;
		char *hdr, *data = NULL;
		struct rd r;
		size_t ml, size;

		if (nd->source < 0)
			continue;
		polite_probe(nd->source, TAG_XFER, w->t.leaders, &st);
		MPI_Get_count(&st, MPI_BYTE, &count);
		if (!(hdr = malloc((size_t)count + 1)))
			mpi_oom();
		MPI_Recv(hdr, count, MPI_BYTE, nd->source, TAG_XFER, w->t.leaders, MPI_STATUS_IGNORE);
		r = (struct rd){ .p = hdr, .len = (size_t)count };
		int code = (int)rd_u32(&r);
		const char *text = rd_str(&r, &ml);
		size = rd_u64(&r);
		if (size > 0 && !(data = malloc(size)))
			mpi_oom();
		for (size_t off = 0; off < size; off += CHUNK) {
			size_t len = size - off < CHUNK ? size - off : CHUNK;

			MPI_Recv(data ? data + off : NULL, data ? (int)len : 0, MPI_BYTE, nd->source,
				 TAG_XFER, w->t.leaders, MPI_STATUS_IGNORE);
		}
		if (r.bad || !text)
			need_fail(nd, KILN_EPROTO, "a malformed artifact message came from another node");
		else if (code == KILN_EBUILD || code == KILN_ETIMEDOUT || code == KILN_EREFUSED ||
			 code == KILN_EINVAL)
			need_fail(nd, code, text); /* the program's own failure: the same everywhere */
		else if (code != 0)
			nd->fallback = true; /* the serving node's trouble: build it here */
		else if (!data && size > 0)
			nd->fallback = true;
		else
			import_one(w, nd, text, data, size);
		free(data);
		free(hdr);
	}
	for (size_t i = 0; i < nrq; i++)
		polite_wait(&rq[i]);
	free(rq);
	for (size_t i = 0; i < nouts; i++)
		buf_free(&outs[i].hdr);
	free(outs);
	free(which);
	return rc;
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
	topo_free(&w->t);
}

int warm_run(struct kiln *k, MPI_Comm comm, const struct kiln_request *reqs, size_t n,
	     struct kiln_warm_report *report, int *status)
{
	struct warm w = { .k = k, .reqs = reqs, .n = n };
	struct send *sends = NULL;
	size_t nsends = 0;
	int rc = 0;

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
		plan(&w, &sends, &nsends);
		for (size_t i = 0; i < w.nneeds; i++) {
			struct need *nd = &w.needs[i];

			if (!nd->have && !nd->serve && nd->source < 0)
				need_fail(nd, KILN_EDAEMON, "no node was planned to build this program");
		}
	}
	/* The other ranks wait for the plan, then for the builds, politely. */
	polite_barrier(w.t.node);
	serve_round(&w, pick_serve, true);
	if (w.t.leader)
		exchange(&w, sends, nsends);
	polite_barrier(w.t.node);
	free(sends);
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
