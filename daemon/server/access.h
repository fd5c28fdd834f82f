/*
 * Who may connect to kilnd and where its socket lives (access.c).
 */
#ifndef KILN_DAEMON_SERVER_ACCESS_H
#define KILN_DAEMON_SERVER_ACCESS_H

#include <stdbool.h>
#include <sys/types.h>

#include "config.h"
#include "msg.h"

/* The daemon's own user may talk to it (DESIGN.md, one daemon per user),
 * and whoever --allow-uid or --allow-group name; root may read its status
 * (*status_only set: a node's metrics are collected as root). 0, -EPERM,
 * or a negative errno when the peer's credentials cannot be read. Sets the
 * peer's uid and pid. */
int access_check_peer(int fd, const struct config *cfg, uid_t *uid, pid_t *pid, bool *status_only);
/* Answers a connection kilnd will not serve with one error, then closes
 * fd. */
void access_refuse(int fd, enum msg_err code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Makes the socket's directory (0700) when it is missing; refuses one that
 * is no directory. 0, or a negative errno with err. */
int access_prepare_dir(const char *path, char *err, size_t errlen);
/* Removes a stale socket at path (main.c holds the socket's lock); anything
 * else there is refused, never removed. 0 or -EEXIST with err. */
int access_clear_socket(const char *path, char *err, size_t errlen);

#endif
