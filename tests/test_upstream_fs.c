/*
 * Unit tests of the upstream tier's directory format (daemon/tier/
 * upstream_fs.c, upstream_entry.c, upstream_alias_fs.c), on a temporary
 * directory standing for the shared one, no daemon: what one node
 * publishes another takes, with every check a node makes before it trusts
 * a record written elsewhere; and what it never takes: an object that is
 * not the recorded one, metadata whose dependencies give another key, a
 * record out of its place, a dependency that differs here, a build whose
 * inputs were not all observed, an alias record copied under another
 * alias's name.
 */
#include "key.h"
#include "upstream_fs.h"

#include "store_fixture.h"

static struct up_dirs up;
static char updir[PATH_MAX + 16], hdr[PATH_MAX + 16];

static void setup(void)
{
	char err[256] = "";
	ck_assert_int_eq(mkdir(dir, 0700), 0);   /* the cache (dir) is only the tests' anchor */
	snprintf(updir, sizeof(updir), "%s/../upstream", dir);   /* dir: test_setup's cache */
	ck_assert_int_eq(mkdir(updir, 0700), 0);
	ck_assert_msg(upfs_open(&up, updir, 3600, false, err, sizeof(err)) == 0, "%s", err);
	snprintf(hdr, sizeof(hdr), "%s/../stencil.h", dir);
	int fd = open(hdr, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ck_assert_int_eq(util_write_all(fd, "#define N 1\n", 12), 0);
	close(fd);
}

static void teardown(void)
{
	upfs_close(&up);
}

/* A file of content at dir/../name; its path in out. */
static void make_object(const char *name, const char *content, char *out, size_t cap)
{
	snprintf(out, cap, "%s/../%s", dir, name);
	int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(util_write_all(fd, content, strlen(content)), 0);
	close(fd);
}

/* An observed entry of rkey with one dependency (the header as it is now),
 * its key the artifact key of those, unless key is given. */
static void entry_for(struct store_entry *e, struct store_dep *dep, const char *rkey,
		      const char *key)
{
	memset(dep, 0, sizeof(*dep));
	dep->path = hdr;
	dep->kind = STORE_DEP_FILE;
	int fd = open(hdr, O_RDONLY);
	uint64_t n = 0;
	ck_assert_int_eq(util_copy_sha256(fd, -1, &n, dep->digest), 0);
	close(fd);
	dep->size = n;
	char k[65];
	key_artifact(rkey, dep, 1, k);
	fill_entry(e, key != NULL ? key : k, rkey, NULL, 1763726400);
	e->deps = dep;
	e->ndeps = 1;
	e->deps_source = STORE_DEPS_OBSERVED;
}

static char tmp_object[PATH_MAX + 16], obj[PATH_MAX + 16];

/* rkey ("request"'s), an entry of it (entry_for: key, or its own) with the
 * object "the object" at obj, published with log (NULL: none). */
static void publish_one(char rkey[65], struct store_entry *e, struct store_dep *dep,
			const char *key, const char *log)
{
	hexkey("request", rkey);
	entry_for(e, dep, rkey, key);
	make_object("built.so", "the object", obj, sizeof(obj));
	ck_assert_int_eq(upfs_publish(&up, e, obj, log, log != NULL ? strlen(log) : 0), 1);
}

/* upfs_find for rkey into e (store_entry_free); its answer. */
static int find(const char *rkey, struct store_entry *e, unsigned *bad)
{
	char *log = NULL;
	snprintf(tmp_object, sizeof(tmp_object), "%s/../fetched", dir);
	memset(e, 0, sizeof(*e));
	*bad = 0;
	int rc = upfs_find(&up, rkey, "shared", tmp_object, e, &log, bad);
	free(log);
	return rc;
}

/* The one metadata file of rkey's entry key. */
static void meta_path(const char *rkey, const char *key, char *out, size_t cap)
{
	snprintf(out, cap, "%s/entries/%.2s/%s/%s.json", updir, rkey, rkey, key);
}

START_TEST(published_here_taken_there)
{
	char rkey[65];
	struct store_entry e, got;
	struct store_dep dep;
	publish_one(rkey, &e, &dep, NULL, "warning: unused\n");
	ck_assert(upfs_has_entry(&up, rkey, e.key));
	/* Published again: the entry there verifies and is kept. */
	ck_assert_int_eq(upfs_publish(&up, &e, obj, NULL, 0), 0);
	unsigned bad;
	ck_assert_int_eq(find(rkey, &got, &bad), 1);
	ck_assert_uint_eq(bad, 0);
	ck_assert_str_eq(got.key, e.key);
	ck_assert_uint_eq(got.size, strlen("the object"));
	ck_assert_uint_eq(got.ndeps, 1);
	ck_assert_str_eq(got.deps[0].path, hdr);
	/* What was copied out is the object, byte for byte. */
	char buf[64] = "";
	int fd = open(tmp_object, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(read(fd, buf, sizeof(buf) - 1), (ssize_t)strlen("the object"));
	close(fd);
	ck_assert_str_eq(buf, "the object");
	store_entry_free(&got);
	/* upfs_take of that key, the same checks. */
	char *log = NULL;
	ck_assert_int_eq(upfs_take(&up, rkey, e.key, "shared", tmp_object, &got, &log), 1);
	ck_assert_str_eq(log, "warning: unused\n");
	free(log);
	store_entry_free(&got);
	char other[65];
	hexkey("other request", other);
	ck_assert_int_eq(find(other, &got, &bad), 0);
}
END_TEST

/* The object in objects/ changed after it was published (same size): not
 * taken, counted, and the copy is not left behind. */
START_TEST(a_changed_object_is_not_taken)
{
	char rkey[65], path[PATH_MAX + 200], hex[65];
	struct store_entry e, got;
	struct store_dep dep;
	publish_one(rkey, &e, &dep, NULL, NULL);
	uint8_t sha[32];
	util_sha256("the object", strlen("the object"), sha);
	util_hex(sha, 32, hex);
	snprintf(path, sizeof(path), "%s/objects/%.2s/%s.so", updir, hex, hex);
	chmod(path, 0644);
	int fd = open(path, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, "T", 1, 0), 1);
	close(fd);
	unsigned bad;
	ck_assert_int_eq(find(rkey, &got, &bad), 0);
	ck_assert_uint_eq(bad, 1);
	ck_assert(!exists(tmp_object));
}
END_TEST

/* Metadata whose dependencies give another artifact key than the one it
 * names (a forged or mismatched record): not taken, counted. */
START_TEST(a_key_its_dependencies_do_not_give)
{
	char rkey[65], forged[65];
	struct store_entry e, got;
	struct store_dep dep;
	hexkey("not the artifact key", forged);
	publish_one(rkey, &e, &dep, forged, NULL);
	unsigned bad;
	ck_assert_int_eq(find(rkey, &got, &bad), 0);
	ck_assert_uint_eq(bad, 1);
}
END_TEST

/* A record moved to another request key's folder, or under another key's
 * name: out of its place, not taken. */
START_TEST(a_record_out_of_its_place)
{
	char rkey[65], other[65], from[PATH_MAX + 200], to[PATH_MAX + 200];
	struct store_entry e, got;
	struct store_dep dep;
	hexkey("other request", other);
	publish_one(rkey, &e, &dep, NULL, NULL);
	meta_path(rkey, e.key, from, sizeof(from));
	snprintf(to, sizeof(to), "%s/entries/%.2s", updir, other);
	mkdir(to, 0700);
	snprintf(to, sizeof(to), "%s/entries/%.2s/%s", updir, other, other);
	ck_assert_int_eq(mkdir(to, 0700), 0);
	meta_path(other, e.key, to, sizeof(to));
	ck_assert_int_eq(link(from, to), 0);
	unsigned bad;
	ck_assert_int_eq(find(other, &got, &bad), 0);
	ck_assert_uint_eq(bad, 1);
	/* Under another key's name in its own folder. */
	char renamed[65];
	hexkey("renamed", renamed);
	meta_path(rkey, renamed, to, sizeof(to));
	ck_assert_int_eq(rename(from, to), 0);
	ck_assert_int_eq(find(rkey, &got, &bad), 0);
	ck_assert_uint_eq(bad, 1);
}
END_TEST

/* Garbage where metadata should be: counted, nothing taken, no crash. */
START_TEST(malformed_metadata_is_counted)
{
	char rkey[65], key[65], path[PATH_MAX + 200];
	struct store_entry e, got;
	struct store_dep dep;
	publish_one(rkey, &e, &dep, NULL, NULL);
	const char *texts[] = { "", "{", "[]", "{\"version\": 99}", "{\"key\": 7, \"rkey\": null}" };
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		char seed[16];
		snprintf(seed, sizeof(seed), "junk %zu", i);
		hexkey(seed, key);
		meta_path(rkey, key, path, sizeof(path));
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(util_write_all(fd, texts[i], strlen(texts[i])), 0);
		close(fd);
	}
	unsigned bad;
	/* The good record is still found beside them. */
	ck_assert_int_eq(find(rkey, &got, &bad), 1);
	ck_assert_str_eq(got.key, e.key);
	store_entry_free(&got);
}
END_TEST

/* A dependency that differs on this node: the entry is not for it (not
 * broken: not counted); back as it was, taken. */
START_TEST(a_dependency_that_differs_here)
{
	char rkey[65];
	struct store_entry e, got;
	struct store_dep dep;
	publish_one(rkey, &e, &dep, NULL, NULL);
	int fd = open(hdr, O_WRONLY | O_TRUNC);
	ck_assert_int_eq(util_write_all(fd, "#define N 2\n", 12), 0);
	close(fd);
	unsigned bad;
	ck_assert_int_eq(find(rkey, &got, &bad), 0);
	ck_assert_uint_eq(bad, 0);
	ck_assert_int_eq(unlink(hdr), 0);
	ck_assert_int_eq(find(rkey, &got, &bad), 0);
	fd = open(hdr, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ck_assert_int_eq(util_write_all(fd, "#define N 1\n", 12), 0);
	close(fd);
	ck_assert_int_eq(find(rkey, &got, &bad), 1);
	store_entry_free(&got);
}
END_TEST

/* Only what observation recorded is shared: an entry whose inputs came
 * from a depfile, or none, is not published. */
START_TEST(unobserved_entries_are_not_published)
{
	char rkey[65];
	struct store_entry e, got;
	struct store_dep dep;
	hexkey("request", rkey);
	entry_for(&e, &dep, rkey, NULL);
	make_object("built.so", "the object", obj, sizeof(obj));
	for (int src = 0; src <= STORE_DEPS_OBSERVED; src++) {
		if (src == STORE_DEPS_OBSERVED)
			continue;
		e.deps_source = (uint8_t)src;
		ck_assert_int_eq(upfs_publish(&up, &e, obj, NULL, 0), 0);
	}
	ck_assert(!upfs_has_entry(&up, rkey, e.key));
	unsigned bad;
	ck_assert_int_eq(find(rkey, &got, &bad), 0);
}
END_TEST

static void alias_rec(struct up_alias *a, const char *alias, const char *seed, const char *data)
{
	memset(a, 0, sizeof(*a));
	a->alias = (char *)alias;
	hexkey(seed, a->key);
	hexkey("request", a->rkey);
	a->output = (char *)"shared";
	a->toolchain = (char *)"c++";
	memset(a->tc_id, 7, sizeof(a->tc_id));
	a->data = (char *)data;
}

static void free_list(struct up_alias *l, size_t n)
{
	for (size_t i = 0; i < n; i++)
		upfs_alias_free(&l[i]);
	free(l);
}

/* Records newest first; a re-point back to an older target makes it the
 * newest again. */
START_TEST(alias_records_newest_first)
{
	struct up_alias one, two, *l = NULL;
	size_t n = 0;
	unsigned bad = 0;
	alias_rec(&one, "gt4py:abc", "one", "eyJzZGZnIjoxfQ==");
	alias_rec(&two, "gt4py:abc", "two", NULL);
	ck_assert_int_eq(upfs_alias_publish(&up, &one), 0);
	sleep(1);   /* "created" is in seconds, ties broken by name */
	ck_assert_int_eq(upfs_alias_publish(&up, &two), 0);
	ck_assert_int_eq(upfs_alias_list(&up, "gt4py:abc", &l, &n, &bad), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(bad, 0);
	ck_assert_str_eq(l[0].key, two.key);
	ck_assert_ptr_null(l[0].data);
	ck_assert_str_eq(l[1].key, one.key);
	ck_assert_str_eq(l[1].data, "eyJzZGZnIjoxfQ==");
	ck_assert_str_eq(l[1].toolchain, "c++");
	ck_assert_mem_eq(l[1].tc_id, one.tc_id, 32);
	free_list(l, n);
	sleep(1);
	ck_assert_int_eq(upfs_alias_publish(&up, &one), 0);
	ck_assert_int_eq(upfs_alias_list(&up, "gt4py:abc", &l, &n, &bad), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(l[0].key, one.key);
	free_list(l, n);
	ck_assert_int_eq(upfs_alias_list(&up, "gt4py:none", &l, &n, &bad), 0);
	ck_assert_uint_eq(n, 0);
	free(l);
}
END_TEST

/* A record copied into another alias's folder names the other alias: it
 * is not that alias's, and is counted. */
START_TEST(alias_record_under_another_name)
{
	struct up_alias mine, theirs, *l = NULL;
	size_t n = 0;
	unsigned bad = 0;
	char from[PATH_MAX], to[PATH_MAX], a[PATH_MAX + 80], b[PATH_MAX + 80];
	alias_rec(&mine, "gt4py:mine", "one", NULL);
	alias_rec(&theirs, "gt4py:theirs", "two", NULL);
	ck_assert_int_eq(upfs_alias_publish(&up, &mine), 0);
	ck_assert_int_eq(upfs_alias_publish(&up, &theirs), 0);
	upfs_alias_dir(&up, "gt4py:mine", from, sizeof(from));
	upfs_alias_dir(&up, "gt4py:theirs", to, sizeof(to));
	snprintf(a, sizeof(a), "%s/%s.json", from, mine.key);
	snprintf(b, sizeof(b), "%s/%s.json", to, mine.key);
	ck_assert_int_eq(link(a, b), 0);
	ck_assert_int_eq(upfs_alias_list(&up, "gt4py:theirs", &l, &n, &bad), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(l[0].key, theirs.key);
	ck_assert_uint_eq(bad, 1);
	free_list(l, n);
	/* And garbage beside it. */
	snprintf(b, sizeof(b), "%s/%064d.json", to, 0);
	int fd = open(b, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ck_assert_int_eq(util_write_all(fd, "{\"alias\":", 9), 0);
	close(fd);
	bad = 0;
	ck_assert_int_eq(upfs_alias_list(&up, "gt4py:theirs", &l, &n, &bad), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(bad, 2);   /* the copy and the garbage */
	free_list(l, n);
}
END_TEST

START_TEST(a_missing_tier_is_refused_read_only)
{
	struct up_dirs other;
	char err[256] = "", path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/../no-such-tier", dir);
	ck_assert_int_lt(upfs_open(&other, path, 3600, true, err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, "no-such-tier") != NULL, "the error names the directory: %s", err);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("upstream_fs");
	TCase *tc = store_tcase("upstream_fs");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, published_here_taken_there);
	tcase_add_test(tc, a_changed_object_is_not_taken);
	tcase_add_test(tc, a_key_its_dependencies_do_not_give);
	tcase_add_test(tc, a_record_out_of_its_place);
	tcase_add_test(tc, malformed_metadata_is_counted);
	tcase_add_test(tc, a_dependency_that_differs_here);
	tcase_add_test(tc, unobserved_entries_are_not_published);
	tcase_add_test(tc, alias_records_newest_first);
	tcase_add_test(tc, alias_record_under_another_name);
	tcase_add_test(tc, a_missing_tier_is_refused_read_only);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
