/*
 * Who may connect to kilnd and where its socket lives (access.h): the
 * peer's credentials against the daemon's own user and --allow-uid/-group,
 * the one error a refused connection gets, and the socket's directory and
 * path made safe before listening.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "access.h"
#include "frame.h"
#include "msg.h"
#include "util.h"
#include "wire.h"

static bool id_listed(unsigned id, const unsigned *ids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}

/* Whether the peer's groups (SO_PEERGROUPS: the supplementary groups it had
 * when it connected, no name service lookup) include an allowed group. */
static bool peer_in_group(int fd, const struct config *cfg, gid_t gid)
{
	gid_t groups[256];
	socklen_t len = sizeof(groups);
	if (id_listed(gid, cfg->allow_gids, cfg->nallow_gids))
		return true;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) != 0)
		return false;
	for (size_t i = 0; i < len / sizeof(gid_t); i++)
		if (id_listed(groups[i], cfg->allow_gids, cfg->nallow_gids))
			return true;
	return false;
}

/* The daemon's own user may talk to it (DESIGN.md, one daemon per user),
 * and whoever --allow-uid or --allow-group name. */
int access_check_peer(int fd, const struct config *cfg, uid_t *uid, pid_t *pid, bool *status_only)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	*status_only = false;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
		return -errno;
	*uid = cred.uid;
	*pid = cred.pid;
	/* kilnd never changes its user: asked once, not a system call per
	 * connection (a fresh process's get waits on this path). */
	static uid_t self = (uid_t)-1;
	if (self == (uid_t)-1)
		self = geteuid();
	if (cred.uid == self || id_listed(cred.uid, cfg->allow_uids, cfg->nallow_uids))
		return 0;
	if (cfg->nallow_gids > 0 && peer_in_group(fd, cfg, cred.gid))
		return 0;
	/* Root can read everything of this user's anyway: it may read the
	 * status (node metrics, an operator's look), and nothing else. */
	if (cred.uid == 0) {
		*status_only = true;
		return 0;
	}
	return -EPERM;
}

/* Answers a connection kilnd will not serve with one error, then closes it. */
void access_refuse(int fd, enum msg_err code, const char *fmt, ...)
{
	struct msg_error err = { .code = code };
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err.message, sizeof(err.message), fmt, ap);
	va_end(ap);
	cJSON *r = msg_error_reply(0, &err);
	char *json = r != NULL ? cJSON_PrintUnformatted(r) : NULL;
	size_t len;
	char *frame = json != NULL ? frame_encode(json, strlen(json), &len) : NULL;
	if (frame != NULL)
		(void)wire_sendmsg(fd, frame, len, -1);
	free(frame);
	free(json);
	cJSON_Delete(r);
	close(fd);
}

/* The socket's directory must be ours and private: the socket is the only
 * gate in front of a daemon that runs compilers. */
int access_prepare_dir(const char *path, char *err, size_t errlen)
{
	char *dir = strdup(path);
	if (dir == NULL)
		return -ENOMEM;
	char *slash = strrchr(dir, '/');
	int rc = 0;
	if (slash != NULL && slash != dir) {
		*slash = '\0';
		struct stat st;
		if (stat(dir, &st) != 0) {
			rc = util_mkdir_p(dir, 0700);
			if (rc != 0)
				snprintf(err, errlen, "cannot create socket directory %s: %s", dir, strerror(-rc));
		} else if (!S_ISDIR(st.st_mode)) {
			snprintf(err, errlen, "%s is not a directory", dir);
			rc = -ENOTDIR;
		}
	}
	free(dir);
	return rc;
}

/* main.c holds the socket's lock: a socket left at path belongs to a dead
 * daemon and goes. Anything else is the user's: refused, never removed. */
int access_clear_socket(const char *path, char *err, size_t errlen)
{
	struct stat st;
	if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
		snprintf(err, errlen, "%s exists and is %s, not a socket; kilnd only replaces a stale "
			 "socket: choose another --socket, or remove it yourself", path,
			 S_ISDIR(st.st_mode) ? "a directory" : S_ISLNK(st.st_mode) ? "a symbolic link"
			 : S_ISREG(st.st_mode) ? "a regular file" : "a special file");
		return -EEXIST;
	}
	unlink(path);
	return 0;
}
