/*
 * The event side of hit validation (headers.c says what the states mean):
 * inotify watches on the directories along each tracked path, the mount
 * table, and a path index so that an event costs a few hash-table probes
 * however many paths are tracked.
 *
 * No flood of events can hold the loop: events are read in batches of at
 * most DRAIN_IDLE_BYTES between two turns of the loop (clients are served
 * in between), each event names one path that is looked up in the index
 * (an event on a name nothing tracked lies at or below costs one probe),
 * and events on one path are coalesced within a batch. Before a check,
 * the queue must be read up to the request (an event queued before it
 * may be the change the client made): at most DRAIN_CHECK_BYTES; beyond
 * that every state counts as dirty (one counter bumped, O(1)) and is
 * stat'ed once in that batch, as on a filesystem without events.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "headers_int.h"
#include "kilnd.h"
#include "log.h"

/* Directories above a header: only renames, creations and deletions matter. */
#define TREE_MASK (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | \
		   IN_MOVE_SELF | IN_ONLYDIR)
/* A header's own directory: writes to its files too. */
#define FILE_MASK (TREE_MASK | IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE)
#define DRAIN_READ 16384
/* Per turn of the loop when idle, and before a check (see above). */
#define DRAIN_IDLE_BYTES (4 * DRAIN_READ)
#define DRAIN_CHECK_BYTES (64 * DRAIN_READ)

/* The states at or below one path. */
struct hlist {
	struct hstate **v;
	size_t n, cap;
	uint64_t marked;          /* drain serial of the last marking (coalescing) */
	bool marked_rewatch;
};

static uint64_t drain_serial;

static int list_add(struct headers *h, const char *key, struct hstate *hs)
{
	struct hlist *l = table_get(h->index, key);
	if (l == NULL) {
		if ((l = calloc(1, sizeof(*l))) == NULL)
			return -ENOMEM;
		if (table_put(h->index, key, l, NULL) != 0) {
			free(l);
			return -ENOMEM;
		}
	}
	if (l->n > 0 && l->v[l->n - 1] == hs)
		return 0;
	if (l->n == l->cap) {
		size_t ncap = l->cap == 0 ? 4 : l->cap * 2;
		struct hstate **nv = realloc(l->v, ncap * sizeof(*nv));
		if (nv == NULL)
			return -ENOMEM;
		l->v = nv;
		l->cap = ncap;
	}
	l->v[l->n++] = hs;
	return 0;
}

int hwatch_index(struct headers *h, const char *path, struct hstate *hs)
{
	char key[PATH_MAX];
	if (snprintf(key, sizeof(key), "%s", path) >= (int)sizeof(key) || key[0] != '/')
		return -ENAMETOOLONG;
	for (;;) {
		if (list_add(h, key, hs) != 0)
			return -ENOMEM;
		char *slash = strrchr(key, '/');
		if (slash == key) {
			if (key[1] == '\0')
				return 0;
			key[1] = '\0';
		} else {
			*slash = '\0';
		}
	}
}

static void free_list(void *val)
{
	struct hlist *l = val;
	free(l->v);
	free(l);
}

struct dir_ctx {
	const char *prefix;
	size_t len;
	struct hdir **drop;
	size_t ndrop, cap;
};

static void collect_dir(const char *key, void *val, void *arg)
{
	struct dir_ctx *ctx = arg;
	if (ctx->prefix != NULL && !(strncmp(key, ctx->prefix, ctx->len) == 0 &&
				     (key[ctx->len] == '\0' || key[ctx->len] == '/')))
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

/* Drops the watches at and below prefix (NULL: all): they may describe
 * other directories now. */
static void drop_dirs(struct headers *h, const char *prefix)
{
	struct dir_ctx ctx = { .prefix = prefix, .len = prefix != NULL ? strlen(prefix) : 0 };
	table_foreach(h->dirs, collect_dir, &ctx);
	for (size_t i = 0; i < ctx.ndrop; i++)
		drop_dir(h, ctx.drop[i]);
	free(ctx.drop);
}

/*
 * Marks the states at and below prefix dirty, found through the index (a
 * path nothing tracked lies under costs one probe). With rewatch (a
 * directory at or below prefix was created, moved or went away), the
 * watches below it describe other directories now: they are dropped, and
 * the states choose how to be tracked again at their next check.
 */
static void mark_dirty(struct headers *h, const char *prefix, bool rewatch)
{
	struct hlist *l = table_get(h->index, prefix);
	if (l == NULL || (l->marked == drain_serial && (l->marked_rewatch || !rewatch)))
		return; /* nothing tracked there, or marked so already in this batch */
	l->marked = drain_serial;
	l->marked_rewatch = rewatch;
	for (size_t i = 0; i < l->n; i++) {
		struct hstate *hs = l->v[i];
		hs->evented = true;
		hs->clean = false;
		if (rewatch)
			hs->chosen = false;
	}
	if (rewatch)
		drop_dirs(h, prefix);
	h->gen++;
}

/* Everything dirty, in O(1): the states are stat'ed once more each. */
static void mark_all_dirty(struct headers *h)
{
	h->flood++;
	h->floods++;
	h->gen++;
}

static void handle_event(struct headers *h, const struct inotify_event *ev)
{
	h->events++;
	if (ev->mask & IN_Q_OVERFLOW) {
		/* Events were lost: trust nothing that was checked before. */
		mark_all_dirty(h);
		return;
	}
	char wdkey[16];
	snprintf(wdkey, sizeof(wdkey), "%d", ev->wd);
	struct hdir *hd = table_get(h->wds, wdkey);
	if (hd == NULL)
		return;
	char path[PATH_MAX];
	if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT) || ev->len == 0) {
		/* The directory itself went away or moved (its watch, and those
		 * below it, no longer describe the paths), or the watched file
		 * or directory itself was written or chmod'ed. */
		bool gone = (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT)) != 0;
		snprintf(path, sizeof(path), "%s", hd->dir);
		mark_dirty(h, path, gone);
		return;
	}
	snprintf(path, sizeof(path), "%s%s%s", hd->dir, strcmp(hd->dir, "/") == 0 ? "" : "/",
		 ev->name);
	/* A name created, removed or renamed here may be a directory or a
	 * symlink on the way to headers: where their paths lead is open again. */
	mark_dirty(h, path, (ev->mask & (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO)) != 0);
}

bool hwatch_drain(struct headers *h, size_t budget)
{
	char buf[DRAIN_READ] __attribute__((aligned(__alignof__(struct inotify_event))));
	size_t done = 0;
	drain_serial++;
	while (done < budget) {
		ssize_t n = read(h->ifd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return true;
		done += (size_t)n;
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			handle_event(h, ev);
			p += sizeof(*ev) + ev->len;
		}
	}
	return false;
}

void hwatch_catch_up(struct headers *h)
{
	h->stale = false;
	/* A mount made before the request was sent: its poll event may come
	 * after this check in the loop's turn, so the table is asked now.
	 * The same poll says whether inotify holds events: they are queued by
	 * the change itself, so none there means none to read (one system call
	 * per batch, not two). A negative mfd is ignored by poll. */
	struct pollfd pfd[2] = { { .fd = h->mfd, .events = POLLPRI },
				 { .fd = h->ifd, .events = POLLIN } };
	int n = poll(pfd, 2, 0);
	if (n > 0 && (pfd[0].revents & (POLLPRI | POLLERR))) {
		h->mounts_moved = true;
		mark_all_dirty(h);
	}
	if ((n < 0 || pfd[1].revents != 0) && !hwatch_drain(h, DRAIN_CHECK_BYTES))
		mark_all_dirty(h); /* more than a bounded read: everything is stat'ed */
}

/* Between requests: one bounded batch per turn of the loop. The poll is
 * level-triggered, so what is left comes in the next turn, after the
 * clients that are ready have been served. */
static void on_inotify(uv_poll_t *p, int status, int events)
{
	struct kilnd *d = p->data;
	(void)status;
	(void)events;
	hwatch_drain(d->headers, DRAIN_IDLE_BYTES);
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

/* The real path of path into real, or of its deepest existing directory
 * followed by what is missing below it ("/a" + "/b/h.h"); *present says
 * which. False when neither resolves. */
static bool resolve(const char *path, char real[PATH_MAX], bool *present)
{
	char dir[PATH_MAX], rest[PATH_MAX];
	*present = realpath(path, real) != NULL;
	if (*present)
		return true;
	if (!existing_dir(path, dir, sizeof(dir)) || realpath(dir, real) == NULL)
		return false;
	snprintf(rest, sizeof(rest), "%s", path + strlen(dir));
	size_t rl = strlen(real);
	const char *tail = rl == 1 && rest[0] == '/' ? rest + 1 : rest;
	if (rl + strlen(tail) + 2 > PATH_MAX)
		return false;
	if (rl > 1 && tail[0] != '/')
		real[rl++] = '/';
	memcpy(real + rl, tail, strlen(tail) + 1);
	return true;
}

/*
 * Decides how a path is tracked: by events when inotify and the mount
 * watch work, its directory is on an allow-listed filesystem and every
 * directory on the way (as written and after symlinks) can be watched;
 * its content by events only when, in addition, kilnd's user cannot write
 * it. Otherwise by a stat per batch of requests.
 */
/* Whether a prefix of path ("/a", "/a/b", ..., path itself) is a
 * dangling symbolic link: one whose target is missing. */
static bool dangling_on_way(const char *path)
{
	char prefix[PATH_MAX];
	struct stat st;
	size_t len = strlen(path);
	for (size_t i = 1; i <= len && i < sizeof(prefix); i++) {
		if (i < len && path[i] != '/')
			continue;
		memcpy(prefix, path, i);
		prefix[i] = '\0';
		if (lstat(prefix, &st) != 0)
			return false;
		if (S_ISLNK(st.st_mode) && stat(prefix, &st) != 0)
			return true;
	}
	return false;
}

void hwatch_choose(struct headers *h, const char *path, struct hstate *hs)
{
	char real[PATH_MAX], dir[PATH_MAX];
	struct stat st;
	bool present;
	free(hs->real);
	hs->real = NULL;
	hs->chosen = true;
	hs->chosen_gen = h->choose_gen;
	hs->names_watched = hs->content_watched = false;
	if (h->ifd < 0 || !h->mpolling || path[0] != '/' || !resolve(path, real, &present))
		return;
	/* Missing behind a dangling link: the name may appear where the link
	 * points, in a directory that does not exist yet and so no watch
	 * covers. Stat'ed per batch. (A link to an existing directory is
	 * resolved and watched on both sides.) */
	if (!present && dangling_on_way(path))
		return;
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
		if (hs->indexed_real == NULL || strcmp(hs->indexed_real, real) != 0) {
			free(hs->indexed_real);
			if ((hs->indexed_real = strdup(real)) == NULL || hwatch_index(h, real, hs) != 0)
				return;
		}
	}
	hs->names_watched = true;
	if (present && stat(real, &st) == 0 && S_ISREG(st.st_mode) && root_only(real, &st))
		/* Writes through another hard link show on the inode itself. */
		hs->content_watched = watch_dir(h, real, IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE |
					       IN_DELETE_SELF | IN_MOVE_SELF);
}

/* Any mount or unmount: every path may lead elsewhere now. O(1) here, so
 * that mounts in a loop (a setuid fusermount) cost no walk per event: the
 * states are stat'ed again, and choose anew at the next check. */
static void on_mounts(uv_poll_t *p, int status, int events)
{
	struct kilnd *d = p->data;
	struct headers *h = d->headers;
	(void)status;
	(void)events;
	h->mounts_moved = true;
	mark_all_dirty(h);
}

void hwatch_after_mounts(struct headers *h)
{
	if (!h->mounts_moved)
		return;
	h->mounts_moved = false;
	drop_dirs(h, NULL);
	h->choose_gen++;
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

void hwatch_start(struct kilnd *d, struct headers *h)
{
	h->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (h->ifd < 0) {
		log_warn("inotify unavailable (%s): every dependency is checked with stat once per "
			 "batch of requests", strerror(errno));
		return;
	}
	uv_poll_init(d->loop, &h->poll, h->ifd);
	h->poll.data = d;
	uv_poll_start(&h->poll, UV_READABLE, on_inotify);
	h->polling = true;
	watch_mounts(d, h);
}

static void free_hdir(const char *key, void *val, void *ctx)
{
	struct hdir *hd = val;
	(void)key;
	(void)ctx;
	free(hd->dir);
	free(hd);
}

void hwatch_free(struct headers *h)
{
	table_free(h->index, free_list);
	h->index = NULL;
	if (h->wds != NULL)
		table_foreach(h->wds, free_hdir, NULL);
	table_free(h->wds, NULL);
	table_free(h->dirs, NULL);
	h->wds = h->dirs = NULL;
}
