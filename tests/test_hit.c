/*
 * Unit tests of the hit's owner (daemon/flight/hit.c), on a real store in a
 * temporary cache, a real descriptor cache, the real recorded-input checks
 * (headers.c, inotify and all) and a libuv loop for the pool's hashing, and
 * no server: what hit_find serves for a request key, a key and an alias,
 * and what it never serves: a damaged or lost object, an entry whose
 * recorded input changed, one the caller's filter refuses, a large input
 * not yet hashed (pending), an alias's data for another entry.
 */
#include <sys/resource.h>

#include <uv.h>

#include "alias.h"
#include "claims.h"
#include "fdcache.h"
#include "headers.h"
#include "hit.h"
#include "kilnd.h"
#include "thread.h"
#include "verify.h"

#include "store_fixture.h"

static uv_loop_t loop;
static struct kilnd d;

static void setup(void)
{
	memset(&d, 0, sizeof(d));
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	d.loop = &loop;
	thread_set_loop();
	d.store = open_store(0);
	d.fds = fdcache_new(64);
	ck_assert_ptr_nonnull(d.fds);
	ck_assert_int_eq(headers_init(&d), 0);
	ck_assert_int_eq(alias_init(&d), 0);
	ck_assert_int_eq(claims_init(&d), 0);
}

/* The pool's jobs end and their completions run (the watch's handles keep
 * the loop alive: it is not run to its end). */
static void run_until_idle(void)
{
	while (d.work_pending > 0)
		uv_run(&loop, UV_RUN_ONCE);
}

static void teardown(void)
{
	run_until_idle();
	claims_fini(&d);
	alias_fini(&d);
	headers_fini(&d);
	verify_fini(&d);
	uv_run(&loop, UV_RUN_DEFAULT);    /* and the handles close */
	fdcache_free(d.fds);
	store_close(d.store);
	uv_loop_close(&loop);
}

/* A file at dir/name with content; its path (malloc'd). */
static char *make_file(const char *name, const char *content, size_t len)
{
	char *path = NULL;
	ck_assert_int_ge(asprintf(&path, "%s/%s", dir, name), 0);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(util_write_all(fd, content, len), 0);
	close(fd);
	return path;
}

/* Publishes an entry (key from seed) of rkey with the object content, its
 * size and SHA-256 recorded, and the deps given (NULL: none). */
static void publish(const char *seed, const char *rkey, const char *alias, const char *content,
		    struct store_dep *deps, size_t ndeps, char key[65])
{
	struct store_entry e;
	hexkey(seed, key);
	fill_entry(&e, key, rkey, alias, 1763726400);
	e.size = strlen(content);
	e.has_sha256 = true;
	util_sha256(content, strlen(content), e.sha256);
	e.deps = deps;
	e.ndeps = ndeps;
	char *path = write_tmp(d.store, content);
	ck_assert_int_eq(store_publish(d.store, &e, AT_FDCWD, path), 0);
	free(path);
	if (alias != NULL)
		ck_assert_int_eq(store_set_alias_data(d.store, alias, key, NULL), 0);
}

/* A FILE dependency recording path as it is now. */
static struct store_dep file_dep(const char *path)
{
	struct store_dep dep = { .path = (char *)path, .kind = STORE_DEP_FILE };
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	dep.mode = st.st_mode;
	dep.size = (uint64_t)st.st_size;
	dep.mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	int fd = open(path, O_RDONLY);
	uint64_t n = 0;
	ck_assert_int_eq(util_copy_sha256(fd, -1, &n, dep.digest), 0);
	close(fd);
	return dep;   /* no identity (dev, ino 0): its content is hashed to check it */
}

/* hit_find as a request would: the recorded inputs' watch caught up first. */
static int find(const struct hit_query *q, struct hit *h)
{
	headers_requests_read(&d);
	return hit_find(&d, q, h);
}

static int find_key(const char *key, struct hit *h)
{
	const struct hit_query q = { .key = key };
	return find(&q, h);
}

static char *object_path(const char *key)
{
	char *p = store_object_path(d.store, key, "shared");
	ck_assert_ptr_nonnull(p);
	return p;
}

/* One byte of key's object changed in place (its size stays). */
static void damage(const char *key)
{
	char *path = object_path(key);
	chmod(path, 0644);
	int fd = open(path, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, "#", 1, 0), 1);
	close(fd);
	free(path);
}

START_TEST(none_for_an_empty_index)
{
	char key[65];
	struct hit h;
	hexkey("nothing", key);
	const struct hit_query by_rkey = { .rkey = key }, by_alias = { .alias = "gt4py:none" };
	ck_assert_int_eq(find_key(key, &h), HIT_NONE);
	ck_assert_int_eq(h.err, 0);
	hit_free(&h);
	ck_assert_int_eq(find(&by_rkey, &h), HIT_NONE);
	ck_assert_int_eq(h.err, 0);
	hit_free(&h);
	ck_assert_int_eq(find(&by_alias, &h), HIT_NONE);
	ck_assert_int_eq(h.err, 0);
	hit_free(&h);
}
END_TEST

START_TEST(valid_by_key_rkey_and_alias)
{
	char rkey[65], key[65];
	hexkey("request", rkey);
	publish("entry", rkey, "gt4py:one", "the object", NULL, 0, key);
	const struct hit_query queries[] = { { .key = key }, { .rkey = rkey }, { .alias = "gt4py:one" } };
	for (size_t i = 0; i < 3; i++) {
		struct hit h;
		ck_assert_int_eq(find(&queries[i], &h), HIT_VALID);
		ck_assert_str_eq(h.entry.key, key);
		ck_assert_ptr_nonnull(h.ref);
		/* The descriptor served is the object's, and h.file names it. */
		struct stat st;
		ck_assert_int_eq(fstat(fdref_fd(h.ref), &st), 0);
		ck_assert_uint_eq(h.file.ino, (uint64_t)st.st_ino);
		ck_assert_uint_eq(h.file.dev, (uint64_t)st.st_dev);
		ck_assert_int_eq(st.st_size, (off_t)strlen("the object"));
		hit_free(&h);
	}
	ck_assert_uint_eq(d.c.damaged, 0);
}
END_TEST

/* Damage of the same size (the size check alone would pass it). */
START_TEST(damaged_object_never_served)
{
	char rkey[65], key[65];
	hexkey("request", rkey);
	publish("entry", rkey, NULL, "the object", NULL, 0, key);
	struct hit h;
	ck_assert_int_eq(find_key(key, &h), HIT_VALID);   /* checked once, then remembered */
	hit_free(&h);
	damage(key);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(find_key(key, &h), HIT_NONE);
		ck_assert_int_eq(h.err, 0);
		ck_assert_ptr_null(h.ref);
		hit_free(&h);
	}
	const struct hit_query q = { .rkey = rkey };
	ck_assert_int_eq(find(&q, &h), HIT_NONE);
	hit_free(&h);
	ck_assert_uint_ge(d.c.damaged, 2);
}
END_TEST

START_TEST(lost_object_is_none)
{
	char rkey[65], key[65];
	hexkey("request", rkey);
	publish("entry", rkey, "gt4py:lost", "the object", NULL, 0, key);
	char *path = object_path(key);
	ck_assert_int_eq(unlink(path), 0);
	free(path);
	struct hit h;
	ck_assert_int_eq(find_key(key, &h), HIT_NONE);
	ck_assert_int_eq(h.err, 0);   /* a build replaces it, not an I/O error */
	hit_free(&h);
	const struct hit_query q = { .alias = "gt4py:lost" };
	ck_assert_int_eq(find(&q, &h), HIT_NONE);
	hit_free(&h);
}
END_TEST

/* Of a request key's entries, the first valid one wins: a damaged one and
 * one whose input changed are passed over, whatever the index's order. */
START_TEST(rkey_passes_over_invalid_entries)
{
	char rkey[65], bad[65], stale[65], good[65];
	hexkey("request", rkey);
	char *hdr = make_file("stencil.h", "#define N 1\n", 12);
	struct store_dep dep = file_dep(hdr);
	publish("damaged", rkey, NULL, "object one", NULL, 0, bad);
	publish("stale", rkey, NULL, "object two", &dep, 1, stale);
	damage(bad);
	free(make_file("stencil.h", "#define N 2\n", 12));
	publish("good", rkey, NULL, "object three", NULL, 0, good);
	const struct hit_query q = { .rkey = rkey };
	struct hit h;
	ck_assert_int_eq(find(&q, &h), HIT_VALID);
	ck_assert_str_eq(h.entry.key, good);
	hit_free(&h);
	/* Without the valid one: none. (Damaged: an object unlinked after it
	 * was served stays served, intact, from the descriptor cache.) */
	damage(good);
	ck_assert_int_eq(find(&q, &h), HIT_NONE);
	hit_free(&h);
	free(hdr);
}
END_TEST

static bool refuse_all(const struct store_entry *e, const void *arg)
{
	(void)e;
	(void)arg;
	return false;
}

static bool toolchain_is(const struct store_entry *e, const void *arg)
{
	return strcmp(e->toolchain, arg) == 0;
}

START_TEST(the_callers_filter_decides_first)
{
	char rkey[65], key[65];
	hexkey("request", rkey);
	publish("entry", rkey, "gt4py:f", "the object", NULL, 0, key);
	struct hit h;
	const struct hit_query refused = { .alias = "gt4py:f", .accept = refuse_all },
			       other = { .key = key, .accept = toolchain_is, .accept_arg = "nvcc" },
			       same = { .rkey = rkey, .accept = toolchain_is, .accept_arg = "c++" };
	ck_assert_int_eq(find(&refused, &h), HIT_NONE);
	hit_free(&h);
	ck_assert_int_eq(find(&other, &h), HIT_NONE);
	hit_free(&h);
	ck_assert_int_eq(find(&same, &h), HIT_VALID);
	ck_assert_str_eq(h.entry.key, key);
	hit_free(&h);
}
END_TEST

START_TEST(changed_input_is_none)
{
	char rkey[65], key[65];
	hexkey("request", rkey);
	char *hdr = make_file("stencil.h", "#define N 1\n", 12);
	char *gone = make_file("gone.h", "int x;\n", 7);
	struct store_dep deps[2] = { file_dep(hdr), file_dep(gone) };
	publish("entry", rkey, NULL, "the object", deps, 2, key);
	struct hit h;
	ck_assert_int_eq(find_key(key, &h), HIT_VALID);
	hit_free(&h);
	/* Same size, new content: the watch or the digest sees it. */
	free(make_file("stencil.h", "#define N 2\n", 12));
	ck_assert_int_eq(find_key(key, &h), HIT_NONE);
	hit_free(&h);
	/* Back as it was: valid again (the content is what the entry recorded). */
	free(make_file("stencil.h", "#define N 1\n", 12));
	ck_assert_int_eq(find_key(key, &h), HIT_VALID);
	hit_free(&h);
	ck_assert_int_eq(unlink(gone), 0);
	ck_assert_int_eq(find_key(key, &h), HIT_NONE);
	hit_free(&h);
	free(hdr);
	free(gone);
}
END_TEST

/* A large input not hashed yet is hashed on the pool: pending for a
 * caller that may wait, none for one that may not; valid once hashed. */
START_TEST(large_input_pending_then_valid)
{
	char rkey[65], key[65];
	hexkey("request", rkey);
	size_t len = 600 * 1024;
	char *big = malloc(len);
	ck_assert_ptr_nonnull(big);
	for (size_t i = 0; i < len; i++)
		big[i] = (char)('a' + i % 23);
	char *path = make_file("table.h", big, len);
	struct store_dep dep = file_dep(path);
	publish("entry", rkey, NULL, "the object", &dep, 1, key);
	struct hit h;
	const struct hit_query wait = { .key = key, .may_wait = true }, now = { .key = key };
	ck_assert_int_eq(find(&wait, &h), HIT_PENDING);
	ck_assert_ptr_null(h.ref);
	hit_free(&h);
	ck_assert_int_eq(hit_find(&d, &now, &h), HIT_NONE);
	hit_free(&h);
	/* Asked again from the hash's end, as a parked request is (hit_reply.c):
	 * no request read meanwhile. */
	run_until_idle();
	ck_assert_int_eq(hit_find(&d, &wait, &h), HIT_VALID);
	hit_free(&h);
	/* Changed, same size: pending again, then none once hashed. */
	big[len / 2] = '!';
	free(make_file("table.h", big, len));
	int v = find(&wait, &h);
	hit_free(&h);
	if (v == HIT_PENDING)
		run_until_idle();
	else
		ck_assert_int_eq(v, HIT_NONE);
	ck_assert_int_eq(hit_find(&d, &wait, &h), HIT_NONE);
	hit_free(&h);
	free(big);
	free(path);
}
END_TEST

/* The pool's one thread held (UV_THREADPOOL_SIZE=1) until blocker_free:
 * work queued meanwhile waits. */
static uv_sem_t held;
static uv_work_t blocker;

static void block_work(uv_work_t *w)
{
	(void)w;
	uv_sem_wait(&held);
}

static void block_done(uv_work_t *w, int status)
{
	(void)w;
	(void)status;
}

static void pool_hold(void)
{
	ck_assert_int_eq(uv_sem_init(&held, 0), 0);
	ck_assert_int_eq(uv_queue_work(&loop, &blocker, block_work, block_done), 0);
}

static void pool_free(void)
{
	uv_sem_post(&held);
}

/* The alias's current target is its last re-point (alias.c), answered
 * before the index is written, with the data stored with it; a request
 * for the old entry's data is not served the new one's. */
START_TEST(alias_follows_its_last_repoint)
{
	setenv("UV_THREADPOOL_SIZE", "1", 1);   /* this test's process: its first pool use */
	char rkey[65], one[65], two[65];
	hexkey("request", rkey);
	publish("one", rkey, "gt4py:p", "object one", NULL, 0, one);
	publish("two", rkey, NULL, "object two", NULL, 0, two);
	ck_assert_int_eq(store_set_alias_data(d.store, "gt4py:p", one, "{\"sdfg\":1}"), 0);
	const struct hit_query q = { .alias = "gt4py:p" };
	struct hit h;
	ck_assert_int_eq(find(&q, &h), HIT_VALID);
	ck_assert_str_eq(h.entry.key, one);
	ck_assert_str_eq(h.alias_data, "{\"sdfg\":1}");
	hit_free(&h);
	pool_hold();   /* the re-point's write waits */
	alias_point(&d, "gt4py:p", two, "{\"sdfg\":2}");
	ck_assert_int_eq(find(&q, &h), HIT_VALID);   /* before the write */
	ck_assert_str_eq(h.entry.key, two);
	ck_assert_str_eq(h.alias_data, "{\"sdfg\":2}");
	hit_free(&h);
	char *indexed = NULL;
	ck_assert_int_eq(store_alias_data(d.store, "gt4py:p", one, &indexed), 0);
	ck_assert_str_eq(indexed, "{\"sdfg\":1}");   /* the index: not written yet */
	free(indexed);
	pool_free();
	run_until_idle();                             /* and after it */
	uv_run(&loop, UV_RUN_NOWAIT);                 /* the blocker's completion */
	ck_assert_int_eq(find(&q, &h), HIT_VALID);
	ck_assert_str_eq(h.entry.key, two);
	ck_assert_str_eq(h.alias_data, "{\"sdfg\":2}");
	hit_free(&h);
	/* Its target damaged: none, and the old entry is not served instead. */
	damage(two);
	ck_assert_int_eq(find(&q, &h), HIT_NONE);
	hit_free(&h);
}
END_TEST

/* A valid entry whose object cannot be opened now (no descriptors left):
 * unopened, with the error, never none (a build would not help). Check
 * runs each test in a child of its own, so the limit stays there. */
START_TEST(unopened_when_no_descriptor_is_left)
{
	char rkey[65], key[65];
	hexkey("request", rkey);
	publish("entry", rkey, NULL, "the object", NULL, 0, key);
	struct rlimit rl;
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	int probe = dup(0);
	ck_assert_int_ge(probe, 0);
	close(probe);
	/* Every descriptor up to the lowest free one is taken: none is left. */
	rl.rlim_cur = (rlim_t)probe;
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	struct hit h;
	ck_assert_int_eq(hit_find(&d, &(struct hit_query){ .key = key }, &h), HIT_UNOPENED);
	ck_assert_int_eq(h.err, -EMFILE);
	ck_assert_ptr_null(h.ref);
	hit_free(&h);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("hit");
	TCase *tc = store_tcase("hit_find");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, none_for_an_empty_index);
	tcase_add_test(tc, valid_by_key_rkey_and_alias);
	tcase_add_test(tc, damaged_object_never_served);
	tcase_add_test(tc, lost_object_is_none);
	tcase_add_test(tc, rkey_passes_over_invalid_entries);
	tcase_add_test(tc, the_callers_filter_decides_first);
	tcase_add_test(tc, changed_input_is_none);
	tcase_add_test(tc, large_input_pending_then_valid);
	tcase_add_test(tc, alias_follows_its_last_repoint);
	tcase_add_test(tc, unopened_when_no_descriptor_is_left);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
