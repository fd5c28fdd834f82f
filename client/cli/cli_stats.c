/*
 * kiln stats: the daemon's counters, as text, JSON, or in Prometheus'
 * text exposition format for a node exporter's textfile collector. They are
 * kept in the index, so they read the same while kilnd is not running, and
 * --zero resets them.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "counters.h"
#include "store.h"
#include "util.h"

enum metric_kind { COUNTER, GAUGE };

static const struct {
	const char *field;     /* in the status reply */
	const char *name;      /* metric name, without the kiln_ prefix */
	enum metric_kind kind;
	const char *help;
} metrics[] = {
	/* Every counter, as kilnd defines it (proto/counters.h). */
#define KILN_COUNTER_METRIC(n, up, help) { #n, #n "_total", COUNTER, help },
	KILN_COUNTERS(KILN_COUNTER_METRIC)
#undef KILN_COUNTER_METRIC
	/* Gauges: what kilnd holds and does now. */
	{ "entries", "cache_entries", GAUGE, "Entries in the cache." },
	{ "bytes", "cache_bytes", GAUGE, "Bytes of objects in the cache." },
	{ "disk_bytes", "cache_disk_bytes", GAUGE, "Bytes the cache takes on disk (objects, metas, logs, index and WAL): what --max-size bounds." },
	{ "stale_entries", "cache_stale_entries", GAUGE, "Entries of an older or unknown key format (kiln gc --stale removes them)." },
	{ "max_size", "cache_max_bytes", GAUGE, "The cache's size limit (--max-size)." },
	{ "in_flight", "builds_running", GAUGE, "Builds holding a --jobs slot now." },
	{ "slots_lent", "slots_lent", GAUGE, "Free --jobs slots lent to builds' further compile steps." },
	{ "queued", "builds_queued", GAUGE, "Builds waiting for a compiler slot." },
	{ "connections", "connections", GAUGE, "Open client connections." },
	{ "pending", "requests_pending", GAUGE, "Requests read and not yet answered." },
	{ "uptime_s", "uptime_seconds", GAUGE, "Seconds since kilnd started." },
	{ "stats_since", "stats_since_seconds", GAUGE, "When counting began (Unix time): the cache's first kilnd, or kiln stats --zero." },
};

/* One counter for people, named as kiln status names it: sizes in binary
 * units, the uptime as a duration, hits with their share of lookups,
 * counts as integers (JSON keeps the raw numbers and the member names). */
static void print_human(const cJSON *counters, const cJSON *v)
{
	char buf[64];
	const char *field = v->string, *name = cli_counter_name(field);
	size_t n = strlen(field);
	double x = v->valuedouble;
	uint64_t misses = 0;
	if (strcmp(field, "bytes") == 0 || strcmp(field, "max_size") == 0 ||
	    (n > 6 && strcmp(field + n - 6, "_bytes") == 0))
		printf("%-20s %s\n", name, util_format_size(x > 0 ? (uint64_t)x : 0, buf, sizeof(buf)));
	else if (strcmp(field, "stats_since") == 0)
		printf("%-20s %s\n", name, cli_format_time((int64_t)x, buf, sizeof(buf)));
	else if (strcmp(field, "uptime_s") == 0)
		printf("%-20s %s\n", name, util_format_age((int64_t)x, buf, sizeof(buf)));
	else if (strcmp(field, "hits") == 0 && cli_json_u64(counters, "misses", &misses))
		printf("%-20s %s\n", name, cli_format_hits(x > 0 ? (uint64_t)x : 0, misses, buf,
							     sizeof(buf)));
	else
		printf("%-20s %.0f\n", name, x);
}

/* A label value with \, " and newline escaped, as the format asks. */
static void print_label(FILE *fp, const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(fp, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", fp);
		else
			fputc(*s, fp);
	}
}

/*
 * The labels of every series, the same from job to job and whether kilnd
 * runs or not, so that a collector keeps one series per cache: whose kilnd,
 * which node, which cache. Not the socket, which the Slurm prologue makes
 * per job.
 */
struct series_labels {
	char user[64];
	char node[256];
	const char *cache;
};

static void print_labels(FILE *fp, const struct series_labels *l)
{
	fputs("user=\"", fp);
	print_label(fp, l->user);
	fputs("\",node=\"", fp);
	print_label(fp, l->node);
	fputs("\",cache=\"", fp);
	print_label(fp, l->cache);
	fputc('"', fp);
}

/* uid's user name, else the number; the short host name. */
static void labels_init(struct series_labels *l, uid_t uid, const char *cache)
{
	struct passwd pw, *res = NULL;
	char buf[4096];
	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) == 0 && res != NULL)
		snprintf(l->user, sizeof(l->user), "%s", res->pw_name);
	else
		snprintf(l->user, sizeof(l->user), "%u", (unsigned)uid);
	if (gethostname(l->node, sizeof(l->node)) != 0)
		snprintf(l->node, sizeof(l->node), "unknown");
	l->node[sizeof(l->node) - 1] = '\0';
	l->node[strcspn(l->node, ".")] = '\0';
	l->cache = cache;
}

/* Hits, misses and builds per toolchain, and the build-time histogram. */
static void print_prometheus_detail(FILE *fp, const cJSON *st, const struct series_labels *l)
{
	static const char *const tc[][3] = {
		{ "hits", "toolchain_hits_total", "get and lookup requests served from the cache, by toolchain." },
		{ "misses", "toolchain_misses_total", "get and lookup requests not in the cache, by toolchain." },
		{ "builds_ok", "toolchain_builds_ok_total", "Builds that produced an artifact, by toolchain." },
		{ "builds_failed", "toolchain_builds_failed_total", "Builds that failed, by toolchain." },
	};
	const cJSON *tcs = cJSON_GetObjectItemCaseSensitive(st, "toolchain_stats");
	for (size_t i = 0; cJSON_IsObject(tcs) && i < sizeof(tc) / sizeof(tc[0]); i++) {
		fprintf(fp, "# HELP kiln_%s %s\n# TYPE kiln_%s counter\n", tc[i][1], tc[i][2], tc[i][1]);
		const cJSON *t;
		cJSON_ArrayForEach(t, tcs) {
			const cJSON *v = cJSON_GetObjectItemCaseSensitive(t, tc[i][0]);
			fprintf(fp, "kiln_%s{", tc[i][1]);
			print_labels(fp, l);
			fputs(",toolchain=\"", fp);
			print_label(fp, t->string);
			fprintf(fp, "\"} %.15g\n", cJSON_IsNumber(v) ? v->valuedouble : 0);
		}
	}
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(st, "build_seconds");
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(h, "buckets");
	if (!cJSON_IsArray(b))
		return;
	fputs("# HELP kiln_build_seconds How long builds took (compiler runs, failed ones too).\n"
	      "# TYPE kiln_build_seconds histogram\n", fp);
	const cJSON *pair;
	cJSON_ArrayForEach(pair, b) {
		const cJSON *le = cJSON_GetArrayItem(pair, 0), *n = cJSON_GetArrayItem(pair, 1);
		fputs("kiln_build_seconds_bucket{", fp);
		print_labels(fp, l);
		if (cJSON_IsNumber(le))
			fprintf(fp, ",le=\"%g\"}", le->valuedouble);
		else
			fputs(",le=\"+Inf\"}", fp);
		fprintf(fp, " %.15g\n", cJSON_IsNumber(n) ? n->valuedouble : 0);
	}
	const cJSON *sum = cJSON_GetObjectItemCaseSensitive(h, "sum");
	const cJSON *count = cJSON_GetObjectItemCaseSensitive(h, "count");
	fputs("kiln_build_seconds_sum{", fp);
	print_labels(fp, l);
	fprintf(fp, "} %.15g\nkiln_build_seconds_count{", cJSON_IsNumber(sum) ? sum->valuedouble : 0);
	print_labels(fp, l);
	fprintf(fp, "} %.15g\n", cJSON_IsNumber(count) ? count->valuedouble : 0);
}

/* up: kilnd answered (st is its status); else st was read from the index. */
static void print_prometheus(FILE *fp, const cJSON *st, const struct series_labels *l, bool up)
{
	for (size_t i = 0; i < sizeof(metrics) / sizeof(metrics[0]); i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(st, metrics[i].field);
		if (!cJSON_IsNumber(v))
			continue;   /* e.g. the upstream counters without --upstream */
		fprintf(fp, "# HELP kiln_%s %s\n# TYPE kiln_%s %s\nkiln_%s{", metrics[i].name,
			metrics[i].help, metrics[i].name, metrics[i].kind == COUNTER ? "counter" : "gauge",
			metrics[i].name);
		print_labels(fp, l);
		fprintf(fp, "} %.15g\n", v->valuedouble);
	}
	print_prometheus_detail(fp, st, l);
	fprintf(fp, "# HELP kiln_up Whether kilnd runs: it answered, or holds the cache's lock.\n"
		"# TYPE kiln_up gauge\nkiln_up{");
	print_labels(fp, l);
	fprintf(fp, "} %d\n", up ? 1 : 0);
}

/* Writes the metrics to path through a temporary file beside it, written,
 * given mode and fsync'ed, then renamed over path, so that the textfile
 * collector never reads half a file (nor one of another mode). */
static int write_atomically(const char *path, unsigned mode, const cJSON *st,
			    const struct series_labels *l, bool up)
{
	char *text = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&text, &len);
	int rc = fp != NULL ? 0 : -errno;

	if (fp != NULL) {
		print_prometheus(fp, st, l, up);
		rc = fclose(fp) == 0 ? 0 : -errno;
	}
	if (rc == 0)
		rc = util_replace_file_mode_at(AT_FDCWD, path, text, len, true, mode);
	free(text);
	if (rc != 0) {
		cli_error("cannot write %s: %s", path, strerror(-rc));
		return -1;
	}
	return 0;
}

/* Adds a saved row (store_counters_read) to st in the status reply's shape. */
static void offline_row(cJSON *st, cJSON *tcs, uint64_t *buckets, const struct store_counter *r)
{
	char tc[64];
	int end = 0;
	unsigned b;
	if (strcmp(r->name, "since") == 0) {
		cJSON_AddNumberToObject(st, "stats_since", (double)r->value);
	} else if (strcmp(r->name, "build_ms_sum") == 0) {
		cJSON_AddNumberToObject(st, "build_ms_sum", (double)r->value);
	} else if (sscanf(r->name, "build_bucket.%u%n", &b, &end) == 1 && r->name[end] == '\0') {
		if (b < STORE_BUILD_BUCKETS)
			buckets[b] = r->value;
	} else if (strncmp(r->name, "toolchain.", 10) == 0) {
		const char *dot = strrchr(r->name, '.');
		size_t len = (size_t)(dot - r->name) - 10;
		if (len == 0 || len >= sizeof(tc))
			return;
		memcpy(tc, r->name + 10, len);
		tc[len] = '\0';
		cJSON *o = cJSON_GetObjectItemCaseSensitive(tcs, tc);
		if (o == NULL)
			o = cJSON_AddObjectToObject(tcs, tc);
		if (o != NULL)
			cJSON_AddNumberToObject(o, dot + 1, (double)r->value);
	} else if (strchr(r->name, '.') == NULL && cJSON_GetObjectItemCaseSensitive(st, r->name) != NULL) {
		cJSON_SetNumberValue(cJSON_GetObjectItemCaseSensitive(st, r->name), (double)r->value);
	} else if (strchr(r->name, '.') == NULL &&
		   (r->value != 0 || strncmp(r->name, "upstream_", 9) != 0)) {
		cJSON_AddNumberToObject(st, r->name, (double)r->value);
	}
}

/* The counters kept in the index, when kilnd is not running: an object in
 * the shape of its status reply. 0, or a negative errno after saying why. */
static int offline_status(const struct cli *cli, cJSON **out)
{
	struct store *s = NULL;
	struct store_counter *rows = NULL;
	size_t n = 0;
	uint64_t buckets[STORE_BUILD_BUCKETS] = { 0 };
	struct store_footprint fp = { 0 };
	int rc = cli_open_offline(cli, false, &s);
	if (rc < 0)
		return rc;
	if (s != NULL && ((rc = store_counters_read(s, &rows, &n)) != 0 ||
			  (rc = store_footprint(s, &fp)) != 0)) {
		cli_error("cannot read the counters in %s: %s", cli->cache_dir, strerror(-rc));
		free(rows);
		store_close(s);
		return rc;
	}
	cJSON *st = cJSON_CreateObject(), *tcs = cJSON_AddObjectToObject(st, "toolchain_stats");
	cJSON *h = cJSON_AddObjectToObject(st, "build_seconds");
	cJSON *arr = cJSON_AddArrayToObject(h, "buckets");
	if (arr == NULL) {
		cJSON_Delete(st);
		free(rows);
		store_close(s);
		cli_error("out of memory");
		return -ENOMEM;
	}
	/* Zero counters are saved only once they change, after a --zero say. */
	for (size_t i = 0; i < sizeof(metrics) / sizeof(metrics[0]); i++)
		if (metrics[i].kind == COUNTER && strncmp(metrics[i].field, "upstream_", 9) != 0)
			cJSON_AddNumberToObject(st, metrics[i].field, 0);
	cJSON_AddNumberToObject(st, "entries", (double)fp.entries);
	cJSON_AddNumberToObject(st, "bytes", (double)fp.bytes);
	cJSON_AddNumberToObject(st, "disk_bytes", (double)fp.total);
	for (size_t i = 0; i < n; i++)
		offline_row(st, tcs, buckets, &rows[i]);
	uint64_t total = 0;
	for (size_t b = 0; b < STORE_BUILD_BUCKETS; b++) {
		total += buckets[b];
		cJSON *pair = cJSON_CreateArray();
		if (b + 1 < STORE_BUILD_BUCKETS)
			cJSON_AddItemToArray(pair, cJSON_CreateNumber(
				util_round3((double)store_build_bucket_ms[b] / 1000)));
		else
			cJSON_AddItemToArray(pair, cJSON_CreateString("+Inf"));
		cJSON_AddItemToArray(pair, cJSON_CreateNumber((double)total));
		cJSON_AddItemToArray(arr, pair);
	}
	cJSON *sum = cJSON_DetachItemFromObjectCaseSensitive(st, "build_ms_sum");
	cJSON_AddNumberToObject(h, "sum", cJSON_IsNumber(sum) ? util_round3(sum->valuedouble / 1000)
								: 0);
	cJSON_AddNumberToObject(h, "count", (double)total);
	cJSON_Delete(sum);
	free(rows);
	store_close(s);
	*out = st;
	return 0;
}

/* The build-time histogram and the per-toolchain counts, for people. */
static void print_human_detail(const cJSON *st)
{
	char buf[64];
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(st, "build_seconds");
	const cJSON *count = cJSON_GetObjectItemCaseSensitive(h, "count");
	const cJSON *sum = cJSON_GetObjectItemCaseSensitive(h, "sum");
	if (cJSON_IsNumber(count) && count->valuedouble > 0 && cJSON_IsNumber(sum)) {
		printf("%-20s %.0f builds, %s on average\n", "build time", count->valuedouble,
		       cli_format_ms((uint64_t)(sum->valuedouble * 1000 / count->valuedouble), buf,
				     sizeof(buf)));
		double prev = 0;
		const cJSON *pair;
		cJSON_ArrayForEach(pair, cJSON_GetObjectItemCaseSensitive(h, "buckets")) {
			const cJSON *le = cJSON_GetArrayItem(pair, 0), *n = cJSON_GetArrayItem(pair, 1);
			double k = cJSON_IsNumber(n) ? n->valuedouble - prev : 0;
			prev = cJSON_IsNumber(n) ? n->valuedouble : prev;
			if (k <= 0)
				continue;
			if (cJSON_IsNumber(le))
				snprintf(buf, sizeof(buf), "  up to %gs", le->valuedouble);
			else
				snprintf(buf, sizeof(buf), "  longer");
			printf("%-20s %.0f\n", buf, k);
		}
	}
	const cJSON *t;
	cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(st, "toolchain_stats")) {
		double v[4] = { 0 };
		static const char *const names[] = { "hits", "misses", "builds_ok", "builds_failed" };
		for (int i = 0; i < 4; i++) {
			const cJSON *x = cJSON_GetObjectItemCaseSensitive(t, names[i]);
			v[i] = cJSON_IsNumber(x) ? x->valuedouble : 0;
		}
		if (v[0] + v[1] + v[2] + v[3] == 0)
			continue;
		snprintf(buf, sizeof(buf), "toolchain %s", t->string);
		printf("%-20s %.0f hits, %.0f misses, %.0f built, %.0f failed\n", buf, v[0], v[1],
		       v[2], v[3]);
	}
}

/* --zero: kilnd resets its counters, or they are reset in the index when it
 * is not running. */
static int zero(struct cli *cli)
{
	struct cli_conn c;
	struct msg_request req;
	cJSON *r = NULL;
	int rc = cli_conn_open(cli, &c);
	if (rc == 0) {
		cli_request_init(&req, OP_ZERO);
		rc = cli_call(cli, &c, &req, &r) < 0 || cli_reply_check(r, NULL) != ERR_NONE ? -1 : 0;
		cli_conn_close(&c);
	} else if (rc == -ECONNREFUSED) {
		struct store *s = NULL;
		struct store_counter since = { .name = "since", .value = (uint64_t)time(NULL) };
		rc = cli_open_offline(cli, true, &s);
		if (rc == 0 && s != NULL && (rc = store_counters_write(s, &since, 1, true)) != 0)
			cli_error("cannot zero the counters in %s: %s", cli->cache_dir, strerror(-rc));
		store_close(s);
		r = cJSON_CreateObject();
		cJSON_AddNumberToObject(r, "stats_since", (double)since.value);
	}
	if (rc == 0) {
		if (cli->json)
			cli_print_json(r);
		else
			printf("statistics zeroed\n");
	}
	cJSON_Delete(r);
	return rc == 0 ? cli_finish_stdout(CLI_EXIT_OK) : CLI_EXIT_ERROR;
}

enum { OPT_PROMETHEUS = 1, OPT_OUTPUT, OPT_MODE, OPT_ZERO };

static const struct cli_optdef stats_opts[] = {
	{ "prometheus", 0, false, OPT_PROMETHEUS },
	{ "output", 'o', true, OPT_OUTPUT },
	{ "mode", 0, true, OPT_MODE },
	{ "zero", 'z', false, OPT_ZERO },
	{ NULL, 0, false, 0 },
};

/* -o FILE's mode unless --mode says otherwise: a node exporter runs as
 * another user, and must read it whatever the writer's umask. */
#define PROM_MODE_DEFAULT 0644u

struct stats_args {
	const char *output;
	unsigned mode;
	bool mode_given, prometheus, zeroing;
};

/* --mode: octal, read and write bits only (an exporter's file is never run,
 * so execute, setuid, setgid and sticky bits mean a mistake). */
static int parse_mode(struct cli *cli, const char *val, unsigned *mode)
{
	size_t n = strlen(val);
	if (n == 0 || n > 4 || strspn(val, "01234567") != n)
		return cli_usage_error(cli, "--mode needs an octal file mode such as 0644 or 0640, "
					    "not \"%s\"", val);
	*mode = (unsigned)strtoul(val, NULL, 8);
	if ((*mode & ~0666u) != 0)
		return cli_usage_error(cli, "--mode %s: a metrics file takes read and write bits "
					    "only (0644, 0640, 0600), no execute, setuid, setgid or "
					    "sticky bit", val);
	return -1;
}

/* -1 to go on with a filled in, or the exit status. */
static int stats_parse(struct cli *cli, int argc, char **argv, struct stats_args *a)
{
	struct cli_parse p;
	const char *val;
	int id, status;

	*a = (struct stats_args){ .mode = PROM_MODE_DEFAULT };
	cli_parse_init(&p, cli, argc, argv);
	while ((id = cli_next(&p, stats_opts, &val)) != CLI_END) {
		if (id == CLI_STOP)
			return p.status;
		if (id == CLI_POS)
			return cli_usage_error(cli, "stats takes no arguments");
		if (id == OPT_PROMETHEUS)
			a->prometheus = true;
		else if (id == OPT_ZERO)
			a->zeroing = true;
		else if (id == OPT_OUTPUT)
			a->output = val;
		else if ((status = parse_mode(cli, val, &a->mode)) >= 0)
			return status;
		else
			a->mode_given = true;
	}
	if (a->output != NULL && !a->prometheus)
		return cli_usage_error(cli, "--output goes with --prometheus");
	if (a->mode_given && a->output == NULL)
		return cli_usage_error(cli, "--mode is the mode of --output's file (-o FILE)");
	if (a->zeroing && a->prometheus)
		return cli_usage_error(cli, "--zero does not go with --prometheus");
	return -1;
}

/* Whether a kilnd holds cache_dir's lock (daemon/instance.c's flock of
 * kilnd.lock) though it did not answer on this socket (another socket,
 * another user's): /proc/locks tells without taking the lock, which a
 * kilnd starting at that moment would then miss. */
static bool cache_locked(const char *cache_dir)
{
	char path[PATH_MAX + 16], line[256];
	struct stat st;
	snprintf(path, sizeof(path), "%s/kilnd.lock", cache_dir);
	FILE *fp = stat(path, &st) == 0 ? fopen("/proc/locks", "re") : NULL;
	bool held = false;
	while (fp != NULL && !held && fgets(line, sizeof(line), fp) != NULL) {
		unsigned ma, mi;
		unsigned long long ino;
		char kind[16];
		/* "1: FLOCK  ADVISORY  WRITE 4242 08:01:1234567 0 EOF" */
		if (sscanf(line, "%*s %15s %*s %*s %*d %x:%x:%llu", kind, &ma, &mi, &ino) == 4)
			held = strcmp(kind, "FLOCK") == 0 && ma == major(st.st_dev) &&
			       mi == minor(st.st_dev) && ino == (unsigned long long)st.st_ino;
	}
	if (fp != NULL)
		fclose(fp);
	return held;
}

/* kilnd's status, or the counters in the index when it is not running
 * (*up false). *owner: whose they are, kilnd's user (its peer credentials),
 * else the owner of the cache directory. 0 or -1 after saying why. */
static int fetch_stats(struct cli *cli, cJSON **st, bool *up, uid_t *owner)
{
	struct cli_conn c;
	struct msg_request req;
	struct stat sb;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int rc = cli_conn_open(cli, &c);
	*up = rc == 0;
	*owner = getuid();
	if (rc == -ECONNREFUSED) {
		if (stat(cli->cache_dir, &sb) == 0)
			*owner = sb.st_uid;
		/* Up all the same when a kilnd holds the cache it read. */
		*up = cache_locked(cli->cache_dir);
		return offline_status(cli, st) == 0 ? 0 : -1;
	}
	if (rc != 0)
		return -1;
	if (getsockopt(c.wc.fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
		*owner = cred.uid;
	cli_request_init(&req, OP_STATUS);
	rc = cli_call(cli, &c, &req, st) < 0 || cli_reply_check(*st, NULL) != ERR_NONE ? -1 : 0;
	cli_conn_close(&c);
	return rc;
}

/* --prometheus, on stdout or into -o FILE. 0 or -1 after saying why. */
static int prometheus_out(const struct cli *cli, const struct stats_args *a, const cJSON *st,
			  bool up, uid_t owner)
{
	struct series_labels l;
	const char *cache = up ? cli_json_str(st, "cache_dir") : NULL;
	labels_init(&l, owner, cache != NULL ? cache : cli->cache_dir);
	if (a->output != NULL)
		return write_atomically(a->output, a->mode, st, &l, up);
	print_prometheus(stdout, st, &l, up);
	return 0;
}

int cmd_stats(struct cli *cli, int argc, char **argv)
{
	struct stats_args a;
	cJSON *st = NULL, *counters = NULL;
	bool up;
	uid_t owner;
	int status = stats_parse(cli, argc, argv, &a);

	if (status >= 0)
		return status;
	status = CLI_EXIT_ERROR;
	if (a.zeroing)
		return zero(cli);
	if (fetch_stats(cli, &st, &up, &owner) != 0)
		goto cleanup;
	if (a.prometheus) {
		if (prometheus_out(cli, &a, st, up, owner) == 0)
			status = cli_finish_stdout(CLI_EXIT_OK);
		goto cleanup;
	}
	counters = cJSON_CreateObject();
	for (size_t i = 0; counters != NULL && i < sizeof(metrics) / sizeof(metrics[0]); i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(st, metrics[i].field);
		if (cJSON_IsNumber(v))
			cJSON_AddNumberToObject(counters, metrics[i].field, v->valuedouble);
	}
	if (counters == NULL) {
		cli_error("out of memory");
		goto cleanup;
	}
	cJSON_AddBoolToObject(counters, "running", up);
	if (cli->json) {
		static const char *const detail[] = { "toolchain_stats", "build_seconds" };
		for (size_t i = 0; i < 2; i++) {
			cJSON *x = cJSON_DetachItemFromObjectCaseSensitive(st, detail[i]);
			if (x != NULL)
				cJSON_AddItemToObject(counters, detail[i], x);
		}
		cli_print_json(counters);
	} else {
		const cJSON *v;
		cJSON_ArrayForEach(v, counters)
			if (cJSON_IsNumber(v))
				print_human(counters, v);
		print_human_detail(st);
	}
	status = cli_finish_stdout(CLI_EXIT_OK);
cleanup:
	cJSON_Delete(counters);
	cJSON_Delete(st);
	return status;
}
