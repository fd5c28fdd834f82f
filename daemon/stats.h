/*
 * kilnd's statistics (kiln stats): the counters of struct counters, hits
 * and misses per toolchain, and a histogram of build times. They are kept
 * in the index (store_counters_*), loaded at start and saved a second after
 * they change and at the stop, so they survive a restart; `kiln stats
 * --zero` (op "zero") resets them. Loop thread only. The counters
 * themselves are in kilnd.h (struct counters, struct stats_extra).
 */
#ifndef KILN_DAEMON_STATS_H
#define KILN_DAEMON_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>


struct kilnd;

/* Loads the saved counters into d (at start, after the toolchains). A
 * failure is logged: counting starts from zero. */
void stats_load(struct kilnd *d);
/* Starts and stops the timer that saves the counters a second after they
 * change (the pool; a second save waits for the first). */
void stats_timer_start(struct kilnd *d);
void stats_timer_stop(struct kilnd *d);
/* Frees the saver (after the loop ended). */
void stats_fini(struct kilnd *d);
/* Saves now, blocking (the stop). */
void stats_flush(struct kilnd *d);
/* Resets every counter and the histogram; saved at once. */
void stats_zero(struct kilnd *d);

/* A request served from the cache, or not (toolchain may be NULL). */
void stats_hit(struct kilnd *d, const char *toolchain);
void stats_miss(struct kilnd *d, const char *toolchain);
/* A build that ran a compiler ended, after ms milliseconds. */
void stats_build(struct kilnd *d, const char *toolchain, bool ok, uint64_t ms);
/* A failed build of this run, by what names it and its request key: the
 * status reply lists the latest STATS_FAILED_KEPT ("failed_builds"). */
void stats_failed(struct kilnd *d, const char *name, const char *rkey);

/* Adds the counters to a status reply: each by name, "stats_since",
 * "toolchain_stats" {name: {hits, misses, builds_ok, builds_failed}} and
 * "build_seconds" {buckets: [[le, count], ...] cumulative, sum, count},
 * and "this_run" {each counter: counted since this kilnd started}. */
void stats_add_json(const struct kilnd *d, cJSON *r);

#endif
