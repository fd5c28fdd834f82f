/*
 * The cache directory's layout (store_int.h): every path and name of the
 * cache in one place. index.db, objects/<2 hex>/<key>.<ext> with its
 * <key>.meta beside it, logs/<key>.log, logs/failed/, tmp/; what a key and
 * an output kind may be. The directories are made and opened once, then
 * every file operation of the store goes through these descriptors (*at()
 * calls), so a name changed underneath cannot redirect them; and the check
 * that they are still the directories their names lead to.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"
#include "store_int.h"
#include "util.h"

static const struct {
	const char *output;
	const char *ext;
} output_exts[] = {
	{ "shared", "so" },
	{ "cubin", "cubin" },
	{ "fatbin", "fatbin" },
	{ "ptx", "ptx" },
	{ "pch", "gch" },  /* a precompiled header, node-local (docs/pch.md) */
};

bool store_key_valid(const char *key)
{
	size_t i;

	for (i = 0; i < KILN_KEY_HEX; i++) {
		char c = key[i];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return false;
	}
	return key[i] == '\0';
}

/* dir/name, malloc'd; NULL on ENOMEM. */
static char *join(const char *dir, const char *name)
{
	char *p;
	return asprintf(&p, "%s/%s", dir, name) < 0 ? NULL : p;
}

char *store_layout_paths(struct store *s, const char *cache_dir)
{
	char *db_path = NULL;
	s->dir = strdup(cache_dir);
	s->objects = join(cache_dir, "objects");
	s->logs = join(cache_dir, "logs");
	s->tmp = join(cache_dir, "tmp");
	if (s->dir != NULL && s->objects != NULL && s->logs != NULL && s->tmp != NULL)
		db_path = join(cache_dir, "index.db");
	return db_path;
}

const char *store_dir(const struct store *s)
{
	return s->dir;
}

const char *store_output_ext(const char *output)
{
	size_t i;

	if (!output)
		return NULL;
	for (i = 0; i < sizeof(output_exts) / sizeof(output_exts[0]); i++)
		if (strcmp(output, output_exts[i].output) == 0)
			return output_exts[i].ext;
	return NULL;
}

/* Every object's path comes from store_object_rel: one key check. */
static char *key_path(const struct store *s, const char *key, const char *ext)
{
	char rel[STORE_REL_MAX], *p;

	if (key == NULL || store_object_rel(key, ext, rel) != 0 ||
	    asprintf(&p, "%s/%s", s->objects, rel) < 0)
		return NULL;
	return p;
}

char *store_object_path(const struct store *s, const char *key, const char *output)
{
	const char *ext = store_output_ext(output);

	return ext ? key_path(s, key, ext) : NULL;
}

char *store_log_path(const struct store *s, const char *key)
{
	char *p;

	if (!key || !store_key_valid(key) || asprintf(&p, "%s/%s.log", s->logs, key) < 0)
		return NULL;
	return p;
}

char *store_tmp_dir(const struct store *s)
{
	return strdup(s->tmp);
}

/* Opens (making them unless read-only) the directory and its subdirectories;
 * the subdirectories through the directory's descriptor. */
int store_open_dirs(struct store *s, char *err, size_t errlen)
{
	static const char *const subs[] = { "objects", "logs", "tmp" };
	int *fds[] = { &s->fd_objects, &s->fd_logs, &s->fd_tmp };
	int rc = s->readonly ? 0 : util_mkdir_p(s->dir, 0700);
	if (rc == 0 && (s->fd_root = open(s->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
						   O_CLOEXEC)) < 0)
		rc = -errno;
	if (rc < 0) {
		snprintf(err, errlen, "cannot open %s: %s", s->dir, strerror(-rc));
		return rc;
	}
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		if (!s->readonly && mkdirat(s->fd_root, subs[i], 0700) != 0 && errno != EEXIST)
			rc = -errno;
		else if ((*fds[i] = openat(s->fd_root, subs[i], O_RDONLY | O_DIRECTORY |
					   O_NOFOLLOW | O_CLOEXEC)) < 0 && !s->readonly)
			rc = -errno;
		if (rc < 0) {
			snprintf(err, errlen, "cannot create %s/%s: %s", s->dir, subs[i], strerror(-rc));
			return rc;
		}
	}
	/* logs/failed/: the logs of failed builds, pruned by age and count. */
	if (s->fd_logs >= 0 && !s->readonly && mkdirat(s->fd_logs, "failed", 0700) != 0 &&
	    errno != EEXIST)
		rc = -errno;
	else if (s->fd_logs >= 0 && (s->fd_failed = openat(s->fd_logs, "failed", O_RDONLY |
					 O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 && !s->readonly)
		rc = -errno;
	if (rc < 0)
		snprintf(err, errlen, "cannot create %s/logs/failed: %s", s->dir, strerror(-rc));
	return rc;
}

int store_object_rel(const char *key, const char *ext, char out[STORE_REL_MAX])
{
	if (!store_key_valid(key) || ext == NULL || strlen(ext) > 16)
		return -EINVAL;
	snprintf(out, STORE_REL_MAX, "%.2s/%s.%s", key, key, ext);
	return 0;
}

int store_object_open(const struct store *s, const char *key, const char *output)
{
	char rel[STORE_REL_MAX];
	if (store_object_rel(key, store_output_ext(output), rel) != 0)
		return -EINVAL;
	/* The loop opens objects to hand them out: only a regular file, never
	 * a symlink, and nothing put in an object's place (a FIFO) can hold it. */
	struct stat st;
	int fd = util_open_regular_at(s->fd_objects, rel, O_NOFOLLOW, &st);
	return fd == -EINVAL ? -ELOOP : fd;
}

int store_tmp_fd(const struct store *s)
{
	return s->fd_tmp;
}

int store_root_fd(const struct store *s)
{
	return s->fd_root;
}

int store_logs_fd(const struct store *s)
{
	return s->fd_logs;
}

int store_failed_fd(const struct store *s)
{
	return s->fd_failed;
}

bool store_dirs_intact(const struct store *s)
{
	static const char *const subs[] = { "objects", "logs", "tmp", "logs/failed" };
	const int fds[] = { s->fd_objects, s->fd_logs, s->fd_tmp, s->fd_failed };
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		struct stat held, now;
		if (fds[i] < 0 || fstat(fds[i], &held) != 0 || held.st_nlink == 0 ||
		    fstatat(s->fd_root, subs[i], &now, AT_SYMLINK_NOFOLLOW) != 0 ||
		    now.st_dev != held.st_dev || now.st_ino != held.st_ino)
			return false;
	}
	return true;
}

void store_close_dirs(struct store *s)
{
	int *fds[] = { &s->fd_root, &s->fd_objects, &s->fd_logs, &s->fd_tmp, &s->fd_failed };
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
}
