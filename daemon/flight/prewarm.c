/*
 * Prewarm (prewarm.h). Each turn of the loop with nothing else to do runs
 * one batch: the next few keys, most recently used first, each read from
 * the index, its request key and alias looked up (the reader's hit cache),
 * its dependencies checked (headers_check: stat'ed, watched, remembered
 * valid) and its object opened and verified (fdcache, verify_served) —
 * the work the entry's first hit would do. A request that arrives is read
 * and answered between two batches; its batch of dependency checks then
 * finds most states taken already.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <uv.h>

#include "digests.h"
#include "fdcache.h"
#include "headers.h"
#include "key.h"
#include "kilnd.h"
#include "log.h"
#include "prewarm.h"
#include "table.h"
#include "thread.h"
#include "util.h"
#include "verify.h"

#define PREWARM_BATCH 8
/* Objects larger than this are left to their first hit (a .gch: 78 MiB to
 * hash on the loop). */
#define PREWARM_MAX_OBJECT (64u << 20)

struct prewarm {
	uv_idle_t idle;         /* first: the close callback frees the struct */
	char (*keys)[65];
	size_t n, next;
	uint64_t valid, spent_ns, start_ns, end_ns;
	bool waited;            /* keys[next] waited for a hash once already */
	enum { PW_RUNNING, PW_DONE } state;
};

/* Checks one entry: HEADERS_PENDING when a dependency is being hashed on
 * the pool (the entry is checked again once it is), else done with it. */
static int warm_one(struct kilnd *d, struct prewarm *pw, const char *key)
{
	struct store_entry e, *list = NULL;
	size_t n = 0;
	if (store_get(d->store, key, &e) != 0)
		return HEADERS_INVALID;
	/* What a request finds the entry by: its request key, its alias. */
	if (store_get_by_rkey(d->store, e.rkey, &list, &n) == 0)
		store_entries_free(list, n);
	if (e.alias != NULL) {
		struct store_entry a;
		if (store_get_by_alias(d->store, e.alias, &a) == 0)
			store_entry_free(&a);
	}
	int v = headers_check(d, &e);
	if (v == HEADERS_PENDING) {
		store_entry_free(&e);
		return v;
	}
	if (v == HEADERS_VALID && e.size <= PREWARM_MAX_OBJECT) {
		struct fdref *ref = NULL;
		char why[96];
		if (fdcache_borrow(d->fds, store_generation(d->store), d->store, e.key, e.output,
				   &ref) == 0 &&
		    verify_served(d, &e, fdref_fd(ref), NULL, why, sizeof(why)) == 0)
			pw->valid++;
		fdref_put(ref);
	}
	store_entry_free(&e);
	return v;
}

static void finish(struct prewarm *pw, const char *why)
{
	uv_idle_stop(&pw->idle);
	pw->state = PW_DONE;
	pw->end_ns = util_now_ns();
	free(pw->keys);
	pw->keys = NULL;
	log_info("prewarm: %zu of %zu recent entries checked, %llu ready, in %.0f ms of loop time%s",
		 pw->next, pw->n, (unsigned long long)pw->valid, (double)pw->spent_ns / 1e6, why);
}

static void on_idle(uv_idle_t *h);

/* The hash an entry waited for is done: check it again. */
static void on_hashed(void *arg)
{
	struct kilnd *d = arg;
	if (d->prewarm != NULL && d->prewarm->state == PW_RUNNING)
		uv_idle_start(&d->prewarm->idle, on_idle);
}

static void on_idle(uv_idle_t *h)
{
	ASSERT_LOOP();
	struct kilnd *d = h->data;
	struct prewarm *pw = d->prewarm;
	uint64_t t0 = util_now_ns();
	for (size_t i = 0; i < PREWARM_BATCH && pw->next < pw->n && !d->stopping; i++) {
		if (warm_one(d, pw, pw->keys[pw->next]) == HEADERS_PENDING && !pw->waited &&
		    headers_wait(d, on_hashed, d) == 0) {
			/* Paused until the pool has hashed it, then this entry again. */
			pw->waited = true;
			uv_idle_stop(&pw->idle);
			break;
		}
		pw->waited = false;
		pw->next++;
	}
	pw->spent_ns += util_now_ns() - t0;
	if (d->stopping || pw->next >= pw->n)
		finish(pw, "");
	else if (pw->spent_ns >= (uint64_t)PREWARM_MAX_MS * 1000000u)
		finish(pw, " (time limit)");
}

/*
 * The digests of a toolchain's programs (the 30 MB cc1plus, as, ld, nvcc's
 * tools), taken on the pool when its first build begins: they are hashed
 * while the compiler runs, and the build's publish finds them in the digest
 * cache instead of hashing them on its way out (48 ms of a herd's first
 * build here). Not at start: a toolchain no request uses costs nothing, and
 * ranks that come right after the prologue do not find the CPUs busy
 * hashing (up to 220 ms of CPU with nvcc's tools).
 */
struct tc_digests {
	char **paths;
	size_t n;
	uint64_t start_ns, ms;
};

static void tc_digests_work(void *arg)
{
	ASSERT_POOL();
	struct tc_digests *j = arg;
	for (size_t i = 0; i < j->n; i++) {
		uint8_t digest[32];
		struct stat st;
		(void)digests_file(j->paths[i], digest, &st);
	}
	j->ms = (util_now_ns() - j->start_ns) / 1000000u;
}

static void tc_digests_done(void *arg, int status)
{
	struct tc_digests *j = arg;
	(void)status;   /* not run: the build's publish hashes them, as before */
	if (j->n > 0)
		log_debug("digests of %zu toolchain programs in %llu ms", j->n,
		  (unsigned long long)j->ms);
	for (size_t i = 0; i < j->n; i++)
		free(j->paths[i]);
	free(j->paths);
	free(j);
}

void prewarm_toolchain(struct kilnd *d, const struct toolchain *tc)
{
	ASSERT_LOOP();
	if (d->stopping || tc == NULL || tc->nprograms == 0)
		return;
	if (d->tc_hashed == NULL && (d->tc_hashed = table_new()) == NULL)
		return;
	/* Every build begins here: after its toolchain's first, nothing to do. */
	size_t known = 0;
	while (known < tc->nprograms && table_get(d->tc_hashed, tc->programs[known]) != NULL)
		known++;
	if (known == tc->nprograms)
		return;
	struct tc_digests *j = calloc(1, sizeof(*j));
	if (j == NULL || (j->paths = calloc(tc->nprograms, sizeof(char *))) == NULL) {
		free(j);
		return;
	}
	for (size_t i = 0; i < tc->nprograms; i++) {
		const char *path = tc->programs[i];
		/* Each program once (cc and c++ share as and ld). */
		if (table_get(d->tc_hashed, path) != NULL ||
		    table_put(d->tc_hashed, path, (void *)1, NULL) != 0)
			continue;
		if ((j->paths[j->n] = strdup(path)) != NULL)
			j->n++;
	}
	j->start_ns = util_now_ns();
	if (j->n == 0 || kilnd_work(d, POOL_TC_DIGESTS, tc_digests_work, tc_digests_done, j) != 0)
		tc_digests_done(j, UV_ECANCELED);
}

void prewarm_start(struct kilnd *d)
{
	ASSERT_LOOP();
	struct prewarm *pw;
	if (d->cfg->no_prewarm || d->store == NULL || (pw = calloc(1, sizeof(*pw))) == NULL)
		return;
	d->prewarm = pw;
	uv_idle_init(d->loop, &pw->idle);
	pw->idle.data = d;
	pw->start_ns = pw->end_ns = util_now_ns();
	pw->state = PW_DONE;
	if (store_recent_keys(d->store, PREWARM_MAX_ENTRIES, &pw->keys, &pw->n) != 0 || pw->n == 0) {
		free(pw->keys);
		pw->keys = NULL;
		return;
	}
	pw->state = PW_RUNNING;
	uv_idle_start(&pw->idle, on_idle);
}

static void on_closed(uv_handle_t *h)
{
	free(h);   /* the idle handle is the struct's first member */
}

void prewarm_stop(struct kilnd *d)
{
	struct prewarm *pw = d->prewarm;
	table_free(d->tc_hashed, NULL);
	d->tc_hashed = NULL;
	if (pw == NULL)
		return;
	if (pw->state == PW_RUNNING)
		finish(pw, " (stopped)");
	d->prewarm = NULL;
	uv_close((uv_handle_t *)&pw->idle, on_closed);
}

void prewarm_status(const struct kilnd *d, cJSON *r)
{
	const struct prewarm *pw = d->prewarm;
	cJSON *o = cJSON_AddObjectToObject(r, "prewarm");
	if (o == NULL)
		return;
	cJSON_AddStringToObject(o, "state", pw == NULL ? "off"
				: pw->state == PW_RUNNING ? "running" : "done");
	if (pw == NULL)
		return;
	cJSON_AddNumberToObject(o, "entries", (double)pw->n);
	cJSON_AddNumberToObject(o, "checked", (double)pw->next);
	cJSON_AddNumberToObject(o, "ready", (double)pw->valid);
	cJSON_AddNumberToObject(o, "loop_ms", util_round3((double)pw->spent_ns / 1e6));
	uint64_t end = pw->state == PW_DONE ? pw->end_ns : util_now_ns();
	cJSON_AddNumberToObject(o, "wall_ms", util_round3((double)(end - pw->start_ns) / 1e6));
}
