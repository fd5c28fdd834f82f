/*
 * Header validation with inotify; see headers.h for why. The watch on a
 * header's directory is added before the header is examined, so a change
 * that lands while it is being hashed still marks it dirty.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "headers.h"
#include "kilnd.h"
#include "log.h"
#include "table.h"
#include "util.h"

#define HEADER_HASH_MAX ((uint64_t)1 << 20)
#define VALIDATED_MAX 65536
#define WATCH_MASK (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | \
		    IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

struct hstate {
	uint64_t size;
	int64_t mtime_ns;
	uint8_t digest[32];
	bool known;     /* size, mtime and digest describe the file */
	bool clean;     /* no event since they were computed, and the dir is watched */
};

struct hdir {
	int wd;
	char *dir;
};

struct headers {
	int ifd;
	uv_poll_t poll;
	bool polling;
	struct table *files;      /* path -> struct hstate */
	struct table *dirs;       /* directory -> struct hdir */
	struct table *wds;        /* decimal wd -> struct hdir */
	struct table *validated;  /* artifact key -> generation + 1 */
	uintptr_t gen;            /* bumped whenever any header turns dirty */
};

struct dirty_ctx {
	struct headers *h;
	const char *dir;
	size_t dirlen;
};

static void mark_dirty_in(const char *key, void *val, void *arg)
{
	struct dirty_ctx *ctx = arg;
	struct hstate *hs = val;
	if (ctx->dir == NULL || (strncmp(key, ctx->dir, ctx->dirlen) == 0 && key[ctx->dirlen] == '/'))
		hs->clean = false;
}

static void mark_dir_dirty(struct headers *h, const char *dir)
{
	struct dirty_ctx ctx = { h, dir, dir != NULL ? strlen(dir) : 0 };
	table_foreach(h->files, mark_dirty_in, &ctx);
	h->gen++;
}

static void drop_dir(struct headers *h, struct hdir *hd)
{
	char wdkey[16];
	snprintf(wdkey, sizeof(wdkey), "%d", hd->wd);
	table_del(h->wds, wdkey);
	table_del(h->dirs, hd->dir);
	free(hd->dir);
	free(hd);
}

static void handle_event(struct headers *h, const struct inotify_event *ev)
{
	if (ev->mask & IN_Q_OVERFLOW) {
		/* Events were lost: trust nothing that was checked before. */
		mark_dir_dirty(h, NULL);
		return;
	}
	char wdkey[16];
	snprintf(wdkey, sizeof(wdkey), "%d", ev->wd);
	struct hdir *hd = table_get(h->wds, wdkey);
	if (hd == NULL)
		return;
	if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT)) {
		mark_dir_dirty(h, hd->dir);
		if (ev->mask & IN_IGNORED)
			drop_dir(h, hd);
		else
			inotify_rm_watch(h->ifd, hd->wd);
		return;
	}
	if (ev->len == 0)
		return;
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", hd->dir, ev->name);
	struct hstate *hs = table_get(h->files, path);
	if (hs != NULL && hs->clean) {
		hs->clean = false;
		h->gen++;
	}
}

static void drain(struct headers *h)
{
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	for (;;) {
		ssize_t n = read(h->ifd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			handle_event(h, ev);
			p += sizeof(*ev) + ev->len;
		}
	}
}

static void on_inotify(uv_poll_t *p, int status, int events)
{
	struct kilnd *d = p->data;
	drain(d->headers);
}

/* Watches the directory of path; false when it cannot be watched. */
static bool ensure_watch(struct headers *h, const char *path)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash == NULL || h->ifd < 0)
		return false;
	*slash = '\0';
	if (dir[0] == '\0')
		strcpy(dir, "/");
	if (table_get(h->dirs, dir) != NULL)
		return true;
	int wd = inotify_add_watch(h->ifd, dir, WATCH_MASK);
	if (wd < 0) {
		log_debug("cannot watch %s (%s): its headers are checked with stat on every use",
			  dir, strerror(errno));
		return false;
	}
	char wdkey[16];
	snprintf(wdkey, sizeof(wdkey), "%d", wd);
	struct hdir *hd = table_get(h->wds, wdkey);
	if (hd != NULL) {
		/* The same directory under another name (a symlink): the kernel gave
		 * back the existing watch, which already serves this name. */
		return true;
	}
	hd = calloc(1, sizeof(*hd));
	if (hd == NULL || (hd->dir = strdup(dir)) == NULL) {
		free(hd);
		inotify_rm_watch(h->ifd, wd);
		return false;
	}
	hd->wd = wd;
	if (table_put(h->dirs, dir, hd, NULL) != 0 || table_put(h->wds, wdkey, hd, NULL) != 0) {
		table_del(h->dirs, dir);
		inotify_rm_watch(h->ifd, wd);
		free(hd->dir);
		free(hd);
		return false;
	}
	return true;
}

/* Brings a header's state up to date; false when it cannot be known. */
static bool refresh(struct headers *h, const char *path, struct hstate *hs)
{
	bool watched = ensure_watch(h, path);
	struct stat st;
	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
		hs->known = false;
		return false;
	}
	int64_t mtime = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	if (!hs->known || hs->size != (uint64_t)st.st_size || hs->mtime_ns != mtime) {
		if ((uint64_t)st.st_size > HEADER_HASH_MAX || util_sha256_file(path, hs->digest) != 0) {
			hs->known = false;
			return false;
		}
		hs->size = (uint64_t)st.st_size;
		hs->mtime_ns = mtime;
		hs->known = true;
	}
	hs->clean = watched;
	return true;
}

static bool dep_valid(struct headers *h, const struct store_dep *dep, bool *cacheable)
{
	struct hstate *hs = table_get(h->files, dep->path);
	if (hs == NULL) {
		hs = calloc(1, sizeof(*hs));
		if (hs == NULL || table_put(h->files, dep->path, hs, NULL) != 0) {
			free(hs);
			*cacheable = false;
			return false;
		}
	}
	if (!hs->clean || !hs->known) {
		if (!refresh(h, dep->path, hs)) {
			*cacheable = false;
			return false;
		}
	}
	if (!hs->clean)
		*cacheable = false;
	return memcmp(hs->digest, dep->digest, 32) == 0;
}

bool headers_valid(struct kilnd *d, const struct store_entry *e)
{
	struct headers *h = d->headers;
	if (e->ndeps == 0)
		return true;
	if (h->ifd >= 0)
		drain(h);
	uintptr_t seen = (uintptr_t)table_get(h->validated, e->key);
	if (seen == h->gen + 1)
		return true;
	bool cacheable = true;
	for (size_t i = 0; i < e->ndeps; i++) {
		if (!dep_valid(h, &e->deps[i], &cacheable))
			return false;
	}
	if (cacheable) {
		if (table_count(h->validated) >= VALIDATED_MAX) {
			table_free(h->validated, NULL);
			h->validated = table_new();
		}
		if (h->validated != NULL)
			table_put(h->validated, e->key, (void *)(h->gen + 1), NULL);
	}
	return true;
}

int headers_init(struct kilnd *d)
{
	struct headers *h = calloc(1, sizeof(*h));
	if (h == NULL)
		return -ENOMEM;
	h->files = table_new();
	h->dirs = table_new();
	h->wds = table_new();
	h->validated = table_new();
	if (h->files == NULL || h->dirs == NULL || h->wds == NULL || h->validated == NULL) {
		d->headers = h;
		headers_fini(d);
		return -ENOMEM;
	}
	h->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (h->ifd < 0) {
		log_warn("inotify unavailable (%s): headers are checked with stat on every use",
			 strerror(errno));
	} else {
		uv_poll_init(d->loop, &h->poll, h->ifd);
		h->poll.data = d;
		uv_poll_start(&h->poll, UV_READABLE, on_inotify);
		h->polling = true;
	}
	d->headers = h;
	return 0;
}

static void free_hdir_once(const char *key, void *val, void *ctx)
{
	struct hdir *hd = val;
	(void)key;
	(void)ctx;
	free(hd->dir);
	free(hd);
}

static void on_poll_closed(uv_handle_t *handle)
{
	struct headers *h = handle->data;
	close(h->ifd);
	free(h);
}

void headers_fini(struct kilnd *d)
{
	struct headers *h = d->headers;
	if (h == NULL)
		return;
	d->headers = NULL;
	table_free(h->files, free);
	if (h->wds != NULL)
		table_foreach(h->wds, free_hdir_once, NULL);
	table_free(h->wds, NULL);
	table_free(h->dirs, NULL);
	table_free(h->validated, NULL);
	if (h->polling) {
		uv_poll_stop(&h->poll);
		h->poll.data = h;
		uv_close((uv_handle_t *)&h->poll, on_poll_closed);
		return;
	}
	if (h->ifd >= 0)
		close(h->ifd);
	free(h);
}
