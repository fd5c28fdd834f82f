/*
 * The report of bench/load: per kind of request the outcomes and latency
 * percentiles, the daemon's counters, RSS and descriptors before and after,
 * the verdict, and the same figures as JSON.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "load.h"

static const char *const kind_names[LK__COUNT] = {
	"hit (text)", "hit (digest)", "miss (herd)", "compile error", "malformed", "slow client",
};
static const char *const kind_keys[LK__COUNT] = {
	"hit_text", "hit_digest", "miss", "compile_error", "malformed", "slow",
};
static const char *const counter_names[] = {
	"requests", "hits", "misses", "builds_started", "builds_ok", "builds_failed", "joined",
	"need_sources", "text_waits", "source_texts", "busy", "stalled",
};
#define NCOUNTERS (sizeof(counter_names) / sizeof(counter_names[0]))

/* Outcomes and latencies of one kind (LK__COUNT: all kinds). */
struct kind_stats {
	uint64_t n;
	uint64_t out[LO__COUNT];
	float *lat;           /* of the requests that got a reply, sorted */
	size_t nlat;
	double p50, p90, p99, max;
};

/* Sums over the clients. */
struct totals {
	uint64_t fds, verified, starters, joined, cached, reconnects, retries, stray_fds, nerr;
	int miss_ok, fail_seen;
	int64_t delta[NCOUNTERS];
};

void load_problem(struct load_result *res, const char *fmt, ...)
{
	va_list ap;

	if (res->nproblems < (int)(sizeof(res->problems) / sizeof(res->problems[0]))) {
		va_start(ap, fmt);
		vsnprintf(res->problems[res->nproblems], sizeof(res->problems[0]), fmt, ap);
		va_end(ap);
	}
	res->nproblems++;
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return x < y ? -1 : x > y;
}

/* The nearest-rank percentile of n sorted values; -1 when there are none. */
static double percentile(const float *v, size_t n, double p)
{
	double rank = p * (double)n;
	size_t k = (size_t)rank;

	if (n == 0)
		return -1;
	if ((double)k < rank)
		k++;
	return v[k > 0 ? k - 1 : 0];
}

static void kind_stats(const struct load_ctx *x, struct kind_stats ks[LK__COUNT + 1])
{
	size_t n = (size_t)x->o->clients * (size_t)x->o->requests;

	memset(ks, 0, sizeof(*ks) * (LK__COUNT + 1));
	for (int k = 0; k <= LK__COUNT; k++) {
		ks[k].lat = malloc((n ? n : 1) * sizeof(float));
		if (!ks[k].lat) {
			fprintf(stderr, "load: out of memory\n");
			exit(2);
		}
	}
	for (size_t i = 0; i < n; i++) {
		const struct load_rec *r = &x->recs[i];
		struct kind_stats *a = &ks[r->kind], *all = &ks[LK__COUNT];

		a->n++;
		all->n++;
		a->out[r->outcome]++;
		all->out[r->outcome]++;
		if (r->outcome != LO_LOST && r->ms >= 0) {
			a->lat[a->nlat++] = r->ms;
			all->lat[all->nlat++] = r->ms;
		}
	}
	for (int k = 0; k <= LK__COUNT; k++) {
		qsort(ks[k].lat, ks[k].nlat, sizeof(float), cmp_float);
		ks[k].p50 = percentile(ks[k].lat, ks[k].nlat, 0.50);
		ks[k].p90 = percentile(ks[k].lat, ks[k].nlat, 0.90);
		ks[k].p99 = percentile(ks[k].lat, ks[k].nlat, 0.99);
		ks[k].max = ks[k].nlat ? ks[k].lat[ks[k].nlat - 1] : -1;
	}
}

static int64_t counter(const cJSON *st, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(st, name);

	return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : -1;
}

static void totals(const struct load_ctx *x, const struct load_result *res, struct totals *t)
{
	memset(t, 0, sizeof(*t));
	for (int ci = 0; ci < x->o->clients; ci++) {
		const struct load_child *c = &x->children[ci];

		t->fds += c->fds;
		t->verified += c->verified;
		t->starters += c->starters;
		t->joined += c->joined;
		t->cached += c->cached;
		t->reconnects += c->reconnects;
		t->retries += c->retries;
		t->stray_fds += c->stray_fds;
		t->nerr += (uint64_t)c->nerr;
	}
	for (int k = 0; k < x->o->bursts; k++) {
		t->miss_ok += x->shm->miss_ok[k];
		t->fail_seen += x->shm->fail_seen[k];
	}
	for (size_t i = 0; i < NCOUNTERS; i++) {
		int64_t a = counter(res->d.st_before, counter_names[i]);
		int64_t b = counter(res->d.st_after, counter_names[i]);

		t->delta[i] = a >= 0 && b >= 0 ? b - a : -1;
	}
}

static int64_t delta(const struct totals *t, const char *name)
{
	for (size_t i = 0; i < NCOUNTERS; i++)
		if (strcmp(counter_names[i], name) == 0)
			return t->delta[i];
	return -1;
}

/*
 * Single-flight: each new program built exactly once, each failing burst
 * built at least once and at most once per failing request (failures are
 * not cached). A lost or busy request may have started a build that no
 * reply tells of, so with those the bounds widen.
 */
static void check_builds(const struct load_opts *o, const struct kind_stats *ks,
			 const struct totals *t, struct load_result *res)
{
	int64_t ok = delta(t, "builds_ok"), failed = delta(t, "builds_failed");
	int64_t started = delta(t, "builds_started");
	uint64_t miss_unsure = ks[LK_MISS].out[LO_LOST] + ks[LK_MISS].out[LO_BUSY];
	uint64_t fail_most = ks[LK_FAIL].out[LO_OK] + ks[LK_FAIL].out[LO_LOST] +
			     ks[LK_FAIL].out[LO_BUSY];

	if (ok < 0 || failed < 0 || started < 0) {
		load_problem(res, "kilnd's status lacks the build counters");
		return;
	}
	if ((uint64_t)t->miss_ok != t->starters ||
	    (miss_unsure == 0 && ok != t->miss_ok) ||
	    (miss_unsure > 0 && (ok < t->miss_ok || ok > o->bursts)))
		load_problem(res, "builds_ok +%lld, but %d new programs came back and %llu replies "
			     "say they started a build: not exactly one build per program",
			     (long long)ok, t->miss_ok, (unsigned long long)t->starters);
	if (failed < t->fail_seen || (uint64_t)failed > fail_most)
		load_problem(res, "builds_failed +%lld, outside %d (bursts with build_failed) .. "
			     "%llu (failing requests)", (long long)failed, t->fail_seen,
			     (unsigned long long)fail_most);
	if (started != ok + failed)
		load_problem(res, "builds_started +%lld is not builds_ok + builds_failed (%lld)",
			     (long long)started, (long long)(ok + failed));
}

static void check_run(const struct load_ctx *x, const struct kind_stats *ks,
		      const struct totals *t, struct load_result *res)
{
	const struct load_daemon *d = &res->d;
	const struct kind_stats *all = &ks[LK__COUNT];

	if (all->out[LO_LOST] > 0)
		load_problem(res, "%llu requests lost", (unsigned long long)all->out[LO_LOST]);
	if (all->out[LO_WRONG] > 0)
		load_problem(res, "%llu wrong replies", (unsigned long long)all->out[LO_WRONG]);
	if (t->stray_fds > 0)
		load_problem(res, "%llu descriptors came without a reply that claimed them",
			     (unsigned long long)t->stray_fds);
	if (res->key_mismatch > 0)
		load_problem(res, "%d clients got another key for a new program than the cache has",
			     res->key_mismatch);
	if (!d->alive)
		load_problem(res, "kilnd (pid %d) is gone", (int)x->o->pid);
	else if (!d->status_after_ok)
		load_problem(res, "kilnd does not answer status after the run");
	if (d->rss_before_kb <= 0 || d->rss_after_kb <= 0)
		load_problem(res, "cannot read kilnd's RSS from /proc/%d/status", (int)x->o->pid);
	else if (x->o->rss_limit > 0 &&
		 (double)d->rss_after_kb > x->o->rss_limit * (double)d->rss_before_kb)
		load_problem(res, "kilnd's RSS grew from %ld to %ld KiB, above %.0f %%",
			     d->rss_before_kb, d->rss_after_kb, (x->o->rss_limit - 1) * 100);
	if (d->st_after && counter(d->st_after, "connections") > 1)
		load_problem(res, "kilnd still counts %lld connections after every client left",
			     (long long)counter(d->st_after, "connections") - 1);
	if (d->st_before && d->st_after)
		check_builds(x->o, ks, t, res);
	/* Every busy the daemon counted reached a client (refused connections
	 * are counted as busy too, so only without them). */
	if (delta(t, "busy") >= 0 && t->retries == 0 && all->out[LO_LOST] == 0 &&
	    (uint64_t)delta(t, "busy") != all->out[LO_BUSY])
		load_problem(res, "kilnd counted %lld busy replies, the clients got %llu",
			     (long long)delta(t, "busy"), (unsigned long long)all->out[LO_BUSY]);
}

static void print_ms(double v)
{
	if (v < 0)
		printf(" %8s", "-");
	else if (v < 10)
		printf(" %8.2f", v);
	else
		printf(" %8.1f", v);
}

static void print_kinds(const struct kind_stats *ks)
{
	printf("%-15s %9s %9s %6s %6s %6s %8s %8s %8s %8s\n", "kind", "requests", "ok", "busy",
	       "lost", "wrong", "p50 ms", "p90 ms", "p99 ms", "max ms");
	for (int k = 0; k <= LK__COUNT; k++) {
		const struct kind_stats *s = &ks[k];

		printf("%-15s %9llu %9llu %6llu %6llu %6llu", k < LK__COUNT ? kind_names[k] : "all",
		       (unsigned long long)s->n, (unsigned long long)s->out[LO_OK],
		       (unsigned long long)s->out[LO_BUSY], (unsigned long long)s->out[LO_LOST],
		       (unsigned long long)s->out[LO_WRONG]);
		print_ms(s->p50);
		print_ms(s->p90);
		print_ms(s->p99);
		print_ms(s->max);
		printf("\n");
	}
}

static void print_mib(const char *what, long kb)
{
	if (kb < 0)
		printf("%s n/a", what);
	else
		printf("%s %.1f MiB", what, (double)kb / 1024);
}

static void print_daemon(const struct load_ctx *x, const struct kind_stats *ks,
			 const struct totals *t, const struct load_result *res)
{
	const struct load_daemon *d = &res->d;

	printf("\nkilnd's counters over the run:");
	for (size_t i = 0; i < NCOUNTERS; i++) {
		printf("%s %s ", i % 5 == 0 ? "\n " : ",", counter_names[i]);
		if (t->delta[i] < 0)
			printf("n/a");
		else
			printf("+%lld", (long long)t->delta[i]);
	}
	printf("\ncompile errors: %lld failed builds for %llu build_failed replies in %d bursts "
	       "(failures are not cached)\n", (long long)delta(t, "builds_failed"),
	       (unsigned long long)ks[LK_FAIL].out[LO_OK], t->fail_seen);
	printf("kilnd pid %d: %s;", (int)x->o->pid, d->alive ? "alive" : "GONE");
	print_mib(" RSS before", d->rss_before_kb);
	print_mib(", after", d->rss_after_kb);
	if (d->rss_before_kb > 0 && d->rss_after_kb > 0)
		printf(" (%+.1f %%", 100.0 * (double)(d->rss_after_kb - d->rss_before_kb) /
		       (double)d->rss_before_kb);
	if (d->rss_before_kb > 0 && d->rss_after_kb > 0 && x->o->rss_limit > 0)
		printf(", limit %+.0f %%)", (x->o->rss_limit - 1) * 100);
	else if (d->rss_before_kb > 0 && d->rss_after_kb > 0)
		printf(", NOT CHECKED: --rss-limit 0)");
	print_mib(", peak", d->hwm_after_kb);
	printf("\nkilnd descriptors before %d, after %d; connections after %lld (this report's "
	       "own)\n", d->fds_before, d->fds_after, (long long)counter(d->st_after, "connections"));
	if (d->cpu_before_s >= 0 && d->cpu_after_s >= 0 && res->wall_s > 0)
		printf("kilnd CPU time over the run %.1f s: %.0f %% of one core, %.1f us per request "
		       "(the clients share the same cores)\n", d->cpu_after_s - d->cpu_before_s,
		       100 * (d->cpu_after_s - d->cpu_before_s) / res->wall_s,
		       1e6 * (d->cpu_after_s - d->cpu_before_s) / (double)ks[LK__COUNT].n);
}

static void print_report(const struct load_ctx *x, const struct kind_stats *ks,
			 const struct totals *t, const struct load_result *res)
{
	const struct load_opts *o = x->o;
	const struct kind_stats *all = &ks[LK__COUNT];

	printf("kiln load test: %d clients x %d requests, %d bursts, %d pre-built programs, "
	       "seed %llu\n", o->clients, o->requests, o->bursts, o->programs,
	       (unsigned long long)o->seed);
	printf("wall %.2f s, %llu requests, %.0f requests/s\n\n", res->wall_s,
	       (unsigned long long)all->n, res->wall_s > 0 ? (double)all->n / res->wall_s : 0.0);
	print_kinds(ks);
	printf("\nnew programs: %llu replies started a build, %llu joined one, %llu came from "
	       "the cache; every client got the key the cache has: %s\n",
	       (unsigned long long)t->starters, (unsigned long long)t->joined,
	       (unsigned long long)t->cached, res->key_mismatch ? "NO" : "yes");
	printf("descriptors: %llu received and closed, %llu artifacts compared byte for byte, "
	       "%llu left unclaimed\n", (unsigned long long)t->fds,
	       (unsigned long long)t->verified, (unsigned long long)t->stray_fds);
	printf("connections: %llu made again after a loss, %llu attempts refused\n",
	       (unsigned long long)t->reconnects, (unsigned long long)t->retries);
	print_daemon(x, ks, t, res);
}

static void print_problems(const struct load_ctx *x, const struct load_result *res)
{
	int shown = 0;

	for (int i = 0; i < res->nproblems && i < 16; i++)
		printf("  - %s\n", res->problems[i]);
	for (int ci = 0; ci < x->o->clients && shown < 20; ci++)
		for (int e = 0; e < x->children[ci].nerr && e < LOAD_NERR && shown < 20; e++, shown++)
			printf("    %s\n", x->children[ci].err[e]);
}

static cJSON *kind_json(const struct kind_stats *s)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddNumberToObject(o, "requests", (double)s->n);
	cJSON_AddNumberToObject(o, "ok", (double)s->out[LO_OK]);
	cJSON_AddNumberToObject(o, "busy", (double)s->out[LO_BUSY]);
	cJSON_AddNumberToObject(o, "lost", (double)s->out[LO_LOST]);
	cJSON_AddNumberToObject(o, "wrong", (double)s->out[LO_WRONG]);
	cJSON_AddNumberToObject(o, "p50_ms", s->p50);
	cJSON_AddNumberToObject(o, "p90_ms", s->p90);
	cJSON_AddNumberToObject(o, "p99_ms", s->p99);
	cJSON_AddNumberToObject(o, "max_ms", s->max);
	return o;
}

static cJSON *daemon_json(const struct load_ctx *x, const struct totals *t,
			  const struct load_result *res)
{
	const struct load_daemon *d = &res->d;
	cJSON *o = cJSON_CreateObject();
	cJSON *c = cJSON_AddObjectToObject(o, "counters_delta");

	cJSON_AddNumberToObject(o, "pid", x->o->pid);
	cJSON_AddBoolToObject(o, "alive", d->alive);
	cJSON_AddNumberToObject(o, "rss_before_kib", (double)d->rss_before_kb);
	cJSON_AddNumberToObject(o, "rss_after_kib", (double)d->rss_after_kb);
	cJSON_AddNumberToObject(o, "rss_peak_kib", (double)d->hwm_after_kb);
	cJSON_AddNumberToObject(o, "rss_limit", x->o->rss_limit);
	cJSON_AddNumberToObject(o, "fds_before", d->fds_before);
	cJSON_AddNumberToObject(o, "fds_after", d->fds_after);
	if (d->cpu_before_s >= 0 && d->cpu_after_s >= 0)
		cJSON_AddNumberToObject(o, "cpu_s", d->cpu_after_s - d->cpu_before_s);
	for (size_t i = 0; i < NCOUNTERS; i++)
		cJSON_AddNumberToObject(c, counter_names[i], (double)t->delta[i]);
	return o;
}

static int write_json(const struct load_ctx *x, const struct kind_stats *ks,
		      const struct totals *t, const struct load_result *res)
{
	const struct load_opts *o = x->o;
	cJSON *j = cJSON_CreateObject();
	cJSON *kinds = cJSON_AddObjectToObject(j, "kinds");
	cJSON *probs = cJSON_AddArrayToObject(j, "problems");
	char *s;
	FILE *f;
	int rc = 0;

	cJSON_AddNumberToObject(j, "clients", o->clients);
	cJSON_AddNumberToObject(j, "requests_per_client", o->requests);
	cJSON_AddNumberToObject(j, "bursts", o->bursts);
	cJSON_AddNumberToObject(j, "seed", (double)o->seed);
	cJSON_AddNumberToObject(j, "wall_s", res->wall_s);
	cJSON_AddNumberToObject(j, "requests_per_s",
				res->wall_s > 0 ? (double)ks[LK__COUNT].n / res->wall_s : 0);
	for (int k = 0; k < LK__COUNT; k++)
		cJSON_AddItemToObject(kinds, kind_keys[k], kind_json(&ks[k]));
	cJSON_AddItemToObject(kinds, "all", kind_json(&ks[LK__COUNT]));
	cJSON_AddNumberToObject(j, "miss_started", (double)t->starters);
	cJSON_AddNumberToObject(j, "miss_joined", (double)t->joined);
	cJSON_AddNumberToObject(j, "miss_cached", (double)t->cached);
	cJSON_AddNumberToObject(j, "descriptors", (double)t->fds);
	cJSON_AddNumberToObject(j, "artifacts_compared", (double)t->verified);
	cJSON_AddNumberToObject(j, "reconnects", (double)t->reconnects);
	cJSON_AddNumberToObject(j, "connect_refused", (double)t->retries);
	cJSON_AddItemToObject(j, "kilnd", daemon_json(x, t, res));
	for (int i = 0; i < res->nproblems && i < 16; i++)
		cJSON_AddItemToArray(probs, cJSON_CreateString(res->problems[i]));
	cJSON_AddBoolToObject(j, "pass", res->nproblems == 0);
	s = cJSON_Print(j);
	f = fopen(o->json, "we");
	if (!s || !f || fprintf(f, "%s\n", s) < 0)
		rc = -1;
	if (f && fclose(f) != 0)
		rc = -1;
	if (rc < 0)
		fprintf(stderr, "load: cannot write %s\n", o->json);
	free(s);
	cJSON_Delete(j);
	return rc;
}

int load_report(const struct load_ctx *x, struct load_result *res)
{
	struct kind_stats ks[LK__COUNT + 1];
	struct totals t;
	int rc;

	kind_stats(x, ks);
	totals(x, res, &t);
	check_run(x, ks, &t, res);
	print_report(x, ks, &t, res);
	printf("\nresult: %s\n", res->nproblems == 0 ? "PASS" : "FAIL");
	print_problems(x, res);
	fflush(stdout);
	rc = res->nproblems == 0 ? 0 : 1;
	if (x->o->json && write_json(x, ks, &t, res) != 0 && rc == 0)
		rc = 2;
	for (int k = 0; k <= LK__COUNT; k++)
		free(ks[k].lat);
	cJSON_Delete(res->d.st_before);
	cJSON_Delete(res->d.st_after);
	return rc;
}
