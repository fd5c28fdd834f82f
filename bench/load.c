/*
 * bench/load: a bounded load test of kilnd (see load.h). This file is the
 * parent: options, the generated programs, the pre-build, the warm-up and
 * the main run of forked clients, and the daemon's state before and after.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "load.h"
#include "msg.h"
#include "util.h"
#include "wire.h"

#define SETTLE_MS 500

static void usage(FILE *fp)
{
	fprintf(fp,
		"Usage: load [OPTION]... SOCKET\n"
		"A bounded load test of the kilnd listening on SOCKET: forks client processes\n"
		"that speak the raw protocol (a connection each, hello, then requests) with a\n"
		"deterministic mix of hits, misses, compile errors, malformed frames and slow\n"
		"clients; checks every reply, the daemon's counters, its RSS and that it is\n"
		"still alive; prints latency and throughput.\n"
		"\n"
		"  --clients N        client processes (default 256)\n"
		"  --requests N       requests per client (default 1000)\n"
		"  --bursts N         moments when every client asks for one new program and\n"
		"                     one failing program at once (default requests/50)\n"
		"  --programs N       pre-built programs that hits pick from (default 20)\n"
		"  --bad-pct P        malformed frames, %% of requests (default 3)\n"
		"  --slow-pct P       slow clients, %% of requests (default 3)\n"
		"  --seed N           salts the programs and the mix (default: the time)\n"
		"  --verify-every N   compare the bytes of every Nth artifact (default 50)\n"
		"  --timeout S        longest wait for one reply (default 30)\n"
		"  --deadline S       longest run of the whole fleet (default 1800)\n"
		"  --rss-limit X      RSS after / before allowed (default 1.2; 0: report only,\n"
		"                     for a kilnd under AddressSanitizer, whose quarantine\n"
		"                     keeps freed memory)\n"
		"  --pid PID          kilnd's pid, when its status does not say\n"
		"  --json FILE        also write every figure as JSON to FILE\n"
		"  --quiet            no progress on stderr\n"
		"\n"
		"Exit status: 0 when nothing was lost or wrong and kilnd held up, 1 when\n"
		"not, 2 when the test could not run.\n");
}

enum {
	OPT_CLIENTS = 256, OPT_REQUESTS, OPT_BURSTS, OPT_PROGRAMS, OPT_BAD, OPT_SLOW, OPT_SEED,
	OPT_VERIFY, OPT_TIMEOUT, OPT_DEADLINE, OPT_RSS, OPT_PID, OPT_JSON, OPT_QUIET,
};

static const struct option long_opts[] = {
	{ "clients", required_argument, NULL, OPT_CLIENTS },
	{ "requests", required_argument, NULL, OPT_REQUESTS },
	{ "bursts", required_argument, NULL, OPT_BURSTS },
	{ "programs", required_argument, NULL, OPT_PROGRAMS },
	{ "bad-pct", required_argument, NULL, OPT_BAD },
	{ "slow-pct", required_argument, NULL, OPT_SLOW },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "verify-every", required_argument, NULL, OPT_VERIFY },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "deadline", required_argument, NULL, OPT_DEADLINE },
	{ "rss-limit", required_argument, NULL, OPT_RSS },
	{ "pid", required_argument, NULL, OPT_PID },
	{ "json", required_argument, NULL, OPT_JSON },
	{ "quiet", no_argument, NULL, OPT_QUIET },
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

static int parse_num(const char *opt, const char *s, double lo, double hi, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
		fprintf(stderr, "load: %s: \"%s\" is not a number from %g to %g\n", opt, s, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

static int set_opt(struct load_opts *o, int c, const char *arg)
{
	double v = 0;
	int rc = 0;

	switch (c) {
	case OPT_CLIENTS:
		rc = parse_num("--clients", arg, 1, 4096, &v);
		o->clients = (int)v;
		break;
	case OPT_REQUESTS:
		rc = parse_num("--requests", arg, 1, 1e6, &v);
		o->requests = (int)v;
		break;
	case OPT_BURSTS:
		rc = parse_num("--bursts", arg, 0, LOAD_MAX_BURSTS, &v);
		o->bursts = (int)v;
		break;
	case OPT_PROGRAMS:
		rc = parse_num("--programs", arg, 1, LOAD_MAX_PROGRAMS, &v);
		o->programs = (int)v;
		break;
	case OPT_BAD:
		rc = parse_num("--bad-pct", arg, 0, 100, &o->bad_pct);
		break;
	case OPT_SLOW:
		rc = parse_num("--slow-pct", arg, 0, 100, &o->slow_pct);
		break;
	case OPT_SEED:
		rc = parse_num("--seed", arg, 0, 9007199254740991.0, &v);
		o->seed = (uint64_t)v;
		break;
	case OPT_VERIFY:
		rc = parse_num("--verify-every", arg, 0, 1e9, &v);
		o->verify_every = (int)v;
		break;
	case OPT_TIMEOUT:
		rc = parse_num("--timeout", arg, 0.1, 3600, &o->timeout_s);
		break;
	case OPT_DEADLINE:
		rc = parse_num("--deadline", arg, 1, 86400, &o->deadline_s);
		break;
	case OPT_RSS:
		rc = parse_num("--rss-limit", arg, 0, 1000, &o->rss_limit);
		if (rc == 0 && o->rss_limit > 0 && o->rss_limit < 1) {
			fprintf(stderr, "load: --rss-limit: 0 (not checked) or at least 1\n");
			rc = -1;
		}
		break;
	case OPT_PID:
		rc = parse_num("--pid", arg, 1, INT_MAX, &v);
		o->pid = (pid_t)v;
		break;
	case OPT_JSON:
		o->json = arg;
		break;
	case OPT_QUIET:
		o->quiet = true;
		break;
	default:
		return -1;
	}
	return rc;
}

/* Returns 0, 1 after --help, or -1 on a usage error. */
static int parse_opts(int argc, char **argv, struct load_opts *o)
{
	int c;

	*o = (struct load_opts){ .clients = 256, .requests = 1000, .bursts = -1, .programs = 20,
				 .bad_pct = 3, .slow_pct = 3, .seed = (uint64_t)time(NULL),
				 .verify_every = 50, .timeout_s = 30, .deadline_s = 1800,
				 .rss_limit = 1.2 };
	while ((c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return 1;
		}
		if (set_opt(o, c, optarg) != 0)
			goto bad;
	}
	if (optind != argc - 1) {
		fprintf(stderr, "load: expected one argument, the daemon's socket\n");
		goto bad;
	}
	o->socket = argv[optind];
	if (o->bursts < 0)
		o->bursts = o->requests / 50 < LOAD_MAX_BURSTS ? o->requests / 50 : LOAD_MAX_BURSTS;
	if (o->bursts > 0 && o->requests < 4 * o->bursts) {
		fprintf(stderr, "load: --requests must be at least 4 per burst\n");
		goto bad;
	}
	if (o->bad_pct + o->slow_pct > 100) {
		fprintf(stderr, "load: --bad-pct and --slow-pct add up to more than 100\n");
		goto bad;
	}
	return 0;
bad:
	fprintf(stderr, "Try 'load --help' for more information.\n");
	return -1;
}

static void progress(const struct load_opts *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void progress(const struct load_opts *o, const char *fmt, ...)
{
	va_list ap;

	if (o->quiet)
		return;
	fprintf(stderr, "load: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Generated programs. */

static const char hit_fmt[] =
	"/* kiln load test: program %s, run %llu. */\n"
	"static volatile int load_scratch[64];\n"
	"\n"
	"int load_value(void)\n"
	"{\n"
	"\tint sum = 0;\n"
	"\n"
	"\tfor (int i = 0; i < 64; i++)\n"
	"\t\tload_scratch[i] = i * %d;\n"
	"\tfor (int i = 0; i < 64; i++)\n"
	"\t\tsum += load_scratch[i];\n"
	"\treturn sum;\n"
	"}\n";

static const char fail_fmt[] =
	"/* kiln load test: program %s, run %llu, with a compile error. */\n"
	"int load_value(void)\n"
	"{\n"
	"\treturn %s + 1;\n"
	"}\n";

/* The members of a get after "id": toolchain, args, the one source as text
 * or by digest, label; malloc'd without the opening brace. */
static char *make_body(const struct load_prog *p, bool digest, size_t *len)
{
	const char *args[] = { "-O2" };
	cJSON *o = cJSON_CreateObject();
	cJSON *srcs = cJSON_AddArrayToObject(o, "sources");
	cJSON *src = cJSON_CreateObject();
	char label[64], hex[65];
	uint8_t d[32];
	char *s;

	cJSON_AddItemToArray(srcs, src);
	cJSON_AddStringToObject(src, "name", "prog.c");
	if (digest) {
		util_sha256(p->text, strlen(p->text), d);
		util_hex(d, 32, hex);
		cJSON_AddStringToObject(src, "sha256", hex);
	} else {
		cJSON_AddStringToObject(src, "text", p->text);
	}
	cJSON_AddStringToObject(o, "toolchain", "cc");
	cJSON_AddItemToObject(o, "args", cJSON_CreateStringArray(args, 1));
	snprintf(label, sizeof(label), "load:%s", p->name);
	cJSON_AddStringToObject(o, "label", label);
	s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (!s || s[0] != '{') {
		fprintf(stderr, "load: out of memory\n");
		exit(2);
	}
	*len = strlen(s) - 1;
	memmove(s, s + 1, *len + 1);
	return s;
}

static void make_prog(struct load_prog *p, const struct load_opts *o, const char *kind, int n)
{
	int rc;

	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s-%d", kind, n);
	if (strcmp(kind, "fail") == 0) {
		snprintf(p->marker, sizeof(p->marker), "load_undeclared_%d_%llu", n,
			 (unsigned long long)o->seed);
		rc = asprintf(&p->text, fail_fmt, p->name, (unsigned long long)o->seed, p->marker);
	} else {
		rc = asprintf(&p->text, hit_fmt, p->name, (unsigned long long)o->seed, n + 1);
	}
	if (rc < 0) {
		fprintf(stderr, "load: out of memory\n");
		exit(2);
	}
	p->body = make_body(p, false, &p->body_len);
	p->dbody = make_body(p, true, &p->dbody_len);
}

static void make_progs(struct load_ctx *x)
{
	const struct load_opts *o = x->o;

	x->hits = calloc((size_t)o->programs, sizeof(*x->hits));
	x->news = calloc((size_t)o->bursts + 1, sizeof(*x->news));
	x->fails = calloc(LOAD_NFAIL, sizeof(*x->fails));
	if (!x->hits || !x->news || !x->fails) {
		fprintf(stderr, "load: out of memory\n");
		exit(2);
	}
	for (int i = 0; i < o->programs; i++)
		make_prog(&x->hits[i], o, "hit", i);
	for (int i = 0; i < o->bursts; i++)
		make_prog(&x->news[i], o, "new", i);
	for (int i = 0; i < LOAD_NFAIL; i++)
		make_prog(&x->fails[i], o, "fail", i);
}

/* The parent's own connections, one per phase. */

static int open_conn(const struct load_opts *o, struct wire_conn *c, bool quiet)
{
	const char *why = "";
	int rc = load_connect(c, o->socket, o->timeout_s > 60 ? o->timeout_s : 60, &why);

	if (rc < 0 && !quiet)
		fprintf(stderr, "load: %s %s: %s\n", why, o->socket, strerror(-rc));
	return rc;
}

/* The daemon's status reply, or NULL. */
static cJSON *get_status(const struct load_opts *o, bool quiet)
{
	static const char req[] = "{\"op\":\"status\",\"id\":2}";
	struct wire_conn c;
	cJSON *r = NULL;
	int fd = -1;

	if (open_conn(o, &c, quiet) < 0)
		return NULL;
	if (wire_send_frame(&c, req, sizeof(req) - 1) != 0 || load_recv(&c, &r, &fd) != 0 ||
	    !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok"))) {
		cJSON_Delete(r);
		r = NULL;
	}
	if (fd >= 0)
		close(fd);
	wire_conn_fini(&c);
	return r;
}

static int64_t num(const cJSON *obj, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);

	return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : -1;
}

/* Reads one reply of the pre-build: the artifact, its key, size and SHA-256. */
static int prebuilt(const cJSON *r, int fd, struct load_prog *p)
{
	const cJSON *key = cJSON_GetObjectItemCaseSensitive(r, "key");
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
	const cJSON *msg = cJSON_GetObjectItemCaseSensitive(e, "message");
	const cJSON *log = cJSON_GetObjectItemCaseSensitive(e, "log");

	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok")) || fd < 0 ||
	    !cJSON_IsString(key) || strlen(key->valuestring) != 64) {
		fprintf(stderr, "load: pre-build of %s failed: %s: %s\n%s\n", p->name,
			load_err_code(r) ? load_err_code(r) : "no descriptor or key",
			cJSON_IsString(msg) ? msg->valuestring : "",
			cJSON_IsString(log) ? log->valuestring : "");
		return -1;
	}
	snprintf(p->key, sizeof(p->key), "%s", key->valuestring);
	if (util_copy_sha256(fd, -1, &p->size, p->sha) != 0 ||
	    (int64_t)p->size != num(r, "size")) {
		fprintf(stderr, "load: pre-build of %s: cannot read the artifact, or its size "
			"differs from the reply's\n", p->name);
		return -1;
	}
	return 0;
}

/* Builds (or finds) every program that hits ask for, pipelined on one
 * connection, and learns its key, size and bytes. */
static int prebuild(const struct load_ctx *x)
{
	const struct load_opts *o = x->o;
	struct wire_conn c;
	int rc = 0;

	if (open_conn(o, &c, false) < 0)
		return -1;
	for (int i = 0; i < o->programs && rc == 0; i++)
		rc = load_send_body(&c, "get", 100 + (uint64_t)i, false, x->hits[i].body,
				    x->hits[i].body_len);
	for (int n = 0; n < o->programs && rc == 0; n++) {
		cJSON *r = NULL;
		int fd = -1;
		int64_t id;

		rc = load_recv(&c, &r, &fd);
		id = rc == 0 ? num(r, "id") - 100 : -1;
		if (rc == 0 && (id < 0 || id >= o->programs)) {
			fprintf(stderr, "load: pre-build: a reply with id %lld\n", (long long)id + 100);
			rc = -1;
		} else if (rc == 0) {
			rc = prebuilt(r, fd, &x->hits[id]);
		} else {
			fprintf(stderr, "load: pre-build: %s\n", strerror(-rc));
		}
		if (fd >= 0)
			close(fd);
		cJSON_Delete(r);
	}
	wire_conn_fini(&c);
	return rc;
}

/*
 * Requires that the new programs are not in the cache yet (a probe, "build":
 * false, answers not_found), or, after the run (after is true), that each is
 * there and that every client got its key. Returns the number of problems.
 */
static int probe_news(const struct load_ctx *x, bool after, struct load_result *res)
{
	const struct load_opts *o = x->o;
	struct wire_conn c;
	int bad = 0;

	if (open_conn(o, &c, false) < 0)
		return 1;
	for (int k = 0; k < o->bursts; k++) {
		const struct load_prog *p = &x->news[k];
		cJSON *r = NULL;
		int fd = -1;
		int rc = load_send_body(&c, "get", 200 + (uint64_t)k, true, p->body, p->body_len);
		const cJSON *key;

		if (rc == 0)
			rc = load_recv(&c, &r, &fd);
		key = cJSON_GetObjectItemCaseSensitive(r, "key");
		if (fd >= 0)
			close(fd);
		if (rc < 0) {
			fprintf(stderr, "load: probe of %s: %s\n", p->name, strerror(-rc));
			bad++;
		} else if (!after && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok"))) {
			fprintf(stderr, "load: %s is in the cache already: use a fresh cache or "
				"another --seed\n", p->name);
			bad++;
		} else if (after && !cJSON_IsString(key)) {
			load_problem(res, "%s is not in the cache after the run (%s)", p->name,
				     load_err_code(r) ? load_err_code(r) : "no key");
			bad++;
		} else if (after) {
			for (int ci = 0; ci < o->clients; ci++) {
				const char *got = x->keys[(size_t)ci * (size_t)o->bursts + (size_t)k];

				if (*got && strcmp(got, key->valuestring) != 0)
					res->key_mismatch++;
			}
		}
		cJSON_Delete(r);
	}
	wire_conn_fini(&c);
	return bad;
}

/* Shared memory and the fleets. */

static void *map_shared(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		fprintf(stderr, "load: mmap of %zu bytes: %s\n", len, strerror(errno));
		exit(2);
	}
	return p;
}

static void map_ctx(struct load_ctx *x)
{
	const struct load_opts *o = x->o;
	size_t n = (size_t)o->clients;

	x->shm = map_shared(sizeof(*x->shm));
	x->children = map_shared(n * sizeof(*x->children));
	x->recs = map_shared(n * (size_t)o->requests * sizeof(*x->recs));
	x->keys = map_shared(n * (size_t)(o->bursts + 1) * LOAD_KEY_LEN);
	x->shm->bar.n = (uint32_t)o->clients;
	/* Until a client says otherwise, each request is planned and lost. */
	for (size_t ci = 0; ci < n; ci++) {
		for (int i = 0; i < o->requests; i++) {
			struct load_rec *r = &x->recs[ci * (size_t)o->requests + (size_t)i];

			r->kind = (uint8_t)load_plan(o, (int)ci, i);
			r->outcome = LO_LOST;
			r->ms = -1.0f;
		}
	}
}

static double now_s(void)
{
	return (double)util_now_ns() / 1e9;
}

static void wake_all(struct load_ctx *x)
{
	__atomic_store_n(&x->shm->broken, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &x->shm->bar.gen, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static pid_t *spawn(struct load_ctx *x, bool warm)
{
	pid_t *pids = calloc((size_t)x->o->clients, sizeof(*pids));

	if (!pids) {
		fprintf(stderr, "load: out of memory\n");
		exit(2);
	}
	fflush(NULL);
	for (int ci = 0; ci < x->o->clients; ci++) {
		pids[ci] = fork();
		if (pids[ci] < 0) {
			fprintf(stderr, "load: fork: %s\n", strerror(errno));
			for (int j = 0; j < ci; j++)
				kill(pids[j], SIGKILL);
			exit(2);
		}
		if (pids[ci] == 0) {
			if (warm)
				load_client_warm(x, ci);
			load_client_run(x, ci);
		}
	}
	return pids;
}

/* Reaps the fleet by the deadline; kills what is left then. Returns the
 * number of clients that did not exit with status 0. */
static int reap(struct load_ctx *x, pid_t *pids, double deadline, struct load_result *res)
{
	int left = x->o->clients, bad = 0, status;

	while (left > 0) {
		pid_t pid = waitpid(-1, &status, WNOHANG);
		int ci = 0;

		if (pid == 0 && now_s() < deadline) {
			usleep(20000);
			continue;
		}
		if (pid <= 0)
			break;
		while (ci < x->o->clients && pids[ci] != pid)
			ci++;
		if (ci == x->o->clients)
			continue;
		pids[ci] = 0;
		left--;
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			bad++;
			wake_all(x);
			if (WIFSIGNALED(status))
				load_problem(res, "client %d died of signal %d", ci, WTERMSIG(status));
		}
	}
	for (int ci = 0; ci < x->o->clients; ci++) {
		if (pids[ci] > 0) {
			kill(pids[ci], SIGKILL);
			waitpid(pids[ci], NULL, 0);
			bad++;
		}
	}
	if (left > 0)
		load_problem(res, "%d clients still running at the deadline were killed", left);
	free(pids);
	return bad;
}

static int warm_up(struct load_ctx *x, struct load_result *res)
{
	pid_t *pids = spawn(x, true);
	int bad = reap(x, pids, now_s() + 600, res);

	for (int ci = 0; ci < x->o->clients && bad > 0; ci++)
		for (int e = 0; e < x->children[ci].nerr && e < LOAD_NERR; e++)
			fprintf(stderr, "load: warm-up: %s\n", x->children[ci].err[e]);
	memset(x->children, 0, (size_t)x->o->clients * sizeof(*x->children));
	return bad;
}

static void run_fleet(struct load_ctx *x, struct load_result *res)
{
	pid_t *pids = spawn(x, false);
	double end = now_s() + 120, t0;

	/* Every client connects first; then all are released at once. */
	while (__atomic_load_n(&x->shm->ready, __ATOMIC_ACQUIRE) < (uint32_t)x->o->clients &&
	       now_s() < end)
		usleep(5000);
	t0 = now_s();
	__atomic_store_n(&x->shm->go, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &x->shm->go, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
	reap(x, pids, t0 + x->o->deadline_s, res);
	res->wall_s = now_s() - t0;
}

/* The daemon's memory and descriptors. */

static long proc_status_kb(pid_t pid, const char *field)
{
	char path[64], line[256];
	size_t flen = strlen(field);
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, field, flen) == 0 && line[flen] == ':')
			v = strtol(line + flen + 1, NULL, 10);
	fclose(f);
	return v;
}

static int proc_fds(pid_t pid)
{
	char path[64];
	struct dirent *de;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* User plus system time of pid in seconds, from /proc/PID/stat; -1 when
 * it cannot be read. */
static double proc_cpu_s(pid_t pid)
{
	unsigned long long ut, st;
	char path[64], buf[1024], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* The command name may hold spaces: fields count from its ')'. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
			 &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static bool proc_alive(pid_t pid)
{
	char path[64], line[128];
	bool alive = false;
	FILE *f;

	if (kill(pid, 0) != 0 && errno == ESRCH)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return kill(pid, 0) == 0;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "State:", 6) == 0)
			alive = !strchr(line, 'Z') && !strchr(line, 'X');
	fclose(f);
	return alive;
}

/* Gives the daemon time to see every client's close, then reads its status. */
static cJSON *settled_status(const struct load_opts *o)
{
	double end = now_s() + 10;
	cJSON *st;

	usleep(SETTLE_MS * 1000);
	for (;;) {
		st = get_status(o, false);
		if (!st || num(st, "connections") <= 1 || now_s() > end)
			return st;
		cJSON_Delete(st);
		usleep(100000);
	}
}

static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* Connects, learns the pid, pre-builds and checks that the new programs
 * are new. Returns 0, or -1 when the test cannot run. */
static int setup(struct load_ctx *x, struct load_opts *o)
{
	cJSON *st = get_status(o, true);

	/* A daemon just started may not listen yet: give it a few seconds. */
	for (int t = 0; !st && t < 50; t++) {
		usleep(100000);
		st = get_status(o, t == 49);
	}

	if (!st) {
		fprintf(stderr, "load: no status from kilnd at %s\n", o->socket);
		return -1;
	}
	if (o->pid == 0 && num(st, "pid") > 0)
		o->pid = (pid_t)num(st, "pid");
	cJSON_Delete(st);
	if (o->pid <= 0) {
		fprintf(stderr, "load: kilnd's status has no pid: pass --pid\n");
		return -1;
	}
	make_progs(x);
	progress(o, "pre-building %d programs (seed %llu)", o->programs,
		 (unsigned long long)o->seed);
	if (prebuild(x) != 0)
		return -1;
	map_ctx(x);
	if (probe_news(x, false, NULL) != 0)
		return -1;
	return 0;
}

static void sample(const struct load_opts *o, cJSON *st, cJSON **slot, long *rss, int *fds,
		   double *cpu)
{
	*slot = st;
	*rss = proc_status_kb(o->pid, "VmRSS");
	*fds = proc_fds(o->pid);
	*cpu = proc_cpu_s(o->pid);
}

static void free_progs(struct load_prog *p, int n)
{
	for (int i = 0; p && i < n; i++) {
		free(p[i].text);
		free(p[i].body);
		free(p[i].dbody);
	}
	free(p);
}

static void free_ctx(struct load_ctx *x)
{
	const struct load_opts *o = x->o;
	size_t n = (size_t)o->clients;

	free_progs(x->hits, o->programs);
	free_progs(x->news, o->bursts);
	free_progs(x->fails, LOAD_NFAIL);
	if (x->shm) {
		munmap(x->shm, sizeof(*x->shm));
		munmap(x->children, n * sizeof(*x->children));
		munmap(x->recs, n * (size_t)o->requests * sizeof(*x->recs));
		munmap(x->keys, n * (size_t)(o->bursts + 1) * LOAD_KEY_LEN);
	}
}

/* Warm-up, the run, and the daemon's state around it. Returns the exit status. */
static int run(struct load_ctx *x, struct load_opts *o)
{
	struct load_result res = { 0 };
	struct load_daemon *d = &res.d;

	progress(o, "warm-up: %d clients, %d gets each", o->clients, 2 * o->programs);
	res.warm_failed = warm_up(x, &res);
	if (res.warm_failed > 0) {
		fprintf(stderr, "load: %d warm-up clients failed\n", res.warm_failed);
		return 1;
	}
	sample(o, settled_status(o), &d->st_before, &d->rss_before_kb, &d->fds_before,
	       &d->cpu_before_s);
	progress(o, "run: %d clients x %d requests, %d bursts; kilnd pid %d, RSS %ld KiB",
		 o->clients, o->requests, o->bursts, (int)o->pid, d->rss_before_kb);
	run_fleet(x, &res);
	progress(o, "run done in %.1f s", res.wall_s);
	d->alive = proc_alive(o->pid);
	sample(o, settled_status(o), &d->st_after, &d->rss_after_kb, &d->fds_after,
	       &d->cpu_after_s);
	d->hwm_after_kb = proc_status_kb(o->pid, "VmHWM");
	d->status_after_ok = d->st_after != NULL;
	d->alive = d->alive && proc_alive(o->pid);
	if (d->alive && d->status_after_ok)
		probe_news(x, true, &res);
	return load_report(x, &res);
}

int main(int argc, char **argv)
{
	struct load_opts o;
	struct load_ctx x = { .o = &o, .parent_fd = -1 };
	int rc = parse_opts(argc, argv, &o);

	if (rc != 0)
		return rc > 0 ? 0 : 2;
	signal(SIGPIPE, SIG_IGN);
	raise_nofile();
	rc = setup(&x, &o) == 0 ? run(&x, &o) : 2;
	free_ctx(&x);
	return rc;
}
