/*
 * Header validation with inotify; see headers.h for why. A header is watched
 * through its directory, and every directory above it is watched for
 * renames and deletions, so that replacing /opt/stack/include or /opt itself
 * is seen too. A path through a symlink (a "current" link flipped to a new
 * release, /lib on a merged-/usr system) is watched both along the path as
 * written, to see the link change, and at its target, to see the file change.
 * Watches are added before a header is examined, so a change that lands
 * while it is being hashed still marks it dirty. Headers on a network
 * filesystem (where inotify does not see other nodes' writes), or that
 * cannot be watched, are checked with stat (device, inode, size, mtime,
 * ctime) on every use.
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
#include <sys/vfs.h>
#include <unistd.h>

#include "headers.h"
#include "kilnd.h"
#include "log.h"
#include "table.h"
#include "util.h"

#define HEADER_HASH_MAX ((uint64_t)1 << 20)
#define VALIDATED_MAX 65536
/* Directories above a header: only renames, creations and deletions matter. */
#define TREE_MASK (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | \
		   IN_MOVE_SELF | IN_ONLYDIR)
/* A header's own directory: writes to its files too. */
#define FILE_MASK (TREE_MASK | IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE)

enum hmode { MODE_NEW = 0, MODE_WATCHED, MODE_STAT };

struct hstate {
	enum hmode mode;
	uint64_t size;
	int64_t mtime_ns, ctime_ns;
	uint64_t dev, ino;
	uint8_t digest[32];
	char *real;     /* the path with symlinks resolved, when it differs */
	bool known;     /* the fields above describe the file */
	bool clean;     /* watched, and no event since they were computed */
	bool evented;   /* an event came: rehash even if stat looks the same */
};

struct hdir {
	int wd;
	uint32_t mask;
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
	bool stale;               /* a request was read since the last drain */
};

struct dirty_ctx {
	const char *prefix;       /* NULL: everything */
	size_t len;
	bool rewatch;             /* the watches on the way are gone: choose anew */
	size_t marked;
	struct hdir **drop;       /* directories below prefix (rewatch only) */
	size_t ndrop, cap;
};

static bool below(const char *path, const struct dirty_ctx *ctx)
{
	return ctx->prefix == NULL || (strncmp(path, ctx->prefix, ctx->len) == 0 &&
				       (path[ctx->len] == '\0' || path[ctx->len] == '/'));
}

static void mark_dirty_in(const char *key, void *val, void *arg)
{
	struct dirty_ctx *ctx = arg;
	struct hstate *hs = val;
	if (!below(key, ctx) && (hs->real == NULL || !below(hs->real, ctx)))
		return;
	hs->evented = true;
	if (ctx->rewatch)
		hs->mode = MODE_NEW;
	if (hs->clean) {
		hs->clean = false;
		ctx->marked++;
	}
}

static void collect_dir(const char *key, void *val, void *arg)
{
	struct dirty_ctx *ctx = arg;
	if (!below(key, ctx))
		return;
	if (ctx->ndrop == ctx->cap) {
		size_t ncap = ctx->cap == 0 ? 16 : ctx->cap * 2;
		struct hdir **nd = realloc(ctx->drop, ncap * sizeof(*nd));
		if (nd == NULL)
			return;
		ctx->drop = nd;
		ctx->cap = ncap;
	}
	ctx->drop[ctx->ndrop++] = val;
}

static void drop_dir(struct headers *h, struct hdir *hd)
{
	char wdkey[16];
	snprintf(wdkey, sizeof(wdkey), "%d", hd->wd);
	inotify_rm_watch(h->ifd, hd->wd);
	table_del(h->wds, wdkey);
	table_del(h->dirs, hd->dir);
	free(hd->dir);
	free(hd);
}

/*
 * Marks the file at prefix, and everything below it, dirty. With rewatch
 * (a directory at or below prefix moved or went away), the watches below it
 * describe other directories now: they are dropped, and the headers choose
 * how to be tracked again at their next check.
 */
static void mark_dirty(struct headers *h, const char *prefix, bool rewatch)
{
	struct dirty_ctx ctx = { .prefix = prefix, .len = prefix != NULL ? strlen(prefix) : 0,
				 .rewatch = rewatch };
	table_foreach(h->files, mark_dirty_in, &ctx);
	if (rewatch) {
		table_foreach(h->dirs, collect_dir, &ctx);
		for (size_t i = 0; i < ctx.ndrop; i++)
			drop_dir(h, ctx.drop[i]);
		free(ctx.drop);
	}
	if (ctx.marked > 0 || ctx.ndrop > 0)
		h->gen++;
}

static void handle_event(struct headers *h, const struct inotify_event *ev)
{
	if (ev->mask & IN_Q_OVERFLOW) {
		/* Events were lost: trust nothing that was checked before. */
		mark_dirty(h, NULL, false);
		return;
	}
	char wdkey[16];
	snprintf(wdkey, sizeof(wdkey), "%d", ev->wd);
	struct hdir *hd = table_get(h->wds, wdkey);
	if (hd == NULL)
		return;
	if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT)) {
		/* The directory itself went away or moved: its watch, and those
		 * below it, no longer describe the paths. */
		char dir[PATH_MAX];
		snprintf(dir, sizeof(dir), "%s", hd->dir);
		mark_dirty(h, dir, true);
		return;
	}
	if (ev->len == 0)
		return;
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s%s%s", hd->dir, strcmp(hd->dir, "/") == 0 ? "" : "/", ev->name);
	/* A name created, removed or renamed here may be a directory or a
	 * symlink on the way to headers: where their paths lead is open again. */
	mark_dirty(h, path, (ev->mask & (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO)) != 0);
}

static void drain(struct headers *h)
{
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	h->stale = false;
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

/* Adds (or widens) the watch on one directory. */
static bool watch_dir(struct headers *h, const char *dir, uint32_t mask)
{
	struct hdir *hd = table_get(h->dirs, dir);
	if (hd != NULL && (hd->mask & mask) == mask)
		return true;
	int wd = inotify_add_watch(h->ifd, dir, mask | IN_MASK_ADD);
	if (wd < 0) {
		log_debug("cannot watch %s (%s): headers below it are checked with stat on every use",
			  dir, strerror(errno));
		return false;
	}
	if (hd != NULL) {
		hd->mask |= mask;
		return true;
	}
	hd = calloc(1, sizeof(*hd));
	if (hd == NULL || (hd->dir = strdup(dir)) == NULL) {
		free(hd);
		inotify_rm_watch(h->ifd, wd);
		return false;
	}
	hd->wd = wd;
	hd->mask = mask;
	char wdkey[16];
	snprintf(wdkey, sizeof(wdkey), "%d", wd);
	struct hdir *same = table_get(h->wds, wdkey);
	if (same != NULL) {
		/* The directory is watched already under its canonical name (real
		 * paths are watched first), and events come under that name. */
		same->mask |= mask;
		free(hd->dir);
		free(hd);
		return true;
	}
	if (table_put(h->dirs, dir, hd, NULL) != 0 || table_put(h->wds, wdkey, hd, NULL) != 0) {
		table_del(h->dirs, dir);
		free(hd->dir);
		free(hd);
		return false;
	}
	return true;
}

/* inotify sees only this node's writes: not good enough on shared filesystems. */
static bool local_fs(const char *dir)
{
	static const long remote[] = {
		0x6969,      /* NFS */
		0x0BD00BD0,  /* Lustre */
		0x47504653,  /* GPFS */
		0xFF534D42,  /* CIFS */
		0xFE534D42,  /* SMB2 */
		0x00C36400,  /* Ceph */
		0xAAD7AAEA,  /* PanFS */
		0x19830326,  /* BeeGFS */
		0x5346414F,  /* AFS */
		0x65735546,  /* FUSE */
		0x013111A8,  /* IBRIX */
	};
	struct statfs fs;
	if (statfs(dir, &fs) != 0)
		return false;
	for (size_t i = 0; i < sizeof(remote) / sizeof(remote[0]); i++) {
		if ((long)fs.f_type == remote[i])
			return false;
	}
	return true;
}

/* Cuts path to its directory ("/" for top-level names); false if none. */
static bool parent_dir(char *path)
{
	char *slash = strrchr(path, '/');
	if (slash == NULL || path[1] == '\0')
		return false;
	if (slash == path)
		slash[1] = '\0';
	else
		*slash = '\0';
	return true;
}

/* Watches the directory of path with mask, and every directory above it
 * for renames and deletions. */
static bool watch_path(struct headers *h, const char *path, uint32_t mask)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	if (!parent_dir(dir) || !watch_dir(h, dir, mask))
		return false;
	while (strcmp(dir, "/") != 0) {
		if (!parent_dir(dir) || !watch_dir(h, dir, TREE_MASK))
			return false;
	}
	return true;
}

/*
 * Decides how a header is tracked: by events when its directory is local and
 * every directory on the way (as written and after symlinks) can be watched,
 * else by stat on every use.
 */
static enum hmode choose_mode(struct headers *h, const char *path, struct hstate *hs)
{
	char real[PATH_MAX], dir[PATH_MAX];
	free(hs->real);
	hs->real = NULL;
	if (h->ifd < 0 || path[0] != '/' || realpath(path, real) == NULL)
		return MODE_STAT;
	snprintf(dir, sizeof(dir), "%s", real);
	if (!parent_dir(dir) || !local_fs(dir))
		return MODE_STAT;
	/* The target first, so that each watch is known by its canonical name. */
	if (!watch_path(h, real, FILE_MASK))
		return MODE_STAT;
	if (strcmp(real, path) != 0) {
		if ((hs->real = strdup(real)) == NULL || !watch_path(h, path, TREE_MASK))
			return MODE_STAT;
	}
	return MODE_WATCHED;
}

/* Brings a header's state up to date; false when it cannot be known. A
 * large file is only trusted when it still has the size and mtime that the
 * build recorded along with its digest. */
static bool refresh(struct headers *h, const struct store_dep *dep, struct hstate *hs)
{
	if (hs->mode == MODE_NEW)
		hs->mode = choose_mode(h, dep->path, hs);
	struct stat st;
	if (stat(dep->path, &st) != 0 || !S_ISREG(st.st_mode)) {
		hs->known = false;
		return false;
	}
	int64_t mtime = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	int64_t ctime = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
	bool same = hs->known && !hs->evented && hs->size == (uint64_t)st.st_size &&
		    hs->mtime_ns == mtime && hs->ctime_ns == ctime && hs->dev == (uint64_t)st.st_dev &&
		    hs->ino == (uint64_t)st.st_ino;
	if (!same) {
		hs->known = false;
		if ((uint64_t)st.st_size > HEADER_HASH_MAX) {
			/* Like make: size and mtime stand for the content of a file
			 * too large to hash on the loop. */
			if (dep->size != (uint64_t)st.st_size || dep->mtime_ns != mtime)
				return false;
			memcpy(hs->digest, dep->digest, 32);
		} else if (util_sha256_file(dep->path, hs->digest) != 0) {
			return false;
		}
		hs->size = (uint64_t)st.st_size;
		hs->mtime_ns = mtime;
		hs->ctime_ns = ctime;
		hs->dev = (uint64_t)st.st_dev;
		hs->ino = (uint64_t)st.st_ino;
		hs->known = true;
	}
	hs->evented = false;
	hs->clean = hs->mode == MODE_WATCHED;
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
		if (!refresh(h, dep, hs)) {
			*cacheable = false;
			return false;
		}
	}
	if (!hs->clean)
		*cacheable = false;
	return memcmp(hs->digest, dep->digest, 32) == 0;
}

void headers_requests_read(struct kilnd *d)
{
	if (d->headers != NULL)
		d->headers->stale = true;
}

bool headers_valid(struct kilnd *d, const struct store_entry *e)
{
	struct headers *h = d->headers;
	if (e->ndeps == 0)
		return true;
	if (h->ifd >= 0 && h->stale)
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
	h->ifd = -1;
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

static void free_hstate(void *val)
{
	struct hstate *hs = val;
	free(hs->real);
	free(hs);
}

static void free_hdir(const char *key, void *val, void *ctx)
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
	table_free(h->files, free_hstate);
	if (h->wds != NULL)
		table_foreach(h->wds, free_hdir, NULL);
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
