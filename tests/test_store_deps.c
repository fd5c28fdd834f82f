/*
 * Unit tests of an entry's dependencies in the index (store/store_deps.c):
 * a round trip of every kind through the store, and the blob encoding
 * alone: version 2 and version 1 read, damaged and unknown kinds refused.
 */
#include "store_fixture.h"

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

int main(void)
{
	Suite *su = suite_create("store_deps");
	TCase *tc = store_tcase("store_deps");
	tcase_add_test(tc, test_deps_roundtrip);
	suite_add_tcase(su, tc);
	/* The dependency encodings alone: no cache directory. */
	TCase *tb = tcase_create("blobs");
	tcase_add_test(tb, test_deps_blob_v2_roundtrip);
	tcase_add_test(tb, test_deps_blob_v1);
	tcase_add_test(tb, test_deps_blob_damaged);
	tcase_add_test(tb, test_deps_blob_bad_kind_refused);
	suite_add_tcase(su, tb);
	return unit_run(su);
}
