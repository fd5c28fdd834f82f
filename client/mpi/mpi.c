/*
 * libkiln-mpi's entry points (include/kiln/kiln_mpi.h): connecting each
 * rank to its node's daemon, and the collective get and warm.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln_x.h"
#include "mpi_int.h"
#include "sha256.h"
#include "util.h"

/* path with every "%n" replaced by the node index (malloc'd). */
static char *expand_node(const char *path, int node)
{
	size_t len = strlen(path), cap = len + 1, o = 0;
	char num[16], *out;
	int nl = snprintf(num, sizeof(num), "%d", node);

	for (const char *p = path; (p = strstr(p, "%n")) != NULL; p += 2)
		cap += (size_t)nl;
	out = malloc(cap);
	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		if (path[i] == '%' && path[i + 1] == 'n') {
			memcpy(out + o, num, (size_t)nl);
			o += (size_t)nl;
			i++;
			continue;
		}
		out[o++] = path[i];
	}
	out[o] = '\0';
	return out;
}

int kiln_mpi_open(MPI_Comm comm, const char *socket_path, struct kiln **out)
{
	struct topo t;
	const char *path = socket_path ? socket_path : getenv("KILN_SOCKET");
	char *expanded = NULL;
	struct kiln *scratch = NULL, **kp = out ? out : &scratch;
	int rc, worst;

	*kp = NULL;
	topo_make(comm, &t);
	/* A bad argument still takes part in the collectives below. */
	if (!out) {
		rc = kiln_x_fail(KILN_EINVAL, "kiln_mpi_open: out must not be NULL");
	} else if (path && *path) {
		expanded = expand_node(path, t.node_index);
		rc = expanded ? kiln_open(expanded, out) : kiln_x_fail(KILN_ENOMEM, "out of memory");
	} else {
		rc = kiln_open(NULL, out);
	}
	free(expanded);
	topo_free(&t);
	/* Each rank's own result: a node whose kilnd does not answer fails
	 * there, and the others go on (its ranks still take part in the later
	 * collective calls, with k NULL, and get their error there). Counted,
	 * so that every rank can tell. */
	int bad = rc != 0;
	MPI_Allreduce(&bad, &worst, 1, MPI_INT, MPI_SUM, comm);
	if (rc == 0 && worst > 0)
		fprintf(stderr, "libkiln-mpi: %d rank(s) could not connect to their node's kilnd; "
			"the others go on without them\n", worst);
	if (rc != 0 && kp != &scratch)
		*kp = NULL;
	return rc;
}

int kiln_mpi_warm(struct kiln *k, MPI_Comm comm, const struct kiln_request *reqs, size_t n,
		  struct kiln_warm_report *report)
{
	int *status = calloc(n + 1, sizeof(*status));
	int rc;

	if (report)
		memset(report, 0, sizeof(*report));
	if (!status)
		mpi_oom();
	if (!k || (n > 0 && !reqs)) {
		/* Still take part, with nothing, so that the others go on. */
		warm_run(k, comm, NULL, 0, report, status);
		free(status);
		return kiln_x_fail(KILN_EINVAL, "kiln_mpi_warm: k and reqs must not be NULL");
	}
	rc = warm_run(k, comm, reqs, n, report, status);
	free(status);
	return rc;
}

/*
 * The leader's outcome for its node: code, then the key or the error text.
 * Every rank of the node receives the same bytes.
 */
static int share_outcome(MPI_Comm node, bool leader, int *code, char *text, size_t cap)
{
	int len = 0;

	if (leader)
		len = (int)strlen(text) + 1;
	MPI_Bcast(code, 1, MPI_INT, 0, node);
	MPI_Bcast(&len, 1, MPI_INT, 0, node);
	if (len < 1 || (size_t)len > cap)
		return -1;
	MPI_Bcast(text, len, MPI_CHAR, 0, node);
	return 0;
}

int kiln_mpi_get(struct kiln *k, MPI_Comm comm, const struct kiln_request *req,
		 struct kiln_program **out)
{
	enum { TEXT_MAX = 65536 };
	char *text;
	struct kiln_warm_report rep;
	struct topo t;
	uint8_t mine[32] = { 0 }, theirs[32];
	char *skel;
	int rc, code = 0, same;
	bool bad = !k || !req || !out;

	if (out)
		*out = NULL;
	/* Built once for the job, and cached on every node. A rank with bad
	 * arguments takes part with nothing, so that no other rank waits. */
	rc = kiln_mpi_warm(k, comm, bad ? NULL : req, bad ? 0 : 1, &rep);
	if (bad)
		rc = kiln_x_fail(KILN_EINVAL, "kiln_mpi_get: k, req and out must not be NULL");
	text = malloc(TEXT_MAX);
	if (!text)
		MPI_Abort(comm, 1); /* the ranks of the node would wait for us */
	topo_make(comm, &t);
	skel = bad ? NULL : kiln_x_skeleton(req);
	if (skel)
		sha256_buf(skel, strlen(skel), mine);
	free(skel);
	memcpy(theirs, mine, 32);
	MPI_Bcast(theirs, 32, MPI_BYTE, 0, t.node);
	same = memcmp(theirs, mine, 32) == 0;
	if (t.leader) {
		struct kiln_program *p = NULL;

		/* A failed warm already carries the diagnostics every rank shares. */
		code = rc != 0 ? rc : kiln_get(k, req, &p);
		snprintf(text, TEXT_MAX, "%s", code == 0 ? kiln_program_key(p) : kiln_errmsg(k));
		if (out)
			*out = p;
	}
	if (share_outcome(t.node, t.leader, &code, text, TEXT_MAX) != 0)
		code = kiln_x_fail(KILN_EPROTO, "the node leader's answer did not arrive");
	topo_free(&t);
	if (t.leader)
		rc = code != 0 ? kiln_x_fail(code, "%s", text) : KILN_OK;
	else if (bad)
		rc = kiln_x_fail(KILN_EINVAL, "kiln_mpi_get: k, req and out must not be NULL");
	else if (!same)
		rc = kiln_get(k, req, out);
	else if (code != 0)
		rc = kiln_x_fail(code, "%s", text);
	else
		rc = kiln_x_lookup_key(k, text, req->alias, out);
	free(text);
	return rc;
}
