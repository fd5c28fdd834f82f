/*
 * Unit tests of the start-up reconcile (store/store_reconcile.c): rows
 * without objects, objects without rows, leftovers in tmp/ and strays in
 * objects/, all set right before the store serves anything.
 */
#include "store_fixture.h"

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

int main(void)
{
	Suite *su = suite_create("store_reconcile");
	TCase *tc = store_tcase("store_reconcile");
	tcase_add_test(tc, test_reconcile);
	suite_add_tcase(su, tc);
	return unit_run(su);
}
