/*
 * The cache store's writers: crash-safe publishing of artifacts (meta and
 * object fsync'ed and renamed before the row exists), aliases, use counts,
 * pins, removal and LRU eviction. Every function here may block and is
 * meant for the thread pool; the writer connection is behind s->wlock.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
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

/* Paths of one publish; all malloc'd. */
/* Names relative to objects/ (and tmp/ for tmp_meta). */
struct publish {
	char subdir[4];                /* ab */
	char object[STORE_REL_MAX];    /* ab/<key>.<ext> */
	char meta[STORE_REL_MAX];      /* ab/<key>.meta */
	char *tmp_meta;                /* <key>.meta.<pid>.<n> in tmp/ once written */
};

struct victim {
	char key[KILN_KEY_HEX + 1];
	char *output;
};

/* Prepares sql, binds key as ?1, runs it to completion. Returns the number
 * of changed rows or a negative errno. */
static int run_key(struct store *s, const char *sql, const char *key)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(s->wr, sql, -1, &st, NULL);

	if (rc == SQLITE_OK) {
		sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
		rc = sqlite3_step(st);
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? sqlite3_changes(s->wr) : store_step_err(rc);
}

static int insert_alias(struct store *s, const struct store_entry *e, bool replace)
{
	sqlite3_stmt *st = NULL;
	int rc;

	rc = sqlite3_prepare_v2(s->wr, replace ?
		"INSERT OR REPLACE INTO aliases (alias, key) VALUES (?1, ?2)" :
		"INSERT OR IGNORE INTO aliases (alias, key) VALUES (?1, ?2)", -1, &st, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_text(st, 1, e->alias, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, e->key, -1, SQLITE_STATIC);
		rc = sqlite3_step(st);
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : store_step_err(rc);
}

int store_insert_row(struct store *s, const struct store_entry *e, bool replace_alias)
{
	sqlite3_stmt *st = NULL;
	uint8_t *blob = NULL;
	size_t blen = 0;
	int rc;

	rc = store_deps_encode(e->deps, e->ndeps, e->deps_source, &blob, &blen);
	if (rc < 0)
		return rc;
	rc = sqlite3_prepare_v2(s->wr, "INSERT OR REPLACE INTO entries (key, rkey, label,"
		" toolchain, output, size, created, last_used, uses, build_ms, pinned, args,"
		" sources, deps, sha256, disk, key_format) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7,"
		" ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)", -1, &st, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_text(st, 1, e->key, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, e->rkey, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, e->label, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 4, e->toolchain, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 5, e->output, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 6, (sqlite3_int64)e->size);
		sqlite3_bind_int64(st, 7, e->created);
		sqlite3_bind_int64(st, 8, e->last_used);
		sqlite3_bind_int64(st, 9, (sqlite3_int64)e->uses);
		sqlite3_bind_int64(st, 10, (sqlite3_int64)e->build_ms);
		sqlite3_bind_int(st, 11, e->pinned);
		sqlite3_bind_text(st, 12, e->args_json, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 13, e->sources_json, -1, SQLITE_STATIC);
		if (blob)
			sqlite3_bind_blob(st, 14, blob, (int)blen, SQLITE_STATIC);
		if (e->has_sha256)
			sqlite3_bind_blob(st, 15, e->sha256, 32, SQLITE_STATIC);
		/* The files are in place before their row (publish, adopt). */
		sqlite3_bind_int64(st, 16, (sqlite3_int64)store_entry_disk(s, e->key, e->output));
		if (e->key_format > 0)
			sqlite3_bind_int(st, 17, e->key_format);
		rc = sqlite3_step(st);
	}
	sqlite3_finalize(st);
	free(blob);
	if (rc != SQLITE_DONE)
		return store_step_err(rc);
	return e->alias ? insert_alias(s, e, replace_alias) : 0;
}

int store_drop_row(struct store *s, const char *key, char **output)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (output) {
		*output = NULL;
		rc = sqlite3_prepare_v2(s->wr, "SELECT output FROM entries WHERE key = ?1",
			-1, &st, NULL);
		if (rc == SQLITE_OK) {
			sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
			rc = sqlite3_step(st);
		}
		if (rc == SQLITE_ROW)
			*output = strdup(sqlite3_column_text(st, 0) ?
					 (const char *)sqlite3_column_text(st, 0) : "");
		sqlite3_finalize(st);
		if (rc == SQLITE_DONE)
			return -ENOENT;
		if (rc != SQLITE_ROW)
			return store_step_err(rc);
		if (!*output)
			return -ENOMEM;
	}
	rc = run_key(s, "DELETE FROM aliases WHERE key = ?1", key);
	if (rc >= 0)
		rc = run_key(s, "DELETE FROM alias_data WHERE key = ?1", key);
	if (rc >= 0)
		rc = run_key(s, "DELETE FROM entries WHERE key = ?1", key);
	if (rc == 0)
		rc = -ENOENT;
	if (rc < 0 && output) {
		free(*output);
		*output = NULL;
	}
	return rc < 0 ? rc : 0;
}

/*
 * The meta goes first: a crash after it leaves an object without meta,
 * which reconcile removes, instead of a complete pair that it would adopt
 * back into the index.
 */
void store_unlink_files(const struct store *s, const char *key, const char *output)
{
	char rel[STORE_REL_MAX], log[STORE_REL_MAX];

	if (store_object_rel(key, "meta", rel) == 0)
		unlinkat(s->fd_objects, rel, 0);
	if (store_object_rel(key, store_output_ext(output), rel) == 0)
		unlinkat(s->fd_objects, rel, 0);
	if (store_key_valid(key)) {
		snprintf(log, sizeof(log), "%s.log", key);
		unlinkat(s->fd_logs, log, 0);
	}
}

/* The meta's text (the entry codec's META form). */
static int write_meta_text(const struct store_entry *e, char **out)
{
	cJSON *o = entry_encode(e, ENTRY_FORM_META);

	/* Besides memory, the encoder fails on stored args or sources that are
	 * not a JSON array: reconcile could not rebuild the entry from them. */
	if (o == NULL)
		return -EINVAL;
	*out = cJSON_Print(o);
	cJSON_Delete(o);
	return *out != NULL ? 0 : -ENOMEM;
}

/* Writes the meta into tmp/ under a unique name (*name, malloc'd, relative
 * to tmp/), read-only and fsync'ed. */
static int write_meta(const struct store *s, const struct store_entry *e, char **name)
{
	static atomic_uint_least64_t seq;
	char *text = NULL, *path = NULL;
	int fd = -1, rc;

	*name = NULL;
	rc = write_meta_text(e, &text);
	if (rc < 0)
		goto out;
	if (asprintf(&path, "%s.meta.%d.%llu", e->key, (int)getpid(),
		     (unsigned long long)atomic_fetch_add(&seq, 1)) < 0) {
		path = NULL;
		rc = -ENOMEM;
		goto out;
	}
	fd = openat(s->fd_tmp, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	rc = util_write_all(fd, text, strlen(text));
	if (rc == 0 && (fchmod(fd, 0444) < 0 || fsync(fd) < 0))
		rc = -errno;
	/* close() can report a deferred write error (NFS, quota). */
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc < 0)
		unlinkat(s->fd_tmp, path, 0);
out:
	free(text);
	if (rc == 0)
		*name = path;
	else
		free(path);
	return rc;
}

/* Makes the built object read-only and durable; reports its size. */
static int sync_object(int dir, const char *tmp_object, uint64_t *size)
{
	struct stat sb;
	int fd, rc = 0;

	fd = openat(dir, tmp_object, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	*size = 0;
	if (fstat(fd, &sb) < 0 || fchmod(fd, 0444) < 0 || fsync(fd) < 0)
		rc = -errno;
	else if (!S_ISREG(sb.st_mode))
		rc = -EINVAL;
	else
		*size = (uint64_t)sb.st_size;
	close(fd);
	return rc;
}

static int publish_paths(const struct store_entry *e, struct publish *p)
{
	if (store_object_rel(e->key, store_output_ext(e->output), p->object) != 0 ||
	    store_object_rel(e->key, "meta", p->meta) != 0)
		return -EINVAL;
	snprintf(p->subdir, sizeof(p->subdir), "%.2s", e->key);
	return 0;
}

static int check_entry(const struct store_entry *e)
{
	if (!store_key_valid(e->key) || !store_key_valid(e->rkey))
		return -EINVAL;
	if (!e->toolchain || !e->toolchain[0] || !store_output_ext(e->output))
		return -EINVAL;
	if (e->ndeps && !e->deps)
		return -EINVAL;
	return 0;
}

/*
 * Moves meta and object into objects/ab. An intact object already there is
 * kept: the key addresses the content, so it is the same program, and
 * clients may hold it open. RENAME_NOREPLACE settles a race with a
 * concurrent publish of the same key the same way. A damaged one (replace)
 * is renamed over: whoever has it open keeps the old inode.
 */
static int place_files(const struct store *s, const struct publish *p, int dir,
		       const char *tmp_object, bool exists, bool replace)
{
	int objs = s->fd_objects, rc;

	if (renameat(s->fd_tmp, p->tmp_meta, objs, p->meta) < 0)
		return -errno;
	if (replace)
		return renameat(dir, tmp_object, objs, p->object) < 0 ? -errno : 0;
	if (exists)
		return unlinkat(dir, tmp_object, 0) < 0 && errno != ENOENT ? -errno : 0;
	if (renameat2(dir, tmp_object, objs, p->object, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno == EEXIST)
		return unlinkat(dir, tmp_object, 0) < 0 ? -errno : 0;
	/* Filesystems without RENAME_NOREPLACE: link() never replaces either. */
	if ((errno == EINVAL || errno == ENOSYS) && linkat(dir, tmp_object, objs, p->object, 0) == 0) {
		unlinkat(dir, tmp_object, 0);
		return 0;
	}
	if (errno == EEXIST)
		return unlinkat(dir, tmp_object, 0) < 0 ? -errno : 0;
	rc = -errno;
	unlinkat(objs, p->meta, 0);
	return rc;
}

static int insert_body(struct store *s, void *row)
{
	return store_insert_row(s, row, true);
}

/* A row that fails leaves its object and meta in objects/: the next start
 * must check the cache to adopt them, so no clean-stop mark this time. */
static int index_row(struct store *s, const struct store_entry *row)
{
	/* The caches in front of the index forget this entry's names only
	 * (store_changes.c): its key, its request key, its alias. */
	int rc = store_txn(s, false, insert_body, (void *)row);
	if (rc == 0)
		store_changed_entry(s, row->key, row->rkey, row->alias);
	else
		atomic_store(&s->rows_lost, true);
	return rc;
}

/*
 * The file work runs outside the writer lock so that publishes of
 * different builds fsync in parallel; only the index transaction is
 * serialized. If indexing fails after the rename, the object and its meta
 * stay in place: they are complete, and the next start's check of the cache
 * adopts them (index_row withholds the clean-stop mark).
 */
int store_publish(struct store *s, const struct store_entry *e, int dir, const char *tmp_object)
{
	struct publish p = { 0 };
	struct store_entry row = *e;
	struct stat sb;
	uint64_t tmp_size = 0;
	bool exists, replace = false, new_subdir = false;
	int rc;

	if (s->readonly)
		return -EROFS;
	rc = check_entry(e);
	if (rc == 0)
		rc = publish_paths(e, &p);
	if (rc == 0)
		rc = sync_object(dir, tmp_object, &tmp_size);
	if (rc < 0)
		goto out;
	exists = fstatat(s->fd_objects, p.object, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
		 S_ISREG(sb.st_mode);
	/* An object left in place must be one the row can describe: the same
	 * bytes as this build, else it is damaged and replaced. */
	if (exists && e->has_sha256) {
		uint8_t got[32];
		if ((uint64_t)sb.st_size != tmp_size ||
		    util_sha256_file_at(s->fd_objects, p.object, got) != 0 ||
		    memcmp(got, e->sha256, 32) != 0)
			replace = true;
	}
	row.size = exists && !replace ? (uint64_t)sb.st_size : tmp_size;
	row.created = e->created ? e->created : util_wall_s();
	row.last_used = e->last_used ? e->last_used : row.created;
	rc = write_meta(s, &row, &p.tmp_meta);
	if (rc < 0)
		goto out;
	if (mkdirat(s->fd_objects, p.subdir, 0700) == 0)
		new_subdir = true;
	else if (errno != EEXIST)
		rc = -errno;
	if (rc == 0)
		rc = place_files(s, &p, dir, tmp_object, exists, replace);
	if (rc == 0)
		rc = util_fsync_dir_at(s->fd_objects, p.subdir);
	if (rc == 0 && new_subdir)
		rc = util_fsync_dir_at(s->fd_objects, ".");
	if (rc == 0)
		rc = index_row(s, &row);
out:
	if (rc < 0) {
		if (p.tmp_meta)
			unlinkat(s->fd_tmp, p.tmp_meta, 0);
		unlinkat(dir, tmp_object, 0);
	}
	free(p.tmp_meta);
	return rc;
}

int store_publish_open(struct store *s, const struct store_entry *e, int dir, const char *tmp_object,
		       int *fd)
{
	struct stat sb;

	/* Opened before its row exists: an eviction or a gc that drops the
	 * entry right after cannot take the artifact from the build it
	 * answers (the descriptor holds the inode, whatever its name). */
	*fd = util_open_regular_at(dir, tmp_object, O_NOFOLLOW, &sb);
	if (*fd < 0)
		return *fd;
	int rc = store_publish(s, e, dir, tmp_object);
	if (rc != 0) {
		close(*fd);
		*fd = -1;
	}
	return rc;
}

/* Runs st, a statement on the writer that changes at most one row (of
 * entry key, or alias), to completion and finalizes it; rc is the result of
 * preparing it. The caller holds wlock. Returns 0 when a row changed,
 * -ENOENT when none matched, or a negative errno. */
static int step_change(struct store *s, sqlite3_stmt *st, int rc, const char *key,
		       const char *alias)
{
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	sqlite3_finalize(st);
	store_changed_entry(s, key, NULL, alias);
	if (rc == SQLITE_DONE)
		return sqlite3_changes(s->wr) > 0 ? 0 : -ENOENT;
	return store_step_err(rc);
}

struct alias_job {
	const char *alias, *key, *data;
};

static int run_bound(struct store *s, const char *sql, const char *a, const char *b,
		     const char *c)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(s->wr, sql, -1, &st, NULL);

	if (rc == SQLITE_OK) {
		sqlite3_bind_text(st, 1, a, -1, SQLITE_STATIC);
		if (b != NULL)
			sqlite3_bind_text(st, 2, b, -1, SQLITE_STATIC);
		if (c != NULL)
			sqlite3_bind_text(st, 3, c, -1, SQLITE_STATIC);
		rc = sqlite3_step(st);
	}
	sqlite3_finalize(st);
	if (rc == SQLITE_DONE)
		return sqlite3_changes(s->wr) > 0 ? 0 : -ENOENT;
	return store_step_err(rc);
}

static int alias_body(struct store *s, void *arg)
{
	const struct alias_job *j = arg;
	/* The SELECT makes an alias to an unknown key a no-op, reported. */
	int rc = run_bound(s, "INSERT OR REPLACE INTO aliases (alias, key)"
			   " SELECT ?1, key FROM entries WHERE key = ?2", j->alias, j->key, NULL);
	if (rc == 0) {
		rc = run_bound(s, "DELETE FROM alias_data WHERE alias = ?1", j->alias, NULL, NULL);
		rc = rc == -ENOENT ? 0 : rc;   /* it had none */
	}
	if (rc == 0 && j->data != NULL)
		rc = run_bound(s, "INSERT INTO alias_data (alias, key, data) VALUES (?1, ?2, ?3)",
			       j->alias, j->key, j->data);
	return rc;
}

int store_set_alias_data(struct store *s, const char *alias, const char *key, const char *data)
{
	struct alias_job j = { alias, key, data };

	if (s->readonly)
		return -EROFS;
	if (data != NULL && strlen(data) > STORE_ALIAS_DATA_MAX)
		return -E2BIG;
	pthread_mutex_lock(&s->wlock);
	int rc = store_txn_locked(s, false, alias_body, &j);
	/* Its new target's answers name their newest alias: they go too. */
	store_changed_entry(s, key, NULL, alias);
	pthread_mutex_unlock(&s->wlock);
	return rc;
}

int store_set_alias(struct store *s, const char *alias, const char *key)
{
	return store_set_alias_data(s, alias, key, NULL);
}

struct touch_job {
	const char *const *keys;
	const int64_t *times;
	const uint64_t *counts;
	size_t n;
};

static int touch_body(struct store *s, void *arg)
{
	const struct touch_job *j = arg;
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < j->n; i++) {
		sqlite3_bind_int64(s->q_touch, 1, (sqlite3_int64)j->counts[i]);
		sqlite3_bind_int64(s->q_touch, 2, j->times[i]);
		sqlite3_bind_text(s->q_touch, 3, j->keys[i], -1, SQLITE_STATIC);
		sqlite3_bind_int(s->q_touch, 4, s->key_format);
		rc = sqlite3_step(s->q_touch);
		rc = rc == SQLITE_DONE ? 0 : store_step_err(rc);
		sqlite3_reset(s->q_touch);
		sqlite3_clear_bindings(s->q_touch);
	}
	return rc;
}

int store_touch(struct store *s, const char *const *keys, const int64_t *times,
		const uint64_t *counts, size_t n)
{
	struct touch_job j = { .keys = keys, .times = times, .counts = counts, .n = n };

	if (s->readonly)
		return -EROFS;
	/* Use counts and times are not what the readers' cache holds, so a
	 * touch does not empty it. */
	return n == 0 ? 0 : store_txn(s, false, touch_body, &j);
}

struct remove_job {
	const char *key;
	char *output;
};

static int remove_body(struct store *s, void *arg)
{
	struct remove_job *j = arg;
	return store_drop_row(s, j->key, &j->output);
}

int store_remove(struct store *s, const char *key)
{
	struct remove_job j = { .key = key };
	int rc;

	if (s->readonly)
		return -EROFS;
	rc = store_txn(s, true, remove_body, &j);
	char *output = j.output;
	/* Unlinking after the commit means a crash in between leaves files
	 * without a row, which reconcile handles; never a row without files. */
	if (rc == 0)
		store_unlink_files(s, key, output);
	free(output);
	return rc;
}

int store_set_pinned(struct store *s, const char *key, bool pinned)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (s->readonly)
		return -EROFS;
	pthread_mutex_lock(&s->wlock);
	rc = sqlite3_prepare_v2(s->wr, "UPDATE entries SET pinned = ?1 WHERE key = ?2",
		-1, &st, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_int(st, 1, pinned);
		sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
	}
	rc = step_change(s, st, rc, key, NULL);
	pthread_mutex_unlock(&s->wlock);
	return rc;
}

struct evict_job {
	uint64_t target;        /* the entries' disk to get under */
	bool stale;             /* every stale entry instead, pinned ones too */
	uint64_t *freed;
	struct victim *list;
	size_t n, cap;
	uint64_t pinned;        /* pinned ones among them */
};

/* Stale first: an older or unknown key format is never hit again. */
#define STALE_SQL "(key_format IS NULL OR key_format < ?1)"

/* Collects the rows of sql (key, output, disk; ?1 the key format) until
 * dropping them brings *total to target. The rows are deleted afterwards,
 * not while the query still walks the table. */
static int pick_victims(struct store *s, const char *sql, uint64_t target, uint64_t *total,
			struct evict_job *j)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(s->wr, sql, -1, &st, NULL);

	if (rc == SQLITE_OK)
		sqlite3_bind_int(st, 1, s->key_format);
	while (rc == SQLITE_OK && *total > target && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		const unsigned char *key = sqlite3_column_text(st, 0);
		const unsigned char *output = sqlite3_column_text(st, 1);

		rc = SQLITE_OK;
		if (!key || !output || sqlite3_column_bytes(st, 0) != KILN_KEY_HEX)
			continue;
		if (j->n == j->cap) {
			size_t cap = j->cap ? j->cap * 2 : 16;
			struct victim *grown = realloc(j->list, cap * sizeof(*grown));
			if (!grown) {
				rc = SQLITE_NOMEM;
				break;
			}
			j->list = grown;
			j->cap = cap;
		}
		struct victim *v = &j->list[j->n];
		memcpy(v->key, key, KILN_KEY_HEX + 1);
		v->output = strdup((const char *)output);
		if (!v->output) {
			rc = SQLITE_NOMEM;
			break;
		}
		uint64_t disk = (uint64_t)sqlite3_column_int64(st, 2);
		*total -= disk < *total ? disk : *total;
		*j->freed += disk;
		j->pinned += sqlite3_column_int(st, 3) != 0;
		j->n++;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_OK || rc == SQLITE_DONE ? 0 : store_sql_errno(rc);
}

static int evict_body(struct store *s, void *arg)
{
	struct evict_job *j = arg;
	uint64_t count, bytes, total;

	/* The writer, inside the transaction, sees what it will drop. */
	int rc = store_count_disk(s->wr, &count, &bytes, &total);
	if (rc == 0 && j->stale)
		rc = pick_victims(s, "SELECT key, output, disk, pinned FROM entries WHERE "
				  STALE_SQL, 0, &total, j);
	/* Two walks, each along an index (entries_format, entries_lru), rather
	 * than one sort of the whole table by staleness. */
	if (rc == 0 && !j->stale)
		rc = pick_victims(s, "SELECT key, output, disk, pinned FROM entries WHERE pinned = 0"
				  " AND " STALE_SQL " ORDER BY last_used, created, key",
				  j->target, &total, j);
	if (rc == 0 && !j->stale)
		rc = pick_victims(s, "SELECT key, output, disk, pinned FROM entries WHERE pinned = 0"
				  " AND NOT " STALE_SQL " ORDER BY last_used, created, key",
				  j->target, &total, j);
	for (size_t i = 0; rc == 0 && i < j->n; i++)
		rc = store_drop_row(s, j->list[i].key, NULL);
	return rc;
}

/* Drops what evict_body picks, then unlinks the files of what it dropped. */
static int evict_run(struct store *s, struct evict_job *j, uint64_t *removed)
{
	*removed = 0;
	*j->freed = 0;
	if (s->readonly)
		return -EROFS;
	int rc = store_txn(s, true, evict_body, j);
	for (size_t i = 0; i < j->n; i++) {
		if (rc == 0)
			store_unlink_files(s, j->list[i].key, j->list[i].output);
		free(j->list[i].output);
	}
	free(j->list);
	if (rc < 0)
		*j->freed = 0;
	else
		*removed = j->n;
	return rc;
}

/* The index's freed pages go back to the filesystem (auto_vacuum,
 * store.c), and the WAL is written back and cut to nothing: else the index
 * grows by what eviction removes. A reader in the way leaves the WAL to
 * SQLite's next checkpoint. */
static void compact_index(struct store *s, bool vacuum)
{
	pthread_mutex_lock(&s->wlock);
	if (vacuum)
		store_exec(s->wr, "PRAGMA incremental_vacuum");
	sqlite3_wal_checkpoint_v2(s->wr, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
	pthread_mutex_unlock(&s->wlock);
}

int store_evict(struct store *s, uint64_t max_bytes, uint64_t *removed, uint64_t *freed)
{
	uint64_t index, other;

	if (s->readonly)
		return -EROFS;
	/* The index and the other files are not evicted: the entries' share
	 * of the budget is what they leave, the WAL written back first. */
	compact_index(s, false);
	store_overhead(s, &index, &other);
	struct evict_job j = { .freed = freed };
	j.target = max_bytes > index + other ? max_bytes - index - other : 0;
	int rc = evict_run(s, &j, removed);
	if (rc == 0 && *removed > 0)
		compact_index(s, true);
	return rc;
}

int store_remove_stale(struct store *s, uint64_t *removed, uint64_t *freed, uint64_t *pinned)
{
	struct evict_job j = { .freed = freed, .stale = true };
	int rc = s->key_format > 0 ? evict_run(s, &j, removed) : -EINVAL;

	*pinned = rc == 0 ? j.pinned : 0;
	if (rc == 0 && *removed > 0)
		compact_index(s, true);
	return rc;
}
