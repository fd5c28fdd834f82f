/*
 * Socket activation follows sd_listen_fds(3): the descriptors start at 3,
 * LISTEN_PID must be this process. The check is done here rather than with
 * libsystemd so that activation works in builds without it (and in tests
 * that pass a socket the way systemd does). Notification uses sd_notify(3).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#ifdef KILN_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "sdnotify.h"

#define LISTEN_FDS_START 3

static void unset_listen_env(void)
{
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
}

int sd_activation_socket(char **path, char *err, size_t errlen)
{
	const char *spid = getenv("LISTEN_PID"), *sfds = getenv("LISTEN_FDS");
	*path = NULL;
	if (spid == NULL || sfds == NULL)
		return -1;
	char *end;
	long pid = strtol(spid, &end, 10);
	if (*end != '\0' || pid != (long)getpid())
		return -1;   /* meant for another process */
	long n = strtol(sfds, &end, 10);
	unset_listen_env();
	if (*end != '\0' || n != 1) {
		snprintf(err, errlen, "systemd passed %s sockets (LISTEN_FDS); kilnd takes exactly one: "
			 "one ListenStream= in kilnd.socket", sfds);
		return -2;
	}
	int fd = LISTEN_FDS_START, type = 0, listening = 0;
	socklen_t len = sizeof(type);
	struct sockaddr_un sa;
	socklen_t salen = sizeof(sa);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM ||
	    (len = sizeof(listening), getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len)) != 0 ||
	    !listening || getsockname(fd, (struct sockaddr *)&sa, &salen) != 0 ||
	    sa.sun_family != AF_UNIX || salen <= sizeof(sa_family_t) || sa.sun_path[0] != '/') {
		snprintf(err, errlen, "the socket systemd passed is not a listening Unix stream "
			 "socket with a path (ListenStream=/path in kilnd.socket)");
		return -2;
	}
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	size_t plen = strnlen(sa.sun_path, sizeof(sa.sun_path));
	*path = strndup(sa.sun_path, plen);
	if (*path == NULL) {
		snprintf(err, errlen, "out of memory");
		return -2;
	}
	return fd;
}

#ifdef KILN_HAVE_SYSTEMD
void sd_ready(const char *status)
{
	sd_notifyf(0, "READY=1\nMAINPID=%ld\nSTATUS=%s", (long)getpid(), status);
}

void sd_stopping(void)
{
	sd_notify(0, "STOPPING=1");
}

#else
void sd_ready(const char *status)
{
	(void)status;
}

void sd_stopping(void)
{
}

#endif
