/*
 * Integration tests of damage and crashes: objects altered or truncated
 * behind kilnd's back, a damaged index, kill -9 in a loop with builds in
 * flight, and eviction while clients load what is being evicted.
 */
#include "harness.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define KILL_ROUNDS 20
#define KILL_CLIENTS 4

/* The object path of the entry with this key, from "kiln --json show". */
static void object_path(const char *key, char path[HARNESS_PATH])
{
	cJSON *show = harness_cli_json("show", key, NULL);

	snprintf(path, HARNESS_PATH, "%s", harness_str(show, "path"));
	cJSON_Delete(show);
}

/* Flips one byte in the middle of the file (same size, new content). */
static void flip_byte(const char *path)
{
	struct stat st;
	unsigned char b;
	int fd;

	ck_assert_int_eq(chmod(path, 0600), 0);
	fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(pread(fd, &b, 1, st.st_size / 2), 1);
	b ^= 0x5a;
	ck_assert_int_eq(pwrite(fd, &b, 1, st.st_size / 2), 1);
	close(fd);
}

static int64_t status_num(const char *field)
{
	cJSON *st = harness_status();
	int64_t n = harness_num(st, field);

	cJSON_Delete(st);
	return n;
}

/* Runs "kiln --json verify"; returns its exit status and the reply. */
static int verify(cJSON **reply)
{
	char *out = NULL;
	int rc = harness_cli(&out, NULL, "--json", "verify", NULL);

	*reply = out != NULL ? cJSON_Parse(out) : NULL;
	ck_assert_msg(*reply != NULL, "kiln verify printed no JSON: %s", out ? out : "");
	free(out);
	return rc;
}

/* Every indexed object loads and answers. */
static void every_entry_loads(void)
{
	cJSON *ls = harness_cli_json("ls", NULL), *e;

	cJSON_ArrayForEach(e, ls) {
		void *h = dlopen(harness_str(e, "path"), RTLD_NOW | RTLD_LOCAL);
		int (*fn)(void);

		ck_assert_msg(h != NULL, "indexed object does not load: %s", dlerror());
		*(void **)&fn = dlsym(h, "kiln_test_value");
		ck_assert_ptr_nonnull(fn);
		ck_assert_int_ge(fn(), 0);
		dlclose(h);
	}
	cJSON_Delete(ls);
}

static struct harness_result get_in_child(const char *name, int value)
{
	char *text = harness_program(name, value);
	struct kiln_request req;
	struct kiln_source src;
	struct harness_result r;

	harness_request(&req, &src, "prog.c", text);
	r = harness_in_child(&req, NULL);
	free(text);
	return r;
}

/*
 * A client's descriptor shares its open file description (and offset) with
 * kilnd's cached one: kilnd's check of an object whose inode changed (a
 * chmod here) reads with pread and leaves the offset where the client's own
 * reads put it.
 */
START_TEST(recheck_leaves_the_clients_offset)
{
	char *text = harness_program("offset", 610), buf[100], path[HARNESS_PATH];
	struct kiln_request req;
	struct kiln_source src;
	struct kiln_program *p;
	struct kiln *k;

	harness_start(NULL);
	harness_request(&req, &src, "prog.c", text);
	/* Built first, so that this process's descriptor is a hit's: the
	 * descriptor cache's own, which kilnd checks again below. */
	struct harness_result r = harness_in_child(&req, NULL);
	ck_assert_msg(r.rc == KILN_OK && r.value == 610, "%s", r.msg);
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	ck_assert_msg(kiln_get_file(k, &req, &p) == KILN_OK, "%s", kiln_errmsg(k));
	int fd = kiln_program_fd(p);
	ck_assert_int_eq(read(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	ck_assert_int_eq(lseek(fd, 0, SEEK_CUR), (off_t)sizeof(buf));
	/* Another client's hit, after the object's ctime moved: checked again. */
	snprintf(path, sizeof(path), "%s", kiln_program_path(p));
	ck_assert_int_eq(chmod(path, 0444), 0);
	r = harness_in_child(&req, NULL);
	ck_assert_msg(r.rc == KILN_OK && r.value == 610, "%s", r.msg);
	ck_assert_int_eq(status_num("damaged"), 0);
	ck_assert_int_eq(status_num("builds_started"), 1);
	ck_assert_int_eq(lseek(fd, 0, SEEK_CUR), (off_t)sizeof(buf));
	kiln_close(k);
	free(text);
	harness_stop();
}
END_TEST

/* Altered and truncated objects are never served: found, rebuilt. */
START_TEST(damaged_objects_are_rebuilt_not_served)
{
	char keys[3][72], path[HARNESS_PATH];
	struct harness_result r;
	int64_t seen;
	cJSON *v, *d;

	harness_start(NULL);
	/* Built and served from other processes: this one must not map an
	 * object the test then truncates (its children would inherit it). */
	for (int i = 0; i < 3; i++) {
		char name[16];

		snprintf(name, sizeof(name), "damage_%d", i);
		for (int twice = 0; twice < 2; twice++) {
			r = get_in_child(name, 500 + i);
			ck_assert_msg(r.rc == KILN_OK && r.value == 500 + i, "%s", r.msg);
		}
		snprintf(keys[i], sizeof(keys[i]), "%s", r.key);
	}
	ck_assert_int_eq(status_num("builds_started"), 3);

	/* Same size, one byte changed: noticed before it is served. */
	object_path(keys[0], path);
	flip_byte(path);
	r = get_in_child("damage_0", 500);
	ck_assert_msg(r.rc == KILN_OK && r.value == 500, "after a flipped byte: %s", r.msg);
	ck_assert_int_ge(status_num("damaged"), 1);
	ck_assert_int_eq(status_num("builds_started"), 4);
	seen = status_num("damaged");

	/* Truncated. */
	object_path(keys[1], path);
	ck_assert_int_eq(truncate(path, 100), 0);
	r = get_in_child("damage_1", 501);
	ck_assert_msg(r.rc == KILN_OK && r.value == 501, "after truncation: %s", r.msg);
	ck_assert_int_gt(status_num("damaged"), seen);
	ck_assert_int_eq(status_num("builds_started"), 5);

	/* kiln verify finds a damaged object, removes it; the next get rebuilds. */
	object_path(keys[2], path);
	flip_byte(path);
	ck_assert_int_eq(verify(&v), 1);
	ck_assert_int_eq(harness_num(v, "checked"), 3);
	ck_assert_int_eq(harness_num(v, "intact"), 2);
	ck_assert_int_eq(harness_num(v, "removed"), 1);
	d = cJSON_GetArrayItem(cJSON_GetObjectItem(v, "damaged"), 0);
	ck_assert_ptr_nonnull(d);
	ck_assert_str_eq(harness_str(d, "key"), keys[2]);
	cJSON_Delete(v);
	ck_assert_int_eq(verify(&v), 0);
	ck_assert_int_eq(harness_num(v, "checked"), 2);
	cJSON_Delete(v);
	r = get_in_child("damage_2", 502);
	ck_assert_msg(r.rc == KILN_OK && r.value == 502, "after verify: %s", r.msg);
	ck_assert_int_eq(status_num("builds_started"), 6);
	every_entry_loads();
	harness_stop();
}
END_TEST

/* Files in objects/ that kiln never writes (a loader's copy "<key>.so_0",
 * as DaCe's ReloadableDLL makes, a note, a stray top-level file) are listed
 * and removed by kiln verify; the entry, a meta and a name kiln could be
 * publishing stay. */
START_TEST(verify_removes_stray_files)
{
	char path[HARNESS_PATH], copy[HARNESS_PATH + 8], note[HARNESS_PATH + 32];
	char junk[HARNESS_PATH], pending[HARNESS_PATH + 8];
	struct harness_result r;

	harness_start(NULL);
	r = get_in_child("stray", 33);
	ck_assert_msg(r.rc == KILN_OK, "%s", r.msg);
	object_path(r.key, path);
	snprintf(copy, sizeof(copy), "%s_0", path);
	harness_write_file(copy, "a copy a loader made");
	snprintf(note, sizeof(note), "%.*s/notes.txt", (int)(strrchr(path, '/') - path), path);
	harness_write_file(note, "hello");
	harness_path(junk, "cache/objects/junk");
	harness_write_file(junk, "junk");
	/* "<key>.meta" beside it, of another key: what a publish writes first. */
	snprintf(pending, sizeof(pending), "%.*s/%.2s%062d.meta", (int)(strrchr(path, '/') - path),
		 path, r.key, 0);
	harness_write_file(pending, "{}");

	cJSON *v = harness_cli_json("verify", NULL);
	ck_assert_int_eq(harness_num(v, "checked"), 1);
	ck_assert_int_eq(harness_num(v, "intact"), 1);
	ck_assert_int_eq(harness_num(v, "strays_removed"), 3);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(v, "strays")), 3);
	cJSON_Delete(v);
	ck_assert_int_ne(access(copy, F_OK), 0);
	ck_assert_int_ne(access(note, F_OK), 0);
	ck_assert_int_ne(access(junk, F_OK), 0);
	ck_assert_int_eq(access(pending, F_OK), 0);
	ck_assert_int_eq(access(path, F_OK), 0);
	r = get_in_child("stray", 33);
	ck_assert_msg(r.rc == KILN_OK && r.value == 33, "%s", r.msg);
	ck_assert_int_eq(status_num("builds_started"), 1);
	harness_stop();
}
END_TEST

/* An index.db overwritten with garbage, or damaged inside, is set aside and
 * rebuilt from the objects' metadata: every entry is kept. */
START_TEST(damaged_index_is_rebuilt_from_the_objects)
{
	char keys[3][72], path[HARNESS_PATH];
	char *log;
	cJSON *ls;
	int fd;

	harness_start(NULL);
	harness_get_program(NULL, "index_0", 600, "it:index:0", keys[0]);
	harness_get_program(NULL, "index_1", 601, NULL, keys[1]);
	harness_get_program(NULL, "index_2", 602, NULL, keys[2]);
	harness_stop();

	/* Garbage over the first pages (not a database any more). */
	fd = open(harness_path(path, "cache/index.db"), O_WRONLY);
	ck_assert_int_ge(fd, 0);
	for (int i = 0; i < 64; i++)
		ck_assert_int_eq(write(fd, "this is not an SQLite database. ", 32), 32);
	close(fd);

	harness_start(NULL);
	log = harness_read_file(harness.log);
	ck_assert_msg(harness_contains(log, "is damaged"), "the damage is not logged");
	free(log);
	ck_assert_int_ge(harness_count_dir(harness.cache), 1);
	harness_wait_cache_checked(60);
	ls = harness_cli_json("ls", NULL);
	ck_assert_int_eq(cJSON_GetArraySize(ls), 3);
	for (int i = 0; i < 3; i++)
		ck_assert_msg(harness_find_entry(ls, "key", keys[i]) != NULL, "entry %d lost", i);
	cJSON_Delete(ls);
	/* The alias came back with its entry, and nothing is rebuilt. */
	{
		struct harness_result r = harness_in_child(NULL, "it:index:0");

		ck_assert_msg(r.rc == KILN_OK && r.value == 600, "lookup: %s", r.msg);
	}
	ck_assert_int_eq(status_num("builds_started"), 0);
	every_entry_loads();
	harness_stop();
}
END_TEST

/*
 * kill -9 at a random moment while clients build, 20 times. After each
 * restart: verify finds nothing damaged, every indexed object loads, and no
 * client ever got a wrong program (a failure must be a clear error).
 */
START_TEST(kill9_in_a_loop)
{
	unsigned seed = (unsigned)getpid();
	int ok = 0, failed = 0;

	for (int round = 0; round < KILL_ROUNDS; round++) {
		struct kiln_request reqs[KILL_CLIENTS];
		struct kiln_source srcs[KILL_CLIENTS];
		char *texts[KILL_CLIENTS];
		struct harness_fleet *f;
		cJSON *v;

		harness_start("--jobs", "2", NULL);
		/* The daemon reconnects its clients' next calls: a fresh one works. */
		if (round > 0) {
			cJSON *st = harness_status();

			ck_assert_int_eq(harness_num(st, "damaged"), 0);
			cJSON_Delete(st);
			ck_assert_msg(verify(&v) == 0, "round %d: verify found damage", round);
			ck_assert_int_eq(harness_num(v, "removed"), 0);
			cJSON_Delete(v);
			every_entry_loads();
		}
		for (int i = 0; i < KILL_CLIENTS; i++) {
			char name[32];

			snprintf(name, sizeof(name), "kill_%d_%d", round, i);
			texts[i] = harness_program(name, 1000 * round + i);
			harness_request(&reqs[i], &srcs[i], "kill.c", texts[i]);
		}
		f = harness_fleet_start(KILL_CLIENTS, &(struct harness_fleet_opts){
			.socket = harness.socket, .reqs = reqs, .nreqs = KILL_CLIENTS });
		/* Somewhere in 0-400 ms: keying, compiling, publishing, or done. */
		harness_sleep_ms((int)(rand_r(&seed) % 400));
		harness_kill9();
		harness_fleet_wait(f, 60);
		for (int i = 0; i < KILL_CLIENTS; i++) {
			struct harness_result *r = &f->results[i];

			if (r->rc == KILN_OK) {
				ck_assert_msg(r->value == 1000 * round + i,
					      "round %d client %d got value %d", round, i, r->value);
				ok++;
			} else {
				ck_assert_msg(r->msg[0] != '\0', "round %d: an error without text", round);
				failed++;
			}
		}
		harness_fleet_free(f);
		for (int i = 0; i < KILL_CLIENTS; i++)
			free(texts[i]);
	}
	harness_start(NULL);
	{
		cJSON *v;

		ck_assert_int_eq(verify(&v), 0);
		cJSON_Delete(v);
	}
	every_entry_loads();
	harness_stop();
	printf("kill -9 loop: %d rounds, %d gets served, %d failed with an error\n",
	       KILL_ROUNDS, ok, failed);
}
END_TEST

/* Clients load programs while gc evicts everything, again and again. */
START_TEST(gc_while_clients_load)
{
	enum { PROGRAMS = 4, CLIENTS = 4, ROUNDS = 15, GCS = 15 };
	char keys[PROGRAMS][72];
	pid_t pids[CLIENTS];

	harness_start(NULL);
	for (int i = 0; i < PROGRAMS; i++) {
		char name[16];

		snprintf(name, sizeof(name), "gc_%d", i);
		harness_get_program(NULL, name, 700 + i, NULL, keys[i]);
	}
	for (int c = 0; c < CLIENTS; c++) {
		pids[c] = fork();
		ck_assert_int_ge(pids[c], 0);
		if (pids[c] == 0) {
			for (int round = 0; round < ROUNDS; round++) {
				int i = (c + round) % PROGRAMS;
				char name[16];
				struct harness_result r;

				snprintf(name, sizeof(name), "gc_%d", i);
				r = get_in_child(name, 700 + i);
				if (r.rc != KILN_OK || r.value != 700 + i) {
					fprintf(stderr, "client %d round %d: %s\n", c, round, r.msg);
					_exit(1);
				}
			}
			_exit(0);
		}
	}
	for (int g = 0; g < GCS; g++) {
		ck_assert_int_eq(harness_cli(NULL, NULL, "gc", "--max-size", "1", NULL), 0);
		harness_sleep_ms(20);
	}
	for (int c = 0; c < CLIENTS; c++) {
		int status = harness_wait(pids[c], 120);

		ck_assert_msg(status != -1, "client %d hangs", c);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			      "client %d failed to load a program while gc ran", c);
	}
	harness_stop();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("damage");

	suite_add_tcase(s, harness_tcase("objects", damaged_objects_are_rebuilt_not_served, 90));
	suite_add_tcase(s, harness_tcase("offset", recheck_leaves_the_clients_offset, 60));
	suite_add_tcase(s, harness_tcase("index", damaged_index_is_rebuilt_from_the_objects, 90));
	suite_add_tcase(s, harness_tcase("strays", verify_removes_stray_files, 90));
	suite_add_tcase(s, harness_tcase("kill9_loop", kill9_in_a_loop, 400));
	suite_add_tcase(s, harness_tcase("gc_while_loading", gc_while_clients_load, 200));
	return harness_main(s);
}
