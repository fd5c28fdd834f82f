/*
 * A cache written by another kilnd, as an upgrade leaves it: entries of an
 * older key format (never hit again) and of an unknown one (from before
 * kiln recorded formats), one of them pinned, and another version among
 * the writers. kilnd says at start what it found, kiln status counts them,
 * a hit proves an unknown entry current, and kiln gc --stale removes the
 * rest, the pinned one with a warning. kilnd and kiln name their build.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

static void sql(const char *stmt)
{
	char path[HARNESS_PATH + 16];
	sqlite3 *db = NULL;
	char *err = NULL;

	snprintf(path, sizeof(path), "%s/index.db", harness.cache);
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	int rc = sqlite3_exec(db, stmt, NULL, NULL, &err);
	ck_assert_msg(rc == SQLITE_OK, "%s: %s", stmt, err ? err : "?");
	sqlite3_close(db);
}

static char *cli_ok(char **err, const char *a, const char *b)
{
	char *out = NULL;
	int rc = harness_cli(&out, err, a, b, NULL);
	ck_assert_msg(rc == 0, "kiln %s %s exited with %d: %s", a, b ? b : "", rc,
		      err && *err ? *err : "");
	return out;
}

START_TEST(stale_entries_are_said_counted_and_removed)
{
	char keys[3][72], stmt[512];
	struct kiln *k = NULL;

	harness_start(NULL);
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	for (int i = 0; i < 3; i++) {
		char name[32], alias[32];
		snprintf(name, sizeof(name), "upgrade_%d", i);
		snprintf(alias, sizeof(alias), "it:upgrade:%d", i);
		harness_get_program(k, name, 700 + i, alias, keys[i]);
	}
	kiln_close(k);
	free(cli_ok(NULL, "pin", "it:upgrade:0"));
	harness_stop();

	/* As an older kilnd left them: two of an older format, one unknown. */
	snprintf(stmt, sizeof(stmt), "UPDATE entries SET key_format = 3 WHERE key IN ('%s', '%s');"
		 " UPDATE entries SET key_format = NULL WHERE key = '%s';"
		 " UPDATE writers SET version = '0.0.9 (old)', last_start = 1;",
		 keys[0], keys[1], keys[2]);
	sql(stmt);
	harness_start(NULL);
	char *log = harness_read_file(harness.log);
	ck_assert_ptr_nonnull(log);
	ck_assert_msg(harness_contains(log, "2 entries") &&
		      harness_contains(log, "older than this kilnd's") &&
		      harness_contains(log, "1 pinned") && harness_contains(log, "gc --stale"),
		      "kilnd did not say what it found of the older format:\n%s", log);
	ck_assert_msg(harness_contains(log, "1 entries") &&
		      harness_contains(log, "before kiln recorded key formats"),
		      "kilnd did not count the unknown entry:\n%s", log);
	ck_assert_msg(harness_contains(log, "last written by kilnd 0.0.9 (old)"),
		      "kilnd did not name the cache's last writer:\n%s", log);
	free(log);

	cJSON *st = harness_status();
	ck_assert_int_eq(harness_num(st, "stale_entries"), 3);
	ck_assert_int_gt(harness_num(st, "disk_bytes"), harness_num(st, "bytes"));
	const cJSON *w = cJSON_GetObjectItemCaseSensitive(st, "writers");
	ck_assert_int_eq(cJSON_GetArraySize(w), 2);
	ck_assert_str_ne(harness_str(cJSON_GetArrayItem(w, 0), "version"), "0.0.9 (old)");
	ck_assert_str_eq(harness_str(cJSON_GetArrayItem(w, 1), "version"), "0.0.9 (old)");
	cJSON_Delete(st);
	char *out = cli_ok(NULL, "status", NULL);
	ck_assert_msg(harness_contains(out, "stale:") && harness_contains(out, "kiln gc --stale") &&
		      harness_contains(out, "written by:") && harness_contains(out, "0.0.9 (old)"),
		      "kiln status:\n%s", out);
	free(out);

	/* A hit of the unknown entry proves it current. */
	struct harness_result r = harness_in_child(NULL, "it:upgrade:2");
	ck_assert_msg(r.rc == KILN_OK, "lookup: %s: %s", kiln_strerror(r.rc), r.msg);
	ck_assert_int_eq(r.value, 702);

	char *err = NULL;
	out = cli_ok(&err, "gc", "--stale");
	ck_assert_msg(harness_contains(out, "removed 2 stale entries"), "kiln gc --stale: %s", out);
	ck_assert_msg(harness_contains(err, "1 of them were pinned"), "no warning: %s", err);
	free(out);
	free(err);
	cJSON *ls = harness_cli_json("ls", NULL);
	ck_assert_int_eq(cJSON_GetArraySize(ls), 1);
	ck_assert_ptr_nonnull(harness_find_entry(ls, "key", keys[2]));
	cJSON_Delete(ls);
	st = harness_status();
	ck_assert_int_eq(harness_num(st, "stale_entries"), 0);
	cJSON_Delete(st);
	ck_assert_int_eq(harness_cli(&out, &err, "gc", "--stale", "--max-size", "1G", NULL), 2);
	free(out);
	free(err);
	harness_stop();
}
END_TEST

/* kilnd --version and kiln --version name the build (git describe). */
START_TEST(versions_name_the_build)
{
	char *out = NULL;
	ck_assert_int_eq(harness_cli(&out, NULL, "--version", NULL), 0);
	ck_assert_msg(harness_contains(out, "(build "), "kiln --version: %s", out);
	free(out);
	harness_start(NULL);
	cJSON *st = harness_status();
	const char *build = harness_str(st, "build");
	ck_assert_msg(build != NULL && build[0] != '\0', "no build in the status reply");
	cJSON_Delete(st);
	harness_stop();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("upgrade");
	suite_add_tcase(s, harness_tcase("stale", stale_entries_are_said_counted_and_removed, 120));
	suite_add_tcase(s, harness_tcase("versions", versions_name_the_build, 60));
	return harness_main(s);
}
