/*
 * Validation of what an entry depends on (headers.h says why). Each path
 * has one state: whether it exists, its identity (device, inode, size,
 * mtime, ctime, mode) and, once a file dependency needed it, its digest.
 *
 * A state is brought up to date with stat() at most once per batch of
 * requests read (an "epoch": a change made before a request was sent is
 * visible to a stat made after the request was read), unless an event
 * source that sees every change of it says it did not change:
 *   - names (a path found, or looked for and missing): inotify on every
 *     directory along the path, as written and after symlinks, on a
 *     filesystem of the allow-list below, plus /proc/self/mountinfo for
 *     mounts; names change only through those directories.
 *   - content: the same, and only for files only root can write (owned by
 *     root, no group or other write permission, no ACL), since inotify
 *     does not see writes through a shared mapping and root's writes to
 *     system files go through write() or rename(). An inode watch on the
 *     file sees writes through hard links elsewhere.
 * Everything else (files users can write, other filesystems, no inotify)
 * pays one stat per batch. A changed identity means hashing again:
 * on the loop up to HASH_INLINE_MAX, on the pool beyond (the request waits
 * for it: headers_wait); anything but a regular file where a file was
 * recorded is a change, and is never opened. An identity that stands for the digest recorded
 * with the entry (kept from the build, or from before a restart) needs no
 * hashing at all. A digest taken within DIGESTS_RACY_NS of the file's last
 * change is not trusted next time (digests.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "digests.h"
#include "headers.h"
#include "headers_int.h"
#include "kilnd.h"
#include "log.h"
#include "table.h"
#include "tcenv.h"
#include "thread.h"
#include "util.h"

#define VALIDATED_MAX 65536
/* A changed file up to this size is hashed on the loop (well under a
 * millisecond); a larger one on the pool, and the request waits for it. */
#define HASH_INLINE_MAX (256 * 1024)
/* A changed file above this is not hashed to check a hit: it counts as
 * changed (a miss; the build reads it, under --build-timeout). A 4 TiB
 * sparse file swapped in for a header would otherwise hold a pool thread
 * for hours, and a stop waits for the pool. */
#define HASH_CHECK_MAX ((off_t)4 << 30)
/* A directory whose entries take more than this is listed on the pool. */
#define LIST_INLINE_MAX (64 * 1024)

/* When an entry was last found valid. */
struct hvalid {
	uintptr_t gen;
	uint64_t epoch;
	bool all_watched;         /* no dependency needs a stat per batch */
};

/* A callback waiting for a hash on the pool. */
struct hwait {
	void (*cb)(void *arg);
	void *arg;
	struct hwait *next;
};

/* One file hashed on the pool for the loop. */
struct hhash {
	struct kilnd *d;
	char *path;
	bool listing;             /* a directory's listing, not a file's content */
	struct stat got;          /* the identity the digest stands for */
	uint8_t digest[32];
	int rc;
	struct hwait *waiters;
};

static bool same_ident(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mode == b->st_mode &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Brings a state up to date with stat (and lstat where stat finds nothing). */
static void restat(struct headers *h, const char *path, struct hstate *hs)
{
	struct stat st;
	if (hstate_unchosen(h, hs))
		hwatch_choose(h, path, hs);
	bool exists = stat(path, &st) == 0;
	if (!exists)
		memset(&st, 0, sizeof(st));
	if (!hs->known || hs->evented || hs->racy || exists != hs->exists ||
	    (exists && !same_ident(&st, &hs->st)))
		hs->has_digest = hs->has_listing = false;
	hs->exists = exists;
	hs->lexists = exists;
	if (!exists) {
		struct stat lst;
		hs->lexists = lstat(path, &lst) == 0;
	}
	hs->st = st;
	hs->known = true;
	hs->evented = false;
	hs->racy = false;
	hs->epoch = h->epoch;
	hs->clean = hs->names_watched;
	hs->clean_flood = h->flood;
}

enum { DEP_INVALID, DEP_VALID, DEP_PENDING };

static void hash_work(void *arg)
{
	struct hhash *j = arg;
	ASSERT_POOL();
	j->rc = j->listing ? util_sha256_listing(j->path, j->digest, &j->got)
			   : digests_file(j->path, j->digest, &j->got);
}

/* On the loop: the digest goes to the state if the state still describes
 * the file that was hashed, and the requests that waited look again. */
static void hash_done(void *arg, int status)
{
	struct hhash *j = arg;
	struct headers *h = j->d->headers;
	ASSERT_LOOP();
	if (status != 0)
		j->rc = status;   /* not hashed: the state stays unknown */
	struct hstate *hs = h != NULL ? table_get(h->files, j->path) : NULL;
	if (hs != NULL && hs->hashing == j) {
		hs->hashing = NULL;
		if (j->rc == 0 && hs->known && !hs->evented && same_ident(&j->got, &hs->st)) {
			memcpy(j->listing ? hs->listing : hs->digest, j->digest, 32);
			if (j->listing)
				hs->has_listing = true;
			else
				hs->has_digest = true;
			hs->racy = !digests_settled(&hs->st);
			if (hs->racy)
				hs->clean = false;
		} else if (j->rc != 0) {
			hs->known = false;
		}
	}
	if (h != NULL && h->last == j)
		h->last = NULL;
	for (struct hwait *w = j->waiters, *next; w != NULL; w = next) {
		next = w->next;
		w->cb(w->arg);
		free(w);
	}
	free(j->path);
	free(j);
}

/* Starts hashing path on the pool for hs; false when it cannot be queued. */
static bool hash_on_pool(struct kilnd *d, const char *path, struct hstate *hs, bool listing)
{
	struct hhash *j = calloc(1, sizeof(*j));
	if (j == NULL || (j->path = strdup(path)) == NULL) {
		free(j);
		return false;
	}
	j->d = d;
	j->listing = listing;
	if (kilnd_work(d, POOL_HASH, hash_work, hash_done, j) != 0) {
		free(j->path);
		free(j);
		return false;
	}
	hs->hashing = j;
	d->headers->hashed_on_pool++;
	return true;
}

/* The identity recorded with dep is the one the path has now. */
static bool recorded_ident(const struct store_dep *dep, const struct stat *st)
{
	return dep->ino != 0 && dep->dev == (uint64_t)st->st_dev && dep->ino == (uint64_t)st->st_ino &&
	       dep->size == (uint64_t)st->st_size &&
	       dep->mtime_ns == (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec &&
	       dep->ctime_ns == (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
}

/* The file's digest, from the state, from the entry's record when the
 * identity it was recorded with is the file's now, or hashed: on the loop
 * when small, else on the pool (DEP_PENDING, with h->last the job). */
static int file_digest(struct kilnd *d, struct hstate *hs, const struct store_dep *dep,
		       const char *path)
{
	struct headers *h = d->headers;
	if (hs->has_digest)
		return DEP_VALID;
	const struct stat *st = &hs->st;
	if (recorded_ident(dep, st)) {
		memcpy(hs->digest, dep->digest, 32);
		hs->has_digest = true;
		return DEP_VALID;
	}
	if (hs->hashing == NULL && st->st_size > HASH_CHECK_MAX) {
		char sz[32];
		log_info("%s changed and has %s: not hashed to check a hit, a miss", path,
			 util_format_size((uint64_t)st->st_size, sz, sizeof(sz)));
		return DEP_INVALID;
	}
	if (hs->hashing == NULL && st->st_size > HASH_INLINE_MAX && hash_on_pool(d, path, hs, false))
		log_debug("%s changed (%lld bytes): hashed on the pool", path, (long long)st->st_size);
	if (hs->hashing != NULL) {
		h->last = hs->hashing;
		return DEP_PENDING;
	}
	struct stat now;
	if (digests_file(path, hs->digest, &now) != 0 || !same_ident(&now, st)) {
		hs->known = false;
		return DEP_INVALID;
	}
	hs->has_digest = true;
	hs->racy = !digests_settled(st);
	if (hs->racy)
		hs->clean = false;
	return DEP_VALID;
}

/* A directory's listing digest, as file_digest does for a file's content:
 * from the state, from the record when the directory's identity is the
 * recorded one (its times move with every name added, removed or renamed
 * in it), or listed: on the loop when small, else on the pool. */
static int listing_digest(struct kilnd *d, struct hstate *hs, const struct store_dep *dep,
			  const char *path)
{
	struct headers *h = d->headers;
	if (hs->has_listing)
		return DEP_VALID;
	if (recorded_ident(dep, &hs->st)) {
		memcpy(hs->listing, dep->digest, 32);
		hs->has_listing = true;
		return DEP_VALID;
	}
	if (hs->hashing == NULL && hs->st.st_size > LIST_INLINE_MAX && hash_on_pool(d, path, hs, true))
		log_debug("%s changed (%lld bytes of entries): listed on the pool", path,
			  (long long)hs->st.st_size);
	if (hs->hashing != NULL) {
		h->last = hs->hashing;
		return DEP_PENDING;
	}
	struct stat now;
	if (util_sha256_listing(path, hs->listing, &now) != 0 || !same_ident(&now, &hs->st)) {
		hs->known = false;
		return DEP_INVALID;
	}
	hs->has_listing = true;
	hs->racy = !digests_settled(&hs->st);
	if (hs->racy)
		hs->clean = false;
	return DEP_VALID;
}

static struct hstate *state_of(struct headers *h, const char *path)
{
	struct hstate *hs = table_get(h->files, path);
	if (hs != NULL)
		return hs;
	hs = calloc(1, sizeof(*hs));
	if (hs == NULL || table_put(h->files, path, hs, NULL) != 0) {
		free(hs);
		return NULL;
	}
	if (path[0] == '/' && hwatch_index(h, path, hs) != 0) {
		/* Not in the index, events would miss it: never watched. */
		table_del(h->files, path);
		free(hs);
		return NULL;
	}
	return hs;
}

/* The value toolchain runs get (tcenv.h), as a dependency records it:
 * whether it is set and its SHA-256. It never changes while kilnd runs,
 * so each variable is hashed once. */
struct henv {
	bool set;
	uint8_t digest[32];
};

static bool env_valid(struct headers *h, const struct store_dep *dep)
{
	struct henv *ev = table_get(h->env, dep->path);
	if (ev == NULL) {
		const char *v = tcenv_get(dep->path);
		if ((ev = calloc(1, sizeof(*ev))) == NULL)
			return false;
		ev->set = v != NULL;
		util_sha256(v != NULL ? v : "", v != NULL ? strlen(v) : 0, ev->digest);
		if (table_put(h->env, dep->path, ev, NULL) != 0) {
			free(ev);
			return false;
		}
	}
	return ev->set == (dep->mode != 0) && memcmp(ev->digest, dep->digest, 32) == 0;
}

/* A path's state brought up to date for a dependency of that kind. */
static void refresh(struct headers *h, const char *path, struct hstate *hs, bool content)
{
	bool fresh = hs->known && hstate_clean(h, hs) &&
		     (content ? hs->content_watched : hs->names_watched);
	if (!fresh && !(hs->known && hs->epoch == h->epoch))
		restat(h, path, hs);
}

/*
 * A program looked up along PATH: found again where it was (or again
 * nowhere), each candidate along the toolchains' PATH a state of its own,
 * so that names are watched or stat'ed once per batch like any other.
 */
static int search_valid(struct headers *h, const struct store_dep *dep, bool *watched)
{
	char cand[PATH_MAX + 8], found[PATH_MAX + 8] = "";
	uint8_t digest[32];
	for (const char *p = tcenv()->path; *p != '\0' && found[0] == '\0';) {
		size_t n = strcspn(p, ":");
		if (n > 0 && snprintf(cand, sizeof(cand), "%.*s%s%s", (int)n, p,
				      p[n - 1] == '/' ? "" : "/", dep->path) < (int)sizeof(cand)) {
			struct hstate *hs = state_of(h, cand);
			if (hs == NULL) {
				*watched = false;
				return DEP_INVALID;
			}
			refresh(h, cand, hs, false);
			if (hs->exists && S_ISREG(hs->st.st_mode) && (hs->st.st_mode & 0111) != 0)
				snprintf(found, sizeof(found), "%s", cand);
			if (!hs->names_watched || !hstate_clean(h, hs))
				*watched = false;
		}
		p += n + (p[n] == ':');
	}
	util_sha256(found, strlen(found), digest);
	return (found[0] != '\0') == (dep->mode != 0) && memcmp(digest, dep->digest, 32) == 0
		       ? DEP_VALID
		       : DEP_INVALID;
}

/* One dependency; *watched turns false when it needed a stat this batch. */
static int dep_valid(struct kilnd *d, const struct store_dep *dep, bool *watched)
{
	struct headers *h = d->headers;
	if (dep->kind == STORE_DEP_ENV)
		return env_valid(h, dep) ? DEP_VALID : DEP_INVALID; /* never changes */
	if (dep->kind == STORE_DEP_SEARCH)
		return search_valid(h, dep, watched);
	struct hstate *hs = state_of(h, dep->path);
	if (hs == NULL) {
		*watched = false;
		return DEP_INVALID;
	}
	/* A listing is content too: no event source is trusted for it, its
	 * directory is stat'ed once per batch (its times move with its names). */
	bool content = dep->kind == STORE_DEP_FILE || dep->kind == STORE_DEP_LISTING;
	refresh(h, dep->path, hs, content);
	/* Every kind named, no default: a kind added to depkind.h is a
	 * compiler warning (-Wswitch) here until its check is written. */
	int valid = DEP_INVALID;
	switch ((enum dep_kind)dep->kind) {
	case STORE_DEP_ABSENT:
		valid = !hs->exists;
		break;
	case STORE_DEP_EXISTS:
		valid = hs->exists ? hs->st.st_mode == dep->mode
				   : hs->lexists && (dep->mode & S_IFMT) == S_IFLNK;
		break;
	case STORE_DEP_FILE:
		/* Anything but a regular file (a FIFO, a device put in its
		 * place) is a changed input, and is never opened. */
		valid = !hs->exists || !S_ISREG(hs->st.st_mode) ? DEP_INVALID
								 : file_digest(d, hs, dep, dep->path);
		if (valid == DEP_VALID && memcmp(hs->digest, dep->digest, 32) != 0)
			valid = DEP_INVALID;
		break;
	case STORE_DEP_LISTING:
		valid = !hs->exists || !S_ISDIR(hs->st.st_mode) ? DEP_INVALID
								: listing_digest(d, hs, dep, dep->path);
		if (valid == DEP_VALID && memcmp(hs->listing, dep->digest, 32) != 0)
			valid = DEP_INVALID;
		break;
	case STORE_DEP_ENV:      /* answered above */
	case STORE_DEP_SEARCH:
	case DEP__COUNT:         /* out of range: no decoder lets one in */
		valid = DEP_INVALID;
		break;
	}
	/* After the digest: a file hashed too soon after a change is not clean. */
	if (!(content ? hs->content_watched : hs->names_watched) || !hstate_clean(h, hs))
		*watched = false;
	return valid;
}

void headers_requests_read(struct kilnd *d)
{
	ASSERT_LOOP();
	if (d->headers != NULL) {
		d->headers->stale = true;
		d->headers->epoch++;
	}
}

int headers_check(struct kilnd *d, const struct store_entry *e)
{
	struct headers *h = d->headers;
	ASSERT_LOOP();
	if (e->ndeps == 0)
		return HEADERS_VALID;
	if (h == NULL)
		return HEADERS_INVALID; /* stopping: nothing is checked any more */
	if (h->ifd >= 0 && h->stale)
		hwatch_catch_up(h);
	hwatch_after_mounts(h);
	struct hvalid *v = table_get(h->validated, e->key);
	if (v != NULL && v->gen == h->gen && (v->all_watched || v->epoch == h->epoch))
		return HEADERS_VALID;
	bool watched = true;
	for (size_t i = 0; i < e->ndeps; i++) {
		bool was = watched;
		int rc = dep_valid(d, &e->deps[i], &watched);
		if (rc == DEP_PENDING)
			return HEADERS_PENDING;
		if (rc != DEP_VALID)
			return HEADERS_INVALID;
		if (was && !watched)
			log_debug("entry %.16s: %s (%s) is checked with stat", e->key, e->deps[i].path,
				  store_dep_kind_name(e->deps[i].kind));
	}
	if (v == NULL) {
		if (table_count(h->validated) >= VALIDATED_MAX) {
			table_free(h->validated, free);
			h->validated = table_new();
		}
		v = calloc(1, sizeof(*v));
		if (v == NULL || h->validated == NULL || table_put(h->validated, e->key, v, NULL) != 0) {
			free(v);
			return HEADERS_VALID;
		}
	}
	v->gen = h->gen;
	v->epoch = h->epoch;
	v->all_watched = watched;
	return HEADERS_VALID;
}

int headers_wait(struct kilnd *d, void (*cb)(void *arg), void *arg)
{
	ASSERT_LOOP();
	struct headers *h = d->headers;
	struct hwait *w;
	if (h == NULL || h->last == NULL || (w = calloc(1, sizeof(*w))) == NULL)
		return -EINVAL;
	w->cb = cb;
	w->arg = arg;
	w->next = h->last->waiters;
	h->last->waiters = w;
	return 0;
}

int headers_init(struct kilnd *d)
{
	struct headers *h = calloc(1, sizeof(*h));
	if (h == NULL)
		return -ENOMEM;
	h->ifd = -1;
	h->mfd = -1;
	h->files = table_new();
	h->index = table_new();
	h->dirs = table_new();
	h->wds = table_new();
	h->validated = table_new();
	h->env = table_new();
	d->headers = h;
	if (h->files == NULL || h->index == NULL || h->dirs == NULL || h->wds == NULL ||
	    h->validated == NULL || h->env == NULL) {
		headers_fini(d);
		return -ENOMEM;
	}
	hwatch_start(d, h);
	return 0;
}

bool headers_events_complete(const struct kilnd *d)
{
	return d->headers != NULL && d->headers->ifd >= 0 && d->headers->mpolling;
}

void headers_counts(const struct kilnd *d, uint64_t *events, uint64_t *floods,
		    uint64_t *hashed_on_pool)
{
	const struct headers *h = d->headers;
	*events = h != NULL ? h->events : 0;
	*floods = h != NULL ? h->floods : 0;
	*hashed_on_pool = h != NULL ? h->hashed_on_pool : 0;
}

static void free_hstate(void *val)
{
	struct hstate *hs = val;
	/* A hash still on the pool finds no state when it ends. */
	free(hs->real);
	free(hs->indexed_real);
	free(hs);
}

/* Both polls live in h: it goes with the last of them. */
static void on_poll_closed(uv_handle_t *handle)
{
	struct headers *h = handle->data;
	if (--h->closing > 0)
		return;
	if (h->mfd >= 0)
		close(h->mfd);
	if (h->ifd >= 0)
		close(h->ifd);
	free(h);
}

void headers_fini(struct kilnd *d)
{
	struct headers *h = d->headers;
	if (h == NULL)
		return;
	d->headers = NULL;
	table_free(h->files, free_hstate);
	hwatch_free(h);
	table_free(h->validated, free);
	table_free(h->env, free);
	h->closing = h->polling + h->mpolling;
	if (h->mpolling) {
		uv_poll_stop(&h->mpoll);
		h->mpoll.data = h;
		uv_close((uv_handle_t *)&h->mpoll, on_poll_closed);
	}
	if (h->polling) {
		uv_poll_stop(&h->poll);
		h->poll.data = h;
		uv_close((uv_handle_t *)&h->poll, on_poll_closed);
	}
	if (h->closing > 0)
		return;
	if (h->ifd >= 0)
		close(h->ifd);
	free(h);
}
