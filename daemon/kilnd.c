/*
 * Daemon-wide services used by the modules: thread-pool work with a pending
 * count, batched use counts, cache totals and eviction. The stop sequence
 * and the timers that watch the daemon as a whole are lifecycle.c's, one
 * layer up, reached through d->stop.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kilnd.h"
#include "log.h"
#include "table.h"
#include "util.h"
#include "thread.h"

#define TOUCH_FLUSH_MS 1000

const struct toolchain *kilnd_toolchain(const struct kilnd *d, const char *name)
{
	for (size_t i = 0; i < d->ntoolchains; i++) {
		if (strcmp(d->toolchains[i].name, name) == 0)
			return &d->toolchains[i];
	}
	return NULL;
}

struct work {
	uv_work_t req;
	struct kilnd *d;
	enum pool_job kind;
	void (*fn)(void *);
	void (*done)(void *, int);
	void *arg;
};

#define KILND_POOL_JOB_NAME(id, name) name,
static const char *const pool_job_names[POOL__COUNT] = { KILND_POOL_JOBS(KILND_POOL_JOB_NAME) };
#undef KILND_POOL_JOB_NAME

const char *kilnd_pool_job_name(enum pool_job kind)
{
	return (unsigned)kind < POOL__COUNT ? pool_job_names[kind] : "unknown";
}

static void work_run(uv_work_t *req)
{
	ASSERT_POOL();
	struct work *w = req->data;
	w->fn(w->arg);
}

static void work_after(uv_work_t *req, int status)
{
	ASSERT_LOOP();
	struct work *w = req->data;
	w->d->work_pending--;
	if (status != 0)
		log_warn("pool job %s: %s; its work was not done", kilnd_pool_job_name(w->kind),
			 uv_strerror(status));
	if (w->done != NULL)
		w->done(w->arg, status);
	free(w);
}

int kilnd_work(struct kilnd *d, enum pool_job kind, void (*fn)(void *arg),
	       void (*done)(void *arg, int status), void *arg)
{
	ASSERT_LOOP();
	struct work *w = calloc(1, sizeof(*w));
	if (w == NULL)
		return UV_ENOMEM;
	w->req.data = w;
	w->d = d;
	w->kind = kind;
	w->fn = fn;
	w->done = done;
	w->arg = arg;
	int rc = uv_queue_work(d->loop, &w->req, work_run, work_after);
	if (rc != 0) {
		free(w);
		return rc;
	}
	d->work_pending++;
	return 0;
}

void kilnd_activity(struct kilnd *d)
{
	d->last_activity_ns = util_now_ns();
}

struct touch {
	uint64_t count;
	int64_t last;
};

void kilnd_touch(struct kilnd *d, const char *key)
{
	struct touch *t = table_get(d->touches, key);
	if (t == NULL) {
		t = calloc(1, sizeof(*t));
		if (t == NULL || table_put(d->touches, key, t, NULL) != 0) {
			free(t);
			return;
		}
	}
	t->count++;
	t->last = util_wall_s();
}

void kilnd_pending_uses(struct kilnd *d, struct store_entry *e)
{
	struct touch *t = table_get(d->touches, e->key);
	if (t == NULL)
		return;
	e->uses += t->count;
	if (t->last > e->last_used)
		e->last_used = t->last;
}

struct touch_batch {
	struct kilnd *d;
	char **keys;
	int64_t *times;
	uint64_t *counts;
	size_t n;
};

static void collect_touch(const char *key, void *val, void *ctx)
{
	struct touch_batch *tb = ctx;
	struct touch *t = val;
	tb->keys[tb->n] = strdup(key);
	if (tb->keys[tb->n] == NULL)
		return;
	tb->times[tb->n] = t->last;
	tb->counts[tb->n] = t->count;
	tb->n++;
}

static void touch_batch_free(void *arg)
{
	struct touch_batch *tb = arg;
	for (size_t i = 0; i < tb->n; i++)
		free(tb->keys[i]);
	free(tb->keys);
	free(tb->times);
	free(tb->counts);
	free(tb);
}

static void touch_done(void *arg, int status)
{
	(void)status;   /* cancelled: those uses are lost, as at a crash */
	touch_batch_free(arg);
}

static void touch_work(void *arg)
{
	struct touch_batch *tb = arg;
	int rc = store_touch(tb->d->store, (const char *const *)tb->keys, tb->times, tb->counts, tb->n);
	if (rc != 0)
		log_warn("cannot record %zu uses in the index: %s", tb->n, strerror(-rc));
}

/* Takes the queued uses out of the table into a batch for store_touch. */
static struct touch_batch *take_touches(struct kilnd *d)
{
	size_t n = table_count(d->touches);
	struct table *fresh = table_new();
	struct touch_batch *tb = calloc(1, sizeof(*tb));
	if (n == 0 || fresh == NULL || tb == NULL)
		goto fail;
	tb->d = d;
	tb->keys = calloc(n, sizeof(*tb->keys));
	tb->times = calloc(n, sizeof(*tb->times));
	tb->counts = calloc(n, sizeof(*tb->counts));
	if (tb->keys == NULL || tb->times == NULL || tb->counts == NULL)
		goto fail;
	table_foreach(d->touches, collect_touch, tb);
	table_free(d->touches, free);
	d->touches = fresh;
	return tb;
fail:
	table_free(fresh, NULL);
	if (tb != NULL)
		touch_batch_free(tb);
	return NULL;
}

void *kilnd_touches_take(struct kilnd *d)
{
	return take_touches(d);
}

void kilnd_touches_write(void *batch)
{
	if (batch == NULL)
		return;
	touch_work(batch);
	touch_batch_free(batch);
}

static void on_touch_timer(uv_timer_t *t)
{
	struct kilnd *d = t->data;
	struct touch_batch *tb = take_touches(d);
	if (tb != NULL && kilnd_work(d, POOL_TOUCH, touch_work, touch_done, tb) != 0)
		touch_batch_free(tb);
}

void kilnd_flush_touches(struct kilnd *d)
{
	struct touch_batch *tb = take_touches(d);
	if (tb != NULL) {
		touch_work(tb);
		touch_batch_free(tb);
	}
}

struct evict_job {
	struct kilnd *d;
	void *touches;
	uint64_t removed, freed;
	uint64_t index, other;      /* store_overhead after the eviction */
	int rc;
};


static void evict_work(void *arg)
{
	struct evict_job *j = arg;
	/* Eviction goes by last use: recent uses must be in the index first. */
	kilnd_touches_write(j->touches);
	j->touches = NULL;
	j->rc = store_evict(j->d->store, j->d->cfg->max_size, &j->removed, &j->freed);
	store_overhead(j->d->store, &j->index, &j->other);
}

/* Reads the entries' totals from the index (one row); the files outside
 * the entries keep their last measurement (measure_overhead). False when
 * it cannot. */
static bool read_totals(struct kilnd *d)
{
	int rc = store_footprint_entries(d->store, &d->disk);
	if (rc != 0) {
		log_warn("cannot read cache totals: %s", strerror(-rc));
		return false;
	}
	d->entries = d->disk.entries;
	d->bytes = d->disk.bytes;
	return true;
}

void kilnd_set_overhead(struct kilnd *d, uint64_t index, uint64_t other)
{
	d->disk.index = index;
	d->disk.other = other;
	d->disk.total = d->disk.entries_disk + index + other;
	d->overhead_ns = util_now_ns();
}

static void evict_done(void *arg, int status)
{
	struct evict_job *j = arg;
	j->d->evicting = false;
	if (status != 0)
		j->rc = status;
	if (j->rc == 0) {
		j->d->c.evicted += j->removed;
		j->d->c.evicted_bytes += j->freed;
	}
	if (j->rc != 0)
		log_warn("eviction failed: %s", strerror(-j->rc));
	else if (j->removed > 0) {
		char sz[32];
		log_info("evicted %llu entries (%s on disk) to stay under --max-size",
			 (unsigned long long)j->removed, util_format_size(j->freed, sz, sizeof(sz)));
	}
	struct kilnd *d = j->d;
	uint64_t index = j->index, other = j->other;
	free(j);
	/* No second round from here: what is left over the limit is pinned or
	 * not the entries' (the next write tries again), said once. */
	if (d->stopping || !read_totals(d))
		return;
	kilnd_set_overhead(d, index, other);
	bool over = d->disk.total > d->cfg->max_size;
	if (over && !d->evict_over_said) {
		char t[32], m[32], i[32], o[32], e[32];
		log_warn("the cache takes %s on disk after eviction, over --max-size %s: "
			 "its index takes %s, logs and other files %s, the pinned entries "
			 "left %s; raise the limit or unpin entries",
			 util_format_size(d->disk.total, t, sizeof(t)),
			 util_format_size(d->cfg->max_size, m, sizeof(m)),
			 util_format_size(d->disk.index, i, sizeof(i)),
			 util_format_size(d->disk.other, o, sizeof(o)),
			 util_format_size(d->disk.entries_disk, e, sizeof(e)));
	}
	d->evict_over_said = over;
}

/* The files outside the entries (index, WAL, failed builds' logs,
 * directories), measured on the pool at most once a second: a listing of
 * objects/ and logs/failed/ is no work for the loop's every write. */
struct measure_job {
	struct kilnd *d;
	struct store *store;
	uint64_t index, other;
};


static void measure_work(void *arg)
{
	struct measure_job *j = arg;
	store_overhead(j->store, &j->index, &j->other);
}

static void measure_done(void *arg, int status)
{
	struct measure_job *j = arg;
	struct kilnd *d = j->d;
	d->measuring = false;
	/* Not run, or a cache directory made anew meanwhile: nothing measured. */
	bool same = status == 0 && j->store == d->store;
	if (same)
		kilnd_set_overhead(d, j->index, j->other);
	free(j);
	if (same && !d->stopping && d->disk.total > d->cfg->max_size)
		kilnd_refresh_totals(d);
}

static void measure_overhead(struct kilnd *d)
{
	if (d->measuring || d->stopping || util_now_ns() - d->overhead_ns < 1000000000u)
		return;
	struct measure_job *j = calloc(1, sizeof(*j));
	if (j == NULL)
		return;
	j->d = d;
	j->store = d->store;
	d->measuring = true;
	if (kilnd_work(d, POOL_MEASURE, measure_work, measure_done, j) != 0) {
		d->measuring = false;
		free(j);
	}
}

void kilnd_refresh_totals(struct kilnd *d)
{
	if (!read_totals(d))
		return;
	measure_overhead(d);
	if (d->disk.total <= d->cfg->max_size || d->evicting || d->stopping)
		return;
	struct evict_job *j = calloc(1, sizeof(*j));
	if (j == NULL)
		return;
	j->d = d;
	j->touches = kilnd_touches_take(d);
	d->evicting = true;
	if (kilnd_work(d, POOL_EVICT, evict_work, evict_done, j) != 0) {
		d->evicting = false;
		kilnd_touches_write(j->touches);
		free(j);
	}
}

struct sweep_job {
	struct kilnd *d;
	struct store *store;
	struct store_sweep sw;
	struct store_reconcile_stats st;
	uint64_t start_ns;
	int rc;
};

static void sweep_work(void *arg)
{
	struct sweep_job *j = arg;
	j->rc = store_sweep_step(j->store, &j->sw, &j->st);
}

static void sweep_done(void *arg, int status)
{
	struct sweep_job *j = arg;
	struct kilnd *d = j->d;
	if (status != 0)
		j->rc = status;
	if (j->rc == 1 && !d->stopping && j->store == d->store &&
	    kilnd_work(d, POOL_SWEEP, sweep_work, sweep_done, j) == 0)
		return;
	if (j->rc == 0) {
		d->sweep_pending = false;
		log_info("checked the cache in %.1f s: %llu rows without an "
			 "object dropped, %llu objects adopted, %llu stray files removed",
			 (double)(util_now_ns() - j->start_ns) / 1e9,
			 (unsigned long long)j->st.rows_dropped,
			 (unsigned long long)j->st.objects_adopted,
			 (unsigned long long)j->st.objects_removed);
		if (!d->stopping)
			kilnd_refresh_totals(d);
	} else if (j->rc < 0) {
		log_warn("the check of the cache failed: %s; the next start checks "
			 "again", strerror(-j->rc));
	}
	free(j);
}

void kilnd_sweep_start(struct kilnd *d)
{
	struct sweep_job *j = calloc(1, sizeof(*j));
	if (j == NULL)
		return;
	j->d = d;
	j->store = d->store;
	j->start_ns = util_now_ns();
	/* What the running kilnd writes from now on is not a crash's leftover.
	 * File systems stamp files with the coarse clock: what this kilnd
	 * writes later has a time at or after this one. */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	j->sw.before_ns = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
	d->sweep_pending = true;
	if (kilnd_work(d, POOL_SWEEP, sweep_work, sweep_done, j) != 0)
		free(j);
}

/* The logs of failed builds belong to no entry, so eviction never removes
 * them: they are pruned by age and count (store_prune_failed) a second after
 * the start and every 6 hours, and by kiln gc. */
#define PRUNE_FIRST_MS 1000
#define PRUNE_EVERY_MS (6ull * 3600 * 1000)

struct prune_job {
	struct store *store;
	uint64_t removed;
	int rc;
};

static void prune_work(void *arg)
{
	struct prune_job *j = arg;
	j->rc = store_prune_failed(j->store, util_wall_s(), STORE_FAILED_MAX_AGE_S,
				   STORE_FAILED_MAX_FILES, &j->removed);
}

static void prune_done(void *arg, int status)
{
	struct prune_job *j = arg;
	if (status != 0)
		j->rc = status;
	if (j->rc < 0)
		log_warn("cannot prune the logs of failed builds: %s", strerror(-j->rc));
	else if (j->removed > 0)
		log_info("removed %llu logs of failed builds (older than %d days, or beyond the "
			 "newest %d)", (unsigned long long)j->removed,
			 STORE_FAILED_MAX_AGE_S / 86400, STORE_FAILED_MAX_FILES);
	free(j);
}

static void on_prune_timer(uv_timer_t *t)
{
	struct kilnd *d = t->data;
	struct prune_job *j = d->stopping ? NULL : calloc(1, sizeof(*j));
	if (j == NULL)
		return;
	j->store = d->store;
	if (kilnd_work(d, POOL_PRUNE, prune_work, prune_done, j) != 0)
		free(j);
}

int kilnd_timers_start(struct kilnd *d)
{
	uv_timer_init(d->loop, &d->touch_timer);
	d->touch_timer.data = d;
	uv_timer_start(&d->touch_timer, on_touch_timer, TOUCH_FLUSH_MS, TOUCH_FLUSH_MS);
	uv_timer_init(d->loop, &d->prune_timer);
	d->prune_timer.data = d;
	uv_timer_start(&d->prune_timer, on_prune_timer, PRUNE_FIRST_MS, PRUNE_EVERY_MS);
	return 0;
}

void kilnd_timers_stop(struct kilnd *d)
{
	uv_timer_stop(&d->touch_timer);
	uv_close((uv_handle_t *)&d->touch_timer, NULL);
	uv_timer_stop(&d->prune_timer);
	uv_close((uv_handle_t *)&d->prune_timer, NULL);
}

void kilnd_stop(struct kilnd *d)
{
	if (d->stop != NULL)
		d->stop(d);
}
