/*
 * The upstream tier on disk, part one: opening the directory at start-up,
 * sweeping tmp/, and the claims that keep nodes from building one program
 * at the same time. A claim is an O_EXCL create and a stale one is moved
 * aside by rename(); nothing relies on locks (no flock, no SQLite), and a
 * claim is only an optimisation: where the filesystem breaks it, the cost is
 * a duplicate build (docs/design.md, "Upstream tier"). Entries are in
 * upstream_entry.c. Runs on the thread pool, except upfs_open.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "upstream_int.h"
#include "util.h"

#define SWEEP_AGE_S (24 * 3600)

int upfs_mkdir(const char *path)
{
	return mkdir(path, 0700) == 0 || errno == EEXIST ? 0 : -errno;
}

/* Start-up. */

int upfs_ensure_dirs(const struct up_dirs *u)
{
	char *const dirs[] = { u->objects, u->entries, u->aliases, u->claims, u->tmp };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		int rc = upfs_mkdir(dirs[i]);
		if (rc != 0)
			return rc;
	}
	return 0;
}

static int make_subdirs(struct up_dirs *u, char *err, size_t errlen)
{
	char *const dirs[] = { u->objects, u->entries, u->aliases, u->claims, u->tmp };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		int rc = upfs_mkdir(dirs[i]);
		if (rc != 0) {
			snprintf(err, errlen, "cannot create %s in the upstream directory: %s", dirs[i],
				 strerror(-rc));
			return rc;
		}
	}
	return 0;
}

/* Creates and removes a file in tmp/: a read-only mount or a full quota
 * shows here rather than at the first publish. */
static int probe_writable(const struct up_dirs *u, char *err, size_t errlen)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/probe-%s-%d", u->tmp, u->host, (int)getpid());
	unlink(path);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	int rc = fd >= 0 ? util_write_all(fd, "kiln\n", 5) : -errno;
	if (fd >= 0 && rc == 0 && fsync(fd) != 0)
		rc = -errno;
	if (fd >= 0 && close(fd) != 0 && rc == 0)
		rc = -errno;
	if (fd >= 0)
		unlink(path);
	if (rc != 0)
		snprintf(err, errlen, "upstream directory %s is not writable: %s", u->dir, strerror(-rc));
	return rc;
}

/*
 * Every directory above dir: one that others may write to without the
 * sticky bit lets them rename dir away and put their own in its place (a
 * project's group-writable scratch directory), so that what kilnd then
 * reads is theirs. Checked by the real path, so symlinks on the way count
 * as what they lead to.
 */
static int check_ancestors(const char *dir, char *err, size_t errlen)
{
	char open_dir[PATH_MAX];
	unsigned mode = 0;
	if (util_swappable_ancestor(dir, open_dir, sizeof(open_dir), &mode) != 1)
		return 0; /* check_dir says why it cannot be used */
	snprintf(err, errlen, "upstream directory %s lies in %s, which is writable by group or "
		 "others without the sticky bit (mode %04o): they could move the directory away "
		 "and put their own in its place; run chmod o-w,g-w or chmod +t on it, or use a "
		 "directory elsewhere", dir, open_dir, mode);
	return -EPERM;
}

/* The directory itself: created when only it is missing (a missing parent
 * is more likely a typo or an unmounted filesystem), then owned by this
 * user and not writable by others, since what it holds is loaded as code. */
static int check_dir(const char *dir, bool create, char *err, size_t errlen)
{
	struct stat st;
	if (create && stat(dir, &st) != 0 && errno == ENOENT) {
		char *parent = strdup(dir);
		char *slash = parent != NULL ? strrchr(parent, '/') : NULL;
		if (slash == NULL) {
			free(parent);
			return -ENOMEM;
		}
		*(slash == parent ? slash + 1 : slash) = '\0';
		bool have = stat(parent, &st) == 0 && S_ISDIR(st.st_mode);
		if (!have)
			snprintf(err, errlen, "upstream directory %s does not exist, nor does %s "
				 "(a typo, or its filesystem is not mounted?)", dir, parent);
		free(parent);
		if (!have)
			return -ENOENT;
		if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
			int rc = -errno;
			snprintf(err, errlen, "cannot create upstream directory %s: %s", dir, strerror(-rc));
			return rc;
		}
	}
	if (stat(dir, &st) != 0) {
		int rc = -errno;
		snprintf(err, errlen, "cannot use upstream directory %s: %s", dir, strerror(-rc));
		return rc;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "upstream directory %s is not a directory", dir);
		return -ENOTDIR;
	}
	if (st.st_uid != geteuid()) {
		snprintf(err, errlen, "upstream directory %s is owned by uid %d, not by this user "
			 "(uid %d); use a directory of your own", dir, (int)st.st_uid, (int)geteuid());
		return -EPERM;
	}
	if (st.st_mode & 022) {
		snprintf(err, errlen, "upstream directory %s is writable by group or others (mode %03o): "
			 "anyone who can write there can put code into your processes; run "
			 "chmod go-w on it", dir, (unsigned)(st.st_mode & 0777));
		return -EPERM;
	}
	return 0;
}

/*
 * After the checks: the tier is held open, the checks are repeated on what
 * was opened (it may have been swapped between check and open), and every
 * path kilnd uses in the tier starts "/proc/self/fd/N/": the kernel resolves
 * such a name from the open directory, as openat(N, ...) would, never from
 * the tier's name again. So a swap after start cannot redirect kilnd. Only
 * kilnd's own threads use these paths (the descriptor is close-on-exec).
 */
static int hold_tier(struct up_dirs *u, const char *dir, char *err, size_t errlen)
{
	char real[PATH_MAX], base[64];
	struct stat st;
	if (realpath(dir, real) == NULL) {
		int rc = -errno;
		snprintf(err, errlen, "cannot use upstream directory %s: %s", dir, strerror(-rc));
		return rc;
	}
	u->fd = open(real, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (u->fd < 0 || fstat(u->fd, &st) != 0) {
		int rc = -errno;
		snprintf(err, errlen, "cannot open upstream directory %s: %s", dir, strerror(-rc));
		return rc;
	}
	if (st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
		snprintf(err, errlen, "upstream directory %s changed while kilnd checked it "
			 "(now uid %d, mode %03o); use a directory of your own that only you can "
			 "write", dir, (int)st.st_uid, (unsigned)(st.st_mode & 0777));
		return -EPERM;
	}
	snprintf(base, sizeof(base), "/proc/self/fd/%d", u->fd);
	if (access(base, X_OK) != 0) {
		/* No /proc: by name, which the ancestor check keeps others from
		 * swapping. */
		log_warn("upstream directory %s: /proc/self/fd is not usable (%s); using it by name",
			 dir, strerror(errno));
		return 0;
	}
	free(u->objects);
	free(u->entries);
	free(u->aliases);
	free(u->claims);
	free(u->tmp);
	u->objects = u->entries = u->aliases = u->claims = u->tmp = NULL;
	if (asprintf(&u->objects, "%s/objects", base) < 0 || asprintf(&u->entries, "%s/entries", base) < 0 ||
	    asprintf(&u->aliases, "%s/aliases", base) < 0 ||
	    asprintf(&u->claims, "%s/claims", base) < 0 || asprintf(&u->tmp, "%s/tmp", base) < 0) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

int upfs_open(struct up_dirs *u, const char *dir, double stale_s, bool readonly, char *err,
	      size_t errlen)
{
	memset(u, 0, sizeof(*u));
	u->fd = -1;
	u->stale_s = stale_s;
	if (gethostname(u->host, sizeof(u->host)) != 0 || u->host[0] == '\0')
		snprintf(u->host, sizeof(u->host), "unknown");
	u->host[sizeof(u->host) - 1] = '\0';
	/* The host name goes into file names. */
	for (char *p = u->host; *p != '\0'; p++) {
		if (*p == '/' || *p == ' ' || (unsigned char)*p < 0x20)
			*p = '_';
	}
	if ((u->dir = strdup(dir)) == NULL || asprintf(&u->objects, "%s/objects", dir) < 0 ||
	    asprintf(&u->entries, "%s/entries", dir) < 0 || asprintf(&u->aliases, "%s/aliases", dir) < 0 ||
	    asprintf(&u->claims, "%s/claims", dir) < 0 ||
	    asprintf(&u->tmp, "%s/tmp", dir) < 0) {
		snprintf(err, errlen, "out of memory");
		upfs_close(u);
		return -ENOMEM;
	}
	int rc = check_dir(dir, !readonly, err, errlen);
	if (rc == 0)
		rc = check_ancestors(dir, err, errlen);
	if (rc == 0)
		rc = hold_tier(u, dir, err, errlen);
	/* A directory only read from (kiln import) is left as it is. */
	if (rc == 0 && !readonly)
		rc = make_subdirs(u, err, errlen);
	if (rc == 0 && !readonly)
		rc = probe_writable(u, err, errlen);
	if (rc != 0)
		upfs_close(u);   /* nothing held after a refusal (closing again is harmless) */
	return rc;
}

void upfs_close(struct up_dirs *u)
{
	if (u->fd >= 0)
		close(u->fd);
	free(u->dir);
	free(u->objects);
	free(u->entries);
	free(u->aliases);
	free(u->claims);
	free(u->tmp);
	memset(u, 0, sizeof(*u));
	u->fd = -1;
}

void upfs_sweep(const struct up_dirs *u)
{
	DIR *dp = opendir(u->tmp);
	struct dirent *de;
	time_t now = time(NULL);
	if (dp == NULL)
		return;
	while ((de = readdir(dp)) != NULL) {
		struct stat st;
		if (de->d_name[0] == '.')
			continue;
		if (fstatat(dirfd(dp), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
		    now - st.st_mtime > SWEEP_AGE_S && unlinkat(dirfd(dp), de->d_name, 0) == 0)
			log_debug("removed %s/%s, left by a writer that did not finish", u->tmp, de->d_name);
	}
	closedir(dp);
}

/* Claims. */

char *upfs_claim_path(const struct up_dirs *u, const char *rkey)
{
	char *p = NULL;
	return asprintf(&p, "%s/%s.claim", u->claims, rkey) < 0 ? NULL : p;
}

static int create_claim(const struct up_dirs *u, const char *path, int *fd)
{
	char text[256];
	*fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (*fd < 0)
		return -errno;
	/* The text is for people and logs only; staleness goes by the mtime. */
	int n = snprintf(text, sizeof(text), "{\"host\":\"%s\",\"pid\":%d,\"since\":%lld}\n", u->host,
			 (int)getpid(), (long long)time(NULL));
	if (util_write_all(*fd, text, (size_t)n) != 0)
		log_debug("cannot write the owner into claim %s", path);
	return 0;
}

/*
 * Looks at the claim afresh: open() makes NFS revalidate the attributes
 * (close-to-open), where a bare stat() could return cached ones. Returns 1
 * when it is stale, 0 when not, -ENOENT when it is gone.
 */
static int look_at_claim(const struct up_dirs *u, const char *path, struct up_seen *seen,
			 struct stat *st)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	char text[sizeof(seen->owner)];
	ssize_t n = fstat(fd, st) == 0 ? util_read_retry(fd, text, sizeof(text) - 1) : -1;
	close(fd);
	if (n < 0)
		return -EIO;
	while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r'))
		n--;
	text[n] = '\0';
	uint64_t now = util_now_ns();
	int64_t mt = upfs_mtime_ns(st);
	if (!seen->valid || seen->dev != (uint64_t)st->st_dev || seen->ino != (uint64_t)st->st_ino ||
	    seen->mtime_ns != mt) {
		seen->valid = true;
		seen->dev = (uint64_t)st->st_dev;
		seen->ino = (uint64_t)st->st_ino;
		seen->mtime_ns = mt;
		seen->since_ns = now;
		snprintf(seen->owner, sizeof(seen->owner), "%s", n > 0 ? text : "(empty claim)");
	}
	struct timespec wall;
	clock_gettime(CLOCK_REALTIME, &wall);
	int64_t age_ns = (int64_t)wall.tv_sec * 1000000000 + wall.tv_nsec - mt;
	double unchanged_s = (double)(now - seen->since_ns) / 1e9;
	seen->age_s = (double)age_ns / 1e9;
	return unchanged_s >= u->stale_s || seen->age_s >= 2 * u->stale_s;
}

/*
 * Moves a stale claim out of the way. rename() is atomic, so of several
 * nodes doing this at once only one moves this file; the inode check
 * catches the one who moved a claim that a third node had just created, and
 * puts that one back (link() never replaces).
 */
static int remove_stale_claim(const struct up_dirs *u, const char *path, const char *rkey,
			      const struct up_seen *seen)
{
	char aside[PATH_MAX];
	struct stat st;
	snprintf(aside, sizeof(aside), "%s/stale-%.16s-%s-%d-%d", u->tmp, rkey, u->host, (int)getpid(),
		 (int)gettid());
	if (rename(path, aside) != 0)
		return -errno;
	if (stat(aside, &st) == 0 && ((uint64_t)st.st_ino != seen->ino || (uint64_t)st.st_dev != seen->dev)) {
		if (link(aside, path) != 0)
			log_debug("could not put back claim %s: %s", path, strerror(errno));
		unlink(aside);
		return -EAGAIN;
	}
	unlink(aside);
	return 0;
}

int upfs_claim(const struct up_dirs *u, const char *rkey, struct up_seen *seen, int *fd,
	       bool *took_over)
{
	char *path = upfs_claim_path(u, rkey);
	int rc = -ENOMEM;
	*fd = -1;
	*took_over = false;
	/* Subdirectories removed by hand while kilnd runs are made again: a
	 * missing claims/ must read as an error, never as a claim held. */
	if (path != NULL && (rc = upfs_ensure_dirs(u)) != 0) {
		free(path);
		return rc;
	}
	for (int tries = 0; path != NULL && tries < 4; tries++) {
		struct stat st;
		rc = create_claim(u, path, fd);
		if (rc != -EEXIST) {
			if (rc != 0) {
				free(path);
				return rc;
			}
			break;
		}
		rc = look_at_claim(u, path, seen, &st);
		if (rc == -ENOENT)
			continue;       /* released meanwhile: try again */
		if (rc < 0)
			break;
		if (rc == 0) {
			rc = 1;
			break;
		}
		log_info("claim %s (%s) is stale: unchanged for %.1f s here, last refreshed %.0f s "
			 "ago; taking it over", path, seen->owner,
			 (double)(util_now_ns() - seen->since_ns) / 1e9, seen->age_s);
		rc = remove_stale_claim(u, path, rkey, seen);
		seen->valid = false;
		if (rc == 0)
			*took_over = true;
		else if (rc != -ENOENT && rc != -EAGAIN)
			break;
		rc = 1;
	}
	free(path);
	/* Released and re-created under our hands several times: busy. */
	return rc == -EEXIST || rc == -ENOENT ? 1 : rc;
}

int upfs_watch(const struct up_dirs *u, const char *rkey, struct up_seen *seen)
{
	struct stat st;
	char *path = upfs_claim_path(u, rkey);
	int rc = path != NULL ? look_at_claim(u, path, seen, &st) : -ENOMEM;
	free(path);
	if (rc == -ENOENT) {
		seen->valid = false;
		return 0;
	}
	return rc < 0 ? rc : rc == 0;
}

int upfs_touch(int fd)
{
	return futimens(fd, NULL) == 0 ? 0 : -errno;
}

void upfs_unclaim(const char *path, int fd)
{
	struct stat mine, there;
	if (fstat(fd, &mine) == 0 && stat(path, &there) == 0 && mine.st_dev == there.st_dev &&
	    mine.st_ino == there.st_ino && unlink(path) != 0)
		log_warn("cannot remove claim %s: %s", path, strerror(errno));
	close(fd);
}
