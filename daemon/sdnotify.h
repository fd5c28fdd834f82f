/*
 * systemd integration: the listening socket of socket activation
 * (LISTEN_FDS), and readiness notification (the sd_notify datagram to
 * $NOTIFY_SOCKET), both without libsystemd.
 */
#ifndef KILN_DAEMON_SDNOTIFY_H
#define KILN_DAEMON_SDNOTIFY_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

/*
 * The listening socket systemd passed to this process, or -1 when there is
 * none; -2 with a sentence in err when what was passed is unusable (not
 * exactly one listening AF_UNIX stream socket with a path). *path gets the
 * socket's path (malloc'd). Unsets LISTEN_PID, LISTEN_FDS and
 * LISTEN_FDNAMES, so that compilers do not inherit them.
 */
int sd_activation_socket(char **path, char *err, size_t errlen);

/*
 * The address of a $NOTIFY_SOCKET value into sa and len: a path, or an
 * abstract name when it starts with '@' (the '@' becomes the leading NUL).
 * 0, -ENAMETOOLONG, or -EAFNOSUPPORT for anything else (systemd's vsock:
 * addresses, for VMs, are not supported).
 */
int sd_notify_addr(const char *name, struct sockaddr_un *sa, socklen_t *len);

/* Tells the service manager kilnd is ready (READY=1, MAINPID, STATUS), or
 * stopping (STOPPING=1): one datagram each to $NOTIFY_SOCKET, as
 * sd_notify(3) does; no-ops without NOTIFY_SOCKET. A failure is logged as a
 * warning. Loop thread (it never blocks). */
void sd_ready(const char *status);
void sd_stopping(void);

#endif
