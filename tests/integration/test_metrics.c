/*
 * kiln stats --prometheus -o FILE as a node exporter meets it: the file is
 * read by another user (nobody) after kiln wrote it under umask 077, its
 * series carry the labels user, node and cache (escaped) and no socket,
 * --mode 0600 keeps that user out, and a --mode that makes no sense for a
 * metrics file is refused. Needs root (setuid to nobody): skips (77) without.
 */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* What another user sees of path: 0 it read a whole metrics file, 1 it was
 * refused (EACCES), 2 anything else. */
static int read_as_nobody(const char *path)
{
	const struct passwd *pw = getpwnam("nobody");
	uid_t uid = pw != NULL ? pw->pw_uid : 65534;
	gid_t gid = pw != NULL ? pw->pw_gid : 65534;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char buf[65536];
		ssize_t n;
		if (setgroups(0, NULL) != 0 || setgid(gid) != 0 || setuid(uid) != 0 ||
		    getuid() != uid)
			_exit(2);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			_exit(errno == EACCES ? 1 : 2);
		n = read(fd, buf, sizeof(buf) - 1);
		buf[n > 0 ? n : 0] = '\0';
		_exit(n > 0 && strstr(buf, "\nkiln_up{") != NULL ? 0 : 2);
	}
	int status = harness_wait(pid, 30);
	ck_assert_msg(status != -1 && WIFEXITED(status), "the reader as nobody did not end");
	return WEXITSTATUS(status);
}

/* The labels every series must have: kilnd's user, this node, its cache
 * (the harness's cache path, escaped as the text format asks). */
static void check_labels(const char *text, bool up)
{
	char node[256], want[HARNESS_PATH * 2 + 512], cache[HARNESS_PATH * 2], *q = cache;

	ck_assert_int_eq(gethostname(node, sizeof(node)), 0);
	node[sizeof(node) - 1] = '\0';
	node[strcspn(node, ".")] = '\0';
	for (const char *p = harness.cache; *p != '\0'; p++) {
		if (*p == '"' || *p == '\\' || *p == '\n')
			*q++ = '\\';
		*q++ = *p == '\n' ? 'n' : *p;
	}
	*q = '\0';
	snprintf(want, sizeof(want), "kiln_up{user=\"root\",node=\"%s\",cache=\"%s\"} %d\n", node,
		 cache, up ? 1 : 0);
	ck_assert_msg(harness_contains(text, want), "no '%s' in:\n%s", want, text);
	snprintf(want, sizeof(want), "kiln_requests_total{user=\"root\",node=\"%s\",cache=\"%s\"} ",
		 node, cache);
	ck_assert_msg(harness_contains(text, want), "no '%s' in:\n%s", want, text);
	ck_assert_msg(!harness_contains(text, "socket="), "a socket label: %s", text);
}

/* Entries of dir other than "." and "..": only the metrics file, no
 * temporary one left behind. */
static void check_alone(const char *dir)
{
	ck_assert_int_eq(harness_count_dir(dir), 1);
}

START_TEST(textfile_read_by_another_user)
{
	char dir[HARNESS_PATH], file[HARNESS_PATH], key[72], *text, *err = NULL;
	struct stat st;

	/* A cache path that needs escaping in a label value. */
	harness_path(harness.cache, "ca\"c\\he\nx");
	harness_start(NULL);
	harness_get_program(NULL, "metrics", 3, NULL, key);
	/* The exporter's directory; nobody may pass through the test's. */
	ck_assert_int_eq(chmod(harness.dir, 0711), 0);
	ck_assert_int_eq(mkdir(harness_path(dir, "textfile"), 0755), 0);
	harness_path(file, "textfile/kiln.prom");
	umask(077);
	ck_assert_int_eq(harness_cli(NULL, NULL, "stats", "--prometheus", "-o", file, NULL), 0);
	ck_assert_int_eq(stat(file, &st), 0);
	ck_assert_msg((st.st_mode & 07777) == 0644, "mode %o under umask 077", st.st_mode & 07777);
	ck_assert_int_eq(read_as_nobody(file), 0);
	text = harness_read_file(file);
	check_labels(text, true);
	free(text);
	check_alone(dir);

	/* --mode 0600 keeps other users out, replacing the file whole. */
	ck_assert_int_eq(harness_cli(NULL, NULL, "stats", "--prometheus", "-o", file, "--mode",
				     "0600", NULL), 0);
	ck_assert_int_eq(stat(file, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	ck_assert_int_eq(read_as_nobody(file), 1);
	check_alone(dir);

	/* Modes that make no sense for it are refused, the file left alone. */
	static const char *const bad[] = { "0755", "4644", "1644", "0644x", "9", "", "06440" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(harness_cli(NULL, &err, "stats", "--prometheus", "-o", file, "--mode",
					  bad[i], NULL) == 2, "--mode \"%s\" was taken", bad[i]);
		ck_assert_msg(harness_contains(err, "--mode"), "stderr: %s", err);
		free(err);
	}
	ck_assert_int_eq(harness_cli(NULL, &err, "stats", "--prometheus", "--mode", "0644", NULL), 2);
	ck_assert_msg(harness_contains(err, "-o FILE"), "stderr: %s", err);
	free(err);
	ck_assert_int_eq(stat(file, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0600);

	/* kilnd down: the same series (same labels), kiln_up 0, readable again. */
	harness_stop();
	ck_assert_int_eq(harness_cli(NULL, NULL, "stats", "--prometheus", "-o", file, NULL), 0);
	ck_assert_int_eq(read_as_nobody(file), 0);
	text = harness_read_file(file);
	check_labels(text, false);
	free(text);
	check_alone(dir);
}
END_TEST

int main(void)
{
	Suite *s;

	if (geteuid() != 0) {
		printf("SKIP: reading the metrics file as another user needs root (setuid)\n");
		return 77;
	}
	s = suite_create("metrics");
	suite_add_tcase(s, harness_tcase("textfile", textfile_read_by_another_user, 90));
	return harness_main(s);
}
