/*
 * systemd integration: the listening socket of socket activation
 * (LISTEN_FDS), and readiness notification (sd_notify, with libsystemd when
 * kiln is built with it: meson -Dsystemd).
 */
#ifndef KILN_DAEMON_SDNOTIFY_H
#define KILN_DAEMON_SDNOTIFY_H

#include <stddef.h>

/*
 * The listening socket systemd passed to this process, or -1 when there is
 * none; -2 with a sentence in err when what was passed is unusable (not
 * exactly one listening AF_UNIX stream socket with a path). *path gets the
 * socket's path (malloc'd). Unsets LISTEN_PID, LISTEN_FDS and
 * LISTEN_FDNAMES, so that compilers do not inherit them.
 */
int sd_activation_socket(char **path, char *err, size_t errlen);

/* Tells the service manager kilnd is ready (READY=1, MAINPID, STATUS), or
 * stopping (STOPPING=1). No-ops without NOTIFY_SOCKET or libsystemd. */
void sd_ready(const char *status);
void sd_stopping(void);

#endif
