/*
 * Unit tests of the server's gate (daemon/server/access.c): who may talk
 * to kilnd (its own user, --allow-uid, --allow-group; root the status
 * only), the socket's directory, a stale socket replaced and anything else
 * at its path kept, and the one error a refused connection gets. The
 * tests of other users run as root (a child takes another uid before it
 * connects); as another user they are said to be left out.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <grp.h>
#include <unistd.h>

#include "access.h"
#include "config.h"
#include "unit.h"

#define NOBODY ((uid_t)65534)
#define NOGROUP ((gid_t)65534)

static char tmp[PATH_MAX / 2];

static void setup(void)
{
	snprintf(tmp, sizeof(tmp), "%s/kiln-test-access-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	chmod(tmp, 0755);   /* another user's child may connect to a socket here */
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

static void teardown(void)
{
	ck_assert_int_eq(nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS), 0);
}

/* A listening socket at tmp/name, open to everyone. */
static int listen_at(const char *name, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	int n = snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/%s", tmp, name);
	ck_assert_msg(n > 0 && (size_t)n < sizeof(sa->sun_path), "TMPDIR too long for a socket");
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)sa, sizeof(*sa)), 0);
	chmod(sa->sun_path, 0777);
	ck_assert_int_eq(listen(fd, 4), 0);
	return fd;
}

/* A child that becomes uid/gid (groups: only gid), connects and waits to
 * be closed; the accepted end. */
static int connect_as(int lfd, const struct sockaddr_un *sa, uid_t uid, gid_t gid, pid_t *child)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (setgroups(1, &gid) != 0 || setgid(gid) != 0 || setuid(uid) != 0 ||
		    connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) != 0)
			_exit(1);
		char c;
		(void)read(fd, &c, 1);
		_exit(0);
	}
	*child = pid;
	int fd = accept(lfd, NULL, NULL);
	ck_assert_int_ge(fd, 0);
	return fd;
}

static void reap(int fd, pid_t child)
{
	int status;
	close(fd);
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child could not connect");
}

START_TEST(own_user_is_served)
{
	struct config cfg = { 0 };
	int sv[2];
	uid_t uid = 1;
	pid_t pid = 0;
	bool status_only = true;
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	ck_assert_int_eq(access_check_peer(sv[0], &cfg, &uid, &pid, &status_only), 0);
	ck_assert_uint_eq(uid, geteuid());
	ck_assert_int_eq(pid, getpid());
	ck_assert(!status_only);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

START_TEST(another_user_only_when_allowed)
{
	struct config cfg = { 0 };
	struct sockaddr_un sa;
	int lfd = listen_at("s", &sa);
	uid_t uid;
	pid_t pid, child;
	bool status_only;
	int fd = connect_as(lfd, &sa, NOBODY, NOGROUP, &child);
	ck_assert_int_eq(access_check_peer(fd, &cfg, &uid, &pid, &status_only), -EPERM);
	ck_assert_uint_eq(uid, NOBODY);
	ck_assert_int_eq(pid, child);
	cfg.allow_uids[0] = 1000;
	cfg.nallow_uids = 1;
	ck_assert_int_eq(access_check_peer(fd, &cfg, &uid, &pid, &status_only), -EPERM);
	cfg.allow_uids[1] = NOBODY;
	cfg.nallow_uids = 2;
	ck_assert_int_eq(access_check_peer(fd, &cfg, &uid, &pid, &status_only), 0);
	ck_assert(!status_only);
	/* By group: its primary group, or one it had when it connected. */
	cfg.nallow_uids = 0;
	cfg.allow_gids[0] = 4242;
	cfg.nallow_gids = 1;
	ck_assert_int_eq(access_check_peer(fd, &cfg, &uid, &pid, &status_only), -EPERM);
	cfg.allow_gids[1] = NOGROUP;
	cfg.nallow_gids = 2;
	ck_assert_int_eq(access_check_peer(fd, &cfg, &uid, &pid, &status_only), 0);
	reap(fd, child);
	close(lfd);
}
END_TEST

/* Root, connecting to another user's kilnd: its status only. The kilnd
 * side is a child that became that user. */
START_TEST(root_may_read_the_status_only)
{
	struct sockaddr_un sa;
	int lfd = listen_at("s", &sa);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct config cfg = { 0 };
		uid_t uid;
		pid_t ppid;
		bool status_only = false;
		if (setgid(NOGROUP) != 0 || setuid(NOBODY) != 0)
			_exit(10);
		int fd = accept(lfd, NULL, NULL);
		int rc = access_check_peer(fd, &cfg, &uid, &ppid, &status_only);
		_exit(rc == 0 && status_only && uid == 0 ? 0 : 11);
	}
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "root was not given the status only (child status 0x%x)", status);
	close(fd);
	close(lfd);
}
END_TEST

START_TEST(socket_directory_made_private)
{
	char path[PATH_MAX], err[512] = "";
	struct stat st;
	snprintf(path, sizeof(path), "%s/run/kiln/kilnd.sock", tmp);
	ck_assert_int_eq(access_prepare_dir(path, err, sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s/run/kiln", tmp);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 0777, 0700);
	/* A file where the directory should be: refused, said. */
	snprintf(path, sizeof(path), "%s/file", tmp);
	int fd = open(path, O_WRONLY | O_CREAT, 0644);
	close(fd);
	snprintf(path, sizeof(path), "%s/file/kilnd.sock", tmp);
	ck_assert_int_eq(access_prepare_dir(path, err, sizeof(err)), -ENOTDIR);
	ck_assert_msg(strstr(err, "is not a directory") != NULL, "%s", err);
}
END_TEST

START_TEST(only_a_stale_socket_is_replaced)
{
	char path[PATH_MAX], err[512];
	struct sockaddr_un sa;
	struct stat st;
	int lfd = listen_at("stale.sock", &sa);
	close(lfd);   /* a dead daemon's socket */
	ck_assert_int_eq(access_clear_socket(sa.sun_path, err, sizeof(err)), 0);
	ck_assert_int_ne(lstat(sa.sun_path, &st), 0);
	/* Nothing there: nothing to do. */
	ck_assert_int_eq(access_clear_socket(sa.sun_path, err, sizeof(err)), 0);
	/* The user's file, directory and link: kept, and the message says what. */
	const char *kinds[] = { "a regular file", "a directory", "a symbolic link" };
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/thing%d", tmp, i);
		if (i == 0)
			close(open(path, O_WRONLY | O_CREAT, 0644));
		else if (i == 1)
			ck_assert_int_eq(mkdir(path, 0700), 0);
		else
			ck_assert_int_eq(symlink("/etc/passwd", path), 0);
		err[0] = '\0';
		ck_assert_int_eq(access_clear_socket(path, err, sizeof(err)), -EEXIST);
		ck_assert_msg(strstr(err, kinds[i]) != NULL, "%s", err);
		ck_assert_int_eq(lstat(path, &st), 0);
	}
}
END_TEST

START_TEST(a_refusal_is_one_error_then_the_close)
{
	int sv[2];
	char buf[4096];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	access_refuse(sv[0], ERR_DENIED, "uid %d may not use this kilnd", 4242);
	size_t got = 0;
	ssize_t n;
	while ((n = read(sv[1], buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)n;
	ck_assert_int_eq(n, 0);   /* closed after the one frame */
	buf[got] = '\0';
	ck_assert_uint_gt(got, 4);
	uint32_t len = ((uint32_t)(uint8_t)buf[0] << 24) | ((uint32_t)(uint8_t)buf[1] << 16) |
		       ((uint32_t)(uint8_t)buf[2] << 8) | (uint8_t)buf[3];
	ck_assert_uint_eq(len, got - 4);
	ck_assert_msg(strstr(buf + 4, "uid 4242 may not use this kilnd") != NULL, "%s", buf + 4);
	ck_assert_msg(strstr(buf + 4, "\"denied\"") != NULL, "%s", buf + 4);
	close(sv[1]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("access");
	TCase *tc = tcase_create("access");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, own_user_is_served);
	tcase_add_test(tc, socket_directory_made_private);
	tcase_add_test(tc, only_a_stale_socket_is_replaced);
	tcase_add_test(tc, a_refusal_is_one_error_then_the_close);
	if (geteuid() == 0) {
		tcase_add_test(tc, another_user_only_when_allowed);
		tcase_add_test(tc, root_may_read_the_status_only);
	} else {
		printf("not root: the tests of other users (a child taking another uid) are left out\n");
	}
	suite_add_tcase(s, tc);
	return unit_run(s);
}
