/*
 * Start-up repair of the cache store: empties tmp/, drops rows whose object
 * is gone or has the wrong size, adopts complete objects that lost their
 * row (a crash between rename and index), and removes everything else under
 * objects/. It runs before the store serves anything, under the writer lock.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <sqlite3.h>

#include "store.h"
#include "entry_codec.h"
#include "store_int.h"
#include "util.h"

/* Build directories are shallow; this only bounds recursion on a hostile
 * or corrupted tree. */
#define MAX_TREE_DEPTH 64
/* A meta holds one entry; even thousands of deps stay far below this. */
#define META_MAX (64u << 20)

struct recon {
	struct store *s;
	struct store_reconcile_stats *st;
	sqlite3_stmt *q_row;  /* SELECT output FROM entries WHERE key = ?1 */
	const char *after;    /* collect_missing: keys after this one only, or NULL */
	size_t limit;         /* and at most this many rows (0: all) */
	char last[KILN_KEY_HEX + 1];  /* the last key collect_missing looked at */
	size_t seen;          /* how many it looked at */
	int64_t before_ns;    /* scan: files changed since then are left alone (0: none) */
};

static bool is_dot(const char *name)
{
	return name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

/* Removes name under dfd, a file or a whole tree. Missing is success. */
static int rm_tree_at(int dfd, const char *name, int depth)
{
	struct dirent *de;
	DIR *d;
	int fd, rc = 0, r;

	if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -errno;
	if (depth >= MAX_TREE_DEPTH)
		return -ELOOP;
	/* A build may leave a directory without write or search permission;
	 * it is ours, so open it up rather than fail to empty it. */
	fchmodat(dfd, name, 0700, 0);
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		rc = -errno;
		close(fd);
		return rc;
	}
	while ((de = readdir(d))) {
		if (is_dot(de->d_name))
			continue;
		r = rm_tree_at(dirfd(d), de->d_name, depth + 1);
		if (r < 0 && rc == 0)
			rc = r;
	}
	closedir(d);
	if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && rc == 0)
		rc = -errno;
	return rc;
}

int store_rm_tree(const char *path)
{
	return rm_tree_at(AT_FDCWD, path, 0);
}

int store_rm_tree_at(int dirfd, const char *name)
{
	return rm_tree_at(dirfd, name, 0);
}

/* A stream over the held directory fd (a duplicate: closedir closes it). */
static DIR *open_held(int fd)
{
	int dup = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
	DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
	if (d == NULL && dup >= 0)
		close(dup);
	if (d != NULL)
		rewinddir(d);
	return d;
}

/* Whatever is left in tmp/ belongs to builds that died with the daemon.
 * An entry that cannot be removed is left and not counted; it must not
 * keep the daemon from starting. */
static int clean_tmp(struct recon *r)
{
	struct dirent *de;
	DIR *d = open_held(r->s->fd_tmp);

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (!is_dot(de->d_name) && rm_tree_at(dirfd(d), de->d_name, 0) == 0)
			r->st->tmp_removed++;
	}
	closedir(d);
	return 0;
}

/* True when the row's object is gone, not a regular file, or of another
 * size. Other stat errors (EACCES, EIO) keep the row: the file may well be
 * fine, and dropping it would orphan a good object. */
static bool object_missing(const struct store *s, const char *key, const char *output,
			   uint64_t size)
{
	char rel[STORE_REL_MAX];
	struct stat sb;

	if (store_object_rel(key, store_output_ext(output), rel) != 0)
		return true;
	if (fstatat(s->fd_objects, rel, &sb, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT || errno == ENOTDIR;
	return !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != size;
}

static int collect_missing(struct recon *r, char (**keys)[KILN_KEY_HEX + 1], size_t *n)
{
	char (*grown)[KILN_KEY_HEX + 1];
	sqlite3_stmt *st = NULL;
	size_t cap = 0;
	int rc;

	rc = r->after == NULL
		? sqlite3_prepare_v2(r->s->wr, "SELECT key, output, size FROM entries", -1, &st, NULL)
		: sqlite3_prepare_v2(r->s->wr, "SELECT key, output, size FROM entries WHERE key > ?1"
				     " ORDER BY key LIMIT ?2", -1, &st, NULL);
	if (rc == SQLITE_OK && r->after != NULL) {
		sqlite3_bind_text(st, 1, r->after, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, (int64_t)r->limit);
	}
	while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *key = (const char *)sqlite3_column_text(st, 0);
		const char *output = (const char *)sqlite3_column_text(st, 1);

		rc = SQLITE_OK;
		r->seen++;
		snprintf(r->last, sizeof(r->last), "%s", key ? key : "");
		if (key && sqlite3_column_bytes(st, 0) == KILN_KEY_HEX &&
		    !object_missing(r->s, key, output, (uint64_t)sqlite3_column_int64(st, 2)))
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 16;
			grown = realloc(*keys, cap * sizeof(**keys));
			if (!grown) {
				rc = SQLITE_NOMEM;
				break;
			}
			*keys = grown;
		}
		/* A key that is not 64 hex digits is dropped by its text. */
		snprintf((*keys)[(*n)++], KILN_KEY_HEX + 1, "%s", key ? key : "");
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE || rc == SQLITE_OK ? 0 : store_sql_errno(rc);
}

struct missing_job {
	struct recon *r;
	size_t dropped;
};

static int drop_missing_body(struct store *s, void *arg)
{
	struct missing_job *j = arg;
	char (*keys)[KILN_KEY_HEX + 1] = NULL;
	size_t n = 0;
	int rc = collect_missing(j->r, &keys, &n);

	for (size_t i = 0; rc == 0 && i < n; i++) {
		rc = store_drop_row(s, keys[i], NULL);
		if (rc == -ENOENT)
			rc = 0;
	}
	if (rc == 0 && j->r->after == NULL)
		rc = store_exec(s->wr, "DELETE FROM aliases"
			" WHERE key NOT IN (SELECT key FROM entries)");
	j->dropped = n;
	free(keys);
	return rc;
}

/* Drops rows without a usable object, and aliases that point nowhere, in
 * one transaction (the writer lock is held for the whole reconcile). The
 * object scan then deals with the files left over. */
static int drop_missing(struct recon *r)
{
	struct missing_job j = { .r = r };
	int rc = store_txn_locked(r->s, true, drop_missing_body, &j);

	if (rc == 0)
		r->st->rows_dropped += j.dropped;
	return rc;
}

static int load_meta(const struct store *s, const char *key, struct store_entry *e)
{
	char rel[STORE_REL_MAX], *text = NULL;
	cJSON *m = NULL;
	size_t len = 0;
	int rc;

	memset(e, 0, sizeof(*e));
	if (store_object_rel(key, "meta", rel) != 0)
		return -EINVAL;
	rc = util_read_file_at(s->fd_objects, rel, META_MAX, &text, &len);
	if (rc == 0) {
		m = cJSON_ParseWithLength(text, len);
		rc = m ? entry_decode(m, ENTRY_FORM_META, e) : -EBADMSG;
	}
	if (rc == 0 && strcmp(e->key, key) != 0) {
		store_entry_free(e);
		rc = -EBADMSG;
	}
	cJSON_Delete(m);
	free(text);
	return rc;
}

/* The output kind of key's row: 0 and *output (malloc'd), or -ENOENT. */
static int row_output(struct recon *r, const char *key, char **output)
{
	const unsigned char *t;
	int rc;

	*output = NULL;
	sqlite3_bind_text(r->q_row, 1, key, -1, SQLITE_STATIC);
	rc = sqlite3_step(r->q_row);
	if (rc == SQLITE_ROW) {
		t = sqlite3_column_text(r->q_row, 0);
		*output = strdup(t ? (const char *)t : "");
		rc = *output ? 0 : -ENOMEM;
	} else {
		rc = rc == SQLITE_DONE ? -ENOENT : store_step_err(rc);
	}
	sqlite3_reset(r->q_row);
	sqlite3_clear_bindings(r->q_row);
	return rc;
}

static void remove_counted(struct recon *r, int dfd, const char *name)
{
	if (rm_tree_at(dfd, name, 0) == 0)
		r->st->objects_removed++;
}

/*
 * An object without a row: adopted when its meta is valid, names the same
 * output kind and the size matches; else removed, with its meta unless the
 * meta belongs to another object of the key (another output kind).
 */
static int adopt_or_remove(struct recon *r, int dfd, const char *name, const char *key,
			   const char *ext)
{
	struct store_entry e;
	const char *meta_ext;
	char meta[KILN_KEY_HEX + 6];
	struct stat sb;
	int rc;

	rc = load_meta(r->s, key, &e);
	if (rc == -ENOMEM)
		return rc;
	meta_ext = rc == 0 ? store_output_ext(e.output) : NULL;
	if (meta_ext && strcmp(meta_ext, ext) == 0 &&
	    fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode) &&
	    (uint64_t)sb.st_size == e.size) {
		rc = store_insert_row(r->s, &e, false);
		store_entry_free(&e);
		if (rc == 0)
			r->st->objects_adopted++;
		return rc;
	}
	store_entry_free(&e);
	remove_counted(r, dfd, name);
	if (!meta_ext || strcmp(meta_ext, ext) == 0) {
		snprintf(meta, sizeof(meta), "%s.meta", key);
		unlinkat(dfd, meta, 0);
	}
	return 0;
}

/* Splits "<64 hex>.<ext>" whose key starts with the directory's name. */
static bool meta_parse_name(const char *name, const char *sub, char key[KILN_KEY_HEX + 1],
		       const char **ext)
{
	if (strlen(name) <= KILN_KEY_HEX + 1 || name[KILN_KEY_HEX] != '.')
		return false;
	memcpy(key, name, KILN_KEY_HEX);
	key[KILN_KEY_HEX] = '\0';
	*ext = name + KILN_KEY_HEX + 1;
	return store_key_valid(key) && strncmp(key, sub, 2) == 0;
}

static int check_object(struct recon *r, int dfd, const char *sub, const char *name)
{
	char key[KILN_KEY_HEX + 1], *output = NULL;
	const char *ext, *row_ext;
	int rc;

	if (!meta_parse_name(name, sub, key, &ext) || !strcmp(ext, "meta")) {
		remove_counted(r, dfd, name);
		return 0;
	}
	rc = row_output(r, key, &output);
	if (rc == -ENOENT)
		return adopt_or_remove(r, dfd, name, key, ext);
	if (rc < 0)
		return rc;
	/* drop_missing checked the row's own object; a file of another
	 * output kind under the same key is a stray. */
	row_ext = store_output_ext(output);
	if (!row_ext || strcmp(row_ext, ext) != 0)
		remove_counted(r, dfd, name);
	free(output);
	return 0;
}

/* After the objects were handled, a meta is needed only if its key has a
 * row: every usable object was adopted, every other one removed. */
static int check_meta(struct recon *r, int dfd, const char *sub, const char *name)
{
	char key[KILN_KEY_HEX + 1], *output = NULL;
	const char *ext;
	int rc;

	if (!meta_parse_name(name, sub, key, &ext) || strcmp(ext, "meta") != 0) {
		remove_counted(r, dfd, name);
		return 0;
	}
	rc = row_output(r, key, &output);
	free(output);
	if (rc == -ENOENT) {
		if (unlinkat(dfd, name, 0) == 0)
			r->st->objects_removed++;
		rc = 0;
	}
	return rc;
}

static bool ends_with_meta(const char *name)
{
	size_t len = strlen(name);

	return len >= 5 && strcmp(name + len - 5, ".meta") == 0;
}

/* True when the file was changed at or after before_ns (a publish of the
 * running kilnd may be writing it): the sweep leaves it alone. */
static bool changed_since(int dfd, const char *name, int64_t before_ns)
{
	struct stat sb;
	if (before_ns == 0)
		return false;
	if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
		return true;
	int64_t m = (int64_t)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
	int64_t c = (int64_t)sb.st_ctim.tv_sec * 1000000000LL + sb.st_ctim.tv_nsec;
	return m >= before_ns || c >= before_ns;
}

/* Names are read first because adopting and removing change the directory
 * under readdir; objects go before metas (see check_meta). */
static int scan_subdir(struct recon *r, int topfd, const char *sub)
{
	char **names = NULL, **grown;
	size_t n = 0, cap = 0, i;
	struct dirent *de;
	DIR *d;
	int fd, rc = 0, pass;

	fd = openat(topfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return 0;
	}
	while (rc == 0 && (de = readdir(d))) {
		if (is_dot(de->d_name))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			grown = realloc(names, cap * sizeof(*names));
			if (!grown) {
				rc = -ENOMEM;
				break;
			}
			names = grown;
		}
		names[n] = strdup(de->d_name);
		rc = names[n] ? 0 : -ENOMEM;
		n += names[n] != NULL;
	}
	for (pass = 0; pass < 2; pass++) {
		for (i = 0; rc == 0 && i < n; i++) {
			if (ends_with_meta(names[i]) != (pass == 1) ||
			    changed_since(dirfd(d), names[i], r->before_ns))
				continue;
			rc = pass == 0 ? check_object(r, dirfd(d), sub, names[i])
				       : check_meta(r, dirfd(d), sub, names[i]);
		}
	}
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
	return rc;
}

static bool is_subdir_name(const char *name)
{
	return strlen(name) == 2 && isxdigit((unsigned char)name[0]) &&
		isxdigit((unsigned char)name[1]) && !isupper((unsigned char)name[0]) &&
		!isupper((unsigned char)name[1]);
}

/* What lies in objects/ that is no subdirectory of the store's: removed
 * (files changed since before_ns left alone). */
static int scan_top_strays(struct recon *r)
{
	struct dirent *de;
	struct stat sb;
	DIR *d = open_held(r->s->fd_objects);

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (is_dot(de->d_name) ||
		    (is_subdir_name(de->d_name) &&
		     fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
		     S_ISDIR(sb.st_mode)) ||
		    changed_since(dirfd(d), de->d_name, r->before_ns))
			continue;
		remove_counted(r, dirfd(d), de->d_name);
	}
	closedir(d);
	return 0;
}

static int scan_objects(struct recon *r)
{
	struct dirent *de;
	struct stat sb;
	DIR *d = open_held(r->s->fd_objects);
	int rc = 0;

	if (!d)
		return -errno;
	while (rc == 0 && (de = readdir(d))) {
		if (is_dot(de->d_name))
			continue;
		if (is_subdir_name(de->d_name) &&
		    fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(sb.st_mode))
			rc = scan_subdir(r, dirfd(d), de->d_name);
		else
			remove_counted(r, dirfd(d), de->d_name);
	}
	closedir(d);
	return rc;
}

/* A name store_publish can write in objects/<sub>/: "<key>.meta", or
 * "<key>.<ext>" of an output kind, the key starting with sub. */
static bool published_name(const char *name, const char *sub)
{
	static const char *const outputs[] = { "shared", "cubin", "fatbin", "ptx", "pch" };
	char key[KILN_KEY_HEX + 1];
	const char *ext;

	if (!meta_parse_name(name, sub, key, &ext))
		return false;
	if (strcmp(ext, "meta") == 0)
		return true;
	for (size_t i = 0; i < sizeof(outputs) / sizeof(outputs[0]); i++)
		if (strcmp(ext, store_output_ext(outputs[i])) == 0)
			return true;
	return false;
}

/* The strays of one objects/<sub>/ (or sub itself when it is not a
 * folder of objects). */
static int strays_in(int topfd, const char *sub,
		     void (*report)(void *ctx, const char *rel), void *ctx, uint64_t *removed)
{
	struct stat sb;
	char rel[2 * NAME_MAX + 2];
	int rc = 0;

	if (!is_subdir_name(sub) || fstatat(topfd, sub, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
	    !S_ISDIR(sb.st_mode)) {
		report(ctx, sub);
		if (rm_tree_at(topfd, sub, 0) == 0)
			(*removed)++;
		return 0;
	}
	int fd = openat(topfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (d == NULL) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	for (struct dirent *de; (de = readdir(d)) != NULL;) {
		if (is_dot(de->d_name) || published_name(de->d_name, sub))
			continue;
		snprintf(rel, sizeof(rel), "%s/%s", sub, de->d_name);
		report(ctx, rel);
		if (rm_tree_at(dirfd(d), de->d_name, 0) == 0)
			(*removed)++;
		else
			rc = -errno;
	}
	closedir(d);
	return rc;
}

int store_remove_strays(struct store *s, void (*report)(void *ctx, const char *rel), void *ctx,
			uint64_t *removed)
{
	*removed = 0;
	if (s->readonly)
		return -EROFS;
	DIR *d = open_held(s->fd_objects);
	if (d == NULL)
		return -errno;
	int rc = 0;
	for (struct dirent *de; (de = readdir(d)) != NULL;) {
		if (is_dot(de->d_name))
			continue;
		int r = strays_in(dirfd(d), de->d_name, report, ctx, removed);
		if (rc == 0)
			rc = r;
	}
	closedir(d);
	return rc;
}

/*
 * The clean-stop mark: a daemon that stopped gracefully leaves nothing half
 * done, so the next start needs to empty tmp/ only, not to stat every object
 * (seconds at a million entries). The mark is removed, durably, before the
 * daemon serves, so a crash afterwards means a full reconcile next time.
 */
int store_mark_clean(struct store *s)
{
	int fd, rc = 0;

	if (s->readonly)
		return -EROFS;
	if (atomic_load(&s->rows_lost))
		return -ESTALE;
	fd = openat(s->fd_root, "clean-stop", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		    0600);
	if (fd < 0 || fsync(fd) != 0)
		rc = -errno;
	if (fd >= 0)
		close(fd);
	return rc;
}

bool store_take_clean_mark(struct store *s)
{
	bool clean = false;

	/* Only a removal that is on disk may skip the full check. */
	if (!s->readonly && unlinkat(s->fd_root, "clean-stop", 0) == 0)
		clean = fsync(s->fd_root) == 0;
	/* A new index (the old one was lost) must adopt the objects it lacks. */
	return clean && !s->fresh_index;
}

bool store_index_is_new(const struct store *s)
{
	return s->fresh_index;
}

int store_reconcile_tmp(struct store *s, struct store_reconcile_stats *st)
{
	struct recon r = { .s = s, .st = st };
	int rc;

	memset(st, 0, sizeof(*st));
	if (s->readonly)
		return -EROFS;
	pthread_mutex_lock(&s->wlock);
	rc = clean_tmp(&r);
	pthread_mutex_unlock(&s->wlock);
	return rc;
}

int store_reconcile(struct store *s, struct store_reconcile_stats *st)
{
	return store_reconcile_keep(s, st, false);
}

int store_reconcile_keep(struct store *s, struct store_reconcile_stats *st, bool keep_tmp)
{
	struct recon r = { .s = s, .st = st };
	int rc = 0;

	memset(st, 0, sizeof(*st));
	if (s->readonly)
		return -EROFS;
	pthread_mutex_lock(&s->wlock);
	if (!keep_tmp)
		rc = clean_tmp(&r);
	if (rc == 0)
		rc = drop_missing(&r);
	if (rc == 0)
		rc = store_sql_errno(sqlite3_prepare_v2(s->wr,
			"SELECT output FROM entries WHERE key = ?1", -1, &r.q_row, NULL));
	if (rc == 0)
		rc = scan_objects(&r);
	sqlite3_finalize(r.q_row);
	pthread_mutex_unlock(&s->wlock);
	return rc;
}

/* Rows checked per sweep step: a step holds the writer lock for about the
 * time of this many stats. */
#define SWEEP_ROWS 4096

int store_sweep_step(struct store *s, struct store_sweep *sw, struct store_reconcile_stats *st)
{
	struct recon r = { .s = s, .st = st, .before_ns = sw->before_ns };
	int rc = 0;

	if (s->readonly)
		return -EROFS;
	pthread_mutex_lock(&s->wlock);
	if (sw->phase == 0) {
		/* Rows without a usable object, a batch of keys at a time. */
		struct missing_job j = { .r = &r };
		r.after = sw->cursor;
		r.limit = SWEEP_ROWS;
		rc = store_txn_locked(s, true, drop_missing_body, &j);
		if (rc == 0) {
			st->rows_dropped += j.dropped;
			snprintf(sw->cursor, sizeof(sw->cursor), "%s", r.last);
			if (r.seen < SWEEP_ROWS) {
				rc = store_exec(s->wr, "DELETE FROM aliases"
					" WHERE key NOT IN (SELECT key FROM entries)");
				sw->phase = 1;
				sw->subdir = 0;
			}
		}
	} else if (sw->phase == 1) {
		/* The objects, one of the 256 subdirectories at a time; names
		 * that are no subdirectory go with the first. */
		char sub[3];
		snprintf(sub, sizeof(sub), "%02x", sw->subdir);
		rc = store_sql_errno(sqlite3_prepare_v2(s->wr,
			"SELECT output FROM entries WHERE key = ?1", -1, &r.q_row, NULL));
		if (rc == 0 && sw->subdir == 0)
			rc = scan_top_strays(&r);
		if (rc == 0)
			rc = scan_subdir(&r, s->fd_objects, sub);
		sqlite3_finalize(r.q_row);
		if (rc == 0 && ++sw->subdir == 256)
			sw->phase = 2;
	}
	pthread_mutex_unlock(&s->wlock);
	if (rc == 0 && st->objects_adopted + st->rows_dropped > 0)
		store_changed(s);
	return rc < 0 ? rc : sw->phase < 2;
}
