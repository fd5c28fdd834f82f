/*
 * logs/failed/: the compiler output of failed builds (kiln log RKEY, kiln
 * log ALIAS). No entry owns these files, so eviction never removes them;
 * store_prune_failed bounds them by age and count instead.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"
#include "store_int.h"

/* Temporary files (util_replace_file_at's "NAME.tmpPID.N") older than this
 * are a crashed writer's. */
#define TMP_MAX_AGE_S 3600

struct failed_file {
	char *name;
	int64_t mtime;
	dev_t dev;
	ino_t ino;
};

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int newest_first(const void *a, const void *b)
{
	const struct failed_file *x = a, *y = b;
	return x->mtime < y->mtime ? 1 : x->mtime > y->mtime ? -1 : strcmp(x->name, y->name);
}

/* The logs in dirfd (name and mtime), and the stale temporary files
 * removed on the way. */
static int list_logs(int dirfd, int64_t now_s, struct failed_file **out, size_t *n,
		     uint64_t *removed)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	size_t cap = 0;
	int rc = 0;
	if (d == NULL) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		return rc;
	}
	for (struct dirent *de; rc == 0 && (de = readdir(d)) != NULL;) {
		struct stat st;
		bool log = ends_with(de->d_name, ".log") || ends_with(de->d_name, ".failed");
		bool tmp = strstr(de->d_name, ".tmp") != NULL && !log;
		if ((!log && !tmp) || fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		if (tmp) {
			if (now_s - st.st_mtim.tv_sec > TMP_MAX_AGE_S &&
			    unlinkat(dirfd, de->d_name, 0) == 0)
				(*removed)++;
			continue;
		}
		if (*n == cap) {
			cap = cap ? cap * 2 : 64;
			struct failed_file *p = realloc(*out, cap * sizeof(*p));
			if (p == NULL) {
				rc = -ENOMEM;
				break;
			}
			*out = p;
		}
		(*out)[*n].mtime = st.st_mtim.tv_sec;
		(*out)[*n].dev = st.st_dev;
		(*out)[*n].ino = st.st_ino;
		if (((*out)[*n].name = strdup(de->d_name)) == NULL)
			rc = -ENOMEM;
		else
			(*n)++;
	}
	closedir(d);
	return rc;
}

/* Whether f's name still names the file that was listed: a failed build
 * replaces its log with a new file (rename), which must not go for the old
 * one's age. (A replacement between this check and the unlink can still
 * go: a window of microseconds, for a log that the next failure rewrites.) */
static bool still_same(int dirfd, const struct failed_file *f)
{
	struct stat st;
	return fstatat(dirfd, f->name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == f->dev &&
	       st.st_ino == f->ino && st.st_mtim.tv_sec == f->mtime;
}

int store_prune_failed(struct store *s, int64_t now_s, int64_t max_age_s, size_t max_files,
		       uint64_t *removed)
{
	struct failed_file *v = NULL;
	size_t n = 0;
	*removed = 0;
	if (s->readonly)
		return -EROFS;
	if (s->fd_failed < 0)
		return 0;
	int rc = list_logs(s->fd_failed, now_s, &v, &n, removed);
	if (rc == 0) {
		if (n > 1)
			qsort(v, n, sizeof(*v), newest_first);
		for (size_t i = 0; i < n; i++)
			if ((i >= max_files || now_s - v[i].mtime > max_age_s) &&
			    still_same(s->fd_failed, &v[i]) && unlinkat(s->fd_failed, v[i].name, 0) == 0)
				(*removed)++;
	}
	for (size_t i = 0; i < n; i++)
		free(v[i].name);
	free(v);
	return rc;
}
