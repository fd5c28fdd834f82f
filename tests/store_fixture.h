/*
 * What the store's unit suites share (test_store*.c, test_cache_conf.c):
 * a temporary cache directory per test under one per run, opening a store
 * there, keys, entries and objects to publish, and a look into the index
 * with SQLite itself. Each suite is a program of its own; the helpers are
 * static inline, each suite uses what it needs.
 */
#ifndef KILN_TESTS_STORE_FIXTURE_H
#define KILN_TESTS_STORE_FIXTURE_H
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <sqlite3.h>

#include "cache_conf.h"
#include "entry_codec.h"
#include "store.h"
#include "store_int.h"
#include "util.h"
#include "dep_fixture.h"
#include "unit.h"

static char base[PATH_MAX / 2];  /* one per run, removed by the parent */
static char dir[PATH_MAX];   /* one per test, under base */
static int tmp_seq;

static inline int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	chmod(path, 0700);
	return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

static inline void rm_rf(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static inline void base_setup(void)
{
	snprintf(base, sizeof(base), "%s/kiln-test-store-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(base));
}

static inline void base_teardown(void)
{
	rm_rf(base);
}

static inline void test_setup(void)
{
	snprintf(dir, sizeof(dir), "%s/t-XXXXXX", base);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	/* A subdirectory that does not exist yet: store_open creates it. */
	strcat(dir, "/cache");
}

static inline struct store *open_store(int flags)
{
	struct store *s = NULL;
	char err[256] = "";
	int rc = store_open(dir, flags, &s, err, sizeof(err));

	ck_assert_msg(rc == 0, "store_open: %d %s", rc, err);
	ck_assert_ptr_nonnull(s);
	return s;
}

static inline void hexkey(const char *seed, char out[65])
{
	uint8_t d[32];

	util_sha256(seed, strlen(seed), d);
	util_hex(d, 32, out);
}

/* A 64-hex key starting with prefix, the rest filled with fill. */
static inline void prefixed_key(const char *prefix, char fill, char out[65])
{
	memset(out, fill, 64);
	memcpy(out, prefix, strlen(prefix));
	out[64] = '\0';
}

static char *write_tmp(struct store *s, const char *content)
{
	char *tdir = store_tmp_dir(s), *path = NULL;
	int fd;

	ck_assert_ptr_nonnull(tdir);
	ck_assert_int_ge(asprintf(&path, "%s/obj-%d-%d", tdir, (int)getpid(),
				  __atomic_fetch_add(&tmp_seq, 1, __ATOMIC_RELAXED)), 0);
	free(tdir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(util_write_all(fd, content, strlen(content)), 0);
	close(fd);
	return path;
}

static inline void fill_entry(struct store_entry *e, const char *key, const char *rkey,
		       const char *alias, int64_t when)
{
	memset(e, 0, sizeof(*e));
	snprintf(e->key, sizeof(e->key), "%.64s", key);
	snprintf(e->rkey, sizeof(e->rkey), "%.64s", rkey);
	e->alias = (char *)alias;
	e->label = (char *)"diffusion_step";
	e->toolchain = (char *)"c++";
	e->output = (char *)"shared";
	e->created = when;
	e->last_used = when;
	e->build_ms = 812;
	e->args_json = (char *)"[\"-O2\",\"-I/opt/dace/include\"]";
	e->sources_json = (char *)"[\"prog.cpp\"]";
}

static inline int put(struct store *s, const char *key, const char *rkey, const char *alias,
	       const char *content, int64_t when)
{
	struct store_entry e;
	char *path = write_tmp(s, content);
	int rc;

	fill_entry(&e, key, rkey, alias, when);
	rc = store_publish(s, &e, AT_FDCWD, path);
	free(path);
	return rc;
}

static inline bool exists(const char *path)
{
	struct stat sb;

	return lstat(path, &sb) == 0;
}

static inline void sql(const char *stmt)
{
	char path[PATH_MAX + 16];
	sqlite3 *db = NULL;

	snprintf(path, sizeof(path), "%s/index.db", dir);
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	ck_assert_msg(sqlite3_exec(db, stmt, NULL, NULL, NULL) == SQLITE_OK,
		      "%s: %s", stmt, sqlite3_errmsg(db));
	sqlite3_close(db);
}

static inline size_t count_dir(const char *path)
{
	struct dirent *de;
	DIR *d = opendir(path);
	size_t n = 0;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return n;
}

static inline void make_deps(struct store_dep *deps, char **paths, size_t n)
{
	size_t i, j, len;

	for (i = 0; i < n; i++) {
		/* kind FILE, and no identity: the fields not set below. */
		memset(&deps[i], 0, sizeof(deps[i]));
		len = 20 + i * 700;  /* up to several KiB of path */
		paths[i] = malloc(len + 1);
		ck_assert_ptr_nonnull(paths[i]);
		paths[i][0] = '/';
		for (j = 1; j < len; j++)
			paths[i][j] = j % 50 == 0 ? '/' : (char)('a' + (i + j) % 26);
		paths[i][len] = '\0';
		deps[i].path = paths[i];
		deps[i].size = 1000 * i + 7;
		deps[i].mtime_ns = i % 2 ? -1 - (int64_t)i : 1763726400123456789LL + (int64_t)i;
		for (j = 0; j < 32; j++)
			deps[i].digest[j] = (uint8_t)(i * 31 + j);
	}
}

static inline void check_deps(const struct store_entry *e, const struct store_dep *deps, size_t n)
{
	size_t i;

	ck_assert_uint_eq(e->ndeps, n);
	for (i = 0; i < n; i++) {
		ck_assert_str_eq(e->deps[i].path, deps[i].path);
		ck_assert_uint_eq(e->deps[i].size, deps[i].size);
		ck_assert_int_eq(e->deps[i].mtime_ns, deps[i].mtime_ns);
		ck_assert_mem_eq(e->deps[i].digest, deps[i].digest, 32);
	}
}

/* The footprint with the WAL written back (store_evict does it first). */
static inline uint64_t settled_total(struct store *s)
{
	struct store_footprint f;
	uint64_t removed, freed;

	ck_assert_int_eq(store_evict(s, UINT64_MAX, &removed, &freed), 0);
	ck_assert_uint_eq(removed, 0);
	ck_assert_int_eq(store_footprint(s, &f), 0);
	return f.total;
}

/* The fixtures of a suite whose tests each get a cache directory. */
static inline TCase *store_tcase(const char *name)
{
	TCase *tc = tcase_create(name);
	tcase_add_unchecked_fixture(tc, base_setup, base_teardown);
	tcase_add_checked_fixture(tc, test_setup, NULL);
	return tc;
}

#endif
