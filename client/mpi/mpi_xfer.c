/*
 * Artifacts between node leaders down a binary tree per program
 * (mpi_xfer.h). One progress loop for everything in flight: headers are
 * probed from any node, each checked against what is expected from that
 * node (its sequence number and the programs it is the parent of), the
 * bytes are received into a buffer of their own and passed on to the
 * node's children as soon as they are whole, and nothing waits past the
 * deadline.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln/kiln.h"
#include "kiln/kiln_mpi.h"
#include "kiln_x.h"
#include "mpi_int.h"
#include "mpi_xfer.h"
#include "util.h"

#define XFER_MAGIC 0x6b786631u   /* "kxf1" */
#define CHUNK ((size_t)16 << 20)
#define TAG_BASE 0x6b70
#define DEFAULT_TIMEOUT_S 300.0
/* No compiled artifact comes near 64 GiB: a header that says more is
 * damaged. */
#define XFER_MAX_SIZE ((uint64_t)1 << 36)

enum { WAIT_HDR, RECV_DATA, DONE };

/* A sequence counter per peer: next expected from a parent, next to send to
 * a child. A few per node: one per distinct parent or child. */
struct peer {
	int node;
	uint32_t seq;
};

struct sends {
	MPI_Request *rq;
	size_t n, cap;
	char **hdrs;         /* header buffers, freed once their sends are done */
	size_t nhdrs, caphdrs;
};

/* Bytes a header announced that nobody wants: received and dropped, so that
 * the stream from that node stays in step. */
struct junk {
	char *buf;
	MPI_Request *rq;
	int nrq;
	struct junk *next;
};

struct engine {
	MPI_Comm comm;
	int tag_hdr, tag_data;
	struct xfer_item *items;
	size_t n;
	struct peer *from, *to;
	size_t nfrom, nto;
	struct sends s;
	struct junk *junk;
	void (*on_complete)(void *ctx, struct xfer_item *item);
	void *ctx;
};

/* Set by kiln_mpi_set_timeout (seconds), or 0: the environment's. */
static _Atomic double api_timeout;

int kiln_mpi_set_timeout(double seconds)
{
	if (!(seconds >= 0 && seconds < 1e7))
		return kiln_x_fail(KILN_EINVAL, "kiln_mpi_set_timeout: seconds must be from 0 "
				   "(the default) to 10000000");
	api_timeout = seconds;
	return KILN_OK;
}

double xfer_timeout(void)
{
	double set = api_timeout;
	if (set > 0)
		return set;
	const char *v = getenv("KILN_MPI_TIMEOUT");
	char *end;
	double t = v != NULL && *v != '\0' ? strtod(v, &end) : DEFAULT_TIMEOUT_S;
	if (v != NULL && *v != '\0' && (*end != '\0' || !(t > 0 && t < 1e7)))
		t = DEFAULT_TIMEOUT_S;
	return t;
}

static struct peer *peer_find(struct peer *v, size_t n, int node)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].node == node)
			return &v[i];
	return NULL;
}

static void peer_add(struct peer **v, size_t *n, int node)
{
	if (node < 0 || peer_find(*v, *n, node) != NULL)
		return;
	struct peer *p = realloc(*v, (*n + 1) * sizeof(*p));
	if (p == NULL)
		mpi_oom();
	p[*n] = (struct peer){ .node = node };
	*v = p;
	(*n)++;
}

static MPI_Request *sends_slot(struct sends *s)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 64;
		MPI_Request *p = realloc(s->rq, s->cap * sizeof(*p));
		if (p == NULL)
			mpi_oom();
		s->rq = p;
	}
	return &s->rq[s->n++];
}

static void sends_keep(struct sends *s, char *hdr)
{
	if (s->nhdrs == s->caphdrs) {
		s->caphdrs = s->caphdrs ? s->caphdrs * 2 : 64;
		char **p = realloc(s->hdrs, s->caphdrs * sizeof(*p));
		if (p == NULL)
			mpi_oom();
		s->hdrs = p;
	}
	s->hdrs[s->nhdrs++] = hdr;
}

/* Sends it (header, then chunks) to each child, without blocking. */
static void pass_on(struct engine *e, struct xfer_item *it)
{
	size_t size = it->code == 0 && it->data != NULL ? it->size : 0;
	for (int k = 0; k < it->nkids; k++) {
		struct peer *p = peer_find(e->to, e->nto, it->kids[k]);
		struct buf b = { 0 };
		buf_u32(&b, XFER_MAGIC);
		buf_u32(&b, p->seq++);
		buf_put(&b, it->id, 32);
		buf_u32(&b, (uint32_t)it->code);
		buf_str(&b, it->text ? it->text : "", it->text ? strlen(it->text) : 0);
		buf_u64(&b, size);
		if (b.oom || b.len > INT32_MAX)
			mpi_oom(); /* the child would wait for what cannot be sent */
		MPI_Isend(b.data, (int)b.len, MPI_BYTE, it->kids[k], e->tag_hdr, e->comm,
			  sends_slot(&e->s));
		sends_keep(&e->s, b.data);
		for (size_t off = 0; off < size; off += CHUNK) {
			size_t len = size - off < CHUNK ? size - off : CHUNK;
			MPI_Isend(it->data + off, (int)len, MPI_BYTE, it->kids[k], e->tag_data, e->comm,
				  sends_slot(&e->s));
		}
	}
}

/* Posts the receives of size bytes from source into buf (chunk by chunk). */
static MPI_Request *post_data(struct engine *e, int source, char *buf, size_t size, int *nrq)
{
	size_t n = (size + CHUNK - 1) / CHUNK;
	MPI_Request *rq = calloc(n + 1, sizeof(*rq));
	if (rq == NULL)
		mpi_oom();
	for (size_t c = 0; c < n; c++) {
		size_t off = c * CHUNK, len = size - off < CHUNK ? size - off : CHUNK;
		MPI_Irecv(buf + off, (int)len, MPI_BYTE, source, e->tag_data, e->comm, &rq[c]);
	}
	*nrq = (int)n;
	return rq;
}

static void item_lost(struct xfer_item *it, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void item_lost(struct xfer_item *it, int code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	free(it->text);
	it->text = strdup(msg);
	it->code = code;
	it->lost = true;
	it->state = DONE;
}

static int id_cmp(const void *a, const void *b)
{
	return memcmp(a, ((const struct xfer_item *)b)->id, 32);
}

/* One header from source: checked, then its bytes received (or dropped). */
static void take_header(struct engine *e, int source, const char *hdr, size_t len)
{
	struct rd r = { .p = hdr, .len = len };
	uint32_t magic = rd_u32(&r), seq = rd_u32(&r);
	uint8_t id[32] = { 0 };
	if (r.len - r.off >= 32 && !r.bad) {
		memcpy(id, r.p + r.off, 32);
		r.off += 32;
	} else {
		r.bad = true;
	}
	int code = (int)rd_u32(&r);
	size_t tl;
	const char *text = rd_str(&r, &tl);
	uint64_t size = rd_u64(&r);
	struct xfer_item *it = r.bad ? NULL : bsearch(id, e->items, e->n, sizeof(*it), id_cmp);
	struct peer *p = peer_find(e->from, e->nfrom, source);
	char why[256] = "";
	if (r.bad || magic != XFER_MAGIC || size > XFER_MAX_SIZE || (code != 0 && size != 0))
		snprintf(why, sizeof(why), "a malformed header came from node %d", source);
	else if (p == NULL || it == NULL || it->parent != source || it->state != WAIT_HDR)
		snprintf(why, sizeof(why), "node %d sent a program it does not serve to this node "
			 "(sequence %u)", source, seq);
	else if (seq != p->seq)
		snprintf(why, sizeof(why), "node %d sent message %u where %u was due", source, seq,
			 p->seq);
	if (p != NULL && !r.bad && magic == XFER_MAGIC)
		p->seq = seq + 1;
	/* A header too damaged to say how many bytes follow drops none. */
	if (r.bad || magic != XFER_MAGIC || size > XFER_MAX_SIZE)
		size = 0;
	char *buf = size > 0 ? malloc(size) : NULL;
	if (size > 0 && buf == NULL)
		mpi_oom();
	if (why[0] != '\0') {
		/* Its bytes still come: received and dropped, so the next
		 * message from that node is read as what it is. */
		struct junk *j = calloc(1, sizeof(*j));
		if (j == NULL)
			mpi_oom();
		j->buf = buf;
		j->rq = post_data(e, source, buf, size, &j->nrq);
		j->next = e->junk;
		e->junk = j;
		if (it != NULL && it->state == WAIT_HDR)
			item_lost(it, KILN_EPROTO, "%s", why);
		fprintf(stderr, "libkiln-mpi: %s; that message is dropped\n", why);
		return;
	}
	it->code = code;
	it->text = strdup(text != NULL ? text : "");
	it->own_data = buf;
	it->data = buf;
	it->size = size;
	it->rq = post_data(e, source, buf, size, &it->nrq);
	it->state = RECV_DATA;
}

/* True once every request of rq is complete (each is tested once; done
 * ones become MPI_REQUEST_NULL). */
static bool test_all(MPI_Request *rq, int n)
{
	bool all = true;
	for (int i = 0; i < n; i++) {
		int done = 1;
		if (rq[i] != MPI_REQUEST_NULL)
			MPI_Test(&rq[i], &done, MPI_STATUS_IGNORE);
		all = all && done;
	}
	return all;
}

/* One step: a header taken, or received bytes completed. True when it
 * did something. */
static bool step(struct engine *e)
{
	bool did = false;
	int flag = 0;
	MPI_Status st;
	MPI_Iprobe(MPI_ANY_SOURCE, e->tag_hdr, e->comm, &flag, &st);
	if (flag) {
		int count;
		MPI_Get_count(&st, MPI_BYTE, &count);
		char *hdr = malloc((size_t)count + 1);
		if (hdr == NULL)
			mpi_oom();
		MPI_Recv(hdr, count, MPI_BYTE, st.MPI_SOURCE, e->tag_hdr, e->comm, MPI_STATUS_IGNORE);
		take_header(e, st.MPI_SOURCE, hdr, (size_t)count);
		free(hdr);
		did = true;
	}
	for (size_t i = 0; i < e->n; i++) {
		struct xfer_item *it = &e->items[i];
		if (it->state != RECV_DATA)
			continue;
		if (!test_all(it->rq, it->nrq))
			continue;
		it->state = DONE;
		pass_on(e, it);
		if (e->on_complete != NULL)
			e->on_complete(e->ctx, it);
		did = true;
	}
	for (struct junk *j = e->junk; j != NULL; j = j->next) {
		if (j->nrq > 0 && test_all(j->rq, j->nrq))
			j->nrq = 0;
	}
	return did;
}

static bool receiving(const struct engine *e)
{
	for (size_t i = 0; i < e->n; i++)
		if (e->items[i].state != DONE)
			return true;
	return false;
}

/* Cancels the receives of rq not yet complete, and waits for that. */
static void cancel_all(MPI_Request *rq, int n)
{
	for (int i = 0; i < n; i++) {
		if (rq[i] == MPI_REQUEST_NULL)
			continue;
		MPI_Cancel(&rq[i]);
		MPI_Wait(&rq[i], MPI_STATUS_IGNORE);
	}
}

/* At the deadline: what has not arrived is lost, its receives cancelled. */
static void give_up(struct engine *e, double timeout_s)
{
	for (size_t i = 0; i < e->n; i++) {
		struct xfer_item *it = &e->items[i];
		if (it->state == DONE)
			continue;
		cancel_all(it->rq, it->nrq);
		it->nrq = 0;
		free(it->own_data);
		it->own_data = NULL;
		it->data = NULL;
		item_lost(it, KILN_EIO, "%s from node %d within %.0f s (KILN_MPI_TIMEOUT): that node, "
			  "or one before it in the program's tree, stalled",
			  it->state == RECV_DATA ? "the artifact stopped arriving" : "nothing arrived",
			  it->parent, timeout_s);
	}
	for (struct junk *j = e->junk; j != NULL; j = j->next) {
		cancel_all(j->rq, j->nrq);
		j->nrq = 0;
	}
}

void xfer_run(MPI_Comm leaders, int round, struct xfer_item *items, size_t n, double timeout_s,
	      void (*on_complete)(void *ctx, struct xfer_item *item), void *ctx)
{
	struct engine e = { .comm = leaders, .tag_hdr = TAG_BASE + 2 * round,
			    .tag_data = TAG_BASE + 2 * round + 1, .items = items, .n = n,
			    .on_complete = on_complete, .ctx = ctx };
	uint64_t deadline = util_now_ns() + (uint64_t)(timeout_s * 1e9);
	struct timespec ts = { 0, 0 };

	for (size_t i = 0; i < n; i++) {
		peer_add(&e.from, &e.nfrom, items[i].parent);
		for (int k = 0; k < items[i].nkids; k++)
			peer_add(&e.to, &e.nto, items[i].kids[k]);
		items[i].state = items[i].parent < 0 ? DONE : WAIT_HDR;
	}
	for (size_t i = 0; i < n; i++)
		if (items[i].parent < 0)
			pass_on(&e, &items[i]);
	while (receiving(&e) && util_now_ns() < deadline) {
		if (step(&e)) {
			ts.tv_nsec = 0;
			continue;
		}
		/* Nothing to do: a short sleep that grows, as polite_wait's. */
		ts.tv_nsec = ts.tv_nsec == 0 ? 20000 : ts.tv_nsec * 2 > 1000000 ? 1000000
									 : ts.tv_nsec * 2;
		nanosleep(&ts, NULL);
	}
	if (receiving(&e))
		give_up(&e, timeout_s);
	/* The sends: done once the children have taken them; a child that gave
	 * up never will, so they too end at the deadline (their buffers are then
	 * left to MPI, never freed). */
	bool abandoned = false;
	for (size_t i = 0; i < e.s.n; i++) {
		int done = 0;
		ts.tv_nsec = 0;
		for (MPI_Test(&e.s.rq[i], &done, MPI_STATUS_IGNORE); !done && util_now_ns() < deadline;
		     MPI_Test(&e.s.rq[i], &done, MPI_STATUS_IGNORE)) {
			step(&e);   /* junk still drains */
			ts.tv_nsec = ts.tv_nsec == 0 ? 20000 : ts.tv_nsec * 2 > 1000000 ? 1000000
										: ts.tv_nsec * 2;
			nanosleep(&ts, NULL);
		}
		if (!done) {
			MPI_Request_free(&e.s.rq[i]);
			abandoned = true;
		}
	}
	if (!abandoned) {
		for (size_t i = 0; i < e.s.nhdrs; i++)
			free(e.s.hdrs[i]);
	} else {
		for (size_t i = 0; i < n; i++)
			if (items[i].nkids > 0)
				items[i].own_data = NULL;   /* MPI may still read it */
	}
	free(e.s.hdrs);
	free(e.s.rq);
	while (e.junk != NULL) {
		struct junk *j = e.junk;
		e.junk = j->next;
		cancel_all(j->rq, j->nrq);
		free(j->buf);
		free(j->rq);
		free(j);
	}
	free(e.from);
	free(e.to);
}

void xfer_free(struct xfer_item *items, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (items[i].parent < 0)
			continue;   /* the root's fields are borrowed */
		free(items[i].own_data);
		free(items[i].text);
		free(items[i].rq);
		items[i].own_data = NULL;
		items[i].text = NULL;
		items[i].rq = NULL;
	}
}
