/*
 * Integration tests of the cache across daemon lifetimes: a restart keeps
 * every entry, a kill -9 during builds leaves nothing partial and no orphan
 * compiler, a changed header is a miss, and a kilnd started elsewhere (its
 * first start directory deleted) still has every entry.
 */
#include "harness.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RESTART_PROGRAMS 3
#define SLOW_PROGRAMS 4

/* Every object file under <cache>/objects belongs to an entry of ls. */
static void check_objects_indexed(const cJSON *ls)
{
	char objects[HARNESS_PATH], sub[HARNESS_PATH * 2];
	DIR *d = opendir(harness_path(objects, "cache/objects"));
	struct dirent *de;

	ck_assert_msg(d != NULL, "no %s", objects);
	while ((de = readdir(d)) != NULL) {
		DIR *sd;
		struct dirent *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", objects, de->d_name);
		sd = opendir(sub);
		if (!sd)
			continue;
		while ((f = readdir(sd)) != NULL) {
			size_t len = strlen(f->d_name);
			char key[72];

			if (len != 64 + 3 || strcmp(f->d_name + 64, ".so") != 0)
				continue;
			snprintf(key, sizeof(key), "%.64s", f->d_name);
			ck_assert_msg(harness_find_entry(ls, "key", key) != NULL,
				      "object %s/%s is not indexed", sub, f->d_name);
		}
		closedir(sd);
	}
	closedir(d);
}

START_TEST(restart_keeps_every_entry)
{
	char keys[RESTART_PROGRAMS][72];
	struct kiln *k = NULL;
	cJSON *ls, *st;

	harness_start(NULL);
	for (int i = 0; i < RESTART_PROGRAMS; i++) {
		char name[32], alias[32];

		snprintf(name, sizeof(name), "restart_%d", i);
		snprintf(alias, sizeof(alias), "it:restart:%d", i);
		harness_get_program(NULL, name, 100 + i, alias, keys[i]);
	}
	harness_stop();

	harness_start(NULL);
	ls = harness_cli_json("ls", NULL);
	ck_assert_int_eq(cJSON_GetArraySize(ls), RESTART_PROGRAMS);
	for (int i = 0; i < RESTART_PROGRAMS; i++) {
		const cJSON *e = harness_find_entry(ls, "key", keys[i]);
		char alias[32], label[32];

		snprintf(alias, sizeof(alias), "it:restart:%d", i);
		snprintf(label, sizeof(label), "restart_%d", i);
		ck_assert_msg(e != NULL, "entry %s is gone after the restart", keys[i]);
		ck_assert_str_eq(harness_str(e, "alias"), alias);
		ck_assert_str_eq(harness_str(e, "label"), label);
		ck_assert(harness_exists(harness_str(e, "path")));
	}
	cJSON_Delete(ls);

	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	for (int i = 0; i < RESTART_PROGRAMS; i++) {
		struct kiln_program *p = NULL;
		char alias[32];
		int (*fn)(void);
		int rc;

		snprintf(alias, sizeof(alias), "it:restart:%d", i);
		rc = kiln_lookup(k, alias, &p);
		ck_assert_msg(rc == KILN_OK, "kiln_lookup %s after the restart: %s: %s", alias,
			      kiln_strerror(rc), kiln_errmsg(k));
		ck_assert_str_eq(kiln_program_key(p), keys[i]);
		*(void **)&fn = kiln_sym(p, "kiln_test_value");
		ck_assert_ptr_nonnull(fn);
		ck_assert_int_eq(fn(), 100 + i);
	}
	kiln_close(k);
	st = harness_status();
	/* The counters are kept across the restart: the first run's builds,
	 * and no new one. */
	ck_assert_int_eq(harness_num(st, "builds_started"), RESTART_PROGRAMS);
	ck_assert_int_eq(harness_num(st, "hits"), RESTART_PROGRAMS);
	ck_assert_int_eq(harness_num(st, "entries"), RESTART_PROGRAMS);
	cJSON_Delete(st);
	harness_stop();
}
END_TEST

START_TEST(kill9_during_builds_leaves_nothing_partial)
{
	char wrapper[HARNESS_PATH], log[HARNESS_PATH], gate[HARNESS_PATH], tmp[HARNESS_PATH];
	char slow[HARNESS_PATH + 8], done[2][72];
	const char *args[] = { "--jobs", "2", "--toolchain", "cc=/usr/bin/cc", "--toolchain", slow,
			       NULL };
	struct kiln_request reqs[SLOW_PROGRAMS];
	struct kiln_source srcs[SLOW_PROGRAMS];
	char *texts[SLOW_PROGRAMS];
	struct harness_wrapper_log wl;
	struct harness_fleet *f;
	pid_t pids[8];
	cJSON *ls, *e;
	int n;

	/* The gate never opens: the slow compilers run until someone kills them. */
	harness_write_wrapper(harness_path(wrapper, "cc-wrapper"), harness_path(log, "wrapper.log"),
			      harness_path(gate, "gate"), 0);
	snprintf(slow, sizeof(slow), "slow=%s", wrapper);
	harness_startv(args);
	harness_get_program(NULL, "finished_0", 10, "it:finished:0", done[0]);
	harness_get_program(NULL, "finished_1", 11, "it:finished:1", done[1]);
	for (int i = 0; i < SLOW_PROGRAMS; i++) {
		char name[32];

		snprintf(name, sizeof(name), "slow_%d", i);
		texts[i] = harness_program(name, 20 + i);
		harness_request(&reqs[i], &srcs[i], "slow.c", texts[i]);
		reqs[i].toolchain = "slow";
	}
	f = harness_fleet_start(SLOW_PROGRAMS, &(struct harness_fleet_opts){
		.socket = harness.socket, .reqs = reqs, .nreqs = SLOW_PROGRAMS });
	/* Two compilers run and two builds wait for a slot. */
	harness_wait_wrapper_starts(log, 2, 60);
	harness_wait_status("queued", 2, 60);
	harness_kill9();

	harness_fleet_wait(f, 60);
	for (int i = 0; i < SLOW_PROGRAMS; i++)
		ck_assert_msg(f->results[i].rc != KILN_OK,
			      "client %d got a program from a killed daemon", i);
	harness_wrapper_log_read(log, &wl);
	ck_assert_int_eq(wl.starts, 2);
	for (int i = 0; i < wl.npids; i++)
		ck_assert_msg(harness_wait_gone(wl.pids[i], 10),
			      "compiler pid %d still runs 10 s after kill -9 of kilnd", (int)wl.pids[i]);
	/* Their supervisors are gone as well. */
	for (int tries = 0; (n = harness_find_procs(harness_kiln_exec(), pids, 8)) > 0; tries++) {
		ck_assert_msg(tries < 200, "kiln-exec pid %d still runs 10 s after kill -9 of kilnd",
			      (int)pids[0]);
		harness_sleep_ms(50);
	}

	harness_startv(args);
	n = harness_count_dir(harness_path(tmp, "cache/tmp"));
	ck_assert_msg(n <= 0, "%d leftovers in %s after the restart", n, tmp);
	ls = harness_cli_json("ls", NULL);
	ck_assert_int_eq(cJSON_GetArraySize(ls), 2);
	ck_assert_ptr_nonnull(harness_find_entry(ls, "key", done[0]));
	ck_assert_ptr_nonnull(harness_find_entry(ls, "key", done[1]));
	check_objects_indexed(ls);
	cJSON_ArrayForEach(e, ls) {
		const char *path = harness_str(e, "path");
		struct stat st;
		void *h;
		int (*fn)(void);

		ck_assert_msg(stat(path, &st) == 0, "indexed object %s is missing", path);
		ck_assert_int_eq(st.st_size, harness_num(e, "size"));
		h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		ck_assert_msg(h != NULL, "indexed object does not load: %s", dlerror());
		*(void **)&fn = dlsym(h, "kiln_test_value");
		ck_assert_ptr_nonnull(fn);
		ck_assert_int_ge(fn(), 10);
		dlclose(h);
	}
	cJSON_Delete(ls);
	harness_fleet_free(f);
	harness_stop();
	for (int i = 0; i < SLOW_PROGRAMS; i++)
		free(texts[i]);
}
END_TEST

/* Losing the index, an object or a build directory is repaired on start. */
START_TEST(restart_reconciles_a_damaged_cache)
{
	char keys[3][72], path[HARNESS_PATH], lost[HARNESS_PATH];
	cJSON *ls, *show;
	int n;

	harness_start(NULL);
	harness_get_program(NULL, "reconcile_0", 60, "it:reconcile:0", keys[0]);
	harness_get_program(NULL, "reconcile_1", 61, "it:reconcile:1", keys[1]);
	harness_get_program(NULL, "reconcile_2", 62, "it:reconcile:2", keys[2]);
	show = harness_cli_json("show", keys[1], NULL);
	snprintf(lost, sizeof(lost), "%s", harness_str(show, "path"));
	cJSON_Delete(show);
	harness_stop();

	/* One object gone, the whole index gone, a stale build directory. */
	ck_assert_int_eq(unlink(lost), 0);
	ck_assert_int_eq(unlink(harness_path(path, "cache/index.db")), 0);
	unlink(harness_path(path, "cache/index.db-wal"));
	unlink(harness_path(path, "cache/index.db-shm"));
	ck_assert_int_eq(mkdir(harness_path(path, "cache/tmp/stale-build"), 0700), 0);
	harness_write_file(harness_path(path, "cache/tmp/stale-build/half.so"), "not an object");

	harness_start(NULL);
	n = harness_count_dir(harness_path(path, "cache/tmp"));
	ck_assert_msg(n <= 0, "%d leftovers in %s after the restart", n, path);
	/* A new index: the rest is checked in the background while kilnd serves. */
	harness_wait_cache_checked(60);
	ls = harness_cli_json("ls", NULL);
	ck_assert_msg(harness_find_entry(ls, "key", keys[0]) != NULL, "entry 0 was not adopted from its object");
	ck_assert_msg(harness_find_entry(ls, "key", keys[2]) != NULL, "entry 2 was not adopted from its object");
	ck_assert_msg(harness_find_entry(ls, "key", keys[1]) == NULL, "the entry whose object is gone is listed");
	ck_assert_int_eq(cJSON_GetArraySize(ls), 2);
	check_objects_indexed(ls);
	cJSON_Delete(ls);
	harness_stop();
}
END_TEST

/* Gets the header test's program in a separate process (a fresh
 * process-local table); returns its value and copies its key. */
static int get_cfg_program(const struct kiln_request *req, char key[72])
{
	struct harness_result r = harness_in_child(req, NULL);

	ck_assert_msg(r.rc == KILN_OK, "get failed in %s with %s: %s", r.stage,
		      kiln_strerror(r.rc), r.msg);
	snprintf(key, 72, "%s", r.key);
	return r.value;
}

static int64_t builds_started(void)
{
	cJSON *st = harness_status();
	int64_t n = harness_num(st, "builds_started");

	cJSON_Delete(st);
	return n;
}

/* cfg.c, which returns KILN_CFG_VALUE from inc/cfg.h, asked with -Iinc. */
struct cfg_prog {
	char inc[HARNESS_PATH], hdr[HARNESS_PATH], incarg[HARNESS_PATH + 4];
	const char *args[1];
	struct kiln_request req;
	struct kiln_source src;
};

static void cfg_prog_init(struct cfg_prog *p, const char *text, int value)
{
	char def[64];
	ck_assert_int_eq(mkdir(harness_path(p->inc, "inc"), 0700), 0);
	snprintf(def, sizeof(def), "#define KILN_CFG_VALUE %d\n", value);
	harness_write_file(harness_path(p->hdr, "inc/cfg.h"), def);
	snprintf(p->incarg, sizeof(p->incarg), "-I%s", p->inc);
	p->args[0] = p->incarg;
	harness_request(&p->req, &p->src, "cfg.c", text);
	p->req.args = p->args;
	p->req.nargs = 1;
}

START_TEST(changed_header_is_a_miss)
{
	static const char text[] =
		"#include \"cfg.h\"\n"
		"\n"
		"int kiln_test_value(void)\n"
		"{\n"
		"\treturn KILN_CFG_VALUE;\n"
		"}\n";
	char key1[72], key2[72], key3[72];
	struct cfg_prog p;
	struct kiln_request *rq = &p.req;
	const char *hdr = p.hdr;

	cfg_prog_init(&p, text, 1);
	harness_start(NULL);

	ck_assert_int_eq(get_cfg_program(rq, key1), 1);
	ck_assert_int_eq(builds_started(), 1);
	ck_assert_int_eq(get_cfg_program(rq, key2), 1);
	ck_assert_str_eq(key2, key1);
	ck_assert_int_eq(builds_started(), 1);

	/* A different size too, so that a stat alone tells the change. */
	harness_write_file(hdr, "#define KILN_CFG_VALUE 222\n");
	ck_assert_int_eq(get_cfg_program(rq, key2), 222);
	ck_assert_str_ne(key2, key1);
	ck_assert_int_eq(builds_started(), 2);
	ck_assert_int_eq(get_cfg_program(rq, key3), 222);
	ck_assert_str_eq(key3, key2);
	ck_assert_int_eq(builds_started(), 2);

	/* The old content again names the old artifact. */
	harness_write_file(hdr, "#define KILN_CFG_VALUE 1\n");
	ck_assert_int_eq(get_cfg_program(rq, key3), 1);
	ck_assert_str_eq(key3, key1);
	harness_stop();
}
END_TEST

/* Waits until kilnd's prewarm is done; its status object (caller frees). */
static cJSON *prewarm_done(void)
{
	for (int tries = 0;; tries++) {
		cJSON *st = harness_status();
		const cJSON *pw = cJSON_GetObjectItemCaseSensitive(st, "prewarm");
		if (strcmp(harness_str(pw, "state"), "done") == 0)
			return st;
		cJSON_Delete(st);
		ck_assert_msg(tries < 300, "kilnd's prewarm is not done after 15 s");
		harness_sleep_ms(50);
	}
}

/*
 * A restarted kilnd checks its most recently used entries before the first
 * request: all of them ready, and the requests then are hits with no
 * compiler run. A header changed while kilnd was down is found changed by
 * the prewarm as by a request: that entry is not ready, and the request
 * builds the new value.
 */
START_TEST(prewarm_checks_recent_entries_and_changes)
{
	static const char text[] =
		"#include \"cfg.h\"\n"
		"int kiln_test_value(void) { return KILN_CFG_VALUE; }\n";
	char key[72], k2[72];
	struct cfg_prog p;
	struct kiln_request *rq = &p.req;
	const char *hdr = p.hdr;

	cfg_prog_init(&p, text, 5);
	harness_start(NULL);
	/* A toolchain no request uses costs nothing: its programs are hashed
	 * when its first build begins, not at the start. */
	cJSON *st = prewarm_done();
	cJSON_Delete(st);
	harness_sleep_ms(300);
	st = harness_status();
	ck_assert_int_eq(harness_num(cJSON_GetObjectItemCaseSensitive(st, "digests"), "hashed"), 0);
	cJSON_Delete(st);
	for (int i = 0; i < RESTART_PROGRAMS; i++) {
		char name[32], alias[32];
		snprintf(name, sizeof(name), "prewarm_%d", i);
		snprintf(alias, sizeof(alias), "it:prewarm:%d", i);
		harness_get_program(NULL, name, 300 + i, alias, key);
	}
	ck_assert_int_eq(get_cfg_program(rq, key), 5);
	harness_stop();

	harness_start(NULL);
	st = prewarm_done();
	const cJSON *pw = cJSON_GetObjectItemCaseSensitive(st, "prewarm");
	ck_assert_int_eq(harness_num(pw, "entries"), RESTART_PROGRAMS + 1);
	ck_assert_int_eq(harness_num(pw, "checked"), RESTART_PROGRAMS + 1);
	ck_assert_int_eq(harness_num(pw, "ready"), RESTART_PROGRAMS + 1);
	int64_t builds = harness_num(st, "builds_started");
	cJSON_Delete(st);
	for (int i = 0; i < RESTART_PROGRAMS; i++) {
		char alias[32];
		snprintf(alias, sizeof(alias), "it:prewarm:%d", i);
		struct harness_result r = harness_in_child(NULL, alias);
		ck_assert_msg(r.rc == KILN_OK && r.value == 300 + i, "%s: %s", alias, r.msg);
	}
	ck_assert_int_eq(builds_started(), builds);
	harness_stop();

	/* Changed while kilnd was down (another size: a stat tells). */
	harness_write_file(hdr, "#define KILN_CFG_VALUE 777\n");
	harness_start(NULL);
	st = prewarm_done();
	pw = cJSON_GetObjectItemCaseSensitive(st, "prewarm");
	ck_assert_int_eq(harness_num(pw, "ready"), RESTART_PROGRAMS);
	cJSON_Delete(st);
	ck_assert_int_eq(get_cfg_program(rq, k2), 777);
	ck_assert_str_ne(k2, key);
	ck_assert_int_eq(builds_started(), builds + 1);
	harness_stop();

	/* --no-prewarm: none. */
	harness_start("--no-prewarm", NULL);
	harness_sleep_ms(300);
	st = harness_status();
	ck_assert_str_eq(harness_str(cJSON_GetObjectItemCaseSensitive(st, "prewarm"), "state"), "off");
	ck_assert_int_eq(harness_num(cJSON_GetObjectItemCaseSensitive(st, "digests"), "hashed"), 0);
	cJSON_Delete(st);
	harness_stop();
}
END_TEST

static int64_t digests_hashed(void)
{
	cJSON *st = harness_status();
	int64_t n = harness_num(cJSON_GetObjectItemCaseSensitive(st, "digests"), "hashed");
	cJSON_Delete(st);
	return n;
}

/*
 * The file digests a kilnd took (toolchain programs, headers) are kept for
 * the next kilnd of the same boot: a build after a restart hashes none of
 * what the build before it hashed. A digest file of another boot is not
 * used (device numbers, which identities hold, may mean other devices).
 */
START_TEST(digests_kept_across_restarts)
{
	char key[72], path[HARNESS_PATH];

	harness_start(NULL);
	harness_get_program(NULL, "digests_a", 11, "it:digests:a", key);
	int64_t first = digests_hashed();
	ck_assert_int_gt(first, 10);   /* cc1, as, ld, libc's headers... */
	harness_stop();
	ck_assert(harness_exists(harness_path(path, "cache/digests")));

	harness_start(NULL);
	harness_get_program(NULL, "digests_b", 12, "it:digests:b", key);
	int64_t second = digests_hashed();
	ck_assert_msg(second == 0, "%lld files hashed again after a restart (%lld the first time)",
		      (long long)second, (long long)first);
	harness_stop();

	/* Another boot's file: hashed again, and said so. */
	char *text = harness_read_file(path);
	ck_assert_ptr_nonnull(text);
	char *nl = strchr(text, '\n');
	ck_assert_ptr_nonnull(nl);
	char *forged = NULL;
	ck_assert(asprintf(&forged, "kiln-digests 1 00000000-1111-2222-3333-444444444444%s", nl) > 0);
	harness_write_file(path, forged);
	free(forged);
	free(text);
	harness_start(NULL);
	harness_get_program(NULL, "digests_c", 13, "it:digests:c", key);
	ck_assert_int_ge(digests_hashed(), first / 2);
	harness_stop();
	char *log = harness_read_file(harness.log);
	ck_assert_msg(harness_contains(log, "file digests of another boot"), "%s", log);
	free(log);
}
END_TEST

/* Starts kilnd with start as its working directory and $PWD (as a job's
 * prologue started in that directory would). */
static void start_in(const char *start)
{
	char here[HARNESS_PATH];

	ck_assert_ptr_nonnull(getcwd(here, sizeof(here)));
	ck_assert_int_eq(chdir(start), 0);
	setenv("PWD", start, 1);
	harness_start(NULL);
	ck_assert_int_eq(chdir(here), 0);
	setenv("PWD", here, 1);
}

/*
 * Where kilnd was started is no input of what it builds: a program built
 * by a kilnd started in job directory A is a hit for a kilnd started in B
 * after A was deleted (a new job in a new directory), and no entry lists A.
 */
START_TEST(start_directory_is_no_input)
{
	char a[HARNESS_PATH], b[HARNESS_PATH], key1[72], key2[72];
	struct kiln_request req;
	struct kiln_source src;
	char *text = harness_program("startdir", 5);

	ck_assert_int_eq(mkdir(harness_path(a, "job-a"), 0700), 0);
	ck_assert_int_eq(mkdir(harness_path(b, "job-b"), 0700), 0);
	harness_request(&req, &src, "startdir.c", text);
	start_in(a);
	ck_assert_int_eq(get_cfg_program(&req, key1), 5);
	ck_assert_int_eq(builds_started(), 1);
	char *out = NULL;
	ck_assert_int_eq(harness_cli(&out, NULL, "show", "--deps", key1, NULL), 0);
	ck_assert_msg(!harness_contains(out, a), "kiln show lists the start directory %s", a);
	free(out);
	harness_stop();
	ck_assert_int_eq(rmdir(a), 0);
	start_in(b);
	ck_assert_int_eq(get_cfg_program(&req, key2), 5);
	ck_assert_str_eq(key2, key1);
	ck_assert_int_eq(builds_started(), 1);
	harness_stop();
	free(text);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("persistence");

	suite_add_tcase(s, harness_tcase("restart", restart_keeps_every_entry, 90));
	suite_add_tcase(s, harness_tcase("kill9", kill9_during_builds_leaves_nothing_partial, 120));
	suite_add_tcase(s, harness_tcase("reconcile", restart_reconciles_a_damaged_cache, 90));
	suite_add_tcase(s, harness_tcase("header", changed_header_is_a_miss, 90));
	suite_add_tcase(s, harness_tcase("start_dir", start_directory_is_no_input, 90));
	suite_add_tcase(s, harness_tcase("prewarm", prewarm_checks_recent_entries_and_changes, 90));
	suite_add_tcase(s, harness_tcase("digests", digests_kept_across_restarts, 90));
	return harness_main(s);
}
