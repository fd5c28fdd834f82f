/*
 * The cache store: SQLite index plus immutable, content-addressed objects.
 * Layout under the cache directory:
 *   index.db                 SQLite, WAL, schema version in PRAGMA user_version
 *   objects/ab/<key>.<ext>   artifacts (ext from the output kind: "so" for shared)
 *   objects/ab/<key>.meta    JSON metadata of the entry (lets reconcile adopt it)
 *   logs/<key>.log           compiler output of the build
 *   logs/failed/<rkey>.log   compiler output of a failed build, by request key
 *   logs/failed/alias-<sha256 of the alias>.failed
 *                            the request key of an alias's last, failed build
 *   tmp/                     build directories, same filesystem for rename
 * The cache's budget (max-size) counts all of it but tmp/: store_footprint.
 * Threads: one writer connection behind a mutex (store_put, store_touch, ...,
 * meant for the thread pool) and one reader connection for the caller that
 * opened the store (the daemon's loop thread, or the CLI). Reader functions
 * must only be called from that one thread.
 */
#ifndef KILN_DAEMON_STORE_H
#define KILN_DAEMON_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "depkind.h"

#define STORE_SCHEMA_VERSION 4

struct store;

/*
 * What an entry depends on: one thing the toolchain looked at during the
 * build (docs/design.md, "What the key covers"). A hit needs every one of
 * them in the recorded state.
 */
enum store_dep_kind {
	STORE_DEP_FILE = DEP_FILE,       /* read: its content (digest) counts */
	STORE_DEP_EXISTS = DEP_EXISTS,   /* looked at and found: its type and permissions count */
	STORE_DEP_ABSENT = DEP_ABSENT,   /* looked for and not found: must stay absent */
	STORE_DEP_ENV = DEP_ENV,         /* an environment variable read: path is its name,
	                                  * mode 1 when set, digest the SHA-256 of its value */
	STORE_DEP_LISTING = DEP_LISTING, /* a directory listed (opendir): digest the SHA-256
	                                  * of its names (store_listing_digest), identity
	                                  * the directory's */
	STORE_DEP_SEARCH = DEP_SEARCH,   /* a program looked up along PATH: path is its name
	                                  * (no '/'), mode 1 when found, digest the SHA-256
	                                  * of the path found (docs/design.md) */
	STORE_DEP__COUNT = DEP__COUNT
};
/* The numbers are on disk (the index's dependency blobs): the table in
 * proto/depkind.h defines them, this enum only names them for the store. */
_Static_assert(STORE_DEP__COUNT == 6, "a dependency kind added: extend the blob codec");

/* How an entry's dependencies were recorded. */
enum store_deps_source {
	STORE_DEPS_DEPFILE = 0, /* the compiler's dependency files (no absent
	                         * probes, no assembler or positional inputs) */
	STORE_DEPS_OBSERVED,    /* every file the toolchain opened or probed */
};

struct store_dep {
	char *path;          /* absolute; the variable's name for STORE_DEP_ENV, the
	                      * program's for STORE_DEP_SEARCH */
	uint8_t kind;        /* enum store_dep_kind */
	uint32_t mode;       /* st_mode (EXISTS, FILE), or set/unset (ENV) */
	uint64_t size;
	int64_t mtime_ns;
	/* The file's identity when it was hashed; dev == 0 && ino == 0 when
	 * it may not stand for the content (it changed too recently). */
	int64_t ctime_ns;
	uint64_t dev, ino;
	uint8_t digest[32];  /* SHA-256 of the content (FILE) or value (ENV) */
};

/* One entry. Strings are owned by the entry (store_entry_free). */
struct store_entry {
	char key[65];        /* artifact key: names the object */
	char rkey[65];       /* request key: what the client asked for */
	char *alias;         /* one alias pointing at this entry, or NULL */
	char *label;         /* or NULL */
	char *toolchain;     /* toolchain name, e.g. "c++" */
	char *output;        /* output kind, e.g. "shared" */
	uint64_t size;       /* object size in bytes */
	uint64_t disk;       /* what its files take on disk (object, meta and log,
	                      * allocated blocks); set by the store when it
	                      * indexes the entry */
	int key_format;      /* the key format it was built under (kilnd's
	                      * KEY_FORMAT_VERSION); 0 unknown: rows from before
	                      * schema 4, metas of older kilnds */
	bool has_sha256;     /* false in rows from before schema 3 */
	uint8_t sha256[32];  /* SHA-256 of the object: checked before serving it */
	int64_t created;     /* Unix seconds */
	int64_t last_used;   /* Unix seconds */
	uint64_t uses;
	uint64_t build_ms;
	bool pinned;
	char *args_json;     /* JSON array of the client's args, or NULL */
	char *sources_json;  /* JSON array of source names, or NULL */
	struct store_dep *deps;
	size_t ndeps;
	uint8_t deps_source; /* enum store_deps_source */
	/* Non-NULL: deps are borrowed, read-only, from a block shared with the
	 * hot cache (hundreds of paths an entry need not be copied per hit);
	 * store_entry_free drops the reference. */
	struct store_deps_ref *deps_ref;
};

struct store_reconcile_stats {
	uint64_t tmp_removed;      /* leftovers removed from tmp/ */
	uint64_t rows_dropped;     /* rows whose object was missing or of the wrong size */
	uint64_t objects_adopted;  /* objects with valid .meta but no row, indexed again */
	uint64_t objects_removed;  /* objects and stray files without usable metadata */
};

enum store_flags {
	STORE_READONLY = 1,  /* the CLI while the daemon is down: no writes, no mkdir */
};

/*
 * Opens (creating when needed and not read-only) the store in cache_dir:
 * directories with mode 0700, index.db with the schema, WAL mode. Refuses a
 * newer schema version. On failure returns a negative errno and writes a
 * sentence into err. *out is owned by the caller (store_close).
 */
int store_open(const char *cache_dir, int flags, struct store **out, char *err, size_t errlen);
void store_close(struct store *s);
/* PRAGMA quick_check on the index: 0 when it is intact, -EBADMSG when SQLite
 * finds it damaged, another negative errno when it cannot tell. */
int store_quick_check(struct store *s);

/*
 * Named counters kept in the index (kiln stats): they survive a restart.
 * Names are short ASCII ("hits", "toolchain.gcc.hits"); values are counts.
 */
struct store_counter {
	char name[64];
	uint64_t value;
};
/* Reads every saved counter (reader thread); *out is malloc'd, *n may be 0
 * (none saved, or an index no writer of this kiln has opened). 0 or -errno. */
int store_counters_read(struct store *s, struct store_counter **out, size_t *n);
/* Saves counters, each replacing its saved value; with all, every counter
 * not in c is removed first (zeroing). Writer: the thread pool. 0 or -errno. */
int store_counters_write(struct store *s, const struct store_counter *c, size_t n, bool all);
/* The build-time histogram's buckets (kilnd's stats.c, kiln stats): upper
 * bounds in milliseconds; the last bucket, "build_bucket.10", is +Inf. */
#define STORE_BUILD_BUCKETS 11
extern const uint64_t store_build_bucket_ms[STORE_BUILD_BUCKETS - 1];

const char *store_dir(const struct store *s);
/* File extension for an output kind ("shared" -> "so"), NULL if unknown. */
const char *store_output_ext(const char *output);
/* malloc'd paths, owned by the caller. */
char *store_object_path(const struct store *s, const char *key, const char *output);
/* A counter that moves after every committed change of the index except use
 * counts; what is derived from the index is valid while it stands still. */
uint64_t store_generation(struct store *s);
/*
 * Changes: what the changes after generation `from` up to `to` (a value of
 * store_generation) touched, so that a cache filled at `from` forgets only
 * that (store_changes.c). fn gets, per change, the entry's key and request
 * key when an entry was written (a publish, its pinned flag), the alias it
 * set and that alias's new target key (an alias write); any may be NULL.
 * fn runs under the store's lock, which writers wait for: keep it short (the
 * hit cache copies the names, the descriptor cache closes descriptors that
 * other references keep open). Returns false, having called fn for some or
 * none, when it cannot tell: a change touched rows of any entry (removal,
 * eviction, reconcile), the store keeps no records (read-only), or more
 * than STORE_CHANGES changes passed. The caller then forgets everything.
 */
#define STORE_CHANGES 256
bool store_changes_since(struct store *s, uint64_t from, uint64_t to,
			 void (*fn)(void *ctx, const char *key, const char *rkey, const char *alias),
			 void *ctx);
char *store_log_path(const struct store *s, const char *key);
char *store_tmp_dir(const struct store *s);
/* tmp/, held open: temporary files and build directories are made and
 * handed to store_publish relative to it. */
int store_tmp_fd(const struct store *s);
/* logs/, held open: build logs are written there through it. */
int store_logs_fd(const struct store *s);
/* logs/failed/, held open: the logs of failed builds (-1 when read-only and
 * missing). */
int store_failed_fd(const struct store *s);

/* Failed builds' logs are kept this long, and at most this many files. */
#define STORE_FAILED_MAX_AGE_S (7 * 24 * 3600)
#define STORE_FAILED_MAX_FILES 1000
/*
 * Prunes logs/failed/: removes the logs (*.log, *.failed) last written
 * more than max_age_s seconds before now_s, then the oldest beyond
 * max_files, and temporary files left there for over an hour. *removed
 * counts what went. 0 or a negative errno (-EROFS read-only). Safe while
 * kilnd serves (a log being replaced is a new file of now).
 */
int store_prune_failed(struct store *s, int64_t now_s, int64_t max_age_s, size_t max_files,
		       uint64_t *removed);
/* True while objects/, logs/, logs/failed/ and tmp/ are still the
 * directories held open. */
bool store_dirs_intact(const struct store *s);
/* Opens key's object read-only through the held objects/ directory: a
 * descriptor, or a negative errno (-ENOENT: gone). */
int store_object_open(const struct store *s, const char *key, const char *output);

/* "file", "exists", "absent", "env"; the kind from such a name (-1: none). */
const char *store_dep_kind_name(int kind);
int store_dep_kind_parse(const char *name);
/* "observed" or "depfile". */
const char *store_deps_source_name(int source);

/* Frees the members of e (not e itself) and zeroes it. */
void store_entry_free(struct store_entry *e);
void store_entries_free(struct store_entry *list, size_t n);

/* Reader side: 0, -ENOENT, or another negative errno. Deps are filled. */
int store_get(struct store *s, const char *key, struct store_entry *e);
int store_get_by_alias(struct store *s, const char *alias, struct store_entry *e);
/* As store_get and store_get_by_alias, from any thread (the pool): the
 * writer connection, under its lock; -EROFS for a read-only store. */
int store_get_any_thread(struct store *s, const char *key, struct store_entry *e);
int store_get_by_alias_any_thread(struct store *s, const char *alias, struct store_entry *e);
/* All entries built for rkey, most recently used first; *out malloc'd. */
int store_get_by_rkey(struct store *s, const char *rkey, struct store_entry **out, size_t *n);
/* ref is a full key, an alias, a unique key prefix of >= 4 hex digits, or
 * the label of one entry, tried in that order. -ENOENT when nothing
 * matches, -ENOTUNIQ when a prefix or a label is ambiguous. */
int store_resolve(struct store *s, const char *ref, struct store_entry *e);
/* Up to max keys starting with the hex prefix (any case), in order: what an
 * ambiguous prefix matches. 0 with *n set, or a negative errno. */
int store_keys_with_prefix(struct store *s, const char *prefix, char (*keys)[65],
			   size_t max, size_t *n);
/* Up to max keys of entries labelled label, most recently used first: what
 * an ambiguous label matches. 0 with *n set, or a negative errno. */
int store_keys_with_label(struct store *s, const char *label, char (*keys)[65], size_t max,
			  size_t *n);
/* The keys of the max most recently used entries, the latest first
 * (*keys malloc'd, *n of them): what kilnd checks before its first
 * request (prewarm.h). Reader thread. 0 or a negative errno. */
int store_recent_keys(struct store *s, size_t max, char (**keys)[65], size_t *n);
/* Every entry, most recently used first (deps not filled). */
int store_list(struct store *s, struct store_entry **out, size_t *n);
int store_totals(struct store *s, uint64_t *entries, uint64_t *bytes);

/* Writer side: thread-safe, blocking (fsync, SQLite); call from the pool. */

/*
 * Publishes a built artifact crash-safely: writes <key>.meta to tmp/ and
 * fsyncs it, fsyncs tmp_object, renames both into objects/ab/, fsyncs that
 * directory, then inserts the row (replacing one with the same key) and
 * points e->alias (when set) at e->key. A file already published under the
 * key is kept (content addressing: same key, same content) and tmp_object
 * is unlinked. tmp_object is relative to the directory src_dir (the store's
 * tmp/ descriptor for kilnd's own files, or AT_FDCWD with an absolute path).
 * Returns 0 or a negative errno (-ENOSPC, -EIO, ...); on failure nothing is
 * indexed and temporary files are removed.
 */
int store_publish(struct store *s, const struct store_entry *e, int src_dir, const char *tmp_object);
/* As store_publish, and *fd gets a read-only descriptor of the artifact
 * (-1 on failure), opened before the row exists: an eviction right after
 * the publish cannot take it from the caller. */
int store_publish_open(struct store *s, const struct store_entry *e, int src_dir,
		       const char *tmp_object, int *fd);
/* Points alias at key (creating or replacing the alias). Drops the alias's
 * data (below). */
int store_set_alias(struct store *s, const char *alias, const char *key);
/*
 * As store_set_alias, with data (NUL-terminated, at most STORE_ALIAS_DATA_MAX
 * bytes; NULL: none) stored with the alias in the same transaction: what a
 * client needs besides the artifact to use the program the alias names
 * (kiln.gt4py's load metadata). The data is bound to key: once the alias
 * names another entry it is gone, so it is never read with another
 * program.
 */
#define STORE_ALIAS_DATA_MAX (4u << 20)
int store_set_alias_data(struct store *s, const char *alias, const char *key, const char *data);
/* The data stored with alias while it names key: 0 with *data (malloc'ed;
 * NULL when the alias has none), -ENOENT when alias does not name key. */
int store_alias_data(struct store *s, const char *alias, const char *key, char **data);
/* Adds counts[i] to uses and raises last_used to times[i] for keys[i]. */
int store_touch(struct store *s, const char *const *keys, const int64_t *times,
		const uint64_t *counts, size_t n);
/* Drops the row and its aliases, unlinks object, meta and log. -ENOENT if none. */
int store_remove(struct store *s, const char *key);
int store_set_pinned(struct store *s, const char *key, bool pinned);
/* Evicts unpinned entries, stale ones first (an older or unknown key
 * format, store_set_key_format), then least recently used, until the
 * footprint (store_footprint's total) is <= max_bytes. Reports how many
 * were removed and the bytes on disk freed. */
int store_evict(struct store *s, uint64_t max_bytes, uint64_t *removed, uint64_t *freed);
/* Removes a file or a whole directory tree (no symlinks followed, read-only
 * directories opened up first). Missing is success. 0 or a negative errno. */
int store_rm_tree(const char *path);
/* As store_rm_tree, name relative to the directory dirfd. */
int store_rm_tree_at(int dirfd, const char *name);
/* Start-up repair, before anything else uses the store (see the stats). */
int store_reconcile(struct store *s, struct store_reconcile_stats *st);
/* As store_reconcile; keep_tmp leaves tmp/ alone (builds of another store
 * object over the same directory may be using it). */
int store_reconcile_keep(struct store *s, struct store_reconcile_stats *st, bool keep_tmp);
/* The cache directory itself, held open (for identity checks). */
int store_root_fd(const struct store *s);
/* After a clean stop: only empties tmp/. */
int store_reconcile_tmp(struct store *s, struct store_reconcile_stats *st);

/*
 * store_reconcile in steps, for a kilnd that serves while it runs (after a
 * crash, docs/design.md "Start-up after a crash"): each step holds the
 * writer lock for one batch (rows without an object dropped, 4096 keys at a
 * time; then objects/ one subdirectory at a time: orphans adopted, strays
 * removed). Files changed at or after before_ns are left alone: the running
 * kilnd may be publishing them. Zero-initialise, set before_ns, then call
 * until it returns 0 (done); 1 while steps remain; a negative errno on
 * failure. Counts add up in st. Thread: the pool.
 */
struct store_sweep {
	int phase;           /* 0 rows, 1 objects, 2 done */
	char cursor[65];     /* phase 0: the last key checked */
	unsigned subdir;     /* phase 1: the next subdirectory, 0..255 */
	int64_t before_ns;
};
int store_sweep_step(struct store *s, struct store_sweep *sw, struct store_reconcile_stats *st);
/*
 * Files in objects/ that the store never writes there (a loader's copy
 * "<key>.so_0", anything a person put there), each named to report
 * (relative to objects/) and removed; *removed counts them. Names the store
 * does write are left alone even without a row (a publish in progress; the
 * next full reconcile handles leftovers). Safe while kilnd serves.
 */
int store_remove_strays(struct store *s, void (*report)(void *ctx, const char *rel), void *ctx,
			uint64_t *removed);
/* Marks a clean stop (the daemon's last write before it exits). -ESTALE,
 * and no mark, when a publish placed files whose row failed since the open:
 * the next start's check of the cache adopts them. */
int store_mark_clean(struct store *s);
/* True when the last daemon stopped cleanly; removes the mark (durably), so
 * that a crash from now on means a full reconcile at the next start. */
bool store_take_clean_mark(struct store *s);
/* True when this open created the index (a new cache, or the old index lost). */
bool store_index_is_new(const struct store *s);

/*
 * The cache's footprint and its writers (store_budget.c).
 *
 * The budget (max-size) bounds the whole cache directory but tmp/: every
 * entry's object, meta and log as allocated on disk (a 1-byte file takes a
 * block; on tmpfs a page), the index with its WAL and shared memory, the
 * logs of failed builds and the directory's other files (kilnd.log).
 */
struct store_footprint {
	uint64_t entries;       /* rows */
	uint64_t bytes;         /* their objects' sizes (kiln ls's SIZE) */
	uint64_t entries_disk;  /* their files on disk */
	uint64_t index;         /* index.db, its WAL and shared memory */
	uint64_t other;         /* logs/failed/ and the cache directory's other files */
	uint64_t total;         /* entries_disk + index + other: what max-size bounds */
};
/* Reader thread (the totals row), plus a few stats and one listing of
 * logs/failed/ (at most STORE_FAILED_MAX_FILES files). 0 or -errno. */
int store_footprint(struct store *s, struct store_footprint *f);
/* As store_footprint from the totals row alone: f's index and other are
 * kept as they are (measured on the pool with store_overhead), total is
 * recomputed. Reader thread: what kilnd does after each write. */
int store_footprint_entries(struct store *s, struct store_footprint *f);
/* The part outside the entries (index, other): a few stats and two
 * listings, so not for the loop's every write. Any thread. */
void store_overhead(const struct store *s, uint64_t *index, uint64_t *other);

/* The key format this kilnd builds under (0 until set): stamped on entries
 * a hit proves current (store_touch), and what store_evict and
 * store_remove_stale call stale. Set once, before the store is shared. */
void store_set_key_format(struct store *s, int key_format);
/* Entries by key format relative to the store's: current, older (stale:
 * never hit again), unknown (from before kiln recorded it; hit ones become
 * current), newer (a newer kilnd's). Reader thread. */
struct store_format_group {
	uint64_t entries, disk;
	uint64_t pinned;         /* not counted for current when all are current */
	int lowest, highest;     /* key formats seen (0 for unknown) */
};
struct store_formats {
	struct store_format_group current, older, unknown, newer;
};
int store_key_formats(struct store *s, struct store_formats *f);
/* Removes every older and unknown entry, pinned ones too (*pinned counts
 * them; never hit, they only hold space). Writer. 0 or -errno. */
int store_remove_stale(struct store *s, uint64_t *removed, uint64_t *freed, uint64_t *pinned);

/* Which kilnd versions wrote this cache (table writers). */
struct store_writer {
	char version[96];
	int key_format;
	int64_t first_start, last_start;   /* Unix seconds */
};
/* Records a start of version (writer); *previous gets the version that
 * started last before it ("" when none or the same). 0 or -errno. */
int store_record_writer(struct store *s, const char *version, int key_format, int64_t now_s,
			char *previous, size_t previous_len);
/* Every writer, the latest start first; *out malloc'd. Reader thread. */
int store_writers(struct store *s, struct store_writer **out, size_t *n);

#endif
