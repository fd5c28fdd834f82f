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
 * pays one stat per batch. A changed identity means hashing again
 * (any size, on the loop); an identity that stands for the digest recorded
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
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "digests.h"
#include "headers.h"
#include "kilnd.h"
#include "log.h"
#include "table.h"
#include "util.h"

#define VALIDATED_MAX 65536
/* Directories above a header: only renames, creations and deletions matter. */
#define TREE_MASK (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | \
		   IN_MOVE_SELF | IN_ONLYDIR)
/* A header's own directory: writes to its files too. */
#define FILE_MASK (TREE_MASK | IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE)

struct hstate {
	bool names_watched;  /* events see it appear, go or change type */
	bool content_watched; /* events see every change of its content too */
	bool chosen;         /* the two above were decided */
	bool known;          /* the fields below describe the path */
	bool exists, lexists; /* stat / lstat found it */
	struct stat st;
	bool has_digest;
	bool racy;           /* hashed too soon after a change to trust later */
	uint8_t digest[32];
	uint64_t epoch;      /* of the last stat */
	char *real;          /* the path with symlinks resolved, when it differs */
	bool clean;          /* watched, and no event since it was stat'ed */
	bool evented;        /* an event came: rehash even if stat looks the same */
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
	struct table *validated;  /* artifact key -> struct hvalid */
	struct table *env;        /* variable name -> struct henv */
	uintptr_t gen;            /* bumped whenever any header turns dirty */
	uint64_t epoch;           /* bumped per batch of requests read */
	bool stale;               /* a request was read since the last drain */
	int mfd;                  /* /proc/self/mountinfo, polled for mounts */
	uv_poll_t mpoll;
	bool mpolling;
	int closing;              /* polls still closing at the end */
};

/* When an entry was last found valid. */
struct hvalid {
	uintptr_t gen;
	uint64_t epoch;
	bool all_watched;         /* no dependency needs a stat per batch */
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
		hs->chosen = false;
	/* Counted even when not clean: an entry found valid may rest on it. */
	hs->clean = false;
	ctx->marked++;
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
	if (ev->len == 0) {
		/* On the watched file or directory itself: written, chmod'ed. */
		char self[PATH_MAX];
		snprintf(self, sizeof(self), "%s", hd->dir);
		mark_dirty(h, self, false);
		return;
	}
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
		log_debug("cannot watch %s (%s): paths below it are checked with stat once per batch",
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

/*
 * Filesystems whose inotify events are known to cover every change made on
 * this node through the VFS (an allow-list: overlayfs misses changes in its
 * lower layers, network filesystems miss other nodes' writes, FUSE and the
 * rest are not known to be complete).
 */
static bool events_fs(const char *dir)
{
	static const long local[] = {
		0xEF53,      /* ext2, ext3, ext4 */
		0x58465342,  /* XFS */
		0x9123683E,  /* Btrfs */
		0x01021994,  /* tmpfs */
		0xF2F52010,  /* F2FS */
	};
	struct statfs fs;
	if (statfs(dir, &fs) != 0)
		return false;
	for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++) {
		if ((long)fs.f_type == local[i])
			return true;
	}
	return false;
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

/*
 * Watches the directory of path with mask, and every directory above it
 * for renames and deletions. A directory on the way that does not exist
 * (a path looked for and missing, "a/b/../c" where b is missing) needs no
 * watch: its creation is an event in the nearest one above that exists,
 * which is watched.
 */
static bool watch_path(struct headers *h, const char *path, uint32_t mask)
{
	char dir[PATH_MAX];
	struct stat st;
	snprintf(dir, sizeof(dir), "%s", path);
	if (!parent_dir(dir))
		return false;
	for (uint32_t m = mask;; m = TREE_MASK) {
		if (!watch_dir(h, dir, m) && (stat(dir, &st) == 0 || (errno != ENOENT && errno != ENOTDIR)))
			return false;
		if (strcmp(dir, "/") == 0 || !parent_dir(dir))
			break;
	}
	return true;
}

/* The deepest existing directory at or above path's directory, into dir. */
static bool existing_dir(const char *path, char *dir, size_t cap)
{
	struct stat st;
	snprintf(dir, cap, "%s", path);
	while (parent_dir(dir)) {
		if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
			return true;
		if (strcmp(dir, "/") == 0)
			return false;
	}
	return false;
}

/*
 * Whether only root can change the file's content: owned by root, no write
 * permission for group or others, no ACL that could grant one. Root's
 * writes to such files (package managers, installers) go through write()
 * or rename(), which inotify sees; a user's, kilnd's or a client's could
 * go through a shared mapping, which it does not.
 */
static bool root_only(const char *path, const struct stat *st)
{
	if (st->st_uid != 0 || (st->st_mode & (S_IWGRP | S_IWOTH)) != 0)
		return false;
	ssize_t n = getxattr(path, "system.posix_acl_access", NULL, 0);
	return n < 0 && (errno == ENODATA || errno == ENOTSUP);
}

/*
 * Decides how a path is tracked: by events when inotify and the mount
 * watch work, its directory is on an allow-listed filesystem and every
 * directory on the way (as written and after symlinks) can be watched;
 * its content by events only when, in addition, kilnd's user cannot write
 * it. Otherwise by a stat per batch of requests.
 */
static void choose_mode(struct headers *h, const char *path, struct hstate *hs)
{
	char real[PATH_MAX], dir[PATH_MAX], rest[PATH_MAX];
	struct stat st;
	free(hs->real);
	hs->real = NULL;
	hs->chosen = true;
	hs->names_watched = hs->content_watched = false;
	if (h->ifd < 0 || !h->mpolling || path[0] != '/')
		return;
	bool present = realpath(path, real) != NULL;
	if (!present) {
		/* Missing: watch the deepest directory that exists, resolved. */
		if (!existing_dir(path, dir, sizeof(dir)) || realpath(dir, real) == NULL)
			return;
		/* real + what is missing below it ("/a" + "/b/h.h"). */
		snprintf(rest, sizeof(rest), "%s", path + strlen(dir));
		size_t rl = strlen(real);
		const char *tail = rl == 1 && rest[0] == '/' ? rest + 1 : rest;
		if (rl + strlen(tail) + 2 > sizeof(real))
			return;
		if (rl > 1 && tail[0] != '/')
			real[rl++] = '/';
		memcpy(real + rl, tail, strlen(tail) + 1);
	}
	snprintf(dir, sizeof(dir), "%s", real);
	if (!parent_dir(dir))
		return;
	if (!present && !existing_dir(real, dir, sizeof(dir)))
		return;
	if (!events_fs(dir))
		return;
	/* The target first, so that each watch is known by its canonical name. */
	if (!(present ? watch_path(h, real, FILE_MASK) : watch_dir(h, dir, FILE_MASK) &&
	      watch_path(h, dir, TREE_MASK)))
		return;
	if (strcmp(real, path) != 0) {
		if ((hs->real = strdup(real)) == NULL || !watch_path(h, path, TREE_MASK))
			return;
	}
	hs->names_watched = true;
	if (present && stat(real, &st) == 0 && S_ISREG(st.st_mode) && root_only(real, &st))
		/* Writes through another hard link show on the inode itself. */
		hs->content_watched = watch_dir(h, real, IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE |
					       IN_DELETE_SELF | IN_MOVE_SELF);
}

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
	if (!hs->chosen)
		choose_mode(h, path, hs);
	bool exists = stat(path, &st) == 0;
	if (!exists)
		memset(&st, 0, sizeof(st));
	if (!hs->known || hs->evented || hs->racy || exists != hs->exists ||
	    (exists && !same_ident(&st, &hs->st)))
		hs->has_digest = false;
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
}

/* The file's digest, from the state, from the entry's record when the
 * identity it was recorded with is the file's now, or hashed. */
static bool file_digest(struct hstate *hs, const struct store_dep *dep, const char *path)
{
	if (hs->has_digest)
		return true;
	const struct stat *st = &hs->st;
	if (dep->ino != 0 && dep->dev == (uint64_t)st->st_dev && dep->ino == (uint64_t)st->st_ino &&
	    dep->size == (uint64_t)st->st_size &&
	    dep->mtime_ns == (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec &&
	    dep->ctime_ns == (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec) {
		memcpy(hs->digest, dep->digest, 32);
		hs->has_digest = true;
		return true;
	}
	struct stat now;
	if (digests_file(path, hs->digest, &now) != 0 || !same_ident(&now, st)) {
		hs->known = false;
		return false;
	}
	hs->has_digest = true;
	hs->racy = !digests_settled(st);
	if (hs->racy)
		hs->clean = false;
	return true;
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
	return hs;
}

/* kilnd's own value of a variable, as a dependency records it: whether
 * it is set and its SHA-256. The environment never changes while kilnd
 * runs, so each variable is hashed once. */
struct henv {
	bool set;
	uint8_t digest[32];
};

static bool env_valid(struct headers *h, const struct store_dep *dep)
{
	struct henv *ev = table_get(h->env, dep->path);
	if (ev == NULL) {
		const char *v = getenv(dep->path);
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

/* One dependency; *watched turns false when it needed a stat this batch. */
static bool dep_valid(struct headers *h, const struct store_dep *dep, bool *watched)
{
	if (dep->kind == STORE_DEP_ENV)
		return env_valid(h, dep); /* kilnd's environment never changes */
	struct hstate *hs = state_of(h, dep->path);
	if (hs == NULL) {
		*watched = false;
		return false;
	}
	bool content = dep->kind == STORE_DEP_FILE;
	bool fresh = hs->known && hs->clean && (content ? hs->content_watched : hs->names_watched);
	if (!fresh && !(hs->known && hs->epoch == h->epoch))
		restat(h, dep->path, hs);
	bool valid;
	switch (dep->kind) {
	case STORE_DEP_ABSENT:
		valid = !hs->exists;
		break;
	case STORE_DEP_EXISTS:
		valid = hs->exists ? hs->st.st_mode == dep->mode
				   : hs->lexists && (dep->mode & S_IFMT) == S_IFLNK;
		break;
	case STORE_DEP_FILE:
		valid = hs->exists && S_ISREG(hs->st.st_mode) && file_digest(hs, dep, dep->path) &&
			memcmp(hs->digest, dep->digest, 32) == 0;
		break;
	default:
		valid = false;
	}
	/* After the digest: a file hashed too soon after a change is not clean. */
	if (!(content ? hs->content_watched : hs->names_watched) || !hs->clean)
		*watched = false;
	return valid;
}

void headers_requests_read(struct kilnd *d)
{
	if (d->headers != NULL) {
		d->headers->stale = true;
		d->headers->epoch++;
	}
}

bool headers_valid(struct kilnd *d, const struct store_entry *e)
{
	struct headers *h = d->headers;
	if (e->ndeps == 0)
		return true;
	if (h->ifd >= 0 && h->stale)
		drain(h);
	struct hvalid *v = table_get(h->validated, e->key);
	if (v != NULL && v->gen == h->gen && (v->all_watched || v->epoch == h->epoch))
		return true;
	bool watched = true;
	for (size_t i = 0; i < e->ndeps; i++) {
		bool was = watched;
		if (!dep_valid(h, &e->deps[i], &watched))
			return false;
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
			return true;
		}
	}
	v->gen = h->gen;
	v->epoch = h->epoch;
	v->all_watched = watched;
	return true;
}

/* Any mount or unmount: every path may lead elsewhere now. */
static void on_mounts(uv_poll_t *p, int status, int events)
{
	struct kilnd *d = p->data;
	mark_dirty(d->headers, NULL, true);
}

static void watch_mounts(struct kilnd *d, struct headers *h)
{
	h->mfd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	if (h->mfd < 0 || uv_poll_init(d->loop, &h->mpoll, h->mfd) != 0) {
		log_warn("cannot watch the mount table (%s): every dependency is checked with stat "
			 "once per batch of requests", strerror(errno));
		if (h->mfd >= 0)
			close(h->mfd);
		h->mfd = -1;
		return;
	}
	h->mpoll.data = d;
	uv_poll_start(&h->mpoll, UV_PRIORITIZED, on_mounts);
	h->mpolling = true;
}

int headers_init(struct kilnd *d)
{
	struct headers *h = calloc(1, sizeof(*h));
	if (h == NULL)
		return -ENOMEM;
	h->ifd = -1;
	h->mfd = -1;
	h->files = table_new();
	h->dirs = table_new();
	h->wds = table_new();
	h->validated = table_new();
	h->env = table_new();
	if (h->files == NULL || h->dirs == NULL || h->wds == NULL || h->validated == NULL ||
	    h->env == NULL) {
		d->headers = h;
		headers_fini(d);
		return -ENOMEM;
	}
	h->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (h->ifd < 0) {
		log_warn("inotify unavailable (%s): every dependency is checked with stat once per "
			 "batch of requests", strerror(errno));
	} else {
		uv_poll_init(d->loop, &h->poll, h->ifd);
		h->poll.data = d;
		uv_poll_start(&h->poll, UV_READABLE, on_inotify);
		h->polling = true;
		watch_mounts(d, h);
	}
	d->headers = h;
	return 0;
}

bool headers_events_complete(const struct kilnd *d)
{
	return d->headers != NULL && d->headers->ifd >= 0 && d->headers->mpolling;
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
	if (h->wds != NULL)
		table_foreach(h->wds, free_hdir, NULL);
	table_free(h->wds, NULL);
	table_free(h->dirs, NULL);
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
