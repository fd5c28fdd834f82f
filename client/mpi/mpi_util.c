/*
 * libkiln-mpi's plumbing: the node topology, byte buffers, and the packing
 * of requests that travel from ranks to their node leader.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln_x.h"
#include "mpi_int.h"
#include "util.h"

int mpi_count(size_t n, const char *what, int *out)
{
	if (n > INT_MAX) {
		char sz[32];
		return kiln_x_fail(KILN_EINVAL, "%s is %s, above what one MPI message holds (2 GiB)",
				   what, util_format_size(n, sz, sizeof(sz)));
	}
	*out = (int)n;
	return 0;
}

void mpi_oom(void)
{
	fprintf(stderr, "libkiln-mpi: out of memory in a collective step; aborting the job, "
		"since the other ranks would wait for this one forever\n");
	MPI_Abort(MPI_COMM_WORLD, 12);
	abort(); /* MPI_Abort does not return, but is not declared so */
}

/* $KILN_MPI_NODE_SIZE as a positive number, or 0 when unset or invalid. */
static int node_size_env(void)
{
	const char *s = getenv("KILN_MPI_NODE_SIZE");
	char *end;
	long v;

	if (!s || !*s)
		return 0;
	v = strtol(s, &end, 10);
	return *end == '\0' && v > 0 && v <= INT_MAX ? (int)v : 0;
}

/*
 * The topology is cached on the caller's communicator (an MPI attribute), so
 * that only the first call on it splits communicators: the others reuse the
 * node and leader communicators. The attribute's delete callback frees them
 * with the communicator (or at MPI_Finalize).
 */
static int topo_key = MPI_KEYVAL_INVALID;

static int topo_delete(MPI_Comm comm, int key, void *attr, void *extra)
{
	struct topo *t = attr;
	(void)comm;
	(void)key;
	(void)extra;
	t->cached = false;
	topo_free(t);
	free(t);
	return MPI_SUCCESS;
}

static int topo_split(MPI_Comm comm, struct topo *t, int per_node);

int topo_make(MPI_Comm comm, struct topo *t)
{
	int per_node = node_size_env(), flag = 0;
	struct topo *cached = NULL;

	if (topo_key == MPI_KEYVAL_INVALID)
		MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, topo_delete, &topo_key, NULL);
	MPI_Comm_get_attr(comm, topo_key, &cached, &flag);
	/* Every rank decides alike: the attribute is set on all or none, and
	 * the node size is the job's. */
	if (flag && cached != NULL && cached->per_node == per_node) {
		*t = *cached;
		return 0;
	}
	if (flag)
		MPI_Comm_delete_attr(comm, topo_key);
	topo_split(comm, t, per_node);
	cached = malloc(sizeof(*cached));
	if (cached != NULL) {
		*cached = *t;
		cached->cached = true;
		t->cached = true;
		MPI_Comm_set_attr(comm, topo_key, cached);
	}
	return 0;
}

static int topo_split(MPI_Comm comm, struct topo *t, int per_node)
{
	int info[2];

	memset(t, 0, sizeof(*t));
	t->per_node = per_node;
	t->node = MPI_COMM_NULL;
	t->leaders = MPI_COMM_NULL;
	MPI_Comm_rank(comm, &t->rank);
	MPI_Comm_size(comm, &t->size);
	if (per_node > 0)
		MPI_Comm_split(comm, t->rank / per_node, t->rank, &t->node);
	else
		MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, t->rank, MPI_INFO_NULL, &t->node);
	MPI_Comm_rank(t->node, &t->node_rank);
	MPI_Comm_size(t->node, &t->node_size);
	t->leader = t->node_rank == 0;
	MPI_Comm_split(comm, t->leader ? 0 : MPI_UNDEFINED, t->rank, &t->leaders);
	if (t->leader) {
		MPI_Comm_rank(t->leaders, &info[0]);
		MPI_Comm_size(t->leaders, &info[1]);
	}
	MPI_Bcast(info, 2, MPI_INT, 0, t->node);
	t->node_index = info[0];
	t->nnodes = info[1];
	return 0;
}

void topo_free(struct topo *t)
{
	if (t->cached)
		return;   /* the communicator's attribute owns them */
	if (t->leaders != MPI_COMM_NULL)
		MPI_Comm_free(&t->leaders);
	if (t->node != MPI_COMM_NULL)
		MPI_Comm_free(&t->node);
}

void buf_put(struct buf *b, const void *p, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *d;

		while (cap < b->len + n)
			cap *= 2;
		d = realloc(b->data, cap);
		if (!d) {
			b->oom = true;
			return;
		}
		b->data = d;
		b->cap = cap;
	}
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
}

void buf_u32(struct buf *b, uint32_t v)
{
	buf_put(b, &v, sizeof(v));
}

void buf_u64(struct buf *b, uint64_t v)
{
	buf_put(b, &v, sizeof(v));
}

void buf_str(struct buf *b, const char *s, size_t len)
{
	if (!s) {
		buf_u32(b, UINT32_MAX);
		return;
	}
	if (len >= UINT32_MAX) {
		b->oom = true;
		return;
	}
	buf_u32(b, (uint32_t)len);
	buf_put(b, s, len);
	buf_put(b, "", 1);
}

void buf_free(struct buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

static const char *rd_take(struct rd *r, size_t n)
{
	const char *p;

	if (r->bad || r->len - r->off < n) {
		r->bad = true;
		return NULL;
	}
	p = r->p + r->off;
	r->off += n;
	return p;
}

uint32_t rd_u32(struct rd *r)
{
	const char *p = rd_take(r, sizeof(uint32_t));
	uint32_t v = 0;

	if (p)
		memcpy(&v, p, sizeof(v));
	return v;
}

uint64_t rd_u64(struct rd *r)
{
	const char *p = rd_take(r, sizeof(uint64_t));
	uint64_t v = 0;

	if (p)
		memcpy(&v, p, sizeof(v));
	return v;
}

const char *rd_str(struct rd *r, size_t *len)
{
	uint32_t n = rd_u32(r);
	const char *p;

	*len = 0;
	if (r->bad || n == UINT32_MAX)
		return NULL;
	p = rd_take(r, (size_t)n + 1);
	if (!p || p[n] != '\0') {
		r->bad = true;
		return NULL;
	}
	*len = n;
	return p;
}

void pack_request(struct buf *b, const struct kiln_request *req)
{
	size_t i;

	buf_str(b, req->toolchain, req->toolchain ? strlen(req->toolchain) : 0);
	buf_str(b, req->output, req->output ? strlen(req->output) : 0);
	buf_str(b, req->label, req->label ? strlen(req->label) : 0);
	buf_str(b, req->host_compiler, req->host_compiler ? strlen(req->host_compiler) : 0);
	buf_u32(b, (uint32_t)req->nargs);
	for (i = 0; i < req->nargs; i++)
		buf_str(b, req->args[i], strlen(req->args[i]));
	buf_u32(b, (uint32_t)req->nsources);
	for (i = 0; i < req->nsources; i++) {
		const struct kiln_source *s = &req->sources[i];

		buf_str(b, s->name, strlen(s->name));
		if (s->path) {
			buf_str(b, NULL, 0);
			buf_str(b, s->path, strlen(s->path));
		} else {
			buf_str(b, s->text, s->len ? s->len : strlen(s->text));
			buf_str(b, NULL, 0);
		}
	}
}

void unpack_free(struct kiln_request *req)
{
	free((void *)req->args);
	free((void *)req->sources);
	memset(req, 0, sizeof(*req));
}

int unpack_request(struct rd *r, struct kiln_request *req)
{
	const char **args = NULL;
	struct kiln_source *src = NULL;
	size_t len, i, n;

	memset(req, 0, sizeof(*req));
	req->toolchain = rd_str(r, &len);
	req->output = rd_str(r, &len);
	req->label = rd_str(r, &len);
	req->host_compiler = rd_str(r, &len);
	n = rd_u32(r);
	if (r->bad || n > 65536 || (n && !(args = calloc(n, sizeof(*args)))))
		goto bad;
	for (i = 0; i < n; i++)
		args[i] = rd_str(r, &len);
	req->args = args;
	req->nargs = n;
	n = rd_u32(r);
	if (r->bad || n == 0 || n > 65536 || !(src = calloc(n, sizeof(*src))))
		goto bad;
	for (i = 0; i < n; i++) {
		src[i].name = rd_str(r, &len);
		src[i].text = rd_str(r, &src[i].len);
		src[i].path = rd_str(r, &len);
	}
	req->sources = src;
	req->nsources = n;
	if (r->bad)
		goto bad;
	return 0;
bad:
	free(args);
	free(src);
	memset(req, 0, sizeof(*req));
	r->bad = true;
	return -1;
}

/* One sleep of a polite wait: 20 us, doubling up to 1 ms. A quick answer
 * stays quick; a long build costs a thousand wake-ups a second, not a core. */
static void backoff(struct timespec *ts)
{
	ts->tv_nsec = ts->tv_nsec == 0 ? 20000 : ts->tv_nsec * 2;
	if (ts->tv_nsec > 1000000)
		ts->tv_nsec = 1000000;
	nanosleep(ts, NULL);
}

void polite_wait(MPI_Request *rq)
{
	struct timespec ts = { 0, 0 };
	int done = 0;

	for (MPI_Test(rq, &done, MPI_STATUS_IGNORE); !done; MPI_Test(rq, &done, MPI_STATUS_IGNORE))
		backoff(&ts);
}

void polite_barrier(MPI_Comm comm)
{
	MPI_Request rq;

	MPI_Ibarrier(comm, &rq);
	polite_wait(&rq);
}

void polite_probe(int source, int tag, MPI_Comm comm, MPI_Status *st)
{
	struct timespec ts = { 0, 0 };
	int flag = 0;

	for (MPI_Iprobe(source, tag, comm, &flag, st); !flag; MPI_Iprobe(source, tag, comm, &flag, st))
		backoff(&ts);
}
