/*
 * The flights (flight.h): the single-flight table, the waiters and their
 * replies, and the one place a flight moves between its states
 * (flight_enter, checked against flight_state.c): the scheduler
 * (flight_sched.c) grants it a --jobs slot, the stages (step.c,
 * publish.c) report what they begin and end, and flight.c decides what
 * follows, flight_finish ending it (this file's only). Only the
 * loop thread touches a flight, except inside its thread-pool jobs, which
 * own it while they run (the loop does not look at it until their
 * completion).
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "flight.h"
#include "alias.h"
#include "flight_int.h"
#include "recheck_memo.h"
#include "flight_state.h"
#include "prehash.h"
#include "cachedir.h"
#include "tracedir.h"
#include "kilnd.h"
#include "stats.h"
#include "log.h"
#include "prewarm.h"
#include "table.h"
#include "util.h"
#include "thread.h"

void build_input_free(struct build_input *in)
{
	if (in == NULL)
		return;
	msg_request_free(&in->req);
	if (in->bufs != NULL) {
		for (size_t i = 0; i < in->nsrc; i++)
			free(in->bufs[i]);
		free(in->bufs);
	}
	free(in->src);
	for (size_t i = 0; i < in->npch_deps; i++)
		free(in->pch_deps[i].path);
	free(in->pch_deps);
	memset(in, 0, sizeof(*in));
}

bool build_input_is_gch(const struct build_input *in)
{
	return in->req.output != NULL && strcmp(in->req.output, "pch") == 0;
}

int flight_init(struct kilnd *d)
{
	struct flights *fl = calloc(1, sizeof(*fl));
	if (fl == NULL || (fl->table = table_new()) == NULL || (fl->memo = recheck_memo_new()) == NULL ||
	    alias_init(d) != 0) {
		if (fl != NULL) {
			table_free(fl->table, NULL);
			recheck_memo_free(fl->memo);
		}
		free(fl);
		return -ENOMEM;
	}
	d->fl = fl;
	return 0;
}

void flight_fini(struct kilnd *d)
{
	if (d->fl != NULL) {
		table_free(d->fl->table, NULL);
		recheck_memo_free(d->fl->memo);
		free(d->fl);
		d->fl = NULL;
	}
	alias_fini(d);
	variants_fini(d);
}

void flight_counts(const struct kilnd *d, struct flight_counts *c)
{
	const struct flights *fl = d->fl;
	memset(c, 0, sizeof(*c));
	if (fl == NULL)
		return;
	c->flights = table_count(fl->table);
	c->in_flight = fl->in_flight;
	c->lent = fl->lent;
	c->queued = fl->queued;
	recheck_memo_counts(fl->memo, &c->peer_checks, &c->peer_checks_remembered);
}

/* The one way between a flight's states (flight_state.c's table). */
static void flight_enter(struct flight *b, enum flight_state s)
{
	ASSERT_LOOP();
	bool ok = flight_may_move(b->state, s);
	if (!ok)
		log_error("build %.16s: no way from %s to %s", b->in.rkey,
			  flight_state_name(b->state), flight_state_name(s));
	assert(ok);
	log_debug("build %.16s: %s -> %s", b->in.rkey, flight_state_name(b->state),
		  flight_state_name(s));
	b->state = s;
}

static void count_state(const char *key, void *val, void *ctx)
{
	(void)key;
	const struct flight *b = val;
	((unsigned *)ctx)[b->state]++;
}

void flight_count_states(struct kilnd *d, unsigned counts[FLIGHT__COUNT])
{
	memset(counts, 0, FLIGHT__COUNT * sizeof(counts[0]));
	table_foreach(d->fl->table, count_state, counts);
}

/* Waiters still there (their clients have not hung up). */
static unsigned waiters_left(const struct flight *b)
{
	unsigned n = 0;
	for (const struct waiter *w = b->waiters; w != NULL; w = w->next)
		n += !w->ops->gone(w->ctx);
	return n;
}

static cJSON *describe_one(const struct flight *b, const char *age, uint64_t since, uint64_t now)
{
	cJSON *o = cJSON_CreateObject();
	char key[17];
	if (o == NULL)
		return NULL;
	snprintf(key, sizeof(key), "%.16s", b->in.rkey);
	cJSON_AddStringToObject(o, "key", key);
	if (b->in.req.label != NULL)
		cJSON_AddStringToObject(o, "label", b->in.req.label);
	cJSON_AddStringToObject(o, "state", flight_state_name(b->state));
	cJSON_AddNumberToObject(o, age, since != 0 && now > since
				? util_round3((double)(now - since) / 1e9) : 0);
	/* Something to name a build by in kiln top when it has no label. */
	if (b->in.req.alias != NULL)
		cJSON_AddStringToObject(o, "alias", b->in.req.alias);
	if (b->in.req.nsources > 0 && b->in.req.sources[0].name != NULL)
		cJSON_AddStringToObject(o, "source", b->in.req.sources[0].name);
	cJSON_AddNumberToObject(o, "waiters", waiters_left(b));
	return o;
}

void flight_describe(struct kilnd *d, cJSON *running, cJSON *queue, size_t max)
{
	ASSERT_LOOP();
	uint64_t now = util_now_ns();
	size_t n = 0;
	for (const struct flight *b = d->fl->running; running != NULL && b != NULL && n < max;
	     b = b->rnext, n++)
		cJSON_AddItemToArray(running, describe_one(b, "elapsed_s", b->start_ns, now));
	n = 0;
	const struct flight *heads[2] = { d->fl->queue_head, d->fl->bg_head };
	for (int q = 0; q < 2 && queue != NULL; q++)
		for (const struct flight *b = heads[q]; b != NULL && n < max; b = b->qnext, n++) {
			cJSON *o = describe_one(b, "waited_s", b->queued_ns, now);
			if (o != NULL)
				cJSON_AddBoolToObject(o, "background", q == 1);
			cJSON_AddItemToArray(queue, o);
		}
}

struct flight *flight_find(struct kilnd *d, const char *rkey)
{
	return table_get(d->fl->table, rkey);
}

int flight_add_waiter(struct flight *b, const struct waiter_ops *ops, void *ctx, uint64_t id,
		     const char *alias, const char *alias_data, bool joined)
{
	ASSERT_LOOP();
	struct waiter *w = calloc(1, sizeof(*w));
	if (w == NULL)
		return -ENOMEM;
	if ((alias != NULL && (w->alias = strdup(alias)) == NULL) ||
	    (alias != NULL && alias_data != NULL && (w->alias_data = strdup(alias_data)) == NULL)) {
		free(w->alias);
		free(w);
		return -ENOMEM;
	}
	w->ops = ops;
	w->ctx = ctx;
	w->id = id;
	w->joined = joined;
	w->next = b->waiters;
	b->waiters = w;
	return 0;
}

static void build_free(struct flight *b)
{
	while (b->waiters != NULL) {
		struct waiter *w = b->waiters;
		b->waiters = w->next;
		w->ops->release(w->ctx);
		free(w->alias);
		free(w->alias_data);
		free(w);
	}
	build_input_free(&b->in);
	store_entry_free(&b->entry);
	if (b->fd >= 0)
		close(b->fd);
	free(b->dir);
	free(b->log);
	free(b->err_msg);
	free(b->obj_path);
	free(b->uncacheable);
	free(b);
}

/* Frees the build once its libuv handles are closed. */
static void build_release(struct flight *b)
{
	if (--b->refs == 0)
		build_free(b);
}

static void on_handle_closed(uv_handle_t *h)
{
	build_release(h->data);
}

static void build_close_handles(struct flight *b)
{
	if (b->timer_init) {
		b->timer_init = false;
		uv_timer_stop(&b->timer);
		uv_close((uv_handle_t *)&b->timer, on_handle_closed);
	}
}

/* Whether b has waiters and every one of them has gone. */
static bool abandoned(const struct flight *b)
{
	if (b->waiters == NULL)
		return false;
	for (const struct waiter *w = b->waiters; w != NULL; w = w->next)
		if (!w->ops->gone(w->ctx))
			return false;
	return true;
}

struct cancel_list {
	struct flight *v[64];
	size_t n;
};

static void collect_abandoned(const char *key, void *val, void *ctx)
{
	struct flight *b = val;
	struct cancel_list *l = ctx;
	(void)key;
	if (l->n < 64 && !b->cancelled && b->up == NULL && abandoned(b) &&
	    (b->state == FLIGHT_QUEUED || b->state == FLIGHT_COMPILING || b->state == FLIGHT_CHECKING))
		l->v[l->n++] = b;
}

static void flight_finish(struct flight *b);

static void cancel_one(struct kilnd *d, struct flight *b)
{
	b->cancelled = true;
	log_info("build %.16s (%s): every client that asked for it has gone; cancelled",
		 b->in.rkey, b->in.req.label != NULL ? b->in.req.label : "no label");
	flight_fail(b, ERR_INTERNAL, "cancelled: every client that asked for it has gone");
	if (b->state == FLIGHT_QUEUED) {
		if (sched_remove(d, b))
			flight_finish(b);
	} else {
		/* The steps' exit handlers finish it, slot and all. */
		step_kill(b);
	}
}

void flight_cancel_abandoned(struct kilnd *d)
{
	ASSERT_LOOP();
	struct cancel_list l;
	do {
		/* Finished flights leave the table, killed ones are marked: each
		 * round finds new ones, 64 at a time. */
		l.n = 0;
		table_foreach(d->fl->table, collect_abandoned, &l);
		for (size_t i = 0; i < l.n; i++)
			cancel_one(d, l.v[i]);
	} while (l.n == 64);
}

void flight_text_append(char **text, size_t *len, size_t *cap, size_t *dropped, size_t max,
		       const char *data, size_t n)
{
	size_t room = *len < max ? max - *len : 0;
	size_t take = n < room ? n : room;
	*dropped += n - take;
	if (take == 0)
		return;
	if (*len + take + 1 > *cap) {
		size_t ncap = *cap == 0 ? 4096 : *cap;
		while (ncap < *len + take + 1)
			ncap *= 2;
		char *nl = realloc(*text, ncap);
		if (nl == NULL) {
			*dropped += take;
			return;
		}
		*text = nl;
		*cap = ncap;
	}
	memcpy(*text + *len, data, take);
	*len += take;
	(*text)[*len] = '\0';
}

/* Appends to the build log, up to --max-output; the rest is counted. */
void flight_log_append(struct flight *b, const char *data, size_t len)
{
	flight_text_append(&b->log, &b->loglen, &b->logcap, &b->dropped,
			  (size_t)b->d->cfg->max_output, data, len);
}

/* Answers every waiter: the artifact on success, the same error otherwise. */
static void reply_all(struct flight *b)
{
	ASSERT_LOOP();
	struct kilnd *d = b->d;
	const struct build_result r = {
		.err_code = b->err_code,
		.err_msg = b->err_msg != NULL ? b->err_msg : "build failed",
		.rkey = b->in.rkey,
		.log = b->log != NULL ? b->log : "",
		.entry = &b->entry,
		.path = b->obj_path,
		.fd = b->fd,
		.cached = b->from_upstream,
		.uncacheable = b->uncacheable,
	};
	for (struct waiter *w = b->waiters; w != NULL; w = w->next) {
		if (w->ops->gone(w->ctx) || !w->ops->done(w->ctx, w->id, w->joined, &r) ||
		    b->uncacheable != NULL)
			continue;
		kilnd_touch(d, b->entry.key);
		/* Even the build's own alias (set with the entry): a re-point
		 * replied earlier must not land after this reply. */
		if (w->alias != NULL)
			alias_point(d, w->alias, b->entry.key, w->alias_data);
	}
}

/*
 * An input changed while the build ran: what it produced stands for no
 * consistent set of inputs. It is built once more, from scratch, in the
 * same flight (its waiters stay attached); a second change in a row is
 * answered inputs_changed. A build that holds an --upstream claim is not
 * retried (the claim belongs to this attempt).
 */
static bool flight_retry(struct flight *b)
{
	struct kilnd *d = b->d;
	if (b->err_code == ERR_INPUTS_CHANGED)
		d->c.inputs_changed++;
	if (b->err_code != ERR_INPUTS_CHANGED || b->retried || d->stopping || b->up != NULL)
		return false;
	log_info("build %.16s: %s; building it again", b->in.rkey, b->err_msg != NULL ? b->err_msg : "");
	b->retried = true;
	if (b->dir != NULL)
		publish_cleanup(d, b);
	store_entry_free(&b->entry);
	free(b->err_msg);
	b->err_msg = NULL;
	b->err_code = ERR_NONE;
	b->loglen = b->dropped = 0;
	b->step = 0;
	b->timed_out = false;
	if (b->fd >= 0)
		close(b->fd);
	b->fd = -1;
	free(b->obj_path);
	b->obj_path = NULL;
	free(b->uncacheable);
	b->uncacheable = NULL;
	b->unobserved = false;
	flight_enqueue(b);
	return true;
}

/* Tells the tier how the flight ended; a build of this node's compiler,
 * cached, goes to the tier with its entry and object (the tier takes them). */
static void tier_end(struct flight *b)
{
	struct kilnd *d = b->d;
	struct tier_flight *f = b->up;
	if (f == NULL)
		return;
	b->up = NULL;
	struct store_entry entry = { 0 };
	struct flight_outcome o = {
		.err_code = b->err_code,
		.built_here = b->err_code == ERR_NONE && !b->from_upstream && b->uncacheable == NULL,
	};
	if (o.built_here) {
		entry = b->entry;
		memset(&b->entry, 0, sizeof(b->entry));
		o.entry = &entry;
		o.obj_path = b->obj_path;
		b->obj_path = NULL;
	}
	d->tier->flight_end(f, &b->in, &o);
	store_entry_free(&entry);
	free(o.obj_path);
}

/* The end of a build, on the loop thread: reply, leave the table, free. */
static void flight_finish(struct flight *b)
{
	ASSERT_LOOP();
	struct kilnd *d = b->d;
	prehash_stop(b->prehash);
	b->prehash = NULL;
	if (flight_retry(b))
		return;
	flight_enter(b, FLIGHT_DONE);
	sched_leave_slot(d, b);
	table_del(d->fl->table, b->in.rkey);
	if (b->err_code == ERR_NONE && b->from_upstream) {
		log_info("fetched %.16s (%s) from upstream", b->entry.key,
			 b->in.req.label != NULL ? b->in.req.label : "no label");
		kilnd_refresh_totals(d);
	} else if (b->err_code == ERR_NONE && b->uncacheable != NULL) {
		d->c.builds_ok++;
		d->c.uncacheable++;
		d->c.unobserved += b->unobserved;
		stats_build(d, b->in.req.toolchain, true, b->entry.build_ms);
		log_warn("built %.16s (%s), served and not cached: %s", b->in.rkey,
			 b->in.req.label != NULL ? b->in.req.label : "no label", b->uncacheable);
	} else if (b->err_code == ERR_NONE) {
		d->c.builds_ok++;
		stats_build(d, b->in.req.toolchain, true, b->entry.build_ms);
		log_info("built %.16s (%s) in %llu ms", b->entry.key,
			 b->in.req.label != NULL ? b->in.req.label : "no label",
			 (unsigned long long)b->entry.build_ms);
		kilnd_refresh_totals(d);
	} else if (b->cancelled) {
		d->c.cancelled++;
	} else if (b->err_code != ERR_SHUTTING_DOWN && b->err_code != ERR_NEED_SOURCES) {
		d->c.builds_failed++;
		const struct msg_request *r = &b->in.req;
		stats_failed(d, r->label != NULL ? r->label : r->alias != NULL ? r->alias
				: r->nsources > 0 && r->sources[0].name != NULL ? r->sources[0].name
				: "no label", b->in.rkey);
		if (b->start_ns != 0)
			stats_build(d, b->in.req.toolchain, false, (util_now_ns() - b->start_ns) / 1000000);
		/* The user's code failing is news for the user; kilnd failing to
		 * build (a full disk, I/O) is news for whoever runs kilnd. */
		log_msg(b->err_code == ERR_BUILD_FAILED || b->err_code == ERR_BUILD_TIMEOUT
			  ? LOG_INFO : LOG_WARN, "build of %.16s (%s) failed: %s", b->in.rkey,
			  b->in.req.label != NULL ? b->in.req.label : "no label",
			  b->err_msg != NULL ? b->err_msg : "");
	}
	reply_all(b);
	/* After the replies: publishing upstream must not delay the clients. */
	tier_end(b);
	if (b->dir != NULL)
		publish_cleanup(d, b);
	build_close_handles(b);
	build_release(b);
	sched_pump(d);
}

int flight_fail(struct flight *b, int code, const char *fmt, ...)
{
	if (b->err_code != ERR_NONE)
		return -1;
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	b->err_code = code;
	free(b->err_msg);
	b->err_msg = strdup(msg);
	return -1;
}

static void on_timeout(uv_timer_t *t)
{
	struct flight *b = t->data;
	b->timed_out = true;
	if (b->nprocs > 0) {
		log_warn("build %.16s ran past %.0f s; killing its processes", b->in.rkey,
			 b->d->cfg->build_timeout_s);
		step_kill(b);
	}
}

static void on_prepared(void *arg, int status)
{
	struct flight *b = arg;
	struct kilnd *d = b->d;
	b->in_pool = false;
	if (status != 0)
		flight_fail(b, ERR_INTERNAL, "the build directory was not made: %s",
			   uv_strerror(status));
	if (d->stopping)
		flight_fail(b, ERR_SHUTTING_DOWN, "kilnd is shutting down");
	if (b->err_code != ERR_NONE) {
		flight_finish(b);
		return;
	}
	if (!b->timer_init) {
		uv_timer_init(d->loop, &b->timer);
		b->timer.data = b;
		b->timer_init = true;
		b->refs++;
	}
	uv_timer_start(&b->timer, on_timeout, (uint64_t)(d->cfg->build_timeout_s * 1000.0), 0);
	step_next(b);
}

void flight_begin(struct flight *b)
{
	ASSERT_LOOP();
	struct kilnd *d = b->d;
	flight_enter(b, FLIGHT_PREPARING);
	if (cachedir_check(d) != 0) {
		flight_fail(b, ERR_IO, "%s", d->cache_why);
		flight_finish(b);
		return;
	}
	tracedir_token(b->trace_token);
	b->start_ns = util_now_ns();
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	b->start_wall_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	d->c.builds_started++;
	prewarm_toolchain(d, b->in.tc);
	b->in_pool = true;
	if (kilnd_work(d, POOL_PREPARE, prepare_work, on_prepared, b) != 0) {
		b->in_pool = false;
		flight_fail(b, ERR_INTERNAL, KILND_WORK_REFUSED);
		flight_finish(b);
	}
}

void flight_enqueue(struct flight *b)
{
	ASSERT_LOOP();
	flight_enter(b, FLIGHT_QUEUED);
	sched_push(b->d, b);
	sched_pump(b->d);
}

void flight_join_input(struct flight *b, struct build_input *in)
{
	if (b->in.by_digest && !in->by_digest) {
		/* The flight waits on the upstream tier with digests only;
		 * with the text it can build when upstream misses. */
		/* The precompiled header the flight settled on stays. */
		struct build_input old = b->in;
		b->in = *in;
		memset(in, 0, sizeof(*in));
		memcpy(b->in.pch_rkey, old.pch_rkey, sizeof(old.pch_rkey));
		memcpy(b->in.pch_key, old.pch_key, sizeof(old.pch_key));
		b->in.pch_refused = old.pch_refused;
		b->in.pch_deps = old.pch_deps;
		b->in.npch_deps = old.npch_deps;
		old.pch_deps = NULL;
		old.npch_deps = 0;
		build_input_free(&old);
		return;
	}
	build_input_free(in);
}

int flight_start(struct kilnd *d, struct build_input *in, const struct waiter_ops *ops, void *ctx,
		 uint64_t id)
{
	ASSERT_LOOP();
	if (d->stopping) {
		build_input_free(in);
		return -ESHUTDOWN;
	}
	if (d->fl->queued >= d->cfg->max_queue) {
		d->c.busy++;
		build_input_free(in);
		return -EBUSY;
	}
	struct flight *b = calloc(1, sizeof(*b));
	if (b == NULL) {
		build_input_free(in);
		return -ENOMEM;
	}
	b->d = d;
	b->in = *in;
	memset(in, 0, sizeof(*in));
	b->fd = -1;
	b->refs = 1;
	b->queued_ns = util_now_ns();
	if (flight_add_waiter(b, ops, ctx, id, b->in.req.alias, b->in.req.alias_data, false) != 0) {
		build_free(b);
		return -ENOMEM;
	}
	if (table_put(d->fl->table, b->in.rkey, b, NULL) != 0) {
		/* Nothing attached on failure: the caller keeps ctx. */
		free(b->waiters->alias);
		free(b->waiters->alias_data);
		free(b->waiters);
		b->waiters = NULL;
		build_free(b);
		return -ENOMEM;
	}
	variants_note(d, &b->in);
	/* Precompiled headers stay on this node (docs/pch.md). */
	if (d->tier != NULL && !build_input_is_gch(&b->in)) {
		flight_enter(b, FLIGHT_UPSTREAM);
		b->up = d->tier->flight_new(d, b);
		if (b->up == NULL) {
			flight_fail(b, ERR_INTERNAL, "out of memory");
			flight_finish(b);
			return 0;
		}
		d->tier->flight_start(b, b->up);
	} else {
		flight_enqueue(b);
	}
	return 0;
}

const struct build_input *flight_input(const struct flight *b)
{
	return &b->in;
}

/*
 * The tier's decisions. A hit ends the flight with the fetched entry, as a
 * build would; need_sources and failures end it with an error; a free key
 * queues it for a slot; a claim made (or impossible) builds in the slot it
 * holds; another node's claim gives the slot back while the tier waits.
 */
void flight_verdict(struct flight *b, struct tier_result *r)
{
	ASSERT_LOOP();
	switch (r->verdict) {
	case TIER_HIT:
		store_entry_free(&b->entry);
		b->entry = *r->entry;
		memset(r->entry, 0, sizeof(*r->entry));
		free(b->obj_path);
		b->obj_path = r->obj_path;
		r->obj_path = NULL;
		if (b->fd >= 0)
			close(b->fd);
		b->fd = r->fd;
		r->fd = -1;
		b->from_upstream = true;
		flight_finish(b);
		return;
	case TIER_NEED_TEXT:
		b->d->c.need_sources++;
		flight_fail(b, ERR_NEED_SOURCES, "no entry for these sources here or upstream; send their text");
		flight_finish(b);
		return;
	case TIER_QUEUE:
		flight_enqueue(b);
		return;
	case TIER_BUILD:
		flight_begin(b);
		return;
	case TIER_WAIT:
		if (b->has_slot)
			flight_release_slot(b);
		return;
	case TIER_FAILED:
		flight_fail(b, r->err_code, "%s", r->msg != NULL ? r->msg : "the tier failed");
		flight_finish(b);
		return;
	}
}

void flight_abort_all(struct kilnd *d)
{
	struct flight *b;
	if (d->tier != NULL)
		d->tier->stop(d);
	while ((b = sched_pop(d)) != NULL) {
		flight_fail(b, ERR_SHUTTING_DOWN, "kilnd is shutting down");
		flight_finish(b);
	}
	for (b = d->fl->running; b != NULL; b = b->rnext) {
		/* A build inside a pool job is failed by that job's completion,
		 * and so is one whose claim the tier is making. */
		if (b->in_pool || b->state == FLIGHT_CLAIMING)
			continue;
		flight_fail(b, ERR_SHUTTING_DOWN, "kilnd is shutting down");
		step_kill(b);
	}
}

void flight_step_begins(struct flight *b, bool check)
{
	flight_enter(b, check ? FLIGHT_CHECKING : FLIGHT_COMPILING);
}

/* The steps are over (step.c): failed, the flight ends; else the --jobs
 * slot goes back and the publish begins on the pool. */
void flight_steps_done(struct flight *b)
{
	ASSERT_LOOP();
	if (b->err_code != ERR_NONE) {
		flight_finish(b);
		return;
	}
	prehash_stop(b->prehash);
	b->prehash = NULL;
	flight_enter(b, FLIGHT_PUBLISHING);
	if (b->timer_init)
		uv_timer_stop(&b->timer);
	flight_release_slot(b);
	publish_start(b);
}

/* The publish is over (publish.c), published or failed. */
void flight_published(struct flight *b)
{
	flight_finish(b);
}

void flight_slot_granted(struct flight *b)
{
	/* With --upstream a flight claims its key in the slot first, so that a
	 * node claims no more than it can build now and the other nodes'
	 * slots take the rest (upstream.c). */
	if (b->up != NULL) {
		flight_enter(b, FLIGHT_CLAIMING);
		b->d->tier->claim(b, b->up);
	} else {
		flight_begin(b);
	}
}
