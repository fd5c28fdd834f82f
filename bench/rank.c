/*
 * rank: one simulated MPI rank of the kiln benchmarks; bench/run starts
 * many at once. It gets every program of a list loaded and its entry point
 * called, in the way --mode selects, and prints one JSON line on stdout
 * with the wall time that took, measured from a common start signal.
 *
 *   kiln     kiln_open, then per program kiln_get with an alias and the
 *            source sent inline as text (--lookup: kiln_lookup by alias
 *            first, kiln_get only on a miss; --many: one kiln_get_many of
 *            all programs, libkiln's batch call), kiln_sym, call
 *   session  compile every program itself into a private directory with
 *            the same compiler and flags, dlopen (GT4Py's default)
 *   flock    per program a build directory on a shared path: flock its
 *            lock file; compile into a temporary file and rename when the
 *            .so is missing; unlock; dlopen (what GT4Py does today)
 *   ccache   `ccache CXX -c` into a private .o, link with -shared, dlopen
 *   dlopen   dlopen + dlsym + call of the listed files (the warm limit)
 *   mixed    --ops requests through libkiln, timed one by one: lookups of
 *            aliases new to this process (daemon hits), gets without an
 *            alias (daemon hits, sources hashed), lookups of unknown
 *            aliases (misses); latencies go to --lat
 *   aliases  setup for mixed: builds --variants tiny C programs and points
 *            --aliases aliases "tp:<i>" at them
 *
 * The list is a TSV file, one program per line, in request order:
 *   SYMBOL <tab> ALIAS <tab> PATH <tab> ID
 * PATH is the C++ source (the artifact for dlopen), ID a content id that
 * names build directories and outputs.
 *
 * Start: with --ready FD the rank writes one byte there once set up (list
 * read, sources in memory and read once, for mixed the connection open); with --barrier
 * FD it then waits for end-of-file on FD, and the clock starts. All ranks
 * of a run share one barrier pipe, so they start at the same instant. With
 * --go FD the rank, its clock started, then waits for end-of-file on FD as
 * well before it does its work (bench/run's herd floor: FD is closed when
 * the one plain compile that makes the listed file has finished).
 *
 * Output: {"rank":R,"mode":M,"programs":N,"start":T0,"end":T1,"wall_s":..,
 * "compiled":C,"errors":E,...}; T0 and T1 are CLOCK_MONOTONIC seconds, the
 * clock of bench/run's time.monotonic().
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <kiln/kiln.h>

extern char **environ;

#define MAX_FLAGS 64

enum mode { M_KILN, M_SESSION, M_FLOCK, M_CCACHE, M_DLOPEN, M_MIXED, M_ALIASES };
static const char *const mode_names[] = { "kiln", "session", "flock", "ccache", "dlopen",
					  "mixed", "aliases" };

struct prog {
	char *symbol, *alias, *path, *id, *name;
	char *text;  /* kiln: the source, read before the start */
	size_t len;
};

static struct {
	enum mode mode;
	int rank;
	const char *list, *socket, *dir, *cxx, *ccache, *lat;
	const char *flags[MAX_FLAGS];
	size_t nflags;
	int jobs, lookup, many, entry_arg;
	int ready_fd, barrier_fd, go_fd;
	long ops, naliases, nvariants;
	double get_frac, miss_frac;
	unsigned seed;
} opt = { .jobs = 1, .entry_arg = 4, .ready_fd = -1, .barrier_fd = -1, .go_fd = -1, .ops = 1000, .naliases = 1000, .nvariants = 8,
	  .get_frac = 0.2, .miss_frac = 0.2, .seed = 1 };

static struct prog *progs;
static size_t nprogs;
static struct kiln *kh;
static atomic_size_t next_prog;
static atomic_int compiled, errors;
static atomic_int links;
static double checksum;
static pthread_mutex_t sum_lock = PTHREAD_MUTEX_INITIALIZER;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU time of the whole process (all threads), user + system. */
static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "rank %d: ", opt.rank);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return NULL;
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap + 1);
	size_t r;
	while (buf != NULL && (r = fread(buf + n, 1, cap - n, f)) > 0) {
		n += r;
		if (n == cap) {
			char *g = realloc(buf, 2 * cap + 1);
			if (g == NULL) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = g;
			cap *= 2;
		}
	}
	fclose(f);
	if (buf != NULL) {
		buf[n] = '\0';
		*len = n;
	}
	return buf;
}

/*
 * Reads every page of a text once in this process, as a code generator that
 * wrote the text leaves it. fread fills the pages from the kernel; on a VM
 * with shadow page tables (this project's benchmark machine of 2026-11-27)
 * the process's first own access to each such page then costs a fault of
 * about 1.8 us, which would land on kiln's first pass over the text (its
 * NUL check: 8.8 instead of 1.5 us per program of 14 KiB) though no rank
 * that generated its code pays it there.
 */
static void touch_text(const char *text, size_t len)
{
	volatile char sink = 0;
	for (size_t i = 0; i < len; i += 4096)
		sink ^= text[i];
	(void)sink;
}

static void read_list(void)
{
	size_t len = 0;
	char *text = read_file(opt.list, &len);
	if (text == NULL)
		die("cannot read the list %s", opt.list);
	size_t cap = 64;
	progs = calloc(cap, sizeof(*progs));
	for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
		char *f[4];
		int n = 0;
		for (char *p = line; n < 4; n++) {
			f[n] = p;
			p = strchr(p, '\t');
			if (p == NULL) {
				n++;
				break;
			}
			*p++ = '\0';
		}
		if (n < 4)
			die("bad line in %s", opt.list);
		if (nprogs == cap) {
			cap *= 2;
			progs = realloc(progs, cap * sizeof(*progs));
		}
		struct prog *p = &progs[nprogs++];
		memset(p, 0, sizeof(*p));
		p->symbol = f[0];
		p->alias = f[1];
		p->path = f[2];
		p->id = f[3];
		const char *slash = strrchr(p->path, '/');
		p->name = (char *)(slash ? slash + 1 : p->path);
	}
	/* text stays allocated: the programs point into it. */
}

static int call_entry(void *sym, const struct prog *p)
{
	if (sym == NULL) {
		fprintf(stderr, "rank %d: no symbol %s in %s\n", opt.rank, p->symbol, p->path);
		return -1;
	}
	double (*entry)(int);
	*(void **)&entry = sym;
	double v = entry(opt.entry_arg);
	pthread_mutex_lock(&sum_lock);
	checksum += v;
	pthread_mutex_unlock(&sum_lock);
	return 0;
}

static int load_file(const char *path, const struct prog *p)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		fprintf(stderr, "rank %d: dlopen %s: %s\n", opt.rank, path, dlerror());
		return -1;
	}
	return call_entry(dlsym(h, p->symbol), p);
}

/* Runs argv (argv[0] a path) and waits; 0 when it exited 0. */
static int run(char *const argv[])
{
	pid_t pid;
	int rc = posix_spawn(&pid, argv[0], NULL, NULL, argv, environ);
	if (rc != 0) {
		fprintf(stderr, "rank %d: cannot run %s: %s\n", opt.rank, argv[0], strerror(rc));
		return -1;
	}
	int status;
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return -1;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "rank %d: %s failed (status %d)\n", opt.rank, argv[0], status);
		return -1;
	}
	return 0;
}

/* argv for "[ccache] CXX FLAGS -fPIC <mode args...>"; mode args end with NULL. */
static int compile(int with_ccache, const char *const *tail)
{
	const char *argv[MAX_FLAGS + 16];
	size_t n = 0;
	if (with_ccache)
		argv[n++] = opt.ccache;
	argv[n++] = opt.cxx;
	for (size_t i = 0; i < opt.nflags; i++)
		argv[n++] = opt.flags[i];
	argv[n++] = "-fPIC";
	while (*tail != NULL && n < MAX_FLAGS + 15)
		argv[n++] = *tail++;
	argv[n] = NULL;
	return run((char *const *)argv);
}

static struct kiln_request kiln_req(struct prog *p, struct kiln_source *src)
{
	src->name = p->name;
	src->text = p->text;
	src->len = p->len;
	src->path = NULL;
	struct kiln_request req = {
		.toolchain = "c++",
		.args = opt.flags, .nargs = opt.nflags,
		.sources = src, .nsources = 1,
		.alias = p->alias,
		.label = p->symbol + strlen("__program_"),
	};
	return req;
}

/* All programs with one kiln_get_many, then kiln_sym and call each. */
static void run_many(void)
{
	struct kiln_source *src = calloc(nprogs, sizeof(*src));
	struct kiln_request *reqs = calloc(nprogs, sizeof(*reqs));
	struct kiln_program **out = calloc(nprogs, sizeof(*out));
	int *status = calloc(nprogs, sizeof(*status));
	for (size_t i = 0; i < nprogs; i++)
		reqs[i] = kiln_req(&progs[i], &src[i]);
	int rc = kiln_get_many(kh, reqs, nprogs, out, status);
	if (rc != KILN_OK)
		fprintf(stderr, "rank %d: kiln_get_many: %s: %s\n", opt.rank, kiln_strerror(rc),
			kiln_errmsg(kh));
	for (size_t i = 0; i < nprogs; i++) {
		if (status[i] != KILN_OK || out[i] == NULL ||
		    call_entry(kiln_sym(out[i], progs[i].symbol), &progs[i]) != 0)
			atomic_fetch_add(&errors, 1);
	}
	free(src);
	free(reqs);
	free(out);
	free(status);
}

static int do_kiln(struct prog *p)
{
	struct kiln_program *kp = NULL;
	int rc = KILN_ENOTFOUND;
	if (opt.lookup)
		rc = kiln_lookup(kh, p->alias, &kp);
	if (rc == KILN_ENOTFOUND) {
		struct kiln_source src;
		struct kiln_request req = kiln_req(p, &src);
		rc = kiln_get(kh, &req, &kp);
	}
	if (rc != KILN_OK) {
		fprintf(stderr, "rank %d: %s: %s: %s\n", opt.rank, p->alias, kiln_strerror(rc),
			kiln_errmsg(kh));
		return -1;
	}
	return call_entry(kiln_sym(kp, p->symbol), p);
}

static int do_session(struct prog *p)
{
	char out[4096];
	snprintf(out, sizeof(out), "%s/%s.so", opt.dir, p->id);
	const char *tail[] = { "-shared", "-o", out, p->path, NULL };
	if (compile(0, tail) != 0)
		return -1;
	atomic_fetch_add(&compiled, 1);
	return load_file(out, p);
}

static int do_flock(struct prog *p)
{
	char dir[4096], lock[4200], so[4200], tmp[4300];
	snprintf(dir, sizeof(dir), "%s/%s", opt.dir, p->id);
	snprintf(lock, sizeof(lock), "%s/.lock", dir);
	snprintf(so, sizeof(so), "%s/lib.so", dir);
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		fprintf(stderr, "rank %d: mkdir %s: %s\n", opt.rank, dir, strerror(errno));
		return -1;
	}
	int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 || flock(fd, LOCK_EX) != 0) {
		fprintf(stderr, "rank %d: lock %s: %s\n", opt.rank, lock, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	int rc = 0;
	if (access(so, F_OK) != 0) {
		snprintf(tmp, sizeof(tmp), "%s/lib.so.%ld.%lu.tmp", dir, (long)getpid(),
			 (unsigned long)pthread_self());
		const char *tail[] = { "-shared", "-o", tmp, p->path, NULL };
		rc = compile(0, tail);
		if (rc == 0 && rename(tmp, so) != 0)
			rc = -1;
		if (rc == 0)
			atomic_fetch_add(&compiled, 1);
	}
	flock(fd, LOCK_UN);
	close(fd);
	return rc == 0 ? load_file(so, p) : -1;
}

static int do_ccache(struct prog *p)
{
	char obj[4096], so[4096];
	snprintf(obj, sizeof(obj), "%s/%s.o", opt.dir, p->id);
	snprintf(so, sizeof(so), "%s/%s.so", opt.dir, p->id);
	const char *ctail[] = { "-c", p->path, "-o", obj, NULL };
	if (compile(1, ctail) != 0)
		return -1;
	const char *ltail[] = { "-shared", "-o", so, obj, NULL };
	if (compile(0, ltail) != 0)
		return -1;
	atomic_fetch_add(&links, 1);
	return load_file(so, p);
}

static int do_one(struct prog *p)
{
	switch (opt.mode) {
	case M_KILN:
		return do_kiln(p);
	case M_SESSION:
		return do_session(p);
	case M_FLOCK:
		return do_flock(p);
	case M_CCACHE:
		return do_ccache(p);
	case M_DLOPEN:
		return load_file(p->path, p);
	default:
		return -1;
	}
}

static void *worker(void *arg)
{
	(void)arg;
	for (;;) {
		size_t i = atomic_fetch_add(&next_prog, 1);
		if (i >= nprogs)
			break;
		if (do_one(&progs[i]) != 0)
			atomic_fetch_add(&errors, 1);
	}
	return NULL;
}

static void run_programs(void)
{
	int n = opt.jobs < 1 ? 1 : opt.jobs;
	if ((size_t)n > nprogs)
		n = (int)nprogs;
	if (n <= 1) {
		worker(NULL);
		return;
	}
	pthread_t *t = calloc((size_t)n, sizeof(*t));
	for (int i = 0; i < n; i++) {
		if (pthread_create(&t[i], NULL, worker, NULL) != 0)
			die("%s", "cannot create a thread");
	}
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	free(t);
}

/* ---- mixed and aliases: the throughput client and its setup ---- */

static char *variant_text(long v)
{
	char *t = NULL;
	if (asprintf(&t, "double tp_value(void) { return %ld.0; }\n"
		     "double tp_sum_%ld(const double *a, int n)\n"
		     "{ double s = 0; for (int i = 0; i < n; i++) s += a[i] * %ld; return s; }\n",
		     v, v, v + 1) < 0)
		return NULL;
	return t;
}

static int get_variant(long v, const char *alias, struct kiln_program **out)
{
	static const char *const args[] = { "-O2" };
	char name[64];
	char *text = variant_text(v);
	snprintf(name, sizeof(name), "tp%ld.c", v);
	struct kiln_source src = { .name = name, .text = text };
	struct kiln_request req = { .toolchain = "cc", .args = args, .nargs = 1,
				    .sources = &src, .nsources = 1, .alias = alias,
				    .label = "throughput" };
	int rc = kiln_get(kh, &req, out);
	free(text);
	return rc;
}

static int make_aliases(void)
{
	struct kiln_program *p;
	char alias[64];
	for (long j = 0; j < opt.naliases; j++) {
		snprintf(alias, sizeof(alias), "tp:%ld", j);
		int rc = get_variant(j % opt.nvariants, alias, &p);
		if (rc != KILN_OK) {
			fprintf(stderr, "rank: %s: %s\n", kiln_strerror(rc), kiln_errmsg(kh));
			return -1;
		}
	}
	return 0;
}

static uint64_t rng_state;
static uint64_t rnd(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

struct mixed_counts {
	long hit, get, miss, bad;
};

static void run_mixed(double *lat, struct mixed_counts *c)
{
	long *perm = malloc((size_t)opt.naliases * sizeof(*perm));
	for (long j = 0; j < opt.naliases; j++)
		perm[j] = j;
	for (long j = opt.naliases - 1; j > 0; j--) {
		long k = (long)(rnd() % (uint64_t)(j + 1)), t = perm[j];
		perm[j] = perm[k];
		perm[k] = t;
	}
	long next = 0;
	char alias[96];
	for (long i = 0; i < opt.ops; i++) {
		double r = (double)(rnd() >> 11) / 9007199254740992.0;
		struct kiln_program *p;
		int rc, want = KILN_OK;
		double t0 = now_s();
		if (r < opt.get_frac) {
			rc = get_variant((long)(rnd() % (uint64_t)opt.nvariants), NULL, &p);
			c->get++;
		} else if (r < opt.get_frac + opt.miss_frac) {
			snprintf(alias, sizeof(alias), "tp:missing:%d:%ld", opt.rank, i);
			rc = kiln_lookup(kh, alias, &p);
			want = KILN_ENOTFOUND;
			c->miss++;
		} else {
			snprintf(alias, sizeof(alias), "tp:%ld", perm[next++ % opt.naliases]);
			rc = kiln_lookup(kh, alias, &p);
			c->hit++;
		}
		lat[i] = now_s() - t0;
		if (rc != want) {
			if (c->bad++ < 3)
				fprintf(stderr, "rank %d: mixed op %ld: %s: %s\n", opt.rank, i,
					kiln_strerror(rc), kiln_errmsg(kh));
		}
	}
	free(perm);
}

/* ---- main ---- */

static void usage(void)
{
	fprintf(stderr,
		"usage: rank --mode kiln|session|flock|ccache|dlopen|mixed|aliases [--list FILE]\n"
		"            [--rank N] [--ready FD] [--barrier FD] [--go FD] [--socket PATH]\n"
		"            [--dir DIR] [--cxx PATH] [--ccache PATH] [--flag ARG]... [-j N]\n"
		"            [--lookup] [--many] [--arg N] [--ops N] [--aliases N] [--variants N]\n"
		"            [--get-frac F] [--miss-frac F] [--seed N] [--lat FILE]\n"
		"(see the comment at the top of bench/rank.c)\n");
	exit(2);
}

static void parse(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define TAKE(name) (strcmp(a, name) == 0 && v != NULL && ++i)
		if (TAKE("--mode")) {
			size_t m;
			for (m = 0; m < sizeof(mode_names) / sizeof(mode_names[0]); m++)
				if (strcmp(v, mode_names[m]) == 0)
					break;
			if (m == sizeof(mode_names) / sizeof(mode_names[0]))
				usage();
			opt.mode = (enum mode)m;
		} else if (TAKE("--list")) {
			opt.list = v;
		} else if (TAKE("--rank")) {
			opt.rank = atoi(v);
		} else if (TAKE("--ready")) {
			opt.ready_fd = atoi(v);
		} else if (TAKE("--barrier")) {
			opt.barrier_fd = atoi(v);
		} else if (TAKE("--go")) {
			opt.go_fd = atoi(v);
		} else if (TAKE("--socket")) {
			opt.socket = v;
		} else if (TAKE("--dir")) {
			opt.dir = v;
		} else if (TAKE("--cxx")) {
			opt.cxx = v;
		} else if (TAKE("--ccache")) {
			opt.ccache = v;
		} else if (TAKE("--flag")) {
			if (opt.nflags == MAX_FLAGS)
				usage();
			opt.flags[opt.nflags++] = v;
		} else if (TAKE("-j")) {
			opt.jobs = atoi(v);
		} else if (strcmp(a, "--lookup") == 0) {
			opt.lookup = 1;
		} else if (strcmp(a, "--many") == 0) {
			opt.many = 1;
		} else if (TAKE("--arg")) {
			opt.entry_arg = atoi(v);
		} else if (TAKE("--ops")) {
			opt.ops = atol(v);
		} else if (TAKE("--aliases")) {
			opt.naliases = atol(v);
		} else if (TAKE("--variants")) {
			opt.nvariants = atol(v);
		} else if (TAKE("--get-frac")) {
			opt.get_frac = atof(v);
		} else if (TAKE("--miss-frac")) {
			opt.miss_frac = atof(v);
		} else if (TAKE("--seed")) {
			opt.seed = (unsigned)atol(v);
		} else if (TAKE("--lat")) {
			opt.lat = v;
		} else {
			usage();
		}
#undef TAKE
	}
	if (opt.nflags == 0)
		opt.flags[opt.nflags++] = "-O2";
	if (opt.nvariants < 1)
		opt.nvariants = 1;
	if (opt.naliases < 1)
		opt.naliases = 1;
}

/* Waits for end-of-file on fd (a pipe whose writer bench/run closes), then
 * closes it; nothing when fd is -1. */
static void wait_eof(int fd, const char *what)
{
	if (fd < 0)
		return;
	char c;
	ssize_t r;
	while ((r = read(fd, &c, 1)) != 0) {
		if (r < 0 && errno != EINTR)
			die("%s read failed", what);
	}
	close(fd);
}

static void wait_start(void)
{
	if (opt.ready_fd >= 0) {
		if (write(opt.ready_fd, "r", 1) != 1)
			die("%s", "cannot signal readiness");
		close(opt.ready_fd);
	}
	wait_eof(opt.barrier_fd, "barrier");
}

static int main_mixed(void)
{
	if (kiln_open(opt.socket, &kh) != KILN_OK)
		die("kiln_open: %s", kiln_errmsg(NULL));
	rng_state = 0x9E3779B97F4A7C15ULL ^ ((uint64_t)opt.seed << 32) ^ (uint64_t)opt.rank;
	double *lat = calloc((size_t)opt.ops, sizeof(*lat));
	struct mixed_counts c = { 0 };
	wait_start();
	double t0 = now_s();
	run_mixed(lat, &c);
	double t1 = now_s();
	if (opt.lat != NULL) {
		FILE *f = fopen(opt.lat, "w");
		if (f == NULL)
			die("cannot write %s", opt.lat);
		for (long i = 0; i < opt.ops; i++)
			fprintf(f, "%.0f\n", lat[i] * 1e9);
		fclose(f);
	}
	qsort(lat, (size_t)opt.ops, sizeof(*lat), cmp_double);
	struct kiln_stats st;
	kiln_get_stats(kh, &st);
	printf("{\"rank\":%d,\"mode\":\"mixed\",\"ops\":%ld,\"start\":%.9f,\"end\":%.9f,"
	       "\"wall_s\":%.9f,\"hit_lookups\":%ld,\"gets\":%ld,\"miss_lookups\":%ld,"
	       "\"errors\":%ld,\"p50_us\":%.3f,\"p99_us\":%.3f,\"max_us\":%.3f,"
	       "\"requests\":%llu,\"local_hits\":%llu,\"loads\":%llu}\n",
	       opt.rank, opt.ops, t0, t1, t1 - t0, c.hit, c.get, c.miss, c.bad,
	       lat[opt.ops / 2] * 1e6, lat[(size_t)((double)opt.ops * 0.99)] * 1e6,
	       lat[opt.ops - 1] * 1e6, (unsigned long long)st.requests,
	       (unsigned long long)st.local_hits, (unsigned long long)st.loads);
	kiln_close(kh);
	return c.bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	parse(argc, argv);
	if (opt.mode == M_MIXED)
		return main_mixed();
	if (opt.mode == M_ALIASES) {
		if (kiln_open(opt.socket, &kh) != KILN_OK)
			die("kiln_open: %s", kiln_errmsg(NULL));
		int rc = make_aliases();
		kiln_close(kh);
		return rc ? 1 : 0;
	}
	if (opt.list == NULL)
		usage();
	if ((opt.mode == M_SESSION || opt.mode == M_FLOCK || opt.mode == M_CCACHE) &&
	    (opt.dir == NULL || opt.cxx == NULL))
		die("%s", "--dir and --cxx are needed for this mode");
	if (opt.mode == M_CCACHE && opt.ccache == NULL)
		die("%s", "--ccache is needed for mode ccache");
	read_list();
	if (opt.mode == M_KILN) {
		for (size_t i = 0; i < nprogs; i++) {
			progs[i].text = read_file(progs[i].path, &progs[i].len);
			if (progs[i].text == NULL)
				die("cannot read %s", progs[i].path);
			touch_text(progs[i].text, progs[i].len);
		}
	}
	wait_start();
	double c0 = cpu_s();
	double t0 = now_s();
	/* --go: the herd's floor row; bench/run closes it once its one plain
	 * compile is done, and the rank then loads what it made. */
	wait_eof(opt.go_fd, "go");
	if (opt.mode == M_KILN && kiln_open(opt.socket, &kh) != KILN_OK) {
		fprintf(stderr, "rank %d: kiln_open: %s\n", opt.rank, kiln_errmsg(NULL));
		atomic_store(&errors, (int)nprogs);
	} else if (opt.mode == M_KILN && opt.many) {
		run_many();
	} else {
		run_programs();
	}
	double t1 = now_s();
	double c1 = cpu_s();
	struct kiln_stats st = { 0 };
	if (kh != NULL)
		kiln_get_stats(kh, &st);
	printf("{\"rank\":%d,\"mode\":\"%s\",\"programs\":%zu,\"jobs\":%d,\"start\":%.9f,"
	       "\"many\":%d,\"end\":%.9f,\"wall_s\":%.9f,\"compiled\":%d,\"links\":%d,\"errors\":%d,"
	       "\"cpu_s\":%.6f,\"requests\":%llu,\"local_hits\":%llu,\"loads\":%llu,"
	       "\"checksum\":%.6g}\n",
	       opt.rank, mode_names[opt.mode], nprogs, opt.jobs, t0, opt.many, t1, t1 - t0,
	       atomic_load(&compiled), atomic_load(&links), atomic_load(&errors), c1 - c0,
	       (unsigned long long)st.requests, (unsigned long long)st.local_hits,
	       (unsigned long long)st.loads, checksum);
	fflush(stdout);
	kiln_close(kh);
	return atomic_load(&errors) ? 1 : 0;
}
