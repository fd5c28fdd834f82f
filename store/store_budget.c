/*
 * The cache's footprint, its entries' key formats and its writers
 * (store.h, "The cache's footprint and its writers").
 *
 * The budget is what the cache takes on disk, as du counts it (allocated
 * blocks): on the tmpfs that operations.md recommends, a 1-byte file takes a
 * page, and the index with its WAL can outweigh small objects. Entries
 * carry their own share (entries.disk, summed by the totals row); the rest
 * is measured when asked: a few stats and one listing of logs/failed/.
 */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store.h"
#include "store_int.h"

static uint64_t allocated_at(int dir, const char *name)
{
	struct stat sb;

	if (dir < 0 || fstatat(dir, name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode))
		return 0;
	return (uint64_t)sb.st_blocks * 512;
}

uint64_t store_entry_disk(const struct store *s, const char *key, const char *output)
{
	char rel[STORE_REL_MAX], log[STORE_REL_MAX];
	uint64_t n = 0;
	const char *ext = store_output_ext(output);

	if (ext != NULL && store_object_rel(key, ext, rel) == 0)
		n += allocated_at(s->fd_objects, rel);
	if (store_object_rel(key, "meta", rel) == 0)
		n += allocated_at(s->fd_objects, rel);
	if (store_key_valid(key)) {
		snprintf(log, sizeof(log), "%s.log", key);
		n += allocated_at(s->fd_logs, log);
	}
	return n;
}

static uint64_t dir_blocks(int dir)
{
	struct stat sb;
	return dir >= 0 && fstat(dir, &sb) == 0 ? (uint64_t)sb.st_blocks * 512 : 0;
}

/* The regular files directly in dir, and with subdirs its subdirectories'
 * own blocks (not what they hold): index.db* go to *index when index is
 * set, the rest to *other. */
static void sum_dir(int dir, bool subdirs, uint64_t *index, uint64_t *other)
{
	int fd = dir < 0 ? -1 : openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	struct dirent *de;

	if (d == NULL) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if (subdirs && de->d_type == DT_DIR && de->d_name[0] != '.') {
			int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
					 O_CLOEXEC);
			*other += dir_blocks(sub);
			if (sub >= 0)
				close(sub);
			continue;
		}
		if (de->d_type != DT_REG && de->d_type != DT_UNKNOWN)
			continue;
		uint64_t n = allocated_at(dirfd(d), de->d_name);
		if (index != NULL && strncmp(de->d_name, "index.db", 8) == 0)
			*index += n;
		else
			*other += n;
	}
	closedir(d);
}

/* The directories count too (a block each on most filesystems, nothing on
 * tmpfs): the cache's own, objects/ with its 256 subdirectories at most,
 * logs/, logs/failed/ and tmp/ (not what tmp/ holds: builds in progress). */
void store_overhead(const struct store *s, uint64_t *index, uint64_t *other)
{
	*index = *other = 0;
	sum_dir(s->fd_root, false, index, other);
	sum_dir(s->fd_failed, false, NULL, other);
	sum_dir(s->fd_objects, true, NULL, other);
	*other += dir_blocks(s->fd_root) + dir_blocks(s->fd_objects) + dir_blocks(s->fd_logs) +
		  dir_blocks(s->fd_failed) + dir_blocks(s->fd_tmp);
}

int store_count_disk(sqlite3 *db, uint64_t *entries, uint64_t *bytes, uint64_t *disk)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(db, "SELECT entries, bytes, disk FROM totals WHERE id = 1",
				    -1, &st, NULL);

	*entries = *bytes = *disk = 0;
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*entries = (uint64_t)sqlite3_column_int64(st, 0);
		*bytes = (uint64_t)sqlite3_column_int64(st, 1);
		*disk = (uint64_t)sqlite3_column_int64(st, 2);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	return store_sql_errno(rc);
}

int store_footprint(struct store *s, struct store_footprint *f)
{
	memset(f, 0, sizeof(*f));
	int rc = store_count_disk(s->rd, &f->entries, &f->bytes, &f->entries_disk);
	if (rc < 0)
		return rc;
	store_overhead(s, &f->index, &f->other);
	f->total = f->entries_disk + f->index + f->other;
	return 0;
}

int store_footprint_entries(struct store *s, struct store_footprint *f)
{
	int rc = store_count_disk(s->rd, &f->entries, &f->bytes, &f->entries_disk);
	f->total = f->entries_disk + f->index + f->other;
	return rc;
}

void store_set_key_format(struct store *s, int key_format)
{
	s->key_format = key_format;
}

static void add_group(struct store_format_group *g, sqlite3_stmt *st, int fmt)
{
	if (g->entries == 0 || fmt < g->lowest)
		g->lowest = fmt;
	if (g->entries == 0 || fmt > g->highest)
		g->highest = fmt;
	g->entries += (uint64_t)sqlite3_column_int64(st, 1);
	g->disk += (uint64_t)sqlite3_column_int64(st, 2);
	g->pinned += (uint64_t)sqlite3_column_int64(st, 3);
}

/* Whether any entry has a key format other than the store's: three
 * lookups in entries_format, where counting would read every row. */
static int other_formats(struct store *s, bool *any)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(s->rd, "SELECT EXISTS (SELECT 1 FROM entries WHERE key_format"
				    " IS NULL) OR EXISTS (SELECT 1 FROM entries WHERE key_format < ?1)"
				    " OR EXISTS (SELECT 1 FROM entries WHERE key_format > ?1)", -1, &st,
				    NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_int(st, 1, s->key_format);
		rc = sqlite3_step(st);
	}
	*any = rc == SQLITE_ROW && sqlite3_column_int(st, 0) != 0;
	sqlite3_finalize(st);
	return rc == SQLITE_ROW ? 0 : store_step_err(rc);
}

int store_key_formats(struct store *s, struct store_formats *f)
{
	sqlite3_stmt *st = NULL;
	bool any;

	memset(f, 0, sizeof(*f));
	int rc = other_formats(s, &any);
	if (rc == 0 && !any) {
		/* The common case after the first start: all current, from the
		 * totals row; pinned ones are not counted here. */
		uint64_t bytes;
		rc = store_count_disk(s->rd, &f->current.entries, &bytes, &f->current.disk);
		f->current.lowest = f->current.highest = s->key_format;
		return rc;
	}
	if (rc == 0)
		rc = sqlite3_prepare_v2(s->rd, "SELECT key_format, count(*), sum(disk), sum(pinned)"
					" FROM entries GROUP BY key_format", -1, &st, NULL);
	else
		return rc;
	while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		int fmt = sqlite3_column_type(st, 0) == SQLITE_NULL ? 0 : sqlite3_column_int(st, 0);
		struct store_format_group *g = fmt <= 0 ? &f->unknown
					       : fmt < s->key_format ? &f->older
					       : fmt > s->key_format ? &f->newer : &f->current;
		add_group(g, st, fmt);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_OK || rc == SQLITE_DONE ? 0 : store_sql_errno(rc);
}

struct writer_job {
	const char *version;
	int key_format;
	int64_t now;
	char *previous;
	size_t previous_len;
};

static int writer_body(struct store *s, void *arg)
{
	struct writer_job *j = arg;
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(s->wr, "SELECT version FROM writers"
				    " ORDER BY last_start DESC, rowid DESC LIMIT 1", -1, &st, NULL);

	if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *v = (const char *)sqlite3_column_text(st, 0);
		if (v != NULL && strcmp(v, j->version) != 0)
			snprintf(j->previous, j->previous_len, "%s", v);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return store_step_err(rc);
	rc = sqlite3_prepare_v2(s->wr, "INSERT INTO writers (version, key_format, first_start,"
				" last_start) VALUES (?1, ?2, ?3, ?3) ON CONFLICT(version) DO UPDATE"
				" SET last_start = ?3, key_format = ?2", -1, &st, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_text(st, 1, j->version, -1, SQLITE_STATIC);
		sqlite3_bind_int(st, 2, j->key_format);
		sqlite3_bind_int64(st, 3, j->now);
		rc = sqlite3_step(st);
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : store_step_err(rc);
}

int store_record_writer(struct store *s, const char *version, int key_format, int64_t now_s,
			char *previous, size_t previous_len)
{
	struct writer_job j = { version, key_format, now_s, previous, previous_len };

	if (previous_len > 0)
		previous[0] = '\0';
	return s->readonly ? -EROFS : store_txn(s, false, writer_body, &j);
}

int store_writers(struct store *s, struct store_writer **out, size_t *n)
{
	sqlite3_stmt *st = NULL;
	struct store_writer *list = NULL;
	size_t cap = 0;
	int rc = sqlite3_prepare_v2(s->rd, "SELECT version, key_format, first_start, last_start"
				    " FROM writers ORDER BY last_start DESC, rowid DESC", -1, &st,
				    NULL);

	*out = NULL;
	*n = 0;
	while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		rc = SQLITE_OK;
		if (*n == cap) {
			cap = cap ? cap * 2 : 4;
			struct store_writer *grown = realloc(list, cap * sizeof(*grown));
			if (grown == NULL) {
				rc = SQLITE_NOMEM;
				break;
			}
			list = grown;
		}
		struct store_writer *w = &list[(*n)++];
		const char *v = (const char *)sqlite3_column_text(st, 0);
		snprintf(w->version, sizeof(w->version), "%s", v != NULL ? v : "");
		w->key_format = sqlite3_column_int(st, 1);
		w->first_start = sqlite3_column_int64(st, 2);
		w->last_start = sqlite3_column_int64(st, 3);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_OK && rc != SQLITE_DONE) {
		free(list);
		*n = 0;
		return store_sql_errno(rc);
	}
	*out = list;
	return 0;
}
