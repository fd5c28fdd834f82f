/*
 * kilnd's statistics, kept in the index (stats.h).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kilnd.h"
#include "log.h"
#include "msg.h"
#include "stats.h"
#include "util.h"
#include "thread.h"

/* The counters of struct counters (proto/counters.h, KILN_COUNTERS), by their names
 * in status replies and in the index. upstream: shown only with --upstream
 * (upstream.c). */
static const struct {
	const char *name;
	size_t off;
	bool upstream;
} fields[] = {
#define KILND_COUNTER_ROW(n, up, help) { #n, offsetof(struct counters, n), up },
	KILN_COUNTERS(KILND_COUNTER_ROW)
#undef KILND_COUNTER_ROW
};
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))
_Static_assert(sizeof(struct counters) == NFIELDS * sizeof(uint64_t),
	       "every counter has a row");
static const char *const tc_names[] = { "hits", "misses", "builds_ok", "builds_failed" };
#define MAX_SAVED (NFIELDS + 2 + STORE_BUILD_BUCKETS + 4 * CONFIG_MAX_TOOLCHAINS)

static uint64_t *field(struct counters *c, size_t i)
{
	return (uint64_t *)(void *)((char *)c + fields[i].off);
}

static uint64_t *tc_field(struct stats_toolchain *t, size_t i)
{
	uint64_t *v[] = { &t->hits, &t->misses, &t->builds_ok, &t->builds_failed };
	return v[i];
}

/* Every counter of c and x as rows for the index; returns how many. */
static size_t snapshot(const struct kilnd *d, struct counters c, struct stats_extra x,
		       struct store_counter *out)
{
	size_t n = 0;
	for (size_t i = 0; i < NFIELDS; i++) {
		snprintf(out[n].name, sizeof(out[n].name), "%s", fields[i].name);
		out[n++].value = *field(&c, i);
	}
	snprintf(out[n].name, sizeof(out[n].name), "since");
	out[n++].value = x.since > 0 ? (uint64_t)x.since : 0;
	snprintf(out[n].name, sizeof(out[n].name), "build_ms_sum");
	out[n++].value = x.build_ms_sum;
	for (size_t b = 0; b < STORE_BUILD_BUCKETS; b++) {
		snprintf(out[n].name, sizeof(out[n].name), "build_bucket.%zu", b);
		out[n++].value = x.build_buckets[b];
	}
	for (size_t t = 0; t < d->ntoolchains; t++) {
		for (size_t i = 0; i < 4; i++) {
			snprintf(out[n].name, sizeof(out[n].name), "toolchain.%s.%s",
				 d->toolchains[t].name, tc_names[i]);
			out[n++].value = *tc_field(&x.tc[t], i);
		}
	}
	return n;
}

/* Takes one saved row into d, if it names a counter this kilnd has. */
static void load_one(struct kilnd *d, const struct store_counter *r)
{
	for (size_t i = 0; i < NFIELDS; i++) {
		if (strcmp(r->name, fields[i].name) == 0) {
			*field(&d->c, i) = r->value;
			return;
		}
	}
	if (strcmp(r->name, "since") == 0) {
		d->stats.since = (int64_t)r->value;
		return;
	}
	if (strcmp(r->name, "build_ms_sum") == 0) {
		d->stats.build_ms_sum = r->value;
		return;
	}
	unsigned b;
	int end = 0;
	if (sscanf(r->name, "build_bucket.%u%n", &b, &end) == 1 && r->name[end] == '\0' &&
	    b < STORE_BUILD_BUCKETS) {
		d->stats.build_buckets[b] = r->value;
		return;
	}
	for (size_t t = 0; t < d->ntoolchains; t++) {
		const char *tn = d->toolchains[t].name;
		size_t len = strlen(tn);
		if (strncmp(r->name, "toolchain.", 10) != 0 || strncmp(r->name + 10, tn, len) != 0 ||
		    r->name[10 + len] != '.')
			continue;
		for (size_t i = 0; i < 4; i++)
			if (strcmp(r->name + 11 + len, tc_names[i]) == 0)
				*tc_field(&d->stats.tc[t], i) = r->value;
	}
}

/* The saver's state, one per kilnd (d->saver): loop thread only. */
struct stats_saver {
	/* What was last saved, to save only changes; a save on the pool now; a
	 * zero to write (after that save: saves go one at a time, in order). */
	struct counters saved_c;
	struct stats_extra saved_x;
	bool saving, zero_pending;
	/* The counters when this kilnd started (or was zeroed): "this_run". */
	struct counters start_c;
	uv_timer_t timer;            /* saves a second after a change */
	bool timer_on;
	struct store_counter old[MAX_SAVED];   /* save_job_new's scratch */
};

void stats_load(struct kilnd *d)
{
	if (d->saver == NULL && (d->saver = calloc(1, sizeof(*d->saver))) == NULL) {
		log_warn("out of memory for the counters' saver: counting, not saving");
		return;
	}
	struct stats_saver *sv = d->saver;
	struct store_counter *rows = NULL;
	size_t n = 0;
	int rc = store_counters_read(d->store, &rows, &n);
	if (rc != 0)
		log_warn("cannot read the saved counters: %s; counting from zero", strerror(-rc));
	for (size_t i = 0; i < n; i++)
		load_one(d, &rows[i]);
	free(rows);
	if (d->stats.since == 0)
		d->stats.since = (int64_t)time(NULL);
	sv->saved_c = d->c;
	sv->start_c = d->c;
	sv->saved_x = d->stats;
	sv->saved_x.since = 0;   /* a first start saves "since" */
}

struct save_job {
	struct kilnd *d;
	struct store *store;
	bool all;
	size_t n;
	struct store_counter rows[MAX_SAVED];
};

static void save_work(void *arg)
{
	struct save_job *j = arg;
	int rc = store_counters_write(j->store, j->rows, j->n, j->all);
	if (rc != 0)
		log_warn("cannot save the counters in the index: %s", strerror(-rc));
}

static void kick(struct kilnd *d);

static void save_done(void *arg, int status)
{
	struct save_job *j = arg;
	struct kilnd *d = j->d;
	d->saver->saving = false;
	(void)status;   /* not run: the next save writes the same, later */
	free(j);
	if (d->saver->zero_pending && !d->stopping)
		kick(d);
}

static struct save_job *save_job_new(struct kilnd *d, bool all)
{
	struct stats_saver *sv = d->saver;
	struct save_job *j = calloc(1, sizeof(*j));
	if (j == NULL)
		return NULL;
	j->d = d;
	j->store = d->store;
	j->all = all;
	j->n = snapshot(d, d->c, d->stats, j->rows);
	if (!all) {
		/* Only the rows that changed since the last save. */
		size_t n = 0, nold = snapshot(d, sv->saved_c, sv->saved_x, sv->old);
		for (size_t i = 0; i < j->n; i++)
			if (i >= nold || sv->old[i].value != j->rows[i].value)
				j->rows[n++] = j->rows[i];
		j->n = n;
	}
	sv->saved_c = d->c;
	sv->saved_x = d->stats;
	if (all)
		sv->zero_pending = false;
	return j;
}

static bool changed(const struct kilnd *d)
{
	const struct stats_saver *sv = d->saver;
	return sv->zero_pending || memcmp(&sv->saved_c, &d->c, sizeof(sv->saved_c)) != 0 ||
	       memcmp(&sv->saved_x, &d->stats, sizeof(sv->saved_x)) != 0;
}

/* Starts a save on the pool unless one runs (its done starts the next). */
static void kick(struct kilnd *d)
{
	struct stats_saver *sv = d->saver;
	if (sv == NULL || sv->saving || !changed(d) || d->store == NULL)
		return;
	struct save_job *j = save_job_new(d, sv->zero_pending);
	if (j == NULL)
		return;
	sv->saving = true;
	if (kilnd_work(d, POOL_STATS_SAVE, save_work, save_done, j) != 0) {
		sv->saving = false;
		sv->zero_pending = j->all;
		memset(&sv->saved_c, 0xff, sizeof(sv->saved_c));   /* try again next time */
		free(j);
	}
}

#define SAVE_MS 1000

static void on_save_timer(uv_timer_t *t)
{
	kick(t->data);
}

void stats_timer_start(struct kilnd *d)
{
	struct stats_saver *sv = d->saver;
	if (sv == NULL)
		return;
	uv_timer_init(d->loop, &sv->timer);
	sv->timer.data = d;
	uv_timer_start(&sv->timer, on_save_timer, SAVE_MS, SAVE_MS);
	sv->timer_on = true;
}

static void on_timer_closed(uv_handle_t *h)
{
	struct kilnd *d = h->data;
	d->saver->timer_on = false;
}

void stats_timer_stop(struct kilnd *d)
{
	struct stats_saver *sv = d->saver;
	if (sv == NULL || !sv->timer_on)
		return;
	uv_timer_stop(&sv->timer);
	uv_close((uv_handle_t *)&sv->timer, on_timer_closed);
}

void stats_fini(struct kilnd *d)
{
	/* The timer's handle is closed (stats_timer_stop, then the loop ran). */
	free(d->saver);
	d->saver = NULL;
}

void stats_flush(struct kilnd *d)
{
	if (d->saver == NULL || !changed(d) || d->store == NULL)
		return;
	struct save_job *j = save_job_new(d, d->saver->zero_pending);
	if (j != NULL) {
		save_work(j);
		free(j);
	}
}

void stats_zero(struct kilnd *d)
{
	ASSERT_LOOP();
	memset(&d->c, 0, sizeof(d->c));
	memset(&d->stats, 0, sizeof(d->stats));
	d->stats.since = (int64_t)time(NULL);
	if (d->saver != NULL) {
		memset(&d->saver->start_c, 0, sizeof(d->saver->start_c));
		d->saver->zero_pending = true;
	}
	kick(d);
}

static struct stats_toolchain *tc_of(struct kilnd *d, const char *name)
{
	for (size_t t = 0; name != NULL && t < d->ntoolchains; t++)
		if (strcmp(d->toolchains[t].name, name) == 0)
			return &d->stats.tc[t];
	return NULL;
}

void stats_hit(struct kilnd *d, const char *toolchain)
{
	struct stats_toolchain *t = tc_of(d, toolchain);
	d->c.hits++;
	if (t != NULL)
		t->hits++;
}

void stats_miss(struct kilnd *d, const char *toolchain)
{
	struct stats_toolchain *t = tc_of(d, toolchain);
	d->c.misses++;
	if (t != NULL)
		t->misses++;
}

void stats_build(struct kilnd *d, const char *toolchain, bool ok, uint64_t ms)
{
	struct stats_toolchain *t = tc_of(d, toolchain);
	size_t b = 0;
	while (b < STORE_BUILD_BUCKETS - 1 && ms > store_build_bucket_ms[b])
		b++;
	d->stats.build_buckets[b]++;
	d->stats.build_ms_sum += ms;
	if (t != NULL) {
		t->builds_ok += ok;
		t->builds_failed += !ok;
	}
}

_Static_assert(sizeof(((struct stats_failed *)0)->name) > MSG_MAX_ALIAS &&
	       sizeof(((struct stats_failed *)0)->name) > MSG_MAX_LABEL &&
	       sizeof(((struct stats_failed *)0)->name) > MSG_MAX_NAME,
	       "a failed build's name is kept whole");

void stats_failed(struct kilnd *d, const char *name, const char *rkey)
{
	struct stats_failed *f = &d->stats.failed[d->stats.nfailed++ % STATS_FAILED_KEPT];
	snprintf(f->name, sizeof(f->name), "%s", name);
	snprintf(f->rkey, sizeof(f->rkey), "%.16s", rkey);
}

/* The latest failed builds of this run, the newest first. */
static void add_failed(const struct kilnd *d, cJSON *r)
{
	cJSON *a = cJSON_AddArrayToObject(r, "failed_builds");
	uint64_t n = d->stats.nfailed;
	for (uint64_t i = 0; a != NULL && i < n && i < STATS_FAILED_KEPT; i++) {
		const struct stats_failed *f = &d->stats.failed[(n - 1 - i) % STATS_FAILED_KEPT];
		cJSON *o = cJSON_CreateObject();
		if (o == NULL || !cJSON_AddItemToArray(a, o))
			return;
		cJSON_AddStringToObject(o, "name", f->name);
		cJSON_AddStringToObject(o, "rkey", f->rkey);
	}
}

void stats_add_json(const struct kilnd *d, cJSON *r)
{
	struct counters c = d->c;
	for (size_t i = 0; i < NFIELDS; i++)
		if (!fields[i].upstream)
			cJSON_AddNumberToObject(r, fields[i].name, (double)*field(&c, i));
	cJSON_AddNumberToObject(r, "stats_since", (double)d->stats.since);
	/* What this kilnd counted itself (a job's own, for a kilnd per job). */
	cJSON *run = cJSON_AddObjectToObject(r, "this_run");
	for (size_t i = 0; run != NULL && i < NFIELDS; i++)
		if (!fields[i].upstream)
			cJSON_AddNumberToObject(run, fields[i].name,
						(double)(*field(&c, i) -
							 (d->saver != NULL ? *field(&d->saver->start_c, i) : 0)));
	cJSON *tcs = cJSON_AddObjectToObject(r, "toolchain_stats");
	for (size_t t = 0; tcs != NULL && t < d->ntoolchains; t++) {
		cJSON *o = cJSON_AddObjectToObject(tcs, d->toolchains[t].name);
		struct stats_toolchain x = d->stats.tc[t];
		for (size_t i = 0; o != NULL && i < 4; i++)
			cJSON_AddNumberToObject(o, tc_names[i], (double)*tc_field(&x, i));
	}
	cJSON *h = cJSON_AddObjectToObject(r, "build_seconds");
	cJSON *bs = h != NULL ? cJSON_AddArrayToObject(h, "buckets") : NULL;
	uint64_t total = 0;
	for (size_t b = 0; bs != NULL && b < STORE_BUILD_BUCKETS; b++) {
		total += d->stats.build_buckets[b];
		cJSON *pair = cJSON_CreateArray();
		if (b < STORE_BUILD_BUCKETS - 1)
			cJSON_AddItemToArray(pair, cJSON_CreateNumber(util_round3((double)store_build_bucket_ms[b] / 1000)));
		else
			cJSON_AddItemToArray(pair, cJSON_CreateString("+Inf"));
		cJSON_AddItemToArray(pair, cJSON_CreateNumber((double)total));
		cJSON_AddItemToArray(bs, pair);
	}
	if (h != NULL) {
		cJSON_AddNumberToObject(h, "sum", util_round3((double)d->stats.build_ms_sum / 1000));
		cJSON_AddNumberToObject(h, "count", (double)total);
	}
	add_failed(d, r);
}
