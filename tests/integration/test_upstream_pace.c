/*
 * Integration tests of the pace of the upstream tier's polling: a job's
 * nodes look at each other's claims --upstream-looks times a second in all,
 * each kilnd by the job's size (--job-nodes, Slurm's environment, its
 * clients' hello), at least once every 10 s, and its waiting flights look
 * in turn.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "upstream_util.h"

/*
 * Waiting nodes look again at the claim at a pace set by the job's size
 * (--upstream-looks, 1000 a second, shared by its nodes), so that 4,096
 * nodes do not poll one metadata server 20 times a second each. At
 * 10,000,000 nodes, b looks at the floor of once every 10 s: in 2 s it does
 * not look at all (at the pace of a small job it looks 3 times: after 250
 * ms, then less and less often). A client's hello says its job's size too.
 */
START_TEST(polling_is_paced_by_the_job_size)
{
	struct claim_race c;
	memset(&c, 0, sizeof(c));
	claim_race_start_with(&c, "paced", 6, NULL, "10000000");
	cJSON *st = node_status(&c.b);
	ck_assert_int_eq(harness_num(st, "job_nodes"), 10000000);
	ck_assert_str_eq(harness_str(st, "job_nodes_source"), "--job-nodes");
	ck_assert_double_eq_tol(cJSON_GetObjectItem(st, "upstream_looks_per_s")->valuedouble,
				0.1, 1e-12);
	cJSON_Delete(st);
	sleep(2);
	st = node_status(&c.b);
	ck_assert_int_eq(harness_num(st, "upstream_looks"), 0);
	ck_assert_int_eq(harness_num(st, "upstream_waits"), 1);
	cJSON_Delete(st);

	/* A client of a 20,000,000-node job is not believed; one of 4,096 on
	 * a kilnd told 10,000,000 changes nothing; a larger word would. */
	setenv("SLURM_JOB_NUM_NODES", "20000000", 1);
	st = node_status(&c.b);
	ck_assert_int_eq(harness_num(st, "job_nodes"), 10000000);
	cJSON_Delete(st);
	setenv("SLURM_JOB_NUM_NODES", "4096", 1);
	st = node_status(&c.b);
	ck_assert_int_eq(harness_num(st, "job_nodes"), 10000000);
	ck_assert_str_eq(harness_str(st, "job_nodes_source"), "--job-nodes");
	cJSON_Delete(st);

	/* Once a has built, b still notices within about 10 s (the floor),
	 * fetches and compiles nothing. */
	harness_write_file(c.gate, "");
	harness_fleet_wait(c.fa, 60);
	ck_assert_msg(c.fa->results[0].rc == KILN_OK, "a's client: %s", c.fa->results[0].msg);
	harness_fleet_wait(c.fb, 60);
	ck_assert_msg(c.fb->results[0].rc == KILN_OK, "b's client: %s", c.fb->results[0].msg);
	ck_assert_int_eq(c.fb->results[0].value, 6);
	st = node_status(&c.b);
	ck_assert_int_ge(harness_num(st, "upstream_looks"), 1);
	ck_assert_int_eq(harness_num(st, "upstream_hits"), 1);
	ck_assert_int_eq(harness_num(st, "builds_started"), 0);
	cJSON_Delete(st);
	node_stop(&c.b);
	node_stop(&c.a);
	claim_race_end(&c);

	/* Without --job-nodes: the environment's Slurm hostlist (as in a
	 * prologue), then a client's larger word. */
	const char *env[] = { "SLURM_JOB_NODELIST=nid[0001-0128,0200]", NULL };
	unsetenv("SLURM_JOB_NUM_NODES");
	node_args_init(&c.args, NULL, NULL, NULL);
	node_use(&c.a);
	c.a.pid = harness_start_env(c.args.argv, env);
	harness.pid = 0;
	st = node_status(&c.a);
	ck_assert_int_eq(harness_num(st, "job_nodes"), 129);
	ck_assert_str_eq(harness_str(st, "job_nodes_source"), "environment");
	cJSON_Delete(st);
	setenv("SLURM_JOB_NUM_NODES", "4096", 1);
	st = node_status(&c.a);
	ck_assert_int_eq(harness_num(st, "job_nodes"), 4096);
	ck_assert_str_eq(harness_str(st, "job_nodes_source"), "client");
	ck_assert_double_eq_tol(cJSON_GetObjectItem(st, "upstream_looks_per_s")->valuedouble,
				1000.0 / 4096, 1e-9);
	cJSON_Delete(st);
	unsetenv("SLURM_JOB_NUM_NODES");
	node_stop(&c.a);
}
END_TEST

/* How many of node n's waiting flights (status upstream_waiting) have
 * looked at least once; -1 while fewer than want wait. */
static int flights_that_looked(const struct node *n, int want)
{
	cJSON *st = node_status(n);
	const cJSON *w = cJSON_GetObjectItem(st, "upstream_waiting"), *f;
	int count = 0, looked = 0;
	cJSON_ArrayForEach(f, w) {
		count++;
		looked += harness_num(f, "looks") >= 1;
	}
	cJSON_Delete(st);
	return count < want ? -1 : looked;
}

/*
 * Several flights waiting at a slow pace look in turn: at 1 look a second
 * for the kilnd (--job-nodes 1000), each of 4 waiting flights looks within
 * a few seconds. (The newest used to take every look: one of 4 never
 * looked, so it could not see its claim go stale either.)
 */
START_TEST(waiting_flights_look_in_turn)
{
	enum { N = 4 };
	char wrapper[HARNESS_PATH], log[HARNESS_PATH], gate[HARNESS_PATH], up[HARNESS_PATH];
	char tc[HARNESS_PATH + 8];
	struct kiln_request reqs[N];
	struct kiln_source srcs[N];
	char *texts[N];
	struct node a, b;

	harness_write_wrapper(harness_path(wrapper, "cc-wrapper"), harness_path(log, "wrapper.log"),
			      harness_path(gate, "gate"), 0);
	snprintf(tc, sizeof(tc), "cc=%s", wrapper);
	harness_path(up, "upstream");
	const char *args[] = { "--upstream", up, "--toolchain", tc, "--jobs", "4",
			       "--job-nodes", "1000", NULL };
	for (int i = 0; i < N; i++) {
		char name[32];
		snprintf(name, sizeof(name), "turn_%d", i);
		texts[i] = harness_program(name, 40 + i);
		harness_request(&reqs[i], &srcs[i], "prog.c", texts[i]);
	}
	node_init(&a, "a");
	node_init(&b, "b");
	node_start(&a, args);
	node_start(&b, args);
	struct harness_fleet *fa = harness_fleet_start(N, &(struct harness_fleet_opts){
		.socket = a.socket, .reqs = reqs, .nreqs = N });
	harness_wait_wrapper_starts(log, N, 60);
	struct harness_fleet *fb = harness_fleet_start(N, &(struct harness_fleet_opts){
		.socket = b.socket, .reqs = reqs, .nreqs = N });
	node_use(&b);
	harness.pid = 0;
	harness_wait_status("upstream_waits", N, 60);
	cJSON *st = node_status(&b);
	ck_assert_double_eq_tol(cJSON_GetObjectItem(st, "upstream_looks_per_s")->valuedouble, 1.0,
				1e-9);
	cJSON_Delete(st);
	int looked = 0;
	for (int t = 0; t < 600 && looked != N; t++) {
		harness_sleep_ms(100);
		looked = flights_that_looked(&b, N);
	}
	ck_assert_msg(looked == N, "only %d of %d waiting flights looked in 60 s", looked, N);
	harness_write_file(gate, "");
	harness_fleet_wait(fa, 60);
	harness_fleet_wait(fb, 60);
	for (int i = 0; i < N; i++) {
		ck_assert_msg(fa->results[i].rc == KILN_OK, "a: %s", fa->results[i].msg);
		ck_assert_msg(fb->results[i].rc == KILN_OK, "b: %s", fb->results[i].msg);
		free(texts[i]);
	}
	ck_assert_int_eq(harness_status_num_at(b.socket, "builds_started"), 0);
	harness_fleet_free(fa);
	harness_fleet_free(fb);
	node_stop(&b);
	node_stop(&a);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("upstream_pace");

	suite_add_tcase(s, harness_tcase("paced", polling_is_paced_by_the_job_size, 120));
	suite_add_tcase(s, harness_tcase("in_turn", waiting_flights_look_in_turn, 150));
	return harness_main(s);
}
