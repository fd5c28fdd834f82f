/*
 * Unit tests of the store's index (store/store.c, store_read.c,
 * store_write.c, store_layout.c): opening and reopening, crash-safe
 * publishing and its files, lookups by key, prefix, rkey, alias and label,
 * uses, removal, key formats, the writers' lock, aliases and their data,
 * an entry's JSON, the read-only mode, a newer schema, the clean mark and
 * concurrent writers, each in its own temporary cache directory.
 */
#include "store_fixture.h"
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

/* The pool's reads (store_get_any_thread, store_get_by_alias_any_thread)
 * answer as the reader's do, from another thread, while the opening
 * thread keeps using its own reader connection. */
struct any_thread_job {
	struct store *s;
	const char *key, *alias;
	int rounds, bad;
};

static void *any_thread_reader(void *arg)
{
	struct any_thread_job *j = arg;
	for (int i = 0; i < j->rounds; i++) {
		struct store_entry e;
		if (store_get_any_thread(j->s, j->key, &e) != 0 || strcmp(e.key, j->key) != 0)
			j->bad++;
		store_entry_free(&e);
		if (store_get_by_alias_any_thread(j->s, j->alias, &e) != 0 || strcmp(e.key, j->key) != 0)
			j->bad++;
		store_entry_free(&e);
		if (store_get_any_thread(j->s, "00ff", &e) != -ENOENT ||
		    store_get_by_alias_any_thread(j->s, "no such alias", &e) != -ENOENT)
			j->bad++;
	}
	return NULL;
}

START_TEST(test_get_any_thread)
{
	char k1[65];
	struct store_entry e;
	struct store *s = open_store(0);

	hexkey("any1", k1);
	ck_assert_int_eq(put(s, k1, k1, "gt4py:any", "1", 1), 0);
	struct any_thread_job j = { .s = s, .key = k1, .alias = "gt4py:any", .rounds = 200 };
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, any_thread_reader, &j), 0);
	for (int i = 0; i < 200; i++) {
		ck_assert_int_eq(store_get(s, k1, &e), 0);
		store_entry_free(&e);
	}
	pthread_join(th, NULL);
	ck_assert_int_eq(j.bad, 0);
	struct store_entry r;
	ck_assert_int_eq(store_get(s, k1, &r), 0);
	ck_assert_int_eq(store_get_any_thread(s, k1, &e), 0);
	ck_assert_str_eq(e.rkey, r.rkey);
	ck_assert_uint_eq(e.ndeps, r.ndeps);
	ck_assert_uint_eq(e.size, r.size);
	ck_assert_str_eq(e.alias, "gt4py:any");
	store_entry_free(&e);
	store_entry_free(&r);
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

int main(void)
{
	Suite *su = suite_create("store");
	TCase *tc = store_tcase("store");
	tcase_add_test(tc, test_open_reopen);
	tcase_add_test(tc, test_publish_get);
	tcase_add_test(tc, test_resolve);
	tcase_add_test(tc, test_publish_files);
	tcase_add_test(tc, test_publish_existing);
	tcase_add_test(tc, test_publish_invalid);
	tcase_add_test(tc, test_touch);
	tcase_add_test(tc, test_remove);
	tcase_add_test(tc, test_key_formats);
	tcase_add_test(tc, test_writers);
	tcase_add_test(tc, test_alias);
	tcase_add_test(tc, test_alias_data);
	tcase_add_test(tc, test_entry_json);
	tcase_add_test(tc, test_readonly);
	tcase_add_test(tc, test_schema_newer);
	tcase_add_test(tc, test_clean_mark);
	tcase_add_test(tc, test_concurrent_writers);
	tcase_add_test(tc, test_get_any_thread);
	suite_add_tcase(su, tc);
	return unit_run(su);
}
