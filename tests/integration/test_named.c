/*
 * Integration tests of toolchains a request names by path (daemon/named.c):
 * a compiler in a module's directory outside /usr/bin, identified on first
 * use and keyed by its identity; a changed one is identified again and
 * builds again; one that others could replace, or that is not a compiler,
 * is refused with the reason. Admitted users and --toolchain-dir are in
 * test_peers.c.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define module_compiler harness_module_compiler

static const char *source(char path[HARNESS_PATH])
{
	harness_write_file(harness_path(path, "prog.cpp"), "extern \"C\" int f(void) { return 7; }\n");
	return path;
}

/* kiln build --compiler PATH SRC: the exit status, stdout and stderr. */
static int build_with(const char *compiler, const char *src, char **out, char **err)
{
	return harness_cli(out, err, "build", "--compiler", compiler, src, NULL);
}

/* A script at path, mode 0755. */
static void script(const char *path, const char *text)
{
	harness_write_file(path, text);
	ck_assert_int_eq(chmod(path, 0755), 0);
}

/* A linker at <dir>/<rel> that notes each run of it in <dir>/<mark>
 * (its arguments, a line per run) and then is /usr/bin/ld. */
static void noting_linker(const char *rel, const char *mark, char path[HARNESS_PATH])
{
	char m[HARNESS_PATH], text[2 * HARNESS_PATH];
	snprintf(text, sizeof(text), "#!/bin/sh\necho \"$@\" >> %s\nexec /usr/bin/ld \"$@\"\n",
		 harness_path(m, "%s", mark));
	script(harness_path(path, "%s", rel), text);
}

/* <dir>/opt/<name>/bin/g++: g++, but for -print-prog-name=ld, which prints
 * printed (the linker whose --help the identification reads). */
static void compiler_printing_ld(const char *name, const char *printed, char cxx[HARNESS_PATH])
{
	char dir[HARNESS_PATH], text[2 * HARNESS_PATH];
	mkdir(harness_path(dir, "opt"), 0755);
	ck_assert_int_eq(mkdir(harness_path(dir, "opt/%s", name), 0755), 0);
	ck_assert_int_eq(mkdir(harness_path(dir, "opt/%s/bin", name), 0755), 0);
	snprintf(text, sizeof(text), "#!/bin/sh\nif [ \"$1\" = -print-prog-name=ld ]; then\n"
		 "\techo '%s'\n\texit 0\nfi\nexec /usr/bin/g++ \"$@\"\n", printed);
	script(harness_path(cxx, "opt/%s/bin/g++", name), text);
}

/* Builds src with the compiler at cxx: refused with a message saying
 * want, or (want NULL) built. */
static void build_expecting(const char *cxx, const char *src, const char *want)
{
	char *out, *err;
	int rc = build_with(cxx, src, &out, &err);
	if (want == NULL)
		ck_assert_msg(rc == 0, "%s: not built: %s", cxx, err);
	else
		ck_assert_msg(rc != 0 && harness_contains(err, want),
			      "%s: not refused for \"%s\": %s%s", cxx, want, out, err);
	free(out);
	free(err);
}

/* A module compiler, a source, kilnd started, and one build with them. */
static void start_and_build_once(char cxx[HARNESS_PATH], char src[HARNESS_PATH])
{
	char *out, *err;
	module_compiler(cxx, 1);
	source(src);
	harness_start(NULL);
	ck_assert_msg(build_with(cxx, src, &out, &err) == 0, "build failed: %s", err);
	free(out);
	free(err);
}

static int64_t builds(void)
{
	return harness_status_num_at(harness.socket, "builds_started");
}

/* Built once with the module's compiler, a hit after; the same program
 * with another compiler's path is another entry. */
START_TEST(module_compiler_named_by_path_builds_once)
{
	char cxx[HARNESS_PATH], src[HARNESS_PATH], *out, *err;
	module_compiler(cxx, 1);
	source(src);
	harness_start(NULL);
	ck_assert_msg(build_with(cxx, src, &out, &err) == 0, "build failed: %s", err);
	ck_assert_msg(harness_contains(out, "built "), "%s", out);
	free(out);
	free(err);
	ck_assert_msg(build_with(cxx, src, &out, &err) == 0, "second build failed: %s", err);
	ck_assert_msg(harness_contains(out, "cached "), "not a hit: %s", out);
	free(out);
	free(err);
	ck_assert_int_eq(builds(), 1);
	/* kiln status lists it among the toolchains, as named by a request */
	cJSON *st = harness_status(), *t;
	bool listed = false;
	cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(st, "toolchains")) {
		const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "name"));
		listed = listed || (name != NULL && strcmp(name, cxx) == 0 &&
				    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(t, "named")));
	}
	cJSON_Delete(st);
	ck_assert_msg(listed, "status does not list %s as a named toolchain", cxx);
	char *log = harness_read_file(harness.log);
	ck_assert_msg(harness_contains(log, "toolchain ") && harness_contains(log, cxx),
		      "the identification is not logged");
	free(log);
	harness_stop();

	/* Restarted: identified again, the same identity, a hit. */
	harness_start(NULL);
	ck_assert_msg(build_with(cxx, src, &out, &err) == 0, "build after restart: %s", err);
	ck_assert_msg(harness_contains(out, "cached "), "not a hit after a restart: %s", out);
	free(out);
	free(err);
	harness_stop();
}
END_TEST

/* The compiler changes while kilnd runs (a module upgraded in place): a
 * miss, built with the new one. */
START_TEST(changed_compiler_builds_again)
{
	char cxx[HARNESS_PATH], src[HARNESS_PATH], *out, *err;
	start_and_build_once(cxx, src);
	sleep(2); /* the identity is checked again at most once a second */
	module_compiler(cxx, 2);
	ck_assert_msg(build_with(cxx, src, &out, &err) == 0, "build failed: %s", err);
	ck_assert_msg(harness_contains(out, "built "), "the old compiler's program: %s", out);
	free(out);
	free(err);
	ck_assert_int_eq(builds(), 2);
	harness_stop();
}
END_TEST

/* A compiler in a directory others may write (no sticky bit), a missing
 * one, a file that is not a program, a relative path and a host compiler
 * for a toolchain that is not nvcc: refused, saying why; nothing built. */
START_TEST(compilers_that_others_can_swap_or_are_none_are_refused)
{
	char cxx[HARNESS_PATH], src[HARNESS_PATH], dir[HARNESS_PATH], *out, *err;
	module_compiler(cxx, 1);
	source(src);
	harness_start(NULL);
	ck_assert_int_eq(chmod(harness_path(dir, "opt/gcc"), 0777), 0);
	ck_assert_int_ne(build_with(cxx, src, &out, &err), 0);
	ck_assert_msg(harness_contains(err, "writable by group or others"), "%s", err);
	free(out);
	free(err);
	ck_assert_int_eq(chmod(dir, 0755), 0);
	ck_assert_int_eq(chmod(cxx, 0775), 0);
	ck_assert_int_ne(build_with(cxx, src, &out, &err), 0);
	ck_assert_msg(harness_contains(err, "writable by group or others"), "%s", err);
	free(out);
	free(err);
	ck_assert_int_eq(chmod(cxx, 0755), 0);

	ck_assert_int_ne(build_with(harness_path(dir, "opt/gcc/bin/none"), src, &out, &err), 0);
	ck_assert_msg(harness_contains(err, "No such file"), "%s", err);
	free(out);
	free(err);
	ck_assert_int_ne(build_with(src, src, &out, &err), 0);
	ck_assert_msg(harness_contains(err, "not an executable") || harness_contains(err, "version"),
		      "%s", err);
	free(out);
	free(err);
	ck_assert_int_eq(harness_cli(&out, &err, "build", "--compiler", "opt/gcc/bin/g++", src, NULL), 2);
	free(out);
	free(err);
	ck_assert_int_ne(harness_cli(&out, &err, "build", "--compiler", cxx, "--host-compiler",
				     "/usr/bin/g++", src, NULL), 0);
	ck_assert_msg(harness_contains(err, "not nvcc"), "%s", err);
	free(out);
	free(err);
	/* a program that is no compiler, though only root can change it */
	ck_assert_int_ne(build_with("/usr/bin/python3", src, &out, &err), 0);
	ck_assert_msg(harness_contains(err, "names no C, C++ or CUDA compiler"), "%s", err);
	free(out);
	free(err);
	/* a symbolic link to the compiler in a directory others may write */
	char open_dir[HARNESS_PATH], link[HARNESS_PATH];
	ck_assert_int_eq(mkdir(harness_path(open_dir, "shared"), 0777), 0);
	ck_assert_int_eq(chmod(open_dir, 0777), 0);
	ck_assert_int_eq(symlink(cxx, harness_path(link, "shared/g++")), 0);
	ck_assert_int_ne(build_with(link, src, &out, &err), 0);
	ck_assert_msg(harness_contains(err, "writable by group or others"), "%s", err);
	free(out);
	free(err);
	ck_assert_int_eq(builds(), 0);
	/* and the same compiler, no longer swappable, builds */
	ck_assert_int_eq(build_with(cxx, src, &out, &err), 0);
	free(out);
	free(err);
	harness_stop();
}
END_TEST

/* kiln export from one kilnd, kiln import into another: the entry built
 * with a compiler named by path is taken (the importing kilnd identifies
 * that compiler and checks the entry with it), and served there without a
 * build. */
START_TEST(export_and_import_of_a_named_compiler_s_entry)
{
	char cxx[HARNESS_PATH], src[HARNESS_PATH], tgz[HARNESS_PATH], sock2[HARNESS_PATH];
	char res[HARNESS_PATH], *out;
	start_and_build_once(cxx, src);
	ck_assert_int_eq(harness_cli(NULL, NULL, "export", harness_path(tgz, "named.tgz"), NULL), 0);
	harness_start_named("node2", NULL, NULL, sock2);
	const char *imp[] = { harness_cli_path(), "--socket", sock2, "--json", "import", tgz, NULL };
	ck_assert_int_eq(harness_run(imp, harness_path(res, "import.out"), NULL, 120), 0);
	out = harness_read_file(res);
	cJSON *r = cJSON_Parse(out);
	ck_assert_msg(r != NULL && harness_num(r, "imported") == 1, "import: %s", out);
	cJSON_Delete(r);
	free(out);
	const char *get[] = { harness_cli_path(), "--socket", sock2, "build", "--compiler", cxx, src,
			      NULL };
	ck_assert_int_eq(harness_run(get, harness_path(res, "build2.out"), NULL, 120), 0);
	out = harness_read_file(res);
	ck_assert_msg(harness_contains(out, "cached "), "not served from the import: %s", out);
	free(out);
	ck_assert_int_eq(harness_status_num_at(sock2, "builds_started"), 0);
	harness_stop();
}
END_TEST

/* clang and clang++ are one program that reads its mode from its name:
 * two toolchains, never one entry (the name it runs under is in the
 * identity). */
START_TEST(one_binary_under_two_names_is_two_toolchains)
{
	char src[HARNESS_PATH], *out, *err, key1[72] = "", key2[72] = "";
	if (access("/usr/bin/clang", X_OK) != 0 || access("/usr/bin/clang++", X_OK) != 0)
		return;   /* no clang here: nothing to tell apart */
	harness_write_file(harness_path(src, "p.c"), "int f(void) { return 4; }\n");
	harness_start(NULL);
	ck_assert_msg(build_with("/usr/bin/clang", src, &out, &err) == 0, "clang: %s", err);
	sscanf(out, "built %71s", key1);
	free(out);
	free(err);
	ck_assert_msg(build_with("/usr/bin/clang++", src, &out, &err) == 0, "clang++: %s", err);
	ck_assert_msg(harness_contains(out, "built "), "clang++ got clang's entry: %s", out);
	sscanf(out, "built %71s", key2);
	free(out);
	free(err);
	ck_assert_str_ne(key1, key2);
	harness_stop();
}
END_TEST

/* Many spellings of one compiler ("/./", "//") are one toolchain: they
 * fill no table, and another compiler can still be named after them. */
START_TEST(spellings_of_one_compiler_share_one_identity)
{
	char cxx[HARNESS_PATH], src[HARNESS_PATH], dir[HARNESS_PATH], spelled[HARNESS_PATH * 2];
	char *out, *err;
	module_compiler(cxx, 1);
	source(src);
	harness_path(dir, "opt/gcc/bin");
	harness_start(NULL);
	for (int i = 0; i < 300; i++) {
		int n = snprintf(spelled, sizeof(spelled), "%s", dir);
		for (int j = 0; j < i % 150; j++)
			n += snprintf(spelled + n, sizeof(spelled) - (size_t)n, "%s", i < 150 ? "/." : "/");
		snprintf(spelled + n, sizeof(spelled) - (size_t)n, "/g++");
		ck_assert_msg(build_with(spelled, src, &out, &err) == 0, "%s: %s", spelled, err);
		free(out);
		free(err);
	}
	ck_assert_int_eq(builds(), 1);
	ck_assert_msg(build_with("/usr/bin/g++", src, &out, &err) == 0,
		      "another compiler after 300 spellings: %s", err);
	free(out);
	free(err);
	harness_stop();
}
END_TEST

/*
 * Compilers whose --version hangs (a licence server that does not answer),
 * six of them at once (more than --jobs 1 leaves threads): identifications run two at a time, so a build
 * with a configured toolchain is answered while all six still wait
 * (before, they held every thread of the pool for the probes' 10 s).
 */
START_TEST(hanging_compilers_do_not_hold_the_pool)
{
	char path[HARNESS_PATH], dir[HARNESS_PATH], src[HARNESS_PATH], outp[HARNESS_PATH];
	pid_t pids[6];
	char *out, *err;
	harness_write_file(harness_path(src, "p.c"), "int f(void) { return 8; }\n");
	harness_start("--jobs", "1", NULL);
	for (int i = 0; i < 6; i++) {
		harness_path(dir, "hang%d", i);
		ck_assert_int_eq(mkdir(dir, 0755), 0);
		harness_write_file(harness_path(path, "hang%d/cc", i), "#!/bin/sh\nexec sleep 60\n");
		ck_assert_int_eq(chmod(path, 0755), 0);
		const char *argv[] = { harness_cli_path(), "--socket", harness.socket, "build",
				       "--compiler", path, src, NULL };
		pids[i] = harness_spawn(argv, NULL, harness_path(outp, "hang%d.out", i), NULL);
	}
	ck_assert_msg(harness_cli(&out, &err, "build", "-t", "cc", src, NULL) == 0, "%s", err);
	free(out);
	free(err);
	for (int i = 0; i < 6; i++)
		ck_assert_msg(harness_alive(pids[i]), "hanging compiler %d was answered before a "
			      "build with a configured toolchain", i);
	for (int i = 0; i < 6; i++) {
		int st = harness_wait(pids[i], 120);
		ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) != 0,
			      "compiler %d: not refused", i);
	}
	char *o = harness_read_file(harness_path(outp, "hang0.out"));
	ck_assert_msg(harness_contains(o, "did not answer"), "%s", o);
	free(o);
	harness_stop();
}
END_TEST

/* A kiln warm manifest names the module's compiler by path, and one
 * request a host compiler without nvcc: built, and refused saying why. */
START_TEST(warm_manifest_names_a_compiler)
{
	char cxx[HARNESS_PATH], src[HARNESS_PATH], manifest[HARNESS_PATH], text[HARNESS_PATH * 5];
	char *out = NULL;
	module_compiler(cxx, 1);
	source(src);
	snprintf(text, sizeof(text),
		 "{\"requests\": [\n"
		 " {\"sources\": [\"%s\"], \"toolchain\": \"%s\"},\n"
		 " {\"sources\": [\"%s\"], \"toolchain\": \"%s\", \"host_compiler\": \"/usr/bin/g++\"}\n"
		 "]}\n", src, cxx, src, cxx);
	harness_write_file(harness_path(manifest, "manifest.json"), text);
	harness_start(NULL);
	ck_assert_int_eq(harness_cli(&out, NULL, "--json", "warm", manifest, NULL), 1);
	cJSON *r = cJSON_Parse(out);
	ck_assert_msg(r != NULL, "not JSON: %s", out);
	ck_assert_int_eq(harness_num(r, "built"), 1);
	ck_assert_int_eq(harness_num(r, "failed"), 1);
	cJSON *second = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "results"), 1);
	ck_assert_msg(harness_contains(harness_str(second, "error"), "not nvcc"), "%s", out);
	cJSON_Delete(r);
	free(out);
	harness_stop();
}
END_TEST

/* A real GPU node's module compiler: /opt/gcc/bin/g++ is a wrapper that
 * runs the driver renamed g++-real, whose --version begins "g++-real
 * (...)". It is GCC, builds and hits; GNU tools that are no compiler stay
 * refused. Before, kilnd refused it ("names no C, C++ or CUDA compiler"),
 * and kiln.dace fell back to DaCe's CMake for every program. */
START_TEST(renamed_driver_behind_a_wrapper_is_gcc)
{
	char cxx[HARNESS_PATH], real[HARNESS_PATH], src[HARNESS_PATH], text[HARNESS_PATH + 64];
	char *out, *err;
	module_compiler(cxx, 1);
	ck_assert_int_eq(symlink("/usr/bin/g++", harness_path(real, "opt/gcc/bin/g++-real")), 0);
	snprintf(text, sizeof(text), "#!/bin/sh\nexec %s \"$@\"\n", real);
	harness_write_file(cxx, text);
	ck_assert_int_eq(chmod(cxx, 0755), 0);
	source(src);
	harness_start(NULL);
	ck_assert_msg(build_with(cxx, src, &out, &err) == 0, "refused: %s", err);
	free(out);
	free(err);
	ck_assert_msg(build_with(cxx, src, &out, &err) == 0, "second build: %s", err);
	ck_assert_msg(harness_contains(out, "cached "), "not a hit: %s", out);
	free(out);
	free(err);
	ck_assert_int_eq(builds(), 1);
	if (access("/usr/bin/make", X_OK) == 0) {
		ck_assert_int_ne(build_with("/usr/bin/make", src, &out, &err), 0);
		ck_assert_msg(harness_contains(err, "names no C, C++ or CUDA compiler"), "%s", err);
		free(out);
		free(err);
	}
	harness_stop();
}
END_TEST

/*
 * A program whose --version names no compiler is refused before kilnd runs
 * it with anything else (before, it was run with -print-search-dirs and
 * -print-prog-name=ld first, and what it printed with --help).
 */
START_TEST(non_compiler_is_refused_before_any_other_probe)
{
	char dir[HARNESS_PATH], cc[HARNESS_PATH], log[HARNESS_PATH], src[HARNESS_PATH];
	char text[2 * HARNESS_PATH];
	source(src);
	ck_assert_int_eq(mkdir(harness_path(dir, "tool"), 0755), 0);
	snprintf(text, sizeof(text), "#!/bin/sh\necho \"$*\" >> %s\necho 'frobnicate 2.1'\n",
		 harness_path(log, "tool.log"));
	script(harness_path(cc, "tool/cc"), text);
	harness_start(NULL);
	build_expecting(cc, src, "names no C, C++ or CUDA compiler");
	char *ran = harness_read_file(log);
	ck_assert_msg(ran != NULL && strcmp(ran, "--version\n") == 0,
		      "the program was run with more than --version:\n%s", ran);
	free(ran);
	ck_assert_int_eq(builds(), 0);
	harness_stop();
}
END_TEST

/*
 * The linker a compiler prints for -print-prog-name=ld, whose --help kilnd
 * reads, passes the rules a named compiler passes before it runs: another
 * user's program, one in a directory others may write, a link another
 * user owns, a bare name found along PATH that is another user's, and a
 * relative path are refused and never run; a linker that is not there is
 * not run either, and one that passes runs. Before, kilnd ran whatever
 * the program printed, as its own user.
 */
START_TEST(linker_the_driver_prints_passes_the_rules_before_it_runs)
{
	char src[HARNESS_PATH], dir[HARNESS_PATH], cxx[HARNESS_PATH], ld[HARNESS_PATH];
	char mark[HARNESS_PATH], path_env[HARNESS_PATH + 32];
	bool root = geteuid() == 0;
	source(src);
	ck_assert_int_eq(mkdir(harness_path(dir, "tools"), 0755), 0);
	ck_assert_int_eq(mkdir(harness_path(dir, "pathbin"), 0755), 0);
	snprintf(path_env, sizeof(path_env), "PATH=%s:/usr/bin:/bin", dir);
	harness_start_env(NULL, (const char *const[]){ path_env, NULL });

	/* The rules hold: it runs, with --help. */
	noting_linker("tools/ld", "ok.ran", ld);
	compiler_printing_ld("ok", ld, cxx);
	build_expecting(cxx, src, NULL);
	char *ran = harness_read_file(harness_path(mark, "ok.ran"));
	ck_assert_msg(ran != NULL && harness_contains(ran, "--help"), "the linker did not run");
	free(ran);

	/* In a directory others may write (no sticky bit). */
	ck_assert_int_eq(mkdir(harness_path(dir, "open"), 0777), 0);
	ck_assert_int_eq(chmod(dir, 0777), 0);
	noting_linker("open/ld", "open.ran", ld);
	compiler_printing_ld("open", ld, cxx);
	build_expecting(cxx, src, "writable by group or others");
	ck_assert_msg(!harness_exists(harness_path(mark, "open.ran")), "it ran");

	/* A relative path, and one that is not there. */
	compiler_printing_ld("relative", "tools/ld", cxx);
	build_expecting(cxx, src, "relative");
	compiler_printing_ld("missing", harness_path(ld, "tools/none"), cxx);
	build_expecting(cxx, src, NULL);

	if (root) {
		/* Another user's program. */
		noting_linker("tools/theirs", "theirs.ran", ld);
		ck_assert_int_eq(chown(ld, 65534, 65534), 0);
		compiler_printing_ld("theirs", ld, cxx);
		build_expecting(cxx, src, "belongs to uid 65534");
		ck_assert_msg(!harness_exists(harness_path(mark, "theirs.ran")), "it ran");

		/* A link another user owns, to a linker that passes. */
		char link[HARNESS_PATH];
		noting_linker("tools/ld2", "ld2.ran", ld);
		ck_assert_int_eq(symlink(ld, harness_path(link, "tools/link-ld")), 0);
		ck_assert_int_eq(lchown(link, 65534, 65534), 0);
		compiler_printing_ld("link", link, cxx);
		build_expecting(cxx, src, "belongs to uid 65534");
		ck_assert_msg(!harness_exists(harness_path(mark, "ld2.ran")), "it ran");

		/* A bare name, found along kilnd's PATH: another user's. */
		noting_linker("pathbin/kiln-test-ld", "bare.ran", ld);
		ck_assert_int_eq(chown(ld, 65534, 65534), 0);
		compiler_printing_ld("bare", "kiln-test-ld", cxx);
		build_expecting(cxx, src, "belongs to uid 65534");
		ck_assert_msg(!harness_exists(harness_path(mark, "bare.ran")), "it ran");
	}
	harness_stop();
}
END_TEST

/* A fake nvcc at <dir>/cuda/bin/nvcc: its --version is NVIDIA's, and it
 * builds nothing. */
static void fake_nvcc(char nvcc[HARNESS_PATH])
{
	char dir[HARNESS_PATH];
	ck_assert_int_eq(mkdir(harness_path(dir, "cuda"), 0755), 0);
	ck_assert_int_eq(mkdir(harness_path(dir, "cuda/bin"), 0755), 0);
	script(harness_path(nvcc, "cuda/bin/nvcc"),
	       "#!/bin/sh\nif [ \"$1\" = --version ]; then\n\techo 'nvcc: NVIDIA (R) Cuda compiler "
	       "driver'\n\techo 'Cuda compilation tools, release 12.4, V12.4.131'\n\texit 0\nfi\n"
	       "exit 1\n");
}

/*
 * nvcc's host compiler passes the rules of a named compiler before the
 * identification runs it: one named whose --version is no compiler is
 * refused before anything else is asked of it, and one kilnd's
 * NVCC_CCBIN names that another user owns is not run for it. Before, both
 * were run with --version and -print-search-dirs, and the first was taken.
 */
START_TEST(host_compiler_passes_the_rules_before_it_runs)
{
	char nvcc[HARNESS_PATH], host[HARNESS_PATH], log[HARNESS_PATH], src[HARNESS_PATH];
	char theirs[HARNESS_PATH], theirs_log[HARNESS_PATH], text[2 * HARNESS_PATH];
	char ccbin_env[HARNESS_PATH + 16], dir[HARNESS_PATH], *out, *err;
	harness_write_file(harness_path(src, "k.cu"), "__global__ void k(void) {}\n");
	fake_nvcc(nvcc);
	ck_assert_int_eq(mkdir(harness_path(dir, "host"), 0755), 0);
	snprintf(text, sizeof(text), "#!/bin/sh\necho \"$*\" >> %s\necho 'frobnicate 2.1'\n",
		 harness_path(log, "host.log"));
	script(harness_path(host, "host/cc"), text);
	snprintf(text, sizeof(text), "#!/bin/sh\necho \"$*\" >> %s\nexec /usr/bin/gcc \"$@\"\n",
		 harness_path(theirs_log, "theirs.log"));
	script(harness_path(theirs, "host/theirs-gcc"), text);
	bool root = geteuid() == 0;
	if (root)
		ck_assert_int_eq(chown(theirs, 65534, 65534), 0);
	snprintf(ccbin_env, sizeof(ccbin_env), "NVCC_CCBIN=%s", theirs);
	harness_start_env((const char *const[]){ "--cuda-arch", "sm_80", NULL },
			  (const char *const[]){ ccbin_env, NULL });

	ck_assert_int_ne(harness_cli(&out, &err, "build", "--compiler", nvcc, "--host-compiler", host,
				     src, NULL), 0);
	ck_assert_msg(harness_contains(err, "names no C, C++ or CUDA compiler"), "%s%s", out, err);
	free(out);
	free(err);
	char *ran = harness_read_file(log);
	ck_assert_msg(ran != NULL && strcmp(ran, "--version\n") == 0,
		      "the host compiler was run with more than --version:\n%s", ran);
	free(ran);
	if (root) {
		/* A configured nvcc ran it at start-up (the owner's choice);
		 * the named one must not run it again. */
		char *before = harness_read_file(theirs_log);
		build_expecting(nvcc, src, "belongs to uid 65534");
		char *after = harness_read_file(theirs_log);
		ck_assert_msg((before == NULL && after == NULL) ||
			      (before != NULL && after != NULL && strcmp(before, after) == 0),
			      "NVCC_CCBIN's program ran for the named nvcc:\n%s", after);
		free(before);
		free(after);
	}
	ck_assert_int_eq(builds(), 0);
	harness_stop();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("named");
	harness_add(s, "module_compiler", module_compiler_named_by_path_builds_once, 120);
	harness_add(s, "changed_compiler", changed_compiler_builds_again, 120);
	harness_add(s, "refused", compilers_that_others_can_swap_or_are_none_are_refused, 120);
	harness_add(s, "transfer", export_and_import_of_a_named_compiler_s_entry, 180);
	harness_add(s, "two_names", one_binary_under_two_names_is_two_toolchains, 120);
	harness_add(s, "spellings", spellings_of_one_compiler_share_one_identity, 300);
	harness_add(s, "hanging", hanging_compilers_do_not_hold_the_pool, 200);
	harness_add(s, "warm", warm_manifest_names_a_compiler, 120);
	harness_add(s, "renamed_driver", renamed_driver_behind_a_wrapper_is_gcc, 120);
	harness_add(s, "non_compiler_first", non_compiler_is_refused_before_any_other_probe, 120);
	harness_add(s, "printed_linker", linker_the_driver_prints_passes_the_rules_before_it_runs, 180);
	harness_add(s, "host_rules", host_compiler_passes_the_rules_before_it_runs, 120);
	return harness_main(s);
}
