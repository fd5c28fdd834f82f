/*
 * Internals of the cache store shared by store.c (open, paths, readers),
 * store_write.c (publish and the other writers) and store_reconcile.c
 * (start-up repair). Nothing outside store/store*.c includes this.
 */
#ifndef KILN_DAEMON_STORE_INT_H
#define KILN_DAEMON_STORE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "store.h"

/* Longest name relative to objects/: "ab/" + 64 hex + "." + extension. */
#define STORE_REL_MAX 96

struct store {
	bool fresh_index;     /* the schema was created by this open */
	int key_format;       /* store_set_key_format's, 0 unset */
	char *dir;
	char *objects;          /* <dir>/objects */
	char *logs;             /* <dir>/logs */
	char *tmp;              /* <dir>/tmp */
	/* The same directories held open from store_open to store_close: the
	 * store's own file operations go through them (*at() calls), so a name
	 * changed underneath cannot redirect them. -1 when missing (read-only).
	 * fd_failed is logs/failed/, the logs of failed builds. */
	int fd_root, fd_objects, fd_logs, fd_tmp, fd_failed;
	bool readonly;
	sqlite3 *rd;            /* reader: only the thread that opened the store */
	sqlite3 *wr;            /* writer, NULL when read-only; guarded by wlock */
	pthread_mutex_t wlock;
	sqlite3_stmt *q_get;    /* reader statements, cached: hot on every request */
	sqlite3_stmt *q_alias;
	sqlite3_stmt *q_rkey;
	sqlite3_stmt *q_prefix;
	sqlite3_stmt *q_touch;  /* writer statement, used under wlock */
	atomic_uint_least64_t gen;  /* bumped after each committed change but touches */
	pthread_mutex_t chg_lock;   /* the records of changes (store_changes.c) */
	struct store_change_rec *changes;  /* ring of STORE_CHANGES; NULL read-only */
	atomic_bool rows_lost;      /* a published object's row failed: no clean-stop mark */
	struct store_hot *hot;  /* the reader's cache (store_hot.c); NULL read-only */
};

/* store_hot.c: the reader's cache of lookups by request key and by alias. */
enum store_hot_kind { STORE_HOT_RKEY, STORE_HOT_ALIAS };
int store_hot_init(struct store *s);
void store_hot_fini(struct store *s);
/* Every committed change of entries or aliases calls one of these after
 * the commit: store_changed_entry names what it touched (key and rkey of an
 * entry written, an alias set; NULL for none), store_changed says rows of
 * any entry may have changed. */
void store_changed(struct store *s);
void store_changed_entry(struct store *s, const char *key, const char *rkey, const char *alias);
int store_changes_init(struct store *s);
void store_changes_fini(struct store *s);
/* Before a lookup: empties the cache when something changed since it was
 * filled; returns the counter to pass to store_hot_put. */
uint64_t store_hot_begin(struct store *s);
/* A cached answer: 0 with a copy (free with store_entries_free), -ENOENT for
 * a cached "none", -EAGAIN when not cached. */
int store_hot_get(struct store *s, enum store_hot_kind kind, const char *name,
		  struct store_entry **out, size_t *n);
/* Caches what a lookup begun at gen found (n may be 0), unless stale. */
void store_hot_put(struct store *s, uint64_t gen, enum store_hot_kind kind, const char *name,
		   const struct store_entry *list, size_t n);

/* The counters table (store_counters.c), made by every writer at open. */
extern const char store_counters_sql[];
/* Maps an SQLite result code to a negative errno. */
int store_sql_errno(int rc);
/* The errno for a failed sqlite3_step: like store_sql_errno, but a code
 * that maps to 0 (an unexpected SQLITE_ROW) becomes -EIO. */
int store_step_err(int rc);
/* Ends the writer transaction that the caller began under the lock (bench
 * code that times its phases): commits when rc is 0, rolls back otherwise
 * (also when the commit fails). Returns the result. */
int store_txn_end(struct store *s, int rc);
/* Every write transaction of the store: the writer lock, BEGIN IMMEDIATE,
 * body, then commit (body returned 0) or roll back. rows: body changes
 * entries or aliases, so the readers' caches are dropped after the commit
 * (use counts and times are not cached). The result. */
int store_txn(struct store *s, bool rows, int (*body)(struct store *s, void *arg), void *arg);
/* The same for a caller that holds the writer lock already (reconcile). */
int store_txn_locked(struct store *s, bool rows, int (*body)(struct store *s, void *arg),
		     void *arg);
/* Runs one or more SQL statements without results on db. 0 or -errno. */
int store_exec(sqlite3 *db, const char *sql);
/* The number of entries and the sum of their sizes, read through db: the
 * reader, or the writer inside its transaction. 0 or a negative errno. */
int store_count_sizes(sqlite3 *db, uint64_t *entries, uint64_t *bytes);
/* The totals row with the entries' disk (store_budget.c). */
int store_count_disk(sqlite3 *db, uint64_t *entries, uint64_t *bytes, uint64_t *disk);
/* What key's object, meta and log take on disk (allocated blocks). */
uint64_t store_entry_disk(const struct store *s, const char *key, const char *output);
/* True when key is exactly 64 lower-case hex digits. */
bool store_key_valid(const char *key);
/* "ab/<key>.<ext>" (relative to objects/) into out; ext "meta" for the
 * metadata. -EINVAL for a bad key or output. */
int store_object_rel(const char *key, const char *ext, char out[STORE_REL_MAX]);
/* Sets s's dir, objects, logs and tmp paths for cache_dir; the index's path
 * (malloc'd), or NULL on ENOMEM (what was set is freed by store_close). */
char *store_layout_paths(struct store *s, const char *cache_dir);
/* store_layout.c: opens (making them unless read-only) the directory and its
 * subdirectories into the fd_* members; 0 or -errno with err. */
int store_open_dirs(struct store *s, char *err, size_t errlen);
void store_close_dirs(struct store *s);
/* A block of deps shared by the hot cache and the entries it hands out. */
struct store_deps_ref {
	int refs;                /* atomic */
	struct store_dep *deps;
	size_t n;
};
/* Drops one reference; the last frees the block. */
void store_deps_unref(struct store_deps_ref *r);

/* Compact, versioned encoding of deps for the index (see store.c).
 * *out is malloc'd (NULL when n is 0). 0 or a negative errno. */
int store_deps_encode(const struct store_dep *deps, size_t n, int source, uint8_t **out,
		      size_t *len);
/* Decodes a blob from store_deps_encode (or a version 1 blob); -EBADMSG for
 * anything malformed. *source gets enum store_deps_source. */
int store_deps_decode(const uint8_t *buf, size_t len, struct store_dep **out, size_t *n,
		      int *source);

/*
 * Writer helpers: the caller holds wlock. store_insert_row inserts or
 * replaces e's row and, when e->alias is set, the alias (replacing an
 * existing alias when replace_alias, else keeping it).
 */
int store_insert_row(struct store *s, const struct store_entry *e, bool replace_alias);
/* Deletes the row of key and its aliases; -ENOENT when there is none. When
 * output is not NULL, *output receives the row's output kind (malloc'd). */
int store_drop_row(struct store *s, const char *key, char **output);
/* Unlinks meta, object and log of an entry; files already gone are fine. */
void store_unlink_files(const struct store *s, const char *key, const char *output);


/* Column order shared by every entry query (see row_to_entry). An alias is
 * replaced by delete and insert, so the highest rowid is the newest one. */
#define ENTRY_COLS_HEAD \
	"SELECT e.key, e.rkey, e.label, e.toolchain, e.output, e.size, e.created," \
	" e.last_used, e.uses, e.build_ms, e.pinned, e.args, e.sources, e.sha256," \
	" e.key_format, e.disk, "
#define ENTRY_COLS_TAIL \
	", (SELECT a.alias FROM aliases a WHERE a.key = e.key" \
	" ORDER BY a.rowid DESC LIMIT 1) FROM entries e "
#define ENTRY_COLS ENTRY_COLS_HEAD "e.deps" ENTRY_COLS_TAIL
#define ENTRY_COLS_NODEPS ENTRY_COLS_HEAD "NULL" ENTRY_COLS_TAIL

enum {
	C_KEY, C_RKEY, C_LABEL, C_TOOLCHAIN, C_OUTPUT, C_SIZE, C_CREATED,
	C_LAST_USED, C_USES, C_BUILD_MS, C_PINNED, C_ARGS, C_SOURCES, C_SHA256,
	C_KEY_FORMAT, C_DISK, C_DEPS, C_ALIAS,
};

#endif
