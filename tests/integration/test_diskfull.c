/*
 * A full disk during builds: the cache directory on a small tmpfs, filled up
 * with a file after two programs were built. The next build fails with a
 * clear error for every waiter, kilnd stays up, the index and the objects
 * already there are unchanged, and once space is back the build succeeds.
 * Mounting needs root: without it the test skips (77) and says why.
 */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define WAITERS 3

/* Writes zeros to path until the filesystem is full. */
static void fill_up(const char *path)
{
	static char zeros[65536];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	ck_assert_int_ge(fd, 0);
	while (write(fd, zeros, sizeof(zeros)) > 0)
		;
	ck_assert_int_eq(errno, ENOSPC);
	/* Small writes take the last partial block too. */
	while (write(fd, zeros, 1) > 0)
		;
	close(fd);
}

START_TEST(full_disk_fails_the_build_cleanly)
{
	char keys[2][72], filler[HARNESS_PATH];
	char *text = harness_program("diskfull", 900);
	struct kiln_request req;
	struct kiln_source src;
	struct harness_fleet *f;
	cJSON *before, *after;

	ck_assert_int_eq(mkdir(harness.cache, 0700), 0);
	ck_assert_msg(mount("tmpfs", harness.cache, "tmpfs", 0, "size=4m,mode=0700") == 0,
		      "mount tmpfs: %s", strerror(errno));
	harness_start(NULL);
	harness_get_program(NULL, "before_0", 90, NULL, keys[0]);
	harness_get_program(NULL, "before_1", 91, NULL, keys[1]);
	before = harness_cli_json("ls", NULL);

	fill_up(harness_path(filler, "cache/filler"));
	harness_request(&req, &src, "diskfull.c", text);
	f = harness_fleet_start(WAITERS, &(struct harness_fleet_opts){
		.socket = harness.socket, .reqs = &req, .nreqs = 1 });
	harness_fleet_wait(f, 120);
	for (int i = 0; i < WAITERS; i++) {
		struct harness_result *r = &f->results[i];

		ck_assert_msg(r->rc != KILN_OK, "client %d got a program built on a full disk", i);
		ck_assert_msg(r->rc == KILN_EDAEMON, "client %d: %s is not KILN_EDAEMON: %s", i,
			      kiln_strerror(r->rc), r->msg);
		ck_assert_msg(harness_contains(r->msg, "No space left on device"),
			      "client %d: the error does not say the disk is full: %s", i, r->msg);
	}
	harness_fleet_free(f);

	/* kilnd is up, and what was there is unchanged and still served. */
	after = harness_cli_json("ls", NULL);
	ck_assert_int_eq(cJSON_GetArraySize(after), cJSON_GetArraySize(before));
	for (int i = 0; i < 2; i++)
		ck_assert_ptr_nonnull(harness_find_entry(after, "key", keys[i]));
	cJSON_Delete(before);
	cJSON_Delete(after);
	{
		struct harness_result r;
		char *t = harness_program("before_0", 90);
		struct kiln_request rq;
		struct kiln_source s;

		harness_request(&rq, &s, "prog.c", t);
		r = harness_in_child(&rq, NULL);
		ck_assert_msg(r.rc == KILN_OK && r.value == 90, "a cached program: %s", r.msg);
		free(t);
	}

	/* Space again: the same request builds. */
	ck_assert_int_eq(unlink(filler), 0);
	{
		struct harness_result r = harness_in_child(&req, NULL);

		ck_assert_msg(r.rc == KILN_OK && r.value == 900, "after freeing space: %s", r.msg);
	}
	{
		char *out = NULL;

		ck_assert_int_eq(harness_cli(&out, NULL, "verify", NULL), 0);
		free(out);
	}
	harness_stop();
	umount2(harness.cache, MNT_DETACH);
	free(text);
}
END_TEST

/* The disk fills up while the compiler runs (the build directory and its
 * sources still fit): the failure is the daemon's full disk, io with "the
 * disk is full", not the program's "the compiler exited with status 1". */
START_TEST(full_disk_during_the_compile_is_reported_as_such)
{
	char filler[HARNESS_PATH];
	char *text = harness_program("diskfull_compile", 901);
	struct kiln_request req;
	struct kiln_source src;
	struct stat st;

	ck_assert_int_eq(mkdir(harness.cache, 0700), 0);
	ck_assert_msg(mount("tmpfs", harness.cache, "tmpfs", 0, "size=4m,mode=0700") == 0,
		      "mount tmpfs: %s", strerror(errno));
	harness_start(NULL);
	fill_up(harness_path(filler, "cache/filler"));
	/* Room for the build directory and the source, not for the compile. */
	ck_assert_int_eq(stat(filler, &st), 0);
	ck_assert_int_eq(truncate(filler, st.st_size - 16384), 0);
	harness_request(&req, &src, "diskfull.c", text);
	struct harness_result r = harness_in_child(&req, NULL);
	ck_assert_msg(r.rc == KILN_EDAEMON && harness_contains(r.msg, "the disk is full"),
		      "a compile on a full disk gave %s: %s", kiln_strerror(r.rc), r.msg);
	/* logged for the operator (warn), with the program's label */
	char *log = harness_read_file(harness.log);
	ck_assert_msg(log != NULL && harness_contains(log, "warn: build of ") &&
		      harness_contains(log, "(no label) failed: the disk is full"), "log: %s", log);
	free(log);
	ck_assert_int_eq(unlink(filler), 0);
	r = harness_in_child(&req, NULL);
	ck_assert_msg(r.rc == KILN_OK && r.value == 901, "after freeing space: %s", r.msg);
	harness_stop();
	umount2(harness.cache, MNT_DETACH);
	free(text);
}
END_TEST

int main(void)
{
	Suite *s;
	char probe[] = "/tmp/kiln-mount-probe-XXXXXX";

	if (geteuid() != 0) {
		printf("SKIP: a small tmpfs as cache directory needs root (mount)\n");
		return 77;
	}
	if (mkdtemp(probe) == NULL || mount("tmpfs", probe, "tmpfs", 0, "size=64k") != 0) {
		printf("SKIP: cannot mount a tmpfs here: %s\n", strerror(errno));
		rmdir(probe);
		return 77;
	}
	umount(probe);
	rmdir(probe);
	s = suite_create("diskfull");
	suite_add_tcase(s, harness_tcase("full", full_disk_fails_the_build_cleanly, 180));
	suite_add_tcase(s, harness_tcase("during_compile", full_disk_during_the_compile_is_reported_as_such, 180));
	return harness_main(s);
}
