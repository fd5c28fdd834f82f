/*
 * kiln export / kiln import (daemon/server/op_transfer.c,
 * client/cli/cli_transfer.c): entries moved between two daemons' caches
 * through a directory, each job in its own directory; an import writes
 * nothing into its source and leaves the cache's pins alone; an archive
 * kiln does not make is refused.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Enters a new directory rel (and $PWD with it), as a job started there;
 * the previous one goes to back. */
static void enter_job_dir(const char *rel, char back[HARNESS_PATH])
{
	char dir[HARNESS_PATH];

	ck_assert_ptr_nonnull(getcwd(back, HARNESS_PATH));
	ck_assert_int_eq(mkdir(harness_path(dir, "%s", rel), 0700), 0);
	ck_assert_int_eq(chdir(dir), 0);
	setenv("PWD", dir, 1);
}

static void leave_job_dir(const char *back)
{
	ck_assert_int_eq(chdir(back), 0);
	setenv("PWD", back, 1);
}

/* The two daemons were started in different directories (two jobs): every
 * entry is taken all the same (where a kilnd starts is no input). */
START_TEST(export_then_import_on_another_node)
{
	char keys[3][72], tgz[HARNESS_PATH], dir[HARNESS_PATH], sock2[HARNESS_PATH];
	char *out = NULL, obj[HARNESS_PATH * 2], back[HARNESS_PATH];
	cJSON *r, *st;

	enter_job_dir("job-1", back);
	harness_start(NULL);
	leave_job_dir(back);
	harness_get_program(NULL, "exp_0", 60, NULL, keys[0]);
	harness_get_program(NULL, "exp_1", 61, NULL, keys[1]);
	harness_get_program(NULL, "exp_2", 62, NULL, keys[2]);
	ck_assert_int_eq(harness_cli(&out, NULL, "export", harness_path(tgz, "cache.tgz"), NULL), 0);
	ck_assert_msg(harness_contains(out, "exported 3 entries"), "%s", out);
	free(out);
	ck_assert_int_eq(harness_cli(NULL, NULL, "export", harness_path(dir, "exportdir"), NULL), 0);
	/* A directory others may write to is refused, saying why. */
	ck_assert_int_eq(mkdir(harness_path(obj, "open"), 0700), 0);
	ck_assert_int_eq(chmod(obj, 0777), 0);
	ck_assert_int_eq(harness_cli(NULL, &out, "export", obj, NULL), 1);
	ck_assert_msg(harness_contains(out, "writable by group or others"), "stderr: %s", out);
	free(out);

	/* Another node: every program is served from the import, no compiler. */
	enter_job_dir("job-2", back);
	harness_start_named("node2", NULL, NULL, sock2);
	leave_job_dir(back);
	{
		const char *args[] = { harness_cli_path(), "--socket", sock2, "--json", "import", tgz,
				       NULL };

		ck_assert_int_eq(harness_run(args, harness_path(obj, "import.out"), NULL, 60), 0);
		out = harness_read_file(obj);
		r = cJSON_Parse(out);
		ck_assert_msg(r != NULL, "%s", out);
		ck_assert_int_eq(harness_num(r, "imported"), 3);
		cJSON_Delete(r);
		free(out);
	}
	for (int i = 0; i < 3; i++) {
		struct kiln_request req;
		struct kiln_source src;
		char name[16];
		char *text;
		struct kiln *k;
		struct kiln_program *p;
		int (*fn)(void);

		snprintf(name, sizeof(name), "exp_%d", i);
		text = harness_program(name, 60 + i);
		harness_request(&req, &src, "prog.c", text);
		ck_assert_int_eq(kiln_open(sock2, &k), KILN_OK);
		ck_assert_msg(kiln_get(k, &req, &p) == KILN_OK, "%s", kiln_errmsg(k));
		ck_assert_str_eq(kiln_program_key(p), keys[i]);
		*(void **)&fn = kiln_sym(p, "kiln_test_value");
		ck_assert_int_eq(fn(), 60 + i);
		kiln_close(k);
		free(text);
	}
	st = harness_status_at(sock2);
	ck_assert_int_eq(harness_num(st, "builds_started"), 0);
	ck_assert_int_eq(harness_num(st, "imports"), 3);
	cJSON_Delete(st);

	/* A damaged object in an export is counted and not imported. */
	snprintf(obj, sizeof(obj), "find %s/objects -name '*.so' | head -1 | xargs truncate -s 100",
		 dir);
	ck_assert_int_eq(system(obj), 0);
	{
		char sock3[HARNESS_PATH];
		const char *args[] = { harness_cli_path(), "--socket", sock3, "--json", "import", dir,
				       NULL };

		harness_start_named("node3", NULL, NULL, sock3);
		ck_assert_int_eq(harness_run(args, harness_path(obj, "import3.out"), NULL, 60), 0);
		out = harness_read_file(obj);
		r = cJSON_Parse(out);
		ck_assert_msg(r != NULL, "%s", out);
		ck_assert_int_eq(harness_num(r, "imported"), 2);
		ck_assert_int_eq(harness_num(r, "damaged"), 1);
		cJSON_Delete(r);
		free(out);
	}
	harness_stop();
}
END_TEST

/* The number of files and directories below dir (find's count, dir excluded). */
static int tree_size(const char *dir)
{
	char cmd[HARNESS_PATH + 64];
	snprintf(cmd, sizeof(cmd), "find '%s' -mindepth 1 | wc -l", dir);
	FILE *fp = popen(cmd, "r");
	int n = -1;
	ck_assert_ptr_nonnull(fp);
	ck_assert_int_eq(fscanf(fp, "%d", &n), 1);
	pclose(fp);
	return n;
}

/* kiln import reads its source and writes nothing there (as root, `kiln
 * import /etc` wrote objects/, entries/, claims/ and tmp/ into /etc); an
 * entry the cache holds already is counted as such, copied again never,
 * and keeps its pin. */
/* An archive kiln does not make (w.zip) is refused; no directory of that
 * name appears. */
START_TEST(export_refuses_unknown_archives)
{
	char path[HARNESS_PATH], *err = NULL;
	harness_start(NULL);
	for (int i = 0; i < 3; i++) {
		static const char *const names[] = { "w.zip", "w.tar.xz", "w.7z" };
		harness_path(path, "%s", names[i]);
		ck_assert_int_eq(harness_cli(NULL, &err, "export", path, NULL), 2);
		ck_assert_msg(harness_contains(err, ".tar.gz"), "stderr: %s", err);
		ck_assert_msg(!harness_exists(path), "export made %s", path);
		free(err);
	}
	harness_stop();
}
END_TEST

START_TEST(import_leaves_its_source_and_the_cache_alone)
{
	char key[72], dir[HARNESS_PATH], empty[HARNESS_PATH];
	char *out = NULL;

	harness_start(NULL);
	harness_get_program(NULL, "imp_0", 70, NULL, key);
	ck_assert_int_eq(harness_cli(NULL, NULL, "export", harness_path(dir, "exported"), NULL), 0);
	ck_assert_int_eq(harness_cli(NULL, NULL, "pin", key, NULL), 0);

	/* A private directory with nothing in it: nothing to import, nothing made. */
	ck_assert_int_eq(mkdir(harness_path(empty, "empty"), 0700), 0);
	harness_cli(NULL, NULL, "import", empty, NULL);
	ck_assert_msg(tree_size(empty) == 0, "kiln import wrote into the directory it imports from");

	/* The export again, into the cache that made it. */
	int before = tree_size(dir);
	cJSON *r = harness_cli_json("import", dir, NULL);
	ck_assert_int_eq(harness_num(r, "imported"), 0);
	ck_assert_int_eq(harness_num(r, "kept"), 1);
	cJSON_Delete(r);
	ck_assert_int_eq(tree_size(dir), before);
	ck_assert_int_eq(harness_cli(&out, NULL, "import", dir, NULL), 0);
	ck_assert_msg(harness_contains(out, "1 already present"), "%s", out);
	free(out);
	cJSON *e = harness_cli_json("show", key, NULL);
	ck_assert_msg(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "pinned")),
		      "importing an entry that was there dropped its pin");
	cJSON_Delete(e);
	harness_stop();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("transfer");

	suite_add_tcase(s, harness_tcase("transfer", export_then_import_on_another_node, 120));
	suite_add_tcase(s, harness_tcase("import_alone", import_leaves_its_source_and_the_cache_alone, 120));
	suite_add_tcase(s, harness_tcase("export_suffix", export_refuses_unknown_archives, 60));
	return harness_main(s);
}
