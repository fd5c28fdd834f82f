/*
 * Integration tests of concurrent work: single-flight builds for many
 * processes, the --jobs limit on compilers, failures and timeouts that reach
 * every waiter, a program's compile steps side by side, an index row that
 * cannot be written, inputs hashed while the compiler runs.
 */
#include "harness.h"

#include <pthread.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HERD 32
#define DISTINCT 20
#define WAITERS 6
#define THREADS 8

/* 32 processes ask for one new program at the same instant. */
START_TEST(herd_gets_one_build)
{
	char *text = harness_program("herd", 4242);
	struct kiln_request req;
	struct kiln_source src;
	struct harness_fleet *f;
	cJSON *st;

	harness_request(&req, &src, "herd.c", text);
	harness_start(NULL);
	f = harness_fleet_start(HERD, &(struct harness_fleet_opts){
		.socket = harness.socket, .reqs = &req, .nreqs = 1 });
	harness_fleet_wait(f, 120);
	for (int i = 0; i < HERD; i++) {
		struct harness_result *r = &f->results[i];

		ck_assert_msg(r->rc == KILN_OK, "client %d failed in %s with %s: %s", i, r->stage,
			      kiln_strerror(r->rc), r->msg);
		ck_assert_int_eq(r->value, 4242);
		ck_assert_uint_eq(strlen(r->key), 64);
		ck_assert_str_eq(r->key, f->results[0].key);
		ck_assert_str_eq(r->path, f->results[0].path);
	}
	ck_assert_msg(harness_exists(f->results[0].path), "%s does not exist", f->results[0].path);

	st = harness_status();
	ck_assert_int_eq(harness_num(st, "builds_started"), 1);
	ck_assert_int_eq(harness_num(st, "builds_ok"), 1);
	ck_assert_int_eq(harness_num(st, "builds_failed"), 0);
	ck_assert_int_eq(harness_num(st, "hits") + harness_num(st, "misses"), HERD);
	ck_assert_int_eq(harness_num(st, "joined") + harness_num(st, "hits"), HERD - 1);
	ck_assert_int_eq(harness_num(st, "entries"), 1);
	ck_assert_int_eq(harness_num(st, "in_flight"), 0);
	cJSON_Delete(st);
	harness_fleet_free(f);
	harness_stop();
	free(text);
}
END_TEST

/* kilnd with --jobs 2 and a wrapper that logs each compiler run and makes
 * it last at least 0.3 s (paths into the callers' buffers). */
static void start_two_slow_jobs(char wrapper[HARNESS_PATH], char log[HARNESS_PATH],
				char toolchain[HARNESS_PATH + 8])
{
	harness_write_wrapper(harness_path(wrapper, "cc-wrapper"), harness_path(log, "wrapper.log"),
			      NULL, 0.3);
	snprintf(toolchain, HARNESS_PATH + 8, "cc=%s", wrapper);
	harness_start("--jobs", "2", "--toolchain", toolchain, NULL);
}

/* 20 distinct programs with --jobs 2: never more than 2 compilers, and 2 busy. */
START_TEST(jobs_limit_keeps_two_compilers_busy)
{
	char wrapper[HARNESS_PATH], log[HARNESS_PATH], toolchain[HARNESS_PATH + 8];
	struct kiln_request reqs[DISTINCT];
	struct kiln_source srcs[DISTINCT];
	char *texts[DISTINCT];
	struct harness_wrapper_log wl;
	struct harness_fleet *f;
	cJSON *st;

	start_two_slow_jobs(wrapper, log, toolchain);
	for (int i = 0; i < DISTINCT; i++) {
		char name[32];

		snprintf(name, sizeof(name), "distinct_%d", i);
		texts[i] = harness_program(name, 1000 + i);
		harness_request(&reqs[i], &srcs[i], "distinct.c", texts[i]);
	}
	f = harness_fleet_start(DISTINCT, &(struct harness_fleet_opts){
		.socket = harness.socket, .reqs = reqs, .nreqs = DISTINCT });
	harness_fleet_wait(f, 180);
	for (int i = 0; i < DISTINCT; i++) {
		struct harness_result *r = &f->results[i];

		ck_assert_msg(r->rc == KILN_OK, "client %d failed in %s with %s: %s", i, r->stage,
			      kiln_strerror(r->rc), r->msg);
		ck_assert_int_eq(r->value, 1000 + i);
		for (int j = 0; j < i; j++)
			ck_assert_str_ne(r->key, f->results[j].key);
	}

	harness_wrapper_log_read(log, &wl);
	ck_assert_int_eq(wl.starts, DISTINCT);
	ck_assert_int_eq(wl.ends, DISTINCT);
	ck_assert_msg(wl.max_overlap == 2, "at most %d compilers ran at once, expected exactly 2",
		      wl.max_overlap);

	st = harness_status();
	ck_assert_int_eq(harness_num(st, "jobs"), 2);
	ck_assert_int_eq(harness_num(st, "builds_started"), DISTINCT);
	ck_assert_int_eq(harness_num(st, "builds_ok"), DISTINCT);
	ck_assert_int_eq(harness_num(st, "in_flight"), 0);
	ck_assert_int_eq(harness_num(st, "queued"), 0);
	ck_assert_int_eq(harness_num(st, "entries"), DISTINCT);
	cJSON_Delete(st);
	harness_fleet_free(f);
	harness_stop();
	for (int i = 0; i < DISTINCT; i++)
		free(texts[i]);
}
END_TEST

/* Several processes wait on one build that fails: each gets the diagnostics. */
START_TEST(compile_error_reaches_every_waiter)
{
	static const char text[] =
		"int kiln_test_value(void)\n"
		"{\n"
		"\treturn kiln_undeclared_thing + 1;\n"
		"}\n";
	char wrapper[HARNESS_PATH], log[HARNESS_PATH], gate[HARNESS_PATH];
	char toolchain[HARNESS_PATH + 8];
	struct kiln_request req;
	struct kiln_source src;
	struct harness_fleet *f;
	cJSON *st;

	/* The compiler waits for the gate until every request has joined it, so
	 * that all of them are waiters of the one build. */
	harness_write_wrapper(harness_path(wrapper, "cc-wrapper"), harness_path(log, "wrapper.log"),
			      harness_path(gate, "gate"), 0);
	snprintf(toolchain, sizeof(toolchain), "cc=%s", wrapper);
	harness_start("--toolchain", toolchain, NULL);
	harness_request(&req, &src, "broken.c", text);
	f = harness_fleet_start(WAITERS, &(struct harness_fleet_opts){
		.socket = harness.socket, .reqs = &req, .nreqs = 1 });
	harness_wait_status("joined", WAITERS - 1, 60);
	harness_write_file(gate, "");
	harness_fleet_wait(f, 60);
	for (int i = 0; i < WAITERS; i++) {
		struct harness_result *r = &f->results[i];

		ck_assert_msg(r->rc == KILN_EBUILD, "client %d got %s in %s, expected KILN_EBUILD: %s",
			      i, kiln_strerror(r->rc), r->stage, r->msg);
		ck_assert_msg(harness_contains(r->msg, "kiln_undeclared_thing"),
			      "client %d's message lacks the compiler's diagnostic: %s", i, r->msg);
		ck_assert_msg(harness_contains(r->msg, "error"),
			      "client %d's message lacks the compiler's error line: %s", i, r->msg);
	}

	st = harness_status();
	ck_assert_int_eq(harness_num(st, "builds_started"), 1);
	ck_assert_int_eq(harness_num(st, "builds_failed"), 1);
	ck_assert_int_eq(harness_num(st, "builds_ok"), 0);
	ck_assert_int_eq(harness_num(st, "joined"), WAITERS - 1);
	ck_assert_int_eq(harness_num(st, "entries"), 0);
	cJSON_Delete(st);
	harness_fleet_free(f);
	harness_stop();
}
END_TEST

/* A shared object with an unresolved symbol fails its load check. */
START_TEST(unresolved_symbol_fails_the_build)
{
	static const char text[] =
		"extern int kiln_missing_function(void);\n"
		"\n"
		"int kiln_test_value(void)\n"
		"{\n"
		"\treturn kiln_missing_function();\n"
		"}\n";
	struct kiln_request req;
	struct kiln_source src;
	struct kiln_program *p = NULL;
	struct kiln *k = NULL;
	cJSON *st;
	int rc;

	harness_start(NULL);
	harness_request(&req, &src, "unresolved.c", text);
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	rc = kiln_get(k, &req, &p);
	ck_assert_msg(rc == KILN_EBUILD, "kiln_get gave %s, expected KILN_EBUILD: %s",
		      kiln_strerror(rc), kiln_errmsg(k));
	ck_assert_msg(harness_contains(kiln_errmsg(k), "kiln_missing_function"),
		      "the message lacks the loader's text: %s", kiln_errmsg(k));
	ck_assert_ptr_null(p);
	kiln_close(k);

	st = harness_status();
	ck_assert_int_eq(harness_num(st, "builds_failed"), 1);
	ck_assert_int_eq(harness_num(st, "entries"), 0);
	cJSON_Delete(st);
	harness_stop();
}
END_TEST

/* A build past --build-timeout fails with KILN_ETIMEDOUT and its compiler dies. */
START_TEST(build_timeout_kills_the_compiler)
{
	char wrapper[HARNESS_PATH], log[HARNESS_PATH], gate[HARNESS_PATH];
	char toolchain[HARNESS_PATH + 8];
	char *text = harness_program("forever", 1);
	struct harness_wrapper_log wl;
	struct kiln_request req;
	struct kiln_source src;
	struct kiln_program *p = NULL;
	struct kiln *k = NULL;
	cJSON *st;
	int rc;

	/* The gate never opens: the compiler would wait forever. */
	harness_write_wrapper(harness_path(wrapper, "cc-wrapper"), harness_path(log, "wrapper.log"),
			      harness_path(gate, "gate"), 0);
	snprintf(toolchain, sizeof(toolchain), "cc=%s", wrapper);
	harness_start("--toolchain", toolchain, "--build-timeout", "2", NULL);
	harness_request(&req, &src, "forever.c", text);
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	rc = kiln_get(k, &req, &p);
	ck_assert_msg(rc == KILN_ETIMEDOUT, "kiln_get gave %s, expected KILN_ETIMEDOUT: %s",
		      kiln_strerror(rc), kiln_errmsg(k));
	kiln_close(k);

	harness_wrapper_log_read(log, &wl);
	ck_assert_int_eq(wl.starts, 1);
	ck_assert_msg(harness_wait_gone(wl.pids[0], 10),
		      "the timed-out compiler (pid %d) still runs", (int)wl.pids[0]);
	st = harness_status();
	ck_assert_int_eq(harness_num(st, "in_flight"), 0);
	ck_assert_int_eq(harness_num(st, "entries"), 0);
	cJSON_Delete(st);
	harness_stop();
	free(text);
}
END_TEST

struct thread_job {
	struct kiln *k;
	const struct kiln_request *req;
	int expect;
	int rc;
	int value;
	char msg[512];
};

static void *thread_get(void *arg)
{
	struct thread_job *j = arg;
	struct kiln_program *p = NULL;
	int (*fn)(void);

	j->rc = kiln_get(j->k, j->req, &p);
	if (j->rc != KILN_OK) {
		snprintf(j->msg, sizeof(j->msg), "%s", kiln_errmsg(j->k));
		return NULL;
	}
	*(void **)&fn = kiln_sym(p, "kiln_test_value");
	j->value = fn ? fn() : -1;
	return NULL;
}

/* Threads of one process share one connection (kiln.h: thread-safe). */
START_TEST(threads_share_one_connection)
{
	struct kiln_request reqs[THREADS / 2];
	struct kiln_source srcs[THREADS / 2];
	char *texts[THREADS / 2];
	struct thread_job jobs[THREADS];
	pthread_t tids[THREADS];
	struct kiln *k = NULL;
	cJSON *st;

	harness_start(NULL);
	for (int i = 0; i < THREADS / 2; i++) {
		char name[32];

		snprintf(name, sizeof(name), "threaded_%d", i);
		texts[i] = harness_program(name, 700 + i);
		harness_request(&reqs[i], &srcs[i], "threaded.c", texts[i]);
	}
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	/* Two threads for each program. */
	for (int i = 0; i < THREADS; i++) {
		jobs[i] = (struct thread_job){ .k = k, .req = &reqs[i % (THREADS / 2)],
					       .expect = 700 + i % (THREADS / 2) };
		ck_assert_int_eq(pthread_create(&tids[i], NULL, thread_get, &jobs[i]), 0);
	}
	for (int i = 0; i < THREADS; i++) {
		ck_assert_int_eq(pthread_join(tids[i], NULL), 0);
		ck_assert_msg(jobs[i].rc == KILN_OK, "thread %d: %s: %s", i, kiln_strerror(jobs[i].rc),
			      jobs[i].msg);
		ck_assert_int_eq(jobs[i].value, jobs[i].expect);
	}
	kiln_close(k);
	st = harness_status();
	ck_assert_int_eq(harness_num(st, "builds_started"), THREADS / 2);
	ck_assert_int_eq(harness_num(st, "builds_ok"), THREADS / 2);
	cJSON_Delete(st);
	harness_stop();
	for (int i = 0; i < THREADS / 2; i++)
		free(texts[i]);
}
END_TEST

#define BATCH 8

/*
 * One process asks for a batch with kiln_get_many: the requests are in
 * flight together, so with --jobs 2 two compilers run at once, not one
 * after another; a broken program among them fails alone, with its text.
 */
START_TEST(get_many_fills_the_slots)
{
	char wrapper[HARNESS_PATH], log[HARNESS_PATH], toolchain[HARNESS_PATH + 8];
	struct kiln_request reqs[BATCH];
	struct kiln_source srcs[BATCH];
	struct kiln_program *out[BATCH];
	int status[BATCH];
	char *texts[BATCH];
	struct harness_wrapper_log wl;
	struct kiln *k;

	start_two_slow_jobs(wrapper, log, toolchain);
	for (int i = 0; i < BATCH; i++) {
		char name[32];

		snprintf(name, sizeof(name), "batch_%d", i);
		texts[i] = i == 5 ? strdup("int kiln_test_value(void) { return undeclared_thing; }\n")
				  : harness_program(name, 2000 + i);
		harness_request(&reqs[i], &srcs[i], "batch.c", texts[i]);
	}
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	ck_assert_int_eq(kiln_get_many(k, reqs, BATCH, out, status), KILN_EBUILD);
	ck_assert_msg(strstr(kiln_errmsg(k), "request 5") != NULL, "%s", kiln_errmsg(k));
	ck_assert_msg(strstr(kiln_errmsg(k), "undeclared_thing") != NULL, "%s", kiln_errmsg(k));
	for (int i = 0; i < BATCH; i++) {
		if (i == 5) {
			ck_assert_int_eq(status[i], KILN_EBUILD);
			ck_assert_ptr_null(out[i]);
			continue;
		}
		ck_assert_msg(status[i] == KILN_OK, "request %d: %s", i, kiln_strerror(status[i]));
		int (*fn)(void);
		*(void **)&fn = kiln_sym(out[i], "kiln_test_value");
		ck_assert_ptr_nonnull(fn);
		ck_assert_int_eq(fn(), 2000 + i);
	}
	harness_wrapper_log_read(log, &wl);
	ck_assert_int_eq(wl.starts, BATCH);
	ck_assert_msg(wl.max_overlap == 2, "at most %d compilers ran at once, expected 2",
		      wl.max_overlap);
	/* Asked again, every good one is a local hit or a cached get. */
	ck_assert_int_eq(kiln_get_many(k, reqs, BATCH, out, status), KILN_EBUILD);
	harness_wrapper_log_read(log, &wl);
	ck_assert_int_eq(wl.starts, BATCH + 1);   /* only the broken one again */
	kiln_close(k);
	harness_stop();
	for (int i = 0; i < BATCH; i++)
		free(texts[i]);
}
END_TEST

/* Every slot given back, none lent, nothing queued; counter is n. */
static void check_slots_back(const char *counter, int64_t n)
{
	cJSON *st = harness_status();
	ck_assert_int_eq(harness_num(st, "in_flight"), 0);
	ck_assert_int_eq(harness_num(st, "slots_lent"), 0);
	ck_assert_int_eq(harness_num(st, "queued"), 0);
	ck_assert_int_eq(harness_num(st, counter), n);
	cJSON_Delete(st);
}

/* A program of three sources, whose kiln_test_value sums all three. */
static const char multi_a[] = "int part_b(void);\nint part_c(void);\n"
			      "int kiln_test_value(void) { return 3000 + part_b() + part_c(); }\n";
static const char multi_b[] = "int part_b(void) { return 20; }\n";
static const char multi_c[] = "int part_c(void) { return 1; }\n";

/* The compile steps of one program run side by side in free --jobs slots:
 * three sources with --jobs 3 compile at once (all three wait at the gate
 * together, which one after the other they could not), then link. */
START_TEST(multi_source_compiles_side_by_side)
{
	char wrapper[HARNESS_PATH], log[HARNESS_PATH], gate[HARNESS_PATH];
	char toolchain[HARNESS_PATH + 8];
	struct kiln_source srcs[] = { { .name = "a.c", .text = multi_a },
				      { .name = "b.c", .text = multi_b },
				      { .name = "c.c", .text = multi_c } };
	struct kiln_request req = { .toolchain = "cc", .sources = srcs, .nsources = 3 };
	struct harness_wrapper_log wl;
	struct harness_fleet *f;
	cJSON *st;

	harness_write_wrapper(harness_path(wrapper, "cc-wrapper"), harness_path(log, "wrapper.log"),
			      harness_path(gate, "gate"), 0);
	snprintf(toolchain, sizeof(toolchain), "cc=%s", wrapper);
	harness_start("--jobs", "3", "--toolchain", toolchain, NULL);
	f = harness_fleet_start(1, &(struct harness_fleet_opts){
		.socket = harness.socket, .reqs = &req, .nreqs = 1 });
	harness_wait_wrapper_starts(log, 3, 60);
	st = harness_status();
	ck_assert_int_eq(harness_num(st, "in_flight"), 1);
	ck_assert_int_eq(harness_num(st, "slots_lent"), 2);
	cJSON_Delete(st);
	harness_write_file(gate, "");
	harness_fleet_wait(f, 60);
	ck_assert_msg(f->results[0].rc == KILN_OK, "%s: %s", f->results[0].stage, f->results[0].msg);
	ck_assert_int_eq(f->results[0].value, 3021);
	harness_wrapper_log_read(log, &wl);
	ck_assert_int_eq(wl.starts, 4);           /* three compiles and the link */
	ck_assert_int_eq(wl.max_overlap, 3);
	check_slots_back("builds_ok", 1);
	harness_fleet_free(f);
	harness_stop();
}
END_TEST

/* Lent slots count against --jobs, and a queued build comes first: with
 * --jobs 2, a three-source program and two one-source ones never run more
 * than two compilers, and every build ends with its slots given back. */
START_TEST(multi_source_steps_keep_the_jobs_limit)
{
	char wrapper[HARNESS_PATH], log[HARNESS_PATH], toolchain[HARNESS_PATH + 8];
	struct kiln_source srcs[] = { { .name = "a.c", .text = multi_a },
				      { .name = "b.c", .text = multi_b },
				      { .name = "c.c", .text = multi_c } };
	struct kiln_request reqs[3] = { { .toolchain = "cc", .sources = srcs, .nsources = 3 } };
	struct kiln_source one[2];
	char *texts[2];
	struct harness_wrapper_log wl;
	struct harness_fleet *f;

	start_two_slow_jobs(wrapper, log, toolchain);
	for (int i = 0; i < 2; i++) {
		texts[i] = harness_program(i == 0 ? "single_0" : "single_1", 4000 + i);
		harness_request(&reqs[i + 1], &one[i], "single.c", texts[i]);
	}
	f = harness_fleet_start(3, &(struct harness_fleet_opts){
		.socket = harness.socket, .reqs = reqs, .nreqs = 3 });
	harness_fleet_wait(f, 120);
	for (int i = 0; i < 3; i++)
		ck_assert_msg(f->results[i].rc == KILN_OK, "client %d: %s: %s", i,
			      f->results[i].stage, f->results[i].msg);
	ck_assert_int_eq(f->results[0].value, 3021);
	ck_assert_int_eq(f->results[1].value, 4000);
	ck_assert_int_eq(f->results[2].value, 4001);
	harness_wrapper_log_read(log, &wl);
	ck_assert_int_eq(wl.starts, 6);           /* 3 compiles + link, 2 one-step builds */
	ck_assert_msg(wl.max_overlap == 2, "%d compilers ran at once with --jobs 2", wl.max_overlap);
	check_slots_back("builds_ok", 3);
	harness_fleet_free(f);
	harness_stop();
	free(texts[0]);
	free(texts[1]);
}
END_TEST

/* Writes script (freed) as the executable wrapper NAME in the test's
 * directory (its path into wrapper) and starts kilnd with it as "cc",
 * with --jobs jobs when jobs is not NULL. */
static void start_with_cc_script(char wrapper[HARNESS_PATH], const char *name, char *script,
				 const char *jobs)
{
	char toolchain[HARNESS_PATH + 8];
	harness_write_file(harness_path(wrapper, "%s", name), script);
	free(script);
	ck_assert_int_eq(chmod(wrapper, 0755), 0);
	snprintf(toolchain, sizeof(toolchain), "cc=%s", wrapper);
	if (jobs != NULL)
		harness_start("--jobs", jobs, "--toolchain", toolchain, NULL);
	else
		harness_start("--toolchain", toolchain, NULL);
}

/* One compile step fails while another runs on: the build fails at once
 * with the failing source's message, and the other step's processes are
 * killed (one after the other, the slow step would have run first and held
 * the build for 120 s). */
START_TEST(multi_source_failure_stops_the_other_steps)
{
	char wrapper[HARNESS_PATH], pidfile[HARNESS_PATH];
	char *text = NULL;
	struct kiln_source srcs[] = { { .name = "slow.c", .text = multi_b },
				      { .name = "bad.c", .text = "int part_c(void) { return missing_thing; }\n" } };
	struct kiln_request req = { .toolchain = "cc", .sources = srcs, .nsources = 2 };
	struct kiln_program *p;
	struct kiln *k;

	harness_path(pidfile, "slow.pid");
	ck_assert(asprintf(&text,
		"#!/bin/sh\n"
		"case \"$*\" in *slow.c*) echo $$ > '%s'; KILN_OBSERVE_IGNORE='%s' sleep 120 ;; esac\n"
		"exec /usr/bin/cc \"$@\"\n", pidfile, pidfile) > 0);
	start_with_cc_script(wrapper, "cc-slow", text, "2");
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	ck_assert_int_eq(kiln_get(k, &req, &p), KILN_EBUILD);
	ck_assert_msg(strstr(kiln_errmsg(k), "missing_thing") != NULL, "%s", kiln_errmsg(k));
	ck_assert_msg(strstr(kiln_errmsg(k), "bad.c") != NULL, "%s", kiln_errmsg(k));
	char *pidtext = harness_read_file(pidfile);
	ck_assert_ptr_nonnull(pidtext);
	pid_t slow = (pid_t)atoi(pidtext);
	free(pidtext);
	ck_assert_msg(harness_wait_gone(slow, 30), "the slow step's shell %d still runs", (int)slow);
	check_slots_back("builds_failed", 1);
	kiln_close(k);
	harness_stop();
}
END_TEST

/*
 * The row cannot be written (another writer holds the index past kilnd's
 * busy timeout): the build fails with that reason, its placed object and
 * meta stay in objects/, kilnd says so at its stop and leaves no clean-stop
 * mark, and the next start adopts them: the program is a hit then.
 */
START_TEST(row_lost_is_adopted_at_the_next_start)
{
	char path[HARNESS_PATH + 16], key[72];
	char *text = harness_program("lost", 32);
	struct kiln_request req;
	struct kiln_source src;
	struct kiln_program *p;
	sqlite3 *db = NULL;
	struct kiln *k;

	harness_request(&req, &src, "prog.c", text);
	harness_start(NULL);
	/* A new index is checked in the background; the lock below must meet
	 * the publish, not that check (it would fail too, and say so otherwise). */
	harness_wait_cache_checked(60);
	snprintf(path, sizeof(path), "%s/index.db", harness.cache);
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	ck_assert_int_eq(kiln_get(k, &req, &p), KILN_EDAEMON);
	ck_assert_msg(harness_contains(kiln_errmsg(k), "cannot publish"), "%s", kiln_errmsg(k));
	kiln_close(k);
	ck_assert_int_eq(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	cJSON *st = harness_status();
	ck_assert_int_eq(harness_num(st, "entries"), 0);
	int64_t started = harness_num(st, "builds_started"), hits = harness_num(st, "hits");
	cJSON_Delete(st);
	harness_stop();
	char *log = harness_read_file(harness.log);
	ck_assert_ptr_nonnull(log);
	ck_assert_msg(harness_contains(log, "the next start checks the cache"), "%s", log);
	free(log);

	harness_start(NULL);
	harness_wait_cache_checked(60);
	harness_get_program(NULL, "lost", 32, NULL, key);
	/* The statistics are kept across starts. */
	st = harness_status();
	ck_assert_int_eq(harness_num(st, "builds_started"), started);
	ck_assert_int_eq(harness_num(st, "hits"), hits + 1);
	ck_assert_int_eq(harness_num(st, "entries"), 1);
	cJSON_Delete(st);
	harness_stop();
	free(text);
}
END_TEST

struct held_get {
	const char *text;
	int rc;
	char msg[512];
};

static void *held_get_run(void *arg)
{
	struct held_get *h = arg;
	struct kiln_source src = { .name = "held.c", .text = h->text };
	struct kiln_request req = { .toolchain = "cc", .sources = &src, .nsources = 1 };
	struct kiln_program *p;
	struct kiln *k;
	h->rc = kiln_open(harness.socket, &k);
	if (h->rc == KILN_OK) {
		h->rc = kiln_get(k, &req, &p);
		snprintf(h->msg, sizeof(h->msg), "%s", kiln_errmsg(k));
		kiln_close(k);
	}
	return NULL;
}

/*
 * The files a build reads are hashed while it compiles, not all at its
 * publish: the compiler here has written its output and its trace, and
 * waits at a gate; kilnd says it hashed some of them before the gate opens.
 */
START_TEST(inputs_hashed_while_compiling)
{
	char wrapper[HARNESS_PATH], gate[HARNESS_PATH];
	char *text = NULL;
	struct held_get h = {
		.text = "#include <stdio.h>\n#include <string.h>\n#include <stdlib.h>\n"
			"int held(void) { return (int)strlen(\"held\") + EXIT_SUCCESS + EOF; }\n",
	};
	pthread_t t;

	harness_path(gate, "gate");
	ck_assert(asprintf(&text,
		"#!/bin/sh\n"
		"/usr/bin/cc \"$@\"\n"
		"rc=$?\n"
		"case \"$*\" in *-o*)\n"
		"\tKILN_OBSERVE_IGNORE='%s' sh -c 'while [ ! -e \"$1\" ]; do sleep 0.05; done' sh '%s' ;;\n"
		"esac\n"
		"exit $rc\n", gate, gate) > 0);
	start_with_cc_script(wrapper, "cc-held", text, NULL);
	ck_assert_int_eq(pthread_create(&t, NULL, held_get_run, &h), 0);
	bool said = false;
	for (double end = harness_now_s() + 60; !said && harness_now_s() < end;) {
		char *log = harness_read_file(harness.log);
		said = log != NULL && harness_contains(log, "inputs hashed so far while it compiles");
		free(log);
		if (!said)
			harness_sleep_ms(50);
	}
	harness_write_file(gate, "");
	pthread_join(t, NULL);
	ck_assert_msg(said, "kilnd never said it hashed inputs while the compiler ran");
	ck_assert_msg(h.rc == KILN_OK, "%s: %s", kiln_strerror(h.rc), h.msg);
	harness_stop();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("concurrency");

	suite_add_tcase(s, harness_tcase("herd", herd_gets_one_build, 150));
	suite_add_tcase(s, harness_tcase("jobs", jobs_limit_keeps_two_compilers_busy, 200));
	suite_add_tcase(s, harness_tcase("compile_error", compile_error_reaches_every_waiter, 120));
	suite_add_tcase(s, harness_tcase("threads", threads_share_one_connection, 90));
	suite_add_tcase(s, harness_tcase("unresolved", unresolved_symbol_fails_the_build, 60));
	suite_add_tcase(s, harness_tcase("timeout", build_timeout_kills_the_compiler, 60));
	suite_add_tcase(s, harness_tcase("get_many", get_many_fills_the_slots, 120));
	suite_add_tcase(s, harness_tcase("multi_side_by_side", multi_source_compiles_side_by_side, 90));
	suite_add_tcase(s, harness_tcase("multi_jobs_limit", multi_source_steps_keep_the_jobs_limit, 150));
	suite_add_tcase(s, harness_tcase("multi_failure", multi_source_failure_stops_the_other_steps, 60));
	suite_add_tcase(s, harness_tcase("row_lost", row_lost_is_adopted_at_the_next_start, 120));
	suite_add_tcase(s, harness_tcase("prehash", inputs_hashed_while_compiling, 120));
	return harness_main(s);
}
