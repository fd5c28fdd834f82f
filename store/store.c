/*
 * The cache store's index side: opening index.db (schema, WAL, version
 * check, the reader's prepared statements), transactions and the totals.
 * Where everything lies in the cache directory is store_layout.c's; the
 * reader's queries live in store_read.c, writers in store_write.c,
 * start-up repair in store_reconcile.c.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store.h"
#include "store_int.h"
#include "util.h"

#define STR_(x) #x
#define STR(x) STR_(x)

/* Long enough to ride out a checkpoint or a CLI reading the index, short
 * enough that a wedged peer surfaces as an error instead of a hang. */
#define BUSY_TIMEOUT_MS 5000


static const char schema_sql[] =
	"CREATE TABLE entries ("
	" key TEXT PRIMARY KEY NOT NULL,"
	" rkey TEXT NOT NULL,"
	" label TEXT,"
	" toolchain TEXT NOT NULL,"
	" output TEXT NOT NULL,"
	" size INTEGER NOT NULL,"
	" created INTEGER NOT NULL,"
	" last_used INTEGER NOT NULL,"
	" uses INTEGER NOT NULL DEFAULT 0,"
	" build_ms INTEGER NOT NULL DEFAULT 0,"
	" pinned INTEGER NOT NULL DEFAULT 0,"
	" args TEXT,"
	" sources TEXT,"
	" deps BLOB);"
	"CREATE INDEX entries_rkey ON entries(rkey, last_used);"
	"CREATE INDEX entries_lru ON entries(last_used, created);"
	"CREATE TABLE aliases (alias TEXT PRIMARY KEY NOT NULL, key TEXT NOT NULL);"
	"CREATE INDEX aliases_key ON aliases(key);";

/*
 * Version 2: the number of entries and their bytes, kept up to date by
 * triggers, so that the totals cost one row read instead of a scan of the
 * whole index (seconds at a million entries). REPLACE fires the delete
 * trigger only with recursive_triggers on, which every writer sets.
 */
static const char schema_v2_sql[] =
	"CREATE TABLE totals (id INTEGER PRIMARY KEY CHECK (id = 1),"
	" entries INTEGER NOT NULL, bytes INTEGER NOT NULL);"
	"INSERT INTO totals SELECT 1, count(*), coalesce(sum(size), 0) FROM entries;"
	"CREATE TRIGGER totals_insert AFTER INSERT ON entries BEGIN"
	" UPDATE totals SET entries = entries + 1, bytes = bytes + NEW.size WHERE id = 1; END;"
	"CREATE TRIGGER totals_delete AFTER DELETE ON entries BEGIN"
	" UPDATE totals SET entries = entries - 1, bytes = bytes - OLD.size WHERE id = 1; END;"
	"CREATE TRIGGER totals_size AFTER UPDATE OF size ON entries BEGIN"
	" UPDATE totals SET bytes = bytes - OLD.size + NEW.size WHERE id = 1; END;"
	"PRAGMA user_version = 2;";

/* Version 3: the object's SHA-256 (NULL in older rows), checked before an
 * object is served for the first time and by verify. */
static const char schema_v3_sql[] =
	"ALTER TABLE entries ADD COLUMN sha256 BLOB;"
	"PRAGMA user_version = 3;";

/*
 * Version 4: what each entry takes on disk (object, meta, log; rows from
 * before get an estimate: the object rounded up to 4 KiB plus a block each
 * for meta and log) and its key format (NULL: unknown), both summed by the
 * totals; and the kilnd versions that wrote the cache.
 */
static const char schema_v4_sql[] =
	"ALTER TABLE entries ADD COLUMN disk INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE entries ADD COLUMN key_format INTEGER;"
	"UPDATE entries SET disk = (size + 4095) / 4096 * 4096 + 8192;"
	"ALTER TABLE totals ADD COLUMN disk INTEGER NOT NULL DEFAULT 0;"
	"UPDATE totals SET disk = (SELECT coalesce(sum(disk), 0) FROM entries) WHERE id = 1;"
	"DROP TRIGGER totals_insert; DROP TRIGGER totals_delete; DROP TRIGGER totals_size;"
	"CREATE TRIGGER totals_insert AFTER INSERT ON entries BEGIN"
	" UPDATE totals SET entries = entries + 1, bytes = bytes + NEW.size,"
	" disk = disk + NEW.disk WHERE id = 1; END;"
	"CREATE TRIGGER totals_delete AFTER DELETE ON entries BEGIN"
	" UPDATE totals SET entries = entries - 1, bytes = bytes - OLD.size,"
	" disk = disk - OLD.disk WHERE id = 1; END;"
	"CREATE TRIGGER totals_size AFTER UPDATE OF size, disk ON entries BEGIN"
	" UPDATE totals SET bytes = bytes - OLD.size + NEW.size,"
	" disk = disk - OLD.disk + NEW.disk WHERE id = 1; END;"
	"CREATE INDEX entries_format ON entries(key_format);"
	"CREATE INDEX entries_label ON entries(label);"
	"CREATE TABLE writers (version TEXT PRIMARY KEY NOT NULL, key_format INTEGER NOT NULL,"
	" first_start INTEGER NOT NULL, last_start INTEGER NOT NULL);"
	"PRAGMA user_version = 4;";

int store_sql_errno(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_ROW:
	case SQLITE_DONE:
		return 0;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_READONLY:
		return -EROFS;
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return -EACCES;
	case SQLITE_CANTOPEN:
		return -ENOENT;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
	case SQLITE_FORMAT:
		return -EBADMSG;
	case SQLITE_TOOBIG:
		return -E2BIG;
	default:
		return -EIO;
	}
}

int store_exec(sqlite3 *db, const char *sql)
{
	return store_sql_errno(sqlite3_exec(db, sql, NULL, NULL, NULL));
}

int store_step_err(int rc)
{
	int e = store_sql_errno(rc);

	return e ? e : -EIO;
}

/* COMMIT when rc is 0, else ROLLBACK; rows: entries or aliases changed, so
 * the readers' caches are dropped after the commit. */
static int txn_finish(struct store *s, int rc, bool rows)
{
	if (rc == 0)
		rc = store_exec(s->wr, "COMMIT");
	if (rc < 0)
		store_exec(s->wr, "ROLLBACK");
	else if (rows)
		store_changed(s);
	return rc;
}

int store_txn_end(struct store *s, int rc)
{
	return txn_finish(s, rc, true);
}

int store_txn_locked(struct store *s, bool rows, int (*body)(struct store *s, void *arg),
		     void *arg)
{
	int rc = store_exec(s->wr, "BEGIN IMMEDIATE");
	return rc == 0 ? txn_finish(s, body(s, arg), rows) : rc;
}

int store_txn(struct store *s, bool rows, int (*body)(struct store *s, void *arg), void *arg)
{
	pthread_mutex_lock(&s->wlock);
	int rc = store_txn_locked(s, rows, body, arg);
	pthread_mutex_unlock(&s->wlock);
	return rc;
}

static void set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* The integer columns of a query's one row into out[0..n). 0, or a
 * negative errno (no row: the SQLite error of the step). */
static int query_ints(sqlite3 *db, const char *sql, int64_t *out, int n)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);

	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		for (int i = 0; i < n; i++)
			out[i] = sqlite3_column_int64(st, i);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	return store_sql_errno(rc);
}

static int read_user_version(sqlite3 *db, int *version)
{
	int64_t v = 0;
	int rc = query_ints(db, "PRAGMA user_version", &v, 1);

	*version = (int)v;
	return rc;
}

static int open_db(const char *path, bool rw, sqlite3 **out, char *err, size_t errlen)
{
	int flags = SQLITE_OPEN_NOMUTEX;
	sqlite3 *db = NULL;
	int rc;

	/* Our own mutex serializes the writer and the reader stays on one
	 * thread, so SQLite's per-connection mutex would be pure overhead. */
	flags |= rw ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY;
	rc = sqlite3_open_v2(path, &db, flags, NULL);
	if (rc != SQLITE_OK) {
		set_err(err, errlen, "cannot open %s: %s", path,
			db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
		sqlite3_close_v2(db);
		return store_sql_errno(rc);
	}
	sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS);
	*out = db;
	return 0;
}

static int check_version(const char *path, int version, char *err, size_t errlen)
{
	if (version > STORE_SCHEMA_VERSION) {
		set_err(err, errlen, "%s has schema version %d, newer than this kiln "
			"understands (%d); use a newer kiln or another cache directory",
			path, version, STORE_SCHEMA_VERSION);
		return -EPROTONOSUPPORT;
	}
	if (version < STORE_SCHEMA_VERSION) {
		set_err(err, errlen, "%s has schema version %d; start kilnd once to upgrade it to %d",
			path, version, STORE_SCHEMA_VERSION);
		return -ENOENT;
	}
	return 0;
}

struct schema_job {
	const char *path;
	char *err;
	size_t errlen;
	bool began;      /* the transaction began: the index can be used */
};

/* Creates or upgrades the schema: all of it or none. */
static int schema_body(struct store *s, void *arg)
{
	struct schema_job *j = arg;
	int version = 0;
	int rc = store_exec(s->wr, "PRAGMA recursive_triggers = ON");

	j->began = true;
	rc = rc == 0 ? read_user_version(s->wr, &version) : rc;
	if (rc == 0 && version == 0) {
		rc = store_exec(s->wr, schema_sql);
		s->fresh_index = true;
	}
	if (rc == 0 && version <= 1)
		rc = store_exec(s->wr, schema_v2_sql);
	if (rc == 0 && version <= 2)
		rc = store_exec(s->wr, schema_v3_sql);
	if (rc == 0 && version <= 3)
		rc = store_exec(s->wr, schema_v4_sql);
	else if (rc == 0)
		rc = check_version(j->path, version, j->err, j->errlen);
	if (rc == 0)
		rc = store_exec(s->wr, store_counters_sql);
	return rc;
}

/*
 * Opens the writer, switches the database to WAL and creates the schema in
 * one immediate transaction, so that two daemons racing on a fresh
 * directory cannot both create it.
 */
static int open_writer(struct store *s, const char *path, char *err, size_t errlen)
{
	int rc;

	rc = open_db(path, true, &s->wr, err, errlen);
	if (rc < 0)
		return rc;
	/* Pages freed by eviction go back to the filesystem (store_evict runs
	 * incremental_vacuum): settable only on a new file, before WAL mode
	 * writes its header, so a no-op on an index made by an older kiln. */
	rc = store_exec(s->wr, "PRAGMA auto_vacuum = INCREMENTAL");
	if (rc == 0)
		rc = store_exec(s->wr, "PRAGMA journal_mode = WAL");
	/* WAL with synchronous=NORMAL may lose the last transactions on power
	 * loss but never corrupts the index. That is enough here: a row is
	 * only written after its object and meta were fsync'ed and renamed,
	 * so a lost row leaves files that reconcile adopts on the next start,
	 * and a lost touch merely ages an entry a little. */
	if (rc == 0)
		rc = store_exec(s->wr, "PRAGMA synchronous = NORMAL");
	/* The WAL counts against the cache's budget: checkpoint every 1 MiB
	 * (SQLite's default is 4 MiB) and cut the file back to 1 MiB after
	 * each reset instead of keeping its largest size. */
	if (rc == 0)
		rc = store_exec(s->wr, "PRAGMA wal_autocheckpoint = 256; "
				       "PRAGMA journal_size_limit = 1048576");
	struct schema_job j = { .path = path, .err = err, .errlen = errlen };
	if (rc == 0)
		rc = store_txn(s, false, schema_body, &j);
	if (rc < 0) {
		if (err && err[0] == '\0')
			set_err(err, errlen, j.began ? "cannot create the schema in %s: %s"
						     : "cannot use %s: %s", path, sqlite3_errmsg(s->wr));
		return rc;
	}
	/* A hit proves the entry's key format current (store_set_key_format). */
	rc = sqlite3_prepare_v2(s->wr, "UPDATE entries SET uses = uses + ?1,"
		" last_used = max(last_used, ?2), key_format = CASE WHEN ?4 > 0 AND"
		" (key_format IS NULL OR key_format < ?4) THEN ?4 ELSE key_format END"
		" WHERE key = ?3", -1, &s->q_touch, NULL);
	return store_sql_errno(rc);
}

static int open_reader(struct store *s, const char *path, char *err, size_t errlen)
{
	static const char *const sql[] = {
		ENTRY_COLS "WHERE e.key = ?1",
		ENTRY_COLS "JOIN aliases x ON x.key = e.key WHERE x.alias = ?1",
		ENTRY_COLS "WHERE e.rkey = ?1 ORDER BY e.last_used DESC, e.created DESC",
		"SELECT key FROM entries WHERE key >= ?1 AND key < ?1 || 'g' LIMIT 2",
	};
	sqlite3_stmt **stmts[] = { &s->q_get, &s->q_alias, &s->q_rkey, &s->q_prefix };
	int version = 0;
	size_t i;
	int rc;

	rc = open_db(path, false, &s->rd, err, errlen);
	if (rc == 0)
		rc = read_user_version(s->rd, &version);
	if (rc < 0) {
		set_err(err, errlen, "cannot read %s: %s", path,
			s->rd ? sqlite3_errmsg(s->rd) : "no connection");
		return rc;
	}
	rc = check_version(path, version, err, errlen);
	for (i = 0; rc == 0 && i < sizeof(sql) / sizeof(sql[0]); i++) {
		rc = store_sql_errno(sqlite3_prepare_v2(s->rd, sql[i], -1, stmts[i], NULL));
		if (rc < 0)
			set_err(err, errlen, "cannot read %s: %s", path, sqlite3_errmsg(s->rd));
	}
	return rc;
}

int store_open(const char *cache_dir, int flags, struct store **out, char *err, size_t errlen)
{
	struct store *s;
	char *db_path = NULL;
	struct stat sb;
	int rc = -ENOMEM;

	*out = NULL;
	set_err(err, errlen, "%s", "");
	s = calloc(1, sizeof(*s));
	if (!s)
		goto fail;
	s->readonly = flags & STORE_READONLY;
	s->fd_root = s->fd_objects = s->fd_logs = s->fd_tmp = s->fd_failed = -1;
	pthread_mutex_init(&s->wlock, NULL);
	if (store_changes_init(s) < 0) {
		pthread_mutex_destroy(&s->wlock);
		pthread_mutex_destroy(&s->chg_lock);
		free(s);
		s = NULL;
		goto fail;
	}
	if ((db_path = store_layout_paths(s, cache_dir)) == NULL)
		goto fail;
	if (s->readonly && stat(db_path, &sb) < 0) {
		rc = -errno;
		set_err(err, errlen, "no cache index at %s: %s", db_path, strerror(errno));
		goto fail;
	}
	rc = store_open_dirs(s, err, errlen);
	if (rc == 0 && !s->readonly)
		rc = open_writer(s, db_path, err, errlen);
	if (rc < 0)
		goto fail;
	rc = open_reader(s, db_path, err, errlen);
	if (rc == 0)
		rc = store_hot_init(s);
	if (rc < 0)
		goto fail;
	free(db_path);
	*out = s;
	return 0;
fail:
	if (rc == -ENOMEM && err && err[0] == '\0')
		set_err(err, errlen, "out of memory opening the store");
	free(db_path);
	store_close(s);
	return rc;
}

int store_quick_check(struct store *s)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(s->wr != NULL ? s->wr : s->rd, "PRAGMA quick_check(1)", -1,
				    &st, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const char *t = (const char *)sqlite3_column_text(st, 0);
		rc = t != NULL && strcmp(t, "ok") == 0 ? 0 : -EBADMSG;
	} else {
		rc = store_sql_errno(rc);
	}
	sqlite3_finalize(st);
	return rc;
}

void store_close(struct store *s)
{
	if (!s)
		return;
	store_hot_fini(s);
	sqlite3_finalize(s->q_get);
	sqlite3_finalize(s->q_alias);
	sqlite3_finalize(s->q_rkey);
	sqlite3_finalize(s->q_prefix);
	sqlite3_finalize(s->q_touch);
	sqlite3_close_v2(s->rd);
	sqlite3_close_v2(s->wr);
	pthread_mutex_destroy(&s->wlock);
	store_changes_fini(s);
	store_close_dirs(s);
	free(s->dir);
	free(s->objects);
	free(s->logs);
	free(s->tmp);
	free(s);
}

int store_totals(struct store *s, uint64_t *entries, uint64_t *bytes)
{
	return store_count_sizes(s->rd, entries, bytes);
}

int store_count_sizes(sqlite3 *db, uint64_t *entries, uint64_t *bytes)
{
	int64_t v[2] = { 0, 0 };
	int rc = query_ints(db, "SELECT entries, bytes FROM totals WHERE id = 1", v, 2);

	*entries = (uint64_t)v[0];
	*bytes = (uint64_t)v[1];
	return rc;
}
