/*
 * The upstream tier on the loop thread: what a flight does before it builds
 * (look upstream, claim the key or wait for the node that holds it), what it
 * does after (publish, release the claim), and the timer that keeps this
 * daemon's claims fresh; the pace at which waiting flights look again is
 * upstream_pace.c's. The filesystem work
 * (upstream_fs.c, upstream_entry.c) runs on the thread pool; a job gets copies of
 * what it needs, never the build, whose input the loop may swap meanwhile
 * (flight_join_input).
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flight.h"
#include "publish.h"
#include "kilnd.h"
#include "stats.h"
#include "table.h"
#include "log.h"
#include "recheck.h"
#include "alias.h"
#include "upstream.h"
#include "upstream_int.h"
#include "util.h"
#include "thread.h"

/* Waiting flights look again after POLL_FIRST_MS at first (upstream_pace.c
 * slows them down from there). */
#define POLL_FIRST_MS 250
/* The compiler output published with an entry, read from the local cache. */
#define LOG_MAX ((size_t)16 << 20)

/* A claim this daemon holds: open, so that it can be refreshed. */
struct up_claim {
	struct up_claim *prev, *next;
	int fd;
	char *path;
	void (*gone)(void *arg);         /* after its removal, or NULL */
	void *gone_arg;
};

/* The upstream side of one flight (the flight keeps it: build_tier). */
struct tier_flight {
	struct flight *b;                 /* the flight's; read through flight_input() only */
	struct kilnd *d;
	struct up_poller poll;           /* in the waiting list */
	bool waited;                     /* counted in upstream_waits */
	bool digest_first;               /* began by digest only: its miss is counted at the end */
	struct up_claim *claim;          /* held, or NULL */
	struct up_seen seen;             /* the other node's claim, while waiting */
};

struct upstream {
	struct kilnd *d;
	struct up_dirs fs;
	struct up_pace pace;             /* flights and alias leases waiting on other nodes */
	uv_timer_t refresh;              /* runs while claims are held */
	bool refresh_on, refreshing, closed;
	bool alias_quiet;                /* upstream_alias_quiet */
	uint64_t refresh_ms;
	struct up_claim *claims;
	struct table *leases;            /* alias -> struct up_lease (upstream_lease.c) */
};

/*
 * FIND looks for an entry. WATCH also looks at the key's claim, without
 * making one, so that a flight does not queue for a slot while another node
 * builds the program. CLAIM runs in a --jobs slot: it makes the claim (or
 * takes over a stale one) and looks again.
 */
enum job_kind { JOB_FIND, JOB_WATCH, JOB_CLAIM };
enum job_result { RES_MISS, RES_HIT, RES_FREE, RES_BUSY, RES_CLAIMED, RES_ERROR };

struct up_job {
	struct kilnd *d;
	struct flight *b;                 /* the loop's: the pool never touches it */
	struct tier_flight *f;           /* its upstream side */
	struct build_input *in;          /* a copy of b's, to check entries (recheck.h) */
	enum job_kind kind;
	char rkey[65];
	struct store_entry entry;        /* names in; the fetched entry out */
	struct up_seen seen;
	enum job_result result;
	int err;                         /* a failed upstream operation (-errno), or 0 */
	unsigned bad;                    /* broken upstream entries seen */
	int claim_fd;
	char *claim_path;
	bool took_over;
	char *obj_path;
	int fd;
};

static void start_job(struct flight *b, struct tier_flight *f, enum job_kind kind);
static void on_refresh(uv_timer_t *t);

/* Claims and their refresh. */

static void claims_add(struct upstream *u, struct up_claim *c)
{
	c->prev = NULL;
	c->next = u->claims;
	if (u->claims != NULL)
		u->claims->prev = c;
	u->claims = c;
	if (!u->refresh_on && !u->closed) {
		uv_timer_start(&u->refresh, on_refresh, u->refresh_ms, u->refresh_ms);
		u->refresh_on = true;
	}
}

struct refresh_job {
	struct upstream *u;
	int *fds;
	size_t n;
	unsigned failed;
};

static void refresh_work(void *arg)
{
	struct refresh_job *j = arg;
	for (size_t i = 0; i < j->n; i++) {
		if (upfs_touch(j->fds[i]) != 0)
			j->failed++;
		close(j->fds[i]);
	}
}

static void refresh_done(void *arg, int status)
{
	struct refresh_job *j = arg;
	j->u->refreshing = false;
	if (status != 0)
		log_warn("the refresh of this node's upstream claims did not run: %s",
			 uv_strerror(status));
	if (j->failed > 0) {
		j->u->d->c.upstream_errors += j->failed;
		log_warn("cannot refresh %u upstream claims; other nodes may take them over", j->failed);
	}
	free(j->fds);
	free(j);
}

/* Every stale/4: sets the mtime of every claim held, on the pool, through
 * duplicates of the descriptors (a claim released meanwhile closes its own). */
static void on_refresh(uv_timer_t *t)
{
	struct upstream *u = t->data;
	size_t n = 0;
	if (u->claims == NULL) {
		uv_timer_stop(t);
		u->refresh_on = false;
		return;
	}
	if (u->refreshing)
		return;
	for (struct up_claim *c = u->claims; c != NULL; c = c->next)
		n++;
	struct refresh_job *j = calloc(1, sizeof(*j));
	if (j == NULL || (j->fds = calloc(n, sizeof(int))) == NULL) {
		free(j);
		return;
	}
	j->u = u;
	for (struct up_claim *c = u->claims; c != NULL; c = c->next) {
		int fd = fcntl(c->fd, F_DUPFD_CLOEXEC, 0);
		if (fd >= 0)
			j->fds[j->n++] = fd;
	}
	u->refreshing = true;
	if (kilnd_work(u->d, POOL_UP_REFRESH, refresh_work, refresh_done, j) != 0) {
		u->refreshing = false;
		for (size_t i = 0; i < j->n; i++)
			close(j->fds[i]);
		free(j->fds);
		free(j);
	}
}

static void unclaim_work(void *arg)
{
	struct up_claim *c = arg;
	upfs_unclaim(c->path, c->fd);
}

static void unclaim_done(void *arg, int status)
{
	struct up_claim *c = arg;
	/* Not run: the claim goes stale, and other nodes take it over. */
	(void)status;
	if (c->gone != NULL)
		c->gone(c->gone_arg);
	free(c->path);
	free(c);
}

/* Removes the claim from the refresh list, then from the directory. */
static void claim_release(struct upstream *u, struct up_claim *c)
{
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		u->claims = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	if (kilnd_work(u->d, POOL_UP_UNCLAIM, unclaim_work, unclaim_done, c) != 0) {
		/* Left for the stale timeout of the other nodes. */
		log_warn("cannot queue the release of claim %s", c->path);
		close(c->fd);
		unclaim_done(c, UV_ECANCELED);
	}
}

struct up_claim *upstream_claim_keep(struct kilnd *d, int fd, char *path)
{
	struct up_claim *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return NULL;
	c->fd = fd;
	c->path = path;
	claims_add(d->up, c);
	return c;
}

void upstream_claim_drop(struct kilnd *d, struct up_claim *c, void (*gone)(void *arg), void *arg)
{
	c->gone = gone;
	c->gone_arg = arg;
	claim_release(d->up, c);
}

/* Lookups, claims and fetches on the pool. */

static void job_free(struct up_job *j)
{
	recheck_input_free(j->in);
	store_entry_free(&j->entry);
	free(j->claim_path);
	free(j->obj_path);
	if (j->fd >= 0)
		close(j->fd);
	free(j);
}

/* Looks upstream and, on a hit, publishes the entry into the local cache
 * and opens it. 1 hit, 0 miss, or a negative errno. */
static int find_and_take(struct up_job *j)
{
	struct kilnd *d = j->d;
	char *tmpdir = store_tmp_dir(d->store);
	char tmp[4200], *log = NULL;
	if (tmpdir == NULL)
		return -ENOMEM;
	snprintf(tmp, sizeof(tmp), "%s/up-%.16s-%d", tmpdir, j->rkey, (int)gettid());
	free(tmpdir);
	uint64_t t0 = util_now_ns();
	int rc = upfs_find(&d->up->fs, j->rkey, j->entry.output, tmp, &j->entry, &log, &j->bad);
	if (rc != 1) {
		free(log);
		return rc;
	}
	log_debug("upstream entry %.16s found in %.1f ms (its object copied, %zu dependencies "
		  "checked here)", j->entry.key, (double)(util_now_ns() - t0) / 1e6, j->entry.ndeps);
	/* Another node's list of what the build read is a hint: observe here. */
	char why[768];
	if (recheck_peer(d, j->in, j->entry.deps, j->entry.ndeps, tmp, why, sizeof(why)) != 0) {
		log_info("upstream entry %.16s not taken: %s", j->entry.key, why);
		unlink(tmp);
		free(log);
		j->bad++;
		return 0;
	}
	j->entry.created = j->entry.last_used = util_wall_s();
	j->entry.key_format = KEY_FORMAT_VERSION;   /* found under this kilnd's request key */
	if (log != NULL)
		publish_write_log(d, j->entry.key, log, strlen(log));
	free(log);
	rc = store_publish_open(d->store, &j->entry, AT_FDCWD, tmp, &j->fd);
	if (rc != 0) {
		unlink(tmp);
		log_warn("cannot publish upstream entry %.16s into the cache: %s", j->entry.key,
			 strerror(-rc));
		return rc;
	}
	j->obj_path = store_object_path(d->store, j->entry.key, j->entry.output);
	return 1;
}

static void job_work(void *arg)
{
	struct up_job *j = arg;
	struct up_dirs *fs = &j->d->up->fs;
	int rc;
	if (j->kind != JOB_CLAIM) {
		rc = find_and_take(j);
		if (rc == 1) {
			j->result = RES_HIT;
			return;
		}
		j->err = rc;
		j->result = RES_MISS;
		if (j->kind == JOB_FIND)
			return;
		/* An error looking at the claim is no reason to wait. */
		rc = upfs_watch(fs, j->rkey, &j->seen);
		if (rc < 0)
			j->err = rc;
		j->result = rc == 1 ? RES_BUSY : RES_FREE;
		return;
	}
	rc = upfs_claim(fs, j->rkey, &j->seen, &j->claim_fd, &j->took_over);
	if (rc < 0) {
		j->err = rc;
		j->result = RES_ERROR;
		return;
	}
	if (rc == 1) {
		j->result = RES_BUSY;
		return;
	}
	j->claim_path = upfs_claim_path(fs, j->rkey);
	/* Another node may have published and released its claim between
	 * the first look and the claim: look again before building. */
	rc = find_and_take(j);
	if (rc == 1) {
		upfs_unclaim(j->claim_path, j->claim_fd);
		j->claim_fd = -1;
		j->result = RES_HIT;
		return;
	}
	j->result = RES_CLAIMED;
}

/* A hit: the flight ends as if it had built, with the fetched entry. */
static void take_hit(struct flight *b, struct up_job *j)
{
	struct tier_result r = { .verdict = TIER_HIT, .entry = &j->entry, .obj_path = j->obj_path,
				 .fd = j->fd };
	j->d->c.upstream_hits++;
	j->obj_path = NULL;
	j->fd = -1;
	flight_verdict(b, &r);
}

static void fail(struct flight *b, int code, const char *msg)
{
	struct tier_result r = { .verdict = TIER_FAILED, .err_code = code, .msg = msg };
	flight_verdict(b, &r);
}

static void verdict(struct flight *b, enum tier_verdict v)
{
	struct tier_result r = { .verdict = v };
	flight_verdict(b, &r);
}

static void keep_claim(struct upstream *u, struct tier_flight *f, struct up_job *j)
{
	struct up_claim *c = calloc(1, sizeof(*c));
	if (c == NULL) {
		/* Not refreshed, so it goes stale; the build goes on. */
		close(j->claim_fd);
		j->claim_fd = -1;
		return;
	}
	c->fd = j->claim_fd;
	c->path = j->claim_path;
	j->claim_fd = -1;
	j->claim_path = NULL;
	f->claim = c;
	claims_add(u, c);
	if (j->took_over) {
		u->d->c.upstream_takeovers++;
		log_info("took over the stale claim of %.16s", j->rkey);
	}
}

static void job_done(void *arg, int status)
{
	struct up_job *j = arg;
	struct flight *b = j->b;
	struct kilnd *d = j->d;
	struct upstream *u = d->up;
	struct tier_flight *f = j->f;
	enum job_result res = j->result;
	if (status != 0) {
		/* Nothing was looked at: no verdict can come from this job. */
		job_free(j);
		fail(b, ERR_INTERNAL, "the upstream tier's job did not run");
		return;
	}
	d->c.upstream_errors += j->bad + (j->err != 0);
	f->seen = j->seen;
	if (res == RES_HIT) {
		take_hit(b, j);
		job_free(j);
		return;
	}
	if (res == RES_CLAIMED)
		keep_claim(u, f, j);
	if (j->err != 0)
		log_warn("upstream tier %s: %s; %s", u->fs.dir, strerror(-j->err),
			 res == RES_ERROR ? "building here without a claim" : "going on as if it missed");
	job_free(j);
	if (d->stopping) {
		fail(b, ERR_SHUTTING_DOWN, "kilnd is shutting down");
		return;
	}
	switch (res) {
	case RES_MISS:
		if (!flight_input(b)->by_digest) {
			/* A request with the text joined meanwhile. */
			start_job(b, f, JOB_WATCH);
			return;
		}
		verdict(b, TIER_NEED_TEXT);
		return;
	case RES_BUSY:
		if (!f->waited) {
			f->waited = true;
			d->c.upstream_waits++;
			log_info("%.16s is being built by %s; waiting for it", flight_input(b)->rkey,
				 f->seen.owner);
		}
		/* Claimed by another node while this one waited for a slot. */
		verdict(b, TIER_WAIT);
		up_pace_add(&u->pace, &f->poll);
		return;
	case RES_FREE:
		verdict(b, TIER_QUEUE);
		return;
	default:
		/* Claimed (or no claim can be made here): build. */
		verdict(b, TIER_BUILD);
		return;
	}
}

static void start_job(struct flight *b, struct tier_flight *f, enum job_kind kind)
{
	struct kilnd *d = f->d;
	const struct build_input *in = flight_input(b);
	struct up_job *j = calloc(1, sizeof(*j));
	if (j == NULL || publish_names(&j->entry, in) != 0 ||
	    (j->in = recheck_input_copy(in)) == NULL) {
		if (j != NULL) {
			store_entry_free(&j->entry);
			recheck_input_free(j->in);
		}
		free(j);
		fail(b, ERR_INTERNAL, "out of memory");
		return;
	}
	j->d = d;
	j->b = b;
	j->f = f;
	j->kind = kind;
	j->fd = -1;
	j->claim_fd = -1;
	j->seen = f->seen;
	memcpy(j->rkey, in->rkey, sizeof(j->rkey));
	if (kilnd_work(d, POOL_UP_LOOK, job_work, job_done, j) != 0) {
		job_free(j);
		fail(b, ERR_INTERNAL, KILND_WORK_REFUSED);
	}
}

/* A waiting flight's turn to look, and its end at a stop. */
static void flight_look(struct up_poller *p)
{
	struct tier_flight *f = (struct tier_flight *)((char *)p - offsetof(struct tier_flight, poll));
	start_job(f->b, f, JOB_WATCH);
}

static void flight_stop(struct up_poller *p)
{
	struct tier_flight *f = (struct tier_flight *)((char *)p - offsetof(struct tier_flight, poll));
	fail(f->b, ERR_SHUTTING_DOWN, "kilnd is shutting down");
}

struct tier_flight *upstream_flight_new(struct kilnd *d, struct flight *b)
{
	ASSERT_LOOP();
	struct tier_flight *f = calloc(1, sizeof(*f));
	if (f == NULL)
		return NULL;
	f->b = b;
	f->d = d;
	f->digest_first = flight_input(b)->by_digest;
	f->poll.look = flight_look;
	f->poll.stop = flight_stop;
	snprintf(f->poll.key, sizeof(f->poll.key), "%.16s", flight_input(b)->rkey);
	return f;
}

void upstream_flight_start(struct flight *b, struct tier_flight *f)
{
	ASSERT_LOOP();
	start_job(b, f, f->digest_first ? JOB_FIND : JOB_WATCH);
}

void upstream_claim(struct flight *b, struct tier_flight *f)
{
	ASSERT_LOOP();
	start_job(b, f, JOB_CLAIM);
}

/* Publishing a build upstream, after its replies. */

struct publish_job {
	struct kilnd *d;
	struct store_entry entry;
	char *obj_path;
	struct up_claim *claim;          /* released once published, or NULL */
	int rc;
};

static void upstream_publish_work(void *arg)
{
	struct publish_job *j = arg;
	char *log = NULL, *path = store_log_path(j->d->store, j->entry.key);
	size_t len = 0;
	if (path == NULL || util_read_file(path, LOG_MAX, &log, &len) != 0)
		log = NULL;
	free(path);
	j->rc = upfs_publish(&j->d->up->fs, &j->entry, j->obj_path, log, len);
	free(log);
}

static void publish_done(void *arg, int status)
{
	struct publish_job *j = arg;
	struct kilnd *d = j->d;
	if (status != 0)
		j->rc = status;
	if (j->rc == 1) {
		d->c.upstream_publishes++;
		log_debug("published %.16s upstream", j->entry.key);
	} else if (j->rc < 0) {
		d->c.upstream_errors++;
		log_warn("cannot publish %.16s to the upstream tier %s: %s", j->entry.key, d->up->fs.dir,
			 strerror(-j->rc));
	}
	/* Only now: a node waiting on the claim finds the entry when it goes. */
	if (j->claim != NULL)
		claim_release(d->up, j->claim);
	store_entry_free(&j->entry);
	free(j->obj_path);
	free(j);
}

static void publish_upstream(struct kilnd *d, struct flight_outcome *o, struct up_claim *claim)
{
	struct publish_job *j = calloc(1, sizeof(*j));
	if (j == NULL) {
		if (claim != NULL)
			claim_release(d->up, claim);
		return;
	}
	j->d = d;
	j->claim = claim;
	j->entry = *o->entry;
	memset(o->entry, 0, sizeof(*o->entry));
	j->obj_path = o->obj_path;
	o->obj_path = NULL;
	if (kilnd_work(d, POOL_UP_PUBLISH, upstream_publish_work, publish_done, j) != 0) {
		j->rc = -ENOMEM;
		publish_done(j, 0);
	}
}

void upstream_flight_end(struct tier_flight *f, const struct build_input *in,
			 struct flight_outcome *o)
{
	ASSERT_LOOP();
	struct kilnd *d = f->d;
	up_pace_del(&d->up->pace, &f->poll);
	/* A get by digest counts as a miss once it is not need_sources. */
	if (f->digest_first && o->err_code != ERR_NEED_SOURCES)
		stats_miss(d, in->req.toolchain);
	/* Served but not cached here (a pseudo-file decided it): not for
	 * other nodes either. */
	if (o->built_here)
		publish_upstream(d, o, f->claim);
	else if (f->claim != NULL)
		claim_release(d->up, f->claim);
	free(f);
}

/* Start and stop. */

static void sweep_work(void *arg)
{
	struct upstream *u = arg;
	upfs_sweep(&u->fs);
}

static const struct build_tier upstream_tier = {
	.flight_new = upstream_flight_new,
	.flight_start = upstream_flight_start,
	.claim = upstream_claim,
	.flight_end = upstream_flight_end,
	.stop = upstream_stop,
};

struct table *upstream_lease_table(struct kilnd *d)
{
	return d->up->leases;
}

struct up_pace *upstream_pace(struct kilnd *d)
{
	return d->up != NULL ? &d->up->pace : NULL;
}

const struct up_dirs *upstream_dirs(struct kilnd *d)
{
	return &d->up->fs;
}

bool upstream_alias_quiet(struct kilnd *d)
{
	return d->up != NULL && d->up->alias_quiet;
}

void upstream_alias_quiet_set(struct kilnd *d, bool quiet)
{
	if (d->up != NULL)
		d->up->alias_quiet = quiet;
}

int upstream_init(struct kilnd *d, char *err, size_t errlen)
{
	const struct config *cfg = d->cfg;
	if (cfg->upstream_dir == NULL)
		return 0;
	struct upstream *u = calloc(1, sizeof(*u));
	if (u == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	int rc = upfs_open(&u->fs, cfg->upstream_dir, cfg->upstream_stale_s, false, err, errlen);
	if (rc == 0 && (u->leases = table_new()) == NULL) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
	}
	if (rc != 0) {
		upfs_close(&u->fs);
		free(u);
		return rc;
	}
	u->d = d;
	u->refresh_ms = (uint64_t)(cfg->upstream_stale_s * 1000.0 / 4);
	up_pace_init(&u->pace, d, u->refresh_ms < POLL_FIRST_MS ? u->refresh_ms : POLL_FIRST_MS,
		     u->refresh_ms);
	uv_timer_init(d->loop, &u->refresh);
	u->refresh.data = u;
	d->up = u;
	d->tier = &upstream_tier;
	alias_set_hook(d, upstream_alias_set);   /* re-points recorded for the other nodes */
	upstream_lease_init(d);
	if (kilnd_work(d, POOL_UP_SWEEP, sweep_work, NULL, u) != 0)
		log_debug("cannot queue the sweep of the upstream tmp/");
	log_info("upstream tier %s (claims go stale after %.0f s)", u->fs.dir, cfg->upstream_stale_s);
	return 0;
}

void upstream_stop(struct kilnd *d)
{
	struct upstream *u = d->up;
	if (u == NULL || u->closed)
		return;
	u->closed = true;
	up_pace_stop(&u->pace);
	uv_timer_stop(&u->refresh);
	uv_close((uv_handle_t *)&u->refresh, NULL);
}

void upstream_fini(struct kilnd *d)
{
	struct upstream *u = d->up;
	if (u == NULL)
		return;
	upstream_lease_fini(d);
	table_free(u->leases, NULL);
	/* Claims still listed were released by their jobs' completions;
	 * whatever is left (a failed queue) goes stale on its own. */
	while (u->claims != NULL) {
		struct up_claim *c = u->claims;
		u->claims = c->next;
		close(c->fd);
		free(c->path);
		free(c);
	}
	upfs_close(&u->fs);
	free(u);
	d->up = NULL;
}

void upstream_status(struct kilnd *d, cJSON *r)
{
	struct upstream *u = d->up;
	if (u == NULL)
		return;
	cJSON_AddStringToObject(r, "upstream", u->fs.dir);
	cJSON_AddNumberToObject(r, "upstream_stale_s", u->fs.stale_s);
	cJSON_AddNumberToObject(r, "upstream_hits", (double)d->c.upstream_hits);
	cJSON_AddNumberToObject(r, "upstream_publishes", (double)d->c.upstream_publishes);
	cJSON_AddNumberToObject(r, "upstream_waits", (double)d->c.upstream_waits);
	cJSON_AddNumberToObject(r, "upstream_takeovers", (double)d->c.upstream_takeovers);
	cJSON_AddNumberToObject(r, "upstream_errors", (double)d->c.upstream_errors);
	cJSON_AddNumberToObject(r, "upstream_looks", (double)d->c.upstream_looks);
	cJSON_AddNumberToObject(r, "upstream_alias_hits", (double)d->c.upstream_alias_hits);
	cJSON_AddNumberToObject(r, "upstream_alias_records", (double)d->c.upstream_alias_records);
	cJSON_AddNumberToObject(r, "upstream_alias_claims", (double)d->c.upstream_alias_claims);
	cJSON_AddNumberToObject(r, "upstream_alias_claim_waits",
				(double)d->c.upstream_alias_claim_waits);
	cJSON_AddNumberToObject(r, "upstream_alias_claim_takeovers",
				(double)d->c.upstream_alias_claim_takeovers);
	up_pace_status(&u->pace, r);
}
