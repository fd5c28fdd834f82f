/*
 * Unit tests of the cache store (store/store*.c): the index, crash-safe
 * publishing, aliases and prefixes, eviction, start-up reconcile and the
 * read-only mode, each in its own temporary cache directory.
 */
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

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	chmod(path, 0700);
	return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

static void rm_rf(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void base_setup(void)
{
	snprintf(base, sizeof(base), "%s/kiln-test-store-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(base));
}

static void base_teardown(void)
{
	rm_rf(base);
}

static void test_setup(void)
{
	snprintf(dir, sizeof(dir), "%s/t-XXXXXX", base);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	/* A subdirectory that does not exist yet: store_open creates it. */
	strcat(dir, "/cache");
}

static struct store *open_store(int flags)
{
	struct store *s = NULL;
	char err[256] = "";
	int rc = store_open(dir, flags, &s, err, sizeof(err));

	ck_assert_msg(rc == 0, "store_open: %d %s", rc, err);
	ck_assert_ptr_nonnull(s);
	return s;
}

static void hexkey(const char *seed, char out[65])
{
	uint8_t d[32];

	util_sha256(seed, strlen(seed), d);
	util_hex(d, 32, out);
}

/* A 64-hex key starting with prefix, the rest filled with fill. */
static void prefixed_key(const char *prefix, char fill, char out[65])
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

static void fill_entry(struct store_entry *e, const char *key, const char *rkey,
		       const char *alias, int64_t when)
{
	memset(e, 0, sizeof(*e));
	snprintf(e->key, sizeof(e->key), "%s", key);
	snprintf(e->rkey, sizeof(e->rkey), "%s", rkey);
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

static int put(struct store *s, const char *key, const char *rkey, const char *alias,
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

static bool exists(const char *path)
{
	struct stat sb;

	return lstat(path, &sb) == 0;
}

static void sql(const char *stmt)
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

static size_t count_dir(const char *path)
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

START_TEST(test_open_reopen)
{
	char key[65], rkey[65], path[PATH_MAX + 32];
	struct store_entry e;
	struct stat sb;
	uint64_t n, bytes;
	struct store *s = open_store(0);

	snprintf(path, sizeof(path), "%s/objects", dir);
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 0777, 0700);
	snprintf(path, sizeof(path), "%s/index.db", dir);
	ck_assert(exists(path));
	ck_assert_str_eq(store_dir(s), dir);
	hexkey("k1", key);
	hexkey("r1", rkey);
	ck_assert_int_eq(put(s, key, rkey, "gt4py:1", "0123456789", 100), 0);
	store_close(s);

	s = open_store(0);
	ck_assert_int_eq(store_totals(s, &n, &bytes), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(bytes, 10);
	ck_assert_int_eq(store_get(s, key, &e), 0);
	ck_assert_str_eq(e.rkey, rkey);
	ck_assert_str_eq(e.alias, "gt4py:1");
	store_entry_free(&e);
	store_close(s);
}
END_TEST

START_TEST(test_publish_get)
{
	char k1[65], k2[65], k3[65], rkey[65];
	struct store_entry e, *list = NULL;
	size_t n = 0;
	struct store *s = open_store(0);

	hexkey("k1", k1);
	hexkey("k2", k2);
	hexkey("k3", k3);
	hexkey("r", rkey);
	ck_assert_int_eq(put(s, k1, rkey, "a1", "one", 100), 0);
	ck_assert_int_eq(put(s, k2, rkey, NULL, "two!", 300), 0);
	ck_assert_int_eq(put(s, k3, k3, NULL, "three", 200), 0);

	ck_assert_int_eq(store_get(s, k1, &e), 0);
	ck_assert_str_eq(e.key, k1);
	ck_assert_str_eq(e.label, "diffusion_step");
	ck_assert_str_eq(e.toolchain, "c++");
	ck_assert_str_eq(e.output, "shared");
	ck_assert_str_eq(e.alias, "a1");
	ck_assert_str_eq(e.args_json, "[\"-O2\",\"-I/opt/dace/include\"]");
	ck_assert_str_eq(e.sources_json, "[\"prog.cpp\"]");
	ck_assert_uint_eq(e.size, 3);
	ck_assert_int_eq(e.created, 100);
	ck_assert_uint_eq(e.build_ms, 812);
	ck_assert(!e.pinned);
	store_entry_free(&e);
	ck_assert_ptr_null(e.alias);

	/* Most recently used first. */
	ck_assert_int_eq(store_get_by_rkey(s, rkey, &list, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(list[0].key, k2);
	ck_assert_str_eq(list[1].key, k1);
	store_entries_free(list, n);
	ck_assert_int_eq(store_get_by_rkey(s, k1, &list, &n), -ENOENT);
	ck_assert_uint_eq(n, 0);

	ck_assert_int_eq(store_get_by_alias(s, "a1", &e), 0);
	ck_assert_str_eq(e.key, k1);
	store_entry_free(&e);
	ck_assert_int_eq(store_get_by_alias(s, "nope", &e), -ENOENT);
	ck_assert_int_eq(store_get(s, rkey, &e), -ENOENT);

	ck_assert_int_eq(store_list(s, &list, &n), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_str_eq(list[0].key, k2);
	ck_assert_str_eq(list[1].key, k3);
	ck_assert_str_eq(list[2].key, k1);
	store_entries_free(list, n);
	store_close(s);
}
END_TEST

START_TEST(test_resolve)
{
	char ka[65], kb[65], kc[65], upper[8];
	struct store_entry e;
	struct store *s = open_store(0);

	prefixed_key("abcd1", '0', ka);
	prefixed_key("abcd2", '0', kb);
	prefixed_key("abce", '7', kc);
	ck_assert_int_eq(put(s, ka, ka, "my-alias", "a", 1), 0);
	ck_assert_int_eq(put(s, kb, kb, NULL, "b", 2), 0);
	ck_assert_int_eq(put(s, kc, kc, NULL, "c", 3), 0);

	ck_assert_int_eq(store_resolve(s, kb, &e), 0);
	ck_assert_str_eq(e.key, kb);
	store_entry_free(&e);
	ck_assert_int_eq(store_resolve(s, "abce", &e), 0);
	ck_assert_str_eq(e.key, kc);
	store_entry_free(&e);
	snprintf(upper, sizeof(upper), "ABCD2");
	ck_assert_int_eq(store_resolve(s, upper, &e), 0);
	ck_assert_str_eq(e.key, kb);
	store_entry_free(&e);
	ck_assert_int_eq(store_resolve(s, "abcd", &e), -ENOTUNIQ);
	/* What an ambiguous prefix matches, in order, any case, up to max. */
	char keys[4][65];
	size_t n = 9;
	ck_assert_int_eq(store_keys_with_prefix(s, "ABCD", keys, 4, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(keys[0], ka);
	ck_assert_str_eq(keys[1], kb);
	ck_assert_int_eq(store_keys_with_prefix(s, "abc", keys, 1, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(keys[0], ka);
	ck_assert_int_eq(store_keys_with_prefix(s, "ffff", keys, 4, &n), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(store_resolve(s, "my-alias", &e), 0);
	ck_assert_str_eq(e.key, ka);
	store_entry_free(&e);
	ck_assert_int_eq(store_resolve(s, "ffff", &e), -ENOENT);
	/* Fewer than 4 hex digits is not a prefix. */
	ck_assert_int_eq(store_resolve(s, "abc", &e), -ENOENT);
	ck_assert_int_eq(store_resolve(s, "", &e), -ENOENT);

	/* An exact alias beats an ambiguous prefix of the same text. */
	ck_assert_int_eq(store_set_alias(s, "abcd", kc), 0);
	ck_assert_int_eq(store_resolve(s, "abcd", &e), 0);
	ck_assert_str_eq(e.key, kc);
	store_entry_free(&e);
	store_close(s);
}
END_TEST

START_TEST(test_publish_files)
{
	char key[65], *obj, *meta, *tmp, *text = NULL, *path;
	struct stat sb;
	cJSON *m;
	struct store *s = open_store(0);
	struct store_entry e;

	hexkey("files", key);
	fill_entry(&e, key, key, "al", 50);
	path = write_tmp(s, "ELF...");
	ck_assert_int_eq(store_publish(s, &e, AT_FDCWD, path), 0);
	ck_assert(!exists(path));
	free(path);

	obj = store_object_path(s, key, "shared");
	ck_assert_ptr_nonnull(obj);
	path = NULL;
	ck_assert_int_ge(asprintf(&path, "%s/objects/%.2s/%s.so", dir, key, key), 0);
	ck_assert_str_eq(obj, path);
	free(path);
	ck_assert_int_eq(stat(obj, &sb), 0);
	ck_assert(S_ISREG(sb.st_mode));
	ck_assert_int_eq(sb.st_mode & 0777, 0444);
	ck_assert_int_eq(sb.st_size, 6);

	ck_assert_int_ge(asprintf(&meta, "%s/objects/%.2s/%s.meta", dir, key, key), 0);
	ck_assert_int_eq(stat(meta, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 0777, 0444);
	ck_assert_int_eq(util_read_file(meta, 1 << 20, &text, NULL), 0);
	m = cJSON_Parse(text);
	ck_assert_ptr_nonnull(m);
	ck_assert_str_eq(cJSON_GetObjectItem(m, "key")->valuestring, key);
	ck_assert_str_eq(cJSON_GetObjectItem(m, "alias")->valuestring, "al");
	ck_assert_int_eq(cJSON_GetObjectItem(m, "size")->valueint, 6);
	cJSON_Delete(m);
	free(text);

	/* Nothing is left in tmp/: no stray meta temporaries. */
	tmp = store_tmp_dir(s);
	ck_assert_uint_eq(count_dir(tmp), 0);
	free(tmp);
	ck_assert_ptr_null(store_object_path(s, key, "bogus"));
	ck_assert_str_eq(store_output_ext("shared"), "so");
	ck_assert_ptr_null(store_output_ext("exe"));
	free(meta);
	free(obj);
	store_close(s);
}
END_TEST

START_TEST(test_publish_existing)
{
	char key[65], *obj, *text = NULL, *path;
	struct store_entry e;
	struct store *s = open_store(0);

	hexkey("same", key);
	ck_assert_int_eq(put(s, key, key, NULL, "first", 10), 0);
	fill_entry(&e, key, key, "later", 20);
	path = write_tmp(s, "second!");
	ck_assert_int_eq(store_publish(s, &e, AT_FDCWD, path), 0);
	ck_assert(!exists(path));
	free(path);

	obj = store_object_path(s, key, "shared");
	ck_assert_int_eq(util_read_file(obj, 1024, &text, NULL), 0);
	ck_assert_str_eq(text, "first");
	free(text);
	free(obj);
	/* The row describes the file that is kept. */
	ck_assert_int_eq(store_get(s, key, &e), 0);
	ck_assert_uint_eq(e.size, 5);
	ck_assert_str_eq(e.alias, "later");
	store_entry_free(&e);
	store_close(s);
}
END_TEST

START_TEST(test_publish_invalid)
{
	char key[65], *path;
	struct store_entry e;
	uint64_t n, bytes;
	struct store *s = open_store(0);

	hexkey("bad", key);
	fill_entry(&e, key, key, NULL, 1);
	e.output = (char *)"exe";
	path = write_tmp(s, "x");
	ck_assert_int_eq(store_publish(s, &e, AT_FDCWD, path), -EINVAL);
	/* A failed publish removes its temporary object. */
	ck_assert(!exists(path));
	free(path);
	fill_entry(&e, "ABC", key, NULL, 1);
	path = write_tmp(s, "x");
	ck_assert_int_eq(store_publish(s, &e, AT_FDCWD, path), -EINVAL);
	free(path);
	fill_entry(&e, key, key, NULL, 1);
	e.args_json = (char *)"not json";
	path = write_tmp(s, "x");
	ck_assert_int_eq(store_publish(s, &e, AT_FDCWD, path), -EINVAL);
	free(path);
	fill_entry(&e, key, key, NULL, 1);
	ck_assert_int_eq(store_publish(s, &e, AT_FDCWD, "/nonexistent/kiln/object"), -ENOENT);
	ck_assert_int_eq(store_totals(s, &n, &bytes), 0);
	ck_assert_uint_eq(n, 0);
	store_close(s);
}
END_TEST

START_TEST(test_touch)
{
	char k1[65], k2[65], unknown[65];
	const char *keys[3];
	int64_t times[3] = { 500, 50, 900 };
	uint64_t counts[3] = { 3, 2, 1 };
	struct store_entry e;
	struct store *s = open_store(0);

	hexkey("t1", k1);
	hexkey("t2", k2);
	hexkey("t3", unknown);
	ck_assert_int_eq(put(s, k1, k1, NULL, "1", 100), 0);
	ck_assert_int_eq(put(s, k2, k2, NULL, "2", 100), 0);
	keys[0] = k1;
	keys[1] = k2;
	keys[2] = unknown;
	ck_assert_int_eq(store_touch(s, keys, times, counts, 3), 0);
	ck_assert_int_eq(store_touch(s, keys, times, counts, 0), 0);
	ck_assert_int_eq(store_get(s, k1, &e), 0);
	ck_assert_uint_eq(e.uses, 3);
	ck_assert_int_eq(e.last_used, 500);
	store_entry_free(&e);
	/* An older time never lowers last_used. */
	ck_assert_int_eq(store_get(s, k2, &e), 0);
	ck_assert_uint_eq(e.uses, 2);
	ck_assert_int_eq(e.last_used, 100);
	store_entry_free(&e);
	ck_assert_int_eq(store_touch(s, keys, times, counts, 1), 0);
	ck_assert_int_eq(store_get(s, k1, &e), 0);
	ck_assert_uint_eq(e.uses, 6);
	store_entry_free(&e);
	store_close(s);
}
END_TEST

START_TEST(test_remove)
{
	char key[65], other[65], *obj, *meta, *log;
	struct store_entry e;
	int fd;
	struct store *s = open_store(0);

	hexkey("rm", key);
	hexkey("keep", other);
	ck_assert_int_eq(put(s, key, key, "rm-alias", "bytes", 1), 0);
	ck_assert_int_eq(put(s, other, other, NULL, "bytes", 1), 0);
	obj = store_object_path(s, key, "shared");
	log = store_log_path(s, key);
	ck_assert_int_ge(asprintf(&meta, "%s/objects/%.2s/%s.meta", dir, key, key), 0);
	fd = open(log, O_WRONLY | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert(exists(obj) && exists(meta) && exists(log));

	ck_assert_int_eq(store_remove(s, key), 0);
	ck_assert(!exists(obj));
	ck_assert(!exists(meta));
	ck_assert(!exists(log));
	ck_assert_int_eq(store_get(s, key, &e), -ENOENT);
	ck_assert_int_eq(store_get_by_alias(s, "rm-alias", &e), -ENOENT);
	ck_assert_int_eq(store_remove(s, key), -ENOENT);
	ck_assert_int_eq(store_get(s, other, &e), 0);
	store_entry_free(&e);
	free(obj);
	free(meta);
	free(log);
	store_close(s);
}
END_TEST

/* The footprint with the WAL written back (store_evict does it first). */
static uint64_t settled_total(struct store *s)
{
	struct store_footprint f;
	uint64_t removed, freed;

	ck_assert_int_eq(store_evict(s, UINT64_MAX, &removed, &freed), 0);
	ck_assert_uint_eq(removed, 0);
	ck_assert_int_eq(store_footprint(s, &f), 0);
	return f.total;
}

START_TEST(test_pin_evict)
{
	char k[4][65], *obj;
	const char *content = "0123456789";  /* every object is 10 bytes */
	uint64_t removed = 0, freed = 0, n, bytes;
	struct store_entry e;
	int i;
	struct store *s = open_store(0);

	for (i = 0; i < 4; i++) {
		char seed[16];

		snprintf(seed, sizeof(seed), "ev%d", i);
		hexkey(seed, k[i]);
		ck_assert_int_eq(put(s, k[i], k[i], NULL, content, 10 * (i + 1)), 0);
	}
	ck_assert_int_eq(store_set_pinned(s, k[0], true), 0);
	ck_assert_int_eq(store_set_pinned(s, "0000", true), -ENOENT);
	ck_assert_int_eq(store_get(s, k[1], &e), 0);
	uint64_t disk = e.disk;   /* what one entry takes: object and meta */
	store_entry_free(&e);
	ck_assert_uint_ge(disk, 20);
	ck_assert_int_eq(store_get(s, k[0], &e), 0);
	ck_assert(e.pinned);
	ck_assert_uint_eq(e.disk, disk);
	store_entry_free(&e);

	/* Nothing to do when the cache already fits. */
	uint64_t total = settled_total(s);
	ck_assert_int_eq(store_evict(s, total, &removed, &freed), 0);
	ck_assert_uint_eq(removed, 0);
	/* One byte over: k[0] is the oldest but pinned, so k[1] goes, and
	 * what it freed is what it took on disk. */
	ck_assert_int_eq(store_evict(s, total - 1, &removed, &freed), 0);
	ck_assert_uint_eq(removed, 1);
	ck_assert_uint_eq(freed, disk);
	ck_assert_int_eq(store_get(s, k[1], &e), -ENOENT);
	obj = store_object_path(s, k[1], "shared");
	ck_assert(!exists(obj));
	free(obj);
	ck_assert_int_eq(store_totals(s, &n, &bytes), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_uint_eq(bytes, 30);

	/* Pins hold even when the target cannot be reached. */
	ck_assert_int_eq(store_evict(s, 0, &removed, &freed), 0);
	ck_assert_uint_eq(removed, 2);
	ck_assert_uint_eq(freed, 2 * disk);
	ck_assert_int_eq(store_get(s, k[0], &e), 0);
	store_entry_free(&e);
	ck_assert_int_eq(store_get(s, k[3], &e), -ENOENT);
	ck_assert_int_eq(store_set_pinned(s, k[0], false), 0);
	ck_assert_int_eq(store_evict(s, 0, &removed, &freed), 0);
	ck_assert_uint_eq(removed, 1);
	ck_assert_int_eq(store_totals(s, &n, &bytes), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_uint_eq(bytes, 0);
	store_close(s);
}
END_TEST

/* What du counts in the cache directory, tmp/'s content aside. */
static uint64_t du_total;
static char du_tmp[PATH_MAX + 8];

static int du_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)flag;
	(void)ftw;
	size_t n = strlen(du_tmp);
	if (strncmp(path, du_tmp, n) == 0 && path[n] == '/')
		return 0;
	du_total += (uint64_t)sb->st_blocks * 512;
	return 0;
}

static uint64_t du(void)
{
	du_total = 0;
	snprintf(du_tmp, sizeof(du_tmp), "%s/tmp", dir);
	ck_assert_int_eq(nftw(dir, du_one, 16, FTW_PHYS), 0);
	return du_total;
}

/* The footprint is what the directory takes on disk: objects, metas, logs,
 * the index with its WAL, failed builds' logs, the directories. */
START_TEST(test_footprint)
{
	struct store_footprint f;
	char k[3][65], log[80];
	struct store *s = open_store(0);

	for (int i = 0; i < 3; i++) {
		char seed[16];
		snprintf(seed, sizeof(seed), "fp%d", i);
		hexkey(seed, k[i]);
		/* The log is in place before the publish, as kilnd writes it. */
		snprintf(log, sizeof(log), "%s.log", k[i]);
		ck_assert_int_eq(util_replace_file_at(store_logs_fd(s), log, "warning: x\n", 11,
						      false), 0);
		ck_assert_int_eq(put(s, k[i], k[i], NULL, i == 2 ? "a longer object" : "obj", 5), 0);
	}
	ck_assert_int_eq(util_replace_file_at(store_failed_fd(s), "failed.log", "error\n", 6,
					      false), 0);
	ck_assert_int_eq(store_footprint(s, &f), 0);
	ck_assert_uint_eq(f.entries, 3);
	ck_assert_uint_eq(f.bytes, 3 + 3 + 15);
	ck_assert_uint_gt(f.entries_disk, f.bytes);
	ck_assert_uint_gt(f.index, 0);
	ck_assert_uint_eq(f.total, f.entries_disk + f.index + f.other);
	ck_assert_uint_eq(f.total, du());
	/* Each entry carries its own share: the three add up to the entries'. */
	uint64_t sum = 0;
	for (int i = 0; i < 3; i++) {
		struct store_entry e;
		ck_assert_int_eq(store_get(s, k[i], &e), 0);
		sum += e.disk;
		store_entry_free(&e);
	}
	ck_assert_uint_eq(sum, f.entries_disk);
	ck_assert_int_eq(store_remove(s, k[0]), 0);
	ck_assert_int_eq(store_footprint(s, &f), 0);
	ck_assert_uint_eq(f.total, du());
	store_close(s);
}
END_TEST

static void put_format(struct store *s, const char *seed, int key_format, int64_t when,
		       char key[65])
{
	struct store_entry e;
	char *path = write_tmp(s, seed);

	hexkey(seed, key);
	fill_entry(&e, key, key, NULL, when);
	e.key_format = key_format;
	ck_assert_int_eq(store_publish(s, &e, AT_FDCWD, path), 0);
	free(path);
}

/* Entries by key format: older ones are stale (evicted first, removed by
 * remove_stale with their pins), unknown ones too until a hit proves them
 * current, newer ones are kept. */
START_TEST(test_key_formats)
{
	struct store_formats f;
	struct store_entry e;
	char cur[65], old[65], unk[65], unk2[65], newer[65];
	uint64_t removed, freed, pinned;
	struct store *s = open_store(0);

	store_set_key_format(s, 4);
	put_format(s, "kf-cur", 4, 10, cur);       /* the least recently used */
	put_format(s, "kf-old", 3, 50, old);
	put_format(s, "kf-unk", 0, 40, unk);
	put_format(s, "kf-unk2", 0, 60, unk2);
	put_format(s, "kf-new", 5, 70, newer);
	ck_assert_int_eq(store_set_pinned(s, old, true), 0);
	ck_assert_int_eq(store_get(s, old, &e), 0);
	ck_assert_int_eq(e.key_format, 3);
	store_entry_free(&e);
	ck_assert_int_eq(store_key_formats(s, &f), 0);
	ck_assert_uint_eq(f.current.entries, 1);
	ck_assert_uint_eq(f.older.entries, 1);
	ck_assert_uint_eq(f.older.pinned, 1);
	ck_assert_int_eq(f.older.lowest, 3);
	ck_assert_uint_eq(f.unknown.entries, 2);
	ck_assert_uint_eq(f.newer.entries, 1);
	ck_assert_int_eq(f.newer.highest, 5);
	ck_assert_uint_gt(f.older.disk, 0);

	/* Over by a byte: the unpinned stale one goes before the older-used
	 * current one. */
	uint64_t total = settled_total(s);
	ck_assert_int_eq(store_evict(s, total - 1, &removed, &freed), 0);
	ck_assert_uint_eq(removed, 1);
	ck_assert_int_eq(store_get(s, unk, &e), -ENOENT);
	ck_assert_int_eq(store_get(s, cur, &e), 0);
	store_entry_free(&e);

	/* A hit proves an unknown entry current. */
	const char *keys[] = { unk2 };
	const int64_t times[] = { 80 };
	const uint64_t counts[] = { 1 };
	ck_assert_int_eq(store_touch(s, keys, times, counts, 1), 0);
	ck_assert_int_eq(store_get(s, unk2, &e), 0);
	ck_assert_int_eq(e.key_format, 4);
	store_entry_free(&e);

	ck_assert_int_eq(store_remove_stale(s, &removed, &freed, &pinned), 0);
	ck_assert_uint_eq(removed, 1);
	ck_assert_uint_eq(pinned, 1);
	ck_assert_uint_gt(freed, 0);
	ck_assert_int_eq(store_get(s, old, &e), -ENOENT);
	ck_assert_int_eq(store_key_formats(s, &f), 0);
	ck_assert_uint_eq(f.current.entries, 2);
	ck_assert_uint_eq(f.older.entries + f.unknown.entries, 0);
	ck_assert_uint_eq(f.newer.entries, 1);
	store_close(s);
}
END_TEST

/* The cache records the kilnd versions that wrote it, the latest first. */
START_TEST(test_writers)
{
	char prev[96];
	struct store_writer *w = NULL;
	size_t n = 0;
	struct store *s = open_store(0);

	ck_assert_int_eq(store_record_writer(s, "0.1.0 (aaa)", 3, 100, prev, sizeof(prev)), 0);
	ck_assert_str_eq(prev, "");
	ck_assert_int_eq(store_record_writer(s, "0.2.0 (bbb)", 4, 200, prev, sizeof(prev)), 0);
	ck_assert_str_eq(prev, "0.1.0 (aaa)");
	ck_assert_int_eq(store_record_writer(s, "0.2.0 (bbb)", 4, 300, prev, sizeof(prev)), 0);
	ck_assert_str_eq(prev, "");
	ck_assert_int_eq(store_writers(s, &w, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(w[0].version, "0.2.0 (bbb)");
	ck_assert_int_eq(w[0].first_start, 200);
	ck_assert_int_eq(w[0].last_start, 300);
	ck_assert_int_eq(w[1].key_format, 3);
	free(w);
	store_close(s);
	s = open_store(STORE_READONLY);
	ck_assert_int_eq(store_record_writer(s, "x", 4, 1, prev, sizeof(prev)), -EROFS);
	store_close(s);
}
END_TEST

START_TEST(test_alias)
{
	char k1[65], k2[65];
	struct store_entry e;
	struct store *s = open_store(0);

	hexkey("al1", k1);
	hexkey("al2", k2);
	ck_assert_int_eq(put(s, k1, k1, "gt4py:x", "1", 1), 0);
	ck_assert_int_eq(put(s, k2, k2, NULL, "2", 1), 0);
	ck_assert_int_eq(store_set_alias(s, "gt4py:x", k2), 0);
	ck_assert_int_eq(store_get_by_alias(s, "gt4py:x", &e), 0);
	ck_assert_str_eq(e.key, k2);
	store_entry_free(&e);
	ck_assert_int_eq(store_get(s, k1, &e), 0);
	ck_assert_ptr_null(e.alias);
	store_entry_free(&e);
	/* Of two aliases, the entry shows the one set last. */
	ck_assert_int_eq(store_set_alias(s, "second", k2), 0);
	ck_assert_int_eq(store_get(s, k2, &e), 0);
	ck_assert_str_eq(e.alias, "second");
	store_entry_free(&e);
	ck_assert_int_eq(store_set_alias(s, "gt4py:x", k1), 0);
	ck_assert_int_eq(store_get(s, k1, &e), 0);
	ck_assert_str_eq(e.alias, "gt4py:x");
	store_entry_free(&e);
	ck_assert_int_eq(store_set_alias(s, "dangling", "00ff"), -ENOENT);
	ck_assert_int_eq(store_get_by_alias(s, "dangling", &e), -ENOENT);
	store_close(s);
}
END_TEST

/* An alias's data is bound to the entry it names when written: two aliases
 * of one entry keep their own, a re-point (with or without data) never
 * shows the old data with the new target, a removed entry takes it. */
START_TEST(test_alias_data)
{
	char k1[65], k2[65], *data = NULL;
	struct store *s = open_store(0);

	hexkey("ad1", k1);
	hexkey("ad2", k2);
	ck_assert_int_eq(put(s, k1, k1, NULL, "1", 1), 0);
	ck_assert_int_eq(put(s, k2, k2, NULL, "2", 1), 0);
	ck_assert_int_eq(store_set_alias_data(s, "g:rank0", k1, "AAAA"), 0);
	ck_assert_int_eq(store_set_alias_data(s, "g:rank1", k1, "BBBB"), 0);
	ck_assert_int_eq(store_alias_data(s, "g:rank0", k1, &data), 0);
	ck_assert_str_eq(data, "AAAA");
	free(data);
	ck_assert_int_eq(store_alias_data(s, "g:rank1", k1, &data), 0);
	ck_assert_str_eq(data, "BBBB");
	free(data);
	/* Asked with another target than the alias's: nothing. */
	ck_assert_int_eq(store_alias_data(s, "g:rank0", k2, &data), -ENOENT);
	ck_assert_ptr_null(data);
	/* Re-pointed without data: none, at either target. */
	ck_assert_int_eq(store_set_alias(s, "g:rank0", k2), 0);
	ck_assert_int_eq(store_alias_data(s, "g:rank0", k2, &data), 0);
	ck_assert_ptr_null(data);
	ck_assert_int_eq(store_alias_data(s, "g:rank0", k1, &data), -ENOENT);
	/* Back at k1: the old data does not come back. */
	ck_assert_int_eq(store_set_alias(s, "g:rank0", k1), 0);
	ck_assert_int_eq(store_alias_data(s, "g:rank0", k1, &data), 0);
	ck_assert_ptr_null(data);
	/* To an unknown key: refused, and the data stays with its target. */
	ck_assert_int_eq(store_set_alias_data(s, "g:rank1", "00ff", "CCCC"), -ENOENT);
	ck_assert_int_eq(store_alias_data(s, "g:rank1", k1, &data), 0);
	ck_assert_str_eq(data, "BBBB");
	free(data);
	/* The entry removed: its aliases and their data go. */
	ck_assert_int_eq(store_remove(s, k1), 0);
	ck_assert_int_eq(store_alias_data(s, "g:rank1", k1, &data), -ENOENT);
	ck_assert_int_eq(put(s, k1, k1, NULL, "1", 1), 0);
	ck_assert_int_eq(store_set_alias(s, "g:rank1", k1), 0);
	ck_assert_int_eq(store_alias_data(s, "g:rank1", k1, &data), 0);
	ck_assert_ptr_null(data);
	store_close(s);
}
END_TEST

static void make_deps(struct store_dep *deps, char **paths, size_t n)
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

static void check_deps(const struct store_entry *e, const struct store_dep *deps, size_t n)
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

START_TEST(test_deps_roundtrip)
{
	struct store_dep deps[6];
	char *paths[6], key[65], *tmp;
	struct store_entry e, *list;
	size_t n, i;
	struct store *s = open_store(0);

	make_deps(deps, paths, 6);
	hexkey("deps", key);
	fill_entry(&e, key, key, NULL, 5);
	e.deps = deps;
	e.ndeps = 6;
	tmp = write_tmp(s, "obj");
	ck_assert_int_eq(store_publish(s, &e, AT_FDCWD, tmp), 0);
	free(tmp);
	ck_assert_int_eq(store_get(s, key, &e), 0);
	check_deps(&e, deps, 6);
	store_entry_free(&e);
	ck_assert_int_eq(store_get_by_rkey(s, key, &list, &n), 0);
	check_deps(&list[0], deps, 6);
	store_entries_free(list, n);
	/* The listing leaves deps out. */
	ck_assert_int_eq(store_list(s, &list, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(list[0].ndeps, 0);
	store_entries_free(list, n);

	/* A damaged blob is an error, never a crash. */
	sql("UPDATE entries SET deps = x'01ffffffff00'");
	ck_assert_int_eq(store_get(s, key, &e), -EBADMSG);
	sql("UPDATE entries SET deps = x'0101000000050061626364'");
	ck_assert_int_eq(store_get(s, key, &e), -EBADMSG);
	sql("UPDATE entries SET deps = x'02'");
	ck_assert_int_eq(store_get(s, key, &e), -EBADMSG);
	sql("UPDATE entries SET deps = NULL");
	ck_assert_int_eq(store_get(s, key, &e), 0);
	ck_assert_uint_eq(e.ndeps, 0);
	store_entry_free(&e);
	for (i = 0; i < 6; i++)
		free(paths[i]);
	store_close(s);
}
END_TEST

START_TEST(test_entry_json)
{
	struct store_dep deps[2];
	char *paths[2], key[65], *tmp, *obj, *log;
	struct store_entry e;
	cJSON *j, *v;
	struct store *s = open_store(0);

	make_deps(deps, paths, 2);
	hexkey("json", key);
	fill_entry(&e, key, key, NULL, 77);
	e.label = NULL;
	e.deps = deps;
	e.ndeps = 2;
	tmp = write_tmp(s, "12345");
	ck_assert_int_eq(store_publish(s, &e, AT_FDCWD, tmp), 0);
	free(tmp);
	ck_assert_int_eq(store_get(s, key, &e), 0);

	j = store_entry_json(s, &e, false);
	ck_assert_ptr_nonnull(j);
	obj = store_object_path(s, key, "shared");
	ck_assert_str_eq(cJSON_GetObjectItem(j, "key")->valuestring, key);
	ck_assert_str_eq(cJSON_GetObjectItem(j, "path")->valuestring, obj);
	ck_assert(cJSON_IsNull(cJSON_GetObjectItem(j, "label")));
	ck_assert(cJSON_IsNull(cJSON_GetObjectItem(j, "alias")));
	ck_assert_str_eq(cJSON_GetObjectItem(j, "output")->valuestring, "shared");
	ck_assert_int_eq(cJSON_GetObjectItem(j, "size")->valueint, 5);
	ck_assert_int_eq(cJSON_GetObjectItem(j, "created")->valueint, 77);
	ck_assert_int_eq(cJSON_GetObjectItem(j, "build_ms")->valueint, 812);
	ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(j, "pinned")));
	ck_assert_ptr_null(cJSON_GetObjectItem(j, "deps"));
	cJSON_Delete(j);

	j = store_entry_json(s, &e, true);
	ck_assert_ptr_nonnull(j);
	v = cJSON_GetObjectItem(j, "args");
	ck_assert_int_eq(cJSON_GetArraySize(v), 2);
	ck_assert_str_eq(cJSON_GetArrayItem(v, 1)->valuestring, "-I/opt/dace/include");
	v = cJSON_GetObjectItem(j, "sources");
	ck_assert_str_eq(cJSON_GetArrayItem(v, 0)->valuestring, "prog.cpp");
	v = cJSON_GetObjectItem(j, "deps");
	ck_assert_int_eq(cJSON_GetArraySize(v), 2);
	ck_assert_str_eq(cJSON_GetArrayItem(v, 1)->valuestring, paths[1]);
	log = store_log_path(s, key);
	ck_assert_str_eq(cJSON_GetObjectItem(j, "log")->valuestring, log);
	cJSON_Delete(j);
	free(log);
	free(obj);
	free(paths[0]);
	free(paths[1]);
	store_entry_free(&e);
	store_close(s);
}
END_TEST

static void make_tmp_leftovers(void)
{
	char path[PATH_MAX + 64];
	int fd;

	snprintf(path, sizeof(path), "%s/tmp/build-1/sub/deeper", dir);
	ck_assert_int_eq(util_mkdir_p(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/tmp/build-1/sub/deeper/a.o", dir);
	fd = open(path, O_WRONLY | O_CREAT, 0444);
	ck_assert_int_ge(fd, 0);
	close(fd);
	/* A directory the build left without write permission. */
	snprintf(path, sizeof(path), "%s/tmp/build-1/sub", dir);
	ck_assert_int_eq(chmod(path, 0500), 0);
	snprintf(path, sizeof(path), "%s/tmp/stray.meta.Ab12Cd", dir);
	fd = open(path, O_WRONLY | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
}

static void write_file(const char *path, const char *content)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(util_write_all(fd, content, strlen(content)), 0);
	close(fd);
}

START_TEST(test_reconcile)
{
	char k[5][65], q[256], path[PATH_MAX + 160], *obj, *tmp;
	struct store_dep deps[3];
	char *paths[3];
	struct store_reconcile_stats st;
	struct store_entry e;
	int i;
	struct store *s = open_store(0);

	make_deps(deps, paths, 3);
	for (i = 0; i < 5; i++) {
		char seed[16], *t;

		snprintf(seed, sizeof(seed), "rc%d", i);
		hexkey(seed, k[i]);
		fill_entry(&e, k[i], k[i], i == 2 ? "adopt-me" : NULL, 100 + i);
		e.deps = deps;
		e.ndeps = 3;
		t = write_tmp(s, "object-bytes");
		ck_assert_int_eq(store_publish(s, &e, AT_FDCWD, t), 0);
		free(t);
	}
	make_tmp_leftovers();
	/* k1: the row's object is gone. */
	obj = store_object_path(s, k[1], "shared");
	ck_assert_int_eq(unlink(obj), 0);
	free(obj);
	/* k2: a complete object whose row was lost (crash before indexing). */
	snprintf(q, sizeof(q), "DELETE FROM entries WHERE key = '%s';"
		 "DELETE FROM aliases WHERE key = '%s'", k[2], k[2]);
	sql(q);
	/* k3: an object without meta nor row. */
	snprintf(q, sizeof(q), "DELETE FROM entries WHERE key = '%s'", k[3]);
	sql(q);
	snprintf(path, sizeof(path), "%s/objects/%.2s/%s.meta", dir, k[3], k[3]);
	ck_assert_int_eq(unlink(path), 0);
	/* k4: the object changed size under its row. */
	obj = store_object_path(s, k[4], "shared");
	ck_assert_int_eq(chmod(obj, 0600), 0);
	write_file(obj, "longer object bytes");
	free(obj);
	/* Stray files: junk in a key directory, a meta without object, and
	 * something that is not a key directory at all. */
	snprintf(path, sizeof(path), "%s/objects/%.2s/junk", dir, k[0]);
	write_file(path, "x");
	snprintf(path, sizeof(path), "%s/objects/ee", dir);
	ck_assert_int_eq(util_mkdir_p(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/objects/ee/ee%062d.meta", dir, 0);
	write_file(path, "{}");
	snprintf(path, sizeof(path), "%s/objects/notakeydir", dir);
	write_file(path, "x");

	ck_assert_int_eq(store_reconcile(s, &st), 0);
	ck_assert_uint_eq(st.tmp_removed, 2);
	ck_assert_uint_eq(st.rows_dropped, 2);     /* k1, k4 */
	ck_assert_uint_eq(st.objects_adopted, 1);  /* k2 */
	/* k1's meta, k3, k4 (its meta gives another size), junk, the stray
	 * meta and notakeydir. */
	ck_assert_uint_eq(st.objects_removed, 6);

	tmp = store_tmp_dir(s);
	ck_assert_uint_eq(count_dir(tmp), 0);
	free(tmp);
	ck_assert_int_eq(store_get(s, k[0], &e), 0);
	store_entry_free(&e);
	ck_assert_int_eq(store_get(s, k[1], &e), -ENOENT);
	ck_assert_int_eq(store_get(s, k[3], &e), -ENOENT);
	ck_assert_int_eq(store_get(s, k[4], &e), -ENOENT);
	obj = store_object_path(s, k[3], "shared");
	ck_assert(!exists(obj));
	free(obj);
	obj = store_object_path(s, k[4], "shared");
	ck_assert(!exists(obj));
	free(obj);
	ck_assert(!exists(path));

	/* The adopted entry comes back whole, alias included. */
	ck_assert_int_eq(store_get_by_alias(s, "adopt-me", &e), 0);
	ck_assert_str_eq(e.key, k[2]);
	ck_assert_int_eq(e.created, 102);
	ck_assert_uint_eq(e.size, 12);
	ck_assert_str_eq(e.args_json, "[\"-O2\",\"-I/opt/dace/include\"]");
	ck_assert_str_eq(e.label, "diffusion_step");
	check_deps(&e, deps, 3);
	store_entry_free(&e);

	/* A second pass finds nothing to do. */
	ck_assert_int_eq(store_reconcile(s, &st), 0);
	ck_assert_uint_eq(st.tmp_removed + st.rows_dropped + st.objects_adopted +
			  st.objects_removed, 0);
	for (i = 0; i < 3; i++)
		free(paths[i]);
	store_close(s);
}
END_TEST

START_TEST(test_readonly)
{
	char key[65], err[256] = "", *tmp;
	struct store_entry e, *list;
	struct store_reconcile_stats st;
	uint64_t a, b;
	size_t n;
	const char *keys[1];
	int64_t t = 1;
	uint64_t c = 1;
	struct store *s = NULL;

	/* A missing cache is not created by a read-only open. */
	ck_assert_int_eq(store_open(dir, STORE_READONLY, &s, err, sizeof(err)), -ENOENT);
	ck_assert_ptr_null(s);
	ck_assert(err[0] != '\0');
	ck_assert(!exists(dir));

	s = open_store(0);
	hexkey("ro", key);
	ck_assert_int_eq(put(s, key, key, "ro-alias", "data", 3), 0);
	store_close(s);

	s = open_store(STORE_READONLY);
	ck_assert_int_eq(store_get(s, key, &e), 0);
	store_entry_free(&e);
	ck_assert_int_eq(store_resolve(s, "ro-alias", &e), 0);
	store_entry_free(&e);
	ck_assert_int_eq(store_list(s, &list, &n), 0);
	ck_assert_uint_eq(n, 1);
	store_entries_free(list, n);
	ck_assert_int_eq(store_totals(s, &a, &b), 0);
	ck_assert_uint_eq(b, 4);

	tmp = write_tmp(s, "zz");
	fill_entry(&e, key, key, NULL, 9);
	ck_assert_int_eq(store_publish(s, &e, AT_FDCWD, tmp), -EROFS);
	ck_assert(exists(tmp));
	free(tmp);
	keys[0] = key;
	ck_assert_int_eq(store_touch(s, keys, &t, &c, 1), -EROFS);
	ck_assert_int_eq(store_set_alias(s, "x", key), -EROFS);
	ck_assert_int_eq(store_set_pinned(s, key, true), -EROFS);
	ck_assert_int_eq(store_remove(s, key), -EROFS);
	ck_assert_int_eq(store_evict(s, 0, &a, &b), -EROFS);
	ck_assert_int_eq(store_reconcile(s, &st), -EROFS);
	ck_assert_int_eq(store_get(s, key, &e), 0);
	ck_assert_uint_eq(e.uses, 0);
	store_entry_free(&e);
	store_close(s);
}
END_TEST

START_TEST(test_schema_newer)
{
	char err[256] = "";
	struct store *s = open_store(0);

	store_close(s);
	s = NULL;
	sql("PRAGMA user_version = 99");
	ck_assert_int_eq(store_open(dir, 0, &s, err, sizeof(err)), -EPROTONOSUPPORT);
	ck_assert_ptr_null(s);
	ck_assert_ptr_nonnull(strstr(err, "newer"));
	ck_assert_int_eq(store_open(dir, STORE_READONLY, &s, err, sizeof(err)),
			 -EPROTONOSUPPORT);
}
END_TEST

/* The totals follow every write, and a version 1 index gets them on open. */
START_TEST(test_totals_kept)
{
	char a[65], b[65], err[256] = "";
	uint64_t n, bytes;
	struct store_entry e;
	struct store *s = open_store(0);

	hexkey("tot-a", a);
	hexkey("tot-b", b);
	ck_assert_int_eq(put(s, a, a, NULL, "12345", 1), 0);
	ck_assert_int_eq(put(s, b, b, NULL, "123", 1), 0);
	ck_assert_int_eq(store_totals(s, &n, &bytes), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(bytes, 8);
	/* Publishing a key again replaces its row: counted once. */
	fill_entry(&e, a, a, NULL, 3);
	char *path = write_tmp(s, "12345");
	ck_assert_int_eq(store_publish(s, &e, AT_FDCWD, path), 0);
	free(path);
	ck_assert_int_eq(store_totals(s, &n, &bytes), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(bytes, 8);
	ck_assert_int_eq(store_remove(s, b), 0);
	ck_assert_int_eq(store_totals(s, &n, &bytes), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(bytes, 5);
	store_close(s);

	/* Back to version 1 (no totals table, no sha256 column), as an older
	 * kiln left it. */
	sql("DROP TRIGGER totals_insert; DROP TRIGGER totals_delete; DROP TRIGGER totals_size;"
	    " DROP TABLE totals; DROP TABLE writers; DROP INDEX entries_format;"
	    " DROP INDEX entries_label;"
	    " ALTER TABLE entries DROP COLUMN sha256;"
	    " ALTER TABLE entries DROP COLUMN disk; ALTER TABLE entries DROP COLUMN key_format;"
	    " PRAGMA user_version = 1");
	s = NULL;
	ck_assert_int_eq(store_open(dir, STORE_READONLY, &s, err, sizeof(err)), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "upgrade"));
	ck_assert_int_eq(store_open(dir, 0, &s, err, sizeof(err)), 0);
	ck_assert_int_eq(store_totals(s, &n, &bytes), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(bytes, 5);
	/* Version 4: rows from before get an estimate of their disk (the
	 * object in 4 KiB blocks, a block each for meta and log) and no key
	 * format; the totals sum it. */
	ck_assert_int_eq(store_get(s, a, &e), 0);
	ck_assert_uint_eq(e.disk, 4096 + 8192);
	ck_assert_int_eq(e.key_format, 0);
	store_entry_free(&e);
	struct store_footprint f;
	ck_assert_int_eq(store_footprint(s, &f), 0);
	ck_assert_uint_eq(f.entries_disk, 4096 + 8192);
	store_close(s);
}
END_TEST

/* A clean stop lets the next start skip the full check, once; a lost index
 * or a crash (no mark) never does. */
START_TEST(test_clean_mark)
{
	char *idx = NULL;
	struct store *s = open_store(0);

	ck_assert(!store_take_clean_mark(s));   /* a fresh index */
	ck_assert_int_eq(store_mark_clean(s), 0);
	store_close(s);
	s = open_store(0);
	ck_assert(store_take_clean_mark(s));
	ck_assert(!store_take_clean_mark(s));   /* taken: a crash now means a full check */
	ck_assert_int_eq(store_mark_clean(s), 0);
	store_close(s);
	ck_assert_int_ge(asprintf(&idx, "%s/index.db", dir), 0);
	ck_assert_int_eq(unlink(idx), 0);
	free(idx);
	s = open_store(0);
	ck_assert(!store_take_clean_mark(s));   /* the index was lost */
	store_close(s);
}
END_TEST

#define THREADS 8
#define PER_THREAD 16

struct worker {
	struct store *s;
	int id;
	int failures;
};

static void *publish_worker(void *arg)
{
	struct worker *w = arg;
	char key[65], seed[32];
	const char *keys[1];
	int64_t t = 1000;
	uint64_t c = 1;
	int i;

	for (i = 0; i < PER_THREAD; i++) {
		snprintf(seed, sizeof(seed), "w%d-%d", w->id, i);
		hexkey(seed, key);
		w->failures += put(w->s, key, key, seed, "concurrent", i) != 0;
		keys[0] = key;
		w->failures += store_touch(w->s, keys, &t, &c, 1) != 0;
	}
	return NULL;
}

START_TEST(test_concurrent_writers)
{
	struct worker w[THREADS];
	pthread_t th[THREADS];
	uint64_t n, bytes;
	struct store_entry e;
	char key[65];
	int i;
	struct store *s = open_store(0);

	for (i = 0; i < THREADS; i++) {
		w[i] = (struct worker){ .s = s, .id = i };
		ck_assert_int_eq(pthread_create(&th[i], NULL, publish_worker, &w[i]), 0);
	}
	for (i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(w[i].failures, 0);
	}
	ck_assert_int_eq(store_totals(s, &n, &bytes), 0);
	ck_assert_uint_eq(n, THREADS * PER_THREAD);
	ck_assert_uint_eq(bytes, THREADS * PER_THREAD * 10);
	hexkey("w3-7", key);
	ck_assert_int_eq(store_get_by_alias(s, "w3-7", &e), 0);
	ck_assert_str_eq(e.key, key);
	ck_assert_uint_eq(e.uses, 1);
	ck_assert_int_eq(e.last_used, 1000);
	store_entry_free(&e);
	store_close(s);
}
END_TEST

/* One dep of each kind with every field set to something distinct (high
 * bits and a negative time included, to catch a narrowed field). */
static void blob_deps(struct store_dep d[4])
{
	fixture_deps(d);
}

static void free_dep_list(struct store_dep *d, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(d[i].path);
	free(d);
}

/* A kind the decoder would refuse is refused when encoding: otherwise the
 * entry is published and then unreadable (store_get gives -EBADMSG). */
START_TEST(test_deps_blob_bad_kind_refused)
{
	struct store_dep d[4];
	uint8_t *blob;
	size_t len;

	blob_deps(d);
	d[2].kind = STORE_DEP__COUNT;
	ck_assert_int_eq(store_deps_encode(d, 4, STORE_DEPS_OBSERVED, &blob, &len), -EINVAL);
	ck_assert_ptr_null(blob);
}
END_TEST

/* Version 2 keeps the kind, every identity field and the source. */
START_TEST(test_deps_blob_v2_roundtrip)
{
	struct store_dep d[4], *got;
	uint8_t *blob;
	size_t len, n;
	int source;

	blob_deps(d);
	ck_assert_int_eq(store_deps_encode(d, 4, STORE_DEPS_OBSERVED, &blob, &len), 0);
	ck_assert_ptr_nonnull(blob);
	ck_assert_uint_eq(blob[0], 2);
	ck_assert_int_eq(store_deps_decode(blob, len, &got, &n, &source), 0);
	ck_assert_int_eq(source, STORE_DEPS_OBSERVED);
	ck_assert_uint_eq(n, 4);
	for (size_t i = 0; i < 4; i++) {
		ck_assert_str_eq(got[i].path, d[i].path);
		ck_assert_uint_eq(got[i].kind, d[i].kind);
		ck_assert_uint_eq(got[i].mode, d[i].mode);
		ck_assert_uint_eq(got[i].size, d[i].size);
		ck_assert_int_eq(got[i].mtime_ns, d[i].mtime_ns);
		ck_assert_int_eq(got[i].ctime_ns, d[i].ctime_ns);
		ck_assert_uint_eq(got[i].dev, d[i].dev);
		ck_assert_uint_eq(got[i].ino, d[i].ino);
		ck_assert_mem_eq(got[i].digest, d[i].digest, 32);
	}
	free_dep_list(got, n);
	free(blob);

	/* The depfile source is kept as well. */
	ck_assert_int_eq(store_deps_encode(d, 1, STORE_DEPS_DEPFILE, &blob, &len), 0);
	ck_assert_int_eq(store_deps_decode(blob, len, &got, &n, &source), 0);
	ck_assert_int_eq(source, STORE_DEPS_DEPFILE);
	ck_assert_uint_eq(n, 1);
	free_dep_list(got, n);
	free(blob);

	/* No deps: an empty blob for a depfile entry, but an observed build
	 * that read nothing keeps its source. */
	ck_assert_int_eq(store_deps_encode(d, 0, STORE_DEPS_DEPFILE, &blob, &len), 0);
	ck_assert_ptr_null(blob);
	ck_assert_uint_eq(len, 0);
	ck_assert_int_eq(store_deps_decode(NULL, 0, &got, &n, &source), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(source, STORE_DEPS_DEPFILE);
	ck_assert_int_eq(store_deps_encode(d, 0, STORE_DEPS_OBSERVED, &blob, &len), 0);
	ck_assert_ptr_nonnull(blob);
	ck_assert_int_eq(store_deps_decode(blob, len, &got, &n, &source), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_ptr_null(got);
	ck_assert_int_eq(source, STORE_DEPS_OBSERVED);
	free(blob);

	/* A dep without a path cannot be encoded. */
	d[1].path = (char *)"";
	ck_assert_int_eq(store_deps_encode(d, 2, STORE_DEPS_OBSERVED, &blob, &len), -EINVAL);
	ck_assert_ptr_null(blob);
	d[1].path = NULL;
	ck_assert_int_eq(store_deps_encode(d, 2, STORE_DEPS_OBSERVED, &blob, &len), -EINVAL);
}
END_TEST

static size_t put_le_n(uint8_t *p, uint64_t v, int nbytes)
{
	for (int i = 0; i < nbytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
	return (size_t)nbytes;
}

/* A hand-made version 1 blob (rows written before kinds existed) reads as
 * files from the dependency files. */
START_TEST(test_deps_blob_v1)
{
	uint8_t blob[128], *p = blob;
	struct store_dep *got;
	size_t n;
	int source = -1;

	*p++ = 1;
	p += put_le_n(p, 2, 4);
	p += put_le_n(p, 4, 2);
	memcpy(p, "/a.h", 4);
	p += 4;
	p += put_le_n(p, 1234, 8);
	p += put_le_n(p, (uint64_t)-5LL, 8);
	memset(p, 0xab, 32);
	p += 32;
	p += put_le_n(p, 6, 2);
	memcpy(p, "/inc/b", 6);
	p += 6;
	p += put_le_n(p, 0xffffffffffull, 8);
	p += put_le_n(p, 1700000000000000000ull, 8);
	memset(p, 0xcd, 32);
	p += 32;
	size_t len = (size_t)(p - blob);

	ck_assert_int_eq(store_deps_decode(blob, len, &got, &n, &source), 0);
	ck_assert_int_eq(source, STORE_DEPS_DEPFILE);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(got[0].path, "/a.h");
	ck_assert_uint_eq(got[0].kind, STORE_DEP_FILE);
	ck_assert_uint_eq(got[0].size, 1234);
	ck_assert_int_eq(got[0].mtime_ns, -5);
	ck_assert_uint_eq(got[0].mode, 0);
	ck_assert_uint_eq(got[0].dev, 0);
	ck_assert_uint_eq(got[0].ino, 0);
	ck_assert_int_eq(got[0].ctime_ns, 0);
	ck_assert_uint_eq(got[0].digest[0], 0xab);
	ck_assert_uint_eq(got[0].digest[31], 0xab);
	ck_assert_str_eq(got[1].path, "/inc/b");
	ck_assert_uint_eq(got[1].kind, STORE_DEP_FILE);
	ck_assert_uint_eq(got[1].size, 0xffffffffffull);
	ck_assert_int_eq(got[1].mtime_ns, 1700000000000000000LL);
	ck_assert_uint_eq(got[1].digest[31], 0xcd);
	free_dep_list(got, n);

	/* Every shorter blob, and one with a byte too many, is damaged. */
	for (size_t l = 1; l < len; l++)
		ck_assert_int_eq(store_deps_decode(blob, l, &got, &n, &source), -EBADMSG);
	blob[len] = 0;
	ck_assert_int_eq(store_deps_decode(blob, len + 1, &got, &n, &source), -EBADMSG);
	/* Version 1 never had an empty list. */
	uint8_t empty[5] = { 1, 0, 0, 0, 0 };
	ck_assert_int_eq(store_deps_decode(empty, sizeof(empty), &got, &n, &source), -EBADMSG);
}
END_TEST

/* Damaged version 2 blobs: -EBADMSG, never a crash or a partial list. */
START_TEST(test_deps_blob_damaged)
{
	struct store_dep d[4], *got = NULL;
	uint8_t *blob, *copy;
	size_t len, n = 99;
	int source;

	blob_deps(d);
	ck_assert_int_eq(store_deps_encode(d, 4, STORE_DEPS_OBSERVED, &blob, &len), 0);
	copy = malloc(len + 1);
	ck_assert_ptr_nonnull(copy);

	/* Truncated anywhere. */
	for (size_t l = 1; l < len; l++) {
		ck_assert_int_eq(store_deps_decode(blob, l, &got, &n, &source), -EBADMSG);
		ck_assert_ptr_null(got);
		ck_assert_uint_eq(n, 0);
	}
	/* A byte too many. */
	memcpy(copy, blob, len);
	copy[len] = 0;
	ck_assert_int_eq(store_deps_decode(copy, len + 1, &got, &n, &source), -EBADMSG);
	/* A kind out of range (first dep at offset 6). */
	memcpy(copy, blob, len);
	copy[6] = STORE_DEP__COUNT;
	ck_assert_int_eq(store_deps_decode(copy, len, &got, &n, &source), -EBADMSG);
	copy[6] = 0xff;
	ck_assert_int_eq(store_deps_decode(copy, len, &got, &n, &source), -EBADMSG);
	/* An unknown version or source. */
	memcpy(copy, blob, len);
	copy[0] = 3;
	ck_assert_int_eq(store_deps_decode(copy, len, &got, &n, &source), -EBADMSG);
	copy[0] = 0;
	ck_assert_int_eq(store_deps_decode(copy, len, &got, &n, &source), -EBADMSG);
	memcpy(copy, blob, len);
	copy[1] = STORE_DEPS_OBSERVED + 1;
	ck_assert_int_eq(store_deps_decode(copy, len, &got, &n, &source), -EBADMSG);
	/* A count larger or smaller than the deps present. */
	memcpy(copy, blob, len);
	copy[2] = 5;
	ck_assert_int_eq(store_deps_decode(copy, len, &got, &n, &source), -EBADMSG);
	copy[2] = 3;
	ck_assert_int_eq(store_deps_decode(copy, len, &got, &n, &source), -EBADMSG);
	copy[2] = 0xff;
	copy[5] = 0xff;
	ck_assert_int_eq(store_deps_decode(copy, len, &got, &n, &source), -EBADMSG);
	/* A path length of 0, or past the end, or a NUL in a path (the first
	 * path's length is at offset 11, its bytes from 13). */
	memcpy(copy, blob, len);
	copy[11] = 0;
	copy[12] = 0;
	ck_assert_int_eq(store_deps_decode(copy, len, &got, &n, &source), -EBADMSG);
	copy[11] = 0xff;
	copy[12] = 0xff;
	ck_assert_int_eq(store_deps_decode(copy, len, &got, &n, &source), -EBADMSG);
	memcpy(copy, blob, len);
	copy[15] = '\0';
	ck_assert_int_eq(store_deps_decode(copy, len, &got, &n, &source), -EBADMSG);
	ck_assert_ptr_null(got);
	ck_assert_uint_eq(n, 0);
	/* The untouched blob still decodes. */
	ck_assert_int_eq(store_deps_decode(blob, len, &got, &n, &source), 0);
	ck_assert_uint_eq(n, 4);
	free_dep_list(got, n);
	free(copy);
	free(blob);
}
END_TEST

/* Counters: saved, read back by another open, replaced, zeroed. */
START_TEST(test_counters)
{
	struct store *s = open_store(0);
	struct store_counter *rows = NULL;
	size_t n = 9;
	ck_assert_int_eq(store_counters_read(s, &rows, &n), 0);
	ck_assert_uint_eq(n, 0);
	free(rows);
	struct store_counter c[] = { { "hits", 5 }, { "toolchain.cc.hits", 3 } };
	ck_assert_int_eq(store_counters_write(s, c, 2, false), 0);
	c[0].value = 7;
	ck_assert_int_eq(store_counters_write(s, c, 1, false), 0);   /* replaces */
	store_close(s);
	s = open_store(STORE_READONLY);
	ck_assert_int_eq(store_counters_read(s, &rows, &n), 0);
	ck_assert_uint_eq(n, 2);
	for (size_t i = 0; i < n; i++)
		ck_assert_uint_eq(rows[i].value, strcmp(rows[i].name, "hits") == 0 ? 7 : 3);
	free(rows);
	store_close(s);
	s = open_store(0);
	struct store_counter since = { "since", 42 };
	ck_assert_int_eq(store_counters_write(s, &since, 1, true), 0);   /* zeroes the rest */
	ck_assert_int_eq(store_counters_read(s, &rows, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(rows[0].name, "since");
	free(rows);
	store_close(s);
	s = open_store(STORE_READONLY);
	ck_assert_int_eq(store_counters_write(s, c, 1, false), -EROFS);
	store_close(s);
}
END_TEST

/* kiln.conf: parsed with comments and spaces, refused with the line named,
 * written so that it reads back the same. */
START_TEST(test_cache_conf)
{
	struct cache_conf cc;
	char err[400];
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	static const char good[] = "# settings\n\n  max-size =  20G  # the budget\r\n";
	ck_assert_int_eq(cache_conf_parse(good, strlen(good), &cc, err, sizeof(err)), 0);
	ck_assert(cc.has_max_size);
	ck_assert_uint_eq(cc.max_size, (uint64_t)20 << 30);
	static const char *const bad[][2] = {
		{ "max-size = 20G\nmax-sise = 1G\n", "line 2: unknown setting \"max-sise\"" },
		{ "max-size = 12x\n", "line 1: max-size: \"12x\" is not a size" },
		{ "max-size = 0\n", "is not a size" },
		{ "max-size\n", "line 1: expected \"key = value\"" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(cache_conf_parse(bad[i][0], strlen(bad[i][0]), &cc, err, sizeof(err)), -1);
		ck_assert_msg(strstr(err, bad[i][1]) != NULL, "%s: %s", bad[i][0], err);
	}
	ck_assert_int_eq(cache_conf_read(dir, &cc, err, sizeof(err)), 0);   /* no file */
	ck_assert(!cc.has_max_size);
	static const char *const sizes[] = { "1", "1536", "20G", "3M", "1.5G", "7T" };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct cache_conf w = { 0 }, r;
		uint64_t want;
		ck_assert_int_eq(cache_conf_set(&w, "max-size", sizes[i], err, sizeof(err)), 0);
		ck_assert_int_eq(util_parse_size(sizes[i], &want), 0);
		ck_assert_int_eq(cache_conf_write(dir, &w, err, sizeof(err)), 0);
		ck_assert_int_eq(cache_conf_read(dir, &r, err, sizeof(err)), 0);
		ck_assert(r.has_max_size);
		ck_assert_uint_eq(r.max_size, want);
	}
	ck_assert_int_eq(cache_conf_set(&cc, "max-size", NULL, err, sizeof(err)), 0);
	ck_assert_int_eq(cache_conf_write(dir, &cc, err, sizeof(err)), 0);
	ck_assert_int_eq(cache_conf_read(dir, &cc, err, sizeof(err)), 0);
	ck_assert(!cc.has_max_size);
	ck_assert_int_eq(cache_conf_set(&cc, "maxsize", "1G", err, sizeof(err)), -1);

	/* kiln config's read-modify-write: reads only with -1; sets and
	 * unsets; a file that does not parse is an error to read, and is
	 * replaced (said) when a value is written. */
	bool replaced = true;
	ck_assert_int_eq(cache_conf_update(dir, 1 << 20, &cc, &replaced, err, sizeof(err)), 0);
	ck_assert(!replaced && cc.has_max_size && cc.max_size == 1 << 20);
	ck_assert_int_eq(cache_conf_update(dir, -1, &cc, &replaced, err, sizeof(err)), 0);
	ck_assert(!replaced && cc.has_max_size && cc.max_size == 1 << 20);
	ck_assert_int_eq(cache_conf_update(dir, 0, &cc, &replaced, err, sizeof(err)), 0);
	ck_assert(!cc.has_max_size);
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s", dir, CACHE_CONF_NAME);
	ck_assert_int_eq(util_replace_file_at(AT_FDCWD, path, "max-size = lots\n", 16, false), 0);
	ck_assert_int_eq(cache_conf_update(dir, -1, &cc, &replaced, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "line 1") != NULL, "%s", err);
	ck_assert_int_eq(cache_conf_update(dir, 5 << 20, &cc, &replaced, err, sizeof(err)), 0);
	ck_assert(replaced);
	ck_assert_msg(strstr(err, "line 1") != NULL, "%s", err);
	ck_assert_int_eq(cache_conf_read(dir, &cc, err, sizeof(err)), 0);
	ck_assert(cc.has_max_size && cc.max_size == 5 << 20);
}
END_TEST

/* Writes logs/failed/NAME with its mtime age_s seconds before now. */
static void failed_file(struct store *s, const char *name, int64_t now, int64_t age_s)
{
	int fd = openat(store_failed_fd(s), name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "x", 1), 1);
	struct timespec ts[2] = { { now - age_s, 0 }, { now - age_s, 0 } };
	ck_assert_int_eq(futimens(fd, ts), 0);
	close(fd);
}

static bool failed_exists(struct store *s, const char *name)
{
	struct stat st;
	return fstatat(store_failed_fd(s), name, &st, 0) == 0;
}

/* The logs of failed builds: pruned by age, then by count (the oldest
 * first), stale temporary files too; entries' logs and young temporary
 * files are left alone. */
START_TEST(test_prune_failed)
{
	struct store *s = open_store(0);
	int64_t now = util_wall_s();
	uint64_t removed = 99;
	char name[96], key[65];

	ck_assert_int_ge(store_failed_fd(s), 0);
	ck_assert_int_eq(store_prune_failed(s, now, 3600, 10, &removed), 0);
	ck_assert_uint_eq(removed, 0);
	for (int i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "%064d.log", i);
		failed_file(s, name, now, i * 1000);   /* 0, 1000, ..., 4000 s old */
	}
	failed_file(s, "alias-aa.failed", now, 7200);
	failed_file(s, "0001.log.tmp12.3", now, 7200);   /* a crashed writer's */
	failed_file(s, "0002.log.tmp12.4", now, 60);     /* being written */
	failed_file(s, "README", now, 999999);           /* not ours */
	/* An entry's log lives in logs/, never pruned here. */
	hexkey("kept", key);
	snprintf(name, sizeof(name), "%s.log", key);
	int fd = openat(store_logs_fd(s), name, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);

	/* Older than an hour: the logs at 4000 s and the alias file, and the
	 * old temporary file. */
	ck_assert_int_eq(store_prune_failed(s, now, 3600, 10, &removed), 0);
	ck_assert_uint_eq(removed, 3);
	ck_assert(!failed_exists(s, "alias-aa.failed"));
	ck_assert(!failed_exists(s, "0001.log.tmp12.3"));
	ck_assert(failed_exists(s, "0002.log.tmp12.4"));
	ck_assert(failed_exists(s, "README"));
	snprintf(name, sizeof(name), "%064d.log", 4);
	ck_assert(!failed_exists(s, name));
	/* At most 2 files: the newest (0 and 1000 s) stay. */
	ck_assert_int_eq(store_prune_failed(s, now, 3600, 2, &removed), 0);
	ck_assert_uint_eq(removed, 2);
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "%064d.log", i);
		ck_assert_int_eq(failed_exists(s, name), i < 2);
	}
	snprintf(name, sizeof(name), "%s.log", key);
	ck_assert_int_eq(faccessat(store_logs_fd(s), name, F_OK, 0), 0);
	store_close(s);

	/* Read-only: nothing is removed. */
	s = open_store(STORE_READONLY);
	ck_assert_int_eq(store_prune_failed(s, now, 0, 0, &removed), -EROFS);
	ck_assert_uint_eq(removed, 0);
	store_close(s);
}
END_TEST

/* The hot cache holds an entry's dependencies once, however many aliases
 * name the entry: every alias's answer shares one block (before, each alias
 * held a copy, and many aliases of few programs filled the cache's bound
 * again and again, emptying it and stalling the daemon's loop). */
START_TEST(test_hot_deps_interned)
{
	struct store_dep deps[6];
	char *paths[6], key[65], *tmp, alias[32];
	struct store_entry e, first;
	struct store *s = open_store(0);

	make_deps(deps, paths, 6);
	hexkey("interned", key);
	fill_entry(&e, key, key, "alias-0", 5);
	e.deps = deps;
	e.ndeps = 6;
	tmp = write_tmp(s, "obj");
	ck_assert_int_eq(store_publish(s, &e, AT_FDCWD, tmp), 0);
	free(tmp);
	for (int i = 1; i < 300; i++) {
		snprintf(alias, sizeof(alias), "alias-%d", i);
		ck_assert_int_eq(store_set_alias(s, alias, key), 0);
	}
	/* The first lookup reads SQLite and fills the cache; the second is
	 * the cache's answer. */
	ck_assert_int_eq(store_get_by_alias(s, "alias-0", &first), 0);
	store_entry_free(&first);
	ck_assert_int_eq(store_get_by_alias(s, "alias-0", &first), 0);
	check_deps(&first, deps, 6);
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < 300; i++) {
			snprintf(alias, sizeof(alias), "alias-%d", i);
			ck_assert_int_eq(store_get_by_alias(s, alias, &e), 0);
			ck_assert_str_eq(e.key, key);
			check_deps(&e, deps, 6);
			/* The second round is answered from the cache. */
			ck_assert_msg(round == 0 || e.deps == first.deps,
				      "alias %d holds a copy of the dependencies", i);
			store_entry_free(&e);
		}
	store_entry_free(&first);
	for (int i = 0; i < 6; i++)
		free(paths[i]);
	store_close(s);
}
END_TEST

/* Publishes key (request key rkey, alias) with the six dependencies. */
static void put_deps(struct store *s, const char *key, const char *rkey, const char *alias,
		     struct store_dep *deps)
{
	struct store_entry e;
	fill_entry(&e, key, rkey, alias, 5);
	e.deps = deps;
	e.ndeps = 6;
	char *tmp = write_tmp(s, key);
	ck_assert_int_eq(store_publish(s, &e, AT_FDCWD, tmp), 0);
	free(tmp);
}

/*
 * The answer for alias, kept by the caller (held[*n]) so that its
 * dependency block stays allocated: a cached answer shares the cache's
 * block, a read of SQLite decodes a new one, which therefore cannot land at
 * the address of a block still held. Returns the block; checks the key.
 */
static const struct store_dep *cached_deps(struct store *s, const char *alias, const char *key,
					   struct store_entry *held, size_t *n)
{
	struct store_entry *e = &held[(*n)++];
	ck_assert_int_eq(store_get_by_alias(s, alias, e), 0);
	ck_assert_str_eq(e->key, key);
	return e->deps;
}

/* The entry of key among the answer for rkey, and its newest alias. */
static void rkey_alias(struct store *s, const char *rkey, const char *key, const char *alias)
{
	struct store_entry *list = NULL;
	size_t n = 0;
	ck_assert_int_eq(store_get_by_rkey(s, rkey, &list, &n), 0);
	bool found = false;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(list[i].key, key) != 0)
			continue;
		found = true;
		ck_assert_msg(alias == NULL ? list[i].alias == NULL
			      : list[i].alias != NULL && strcmp(list[i].alias, alias) == 0,
			      "entry %.8s: alias %s, expected %s", key,
			      list[i].alias ? list[i].alias : "(none)", alias ? alias : "(none)");
	}
	ck_assert_msg(found, "entry %.8s is not under its request key", key);
	store_entries_free(list, n);
}

/*
 * A publish or an alias write makes the hot cache forget only what it
 * touched: the answers of other entries stay cached (their dependency
 * blocks are the same), while every name the change touched answers anew:
 * the new entry under a cached request key, an alias moved (its old and
 * its new target name their newest alias), a pin. A change of many rows
 * (a removal) or more changes than the store keeps records of empty the
 * cache, and the answers stay right.
 */
START_TEST(test_hot_forgets_what_changed)
{
	struct store_dep deps[6];
	char *paths[6], ka[65], kb[65], kc[65], kd[65], ra[65], rb[65], rc[65];
	struct store_entry held[32], e;
	size_t nh = 0;
	struct store *s = open_store(0);
	make_deps(deps, paths, 6);
	hexkey("ka", ka);
	hexkey("kb", kb);
	hexkey("kc", kc);
	hexkey("kd", kd);
	hexkey("ra", ra);
	hexkey("rb", rb);
	hexkey("rc", rc);
	put_deps(s, ka, ra, "a", deps);
	put_deps(s, kb, rb, "b", deps);
	cached_deps(s, "a", ka, held, &nh);
	const struct store_dep *pa = cached_deps(s, "a", ka, held, &nh);
	cached_deps(s, "b", kb, held, &nh);
	const struct store_dep *pb = cached_deps(s, "b", kb, held, &nh);
	ck_assert_ptr_eq(cached_deps(s, "a", ka, held, &nh), pa);

	/* Another program's build: a and b stay cached. */
	put_deps(s, kc, rc, "c", deps);
	ck_assert_ptr_eq(cached_deps(s, "a", ka, held, &nh), pa);
	ck_assert_ptr_eq(cached_deps(s, "b", kb, held, &nh), pb);
	cached_deps(s, "c", kc, held, &nh);

	/* A variant of a's request (its headers changed), alias a moved to it:
	 * both names answer anew, and a's old entry no longer says "a"; b stays. */
	rkey_alias(s, ra, ka, "a");
	rkey_alias(s, ra, ka, "a");   /* now cached */
	put_deps(s, kd, ra, "a", deps);
	cached_deps(s, "a", kd, held, &nh);
	struct store_entry *list = NULL;
	size_t n = 0;
	ck_assert_int_eq(store_get_by_rkey(s, ra, &list, &n), 0);
	ck_assert_uint_eq(n, 2);
	store_entries_free(list, n);
	rkey_alias(s, ra, ka, NULL);
	rkey_alias(s, ra, kd, "a");
	ck_assert_ptr_eq(cached_deps(s, "b", kb, held, &nh), pb);

	/* An alias written alone: its old target's and its new target's
	 * answers (cached under their request keys) name their newest alias. */
	rkey_alias(s, rb, kb, "b");
	rkey_alias(s, rc, kc, "c");
	ck_assert_int_eq(store_set_alias(s, "b", kc), 0);
	cached_deps(s, "b", kc, held, &nh);
	rkey_alias(s, rb, kb, NULL);
	rkey_alias(s, rc, kc, "b");
	/* A pin, which every answer holding the key shows. */
	ck_assert_int_eq(store_get_by_alias(s, "c", &e), 0);
	ck_assert(!e.pinned);
	store_entry_free(&e);
	ck_assert_int_eq(store_set_pinned(s, kc, true), 0);
	ck_assert_int_eq(store_get_by_alias(s, "c", &e), 0);
	ck_assert(e.pinned);
	store_entry_free(&e);
	ck_assert_int_eq(store_get_by_alias(s, "b", &e), 0);
	ck_assert(e.pinned);
	store_entry_free(&e);

	/* More changes than the records keep: everything answers anew, right. */
	const struct store_dep *pd = cached_deps(s, "a", kd, held, &nh);
	for (int i = 0; i < STORE_CHANGES + 10; i++) {
		char alias[32];
		snprintf(alias, sizeof(alias), "x-%d", i);
		ck_assert_int_eq(store_set_alias(s, alias, ka), 0);
	}
	ck_assert_ptr_ne(cached_deps(s, "a", kd, held, &nh), pd);   /* read anew */
	const struct store_dep *pd2 = cached_deps(s, "a", kd, held, &nh);
	ck_assert_ptr_ne(pd2, pd);
	ck_assert_ptr_eq(cached_deps(s, "a", kd, held, &nh), pd2);
	cached_deps(s, "x-3", ka, held, &nh);

	/* A removal: its names answer "none". */
	ck_assert_int_eq(store_remove(s, kc), 0);
	ck_assert_int_eq(store_get_by_alias(s, "c", &e), -ENOENT);
	ck_assert_int_eq(store_get_by_alias(s, "b", &e), -ENOENT);
	cached_deps(s, "a", kd, held, &nh);
	ck_assert_uint_le(nh, sizeof(held) / sizeof(held[0]));
	for (size_t i = 0; i < nh; i++)
		store_entry_free(&held[i]);
	for (int i = 0; i < 6; i++)
		free(paths[i]);
	store_close(s);
}
END_TEST

static Suite *store_suite(void)
{
	Suite *su = suite_create("store");
	TCase *tc = tcase_create("core");

	tcase_add_unchecked_fixture(tc, base_setup, base_teardown);
	tcase_add_checked_fixture(tc, test_setup, NULL);
	tcase_add_test(tc, test_open_reopen);
	tcase_add_test(tc, test_publish_get);
	tcase_add_test(tc, test_resolve);
	tcase_add_test(tc, test_hot_deps_interned);
	tcase_add_test(tc, test_hot_forgets_what_changed);
	tcase_add_test(tc, test_publish_files);
	tcase_add_test(tc, test_publish_existing);
	tcase_add_test(tc, test_publish_invalid);
	tcase_add_test(tc, test_touch);
	tcase_add_test(tc, test_remove);
	tcase_add_test(tc, test_pin_evict);
	tcase_add_test(tc, test_footprint);
	tcase_add_test(tc, test_key_formats);
	tcase_add_test(tc, test_writers);
	tcase_add_test(tc, test_alias);
	tcase_add_test(tc, test_alias_data);
	tcase_add_test(tc, test_deps_roundtrip);
	tcase_add_test(tc, test_entry_json);
	tcase_add_test(tc, test_reconcile);
	tcase_add_test(tc, test_readonly);
	tcase_add_test(tc, test_schema_newer);
	tcase_add_test(tc, test_totals_kept);
	tcase_add_test(tc, test_clean_mark);
	tcase_add_test(tc, test_concurrent_writers);
	tcase_add_test(tc, test_counters);
	tcase_add_test(tc, test_cache_conf);
	tcase_add_test(tc, test_prune_failed);
	suite_add_tcase(su, tc);

	/* The dependency encodings alone: no cache directory. */
	TCase *td = tcase_create("deps");
	tcase_add_test(td, test_deps_blob_v2_roundtrip);
	tcase_add_test(td, test_deps_blob_v1);
	tcase_add_test(td, test_deps_blob_damaged);
	tcase_add_test(td, test_deps_blob_bad_kind_refused);
	suite_add_tcase(su, td);
	return su;
}

int main(void)
{
	return unit_run(store_suite());
}
