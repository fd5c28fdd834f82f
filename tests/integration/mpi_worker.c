/*
 * One MPI rank of the libkiln-mpi tests (test_mpi.c) and of bench/mpi: run
 * under mpiexec with KILN_SOCKET naming one daemon per simulated node ("%n")
 * and KILN_MPI_NODE_SIZE. Each rank checks what it can see itself (values of
 * the loaded programs, return codes, the errors' text) and writes
 * "name value" lines to OUTDIR/rank-R.txt; the test reads the daemons'
 * counters. Exit status 0 when this rank's checks passed.
 *
 *   mpi_worker same N OUTDIR       N programs, the same on every rank: warm, then get each
 *   mpi_worker mixed N U OUTDIR    N shared programs plus U unique to each rank
 *   mpi_worker herd OUTDIR         kiln_mpi_get of one program on every rank
 *   mpi_worker fail OUTDIR         3 good programs and 1 with a compile error
 *   mpi_worker badargs OUTDIR      rank 1 passes NULL to every call; the others must not hang
 *   mpi_worker solo N OUTDIR       no coordination: every rank gets its N programs
 *                                  from its node's daemon (the baseline of bench/mpi)
 *   mpi_worker fault N NODE OUTDIR as same, but NODE's kilnd fails during the warm
 *                                  (the test arranges how): the ranks of the other
 *                                  nodes must get every program, NODE's may not
 *
 * Every rank also counts what libkiln-mpi sends between leaders (through
 * the MPI profiling interface): "xfer_headers" (one per copy of a program
 * sent) and "xfer_bytes".
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include <kiln/kiln.h>
#include <kiln/kiln_mpi.h>

static int rank, size;
static FILE *out;
static int failures;

/* libkiln-mpi's transfer tags (client/mpi/mpi_xfer.c): headers on even
 * offsets from TAG_BASE, bytes on odd ones, two per round. Before the
 * trees (kiln 0.1's fan-out, for bench/mpi's "before" column) one tag
 * carried a header and then the bytes of each copy. */
#define XFER_TAG_BASE 0x6b70
#define FANOUT_TAG 0x6b6c
static long long xfer_headers, xfer_bytes, xfer_recv_bytes, fanout_msgs;

static long long bytes_of(int count, MPI_Datatype type)
{
	int tsize = 1;
	MPI_Type_size(type, &tsize);
	return (long long)count * tsize;
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
	      MPI_Request *req)
{
	if (tag >= XFER_TAG_BASE && tag < XFER_TAG_BASE + 8) {
		if ((tag - XFER_TAG_BASE) % 2 == 0)
			xfer_headers++;
		xfer_bytes += bytes_of(count, type);   /* headers (metadata) too */
	} else if (tag == FANOUT_TAG) {
		fanout_msgs++;
		xfer_bytes += bytes_of(count, type);
	}
	return PMPI_Isend(buf, count, type, dest, tag, comm, req);
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
	      MPI_Request *req)
{
	if (tag >= XFER_TAG_BASE && tag < XFER_TAG_BASE + 8)
		xfer_recv_bytes += bytes_of(count, type);
	return PMPI_Irecv(buf, count, type, source, tag, comm, req);
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
	     MPI_Status *st)
{
	if (tag == FANOUT_TAG || (tag >= XFER_TAG_BASE && tag < XFER_TAG_BASE + 8))
		xfer_recv_bytes += bytes_of(count, type);
	return PMPI_Recv(buf, count, type, source, tag, comm, st);
}

static void check(int ok, const char *fmt, ...)
{
	va_list ap;

	if (ok)
		return;
	failures++;
	fprintf(out, "FAIL ");
	va_start(ap, fmt);
	vfprintf(out, fmt, ap);
	va_end(ap);
	fprintf(out, "\n");
	fflush(out);
}

struct prog {
	char *text;
	char label[64];
	char alias[64];
	struct kiln_source src;
	struct kiln_request req;
	int value;
};

/*
 * A program whose kiln_test_value() returns value; tag makes it unique.
 * $KILN_WORKER_FUNCS adds that many stencil-like functions compiled with
 * -O2, for compiles as long as real generated programs (bench/mpi), and
 * $KILN_WORKER_PAD that many bytes of read-only data, for artifacts of a
 * given size.
 */
static void prog_make(struct prog *p, int value, const char *tag)
{
	static const char *const o2[] = { "-O2" };
	const char *env = getenv("KILN_WORKER_FUNCS");
	int funcs = env ? atoi(env) : 0;
	size_t cap = 512 + (size_t)(funcs > 0 ? funcs : 0) * 256, off;

	p->text = malloc(cap);
	const char *pad = getenv("KILN_WORKER_PAD");
	off = (size_t)snprintf(p->text, cap, "/* %s */\nint kiln_test_value(void) { return %d; }\n",
			       tag, value);
	if (pad != NULL && atol(pad) > 0)
		off += (size_t)snprintf(p->text + off, cap - off,
					"const unsigned char kiln_pad[%ld] = { %d };\n", atol(pad),
					value % 250 + 1);
	for (int i = 0; i < funcs; i++)
		off += (size_t)snprintf(p->text + off, cap - off,
					"void st_%d(double *o, const double *a, int n) { for (int j = 1; "
					"j < n - 1; j++) o[j] = %d.5 * a[j] - 0.25 * (a[j - 1] + a[j + 1]) "
					"+ o[j] * a[j] / (1.0 + a[j] * a[j]); }\n", i, i % 7);
	snprintf(p->label, sizeof(p->label), "%s", tag);
	snprintf(p->alias, sizeof(p->alias), "mpi-%s", tag);
	p->src = (struct kiln_source){ .name = "prog.c", .text = p->text };
	p->req = (struct kiln_request){ .toolchain = "cc", .sources = &p->src, .nsources = 1,
					.label = p->label, .alias = p->alias,
					.args = funcs > 0 ? o2 : NULL, .nargs = funcs > 0 ? 1 : 0 };
	p->value = value;
}

static void prog_broken(struct prog *p)
{
	p->text = strdup("int kiln_test_value(void) { return undeclared_thing; }\n");
	snprintf(p->label, sizeof(p->label), "broken");
	p->src = (struct kiln_source){ .name = "prog.c", .text = p->text };
	p->req = (struct kiln_request){ .toolchain = "cc", .sources = &p->src, .nsources = 1,
					.label = p->label };
}

/* Loads p with kiln_get and calls it. */
static void get_and_call(struct kiln *k, struct prog *p)
{
	struct kiln_program *kp;
	int rc = kiln_get(k, &p->req, &kp);
	int (*fn)(void);

	check(rc == KILN_OK, "get %s: %s", p->label, kiln_errmsg(k));
	if (rc != KILN_OK)
		return;
	*(void **)&fn = kiln_sym(kp, "kiln_test_value");
	check(fn && fn() == p->value, "%s returned %d, not %d", p->label, fn ? fn() : -1, p->value);
}

static void report_out(const char *what, const struct kiln_warm_report *r, int rc, double s)
{
	fprintf(out, "%s_rc %d\n%s_built_here %zu\n%s_received %zu\n%s_cached %zu\n%s_failed %zu\n"
		"%s_wall_s %.3f\n",
		what, rc, what, r->built_here, what, r->received, what, r->already_cached, what,
		r->failed, what, s);
}

/* Every rank's kiln_errmsg text equal to rank 0's? (collective) */
static int same_everywhere(const char *msg)
{
	int len = (int)strlen(msg) + 1, maxlen, ok, all;
	char *root;

	MPI_Allreduce(&len, &maxlen, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	root = calloc((size_t)maxlen, 1);
	if (rank == 0)
		memcpy(root, msg, (size_t)len);
	MPI_Bcast(root, maxlen, MPI_CHAR, 0, MPI_COMM_WORLD);
	ok = strcmp(root, msg) == 0;
	MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
	free(root);
	return all;
}

static void run_warm(struct kiln *k, struct prog *progs, int n)
{
	struct kiln_request *reqs = calloc((size_t)n + 1, sizeof(*reqs));
	struct kiln_warm_report rep;
	double t0;
	int rc;

	for (int i = 0; i < n; i++)
		reqs[i] = progs[i].req;
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	rc = kiln_mpi_warm(k, MPI_COMM_WORLD, reqs, (size_t)n, &rep);
	MPI_Barrier(MPI_COMM_WORLD);
	report_out("warm", &rep, rc, MPI_Wtime() - t0);
	check(rc == KILN_OK, "kiln_mpi_warm: %s", kiln_errmsg(k));
	check(rep.failed == 0, "warm report: %zu failed", rep.failed);
	/* The aliases resolve at the daemon (nothing is loaded here yet). */
	for (int i = 0; i < n; i++) {
		struct kiln_program *kp;

		/* The call first: kiln_errmsg's text is valid only after it. */
		int lrc = kiln_lookup(k, progs[i].alias, &kp);
		check(lrc == KILN_OK, "lookup of %s after warm: %s", progs[i].alias, kiln_errmsg(k));
	}
	for (int i = 0; i < n; i++)
		get_and_call(k, &progs[i]);
	free(reqs);
}

int main(int argc, char **argv)
{
	struct kiln *k = NULL;
	struct kiln_stats st;
	struct prog *progs = NULL;
	const char *mode = argc > 1 ? argv[1] : "";
	const char *dir = argv[argc - 1];
	char path[4096], tag[64];
	int n = 0, u = 0, rc;

	/* KILN_TEST_MPI_THREAD=funneled: as codes with OpenMP start MPI, which
	 * lets libkiln-mpi import on a thread of its own. */
	const char *tl = getenv("KILN_TEST_MPI_THREAD");
	int provided = MPI_THREAD_SINGLE;
	if (tl != NULL && strcmp(tl, "funneled") == 0)
		MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
	else
		MPI_Init(&argc, &argv);
	MPI_Query_thread(&provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	snprintf(path, sizeof(path), "%s/rank-%d.txt", dir, rank);
	out = fopen(path, "w");
	if (!out)
		MPI_Abort(MPI_COMM_WORLD, 2);
	fprintf(out, "thread_level %d\n", provided);
	rc = kiln_mpi_open(MPI_COMM_WORLD, NULL, &k);
	fprintf(out, "first_open_rc %d\n", rc);
	/* In fault mode a node's kilnd may be down from the start: its ranks
	 * take part in the collectives with k NULL. */
	if (strcmp(mode, "fault") != 0)
		check(rc == KILN_OK, "kiln_mpi_open: %s", kiln_errmsg(NULL));
	if (rc != KILN_OK && strcmp(mode, "fault") != 0)
		goto done;

	if (strcmp(mode, "fault") == 0) {
		const char *ns = getenv("KILN_MPI_NODE_SIZE");
		int node = rank / (ns != NULL && atoi(ns) > 0 ? atoi(ns) : 1);
		bool dead = node == atoi(argv[3]);
		struct kiln_warm_report rep;
		check(kiln_mpi_set_timeout(-1) == KILN_EINVAL, "kiln_mpi_set_timeout(-1) was taken");
		check(kiln_mpi_set_timeout(120) == KILN_OK, "kiln_mpi_set_timeout(120) failed");
		n = atoi(argv[2]);
		progs = calloc((size_t)n + 1, sizeof(*progs));
		struct kiln_request *reqs = calloc((size_t)n + 1, sizeof(*reqs));
		for (int i = 0; i < n; i++) {
			snprintf(tag, sizeof(tag), "fault-%d", i);
			prog_make(&progs[i], 2000 + i, tag);
			reqs[i] = progs[i].req;
		}
		rc = kiln_mpi_warm(k, MPI_COMM_WORLD, reqs, (size_t)n, &rep);
		report_out("warm", &rep, rc, 0);
		fprintf(out, "node %d\ndead %d\n", node, dead);
		check(dead || k != NULL, "kiln_mpi_open failed on a healthy node");
		if (!dead) {
			check(rc == KILN_OK, "kiln_mpi_warm on a healthy node: %s", kiln_errmsg(k));
			for (int i = 0; i < n; i++)
				get_and_call(k, &progs[i]);
		} else if (rc != KILN_OK) {
			fprintf(out, "dead_node_error %s\n", kiln_errmsg(k));
		}
		free(reqs);
	} else if (strcmp(mode, "same") == 0 || strcmp(mode, "mixed") == 0 || strcmp(mode, "solo") == 0) {
		n = atoi(argv[2]);
		u = strcmp(mode, "mixed") == 0 ? atoi(argv[3]) : 0;
		progs = calloc((size_t)(n + u) + 1, sizeof(*progs));
		for (int i = 0; i < n; i++) {
			snprintf(tag, sizeof(tag), "shared-%d", i);
			prog_make(&progs[i], 1000 + i, tag);
		}
		for (int j = 0; j < u; j++) {
			snprintf(tag, sizeof(tag), "rank%d-%d", rank, j);
			prog_make(&progs[n + j], 100000 + rank * 100 + j, tag);
		}
		if (strcmp(mode, "solo") == 0) {
			struct kiln_request *reqs = calloc((size_t)n + 1, sizeof(*reqs));
			struct kiln_program **ps = calloc((size_t)n + 1, sizeof(*ps));
			double t0;

			for (int i = 0; i < n; i++)
				reqs[i] = progs[i].req;
			MPI_Barrier(MPI_COMM_WORLD);
			t0 = MPI_Wtime();
			rc = kiln_get_many(k, reqs, (size_t)n, ps, NULL);
			MPI_Barrier(MPI_COMM_WORLD);
			fprintf(out, "solo_rc %d\nsolo_wall_s %.3f\n", rc, MPI_Wtime() - t0);
			check(rc == KILN_OK, "kiln_get_many: %s", kiln_errmsg(k));
			for (int i = 0; i < n; i++)
				get_and_call(k, &progs[i]);
			free(reqs);
			free(ps);
		} else {
			run_warm(k, progs, n + u);
		}
	} else if (strcmp(mode, "herd") == 0) {
		struct prog p;
		struct kiln_program *kp = NULL;
		int (*fn)(void) = NULL;

		prog_make(&p, 4242, "herd");
		MPI_Barrier(MPI_COMM_WORLD);
		rc = kiln_mpi_get(k, MPI_COMM_WORLD, &p.req, &kp);
		check(rc == KILN_OK, "kiln_mpi_get: %s", kiln_errmsg(k));
		if (kp)
			*(void **)&fn = kiln_sym(kp, "kiln_test_value");
		check(fn && fn() == 4242, "the herd program returned %d", fn ? fn() : -1);
		/* The alias now resolves in this process without IPC. */
		int lrc = kiln_lookup(k, p.alias, &kp);
		check(lrc == KILN_OK, "lookup of the alias: %s", kiln_errmsg(k));
		free(p.text);
	} else if (strcmp(mode, "badargs") == 0) {
		struct prog p;
		struct kiln_program *kp = NULL;
		struct kiln_warm_report rep;
		bool odd = rank == 1;

		prog_make(&p, 31337, "badargs");
		rc = kiln_mpi_get(k, MPI_COMM_WORLD, odd ? NULL : &p.req, &kp);
		fprintf(out, "get_rc %d\n", rc);
		check(odd ? rc == KILN_EINVAL : rc == KILN_OK, "kiln_mpi_get returned %d: %s", rc,
		      kiln_errmsg(k));
		rc = kiln_mpi_warm(odd ? NULL : k, MPI_COMM_WORLD, &p.req, 1, &rep);
		fprintf(out, "warm_rc %d\n", rc);
		check(odd ? rc == KILN_EINVAL : rc == KILN_OK, "kiln_mpi_warm returned %d: %s", rc,
		      kiln_errmsg(k));
		struct kiln *k2 = NULL;
		rc = kiln_mpi_open(MPI_COMM_WORLD, NULL, odd ? NULL : &k2);
		fprintf(out, "open_rc %d\n", rc);
		/* Each rank's own result: rank 1's bad argument fails there only. */
		check(odd ? rc == KILN_EINVAL : rc == KILN_OK, "kiln_mpi_open returned %d", rc);
		check(odd || k2 != NULL, "kiln_mpi_open left no handle on a good rank");
		kiln_close(k2);
		free(p.text);
	} else if (strcmp(mode, "fail") == 0) {
		struct prog p[4];
		struct kiln_request reqs[4];
		struct kiln_program *kp = NULL;
		const char *msg;

		for (int i = 0; i < 3; i++) {
			snprintf(tag, sizeof(tag), "good-%d", i);
			prog_make(&p[i], 7000 + i, tag);
		}
		prog_broken(&p[3]);
		/* The broken one first on odd ranks: the order must not matter. */
		for (int i = 0; i < 4; i++)
			reqs[i] = p[(rank % 2) ? 3 - i : i].req;
		rc = kiln_mpi_warm(k, MPI_COMM_WORLD, reqs, 4, NULL);
		msg = kiln_errmsg(k);
		fprintf(out, "warm_rc %d\n", rc);
		check(rc == KILN_EBUILD, "kiln_mpi_warm returned %d (%s), not KILN_EBUILD", rc, msg);
		check(strstr(msg, "undeclared_thing") != NULL, "the diagnostics lack the error: %s", msg);
		check(same_everywhere(msg), "the warm error text differs between ranks");
		for (int i = 0; i < 3; i++)
			get_and_call(k, &p[i]);
		rc = kiln_mpi_get(k, MPI_COMM_WORLD, &p[3].req, &kp);
		msg = kiln_errmsg(k);
		fprintf(out, "get_rc %d\n", rc);
		check(rc == KILN_EBUILD && kp == NULL, "kiln_mpi_get of the broken program returned %d", rc);
		check(strstr(msg, "undeclared_thing") != NULL, "get diagnostics lack the error: %s", msg);
		check(same_everywhere(msg), "the get error text differs between ranks");
		for (int i = 0; i < 4; i++)
			free(p[i].text);
	} else {
		check(0, "unknown mode %s", mode);
	}
	kiln_get_stats(k, &st);
	fprintf(out, "requests %llu\nloads %llu\n", (unsigned long long)st.requests,
		(unsigned long long)st.loads);
	/* The fan-out sent a header and one chunk (up to 16 MiB) per copy. */
	fprintf(out, "xfer_headers %lld\nxfer_bytes %lld\nxfer_recv_bytes %lld\n",
		xfer_headers + fanout_msgs / 2, xfer_bytes, xfer_recv_bytes);
done:
	kiln_close(k);
	fprintf(out, "failures %d\n", failures);
	fclose(out);
	for (int i = 0; progs && i < n + u; i++)
		free(progs[i].text);
	free(progs);
	MPI_Finalize();
	return failures ? 1 : 0;
}
