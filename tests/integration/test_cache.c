/*
 * Integration tests of the cache's policy: eviction (kiln gc and the daemon's
 * --max-size) respects pins and least-recent use, and the process-local alias
 * fast path answers without talking to the daemon.
 */
#include "harness.h"

#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EVICT_PROGRAMS 4
#define LRU_PROGRAMS 5
#define FAST_LOOKUPS 1000

static void cli_ok(const char *a, const char *b, const char *c)
{
	char *out, *err;
	int rc = harness_cli(&out, &err, a, b, c, NULL);

	ck_assert_msg(rc == 0, "kiln %s %s %s exited with %d: %s", a, b ? b : "", c ? c : "", rc,
		      err);
	free(out);
	free(err);
}

START_TEST(gc_to_tiny_size_keeps_pinned)
{
	char keys[EVICT_PROGRAMS][72], paths[EVICT_PROGRAMS][HARNESS_PATH];
	struct harness_result r;
	struct kiln *k = NULL;
	cJSON *ls, *st;

	harness_start(NULL);
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	for (int i = 0; i < EVICT_PROGRAMS; i++) {
		char name[32], alias[32];

		snprintf(name, sizeof(name), "evict_%d", i);
		snprintf(alias, sizeof(alias), "it:evict:%d", i);
		harness_get_program(k, name, 300 + i, alias, keys[i]);
	}
	kiln_close(k);

	cli_ok("pin", "it:evict:1", NULL);
	ls = harness_cli_json("ls", NULL);
	ck_assert_int_eq(cJSON_GetArraySize(ls), EVICT_PROGRAMS);
	for (int i = 0; i < EVICT_PROGRAMS; i++) {
		const cJSON *e = harness_find_entry(ls, "key", keys[i]);

		ck_assert_ptr_nonnull(e);
		ck_assert_int_eq(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "pinned")), i == 1);
		snprintf(paths[i], HARNESS_PATH, "%s", harness_str(e, "path"));
	}
	cJSON_Delete(ls);

	cli_ok("gc", "--max-size", "1K");
	ls = harness_cli_json("ls", NULL);
	ck_assert_int_eq(cJSON_GetArraySize(ls), 1);
	ck_assert_ptr_nonnull(harness_find_entry(ls, "key", keys[1]));
	cJSON_Delete(ls);
	for (int i = 0; i < EVICT_PROGRAMS; i++)
		ck_assert_msg(harness_exists(paths[i]) == (i == 1), "%s %s after gc", paths[i],
			      i == 1 ? "is gone" : "is still there");

	r = harness_in_child(NULL, "it:evict:1");
	ck_assert_msg(r.rc == KILN_OK, "the pinned program does not load: %s: %s",
		      kiln_strerror(r.rc), r.msg);
	ck_assert_int_eq(r.value, 301);
	r = harness_in_child(NULL, "it:evict:0");
	ck_assert_msg(r.rc == KILN_ENOTFOUND, "lookup of an evicted alias gave %s: %s",
		      kiln_strerror(r.rc), r.msg);

	/* Unpinned, it goes too. */
	cli_ok("unpin", "it:evict:1", NULL);
	cli_ok("gc", "--max-size", "1K");
	st = harness_status();
	ck_assert_int_eq(harness_num(st, "entries"), 0);
	ck_assert_int_eq(harness_num(st, "bytes"), 0);
	cJSON_Delete(st);
	ck_assert(!harness_exists(paths[1]));
	harness_stop();
}
END_TEST

/* What du counts in the cache directory, tmp/'s builds aside. */
static int64_t du_sum;
static char du_tmp[HARNESS_PATH + 8];

static int du_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)flag;
	(void)ftw;
	size_t n = strlen(du_tmp);
	if (!(strncmp(path, du_tmp, n) == 0 && path[n] == '/'))
		du_sum += (int64_t)sb->st_blocks * 512;
	return 0;
}

static int64_t du_cache(void)
{
	du_sum = 0;
	snprintf(du_tmp, sizeof(du_tmp), "%s/tmp", harness.cache);
	ck_assert_int_eq(nftw(harness.cache, du_one, 16, FTW_PHYS), 0);
	return du_sum;
}

/* What the cache takes on disk with its WAL written back: a `kiln gc`
 * under the daemon's own limit evicts nothing and compacts the index. */
static int64_t settled_disk(void)
{
	cli_ok("gc", NULL, NULL);
	cJSON *st = harness_status();
	int64_t disk = harness_num(st, "disk_bytes");
	cJSON_Delete(st);
	ck_assert_int_gt(disk, 0);
	return disk;
}

/* The largest "disk" of the entries kiln ls lists. */
static int64_t largest_entry_disk(void)
{
	cJSON *ls = harness_cli_json("ls", NULL);
	const cJSON *e;
	int64_t disk = 0;
	cJSON_ArrayForEach(e, ls)
		if (harness_num(e, "disk") > disk)
			disk = harness_num(e, "disk");
	cJSON_Delete(ls);
	ck_assert_int_gt(disk, 0);
	return disk;
}

START_TEST(max_size_evicts_least_recent_but_not_pinned)
{
	char keys[LRU_PROGRAMS][72], probe[72], max[32];
	struct kiln *k = NULL;
	int64_t entry, limit;
	cJSON *ls, *st;

	/* Learn what the cache and one entry take on disk (the index grows
	 * with each entry too), then restart with room for about three. */
	harness_start(NULL);
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	harness_get_program(k, "size_probe", 1, "it:probe", probe);
	kiln_close(k);
	entry = largest_entry_disk();
	limit = settled_disk() + 4 * entry;
	harness_stop();
	snprintf(max, sizeof(max), "%" PRId64, limit);
	harness_start("--max-size", max, NULL);

	/* Last use is kept in seconds: a pause between uses makes their order
	 * unambiguous. */
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	harness_sleep_ms(1100);
	harness_get_program(k, "lru_0", 400, "it:lru:0", keys[0]);
	cli_ok("pin", "it:lru:0", NULL);
	for (int i = 1; i < LRU_PROGRAMS; i++) {
		char name[32], alias[32];

		harness_sleep_ms(1100);
		snprintf(name, sizeof(name), "lru_%d", i);
		snprintf(alias, sizeof(alias), "it:lru:%d", i);
		harness_get_program(k, name, 400 + i, alias, keys[i]);
	}
	kiln_close(k);

	/* Eviction runs in the background after a publish: wait for it. The
	 * budget is the whole directory, index and logs included. */
	for (int tries = 0;; tries++) {
		int64_t disk;

		st = harness_status();
		disk = harness_num(st, "disk_bytes");
		cJSON_Delete(st);
		if (disk <= limit)
			break;
		ck_assert_msg(tries < 600, "the cache still takes %lld bytes after 30 s, over %lld",
			      (long long)disk, (long long)limit);
		harness_sleep_ms(50);
	}
	ck_assert_int_le(du_cache(), limit);
	ls = harness_cli_json("ls", NULL);
	ck_assert_msg(harness_find_entry(ls, "key", keys[0]) != NULL, "the pinned entry was evicted");
	ck_assert_msg(harness_find_entry(ls, "key", keys[LRU_PROGRAMS - 1]) != NULL,
		      "the most recent entry was evicted");
	ck_assert_msg(harness_find_entry(ls, "key", probe) == NULL, "the least recent entry was kept");
	ck_assert_msg(harness_find_entry(ls, "key", keys[1]) == NULL, "the least recent unpinned entry was kept");
	ck_assert_int_le(cJSON_GetArraySize(ls), 3);
	cJSON_Delete(ls);
	harness_stop();
}
END_TEST

/* A use made just before an eviction counts: the entry used last stays. */
START_TEST(gc_counts_a_use_just_made)
{
	char key_a[72], key_b[72], max[32];
	struct harness_result r;
	struct kiln *k = NULL;
	cJSON *ls;

	harness_start(NULL);
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	harness_get_program(k, "recent_a", 500, "it:recent:a", key_a);
	/* Last use is kept in seconds: a pause makes the order unambiguous. */
	harness_sleep_ms(1100);
	harness_get_program(k, "recent_b", 501, "it:recent:b", key_b);
	kiln_close(k);
	/* Room for all but one entry, the index as it is now. */
	snprintf(max, sizeof(max), "%" PRId64, settled_disk() - largest_entry_disk() / 2);
	harness_sleep_ms(1100);

	/* Now A is used again, so B is the least recently used; the use is
	 * not written yet when gc runs. */
	r = harness_in_child(NULL, "it:recent:a");
	ck_assert_msg(r.rc == KILN_OK, "lookup: %s: %s", kiln_strerror(r.rc), r.msg);
	cli_ok("gc", "--max-size", max);

	ls = harness_cli_json("ls", NULL);
	ck_assert_int_eq(cJSON_GetArraySize(ls), 1);
	ck_assert_msg(harness_find_entry(ls, "key", key_a) != NULL,
		      "gc evicted the entry used last and kept the least recently used one");
	cJSON_Delete(ls);
	harness_stop();
}
END_TEST

/* True when this process has a file of that inode mapped. */
static bool mapped_here(const char *path)
{
	char line[4600];
	struct stat st;
	bool found = false;
	FILE *f = fopen("/proc/self/maps", "r");

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(stat(path, &st), 0);
	while (!found && fgets(line, sizeof(line), f) != NULL) {
		unsigned long ino = 0;
		if (sscanf(line, "%*s %*s %*s %*s %lu", &ino) == 1 && ino == (unsigned long)st.st_ino)
			found = true;
	}
	fclose(f);
	return found;
}

/* kiln_get_file gets the artifact without loading it: its descriptor and
 * path, no symbol, nothing mapped, no load counted; a later kiln_get of
 * the same request loads that same program. */
START_TEST(get_file_does_not_load)
{
	char *text = harness_program("fileonly", 7);
	struct kiln_request req;
	struct kiln_source src;
	struct kiln_program *p, *q;
	struct kiln_stats stats;
	struct stat fst, pst;
	struct kiln *k;
	int (*fn)(void);

	harness_start(NULL);
	harness_request(&req, &src, "prog.c", text);
	req.alias = "test:fileonly";
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	ck_assert_msg(kiln_get_file(k, &req, &p) == KILN_OK, "%s", kiln_errmsg(k));
	ck_assert_int_eq(fstat(kiln_program_fd(p), &fst), 0);
	ck_assert_int_eq(stat(kiln_program_path(p), &pst), 0);
	ck_assert(S_ISREG(fst.st_mode) && fst.st_ino == pst.st_ino && fst.st_size > 0);
	ck_assert_ptr_null(kiln_sym(p, "kiln_test_value"));
	ck_assert(!mapped_here(kiln_program_path(p)));
	kiln_get_stats(k, &stats);
	ck_assert_uint_eq(stats.loads, 0);

	ck_assert_int_eq(kiln_get(k, &req, &q), KILN_OK);
	ck_assert_ptr_eq(p, q);
	*(void **)&fn = kiln_sym(q, "kiln_test_value");
	ck_assert_ptr_nonnull(fn);
	ck_assert_int_eq(fn(), 7);
	ck_assert(mapped_here(kiln_program_path(q)));
	kiln_get_stats(k, &stats);
	ck_assert_uint_eq(stats.loads, 1);
	/* Loaded, the alias is now a process-local hit. */
	ck_assert_int_eq(kiln_get(k, &req, &q), KILN_OK);
	kiln_get_stats(k, &stats);
	ck_assert_uint_eq(stats.local_hits, 1);
	kiln_close(k);
	harness_stop();
	free(text);
}
END_TEST

static const char counter_text[] = "int counter;\nint bump(void) { return ++counter; }\n";

static int bump(struct kiln_program *p)
{
	int (*fn)(void);
	*(void **)&fn = kiln_sym(p, "bump");
	ck_assert_ptr_nonnull(fn);
	return fn();
}

/* kiln_release counts references: the last one unloads the program (its
 * alias leaves the fast path, kiln_sym answers NULL), a second release of
 * nothing is EINVAL, and a later get loads a fresh copy, fresh globals. */
START_TEST(release_unloads_at_the_last_reference)
{
	struct kiln_request req;
	struct kiln_source src;
	struct kiln_program *p, *q, *f;
	struct kiln_stats stats;
	struct kiln *k;

	harness_start(NULL);
	harness_request(&req, &src, "counter.c", counter_text);
	req.alias = "test:counter";
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	ck_assert_msg(kiln_get(k, &req, &p) == KILN_OK, "%s", kiln_errmsg(k));
	ck_assert_int_eq(kiln_get(k, &req, &q), KILN_OK);
	ck_assert_ptr_eq(p, q);
	ck_assert_int_eq(bump(p), 1);
	ck_assert_int_eq(bump(q), 2);

	ck_assert_int_eq(kiln_release(k, q), KILN_OK);
	ck_assert(kiln_program_loaded(p) && mapped_here(kiln_program_path(p)));
	ck_assert_int_eq(bump(p), 3);
	ck_assert_int_eq(kiln_release(k, p), KILN_OK);
	ck_assert(!kiln_program_loaded(p));
	ck_assert(!mapped_here(kiln_program_path(p)));
	ck_assert_ptr_null(kiln_sym(p, "bump"));
	ck_assert_str_eq(kiln_program_output(p), "shared");
	ck_assert_int_eq(strlen(kiln_program_key(p)), 64);
	ck_assert_int_eq(kiln_release(k, p), KILN_EINVAL);
	ck_assert_ptr_nonnull(strstr(kiln_errmsg(k), "holds no reference"));

	kiln_get_stats(k, &stats);
	uint64_t hits = stats.local_hits;
	ck_assert_int_eq(kiln_get(k, &req, &q), KILN_OK);
	kiln_get_stats(k, &stats);
	ck_assert_uint_eq(stats.local_hits, hits);   /* the alias had left */
	ck_assert_uint_eq(stats.loads, 2);
	ck_assert_int_eq(bump(q), 1);                /* a fresh copy */
	ck_assert_int_eq(kiln_release(k, q), KILN_OK);

	/* A program got as a file holds no reference. */
	ck_assert_int_eq(kiln_get_file(k, &req, &f), KILN_OK);
	ck_assert_int_eq(kiln_release(k, f), KILN_EINVAL);
	kiln_close(k);
	harness_stop();
}
END_TEST

/* kiln_lookup_file: the alias's program as a file, not loaded; with a
 * toolchain, only an entry that toolchain as kilnd has it now built: after a
 * restart with another cc, the alias misses for "cc" (a plain lookup, which
 * knows no toolchain, still answers). */
START_TEST(lookup_file_checks_the_toolchain)
{
	struct kiln_request req;
	struct kiln_source src;
	struct kiln_program *p, *q;
	struct kiln *k;
	char wrapper[HARNESS_PATH], log[HARNESS_PATH], toolchain[HARNESS_PATH + 8];

	harness_start(NULL);
	harness_request(&req, &src, "counter.c", counter_text);
	req.alias = "test:lookup-file";
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	ck_assert_int_eq(kiln_get_file(k, &req, &p), KILN_OK);
	ck_assert_msg(kiln_lookup_file(k, "test:lookup-file", "cc", &q) == KILN_OK, "%s",
		      kiln_errmsg(k));
	ck_assert_ptr_eq(p, q);
	ck_assert(!kiln_program_loaded(q));
	ck_assert_int_eq(kiln_lookup_file(k, "test:lookup-file", NULL, &q), KILN_OK);
	ck_assert_int_eq(kiln_lookup_file(k, "test:lookup-file", "c++", &q), KILN_ENOTFOUND);
	ck_assert_int_eq(kiln_lookup_file(k, "test:lookup-file", "nosuch", &q), KILN_ENOTFOUND);
	ck_assert_int_eq(kiln_lookup_file(k, "test:lookup-file", "bad name!", &q), KILN_EINVAL);
	ck_assert_int_eq(kiln_lookup_file(k, "test:no-such-alias", "cc", &q), KILN_ENOTFOUND);
	kiln_close(k);
	harness_stop();

	harness_write_wrapper(harness_path(wrapper, "cc-wrapper"), harness_path(log, "wrapper.log"),
			      NULL, 0);
	snprintf(toolchain, sizeof(toolchain), "cc=%s", wrapper);
	harness_start("--toolchain", toolchain, NULL);
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	ck_assert_int_eq(kiln_lookup_file(k, "test:lookup-file", "cc", &q), KILN_ENOTFOUND);
	ck_assert_int_eq(kiln_lookup_file(k, "test:lookup-file", NULL, &q), KILN_OK);
	kiln_close(k);
	harness_stop();
}
END_TEST

struct churn {
	struct kiln *k;
	const struct kiln_request *req;
	int bad;
};

static void *churn_thread(void *arg)
{
	struct churn *c = arg;
	for (int i = 0; i < 300; i++) {
		struct kiln_program *p = NULL;
		int (*fn)(void);
		if (kiln_get(c->k, c->req, &p) != KILN_OK) {
			c->bad++;
			continue;
		}
		*(void **)&fn = kiln_sym(p, "bump");
		if (fn == NULL || fn() < 1)
			c->bad++;
		if (kiln_release(c->k, p) != KILN_OK)
			c->bad++;
	}
	return NULL;
}

/* Threads that get, call and release one program at once: whoever holds a
 * reference always has it loaded. */
START_TEST(release_races_with_gets)
{
	struct kiln_request req;
	struct kiln_source src;
	struct kiln *k;
	pthread_t t[4];
	struct churn c[4];

	harness_start(NULL);
	harness_request(&req, &src, "counter.c", counter_text);
	req.alias = "test:churn";
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	for (int i = 0; i < 4; i++) {
		c[i] = (struct churn){ .k = k, .req = &req };
		ck_assert_int_eq(pthread_create(&t[i], NULL, churn_thread, &c[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		ck_assert_int_eq(c[i].bad, 0);
	}
	kiln_close(k);
	harness_stop();
}
END_TEST

static int64_t status_requests(void)
{
	cJSON *st = harness_status();
	int64_t n = harness_num(st, "requests");

	cJSON_Delete(st);
	return n;
}

START_TEST(alias_fast_path_makes_no_ipc)
{
	char *text = harness_program("fast", 77);
	struct kiln_stats s0, s1;
	struct kiln_request req;
	struct kiln_source src;
	struct kiln_program *p0 = NULL, *p = NULL;
	struct kiln *k = NULL;
	int64_t r0, r1, r2, per_status;
	int (*fn)(void);
	int rc;

	harness_start(NULL);
	harness_request(&req, &src, "fast.c", text);
	req.alias = "it:fast";
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	rc = kiln_get(k, &req, &p0);
	ck_assert_msg(rc == KILN_OK, "kiln_get: %s: %s", kiln_strerror(rc), kiln_errmsg(k));
	kiln_get_stats(k, &s0);

	/* What one "kiln status" adds to the daemon's request counter. */
	r0 = status_requests();
	r1 = status_requests();
	per_status = r1 - r0;
	ck_assert_int_gt(per_status, 0);

	for (int i = 0; i < FAST_LOOKUPS; i++) {
		rc = kiln_lookup(k, "it:fast", &p);
		ck_assert_msg(rc == KILN_OK, "kiln_lookup %d: %s", i, kiln_strerror(rc));
		ck_assert_ptr_eq(p, p0);
	}
	/* A repeated get with the alias is local as well. */
	ck_assert_int_eq(kiln_get(k, &req, &p), KILN_OK);
	ck_assert_ptr_eq(p, p0);
	kiln_get_stats(k, &s1);
	ck_assert_uint_eq(s1.requests, s0.requests);
	ck_assert_uint_eq(s1.local_hits - s0.local_hits, FAST_LOOKUPS + 1);
	ck_assert_uint_eq(s1.loads, s0.loads);

	r2 = status_requests();
	ck_assert_msg(r2 - r1 == per_status,
		      "the daemon counted %lld requests during local lookups (status adds %lld)",
		      (long long)(r2 - r1), (long long)per_status);
	*(void **)&fn = kiln_sym(p, "kiln_test_value");
	ck_assert_ptr_nonnull(fn);
	ck_assert_int_eq(fn(), 77);
	kiln_close(k);
	harness_stop();
	free(text);
}
END_TEST

/* A fresh process's view: a new handle, so nothing is answered locally. */
static int fresh_value(const char *alias, int *value)
{
	struct kiln_program *p = NULL;
	struct kiln *k = NULL;
	int (*fn)(void);
	int rc;

	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	rc = kiln_lookup(k, alias, &p);
	if (rc == KILN_OK) {
		*(void **)&fn = kiln_sym(p, "kiln_test_value");
		ck_assert_ptr_nonnull(fn);
		*value = fn();
	}
	kiln_close(k);
	return rc;
}

/*
 * kilnd keeps hits in memory (store/store_hot.c); every change of the index
 * must show at once: a removed entry is a miss and is rebuilt, an alias that
 * moves answers with its new target (and back, when a hit of the old target
 * takes it back), a miss turns into a hit once built.
 */
/* Gets program name (returning value) with alias it:hot on a connection of
 * its own, then, unless expect is 0, asks a fresh process what it:hot loads:
 * it must be expect. */
static void hot_get(const char *name, int value, char *key, int expect)
{
	struct kiln *k = NULL;
	int got = 0;
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	harness_get_program(k, name, value, "it:hot", key);
	kiln_close(k);
	if (expect != 0) {
		ck_assert_int_eq(fresh_value("it:hot", &got), KILN_OK);
		ck_assert_int_eq(got, expect);
	}
}

START_TEST(daemon_hit_cache_follows_changes)
{
	char key_a[72], key_b[72];
	int value = 0;
	cJSON *st;

	harness_start(NULL);
	/* A cached miss first: the alias does not exist yet. */
	ck_assert_int_eq(fresh_value("it:hot", &value), KILN_ENOTFOUND);
	hot_get("hot_a", 501, key_a, 501);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(fresh_value("it:hot", &value), KILN_OK);
		ck_assert_int_eq(value, 501);
	}
	/* A hit of the same program: its answer (which names its newest alias,
	 * it:hot) is cached. */
	hot_get("hot_a", 501, key_a, 0);
	/* The alias moves to another program. */
	hot_get("hot_b", 502, key_b, 502);
	/* Back to the first (an edit reverted): a hit, and the alias follows it
	 * back. The first program's cached answer must not still say it:hot. */
	hot_get("hot_a", 501, key_a, 501);
	/* And forth again. */
	hot_get("hot_b", 502, key_b, 502);
	/* Removed: a lookup misses, and the same get builds it again. */
	cli_ok("rm", key_b, NULL);
	ck_assert_int_eq(fresh_value("it:hot", &value), KILN_ENOTFOUND);
	hot_get("hot_b", 502, key_b, 502);
	st = harness_status();
	ck_assert_int_eq(harness_num(st, "builds_started"), 3);
	cJSON_Delete(st);
	harness_stop();
}
END_TEST

/*
 * kilnd prints the reply to a hit itself (not through cJSON): a cache path
 * with a quote, a backslash, a space and non-ASCII must come back intact.
 * The space also reaches the linker's dependency file, which does not
 * escape it: the entry must still be a hit.
 */
START_TEST(hit_reply_escapes_the_path)
{
	char key[72], prefix[HARNESS_PATH + 32];
	struct kiln_program *p = NULL;
	struct kiln *k = NULL;
	int value = 0;

	harness_path(harness.cache, "my ca\"che\\\xc3\xa9");
	harness_start(NULL);
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	harness_get_program(k, "odd_path", 611, "it:odd", key);
	kiln_close(k);
	/* A fresh process: the hit reply names the object under that path. */
	ck_assert_int_eq(fresh_value("it:odd", &value), KILN_OK);
	ck_assert_int_eq(value, 611);
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	ck_assert_int_eq(kiln_lookup(k, "it:odd", &p), KILN_OK);
	snprintf(prefix, sizeof(prefix), "%s/", harness.cache);
	ck_assert_msg(strncmp(kiln_program_path(p), prefix, strlen(prefix)) == 0,
		      "path %s is not under %s", kiln_program_path(p), prefix);
	ck_assert_ptr_nonnull(strstr(kiln_program_path(p), key));
	kiln_close(k);
	/* lld escapes the space in its dependency file (GNU ld does not). */
	if (access("/usr/bin/ld.lld", X_OK) == 0) {
		char src[HARNESS_PATH], *text = harness_program("odd_lld", 612);

		harness_path(src, "lld.c");
		harness_write_file(src, text);
		free(text);
		char *out, *err;
		int rc = harness_cli(&out, &err, "build", "--alias", "it:odd-lld", src, "--",
				     "-fuse-ld=lld", NULL);
		ck_assert_msg(rc == 0, "kiln build with lld exited with %d: %s", rc, err);
		free(out);
		free(err);
		ck_assert_int_eq(fresh_value("it:odd-lld", &value), KILN_OK);
		ck_assert_int_eq(value, 612);
	}
	harness_stop();
}
END_TEST

#define WIDE_BATCH 61

/*
 * A warm batch larger than the descriptors one sendmsg carries: every
 * program still arrives with its own descriptor (kilnd sends several per
 * write, libkiln pairs them with replies in order). And the warm batch goes
 * by digest alone: libkiln hashes its sources two at a time (an odd number
 * here, so one alone), and a wrong digest would be a miss answered
 * need_sources.
 */
START_TEST(warm_batch_pairs_descriptors_with_replies)
{
	struct kiln_request reqs[WIDE_BATCH];
	struct kiln_source srcs[WIDE_BATCH];
	char *texts[WIDE_BATCH];

	harness_start("--jobs", "2", NULL);
	harness_requests(WIDE_BATCH, "wide", 3000, "wide.c", reqs, srcs, texts);
	/* Cold in one process, then warm in a fresh one (no local hits). */
	harness_get_many_values(reqs, WIDE_BATCH, 3000, "cold");
	harness_get_many_values(reqs, WIDE_BATCH, 3000, "warm");
	cJSON *st = harness_status();
	ck_assert_int_eq(harness_num(st, "builds_started"), WIDE_BATCH);
	ck_assert_int_ge(harness_num(st, "hits"), WIDE_BATCH);
	ck_assert_int_eq(harness_num(st, "need_sources"), WIDE_BATCH);
	cJSON_Delete(st);
	harness_stop();
	for (int i = 0; i < WIDE_BATCH; i++)
		free(texts[i]);
}
END_TEST

/* kiln config: the size to keep, in the cache's kiln.conf. */
START_TEST(config_max_size_is_kept_in_the_cache)
{
	char path[HARNESS_PATH], key[72], *out = NULL, *err = NULL, *text;
	/* Without kilnd: written to <cache>/kiln.conf, read by the next kilnd. */
	ck_assert_int_eq(harness_cli(NULL, &err, "config", NULL), 1);   /* no such cache */
	ck_assert_msg(harness_contains(err, "does not exist"), "%s", err);
	free(err);
	ck_assert_int_eq(mkdir(harness.cache, 0700), 0);
	ck_assert_int_eq(harness_cli(&out, NULL, "config", NULL), 0);
	ck_assert_msg(harness_contains(out, "not set"), "%s", out);
	free(out);
	ck_assert_int_eq(harness_cli(NULL, NULL, "config", "max-size", "20G", NULL), 0);
	text = harness_read_file(harness_path(path, "cache/kiln.conf"));
	ck_assert_msg(harness_contains(text, "max-size = 20G\n"), "%s", text);
	free(text);
	ck_assert_int_eq(harness_cli(NULL, NULL, "config", "max-size", "12x", NULL), 2);
	ck_assert_int_eq(harness_cli(NULL, &err, "config", "max_size", "1G", NULL), 2);
	ck_assert_msg(harness_contains(err, "unknown setting \"max_size\""), "%s", err);
	free(err);
	harness_start(NULL);
	cJSON *st = harness_status();
	ck_assert_int_eq(harness_num(st, "max_size"), (int64_t)20 << 30);
	ck_assert_str_eq(harness_str(st, "max_size_source"), "kiln.conf");
	cJSON_Delete(st);
	/* With kilnd: applied at once, evicting what is over. */
	harness_get_program(NULL, "big", 1, NULL, key);
	cJSON *r = harness_cli_json("config", "max-size", "1", NULL);
	ck_assert_int_eq(harness_num(r, "max_size"), 1);
	ck_assert_int_eq(harness_num(r, "saved_max_size"), 1);
	cJSON_Delete(r);
	harness_wait_status("entries", 0, 30);
	ck_assert_int_eq(harness_status_num_at(harness.socket, "evicted"), 1);
	r = harness_cli_json("config", "--unset", "max-size", NULL);
	ck_assert_int_eq(harness_num(r, "max_size"), (int64_t)10 << 30);
	ck_assert_str_eq(harness_str(r, "max_size_source"), "default");
	ck_assert(cJSON_IsNull(cJSON_GetObjectItem(r, "saved_max_size")));
	cJSON_Delete(r);
	harness_stop();
	/* --max-size wins over kiln.conf, and kiln config says so. */
	ck_assert_int_eq(harness_cli(NULL, NULL, "config", "max-size", "2G", NULL), 0);
	harness_start("--max-size", "5G", NULL);
	ck_assert_int_eq(harness_cli(&out, NULL, "config", NULL), 0);
	ck_assert_msg(harness_contains(out, "max-size = 2 GiB") && harness_contains(out, "wins"),
		      "%s", out);
	free(out);
	ck_assert_int_eq(harness_status_num_at(harness.socket, "max_size"), (int64_t)5 << 30);
	harness_stop();
	/* A kiln.conf that does not parse: kilnd starts on the defaults and
	 * says so; kiln config names the line. */
	harness_write_file(path, "max-size = 20G\nmax-sise = 1G\n");
	harness_start(NULL);
	ck_assert_int_eq(harness_status_num_at(harness.socket, "max_size"), (int64_t)10 << 30);
	harness_stop();
	text = harness_read_file(harness.log);
	ck_assert_msg(harness_contains(text, "line 2: unknown setting \"max-sise\""), "%s", text);
	free(text);
	ck_assert_int_eq(harness_cli(NULL, &err, "config", NULL), 1);
	ck_assert_msg(harness_contains(err, "line 2"), "%s", err);
	free(err);
	/* Setting a value replaces it, and says what was wrong (offline, then
	 * through kilnd, which logs it). */
	ck_assert_int_eq(harness_cli(NULL, &err, "config", "max-size", "3G", NULL), 0);
	ck_assert_msg(harness_contains(err, "line 2") && harness_contains(err, "written anew"),
		      "%s", err);
	free(err);
	harness_write_file(path, "max-size = 20G\nmax-sise = 1G\n");
	harness_start(NULL);
	r = harness_cli_json("config", "max-size", "4G", NULL);
	ck_assert_int_eq(harness_num(r, "saved_max_size"), (int64_t)4 << 30);
	cJSON_Delete(r);
	/* A kiln.conf that cannot be written (here a directory in its place):
	 * a clear error, and kilnd goes on with the size it had. */
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	ck_assert_int_eq(harness_cli(NULL, &err, "config", "max-size", "6G", NULL), 1);
	ck_assert_msg(harness_contains(err, "kiln.conf"), "%s", err);
	free(err);
	ck_assert_int_eq(harness_status_num_at(harness.socket, "max_size"), (int64_t)4 << 30);
	harness_stop();
	text = harness_read_file(harness.log);
	ck_assert_msg(harness_contains(text, "written anew"), "%s", text);
	free(text);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cache");
	suite_add_tcase(s, harness_tcase("config", config_max_size_is_kept_in_the_cache, 90));

	suite_add_tcase(s, harness_tcase("gc_pins", gc_to_tiny_size_keeps_pinned, 90));
	suite_add_tcase(s, harness_tcase("get_file", get_file_does_not_load, 60));
	suite_add_tcase(s, harness_tcase("release", release_unloads_at_the_last_reference, 60));
	suite_add_tcase(s, harness_tcase("release_races", release_races_with_gets, 120));
	suite_add_tcase(s, harness_tcase("lookup_file", lookup_file_checks_the_toolchain, 60));
	suite_add_tcase(s, harness_tcase("max_size", max_size_evicts_least_recent_but_not_pinned, 90));
	suite_add_tcase(s, harness_tcase("recent_use", gc_counts_a_use_just_made, 60));
	suite_add_tcase(s, harness_tcase("fast_path", alias_fast_path_makes_no_ipc, 60));
	suite_add_tcase(s, harness_tcase("hit_cache", daemon_hit_cache_follows_changes, 60));
	suite_add_tcase(s, harness_tcase("odd_path", hit_reply_escapes_the_path, 60));
	suite_add_tcase(s, harness_tcase("wide_batch", warm_batch_pairs_descriptors_with_replies, 180));
	return harness_main(s);
}
