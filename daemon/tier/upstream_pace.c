/*
 * The pace of looking at the tier again: the list of everything waiting on
 * another node (flights waiting for a claimed build, lookups waiting for an
 * alias's lease), each one's back-off, and one timer that gives the looks
 * out in turn at a rate shared by the job's nodes (jobsize.h), the job's
 * size taken from --job-nodes or what clients said. Loop thread; the looks
 * themselves are the waiters' pool jobs (upstream.c, upstream_lease.c).
 */
#include <stdint.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "jobsize.h"
#include "kilnd.h"
#include "stats.h"
#include "upstream.h"
#include "upstream_int.h"
#include "util.h"

/* Waiting flights look again after the first tick, then less and less
 * often up to POLL_MAX_MS: a claim is usually held for a compile of
 * seconds, and each look costs the shared filesystem's metadata server a
 * few requests. */
#define POLL_MAX_MS 2000
/* However many flights wait, one kilnd looks at most
 * jobsize_looks_per_s() times a second in all: --upstream-looks shared by
 * the job's nodes, at most 20 (the rest look later). The load on the
 * metadata server is then the same for any number of nodes and programs.
 * A client's word on its job's size counts this long after its hello. */
#define HINT_NS (15ull * 60 * 1000000000)

void up_pace_init(struct up_pace *u, struct kilnd *d, uint64_t tick_ms, uint64_t max_ms)
{
	u->d = d;
	u->tick_ms = tick_ms;
	u->max_ms = max_ms;
	uv_timer_init(d->loop, &u->poll);
	u->poll.data = u;
}

void up_pace_del(struct up_pace *u, struct up_poller *f)
{
	if (!f->waiting)
		return;
	f->waiting = false;
	if (f->prev != NULL)
		f->prev->next = f->next;
	else
		u->waiting = f->next;
	if (f->next != NULL)
		f->next->prev = f->prev;
	else
		u->waiting_tail = f->prev;
	if (u->waiting == NULL && u->poll_on) {
		uv_timer_stop(&u->poll);
		u->poll_on = false;
	}
}

static void on_poll(uv_timer_t *t);

/* A factor from 0.8 to 1.2, so that the nodes of a job, which start
 * waiting together, do not look together (xorshift, seeded per process). */
static double jitter(void)
{
	static uint64_t x;
	if (x == 0)
		x = util_now_ns() ^ ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15ULL;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return 0.8 + 0.4 * (double)(x >> 11) / (double)(1ULL << 53);
}

void up_pace_add(struct up_pace *u, struct up_poller *f)
{
	f->interval_ms = f->interval_ms == 0 ? u->tick_ms : f->interval_ms * 3 / 2;
	if (f->interval_ms > POLL_MAX_MS)
		f->interval_ms = POLL_MAX_MS;
	/* Look at least four times per stale period, to see refreshes. */
	if (f->interval_ms > u->max_ms)
		f->interval_ms = u->max_ms;
	f->due_ns = util_now_ns() + (uint64_t)((double)f->interval_ms * jitter() * 1e6);
	/* At the tail: on_poll gives its looks from the head, so each flight
	 * that looked waits behind the others, and none starves at a slow
	 * pace. */
	f->waiting = true;
	f->next = NULL;
	f->prev = u->waiting_tail;
	if (u->waiting_tail != NULL)
		u->waiting_tail->next = f;
	else
		u->waiting = f;
	u->waiting_tail = f;
	if (!u->poll_on && !u->closed) {
		uv_timer_start(&u->poll, on_poll, u->tick_ms, u->tick_ms);
		u->poll_on = true;
	}
}

/* The nodes of the job: the largest of --job-nodes (or the environment)
 * and what clients said in the last HINT_NS; the source in *src. */
static long job_nodes(const struct up_pace *u, const char **src)
{
	long n = u->d->cfg->job_nodes;
	uint64_t now = util_now_ns();
	*src = u->d->cfg->job_nodes_source;
	for (int i = 0; i < UP_PACE_HINTS; i++) {
		if (u->hints[i].nodes > n && now - u->hints[i].ns < HINT_NS) {
			n = u->hints[i].nodes;
			*src = "client";
		}
	}
	return n;
}

static double looks_per_s(const struct up_pace *u)
{
	const char *src;
	return jobsize_looks_per_s(job_nodes(u, &src), u->d->cfg->upstream_looks);
}

void upstream_job_hint(struct kilnd *d, long nodes)
{
	struct up_pace *u = upstream_pace(d);
	if (u == NULL || nodes <= 0)
		return;
	/* The same size said again, else a free place, else the oldest. */
	int at = 0;
	for (int i = 0; i < UP_PACE_HINTS; i++) {
		if (u->hints[i].nodes == nodes || u->hints[i].nodes == 0) {
			at = i;
			break;
		}
		if (u->hints[i].ns < u->hints[at].ns)
			at = i;
	}
	u->hints[at].nodes = nodes;
	u->hints[at].ns = util_now_ns();
}

static void on_poll(uv_timer_t *t)
{
	struct up_pace *u = t->data;
	uint64_t now = util_now_ns();
	/* A bucket of looks, filled at the pace and holding one tick's worth
	 * (at least one look), so that a slow pace still looks now and then. */
	double per_tick = looks_per_s(u) * (double)u->tick_ms / 1000.0;
	u->tokens += per_tick;
	if (u->tokens > (per_tick > 1 ? per_tick : 1))
		u->tokens = per_tick > 1 ? per_tick : 1;
	struct up_poller *f = u->waiting;
	while (f != NULL && u->tokens >= 1) {
		struct up_poller *next = f->next;
		if (f->due_ns <= now) {
			up_pace_del(u, f);
			f->looks++;
			u->d->c.upstream_looks++;
			u->tokens -= 1;
			f->look(f);   /* starts a pool job; removes no other poller */
		}
		f = next;
	}
}

void upstream_poll_add(struct kilnd *d, struct up_poller *p)
{
	up_pace_add(upstream_pace(d), p);
}

void upstream_poll_del(struct kilnd *d, struct up_poller *p)
{
	up_pace_del(upstream_pace(d), p);
}

void up_pace_stop(struct up_pace *u)
{
	u->closed = true;
	while (u->waiting != NULL) {
		struct up_poller *p = u->waiting;
		up_pace_del(u, p);
		p->stop(p);
	}
	uv_timer_stop(&u->poll);
	uv_close((uv_handle_t *)&u->poll, NULL);
}

void up_pace_status(const struct up_pace *u, cJSON *r)
{
	const char *src;
	long nodes = job_nodes(u, &src);
	if (nodes > 0)
		cJSON_AddNumberToObject(r, "job_nodes", (double)nodes);
	else
		cJSON_AddNullToObject(r, "job_nodes");
	if (src != NULL)
		cJSON_AddStringToObject(r, "job_nodes_source", src);
	else
		cJSON_AddNullToObject(r, "job_nodes_source");
	cJSON_AddNumberToObject(r, "upstream_looks_per_s",
				jobsize_looks_per_s(nodes, u->d->cfg->upstream_looks));
	/* The flights waiting on other nodes' claims, in the order they look
	 * (the first 64), and how often each has looked. */
	cJSON *w = cJSON_AddArrayToObject(r, "upstream_waiting");
	int n = 0;
	for (const struct up_poller *f = u->waiting; w != NULL && f != NULL && n < 64;
	     f = f->next, n++) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, f->alias ? "alias" : "key", f->key);
		cJSON_AddNumberToObject(o, "looks", f->looks);
		cJSON_AddItemToArray(w, o);
	}
}
