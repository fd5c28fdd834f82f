/*
 * Micro-benchmarks of the warm paths, each next to its physical baseline in
 * the same run (bench/README in docs/performance.md):
 *   1. get+load of a cached program in a fresh process, against one Unix
 *      socket round trip plus a bare dlopen of the same file (the issue's
 *      limit), and against a connect to a listening server, one round trip
 *      and the dlopen (what any fresh process that asks a daemon pays);
 *   2. a repeated kiln_lookup in one process, against dlopen(RTLD_NOLOAD).
 * Usage: microbench SOCKET [ROUNDS] [--lookups N] [--json]. kilnd must be
 * running on SOCKET. This process never loads the program itself: a child
 * gets it once (so it is cached), then ROUNDS fresh children per side, the
 * two sides alternating, each load it for the first time in their life.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
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

/* Runs fn in a fresh child process; returns the seconds the child reported
 * for the measured part (-1 on failure). */
static double in_child(double (*fn)(const char *), const char *arg)
{
	int fds[2];
	double t = -1;
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
	if (read(fds[0], &t, sizeof(t)) != sizeof(t))
		t = -1;
	close(fds[0]);
	waitpid(pid, NULL, 0);
	return t;
}

struct dist {
	double min, median, p90, max;
};

static struct dist summarize(double *t, int n)
{
	qsort(t, (size_t)n, sizeof(*t), cmp_double);
	struct dist d = { t[0], t[n / 2], t[(int)(n * 0.9)], t[n - 1] };
	return d;
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

/* The echo server of the second baseline: accepts, echoes 200 bytes,
 * closes, until killed. Its path; NULL when it cannot listen. */
static char echo_path[108];

static pid_t echo_server_start(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(echo_path, sizeof(echo_path), "/tmp/kiln-microbench-%d.sock", (int)getpid());
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", echo_path);
	unlink(echo_path);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(s, 64) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		char buf[200];
		for (;;) {
			int c = accept(s, NULL, NULL);
			if (c < 0)
				continue;
			if (read(c, buf, sizeof(buf)) > 0 && write(c, buf, sizeof(buf)) < 0)
				_exit(1);
			close(c);
		}
	}
	close(s);
	return pid;
}

/* The second baseline: a fresh connection to the echo server, one round
 * trip of 200 bytes, then dlopen+dlsym of the same artifact. */
static double bare_connect(const char *unused)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char buf[200] = { 0 };
	(void)unused;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", echo_path);
	double t0 = now_s();
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    write(s, buf, sizeof(buf)) != sizeof(buf) || read(s, buf, sizeof(buf)) <= 0)
		return -1;
	void *h = dlopen(artifact_path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL || dlsym(h, "__program_bench") == NULL)
		return -1;
	return now_s() - t0;
}

/* Gets the program in a child, so that this process never loads it (the
 * children forked later must load it themselves, as a fresh process would),
 * and returns its path. */
static char *artifact_in_child(const char *sock)
{
	static char path[4096];
	int fds[2];
	if (pipe(fds) != 0)
		return NULL;
	pid_t pid = fork();
	if (pid == 0) {
		struct kiln *k;
		struct kiln_program *p;
		if (kiln_open(sock, &k) != 0 || get_program(k, &p) != 0) {
			fprintf(stderr, "microbench: %s\n", kiln_errmsg(NULL));
			_exit(1);
		}
		const char *ap = kiln_program_path(p);
		if (write(fds[1], ap, strlen(ap)) < 0)
			_exit(1);
		_exit(0);
	}
	close(fds[1]);
	ssize_t n = read(fds[0], path, sizeof(path) - 1);
	close(fds[0]);
	int status;
	waitpid(pid, &status, 0);
	if (n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return NULL;
	path[n] = '\0';
	return path;
}

int main(int argc, char **argv)
{
	const char *sock = NULL;
	int rounds = 51, json = 0, nargs = 0;
	long n = 2000000;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = 1;
		else if (strcmp(argv[i], "--lookups") == 0 && i + 1 < argc)
			n = atol(argv[++i]);
		else if (nargs++ == 0)
			sock = argv[i];
		else
			rounds = atoi(argv[i]);
	}
	if (sock == NULL || rounds < 1 || n < 1) {
		fprintf(stderr, "usage: microbench SOCKET [ROUNDS] [--lookups N] [--json]\n");
		return 2;
	}
	artifact_path = artifact_in_child(sock);
	if (artifact_path == NULL) {
		fprintf(stderr, "microbench: cannot get the program from kilnd at %s\n", sock);
		return 1;
	}

	pid_t echo = echo_server_start();
	if (echo < 0) {
		fprintf(stderr, "microbench: cannot start the echo server at %s\n", echo_path);
		return 1;
	}
	/* The sides alternate, one fresh process each, so that drift on a
	 * busy machine hits them alike. */
	double *tk = calloc((size_t)rounds, sizeof(double));
	double *tb = calloc((size_t)rounds, sizeof(double));
	double *tc = calloc((size_t)rounds, sizeof(double));
	for (int i = 0; i < rounds; i++) {
		tk[i] = in_child(warm_get, sock);
		tb[i] = in_child(bare, NULL);
		tc[i] = in_child(bare_connect, NULL);
		if (tk[i] < 0 || tb[i] < 0 || tc[i] < 0) {
			fprintf(stderr, "microbench: a measuring child failed\n");
			kill(echo, SIGKILL);
			return 1;
		}
	}
	kill(echo, SIGKILL);
	waitpid(echo, NULL, 0);
	unlink(echo_path);
	struct dist dk = summarize(tk, rounds), db = summarize(tb, rounds);
	struct dist dc = summarize(tc, rounds);

	struct kiln *k;
	struct kiln_program *p, *q;
	if (kiln_open(sock, &k) != 0 || get_program(k, &p) != 0) {
		fprintf(stderr, "microbench: %s\n", kiln_errmsg(NULL));
		return 1;
	}
	double t0 = now_s();
	for (long i = 0; i < n; i++) {
		if (kiln_lookup(k, "bench:sum", &q) != 0)
			return 1;
	}
	double lookup_ns = (now_s() - t0) / (double)n * 1e9;
	t0 = now_s();
	for (long i = 0; i < n; i++) {
		void *h = dlopen(artifact_path, RTLD_NOW | RTLD_NOLOAD);
		if (h == NULL)
			return 1;
		dlclose(h);
	}
	double noload_ns = (now_s() - t0) / (double)n * 1e9;
	kiln_close(k);
	if (json) {
		printf("{\"rounds\":%d,\"warm_get_us\":{\"min\":%.2f,\"median\":%.2f,\"p90\":%.2f,"
		       "\"max\":%.2f},\"baseline_us\":{\"min\":%.2f,\"median\":%.2f,\"p90\":%.2f,"
		       "\"max\":%.2f},\"ratio\":%.3f,\"connect_baseline_us\":{\"min\":%.2f,"
		       "\"median\":%.2f,\"p90\":%.2f,\"max\":%.2f},\"ratio_connect\":%.3f,"
		       "\"lookups\":%ld,\"lookup_ns\":%.2f,\"noload_ns\":%.2f}\n",
		       rounds, dk.min * 1e6, dk.median * 1e6, dk.p90 * 1e6, dk.max * 1e6,
		       db.min * 1e6, db.median * 1e6, db.p90 * 1e6, db.max * 1e6,
		       dk.median / db.median, dc.min * 1e6, dc.median * 1e6, dc.p90 * 1e6,
		       dc.max * 1e6, dk.median / dc.median, n, lookup_ns, noload_ns);
		return 0;
	}
	printf("warm get+load, fresh process : %8.1f us (median of %d)\n", dk.median * 1e6, rounds);
	printf("baseline round trip + dlopen : %8.1f us\n", db.median * 1e6);
	printf("ratio                        : %8.2f\n", dk.median / db.median);
	printf("connect + round trip + dlopen: %8.1f us (ratio %.2f)\n", dc.median * 1e6,
	       dk.median / dc.median);
	printf("repeated kiln_lookup         : %8.1f ns/call\n", lookup_ns);
	printf("dlopen(RTLD_NOLOAD)+dlclose  : %8.1f ns/call\n", noload_ns);
	return 0;
}
