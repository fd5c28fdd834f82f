/*
 * Micro-benchmarks of the warm paths, each next to its physical baseline in
 * the same run (bench/README in docs/performance.md):
 *   1. get+load of a cached program in a fresh process, against one Unix
 *      socket round trip plus a bare dlopen of the same file;
 *   2. a repeated kiln_lookup in one process, against dlopen(RTLD_NOLOAD).
 * Usage: microbench SOCKET [ROUNDS]. kilnd must be running on SOCKET.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <kiln/kiln.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *const program =
	"double __program_bench(const double *a, int n)\n"
	"{ double s = 0; for (int i = 0; i < n; i++) s += a[i]; return s; }\n";

static int get_program(struct kiln *k, struct kiln_program **p)
{
	struct kiln_source src = { .name = "bench.c", .text = program };
	const char *args[] = { "-O2" };
	struct kiln_request req = { .args = args, .nargs = 1, .sources = &src, .nsources = 1,
				    .alias = "bench:sum", .label = "bench_sum" };
	return kiln_get(k, &req, p);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Runs fn in a fresh child process `rounds` times; returns the median seconds
 * the child reported for the measured part. */
static double median_in_children(int rounds, double (*fn)(const char *), const char *arg)
{
	double *t = calloc((size_t)rounds, sizeof(*t));
	for (int i = 0; i < rounds; i++) {
		int fds[2];
		if (pipe(fds) != 0)
			exit(1);
		pid_t pid = fork();
		if (pid == 0) {
			double v = fn(arg);
			if (write(fds[1], &v, sizeof(v)) != sizeof(v))
				_exit(1);
			_exit(0);
		}
		close(fds[1]);
		if (read(fds[0], &t[i], sizeof(t[i])) != sizeof(t[i]))
			t[i] = -1;
		close(fds[0]);
		waitpid(pid, NULL, 0);
	}
	qsort(t, (size_t)rounds, sizeof(*t), cmp_double);
	double m = t[rounds / 2];
	free(t);
	return m;
}

static double warm_get(const char *sock)
{
	double t0 = now_s();
	struct kiln *k;
	struct kiln_program *p;
	if (kiln_open(sock, &k) != 0 || get_program(k, &p) != 0 || kiln_sym(p, "__program_bench") == NULL)
		return -1;
	double t = now_s() - t0;
	kiln_close(k);
	return t;
}

static const char *artifact_path;

/* The baseline: one round trip of a 200-byte message on a Unix socket pair
 * served by another process, then dlopen+dlsym of the same artifact. */
static double bare(const char *unused)
{
	int sv[2];
	char buf[200] = { 0 };
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		close(sv[0]);
		if (read(sv[1], buf, sizeof(buf)) > 0 && write(sv[1], buf, sizeof(buf)) < 0)
			_exit(1);
		_exit(0);
	}
	close(sv[1]);
	double t0 = now_s();
	if (write(sv[0], buf, sizeof(buf)) != sizeof(buf) || read(sv[0], buf, sizeof(buf)) <= 0)
		return -1;
	void *h = dlopen(artifact_path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL || dlsym(h, "__program_bench") == NULL)
		return -1;
	double t = now_s() - t0;
	waitpid(pid, NULL, 0);
	return t;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: microbench SOCKET [ROUNDS]\n");
		return 2;
	}
	const char *sock = argv[1];
	int rounds = argc > 2 ? atoi(argv[2]) : 51;
	struct kiln *k;
	struct kiln_program *p;
	if (kiln_open(sock, &k) != 0 || get_program(k, &p) != 0) {
		fprintf(stderr, "microbench: %s\n", kiln_errmsg(NULL));
		return 1;
	}
	artifact_path = kiln_program_path(p);

	double kiln_t = median_in_children(rounds, warm_get, sock);
	double bare_t = median_in_children(rounds, bare, NULL);
	printf("warm get+load, fresh process : %8.1f us (median of %d)\n", kiln_t * 1e6, rounds);
	printf("baseline round trip + dlopen : %8.1f us\n", bare_t * 1e6);
	printf("ratio                        : %8.2f\n", kiln_t / bare_t);

	const int n = 2000000;
	struct kiln_program *q;
	double t0 = now_s();
	for (int i = 0; i < n; i++) {
		if (kiln_lookup(k, "bench:sum", &q) != 0)
			return 1;
	}
	double lookup_ns = (now_s() - t0) / n * 1e9;
	t0 = now_s();
	for (int i = 0; i < n; i++) {
		void *h = dlopen(artifact_path, RTLD_NOW | RTLD_NOLOAD);
		if (h == NULL)
			return 1;
		dlclose(h);
	}
	double noload_ns = (now_s() - t0) / n * 1e9;
	printf("repeated kiln_lookup         : %8.1f ns/call\n", lookup_ns);
	printf("dlopen(RTLD_NOLOAD)+dlclose  : %8.1f ns/call\n", noload_ns);
	kiln_close(k);
	return 0;
}
