/*
 * Socket activation follows sd_listen_fds(3): the descriptors start at 3,
 * LISTEN_PID must be this process. Notification follows sd_notify(3): one
 * datagram to the AF_UNIX socket $NOTIFY_SOCKET names. Both are done here
 * rather than with libsystemd, so that builds without it (Spack, EasyBuild)
 * behave as the units' Type=notify expects: the protocol is small and
 * stable, systemd documents it for reimplementation, and OpenSSH 9.8 does
 * the same. One code path, tested in every build (it_systemd).
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
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

int sd_notify_addr(const char *name, struct sockaddr_un *sa, socklen_t *len)
{
	size_t n = strlen(name);

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (name[0] == '@') {
		/* An abstract name: a leading NUL, and no NUL at the end; the
		 * address is exactly as long as the name. */
		if (n < 2 || n > sizeof(sa->sun_path))
			return -ENAMETOOLONG;
		memcpy(sa->sun_path, name, n);
		sa->sun_path[0] = '\0';
		*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
		return 0;
	}
	if (name[0] != '/')
		return -EAFNOSUPPORT;   /* vsock:CID:PORT (VMs) is not spoken here */
	if (n >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	memcpy(sa->sun_path, name, n + 1);
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
	return 0;
}

/*
 * Sends text as one datagram to $NOTIFY_SOCKET, if set. The socket does not
 * block: a service manager that does not read its queue must not stall
 * kilnd's loop; a message that cannot go is logged instead.
 */
static void notify(const char *text)
{
	const char *name = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa;
	socklen_t salen;
	int rc, fd = -1;

	if (name == NULL || name[0] == '\0')
		return;
	rc = sd_notify_addr(name, &sa, &salen);
	if (rc == 0 && (fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0)
		rc = -errno;
	if (rc == 0 && sendto(fd, text, strlen(text), MSG_NOSIGNAL, (struct sockaddr *)&sa,
			      salen) < 0)
		rc = -errno;
	if (fd >= 0)
		close(fd);
	if (rc != 0)
		log_warn("cannot notify the service manager at NOTIFY_SOCKET=%s: %s", name,
			 strerror(-rc));
}

void sd_ready(const char *status)
{
	char text[1024];

	snprintf(text, sizeof(text), "READY=1\nMAINPID=%ld\nSTATUS=%s", (long)getpid(), status);
	notify(text);
}

void sd_stopping(void)
{
	notify("STOPPING=1");
}
