/*
 * Integration tests of who may talk to kilnd: the real CLI run as another
 * user (setpriv as root) against a socket whose file modes let everyone in,
 * so that only kilnd's SO_PEERCRED check stands in the way. Without root or
 * setpriv the test skips (77) and says why.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define SETPRIV "/usr/bin/setpriv"
#define NOBODY "65534"
#define STRANGER_GID "12345"   /* a group nobody is in */

struct run_as {
	int status;     /* exit status, or -1 */
	char *out, *err;
};

/* Runs "kiln --socket S --json ARG" as uid nobody with gid regid and either
 * no supplementary groups (groups NULL) or groups; trusting the daemon's
 * uid (KILN_DAEMON_UID) when trust is set. */
static struct run_as cli_as_nobody_argv(const char *regid, const char *groups, bool trust,
					const char *const *args)
{
	char out[HARNESS_PATH], err[HARNESS_PATH], regid_opt[64], groups_opt[64];
	char trust_env[64];
	const char *env[] = { trust_env, NULL };
	const char *argv[24] = { SETPRIV, "--reuid=" NOBODY, regid_opt,
				 groups != NULL ? groups_opt : "--clear-groups",
				 harness_cli_path(), "--socket", harness.socket, "--json" };
	size_t n = 8;
	for (size_t i = 0; args[i] != NULL && n < 23; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	struct run_as r;
	pid_t pid;

	snprintf(regid_opt, sizeof(regid_opt), "--regid=%s", regid);
	snprintf(groups_opt, sizeof(groups_opt), "--groups=%s", groups != NULL ? groups : "");
	snprintf(trust_env, sizeof(trust_env), "KILN_DAEMON_UID=%s", trust ? "0" : "");
	harness_path(out, "as-nobody.out");
	harness_path(err, "as-nobody.err");
	unlink(out);
	unlink(err);
	pid = harness_spawn(argv, env, out, err);
	r.status = harness_wait(pid, 30);
	ck_assert_msg(r.status != -1, "the CLI as nobody hangs");
	r.status = WIFEXITED(r.status) ? WEXITSTATUS(r.status) : -1;
	r.out = harness_read_file(out);
	r.err = harness_read_file(err);
	return r;
}

static struct run_as cli_as_nobody(const char *regid, const char *groups, bool trust,
				   const char *arg)
{
	return cli_as_nobody_argv(regid, groups, trust, (const char *const[]){ arg, NULL });
}

static void run_as_free(struct run_as *r)
{
	free(r->out);
	free(r->err);
}

/* Opens the test directory to other users: they may enter it, nothing more.
 * kilnd with --allow-* makes its socket 0666. */
static void open_test_dir(void)
{
	ck_assert_int_eq(chmod(harness.dir, 0711), 0);
}

static int64_t status_num(const char *field)
{
	cJSON *st = harness_status();
	int64_t n = harness_num(st, field);

	cJSON_Delete(st);
	return n;
}

/* Another user reaches the socket (0666) but is not allowed: refused. */
START_TEST(other_user_is_refused_and_logged)
{
	struct run_as r;
	char *log;
	struct stat st;

	open_test_dir();
	harness_start("--allow-group", STRANGER_GID, NULL);
	ck_assert_int_eq(stat(harness.socket, &st), 0);
	ck_assert_msg((st.st_mode & 0777) == 0666, "socket mode %o", st.st_mode & 0777);
	r = cli_as_nobody(NOBODY, NULL, true, "status");
	ck_assert_msg(r.status != 0, "uid nobody was served: %s", r.out);
	ck_assert_msg(harness_contains(r.err, "refused") || harness_contains(r.err, "denied"),
		      "the refusal does not say so: %s", r.err);
	log = harness_read_file(harness.log);
	ck_assert_msg(harness_contains(log, "refused connection from uid 65534"),
		      "the refusal is not logged");
	free(log);
	ck_assert_int_eq(status_num("denied"), 1);
	run_as_free(&r);
	harness_stop();
}
END_TEST

/* --allow-uid nobody: served, once the client trusts the daemon's uid. */
START_TEST(allowed_uid_is_served)
{
	struct run_as r;
	cJSON *st;

	open_test_dir();
	harness_start("--allow-uid", "nobody", NULL);
	r = cli_as_nobody(NOBODY, NULL, true, "status");
	ck_assert_msg(r.status == 0, "uid nobody was not served: %s", r.err);
	st = cJSON_Parse(r.out);
	ck_assert_msg(st != NULL, "not JSON: %s", r.out);
	ck_assert_int_eq(harness_num(st, "pid"), harness.pid);
	cJSON_Delete(st);
	run_as_free(&r);

	/* Without KILN_DAEMON_UID the client refuses a daemon of another user. */
	r = cli_as_nobody(NOBODY, NULL, false, "status");
	ck_assert_msg(r.status != 0, "the client trusted another user's kilnd");
	ck_assert_msg(harness_contains(r.err, "KILN_DAEMON_UID"), "stderr: %s", r.err);
	run_as_free(&r);
	ck_assert_int_eq(status_num("denied"), 0);
	harness_stop();
}
END_TEST

/* --allow-group: by the peer's group or one of its supplementary groups. */
START_TEST(allowed_group_is_served)
{
	struct run_as r;

	open_test_dir();
	harness_start("--allow-group", "nogroup", NULL);
	r = cli_as_nobody(NOBODY, NULL, true, "status");
	ck_assert_msg(r.status == 0, "gid nogroup was not served: %s", r.err);
	run_as_free(&r);
	r = cli_as_nobody(STRANGER_GID, NOBODY, true, "status");
	ck_assert_msg(r.status == 0, "supplementary group nogroup was not served: %s", r.err);
	run_as_free(&r);
	r = cli_as_nobody(STRANGER_GID, NULL, true, "status");
	ck_assert_msg(r.status != 0, "a peer outside the group was served");
	run_as_free(&r);
	ck_assert_int_eq(status_num("denied"), 1);
	harness_stop();
}
END_TEST

/* A root-owned script standing for a compiler at <dir>/rel/g++. */
static void compiler_at(const char *rel, char path[HARNESS_PATH])
{
	char dir[HARNESS_PATH];
	ck_assert_int_eq(mkdir(harness_path(dir, "%s", rel), 0755), 0);
	harness_write_file(harness_path(path, "%s/g++", rel), "#!/bin/sh\nexec /usr/bin/g++ \"$@\"\n");
	ck_assert_int_eq(chmod(path, 0755), 0);
}

/*
 * A user admitted with --allow-uid may name a compiler only under a
 * --toolchain-dir; the daemon's owner may name any that only they or root
 * can change.
 */
START_TEST(admitted_user_names_compilers_only_under_toolchain_dir)
{
	char site[HARNESS_PATH], theirs[HARNESS_PATH], src[HARNESS_PATH], dir[HARNESS_PATH];
	struct run_as r;

	open_test_dir();
	ck_assert_int_eq(mkdir(harness_path(dir, "site"), 0755), 0);
	compiler_at("site/bin", site);
	compiler_at("elsewhere", theirs);
	harness_write_file(harness_path(src, "p.cpp"), "extern \"C\" int f(void) { return 3; }\n");
	ck_assert_int_eq(chmod(src, 0644), 0);
	harness_start("--allow-uid", "nobody", "--toolchain-dir", dir, NULL);

	r = cli_as_nobody_argv(NOBODY, NULL, true,
			       (const char *const[]){ "build", "--compiler", theirs, src, NULL });
	ck_assert_msg(r.status != 0, "nobody named a compiler outside --toolchain-dir: %s", r.out);
	ck_assert_msg(harness_contains(r.err, "--toolchain-dir"), "stderr: %s", r.err);
	run_as_free(&r);
	ck_assert_int_eq(status_num("builds_started"), 0);

	r = cli_as_nobody_argv(NOBODY, NULL, true,
			       (const char *const[]){ "build", "--compiler", site, src, NULL });
	ck_assert_msg(r.status == 0, "nobody could not name the site's compiler: %s", r.err);
	run_as_free(&r);

	/* a link nobody owns, in a sticky directory everyone may write, to
	 * the site's compiler directory: nobody could turn it elsewhere
	 * between the check and a run, so it is refused */
	char sticky[HARNESS_PATH], link[HARNESS_PATH], via[HARNESS_PATH + 8], bin[HARNESS_PATH];
	ck_assert_int_eq(mkdir(harness_path(sticky, "sticky"), 0777), 0);
	ck_assert_int_eq(chmod(sticky, 01777), 0);
	harness_path(link, "sticky/lnk");
	harness_path(bin, "site/bin");
	const char *ln[] = { SETPRIV, "--reuid=" NOBODY, "--regid=" NOBODY, "--clear-groups",
			     "/bin/ln", "-s", bin, link, NULL };
	ck_assert_int_eq(harness_run(ln, NULL, NULL, 30), 0);
	snprintf(via, sizeof(via), "%s/g++", link);
	r = cli_as_nobody_argv(NOBODY, NULL, true,
			       (const char *const[]){ "build", "--compiler", via, src, NULL });
	ck_assert_msg(r.status != 0, "nobody ran the compiler through a link of its own: %s", r.out);
	ck_assert_msg(harness_contains(r.err, "belongs to uid 65534"), "stderr: %s", r.err);
	run_as_free(&r);

	/* the owner (root here) may name the other one */
	char *out, *err;
	ck_assert_msg(harness_cli(&out, &err, "build", "--compiler", theirs, src, NULL) == 0,
		      "the owner could not name %s: %s", theirs, err);
	free(out);
	free(err);
	harness_stop();
}
END_TEST

/* A script at <dir>/<rel>, mode 0755. */
static void script_at(const char *rel, const char *text, char path[HARNESS_PATH])
{
	harness_write_file(harness_path(path, "%s", rel), text);
	ck_assert_int_eq(chmod(path, 0755), 0);
}

/*
 * For a user kilnd admits, every program the identification runs lies
 * under a --toolchain-dir, as the compiler named does: the linker the
 * site's compiler prints for -print-prog-name=ld (whose --help kilnd reads)
 * is not run when it lies elsewhere, and the compiler is used without
 * that probe; the owner's identification of the same compiler runs it.
 * nvcc named without a host compiler is refused when the host it would
 * run (gcc on PATH) lies outside, as that host named would be.
 */
START_TEST(programs_the_identification_runs_for_an_admitted_user_lie_under_toolchain_dir)
{
	char site[HARNESS_PATH], cxx[HARNESS_PATH], ld[HARNESS_PATH], mark[HARNESS_PATH];
	char nvcc[HARNESS_PATH], src[HARNESS_PATH], cu[HARNESS_PATH], dir[HARNESS_PATH];
	char text[3 * HARNESS_PATH], *out, *err, *ran;
	struct run_as r;

	open_test_dir();
	ck_assert_int_eq(mkdir(harness_path(site, "site"), 0755), 0);
	ck_assert_int_eq(mkdir(harness_path(dir, "site/bin"), 0755), 0);
	ck_assert_int_eq(mkdir(harness_path(dir, "elsewhere"), 0755), 0);
	snprintf(text, sizeof(text), "#!/bin/sh\necho \"$@\" >> %s\nexec /usr/bin/ld \"$@\"\n",
		 harness_path(mark, "ld.ran"));
	script_at("elsewhere/ld", text, ld);
	snprintf(text, sizeof(text), "#!/bin/sh\nif [ \"$1\" = -print-prog-name=ld ]; then\n"
		 "\techo %s\n\texit 0\nfi\nexec /usr/bin/g++ \"$@\"\n", ld);
	script_at("site/bin/g++", text, cxx);
	script_at("site/bin/nvcc", "#!/bin/sh\nif [ \"$1\" = --version ]; then\n\techo 'Cuda "
		  "compilation tools, release 12.4, V12.4.131'\n\texit 0\nfi\nexit 1\n", nvcc);
	harness_write_file(harness_path(src, "p.cpp"), "extern \"C\" int f(void) { return 5; }\n");
	harness_write_file(harness_path(cu, "k.cu"), "__global__ void k(void) {}\n");
	ck_assert_int_eq(chmod(src, 0644), 0);
	ck_assert_int_eq(chmod(cu, 0644), 0);
	harness_start("--allow-uid", "nobody", "--toolchain-dir", site, "--cuda-arch", "sm_80", NULL);

	r = cli_as_nobody_argv(NOBODY, NULL, true,
			       (const char *const[]){ "build", "--compiler", cxx, src, NULL });
	ck_assert_msg(r.status == 0, "nobody could not name the site's compiler: %s", r.err);
	run_as_free(&r);
	ck_assert_msg(!harness_exists(mark), "the linker outside --toolchain-dir ran for nobody");

	ck_assert_msg(harness_cli(&out, &err, "build", "--compiler", cxx, src, NULL) == 0,
		      "the owner could not name %s: %s", cxx, err);
	free(out);
	free(err);
	ran = harness_read_file(mark);
	ck_assert_msg(ran != NULL && harness_contains(ran, "--help"),
		      "the owner's identification did not ask the linker");
	free(ran);

	r = cli_as_nobody_argv(NOBODY, NULL, true,
			       (const char *const[]){ "build", "--compiler", nvcc, cu, NULL });
	ck_assert_msg(r.status != 0, "nobody's nvcc ran a host compiler outside --toolchain-dir");
	ck_assert_msg(harness_contains(r.err, "host compiler") &&
		      harness_contains(r.err, "--toolchain-dir"), "stderr: %s", r.err);
	run_as_free(&r);
	harness_stop();
}
END_TEST

int main(void)
{
	Suite *s;
	const char *cli = getenv("KILN_TEST_CLI");
	char cmd[1024];

	if (geteuid() != 0) {
		printf("SKIP: playing another user needs root (setpriv --reuid)\n");
		return 77;
	}
	if (access(SETPRIV, X_OK) != 0) {
		printf("SKIP: %s is missing (Debian package util-linux)\n", SETPRIV);
		return 77;
	}
	snprintf(cmd, sizeof(cmd), SETPRIV " --reuid=" NOBODY " --regid=" NOBODY
		 " --clear-groups %s --version >/dev/null 2>&1", cli != NULL ? cli : "kiln");
	if (system(cmd) != 0) {
		printf("SKIP: user nobody cannot run %s (a directory on its path is closed)\n",
		       cli != NULL ? cli : "kiln (KILN_TEST_CLI is not set)");
		return 77;
	}
	s = suite_create("peers");
	suite_add_tcase(s, harness_tcase("refused", other_user_is_refused_and_logged, 60));
	suite_add_tcase(s, harness_tcase("allow_uid", allowed_uid_is_served, 60));
	suite_add_tcase(s, harness_tcase("allow_group", allowed_group_is_served, 60));
	suite_add_tcase(s, harness_tcase("toolchain_dir",
					 admitted_user_names_compilers_only_under_toolchain_dir, 90));
	suite_add_tcase(s, harness_tcase("identification_programs",
		programs_the_identification_runs_for_an_admitted_user_lie_under_toolchain_dir, 90));
	return harness_main(s);
}
