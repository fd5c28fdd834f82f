/*
 * Integration tests of the systemd integration without a running systemd:
 * kilnd started with a listening socket passed the way systemd passes it
 * (descriptor 3, LISTEN_FDS=1, LISTEN_PID), and readiness notification to a
 * fake service manager: a datagram socket named by NOTIFY_SOCKET, a path or
 * an abstract name, as systemd makes one (kilnd needs no libsystemd).
 */
#include "harness.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* A listening Unix socket at path, as systemd makes one for kilnd.socket. */
static int listen_at(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_uint_lt(strlen(path), sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(fd, 16), 0);
	return fd;
}

/* A datagram socket for sd_notify messages, non-blocking: at a path, or at
 * an abstract name when name starts with '@' (systemd's own notify socket
 * is one since v254). */
static int notify_socket(const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n = strlen(name);
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_uint_lt(n, sizeof(sa.sun_path));
	memcpy(sa.sun_path, name, n + 1);
	if (name[0] == '@')
		sa.sun_path[0] = '\0';
	else
		len++;
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, len), 0);
	return fd;
}

/* Starts kilnd with lfd as descriptor 3 and nfds in LISTEN_FDS, no
 * --socket; notify (may be NULL) as NOTIFY_SOCKET. */
static pid_t start_activated(int lfd, int nfds, const char *notify)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char n[16], p[32];
		int out = open(harness.out, O_WRONLY | O_CREAT | O_APPEND, 0600);

		if (out < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0 || dup2(lfd, 3) < 0)
			_exit(126);
		if (nfds > 1 && dup2(lfd, 4) < 0)
			_exit(126);
		snprintf(n, sizeof(n), "%d", nfds);
		snprintf(p, sizeof(p), "%d", (int)getpid());
		setenv("LISTEN_FDS", n, 1);
		setenv("LISTEN_PID", p, 1);
		if (notify != NULL)
			setenv("NOTIFY_SOCKET", notify, 1);
		execl(harness_kilnd(), "kilnd", "--cache-dir", harness.cache, "--log-file", harness.log,
		      "--log-level", "debug", (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Waits up to 30 s for status to answer on harness.socket. */
static cJSON *wait_status(pid_t pid)
{
	for (int i = 0; i < 300; i++) {
		char *out = NULL;

		if (harness_cli(&out, NULL, "--json", "status", NULL) == 0) {
			cJSON *st = cJSON_Parse(out);

			free(out);
			return st;
		}
		free(out);
		ck_assert_msg(harness_alive(pid), "the activated kilnd exited");
		harness_sleep_ms(100);
	}
	ck_abort_msg("the activated kilnd did not answer in 30 s");
	return NULL;
}

/* Collects what arrived on the notify socket (NUL-separated messages). */
static void read_notify(int fd, char *buf, size_t len)
{
	size_t have = strlen(buf);
	ssize_t n;

	while (have + 1 < len && (n = recv(fd, buf + have, len - have - 1, 0)) > 0) {
		have += (size_t)n;
		buf[have++] = '\n';
		buf[have] = '\0';
	}
}

START_TEST(passed_socket_is_served_and_kept)
{
	char notify[HARNESS_PATH], msgs[4096] = "", key[72];
	int lfd, nfd, early;
	pid_t pid;
	cJSON *st;

	lfd = listen_at(harness.socket);
	nfd = notify_socket(harness_path(notify, "notify"));
	pid = start_activated(lfd, 1, notify);
	st = wait_status(pid);
	ck_assert_msg(cJSON_IsTrue(cJSON_GetObjectItem(st, "socket_activated")),
		      "status does not say the socket was passed");
	ck_assert_str_eq(harness_str(st, "socket"), harness.socket);
	ck_assert_int_eq(harness_num(st, "pid"), pid);
	cJSON_Delete(st);
	harness_get_program(NULL, "activated", 31, "it:activated", key);
	read_notify(nfd, msgs, sizeof(msgs));
	ck_assert_msg(strstr(msgs, "READY=1") != NULL, "no READY=1 on NOTIFY_SOCKET: %s", msgs);
	{
		char mainpid[32];

		snprintf(mainpid, sizeof(mainpid), "MAINPID=%d", (int)pid);
		ck_assert_msg(strstr(msgs, mainpid) != NULL, "no %s: %s", mainpid, msgs);
	}
	ck_assert_int_eq(harness_cli(NULL, NULL, "stop", NULL), 0);
	ck_assert_int_eq(harness_wait(pid, 30), 0);
	read_notify(nfd, msgs, sizeof(msgs));
	ck_assert_msg(strstr(msgs, "STOPPING=1") != NULL, "no STOPPING=1: %s", msgs);
	/* The socket is systemd's: it stays, and a client that connects while
	 * no kilnd runs is served by the next one. */
	ck_assert_msg(harness_exists(harness.socket), "kilnd removed a socket it did not create");
	early = harness_raw_connect(harness.socket);
	harness_raw_send(early, "{\"op\":\"hello\",\"id\":1,\"proto\":3}");
	pid = start_activated(lfd, 1, NULL);
	{
		cJSON *r = harness_raw_recv(early);

		ck_assert_msg(r != NULL && cJSON_IsTrue(cJSON_GetObjectItem(r, "ok")),
			      "a connection made before the start was not served");
		cJSON_Delete(r);
	}
	close(early);
	{
		struct harness_result r = harness_in_child(NULL, "it:activated");

		ck_assert_msg(r.rc == KILN_OK && r.value == 31, "%s", r.msg);
	}
	ck_assert_int_eq(harness_cli(NULL, NULL, "stop", NULL), 0);
	ck_assert_int_eq(harness_wait(pid, 30), 0);
	close(lfd);
	close(nfd);
}
END_TEST

/* Starts an activated kilnd with NOTIFY_SOCKET=name, a fake service manager
 * listening there (nfd), and checks what a Type=notify unit waits for:
 * READY=1 with MAINPID and STATUS once it serves, STOPPING=1 when it stops. */
static void check_notified(const char *name, int nfd)
{
	char msgs[4096] = "", mainpid[32], status[HARNESS_PATH + 16];
	int lfd = listen_at(harness.socket);
	pid_t pid = start_activated(lfd, 1, name);
	cJSON *st = wait_status(pid);

	cJSON_Delete(st);
	/* READY=1 goes before the loop runs, so it is there once status answers. */
	read_notify(nfd, msgs, sizeof(msgs));
	ck_assert_msg(strstr(msgs, "READY=1") != NULL, "no READY=1 at NOTIFY_SOCKET=%s: '%s'",
		      name, msgs);
	snprintf(mainpid, sizeof(mainpid), "MAINPID=%d", (int)pid);
	ck_assert_msg(strstr(msgs, mainpid) != NULL, "no %s: '%s'", mainpid, msgs);
	snprintf(status, sizeof(status), "STATUS=serving %s", harness.socket);
	ck_assert_msg(strstr(msgs, status) != NULL, "no '%s': '%s'", status, msgs);
	ck_assert_msg(strstr(msgs, "STOPPING=1") == NULL, "STOPPING=1 before the stop: '%s'", msgs);
	ck_assert_int_eq(harness_cli(NULL, NULL, "stop", NULL), 0);
	ck_assert_int_eq(harness_wait(pid, 30), 0);
	read_notify(nfd, msgs, sizeof(msgs));
	ck_assert_msg(strstr(msgs, "STOPPING=1") != NULL, "no STOPPING=1 at %s: '%s'", name, msgs);
	close(lfd);
	unlink(harness.socket);
}

/*
 * What kilnd.service's Type=notify waits for arrives in every build, with
 * libsystemd or without (Spack and EasyBuild builds usually lack it; before,
 * such a kilnd sent nothing and systemd killed it after 90 s): at a
 * NOTIFY_SOCKET path and at an abstract one ('@', systemd's own since v254).
 */
START_TEST(readiness_is_notified_without_libsystemd)
{
	char path[HARNESS_PATH], abstract[64];
	int nfd = notify_socket(harness_path(path, "notify"));

	check_notified(path, nfd);
	close(nfd);
	snprintf(abstract, sizeof(abstract), "@kiln-it-notify-%d", (int)getpid());
	nfd = notify_socket(abstract);
	check_notified(abstract, nfd);
	close(nfd);
}
END_TEST

/* A NOTIFY_SOCKET nobody listens on, or of a kind kilnd does not speak
 * (systemd's vsock: for VMs), is a warning in the log: kilnd serves. */
START_TEST(unreachable_notify_socket_is_a_warning)
{
	const char *names[] = { "/nonexistent/kiln-notify", "vsock:2:1234" };

	for (size_t i = 0; i < 2; i++) {
		int lfd = listen_at(harness.socket);
		pid_t pid = start_activated(lfd, 1, names[i]);
		char *log;

		cJSON_Delete(wait_status(pid));
		ck_assert_int_eq(harness_cli(NULL, NULL, "stop", NULL), 0);
		ck_assert_int_eq(harness_wait(pid, 30), 0);
		log = harness_read_file(harness.log);
		ck_assert_msg(log != NULL && harness_contains(log, "cannot notify the service manager") &&
				      harness_contains(log, names[i]),
			      "no warning about NOTIFY_SOCKET=%s in the log: %s", names[i], log);
		free(log);
		close(lfd);
		unlink(harness.socket);
		unlink(harness.log);
	}
}
END_TEST

/* Two passed sockets, or one that does not listen: refused, with a reason. */
START_TEST(unusable_passed_sockets_are_refused)
{
	int lfd = listen_at(harness.socket), dfd;
	pid_t pid = start_activated(lfd, 2, NULL);
	int status = harness_wait(pid, 30);
	char *out;

	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) != 0, "two sockets were accepted");
	out = harness_read_file(harness.out);
	ck_assert_msg(harness_contains(out, "exactly one"), "output: %s", out);
	free(out);
	close(lfd);

	dfd = socket(AF_UNIX, SOCK_DGRAM, 0);
	pid = start_activated(dfd, 1, NULL);
	status = harness_wait(pid, 30);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) != 0, "a datagram socket was accepted");
	out = harness_read_file(harness.out);
	ck_assert_msg(harness_contains(out, "not a listening Unix stream"), "output: %s", out);
	free(out);
	close(dfd);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("systemd");

	suite_add_tcase(s, harness_tcase("activated", passed_socket_is_served_and_kept, 120));
	suite_add_tcase(s, harness_tcase("unusable", unusable_passed_sockets_are_refused, 60));
	suite_add_tcase(s, harness_tcase("notify", readiness_is_notified_without_libsystemd, 120));
	suite_add_tcase(s, harness_tcase("notify_unreachable", unreachable_notify_socket_is_a_warning,
					 120));
	return harness_main(s);
}
