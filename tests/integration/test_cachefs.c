/*
 * Integration tests of the cache directory's filesystem: kilnd refuses a
 * cache on a network filesystem (NFS, Lustre, GPFS, ...), naming a
 * node-local directory and --upstream, and starts on one with
 * --allow-network-cache. The network filesystem is a stand-in: statfs_shim.so
 * ($KILN_TEST_STATFS_SHIM), preloaded into kilnd, answers statfs for the
 * paths under a prefix with the magic number the test chooses.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The environment that makes prefix look like a filesystem of type magic:
 * into env (NULL-terminated), its strings in bufs. */
struct fake_fs {
	char preload[HARNESS_PATH + 16], prefix[HARNESS_PATH + 32], magic[48], asan[1024];
	const char *env[8];
};

static void fake_fs(struct fake_fs *f, const char *prefix, const char *magic)
{
	const char *shim = getenv("KILN_TEST_STATFS_SHIM");
	const char *asan = getenv("ASAN_OPTIONS");
	size_t n = 0;

	ck_assert_msg(shim != NULL, "KILN_TEST_STATFS_SHIM is not set (run through meson test)");
	snprintf(f->preload, sizeof(f->preload), "LD_PRELOAD=%s", shim);
	snprintf(f->prefix, sizeof(f->prefix), "KILN_TEST_STATFS_PREFIX=%s", prefix);
	snprintf(f->magic, sizeof(f->magic), "KILN_TEST_STATFS_MAGIC=%s", magic);
	/* A sanitized kilnd: the shim, not ASan's runtime, is loaded first. */
	snprintf(f->asan, sizeof(f->asan), "ASAN_OPTIONS=%s%sverify_asan_link_order=0",
		 asan != NULL ? asan : "", asan != NULL && asan[0] != '\0' ? ":" : "");
	f->env[n++] = f->preload;
	f->env[n++] = f->prefix;
	f->env[n++] = f->magic;
	f->env[n++] = f->asan;
	f->env[n] = NULL;
}

/* Runs kilnd with extra arguments (NULL-terminated, after --socket and
 * --log-level) and extra environment; returns its exit status, its
 * output (stdout and stderr) in *out (caller frees). */
static int run_kilnd(const char *const *extra, const char *const *env, char **out)
{
	const char *argv[16] = { harness_kilnd(), "--socket", harness.socket, "--log-level", "debug" };
	size_t n = 5;
	pid_t pid;
	int status;

	for (size_t i = 0; extra[i] != NULL && n < 15; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	unlink(harness.out);
	pid = harness_spawn(argv, env, harness.out, NULL);
	status = harness_wait(pid, 60);
	ck_assert_msg(status != -1, "kilnd did not exit");
	*out = harness_read_file(harness.out);
	ck_assert(*out != NULL);
	return status;
}

/* What a refusal must say: the directory, the filesystem, why, what to use
 * instead (a node-local directory, --upstream) and the way out. */
static void check_refusal(int status, const char *out, const char *dir, const char *fsname)
{
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 1,
		      "kilnd did not exit 1 on a cache on %s (status %d): %s", fsname, status, out);
	ck_assert_msg(harness_contains(out, dir), "the refusal does not name %s: %s", dir, out);
	ck_assert_msg(harness_contains(out, fsname), "the refusal does not name %s: %s", fsname, out);
	ck_assert_msg(harness_contains(out, "a network filesystem"), "%s", out);
	ck_assert_msg(harness_contains(out, "node-local") &&
			      harness_contains(out, "KILN_CACHE_DIR=") &&
			      harness_contains(out, "--upstream") &&
			      harness_contains(out, "--allow-network-cache"),
		      "the refusal does not say what to do instead: %s", out);
	ck_assert_msg(!harness_socket_answers(harness.socket), "a refused kilnd serves");
}

/*
 * A cache directory on each of the network filesystems HPC sites mount is
 * refused before anything is made there: a new one is not created, an
 * existing one is left as it was.
 */
START_TEST(network_cache_dir_is_refused)
{
	static const struct {
		const char *magic, *name;
	} fss[] = {
		{ "0x6969", "NFS" }, { "0x0BD00BD0", "Lustre" }, { "0x47504653", "GPFS" },
		{ "0x19830326", "BeeGFS" }, { "0x00C36400", "CephFS" }, { "0xFE534D42", "SMB2/3" },
	};
	char share[HARNESS_PATH], cache[HARNESS_PATH];
	struct fake_fs f;
	char *out;
	int status;

	harness_path(share, "share");
	harness_path(cache, "share/cache");
	ck_assert_int_eq(mkdir(share, 0700), 0);
	for (size_t i = 0; i < sizeof(fss) / sizeof(fss[0]); i++) {
		const char *extra[] = { "--cache-dir", cache, NULL };

		fake_fs(&f, share, fss[i].magic);
		status = run_kilnd(extra, f.env, &out);
		check_refusal(status, out, cache, fss[i].name);
		free(out);
		ck_assert_msg(!harness_exists(cache), "a refused kilnd created %s", cache);
	}
	/* An existing cache there: refused, and left as it was. */
	ck_assert_int_eq(mkdir(cache, 0700), 0);
	{
		const char *extra[] = { "--cache-dir", cache, NULL };

		fake_fs(&f, share, "0x6969");
		status = run_kilnd(extra, f.env, &out);
		check_refusal(status, out, cache, "NFS");
		free(out);
		ck_assert_int_eq(harness_count_dir(cache), 0);
	}
}
END_TEST

/* The finding itself: without KILN_CACHE_DIR the cache is ~/.cache/kiln,
 * and a home directory on NFS is refused, with a node-local directory named. */
START_TEST(default_cache_in_a_network_home_is_refused)
{
	char home[HARNESS_PATH], cache[HARNESS_PATH], henv[HARNESS_PATH + 8];
	const char *extra[] = { NULL };
	struct fake_fs f;
	const char *env[12];
	size_t n = 0;
	char *out;
	int status;

	harness_path(home, "home");
	harness_path(cache, "home/.cache/kiln");
	ck_assert_int_eq(mkdir(home, 0700), 0);
	fake_fs(&f, home, "0x6969");
	snprintf(henv, sizeof(henv), "HOME=%s", home);
	for (; f.env[n] != NULL; n++)
		env[n] = f.env[n];
	env[n++] = henv;
	env[n++] = "XDG_CACHE_HOME=";
	env[n] = NULL;
	status = run_kilnd(extra, env, &out);
	check_refusal(status, out, cache, "NFS");
	free(out);
	ck_assert_msg(!harness_exists(cache), "a refused kilnd created %s", cache);
}
END_TEST

/* --allow-network-cache starts kilnd there anyway, saying so in its log. */
START_TEST(allow_network_cache_starts_with_a_warning)
{
	const char *extra[] = { "--allow-network-cache", NULL };
	struct fake_fs f;
	char *log;

	/* harness_start's cache is <dir>/cache: it is made on <dir>'s filesystem. */
	fake_fs(&f, harness.dir, "0x0BD00BD0");
	harness_start_env(extra, f.env);
	{
		cJSON *st = harness_status();

		ck_assert_str_eq(harness_str(st, "cache_dir"), harness.cache);
		cJSON_Delete(st);
	}
	harness_stop();
	log = harness_read_file(harness.log);
	ck_assert_msg(log != NULL && harness_contains(log, "is on Lustre, a network filesystem") &&
			      harness_contains(log, "--allow-network-cache"),
		      "no warning in the log: %s", log);
	free(log);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cachefs");

	suite_add_tcase(s, harness_tcase("refused", network_cache_dir_is_refused, 120));
	suite_add_tcase(s, harness_tcase("default", default_cache_in_a_network_home_is_refused, 60));
	suite_add_tcase(s, harness_tcase("allowed", allow_network_cache_starts_with_a_warning, 60));
	return harness_main(s);
}
