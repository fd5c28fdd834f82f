/*
 * Integration tests of kiln warm (a manifest built in parallel) and kiln
 * stats (--prometheus, kept across a restart and zeroed, programs built in
 * more than one variant, failed builds named).
 */
#include "harness.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void write_program(const char *rel, const char *name, int value)
{
	char path[HARNESS_PATH];
	char *text = harness_program(name, value);

	harness_write_file(harness_path(path, "%s", rel), text);
	free(text);
}

START_TEST(warm_builds_a_manifest)
{
	char manifest[HARNESS_PATH], *out = NULL;
	cJSON *r, *results, *st;
	int rc;

	ck_assert_int_eq(mkdir(harness_path(manifest, "m"), 0700), 0);
	write_program("m/a.c", "warm_a", 1);
	write_program("m/b.c", "warm_b", 2);
	write_program("m/c.c", "warm_c", 3);
	harness_write_file(harness_path(manifest, "m/bad.c"), "int broken( {\n");
	harness_write_file(harness_path(manifest, "m/manifest.json"),
		"{\"requests\": [\n"
		" {\"sources\": [\"a.c\"], \"alias\": \"warm:a\", \"args\": [\"-O2\"]},\n"
		" {\"sources\": [\"b.c\"], \"alias\": \"warm:b\"},\n"
		" {\"sources\": [{\"name\": \"c.c\", \"path\": \"c.c\"}], \"label\": \"c\"},\n"
		" {\"sources\": [{\"name\": \"d.c\", \"text\": \"int kiln_test_value(void) { return 4; }\\n\"}]},\n"
		" {\"sources\": [\"bad.c\"], \"alias\": \"warm:bad\"}\n"
		"]}\n");
	harness_start(NULL);
	rc = harness_cli(&out, NULL, "--json", "warm", manifest, NULL);
	ck_assert_msg(rc == 1, "warm with a failing request exited %d", rc);
	r = cJSON_Parse(out);
	ck_assert_msg(r != NULL, "not JSON: %s", out);
	free(out);
	ck_assert_int_eq(harness_num(r, "requests"), 5);
	ck_assert_int_eq(harness_num(r, "built"), 4);
	ck_assert_int_eq(harness_num(r, "failed"), 1);
	results = cJSON_GetObjectItem(r, "results");
	ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetArrayItem(results, 4), "ok")));
	ck_assert_msg(harness_contains(harness_str(cJSON_GetArrayItem(results, 4), "error"), "compiler"),
		      "the failure does not say why");
	/* The compiler's own output comes with it. */
	ck_assert_msg(harness_contains(harness_str(cJSON_GetArrayItem(results, 4), "log"), "bad.c"),
		      "the failure has no compiler output");
	cJSON_Delete(r);
	st = harness_status();
	ck_assert_int_eq(harness_num(st, "builds_started"), 5);
	cJSON_Delete(st);
	/* The aliases work, and a second warm finds everything cached. */
	{
		struct harness_result h = harness_in_child(NULL, "warm:b");

		ck_assert_msg(h.rc == KILN_OK && h.value == 2, "%s", h.msg);
	}
	char *err = NULL;
	rc = harness_cli(&out, &err, "warm", manifest, NULL);
	ck_assert_int_eq(rc, 1);
	ck_assert_msg(harness_contains(out, "0 built, 4 cached, 1 failed"), "output: %s", out);
	ck_assert_msg(harness_contains(out, "failed warm:bad"), "output: %s", out);
	ck_assert_msg(harness_contains(err, "bad.c") && harness_contains(err, "error"),
		      "the compiler's output is not on stderr: %s", err);
	free(out);
	free(err);
	/* A key that is not a manifest's (a typo) is refused, named. */
	harness_write_file(manifest, "{\"requests\": [{\"sources\": [\"a.c\"], \"arg\": [\"-O2\"]}]}");
	ck_assert_int_eq(harness_cli(NULL, &out, "warm", manifest, NULL), 1);
	ck_assert_msg(harness_contains(out, "unknown key \"arg\""), "stderr: %s", out);
	free(out);
	/* A malformed manifest is refused before anything is sent. */
	harness_write_file(manifest, "{\"requests\": [{\"sources\": 3}]}");
	ck_assert_int_eq(harness_cli(NULL, &out, "warm", manifest, NULL), 1);
	ck_assert_msg(harness_contains(out, "sources"), "stderr: %s", out);
	free(out);
	/* A truncated manifest: where the JSON stops, by line and column. */
	harness_write_file(manifest, "{\"requests\": [\n {\"sources\": [\"a.c\"]},\n {\"sour");
	ck_assert_int_eq(harness_cli(NULL, &out, "warm", manifest, NULL), 1);
	ck_assert_msg(harness_contains(out, "not valid JSON from line 3"), "stderr: %s", out);
	free(out);
	harness_stop();
}
END_TEST

/* kiln status -v and kiln stats name a counter alike: each of these names
 * begins a line of both; stats shows no member names (need_sources) and
 * gives the hit ratio that status gives. */
static void check_counter_names(void)
{
	static const char *const names[] = {
		"hits", "size", "max size", "builds started", "builds ok", "sources asked",
		"sources sent", "imported", "inputs changed", "not cacheable", "not observed",
	};
	char *status = NULL, *stats = NULL, want[64];

	ck_assert_int_eq(harness_cli(&status, NULL, "status", "-v", NULL), 0);
	ck_assert_int_eq(harness_cli(&stats, NULL, "stats", NULL), 0);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(want, sizeof(want), "\n%s:", names[i]);
		ck_assert_msg(harness_contains(status, want), "status lacks '%s':\n%s", names[i], status);
		snprintf(want, sizeof(want), "\n%-20s ", names[i]);
		ck_assert_msg(harness_contains(stats, want), "stats lacks '%s':\n%s", names[i], stats);
	}
	for (const char *line = stats; line != NULL && *line != '\0'; line = strchr(line, '\n')) {
		line += *line == '\n';
		size_t name_len = strcspn(line, "\n");
		ck_assert_msg(memchr(line, '_', name_len < 20 ? name_len : 20) == NULL,
			      "a member name in kiln stats: %.*s", (int)name_len, line);
	}
	ck_assert_msg(harness_contains(stats, "% of lookups)\n") &&
		      harness_contains(status, "% of lookups)\n"), "no hit ratio:\n%s", stats);
	free(status);
	free(stats);
}

START_TEST(stats_in_prometheus_format)
{
	char file[HARNESS_PATH], key[72], *out = NULL, *text;
	cJSON *st;

	harness_start(NULL);
	harness_get_program(NULL, "stats", 5, NULL, key);
	ck_assert_int_eq(harness_cli(&out, NULL, "stats", "--prometheus", NULL), 0);
	st = harness_status();
	{
		/* Labels stable across jobs: kilnd's user, the node, the cache. */
		char want[HARNESS_PATH + 512], node[256];
		const struct passwd *pw = getpwuid(geteuid());

		ck_assert_int_eq(gethostname(node, sizeof(node)), 0);
		node[sizeof(node) - 1] = '\0';
		node[strcspn(node, ".")] = '\0';
		snprintf(want, sizeof(want), "kiln_builds_started_total{user=\"%s\",node=\"%s\","
			 "cache=\"%s\"} %lld\n", pw != NULL ? pw->pw_name : "?", node, harness.cache,
			 (long long)harness_num(st, "builds_started"));
		ck_assert_msg(harness_contains(out, want), "no \"%s\" in:\n%s", want, out);
	}
	ck_assert(harness_contains(out, "# TYPE kiln_hits_total counter\n"));
	ck_assert(harness_contains(out, "# TYPE kiln_cache_entries gauge\n"));
	ck_assert(harness_contains(out, "kiln_up{"));
	/* Values as people write them: no float noise (0.23899999999999999). */
	for (char *line = out; line != NULL && *line != '\0';) {
		char *end = strchr(line, '\n');
		size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
		const char *v = memrchr(line, ' ', len);
		size_t digits = 0;
		for (const char *q = v != NULL ? v + 1 : line; q < line + len; q++)
			digits += *q >= '0' && *q <= '9';
		ck_assert_msg(line[0] == '#' || digits <= 15, "%.*s", (int)len, line);
		line = end != NULL ? end + 1 : NULL;
	}
	cJSON_Delete(st);
	free(out);
	check_counter_names();
	ck_assert_int_eq(harness_cli(NULL, NULL, "stats", "--prometheus", "-o",
				     harness_path(file, "kiln.prom"), NULL), 0);
	text = harness_read_file(file);
	ck_assert_msg(harness_contains(text, "kiln_cache_entries{"), "%s", text);
	free(text);
	ck_assert_int_eq(harness_cli(NULL, NULL, "stats", "-o", file, NULL), 2);
	/* Evictions are counted; text shows sizes in units, counts as integers. */
	ck_assert_int_eq(harness_cli(NULL, NULL, "gc", "--max-size", "1", NULL), 0);
	ck_assert_int_eq(harness_cli(&out, NULL, "stats", NULL), 0);
	ck_assert_msg(harness_contains(out, "evicted              1\n") &&
		      harness_contains(out, " KiB\n") && harness_contains(out, "uptime ") &&
		      !harness_contains(out, "uptime_s"), "%s", out);
	free(out);
	st = harness_status();
	ck_assert_int_eq(harness_num(st, "evicted"), 1);
	ck_assert_int_gt(harness_num(st, "evicted_bytes"), 0);
	cJSON_Delete(st);
	harness_stop();
}
END_TEST

/* One number of a --json object, through a path of members. */
static int64_t member_num(const cJSON *o, const char *a, const char *b, const char *c)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);
	if (b != NULL)
		v = cJSON_GetObjectItemCaseSensitive(v, b);
	if (c != NULL)
		v = cJSON_GetObjectItemCaseSensitive(v, c);
	ck_assert_msg(cJSON_IsNumber(v), "no number at %s.%s.%s", a, b ? b : "", c ? c : "");
	return (int64_t)v->valuedouble;
}

/* kiln build --alias ALIAS --label LABEL of a one-line program returning
 * v; 0 or the CLI's status. */
static int build_aliased(const char *alias, const char *label, int v)
{
	char src[HARNESS_PATH], text[128], *out = NULL, *err = NULL;
	snprintf(text, sizeof(text), "int f(void) { return %d; }\n", v);
	harness_write_file(harness_path(src, "variant%d.c", v), text);
	int rc = harness_cli(&out, &err, "build", "--alias", alias, "--label", label, src, NULL);
	ck_assert_msg(rc == 0, "build failed: %s", err);
	free(out);
	free(err);
	return rc;
}

/*
 * One alias (one lowered input) built under two request keys: reported once
 * in the log with both keys, the cause and the remedy, and counted in
 * status, stats and the Prometheus text; a hit, another alias and the same
 * key again are no variant, nor are programs of one label under their own
 * aliases (static variants of one GT4Py program, issue 48).
 */
START_TEST(program_built_in_two_variants_is_reported)
{
	char *out = NULL, *log;
	harness_start(NULL);
	build_aliased("gt4py:axpy", "dace axpy", 1);
	build_aliased("gt4py:axpy", "dace axpy", 1);   /* a hit */
	build_aliased("gt4py:jacobi", "dace jacobi", 2);
	/* static variants: one label, each its own alias and code */
	build_aliased("gt4py:stencil-v0", "dace stencil", 5);
	build_aliased("gt4py:stencil-v1", "dace stencil", 6);
	build_aliased("gt4py:stencil-v2", "dace stencil", 7);
	ck_assert_int_eq(harness_status_num_at(harness.socket, "variants"), 0);
	build_aliased("gt4py:axpy", "dace axpy", 3);   /* another variant of axpy */
	ck_assert_int_eq(harness_status_num_at(harness.socket, "variants"), 1);
	ck_assert_int_eq(harness_status_num_at(harness.socket, "variant_builds"), 1);
	build_aliased("gt4py:axpy", "dace axpy", 4);   /* a third: the same program, said once */
	ck_assert_int_eq(harness_status_num_at(harness.socket, "variants"), 1);
	ck_assert_int_eq(harness_status_num_at(harness.socket, "variant_builds"), 2);
	log = harness_read_file(harness.log);
	ck_assert_msg(harness_contains(log, "alias \"gt4py:axpy\" (dace axpy) is built in more than one "
				       "variant"), "no variant report in the log");
	ck_assert_msg(harness_contains(log, "PYTHONHASHSEED=0"), "the remedy is not named");
	ck_assert_msg(!harness_contains(log, "jacobi\" is built in more") &&
		      !harness_contains(log, "(dace stencil) is built in more"), "a false report");
	free(log);
	ck_assert_int_eq(harness_cli(&out, NULL, "stats", "--prometheus", NULL), 0);
	const char *m = strstr(out, "\nkiln_variants_total{");
	ck_assert_msg(m != NULL && strncmp(strchr(m, '}'), "} 1\n", 4) == 0,
		      "no kiln_variants_total 1 in kiln stats --prometheus");
	free(out);
	ck_assert_int_eq(harness_cli(&out, NULL, "status", NULL), 0);
	ck_assert_msg(harness_contains(out, "variants"), "kiln status does not show it: %s", out);
	free(out);
	harness_stop();
}
END_TEST

/*
 * A build that failed is named, with what kiln log takes, by kiln status
 * and by the Slurm epilogue's per-node part (run here as the node epilog
 * would: KILN_SLURM_MODE=node, without srun).
 */
START_TEST(failed_builds_are_named)
{
	char src[HARNESS_PATH], epi[HARNESS_PATH + 64], script[3 * HARNESS_PATH], *out = NULL,
		*err = NULL;
	harness_start(NULL);
	build_aliased("dace:good", "dace good", 7);
	harness_write_file(harness_path(src, "broken.c"), "int f(void) { return }\n");
	ck_assert_int_ne(harness_cli(&out, &err, "build", "--label", "dace broken", src, NULL), 0);
	free(out);
	free(err);
	ck_assert_int_eq(harness_cli(&out, NULL, "status", NULL), 0);
	const char *line = strstr(out, "failed build:   dace broken (kiln log ");
	ck_assert_msg(line != NULL, "kiln status does not name the failed build:\n%s", out);
	char rkey[17] = "";
	ck_assert_int_eq(sscanf(line, "failed build:   dace broken (kiln log %16[0-9a-f])", rkey), 1);
	ck_assert_msg(!harness_contains(out, "failed build:   dace good"), "%s", out);
	free(out);
	ck_assert_int_eq(harness_cli(&out, NULL, "log", rkey, NULL), 0);
	ck_assert_msg(harness_contains(out, "error"), "kiln log %s: %s", rkey, out);
	free(out);

	snprintf(epi, sizeof(epi), "%s/../../../systemd/slurm/kiln-epilogue.sh", getenv("KILN_TEST_DATA"));
	snprintf(script, sizeof(script), "KILN_SLURM_DEFINE_ONLY=1 . '%s' && SLURMD_NODENAME=n1 "
		 "KILN_SLURM_MODE=node KILN_CLI='%s' KILN_SOCKET='%s' bash -c \"$_kiln_slurm_node_stop\"",
		 epi, harness_cli_path(), harness.socket);
	const char *argv[] = { "/bin/bash", "-c", script, NULL };
	char outp[HARNESS_PATH];
	harness_path(outp, "epilogue.out");
	int status = harness_run(argv, outp, NULL, 30);
	char *said = harness_read_file(outp);
	ck_assert_msg(status == 0, "the epilogue's node part exited 0x%x: %s", status, said);
	ck_assert_msg(harness_contains(said, "builds_failed=1"), "%s", said);
	char want[96];
	snprintf(want, sizeof(want), "kiln-failed-build node=n1 dace broken (kiln log %s)", rkey);
	ck_assert_msg(harness_contains(said, want), "the epilogue does not name it:\n%s", said);
	free(said);
	harness_stop();
}
END_TEST

START_TEST(stats_survive_a_restart_and_zero)
{
	char key[72], want[HARNESS_PATH + 128], *out = NULL;
	harness_start(NULL);
	harness_get_program(NULL, "kept", 1, NULL, key);   /* a miss and a build */
	harness_get_program(NULL, "kept", 1, NULL, key);   /* a hit */
	cJSON *st = harness_cli_json("stats", NULL);
	ck_assert_int_eq(harness_num(st, "hits"), 1);
	ck_assert_int_eq(harness_num(st, "misses"), 1);
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(st, "running")));
	ck_assert_int_eq(member_num(st, "toolchain_stats", "cc", "hits"), 1);
	ck_assert_int_eq(member_num(st, "toolchain_stats", "cc", "builds_ok"), 1);
	ck_assert_int_eq(member_num(st, "build_seconds", "count", NULL), 1);
	int64_t since = harness_num(st, "stats_since");
	ck_assert_int_gt(since, 0);
	cJSON_Delete(st);
	/* Per toolchain and the histogram in Prometheus' format. */
	ck_assert_int_eq(harness_cli(&out, NULL, "stats", "--prometheus", NULL), 0);
	snprintf(want, sizeof(want), "cache=\"%s\",toolchain=\"cc\"} 1\n", harness.cache);
	ck_assert_msg(harness_contains(out, want), "no \"%s\" in:\n%s", want, out);
	ck_assert(harness_contains(out, "# TYPE kiln_build_seconds histogram\n"));
	ck_assert(harness_contains(out, ",le=\"+Inf\"} 1\n"));
	ck_assert(harness_contains(out, "kiln_build_seconds_count{"));
	free(out);
	/* Kept in the index: read while kilnd is down, and after a restart. */
	harness_stop();
	st = harness_cli_json("stats", NULL);
	ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(st, "running")));
	ck_assert_int_eq(harness_num(st, "hits"), 1);
	ck_assert_int_eq(harness_num(st, "builds_ok"), 1);
	ck_assert_int_eq(member_num(st, "toolchain_stats", "cc", "misses"), 1);
	ck_assert_int_eq(harness_num(st, "stats_since"), since);
	cJSON_Delete(st);
	ck_assert_int_eq(harness_cli(&out, NULL, "stats", "--prometheus", NULL), 0);
	ck_assert_msg(harness_contains(out, "} 0\n") && harness_contains(out, "kiln_up{"), "%s", out);
	free(out);
	harness_start(NULL);
	harness_get_program(NULL, "kept", 1, NULL, key);
	st = harness_status();
	ck_assert_int_eq(harness_num(st, "hits"), 2);
	ck_assert_int_eq(harness_num(st, "builds_ok"), 1);
	cJSON_Delete(st);
	/* --zero, by kilnd. */
	ck_assert_int_eq(harness_cli(&out, NULL, "stats", "--zero", NULL), 0);
	ck_assert_msg(harness_contains(out, "zeroed"), "%s", out);
	free(out);
	st = harness_cli_json("stats", NULL);
	ck_assert_int_eq(harness_num(st, "hits"), 0);
	ck_assert_int_eq(harness_num(st, "builds_ok"), 0);
	ck_assert_int_eq(member_num(st, "toolchain_stats", "cc", "hits"), 0);
	ck_assert_int_eq(member_num(st, "build_seconds", "count", NULL), 0);
	ck_assert_int_ge(harness_num(st, "stats_since"), since);
	cJSON_Delete(st);
	harness_get_program(NULL, "kept", 1, NULL, key);
	harness_stop();
	st = harness_cli_json("stats", NULL);
	ck_assert_int_eq(harness_num(st, "hits"), 1);
	cJSON_Delete(st);
	/* --zero in the index while kilnd is down. */
	st = harness_cli_json("stats", "-z", NULL);
	cJSON_Delete(st);
	st = harness_cli_json("stats", NULL);
	ck_assert_int_eq(harness_num(st, "hits"), 0);
	ck_assert_int_eq(member_num(st, "build_seconds", "count", NULL), 0);
	cJSON_Delete(st);
	harness_start(NULL);
	ck_assert_int_eq(harness_status_num_at(harness.socket, "hits"), 0);
	harness_stop();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("warm_stats");

	suite_add_tcase(s, harness_tcase("warm", warm_builds_a_manifest, 120));
	suite_add_tcase(s, harness_tcase("stats", stats_in_prometheus_format, 60));
	suite_add_tcase(s, harness_tcase("stats_kept", stats_survive_a_restart_and_zero, 90));
	suite_add_tcase(s, harness_tcase("variants", program_built_in_two_variants_is_reported, 90));
	suite_add_tcase(s, harness_tcase("failed_named", failed_builds_are_named, 90));
	return harness_main(s);
}
