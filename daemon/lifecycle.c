/*
 * The timers that watch the daemon as a whole, and the stop sequence
 * (lifecycle.h). Loop thread only.
 */
#include <uv.h>

#include "child.h"
#include "claims.h"
#include "flight.h"
#include "cachedir.h"
#include "headers.h"
#include "kilnd.h"
#include "stats.h"
#include "lifecycle.h"
#include "prewarm.h"
#include "log.h"
#include "sdnotify.h"
#include "server.h"
#include "table.h"
#include "util.h"
#include "thread.h"

#define CACHE_CHECK_MS 1000

static void on_idle_timer(uv_timer_t *t)
{
	struct kilnd *d = t->data;
	double idle = (double)(util_now_ns() - d->last_activity_ns) / 1e9;
	struct flight_counts fc;
	flight_counts(d, &fc);
	if (server_connections(d) == 0 && fc.flights == 0 && d->work_pending == 0 &&
	    idle >= d->cfg->idle_exit_s) {
		log_info("idle for %.0f s; exiting", idle);
		lifecycle_stop(d);
	}
}

/* Once a second: is the cache directory still there? */
static void on_cache_timer(uv_timer_t *t)
{
	struct kilnd *d = t->data;
	cachedir_reap(d);
	cachedir_check(d);
}

void lifecycle_start(struct kilnd *d)
{
	uv_timer_init(d->loop, &d->cache_timer);
	d->cache_timer.data = d;
	uv_timer_start(&d->cache_timer, on_cache_timer, CACHE_CHECK_MS, CACHE_CHECK_MS);
	uv_timer_init(d->loop, &d->idle_timer);
	d->idle_timer.data = d;
	if (d->cfg->idle_exit_s > 0) {
		uint64_t ms = (uint64_t)(d->cfg->idle_exit_s * 1000.0 / 4);
		uv_timer_start(&d->idle_timer, on_idle_timer, ms > 0 ? ms : 1, ms > 0 ? ms : 1);
	}
}

/* Runs before each poll once stopping: closes the rest when builds are over. */
static void on_stop_check(uv_prepare_t *p)
{
	struct kilnd *d = p->data;
	struct flight_counts fc;
	flight_counts(d, &fc);
	if (fc.flights != 0 || d->work_pending != 0)
		return;
	uv_prepare_stop(p);
	uv_close((uv_handle_t *)p, NULL);
	claims_fini(d);   /* waiting lookups answered while their connections live */
	server_fini(d);
	headers_fini(d);
	child_watch_close(d->children);  /* no build, so no step runs */
	d->children = NULL;
}

static uv_prepare_t stop_check;

void lifecycle_stop(struct kilnd *d)
{
	ASSERT_LOOP();
	if (d->stopping)
		return;
	d->stopping = true;
	log_info("stopping");
	sd_stopping();
	server_stop_listening(d);
	flight_abort_all(d);
	kilnd_timers_stop(d);
	stats_timer_stop(d);
	prewarm_stop(d);
	uv_timer_stop(&d->idle_timer);
	uv_close((uv_handle_t *)&d->idle_timer, NULL);
	uv_timer_stop(&d->cache_timer);
	uv_close((uv_handle_t *)&d->cache_timer, NULL);
	uv_close((uv_handle_t *)&d->sig_term, NULL);
	uv_close((uv_handle_t *)&d->sig_int, NULL);
	uv_close((uv_handle_t *)&d->sig_hup, NULL);
	uv_prepare_init(d->loop, &stop_check);
	stop_check.data = d;
	uv_prepare_start(&stop_check, on_stop_check);
}
