/*
 * The cache directory held open, and its recreation (cachedir.h).
 *
 * Invariant: d->store is the store of the directory d->cache_fd holds.
 * Pool jobs read d->store when they run (an atomic pointer): one queued
 * before a recreation may still use the old store, which is therefore
 * closed only once no pool job is pending (cachedir_reap). Such a job finds
 * its files gone and fails cleanly; nothing of the old cache is served
 * from the new one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cachedir.h"
#include "fdcache.h"
#include "instance.h"
#include "kilnd.h"
#include "log.h"
#include "store.h"
#include "table.h"
#include "upgrade.h"
#include "util.h"
#include "thread.h"

int cachedir_check_private(const char *dir, const char *what, char *err, size_t errlen)
{
	struct stat st;
	if (lstat(dir, &st) != 0) {
		snprintf(err, errlen, "%s %s: %s", what, dir, strerror(errno));
		return -errno;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s %s is not a directory", what, dir);
		return -ENOTDIR;
	}
	/* root's own directories are safe too (systemd's /run/kiln/USER). */
	if (st.st_uid != geteuid() && st.st_uid != 0) {
		snprintf(err, errlen, "%s %s is owned by uid %d, not by this user (uid %d); "
			 "use a directory of your own", what, dir, (int)st.st_uid, (int)geteuid());
		return -EPERM;
	}
	if ((st.st_mode & 022) && (st.st_mode & S_ISVTX)) {
		/* /tmp and its like: shared on purpose; chmod would break the
		 * node for everyone. */
		snprintf(err, errlen, "%s %s is writable by group or others (mode %04o, sticky: "
			 "a shared directory such as /tmp); do not chmod it, use a directory of "
			 "your own inside it (mkdir -m 700 %s/kiln-$USER) or kilnd's default", what,
			 dir, (unsigned)(st.st_mode & 07777), dir);
		return -EPERM;
	}
	if (st.st_mode & 022) {
		snprintf(err, errlen, "%s %s is writable by group or others (mode %03o); "
			 "run chmod go-w on it or use a private directory", what, dir,
			 (unsigned)(st.st_mode & 0777));
		return -EPERM;
	}
	return 0;
}

static int hold(struct kilnd *d)
{
	int fd = open(d->cfg->cache_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return -e;
	}
	if (d->cache_fd >= 0)
		close(d->cache_fd);
	d->cache_fd = fd;
	d->cache_dev = st.st_dev;
	d->cache_ino = st.st_ino;
	return 0;
}

int cachedir_open(struct kilnd *d, char *err, size_t errlen)
{
	d->cache_fd = -1;
	int rc = hold(d);
	if (rc != 0)
		snprintf(err, errlen, "cannot open the cache directory %s: %s", d->cfg->cache_dir,
			 strerror(-rc));
	return rc;
}

/* True while the name leads to the held directory, the store is the one of
 * that directory, and its index, subdirectories and lock are there. */
static bool intact(const struct kilnd *d)
{
	struct stat held, now, idx, root;
	return fstat(d->cache_fd, &held) == 0 && held.st_nlink > 0 &&
	       stat(d->cfg->cache_dir, &now) == 0 && now.st_dev == d->cache_dev &&
	       now.st_ino == d->cache_ino &&
	       fstat(store_root_fd(d->store), &root) == 0 && root.st_dev == d->cache_dev &&
	       root.st_ino == d->cache_ino &&
	       fstatat(d->cache_fd, "index.db", &idx, AT_SYMLINK_NOFOLLOW) == 0 &&
	       store_dirs_intact(d->store) && instance_cache_lock_intact(d->cache_fd);
}

/* objects/, logs/ and tmp/ made where missing, through the held directory. */
static int subdirs(struct kilnd *d)
{
	static const char *const names[] = { "objects", "logs", "tmp" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (mkdirat(d->cache_fd, names[i], 0700) != 0 && errno != EEXIST) {
			snprintf(d->cache_why, sizeof(d->cache_why),
				 "cannot create %s/%s: %s", d->cfg->cache_dir, names[i], strerror(errno));
			return -errno;
		}
	}
	return 0;
}

/* The directory again (when moved), private, locked by this kilnd. */
static int remake_dir(struct kilnd *d, bool moved)
{
	char why[600];
	long other = 0;
	int rc = moved ? util_mkdir_p(d->cfg->cache_dir, 0700) : 0;
	if (rc == 0 && moved)
		rc = cachedir_check_private(d->cfg->cache_dir, "cache directory", why, sizeof(why));
	else if (rc != 0)
		snprintf(why, sizeof(why), "%s", strerror(-rc));
	if (rc == 0)
		rc = instance_relock_cache(d->cfg, &other, why, sizeof(why));
	if (rc == 0)
		return 0;
	snprintf(d->cache_why, sizeof(d->cache_why),
		 "the cache directory %s was removed while kilnd ran and cannot be made again: %s%s",
		 d->cfg->cache_dir, why, rc > 0 ? "; stop this kilnd (kiln stop) and use that one" : "");
	return rc > 0 ? -EBUSY : rc;
}

/* A new store over the (re)made directory; the old one is kept for reaping.
 * keep_tmp: tmp/ is the one the old store uses, with builds in it. */
static int swap_store(struct kilnd *d, bool keep_tmp)
{
	char err[600] = "";
	struct store *fresh = NULL;
	struct store_reconcile_stats st = { 0 };
	if (d->nold_stores == KILND_MAX_OLD_STORES) {
		snprintf(d->cache_why, sizeof(d->cache_why), "the cache directory %s was replaced "
			 "several times while builds ran; kilnd waits for them to end", d->cfg->cache_dir);
		return -EAGAIN;
	}
	/* An index removed under a running kilnd leaves its write-ahead log,
	 * which must not be replayed into the new one. */
	if (faccessat(d->cache_fd, "index.db", F_OK, AT_SYMLINK_NOFOLLOW) != 0) {
		unlinkat(d->cache_fd, "index.db-wal", 0);
		unlinkat(d->cache_fd, "index.db-shm", 0);
	}
	int rc = store_open(d->cfg->cache_dir, 0, &fresh, err, sizeof(err));
	if (rc == 0)
		rc = store_reconcile_keep(fresh, &st, keep_tmp);
	if (rc != 0) {
		snprintf(d->cache_why, sizeof(d->cache_why), "cannot open a new cache index in %s: %s",
			 d->cfg->cache_dir, err[0] != '\0' ? err : strerror(-rc));
		store_close(fresh);
		return rc;
	}
	d->old_stores[d->nold_stores++] = d->store;
	d->store = fresh;
	d->overhead_ns = 0;   /* the new directory's files: measured at the next refresh */
	upgrade_adopt_store(d);
	/* What was learnt about the old cache's objects is void. */
	fdcache_free(d->fds);
	d->fds = fdcache_new(FDCACHE_MAX);
	if (d->verified != NULL) {
		table_free(d->verified, free);
		d->verified = NULL;
	}
	cachedir_reap(d);
	return 0;
}

static int recreate(struct kilnd *d)
{
	struct stat st;
	bool moved = stat(d->cfg->cache_dir, &st) != 0 || st.st_dev != d->cache_dev ||
		     st.st_ino != d->cache_ino;
	int rc = moved || !instance_cache_lock_intact(d->cache_fd) ? remake_dir(d, moved) : 0;
	if (rc == 0 && moved && (rc = hold(d)) != 0)
		snprintf(d->cache_why, sizeof(d->cache_why), "cannot open the cache directory %s: %s",
			 d->cfg->cache_dir, strerror(-rc));
	if (rc == 0)
		rc = subdirs(d);
	/* In place, tmp/ may hold builds of the old store: it is not emptied. */
	if (rc == 0)
		rc = swap_store(d, !moved);
	if (rc != 0)
		return rc;
	if (d->cfg->log_file == NULL && d->cfg->daemonize) {
		char path[4200];
		snprintf(path, sizeof(path), "%s/kilnd.log", d->cfg->cache_dir);
		log_open(log_get_level(), path);
	}
	d->c.cache_recreated++;
	log_warn("the cache directory %s %s while kilnd ran; made it again and go on with it",
		 d->cfg->cache_dir, moved ? "was removed or replaced"
					  : "lost its index or a subdirectory");
	kilnd_refresh_totals(d);
	return 0;
}

int cachedir_check(struct kilnd *d)
{
	ASSERT_LOOP();
	if (d->cache_fd < 0 || d->stopping)
		return 0;
	if (intact(d)) {
		d->cache_why[0] = '\0';
		return 0;
	}
	int rc = recreate(d);
	if (rc == 0)
		d->cache_why[0] = '\0';
	else
		log_error("%s", d->cache_why);
	return rc;
}

void cachedir_reap(struct kilnd *d)
{
	if (d->work_pending != 0)
		return;
	for (size_t i = 0; i < d->nold_stores; i++)
		store_close(d->old_stores[i]);
	d->nold_stores = 0;
}

void cachedir_close(struct kilnd *d)
{
	for (size_t i = 0; i < d->nold_stores; i++)
		store_close(d->old_stores[i]);
	d->nold_stores = 0;
	if (d->cache_fd >= 0)
		close(d->cache_fd);
	d->cache_fd = -1;
}
