/*
 * mpi_demo: a granule's start-up across the nodes of an MPI job with
 * libkiln-mpi. Every rank needs the same generated programs; kiln_mpi_warm
 * builds each once for the whole job (shared out among the nodes), sends the
 * artifacts to the other nodes' daemons, and then every rank's kiln_get is
 * a local hit. Node leaders print what their node did.
 *
 * Usage: mpiexec -n RANKS mpi_demo PROGRAM...   (KILN_SOCKET may hold "%n")
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include <kiln/kiln.h>
#include <kiln/kiln_mpi.h>

/* A small generated stencil program named name, returning a checksum. */
static char *generate(const char *name, int salt)
{
	char *src = malloc(1024);

	snprintf(src, 1024,
		 "/* generated: %s */\n"
		 "static double grid[64][64];\n"
		 "double __program_%s(void) {\n"
		 "  double s = 0;\n"
		 "  for (int i = 1; i < 63; i++) for (int j = 1; j < 63; j++) {\n"
		 "    grid[i][j] = 0.2 * (i + j + %d) + 0.2 * (grid[i-1][j] + grid[i+1][j]);\n"
		 "    s += grid[i][j];\n"
		 "  }\n"
		 "  return s;\n"
		 "}\n", name, name, salt);
	return src;
}

int main(int argc, char **argv)
{
	struct kiln *k;
	struct kiln_warm_report rep;
	int rank, size, n = argc - 1, rc, node_rank;
	MPI_Comm node;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (kiln_mpi_open(MPI_COMM_WORLD, NULL, &k) != KILN_OK) {
		fprintf(stderr, "rank %d: %s\n", rank, kiln_errmsg(NULL));
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	struct kiln_source *src = calloc((size_t)n + 1, sizeof(*src));
	struct kiln_request *req = calloc((size_t)n + 1, sizeof(*req));
	char (*alias)[96] = calloc((size_t)n + 1, sizeof(*alias));
	for (int i = 0; i < n; i++) {
		snprintf(alias[i], sizeof(alias[i]), "mpi-demo:%s", argv[i + 1]);
		src[i] = (struct kiln_source){ .name = "prog.c", .text = generate(argv[i + 1], i) };
		req[i] = (struct kiln_request){ .toolchain = "cc", .sources = &src[i], .nsources = 1,
						.alias = alias[i], .label = argv[i + 1] };
	}

	double t0 = MPI_Wtime();
	rc = kiln_mpi_warm(k, MPI_COMM_WORLD, req, (size_t)n, &rep);
	double dt = MPI_Wtime() - t0;
	if (rc != KILN_OK) {
		fprintf(stderr, "rank %d: kiln_mpi_warm: %s\n", rank, kiln_errmsg(k));
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	/* The leader of each node (as libkiln-mpi sees nodes) reports. */
	const char *ns = getenv("KILN_MPI_NODE_SIZE");
	if (ns && atoi(ns) > 0)
		MPI_Comm_split(MPI_COMM_WORLD, rank / atoi(ns), rank, &node);
	else
		MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
	MPI_Comm_rank(node, &node_rank);
	if (node_rank == 0)
		printf("rank %d (a node leader): warm in %.2f s: %zu built here, %zu received, "
		       "%zu already cached, %zu failed\n", rank, dt, rep.built_here, rep.received,
		       rep.already_cached, rep.failed);
	fflush(stdout);
	MPI_Barrier(MPI_COMM_WORLD);

	/* Every rank now gets every program from its node's daemon: a hit. */
	double sum = 0;
	for (int i = 0; i < n; i++) {
		struct kiln_program *p;
		double (*fn)(void);
		char sym[128];

		if (kiln_get(k, &req[i], &p) != KILN_OK) {
			fprintf(stderr, "rank %d: %s\n", rank, kiln_errmsg(k));
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		snprintf(sym, sizeof(sym), "__program_%s", argv[i + 1]);
		*(void **)&fn = kiln_sym(p, sym);
		sum += fn();
	}
	double all;
	MPI_Reduce(&sum, &all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("all %d ranks loaded and ran the %d programs (checksum %.1f)\n", size, n, all);
	for (int i = 0; i < n; i++)
		free((char *)src[i].text);
	free(src);
	free(req);
	free(alias);
	MPI_Comm_free(&node);
	kiln_close(k);
	MPI_Finalize();
	return 0;
}
