/*
 * Unit tests of the store's hot cache (store/store_hot.c): dependency lists
 * interned once, and whatever changed (a re-pointed alias, a removed or
 * replaced entry) forgotten.
 */
#include "store_fixture.h"

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

int main(void)
{
	Suite *su = suite_create("store_hot");
	TCase *tc = store_tcase("store_hot");
	tcase_add_test(tc, test_hot_deps_interned);
	tcase_add_test(tc, test_hot_forgets_what_changed);
	suite_add_tcase(su, tc);
	return unit_run(su);
}
