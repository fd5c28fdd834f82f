/*
 * Integration tests of the kiln CLI against the real daemon: status, build,
 * ls, show, log, pin, rm and stop, in human and JSON form, and the read-only
 * commands with the daemon down.
 */
#include "harness.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Runs the CLI, requires exit status 0 and returns stdout (caller frees). */
static char *cli_ok(const char *const *args)
{
	char *out, *err;
	int rc = harness_cliv(&out, &err, args);

	ck_assert_msg(rc == 0, "kiln %s exited with %d: %s", args[0], rc, err);
	free(err);
	return out;
}

/* Runs the CLI, requires a non-zero exit status and a message on stderr;
 * returns stderr (caller frees). */
static char *cli_fails(const char *const *args)
{
	char *out, *err;
	int rc = harness_cliv(&out, &err, args);

	ck_assert_msg(rc > 0, "kiln %s exited with %d, expected a failure; stdout: %s", args[0], rc,
		      out);
	ck_assert_msg(*err != '\0', "kiln %s failed without a message on stderr", args[0]);
	free(out);
	return err;
}

static char *data_file(const char *name)
{
	char *path = NULL;

	ck_assert(asprintf(&path, "%s/%s", harness_data(), name) > 0);
	return path;
}

/* Every entry of "kiln --json ls" has the documented members. */
static void check_entry_members(const cJSON *e)
{
	static const char *const numbers[] = { "size", "created", "last_used", "uses", "build_ms" };
	static const char *const nullable[] = { "label", "alias" };

	ck_assert_uint_eq(strlen(harness_str(e, "key")), 64);
	ck_assert(harness_exists(harness_str(e, "path")));
	ck_assert_str_eq(harness_str(e, "output"), "shared");
	for (size_t i = 0; i < sizeof(numbers) / sizeof(numbers[0]); i++)
		harness_num(e, numbers[i]);
	for (size_t i = 0; i < sizeof(nullable) / sizeof(nullable[0]); i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, nullable[i]);

		ck_assert_msg(cJSON_IsString(v) || cJSON_IsNull(v), "entry member %s", nullable[i]);
	}
	ck_assert(cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(e, "pinned")));
}

START_TEST(cli_commands_with_and_without_the_daemon)
{
	static const char *const status_fields[] = {
		"pid", "proto", "jobs", "entries", "bytes", "uptime_s", "requests", "hits", "misses",
		"builds_started", "builds_ok", "builds_failed", "joined", "in_flight", "queued",
	};
	char *answer = data_file("answer.c"), *warning = data_file("warning.c");
	char *broken = data_file("broken.c");
	char pid[32], key[72], warn_key[72], obj[HARNESS_PATH];
	cJSON *st, *b, *ls, *show;
	const cJSON *e;
	char *out, *err;
	int status;

	harness_start(NULL);
	snprintf(pid, sizeof(pid), "%d", (int)harness.pid);

	/* status, human and JSON. */
	out = cli_ok((const char *[]){ "status", NULL });
	ck_assert_msg(harness_contains(out, pid), "kiln status does not show pid %s: %s", pid, out);
	ck_assert_msg(harness_contains(out, harness.cache), "kiln status lacks the cache: %s", out);
	/* Short by default: a zero counter of trouble and the detail only with -v. */
	ck_assert_msg(harness_contains(out, "\nhits:") && harness_contains(out, "\nbuilds started:"),
		      "kiln status lacks the traffic: %s", out);
	ck_assert_msg(!harness_contains(out, "\nnot observed:") &&
		      !harness_contains(out, "\ntext waits:") && !harness_contains(out, "\nflights:") &&
		      !harness_contains(out, "\non disk:"), "kiln status is not short: %s", out);
	free(out);
	out = cli_ok((const char *[]){ "status", "--verbose", NULL });
	ck_assert_msg(harness_contains(out, "\nnot observed:     0\n") &&
		      harness_contains(out, "\ntext waits:") && harness_contains(out, "\nflights:") &&
		      harness_contains(out, "\non disk:") && harness_contains(out, "\nprotocol:"),
		      "kiln status --verbose lacks a counter: %s", out);
	free(out);
	err = cli_fails((const char *[]){ "status", "extra", NULL });
	ck_assert_msg(harness_contains(err, "status takes no arguments"), "%s", err);
	free(err);
	st = harness_status();
	for (size_t i = 0; i < sizeof(status_fields) / sizeof(status_fields[0]); i++)
		harness_num(st, status_fields[i]);
	ck_assert_int_eq(harness_num(st, "pid"), harness.pid);
	ck_assert_int_eq(harness_num(st, "proto"), 3);
	ck_assert_str_eq(harness_str(st, "version"), KILN_VERSION);
	ck_assert_str_eq(harness_str(st, "socket"), harness.socket);
	ck_assert_str_eq(harness_str(st, "cache_dir"), harness.cache);
	cJSON_Delete(st);

	/* build, human: it says built, then cached. */
	out = cli_ok((const char *[]){ "build", "--alias", "it:answer", "--label", "the answer",
				       answer, "--", "-DKILN_ANSWER=42", NULL });
	ck_assert_msg(harness_contains(out, "built "), "kiln build did not say built: %s", out);
	free(out);
	b = harness_cli_json("build", "--alias", "it:answer", "--label", "the answer", answer, "--",
			     "-DKILN_ANSWER=42", NULL);
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "cached")));
	ck_assert(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(b, "joined")));
	harness_num(b, "build_ms");
	snprintf(key, sizeof(key), "%s", harness_str(b, "key"));
	ck_assert_uint_eq(strlen(key), 64);
	ck_assert(harness_exists(harness_str(b, "path")));
	cJSON_Delete(b);
	out = cli_ok((const char *[]){ "build", "--alias", "it:answer", "--label", "the answer",
				       answer, "--", "-DKILN_ANSWER=42", NULL });
	ck_assert_msg(harness_contains(out, "cached") && harness_contains(out, key),
		      "a repeated kiln build did not say cached %s: %s", key, out);
	free(out);

	/* A build with a warning keeps the compiler's output in its log. */
	b = harness_cli_json("build", "--label", "warns", warning, NULL);
	ck_assert(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(b, "cached")));
	snprintf(warn_key, sizeof(warn_key), "%s", harness_str(b, "key"));
	cJSON_Delete(b);
	out = cli_ok((const char *[]){ "log", warn_key, NULL });
	ck_assert_msg(harness_contains(out, "kiln-test-warning"),
		      "kiln log does not show the compiler's warning: %s", out);
	free(out);

	/* A failing build: non-zero exit, the compiler's error on stderr. */
	err = cli_fails((const char *[]){ "build", broken, NULL });
	ck_assert_msg(harness_contains(err, "kiln_no_such_name"),
		      "kiln build of a broken file does not show the error: %s", err);
	free(err);

	/* ls, human and JSON. */
	out = cli_ok((const char *[]){ "ls", NULL });
	ck_assert_msg(harness_contains(out, "the answer") && harness_contains(out, "it:answer") &&
		      harness_contains(out, "warns"), "kiln ls: %s", out);
	{
		char short_key[16];

		snprintf(short_key, sizeof(short_key), "%.12s", key);
		ck_assert_msg(harness_contains(out, short_key), "kiln ls lacks key %s: %s", short_key,
			      out);
	}
	free(out);
	ls = harness_cli_json("ls", NULL);
	ck_assert(cJSON_IsArray(ls));
	ck_assert_int_eq(cJSON_GetArraySize(ls), 2);
	cJSON_ArrayForEach(e, ls)
		check_entry_members(e);
	e = harness_find_entry(ls, "alias", "it:answer");
	ck_assert_ptr_nonnull(e);
	ck_assert_str_eq(harness_str(e, "key"), key);
	ck_assert_str_eq(harness_str(e, "label"), "the answer");
	ck_assert_int_ge(harness_num(e, "uses"), 2);
	cJSON_Delete(ls);

	/* show by alias and by key prefix. */
	out = cli_ok((const char *[]){ "show", "it:answer", NULL });
	ck_assert_msg(harness_contains(out, key) && harness_contains(out, "answer.c") &&
		      harness_contains(out, "-DKILN_ANSWER=42"), "kiln show: %s", out);
	{
		/* the object's SHA-256, as kiln(1) says show prints */
		cJSON *entry = harness_cli_json("show", "it:answer", NULL);
		char line[128];
		snprintf(line, sizeof(line), "sha256:    %s\n", harness_str(entry, "sha256"));
		ck_assert_msg(strlen(harness_str(entry, "sha256")) == 64 && harness_contains(out, line),
			      "kiln show: %s", out);
		cJSON_Delete(entry);
	}
	free(out);
	{
		char prefix[16];

		snprintf(prefix, sizeof(prefix), "%.8s", key);
		show = harness_cli_json("show", prefix, NULL);
	}
	ck_assert_str_eq(harness_str(show, "key"), key);
	ck_assert(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(show, "args")));
	ck_assert(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(show, "sources")));
	ck_assert_str_eq(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(show, "sources"), 0)
			 ->valuestring, "answer.c");
	cJSON_Delete(show);
	err = cli_fails((const char *[]){ "show", "it:no-such-alias", NULL });
	free(err);

	/* pin and unpin show in ls. */
	free(cli_ok((const char *[]){ "pin", "it:answer", NULL }));
	ls = harness_cli_json("ls", NULL);
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(harness_find_entry(ls, "alias", "it:answer"),
								"pinned")));
	cJSON_Delete(ls);
	free(cli_ok((const char *[]){ "unpin", "it:answer", NULL }));
	ls = harness_cli_json("ls", NULL);
	ck_assert(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(harness_find_entry(ls, "alias", "it:answer"),
								 "pinned")));
	cJSON_Delete(ls);

	/* rm removes the entry and its object. */
	show = harness_cli_json("show", warn_key, NULL);
	snprintf(obj, sizeof(obj), "%s", harness_str(show, "path"));
	cJSON_Delete(show);
	free(cli_ok((const char *[]){ "rm", warn_key, NULL }));
	ck_assert(!harness_exists(obj));
	ls = harness_cli_json("ls", NULL);
	ck_assert_int_eq(cJSON_GetArraySize(ls), 1);
	cJSON_Delete(ls);

	/* stop: the daemon exits 0 and removes its socket. */
	out = cli_ok((const char *[]){ "stop", NULL });
	free(out);
	status = harness_wait(harness.pid, 30);
	ck_assert_msg(status != -1, "kilnd still runs 30 s after kiln stop");
	harness.pid = 0;
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "kilnd exited with 0x%x",
		      status);
	ck_assert(!harness_exists(harness.socket));

	/* With the daemon down, ls, show and log read the cache. */
	out = cli_ok((const char *[]){ "ls", NULL });
	ck_assert_msg(harness_contains(out, "the answer"), "kiln ls without kilnd: %s", out);
	free(out);
	ls = harness_cli_json("ls", NULL);
	ck_assert_int_eq(cJSON_GetArraySize(ls), 1);
	check_entry_members(cJSON_GetArrayItem(ls, 0));
	ck_assert_str_eq(harness_str(cJSON_GetArrayItem(ls, 0), "key"), key);
	cJSON_Delete(ls);
	out = cli_ok((const char *[]){ "show", "it:answer", NULL });
	ck_assert_msg(harness_contains(out, key), "kiln show without kilnd: %s", out);
	free(out);
	free(cli_ok((const char *[]){ "log", "it:answer", NULL }));
	err = cli_fails((const char *[]){ "status", NULL });
	free(err);
	free(answer);
	free(warning);
	free(broken);
}
END_TEST

/* C++ in two files: kiln build -t c++ links them into one shared object. */
START_TEST(cli_builds_cxx_from_several_files)
{
	char *main_cpp = data_file("cxx_main.cpp"), *helper_cpp = data_file("cxx_helper.cpp");
	int (*fn)(void);
	cJSON *b, *show;
	void *h;

	harness_start(NULL);
	b = harness_cli_json("build", "-t", "c++", "--label", "cxx", main_cpp, helper_cpp, "--",
			     "-O1", NULL);
	h = dlopen(harness_str(b, "path"), RTLD_NOW | RTLD_LOCAL);
	ck_assert_msg(h != NULL, "the C++ object does not load: %s", dlerror());
	*(void **)&fn = dlsym(h, "kiln_test_value");
	ck_assert_ptr_nonnull(fn);
	ck_assert_int_eq(fn(), 110);
	dlclose(h);
	show = harness_cli_json("show", harness_str(b, "key"), NULL);
	ck_assert_str_eq(harness_str(show, "toolchain"), "c++");
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(show, "sources")), 2);
	cJSON_Delete(show);
	cJSON_Delete(b);
	harness_stop();
	free(main_cpp);
	free(helper_cpp);
}
END_TEST

/* The object a failure prints on stdout under --json: its code and message. */
static void expect_json_failure(const char *out, const char *code, const char *in_message)
{
	cJSON *o = cJSON_Parse(out);
	ck_assert_msg(o != NULL, "--json printed no JSON on a failure: '%s'", out);
	const cJSON *e = cJSON_GetObjectItem(o, "error");
	ck_assert_msg(cJSON_IsFalse(cJSON_GetObjectItem(o, "ok")) && e != NULL, "'%s'", out);
	ck_assert_str_eq(harness_str(e, "code"), code);
	ck_assert_msg(strstr(harness_str(e, "message"), in_message) != NULL, "'%s'", out);
	cJSON_Delete(o);
}

/* -V, a --cache-dir that is no cache, and failures under --json. */
START_TEST(cli_errors_and_version)
{
	char *out, *err, *v2, missing[HARNESS_PATH], empty[HARNESS_PATH], bad[HARNESS_PATH];

	ck_assert_int_eq(harness_cli(&out, &err, "-V", NULL), 0);
	free(err);
	ck_assert_int_eq(harness_cli(&v2, &err, "--version", NULL), 0);
	ck_assert_msg(strncmp(out, "kiln ", 5) == 0 && strcmp(out, v2) == 0, "'%s' '%s'", out, v2);
	free(out), free(v2), free(err);

	/* A mistyped command gets the one it was near, as a usage error;
	 * a name near none gets no guess. */
	ck_assert_int_eq(harness_cli(&out, &err, "stauts", NULL), 2);
	ck_assert_msg(strstr(err, "unknown command 'stauts'; did you mean 'status'?"), "'%s'", err);
	free(out), free(err);
	ck_assert_int_eq(harness_cli(&out, &err, "help", "exprot", NULL), 2);
	ck_assert_msg(strstr(err, "did you mean 'export'?"), "'%s'", err);
	free(out), free(err);
	ck_assert_int_eq(harness_cli(&out, &err, "xyzzy", NULL), 2);
	ck_assert_msg(strstr(err, "unknown command 'xyzzy'") && !strstr(err, "did you mean"), "'%s'", err);
	free(out), free(err);

	/* kilnd not running: a --cache-dir that does not exist, or holds no
	 * cache, is an error, not "no entries". */
	harness_path(missing, "no-such-cache");
	ck_assert_int_ne(harness_cli(&out, &err, "ls", "--cache-dir", missing, NULL), 0);
	ck_assert_msg(strstr(err, "does not exist") != NULL, "'%s'", err);
	free(out), free(err);
	ck_assert_int_eq(mkdir(harness_path(empty, "not-a-cache"), 0700), 0);
	ck_assert_int_ne(harness_cli(&out, &err, "ls", "--cache-dir", empty, NULL), 0);
	ck_assert_msg(strstr(err, "holds no kiln cache") != NULL, "'%s'", err);
	free(out), free(err);
	/* ... and so is a $KILN_CACHE_DIR that names nothing (a typo). */
	setenv("KILN_CACHE_DIR", missing, 1);
	static const char *const offline[] = { "ls", "stats" };
	for (size_t i = 0; i < 2; i++) {
		char err_path[HARNESS_PATH];
		const char *argv[] = { harness_cli_path(), "--socket", harness.socket, offline[i],
				       NULL };
		int st = harness_run(argv, NULL, harness_path(err_path, "typo.err"), 30);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) != 0, "%s: status %d", offline[i], st);
		err = harness_read_file(err_path);
		ck_assert_msg(err && strstr(err, "$KILN_CACHE_DIR") && strstr(err, "does not exist"),
			      "%s: '%s'", offline[i], err);
		free(err);
	}
	unsetenv("KILN_CACHE_DIR");
	ck_assert_int_eq(harness_cli(&out, &err, "--json", "status", NULL), 1);
	expect_json_failure(out, "not_running", "kilnd is not running");
	free(out), free(err);
	/* a socket option naming the socket's directory says so */
	{
		char sockdir[HARNESS_PATH];
		ck_assert_int_eq(mkdir(harness_path(sockdir, "sockdir"), 0700), 0);
		ck_assert_int_eq(harness_cli(&out, &err, "--socket", sockdir, "status", NULL), 1);
		ck_assert_msg(strstr(err, "is a directory, not kilnd's socket"), "'%s'", err);
		free(out), free(err);
	}
	/* ccache's habits point to kiln's commands */
	static const char *const habits[][2] = {
		{ "-s", "kiln stats" }, { "--show-stats", "kiln stats" },
		{ "-z", "kiln stats --zero" }, { "-M5G", "kiln config max-size" },
		{ "--max-size=5G", "kiln config max-size" },
	};
	for (size_t i = 0; i < sizeof(habits) / sizeof(habits[0]); i++) {
		ck_assert_int_eq(harness_cli(&out, &err, habits[i][0], NULL), 2);
		ck_assert_msg(strstr(err, "unknown option") && strstr(err, habits[i][1]),
			      "%s: '%s'", habits[i][0], err);
		free(out), free(err);
	}

	harness_start(NULL);
	ck_assert_int_eq(harness_cli(&out, &err, "--json", "show", "nonexistent", NULL), 1);
	expect_json_failure(out, "not_found", "nonexistent");
	free(out), free(err);
	/* a toolchain kilnd does not have: the names it has are listed */
	{
		char src[HARNESS_PATH];
		harness_write_file(harness_path(src, "tc.c"), "int tc(void) { return 1; }\n");
		ck_assert_int_ne(harness_cli(&out, &err, "build", "-t", "gcc", src, NULL), 0);
		ck_assert_msg(strstr(err, "\"gcc\" is not configured") && strstr(err, "cc, c++"),
			      "'%s'", err);
		free(out), free(err);
	}
	/* a too short key prefix says so; a label no entry has is no entry */
	ck_assert_int_eq(harness_cli(&out, &err, "rm", "9a2", NULL), 1);
	ck_assert_msg(strstr(err, "at least 4 hex digits") != NULL, "'%s'", err);
	free(out), free(err);
	ck_assert_int_ne(harness_cli(&out, &err, "log", "dace axpy", NULL), 0);
	ck_assert_msg(strstr(err, "no entry matches \"dace axpy\""), "'%s'", err);
	free(out), free(err);
	ck_assert_int_ne(harness_cli(&out, &err, "show", "a\tb", NULL), 0);
	ck_assert_msg(strstr(err, "not a key, a key prefix, an alias or a label"), "'%s'", err);
	free(out), free(err);
	ck_assert_int_eq(harness_cli(&out, &err, "--json", "rm", NULL), 2);
	expect_json_failure(out, "usage", "rm needs");
	free(out), free(err);
	harness_write_file(harness_path(bad, "bad.c"), "int f(void) { return kiln_undeclared; }\n");
	ck_assert_int_eq(harness_cli(&out, &err, "build", "--json", bad, NULL), 1);
	expect_json_failure(out, "build_failed", "compiler exited");
	cJSON *o = cJSON_Parse(out);
	const char *log = harness_str(cJSON_GetObjectItem(o, "error"), "log");
	ck_assert_ptr_nonnull(strstr(log, "kiln_undeclared"));
	/* The messages name the file as the user has it, not the build
	 * directory's src/bad.c. */
	char mention[HARNESS_PATH + 8];
	snprintf(mention, sizeof(mention), "%s:1:", bad);
	ck_assert_msg(strstr(log, mention) != NULL && strstr(log, "src/bad.c") == NULL, "%s", log);
	cJSON_Delete(o);
	free(out), free(err);
	/* The failure's output is kept under the request key it names. */
	ck_assert_int_eq(harness_cli(&out, &err, "build", bad, NULL), 1);
	const char *hint = strstr(err, "kiln log ");
	ck_assert_msg(hint != NULL, "no 'kiln log' hint: %s", err);
	char rkey[65];
	ck_assert_int_eq(sscanf(hint + 9, "%64[0-9a-f]", rkey), 1);
	free(out), free(err);
	int rc = 1;
	for (int i = 0; i < 50 && rc != 0; i++) {
		if (i > 0)
			harness_sleep_ms(100);
		rc = harness_cli(&out, &err, "log", rkey, NULL);
		if (rc == 0)
			ck_assert_msg(strstr(out, "kiln_undeclared") != NULL, "log: %s", out);
		free(out), free(err);
	}
	ck_assert_msg(rc == 0, "kiln log of the failed build's request key failed");
	/* And by its alias, until a build of the alias succeeds. */
	ck_assert_int_eq(harness_cli(NULL, NULL, "build", "--alias", "cli:failing", bad, NULL), 1);
	rc = 1;
	for (int i = 0; i < 50 && rc != 0; i++) {
		if (i > 0)
			harness_sleep_ms(100);
		rc = harness_cli(&out, &err, "log", "cli:failing", NULL);
		if (rc == 0)
			ck_assert_msg(strstr(out, "kiln_undeclared") != NULL &&
				      strstr(err, "last build of cli:failing failed") != NULL,
				      "log: %s / %s", out, err);
		free(out), free(err);
	}
	ck_assert_msg(rc == 0, "kiln log of the failed build's alias failed");
	char good[HARNESS_PATH];
	harness_write_file(harness_path(good, "good_alias.c"), "int f(void) { return 7; }\n");
	ck_assert_int_eq(harness_cli(NULL, NULL, "build", "--alias", "cli:failing", good, NULL), 0);
	ck_assert_int_eq(harness_cli(&out, &err, "log", "cli:failing", NULL), 0);
	ck_assert_msg(strstr(out, "kiln_undeclared") == NULL && strstr(err, "failed") == NULL,
		      "a succeeded alias still shows the failure: %s / %s", out, err);
	free(out), free(err);
	/* Failed builds' logs live in logs/failed/, where nothing else is, and
	 * go after 7 days (kiln gc, and kilnd every 6 hours). */
	char flog[HARNESS_PATH + 96], fdir[HARNESS_PATH + 16];
	snprintf(flog, sizeof(flog), "%s/logs/failed/%s.log", harness.cache, rkey);
	snprintf(fdir, sizeof(fdir), "%s/logs/failed", harness.cache);
	ck_assert_int_eq(access(flog, F_OK), 0);
	ck_assert_int_eq(harness_count_dir(fdir), 1);
	ck_assert_int_eq(harness_cli(&out, &err, "gc", NULL), 0);
	ck_assert_msg(strstr(out, "failed builds") == NULL, "gc removed a young log: %s", out);
	free(out), free(err);
	struct timespec old_times[2] = { { time(NULL) - 8 * 86400, 0 }, { time(NULL) - 8 * 86400, 0 } };
	ck_assert_int_eq(utimensat(AT_FDCWD, flog, old_times, 0), 0);
	ck_assert_int_eq(harness_cli(&out, &err, "gc", NULL), 0);
	ck_assert_msg(strstr(out, "removed 1 old log of failed builds") != NULL, "gc: %s", out);
	free(out), free(err);
	ck_assert_int_eq(access(flog, F_OK), -1);
	ck_assert_int_eq(harness_cli(&out, &err, "log", rkey, NULL), 1);
	free(out), free(err);
	/* A build that succeeds with warnings shows them (stderr; --json "log"). */
	harness_write_file(harness_path(bad, "warn.c"),
			   "int f(void) { int kiln_unused_var; return 1; }\n");
	ck_assert_int_eq(harness_cli(&out, &err, "build", bad, "--", "-Wall", NULL), 0);
	ck_assert_msg(strstr(err, "kiln_unused_var") != NULL && strstr(err, "warning") != NULL,
		      "no warning on stderr: %s", err);
	free(out), free(err);
	harness_stop();
}
END_TEST

/* Relative -I and -L after '--' are the caller's directories, not the
 * daemon's build directory's; a warm manifest's are its own directory's. */
START_TEST(cli_relative_include_dirs)
{
	char dir[HARNESS_PATH], path[HARNESS_PATH], *out, *err, *old = getcwd(NULL, 0);

	ck_assert_int_eq(mkdir(harness_path(dir, "proj"), 0700), 0);
	ck_assert_int_eq(mkdir(harness_path(path, "proj/inc"), 0700), 0);
	harness_write_file(harness_path(path, "proj/inc/v.h"), "#define V 7\n");
	harness_write_file(harness_path(path, "proj/p.c"),
			   "#include \"v.h\"\nint kiln_test_value(void) { return V; }\n");
	harness_write_file(harness_path(path, "proj/m.json"),
			   "{\"requests\": [{\"sources\": [\"p.c\"], \"args\": [\"-Iinc\"], "
			   "\"alias\": \"rel:warm\"}]}");
	harness_start(NULL);
	ck_assert_int_eq(chdir(dir), 0);
	int rc = harness_cli(&out, &err, "--json", "build", "p.c", "--alias", "rel:build", "--",
			     "-Iinc", NULL);
	ck_assert_int_eq(chdir(old), 0);
	ck_assert_msg(rc == 0, "build with -Iinc failed: %s %s", out, err);
	free(out), free(err);
	cJSON *e = harness_cli_json("show", "rel:build", NULL);
	harness_path(path, "proj/inc");
	char want[HARNESS_PATH + 8];
	snprintf(want, sizeof(want), "-I%s", path);
	ck_assert_str_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(e, "args"), 0)->valuestring, want);
	cJSON_Delete(e);
	/* warm, run from elsewhere: the manifest's directory counts. */
	ck_assert_int_eq(harness_cli(&out, &err, "warm", harness_path(path, "proj/m.json"), NULL), 0);
	free(out), free(err);
	struct harness_result h = harness_in_child(NULL, "rel:warm");
	ck_assert_msg(h.rc == KILN_OK && h.value == 7, "%s", h.msg);
	free(old);
	harness_stop();
}
END_TEST

/* The first line of text that contains needle, copied into line. */
static bool line_with(const char *text, const char *needle, char *line, size_t len)
{
	const char *p = strstr(text, needle);
	if (p == NULL)
		return false;
	while (p > text && p[-1] != '\n')
		p--;
	snprintf(line, len, "%.*s", (int)strcspn(p, "\n"), p);
	return true;
}

/*
 * DaCe's and GT4Py's aliases ("dace:<64 hex>") are cut in ls to the scheme,
 * 12 hex digits and "..", whole with -w/--wide and in --json; the KEY on
 * that line is the handle, and the cut alias pasted as a REF says so.
 */
START_TEST(cli_long_aliases_are_cut)
{
	char *answer = data_file("answer.c"), hex[65], alias[80], cut[32], line[512];
	char *out, *err;

	harness_start(NULL);
	harness_sha256_hex("a DaCe program", hex);
	snprintf(alias, sizeof(alias), "dace:%s", hex);
	snprintf(cut, sizeof(cut), "dace:%.12s..", hex);
	free(cli_ok((const char *[]){ "build", "--alias", alias, answer, "--", "-DKILN_ANSWER=1",
				      NULL }));
	/* Sixteen hex digits are no hash to cut. */
	free(cli_ok((const char *[]){ "build", "--alias", "it:0123456789abcdef", answer, "--",
				      "-DKILN_ANSWER=2", NULL }));
	out = cli_ok((const char *[]){ "ls", NULL });
	ck_assert_msg(line_with(out, cut, line, sizeof(line)) && !harness_contains(out, alias) &&
		      harness_contains(out, "it:0123456789abcdef  "), "kiln ls: %s", out);
	free(out);
	/* The line's KEY is a REF of that entry. */
	line[12] = '\0';
	cJSON *e = harness_cli_json("show", line, NULL);
	ck_assert_str_eq(harness_str(e, "alias"), alias);
	cJSON_Delete(e);
	static const char *const wide[] = { "--wide", "-w" };
	for (size_t i = 0; i < 2; i++) {
		out = cli_ok((const char *[]){ "ls", wide[i], NULL });
		ck_assert_msg(harness_contains(out, alias) && !harness_contains(out, cut),
			      "kiln ls %s: %s", wide[i], out);
		free(out);
	}
	cJSON *ls = harness_cli_json("ls", NULL);
	ck_assert_ptr_nonnull(harness_find_entry(ls, "alias", alias));
	cJSON_Delete(ls);
	err = cli_fails((const char *[]){ "show", cut, NULL });
	ck_assert_msg(harness_contains(err, "KEY") && harness_contains(err, "kiln ls --wide"),
		      "kiln show %s: %s", cut, err);
	free(err);
	free(answer);
	harness_stop();
}
END_TEST

/* Lines of text that end with suffix. */
static int lines_ending(const char *text, const char *suffix)
{
	int n = 0;
	size_t k = strlen(suffix);

	for (const char *p = text; *p != '\0';) {
		size_t len = strcspn(p, "\n");
		n += len >= k && strncmp(p + len - k, suffix, k) == 0;
		p += len + (p[len] == '\n');
	}
	return n;
}

/*
 * kiln show of a one-line C file: the files read listed, the paths only
 * probed (PATH searches, mostly) counted, not listed; --deps lists every
 * dependency, one a line; --json is the entry as before.
 */
START_TEST(cli_show_groups_dependencies)
{
	char *answer = data_file("answer.c"), want[64];
	char *out, *all;
	int absent = 0, exists = 0;

	harness_start(NULL);
	free(cli_ok((const char *[]){ "build", "--alias", "it:deps", answer, "--", "-DKILN_ANSWER=42",
				      NULL }));
	cJSON *e = harness_cli_json("show", "it:deps", NULL);
	const cJSON *kinds = cJSON_GetObjectItemCaseSensitive(e, "dep_kinds"), *k;
	int n = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(e, "deps"));
	cJSON_ArrayForEach(k, kinds) {
		absent += strcmp(cJSON_GetStringValue(k), "absent") == 0;
		exists += strcmp(cJSON_GetStringValue(k), "exists") == 0;
	}
	ck_assert_msg(absent > 0 && cJSON_GetArraySize(kinds) == n,
		      "no absent paths among %d deps: was the build observed?", n);
	out = cli_ok((const char *[]){ "show", "it:deps", NULL });
	snprintf(want, sizeof(want), "  %d paths probed: %d absent, %d found", absent + exists,
		 absent, exists);
	ck_assert_msg(harness_contains(out, want) && harness_contains(out, "(--deps lists them)") &&
		      lines_ending(out, "(absent)") == 0 && lines_ending(out, "(exists)") == 0,
		      "kiln show: %.2000s", out);
	ck_assert_msg(harness_contains(out, "  files read (") &&
		      harness_contains(out, "\n    /usr/include/stdc-predef.h\n"), "kiln show: %.2000s", out);
	all = cli_ok((const char *[]){ "show", "--deps", "it:deps", NULL });
	ck_assert_msg(lines_ending(all, "(absent)") == absent && lines_ending(all, "(exists)") == exists,
		      "kiln show --deps: %.2000s", all);
	free(out);
	free(all);
	cJSON_Delete(e);
	free(answer);
	harness_stop();
}
END_TEST

/* A label is a reference when one entry has it: show, log and pin take
 * it; a label on two entries is refused, listing both keys. */
START_TEST(labels_are_references)
{
	char src[HARNESS_PATH], *out = NULL, *err = NULL;
	harness_start(NULL);
	for (int i = 0; i < 3; i++) {
		char text[64];
		snprintf(text, sizeof(text), "int lr%d(void) { return %d; }\n", i, i);
		harness_write_file(harness_path(src, "lr%d.c", i), text);
		ck_assert_int_eq(harness_cli(&out, &err, "build", "--label",
					     i == 0 ? "dace axpy" : "dace two", src, NULL), 0);
		free(out), free(err);
	}
	ck_assert_int_eq(harness_cli(&out, &err, "show", "dace axpy", NULL), 0);
	ck_assert_msg(strstr(out, "dace axpy") != NULL, "%s", out);
	free(out), free(err);
	ck_assert_int_eq(harness_cli(&out, &err, "pin", "dace axpy", NULL), 0);
	free(out), free(err);
	ck_assert_int_eq(harness_cli(&out, &err, "log", "dace axpy", NULL), 0);
	free(out), free(err);
	ck_assert_int_eq(harness_cli(&out, &err, "show", "dace two", NULL), 1);
	ck_assert_msg(strstr(err, "\"dace two\" labels several entries (") &&
		      strstr(err, "name one by its key"), "'%s'", err);
	free(out), free(err);
	ck_assert_int_eq(harness_cli(&out, &err, "rm", "dace two", NULL), 1);
	ck_assert_msg(strstr(err, "labels several entries"), "'%s'", err);
	free(out), free(err);
	cJSON *ls = harness_cli_json("ls", NULL);
	ck_assert_int_eq(cJSON_GetArraySize(ls), 3);
	cJSON_Delete(ls);
	/* Offline, the CLI reads the index itself, with the same rules. */
	harness_stop();
	ck_assert_int_eq(harness_cli(&out, &err, "show", "dace axpy", NULL), 0);
	free(out), free(err);
	ck_assert_int_eq(harness_cli(&out, &err, "show", "dace two", NULL), 1);
	ck_assert_msg(strstr(err, "labels several entries"), "'%s'", err);
	free(out), free(err);
}
END_TEST

/*
 * "-std" "c11" is an error to gcc (only "-std=c11" is its option): a
 * request with it is not served the entry "-std=c11" built, but fails as
 * gcc alone fails. Before, both keyed as "-std=c11" and the second was
 * served the first one's library. "-I" "inc" still shares "-Iinc"'s entry.
 */
START_TEST(option_gcc_refuses_apart_is_not_served_the_joined_entry)
{
	char src[HARNESS_PATH], inc[HARNESS_PATH];
	harness_write_file(harness_path(src, "std.c"), "int f(void) { return 11; }\n");
	ck_assert_int_eq(mkdir(harness_path(inc, "inc"), 0755), 0);
	harness_start(NULL);
	free(cli_ok((const char *[]){ "build", "-t", "cc", src, "--", "-std=c11", NULL }));
	char *err = cli_fails((const char *[]){ "build", "-t", "cc", src, "--", "-std", "c11", NULL });
	ck_assert_msg(harness_contains(err, "-std"), "not gcc's error: %s", err);
	free(err);
	free(cli_ok((const char *[]){ "build", "-t", "cc", src, "--", "-Iinc", NULL }));
	char *out = cli_ok((const char *[]){ "build", "-t", "cc", src, "--", "-I", "inc", NULL });
	ck_assert_msg(harness_contains(out, "cached "), "-I inc missed -Iinc's entry: %s", out);
	free(out);
	harness_stop();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cli");

	suite_add_tcase(s, harness_tcase("commands", cli_commands_with_and_without_the_daemon, 120));
	suite_add_tcase(s, harness_tcase("cxx", cli_builds_cxx_from_several_files, 60));
	suite_add_tcase(s, harness_tcase("errors", cli_errors_and_version, 60));
	suite_add_tcase(s, harness_tcase("relative_dirs", cli_relative_include_dirs, 60));
	suite_add_tcase(s, harness_tcase("long_aliases", cli_long_aliases_are_cut, 60));
	suite_add_tcase(s, harness_tcase("show_deps", cli_show_groups_dependencies, 60));
	suite_add_tcase(s, harness_tcase("label_refs", labels_are_references, 60));
	suite_add_tcase(s, harness_tcase("std_apart",
					 option_gcc_refuses_apart_is_not_served_the_joined_entry, 60));
	return harness_main(s);
}
