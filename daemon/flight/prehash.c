/*
 * Inputs hashed while the compiler runs (prehash.h). One state per build,
 * owned here, not by the build: a timer on the loop, one pool job at a time.
 * Each job reads the whole trace written so far (deps_read_trace, as the
 * publish does), and hashes the regular files it names that it has not
 * hashed before, outside the build directory, of at most PREHASH_MAX_FILE
 * bytes. The first look comes PREHASH_FIRST_MS after the compile starts
 * (a compiler reads its headers first), the next ones at twice the delay
 * each time, up to PREHASH_MAX_MS, PREHASH_MAX_LOOKS in all (about 6 s of
 * compiling: the rest is the publish's), and none while the trace is
 * larger than PREHASH_MAX_TRACE (each look reads all of it). A look that
 * finds every file hashed already is the last.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <uv.h>

#include "flight_int.h"
#include "deps.h"
#include "digests.h"
#include "key.h"
#include "kilnd.h"
#include "log.h"
#include "prehash.h"
#include "table.h"
#include "thread.h"
#include "trace.h"

#define PREHASH_FIRST_MS 40
#define PREHASH_MAX_MS 640
#define PREHASH_MAX_LOOKS 12
#define PREHASH_SETTLED_FILES 8
#define PREHASH_MAX_TRACE ((off_t)16 << 20)
/* Headers and the libraries the compiler's programs load (libisl, libc:
 * 2 MiB each), not the programs themselves (cc1plus: 35 MiB), which the
 * toolchain's own job hashes (prewarm.c). */
#define PREHASH_MAX_FILE (8u << 20)

struct prehash {
	uv_timer_t timer;       /* first: the close callback finds the struct */
	struct kilnd *d;
	char *dir;              /* the build directory, as the build names it */
	char token[33];
	bool cpu_in_key;
	struct table *done;     /* paths looked at; the job's alone while it runs */
	uint64_t delay_ms;
	bool job;               /* a pool job runs now */
	bool stopped;
	bool nothing_new;       /* the last look hashed no file (all known already): the last */
	bool timer_closed;
	char rkey[17];
	/* hashed: files hashed (not found in the digest cache) while it compiles,
	 * by kilnd's counter; looks: traces read; ticks: jobs run */
	unsigned hashed, looks, said, ticks;
};

static void maybe_free(struct prehash *p)
{
	if (!p->stopped || !p->timer_closed || p->job)
		return;
	table_free(p->done, NULL);
	free(p->dir);
	free(p);
}

/* Whether path names a file inside the build directory bdir (its sources
 * and outputs: new, so never cached; the publish reads them). */
static bool inside(const char *path, const char *bdir, size_t blen)
{
	return strncmp(path, bdir, blen) == 0 && (path[blen] == '/' || path[blen] == '\0');
}

/* The bytes in the build's trace directory now (-1 when unreadable). */
static off_t trace_bytes(const char *dir)
{
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/trace", dir);
	DIR *dp = opendir(path);
	if (dp == NULL)
		return -1;
	off_t total = 0;
	struct dirent *de;
	struct stat st;
	while ((de = readdir(dp)) != NULL)
		if (de->d_name[0] != '.' && fstatat(dirfd(dp), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			total += st.st_size;
	closedir(dp);
	return total;
}

static void prehash_work(void *arg)
{
	ASSERT_POOL();
	struct prehash *p = arg;
	struct trace_result r;
	char bdir[PATH_MAX];
	bool have;
	off_t bytes = trace_bytes(p->dir);
	if (bytes < 0 || bytes > PREHASH_MAX_TRACE || realpath(p->dir, bdir) == NULL ||
	    deps_read_trace(p->dir, p->token, p->d->cfg->exec_helper, p->cpu_in_key, &r, &have) != 0)
		return;
	size_t blen = strlen(bdir);
	uint64_t hashed0, bytes0, cached0, hashed1;
	digests_counts(&hashed0, &bytes0, &cached0);
	p->looks++;
	unsigned seen = 0;
	for (size_t i = 0; i < r.ndeps; i++) {
		const struct store_dep *dep = &r.deps[i];
		struct stat st;
		uint8_t digest[32];
		if (dep->kind != STORE_DEP_FILE || inside(dep->path, bdir, blen) ||
		    table_get(p->done, dep->path) != NULL ||
		    table_put(p->done, dep->path, (void *)1, NULL) != 0)
			continue;
		if (stat(dep->path, &st) != 0 || !S_ISREG(st.st_mode) ||
		    (uint64_t)st.st_size > PREHASH_MAX_FILE)
			continue;
		/* Its result is not used here: the cache keeps it, or not. */
		seen++;
		digests_file(dep->path, digest, &st);
	}
	trace_result_free(&r);
	/* Files looked at, none new to hash (the usual case once kilnd has
	 * built with these headers): the next looks would only parse the trace
	 * again, CPU that the compilers of a busy node need. A first look
	 * before the compiler opened its headers sees too few to say. The
	 * counter is kilnd's: another job hashing meanwhile means one look more. */
	digests_counts(&hashed1, &bytes0, &cached0);
	p->hashed += (unsigned)(hashed1 - hashed0);
	if (seen >= PREHASH_SETTLED_FILES && hashed1 == hashed0)
		p->nothing_new = true;
}

static void on_tick(uv_timer_t *t);

static void prehash_done(void *arg, int status)
{
	struct prehash *p = arg;
	(void)status;
	p->job = false;
	p->ticks++;
	if (p->hashed > p->said) {
		log_debug("build %s: %u inputs hashed so far while it compiles (%u looks at the "
			  "trace)", p->rkey, p->hashed, p->looks);
		p->said = p->hashed;
	}
	if (!p->stopped && !p->nothing_new && p->ticks < PREHASH_MAX_LOOKS) {
		p->delay_ms = p->delay_ms * 2 < PREHASH_MAX_MS ? p->delay_ms * 2 : PREHASH_MAX_MS;
		uv_timer_start(&p->timer, on_tick, p->delay_ms, 0);
	}
	maybe_free(p);
}

static void on_tick(uv_timer_t *t)
{
	struct prehash *p = t->data;
	if (p->stopped || p->job)
		return;
	p->job = true;
	if (kilnd_work(p->d, POOL_PREHASH, prehash_work, prehash_done, p) != 0)
		p->job = false;
}

struct prehash *prehash_start(struct flight *b)
{
	ASSERT_LOOP();
	struct prehash *p = calloc(1, sizeof(*p));
	if (p == NULL)
		return NULL;
	p->d = b->d;
	p->dir = strdup(b->dir);
	p->done = table_new();
	if (p->dir == NULL || p->done == NULL) {
		table_free(p->done, NULL);
		free(p->dir);
		free(p);
		return NULL;
	}
	memcpy(p->token, b->trace_token, sizeof(p->token));
	p->cpu_in_key = key_args_native(b->in.req.args, b->in.req.nargs);
	snprintf(p->rkey, sizeof(p->rkey), "%.16s", b->in.rkey);
	p->delay_ms = PREHASH_FIRST_MS;
	uv_timer_init(b->d->loop, &p->timer);
	p->timer.data = p;
	uv_timer_start(&p->timer, on_tick, p->delay_ms, 0);
	return p;
}

static void on_closed(uv_handle_t *h)
{
	struct prehash *p = h->data;
	p->timer_closed = true;
	maybe_free(p);
}

void prehash_stop(struct prehash *p)
{
	if (p == NULL)
		return;
	ASSERT_LOOP();
	p->stopped = true;
	uv_timer_stop(&p->timer);
	uv_close((uv_handle_t *)&p->timer, on_closed);
}
