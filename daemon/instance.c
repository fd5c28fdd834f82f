/*
 * Single-instance locking and daemonizing; see instance.h. Locks are flock()s
 * on files that are never removed, so a crashed daemon's lock is released by
 * the kernel and a new daemon takes over its stale socket safely.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "instance.h"
#include "util.h"
#include "wire.h"

#define WAIT_OTHER_MS 10000

static int ready_fd = -1;
static int sock_lock_fd = -1;
static int cache_lock_fd = -1;

void instance_reserve_fds(unsigned n)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	/* systemd's default soft limit is 1024 (for select(), which kilnd
	 * does not use); the descriptor cache takes a quarter of it at most. */
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < INSTANCE_NOFILE) {
		rlim_t want = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < INSTANCE_NOFILE
				      ? rl.rlim_max : INSTANCE_NOFILE;
		struct rlimit up = { .rlim_cur = want, .rlim_max = rl.rlim_max };
		if (want > rl.rlim_cur && setrlimit(RLIMIT_NOFILE, &up) == 0)
			rl.rlim_cur = want;
	}
	if (rl.rlim_cur != RLIM_INFINITY && n > rl.rlim_cur)
		n = (unsigned)rl.rlim_cur;
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	/* The lowest free descriptor at or above n - 1: never one in use. The
	 * table keeps its size when the descriptor is closed. */
	if (n > 0 && (unsigned)fd < n - 1) {
		int hi = fcntl(fd, F_DUPFD_CLOEXEC, (int)(n - 1));
		if (hi >= 0)
			close(hi);
	}
	close(fd);
}

int instance_daemonize(void)
{
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) != 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		close(fds[1]);
		char buf[1024];
		size_t len = 0;
		ssize_t n;
		while (len < sizeof(buf) - 1 && (n = read(fds[0], buf + len, sizeof(buf) - 1 - len)) != 0) {
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				break;
			len += (size_t)n;
		}
		buf[len] = '\0';
		int status = 1;
		long dpid = 0;
		char msg[1024] = "";
		if (sscanf(buf, "%d %ld %1023[^\n]", &status, &dpid, msg) >= 2 && status == 0) {
			if (msg[0] != '\0')
				fprintf(stderr, "kilnd: %s\n", msg);
			printf("%ld\n", dpid);
			exit(0);
		}
		fprintf(stderr, "kilnd: %s\n", msg[0] != '\0' ? msg : "the daemon exited during start-up");
		waitpid(pid, NULL, WNOHANG);
		exit(status == KILND_EXIT_CACHE_IN_USE ? KILND_EXIT_CACHE_IN_USE : 1);
	}
	close(fds[0]);
	ready_fd = fds[1];
	setsid();
	if (chdir("/") != 0)
		return -errno;
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		close(null);
	}
	return 0;
}

bool instance_parent_waits(void)
{
	return ready_fd >= 0;
}

void instance_ready(int status, long pid, const char *msg)
{
	if (ready_fd < 0)
		return;
	char line[1100];
	int n = snprintf(line, sizeof(line), "%d %ld %s\n", status, pid, msg != NULL ? msg : "");
	util_write_all(ready_fd, line, (size_t)n);
	close(ready_fd);
	ready_fd = -1;
	/* The parent has returned; nobody reads the terminal from now on. */
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		close(null);
	}
}

/* Where the locks were taken: removed at the stop (instance_unlock). */
static char sock_lock_path[4200], cache_lock_path[4200];

/* True while path names the file open as fd. */
static bool still_there(int fd, const char *path)
{
	struct stat held, there;
	return fstat(fd, &held) == 0 && lstat(path, &there) == 0 && held.st_dev == there.st_dev &&
	       held.st_ino == there.st_ino;
}

/*
 * The lock files are removed when kilnd stops, so a lock taken on a file
 * that its owner unlinked meanwhile is no lock at all (a third process
 * would make a new file and lock that): after the flock, the file must
 * still be the one at path, else it is opened again.
 */
static int take_lock(const char *path, int *out)
{
	for (int tries = 0; tries < 100; tries++) {
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0)
			return -errno;
		if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
			int e = errno;
			close(fd);
			return e == EWOULDBLOCK ? 1 : -e;
		}
		if (still_there(fd, path)) {
			*out = fd;
			return 0;
		}
		close(fd);
	}
	return -EAGAIN;
}

static void write_owner(int fd, const struct config *cfg)
{
	char buf[8400];
	int n = snprintf(buf, sizeof(buf), "%ld\n%s\n%s\n", (long)getpid(), cfg->socket_path, cfg->cache_dir);
	if (ftruncate(fd, 0) == 0)
		(void)!pwrite(fd, buf, (size_t)n, 0);
}

/* Reads who holds a lock file: pid, socket path and cache directory. */
static void read_owner(const char *path, long *pid, char *sock, size_t socklen, char *cache,
		       size_t cachelen)
{
	char buf[8400] = "";
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		buf[n > 0 ? n : 0] = '\0';
		close(fd);
	}
	*pid = strtol(buf, NULL, 10);
	sock[0] = cache[0] = '\0';
	char *line = strchr(buf, '\n');
	char *out[2] = { sock, cache };
	size_t len[2] = { socklen, cachelen };
	for (int i = 0; i < 2 && line != NULL; i++) {
		line++;
		char *end = strchr(line, '\n');
		if (end == NULL)
			break;
		*end = '\0';
		snprintf(out[i], len[i], "%s", line);
		line = end;
	}
}

/* Whether two paths name one file (the same text, or one inode). */
static bool same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	if (strcmp(a, b) == 0)
		return true;
	return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

/*
 * The lock at path is held. Either its owner serves (its socket accepts: report
 * it, so that whoever started us can connect as soon as we return), or it is
 * on its way out (a stop in progress releases the lock a moment after the
 * socket goes): keep trying the lock, and take over once it is free. Returns
 * 0 with *fd set when we got the lock, 1 with msg when another kilnd serves.
 */
static int wait_lock_or_owner(const char *path, int *fd, const char *what,
			      const struct config *cfg, long *other_pid, char *msg, size_t msglen)
{
	char sock[4200] = "", cache[4200] = "";
	long pid = 0;
	for (int waited = 0; waited < WAIT_OTHER_MS; waited += 20) {
		int rc = take_lock(path, fd);
		if (rc <= 0)
			return rc;
		read_owner(path, &pid, sock, sizeof(sock), cache, sizeof(cache));
		int s = wire_connect(sock[0] != '\0' ? sock : cfg->socket_path);
		if (s >= 0) {
			close(s);
			*other_pid = pid;
			if (sock[0] != '\0' && !same_file(sock, cfg->socket_path)) {
				/* Serving, but not where we were asked to: the
				 * caller would wait for a socket that never comes. */
				snprintf(msg, msglen, "the %s %s is served by kilnd pid %ld on socket "
					 "%s, not %s; use that socket (KILN_SOCKET=%s), or another "
					 "--cache-dir", what, cfg->cache_dir, pid, sock, cfg->socket_path,
					 sock);
				return -EADDRINUSE;
			}
			if (cache[0] != '\0' && !same_file(cache, cfg->cache_dir)) {
				/* Our socket, another cache: not the daemon asked for. */
				snprintf(msg, msglen, "the %s %s is served by kilnd pid %ld with cache "
					 "directory %s, not %s; stop it first, or use another --socket",
					 what, cfg->socket_path, pid, cache, cfg->cache_dir);
				return -EADDRINUSE;
			}
			snprintf(msg, msglen, "kilnd is already running on this %s (pid %ld, socket %s)",
				 what, pid, sock[0] != '\0' ? sock : cfg->socket_path);
			return 1;
		}
		struct timespec ts = { 0, 20 * 1000000 };
		nanosleep(&ts, NULL);
	}
	*other_pid = pid;
	snprintf(msg, msglen, "kilnd pid %ld holds the lock of this %s but its socket %s does not "
		 "answer", pid, what, sock[0] != '\0' ? sock : cfg->socket_path);
	return -EBUSY;
}

/* Removes a lock file while still holding it (only ours), then lets go. */
static void drop_lock(int *fd, const char *path)
{
	if (*fd < 0)
		return;
	if (path[0] != '\0' && still_there(*fd, path))
		unlink(path);
	close(*fd);
	*fd = -1;
}

int instance_lock(const struct config *cfg, long *other_pid, char *msg, size_t msglen)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s.lock", cfg->socket_path);
	int rc = take_lock(path, &sock_lock_fd);
	if (rc == 1)
		rc = wait_lock_or_owner(path, &sock_lock_fd, "socket", cfg, other_pid, msg, msglen);
	if (rc == 1)
		return 1;
	if (rc < 0) {
		if (rc != -EBUSY && rc != -EADDRINUSE)
			snprintf(msg, msglen, "cannot lock %s: %s", path, strerror(-rc));
		return rc;
	}
	snprintf(path, sizeof(path), "%s/kilnd.lock", cfg->cache_dir);
	rc = take_lock(path, &cache_lock_fd);
	/* A new directory another kilnd's failed start removed again just
	 * after we made it (main.c, remove_new_cache): made once more. */
	for (int tries = 0; rc == -ENOENT && tries < 3; tries++)
		if (util_mkdir_p(cfg->cache_dir, 0700) == 0)
			rc = take_lock(path, &cache_lock_fd);
	if (rc == 1)
		rc = wait_lock_or_owner(path, &cache_lock_fd, "cache directory", cfg, other_pid, msg,
					msglen);
	if (rc != 0) {
		if (rc < 0 && rc != -EBUSY && rc != -EADDRINUSE)
			snprintf(msg, msglen, "cannot lock %s: %s", path, strerror(-rc));
		snprintf(sock_lock_path, sizeof(sock_lock_path), "%s.lock", cfg->socket_path);
		drop_lock(&sock_lock_fd, sock_lock_path);
		/* The cache is served on another socket: another job of this
		 * user on this node. Its own answer (exit 3), so that a job's
		 * prologue can tell it from a failure and take a cache of its own. */
		return rc == -EADDRINUSE ? INSTANCE_CACHE_IN_USE : rc;
	}
	write_owner(sock_lock_fd, cfg);
	write_owner(cache_lock_fd, cfg);
	snprintf(sock_lock_path, sizeof(sock_lock_path), "%s.lock", cfg->socket_path);
	snprintf(cache_lock_path, sizeof(cache_lock_path), "%s", path);
	return 0;
}

bool instance_cache_lock_intact(int cache_dir_fd)
{
	struct stat held, there;
	return cache_lock_fd >= 0 && fstat(cache_lock_fd, &held) == 0 &&
	       fstatat(cache_dir_fd, "kilnd.lock", &there, AT_SYMLINK_NOFOLLOW) == 0 &&
	       held.st_dev == there.st_dev && held.st_ino == there.st_ino;
}

int instance_relock_cache(const struct config *cfg, long *other_pid, char *msg, size_t msglen)
{
	char path[4200];
	struct stat held, there;
	int fd = -1;
	snprintf(path, sizeof(path), "%s/kilnd.lock", cfg->cache_dir);
	/* Our lock is already the one there (an earlier attempt got this far). */
	if (cache_lock_fd >= 0 && fstat(cache_lock_fd, &held) == 0 && stat(path, &there) == 0 &&
	    held.st_dev == there.st_dev && held.st_ino == there.st_ino)
		return 0;
	int rc = take_lock(path, &fd);
	if (rc == 1) {
		char sock[4200] = "", cache[4200] = "";
		read_owner(path, other_pid, sock, sizeof(sock), cache, sizeof(cache));
		snprintf(msg, msglen, "kilnd pid %ld (socket %s) has taken the new directory",
			 *other_pid, sock);
		return 1;
	}
	if (rc < 0) {
		snprintf(msg, msglen, "cannot lock %s: %s", path, strerror(-rc));
		return rc;
	}
	if (cache_lock_fd >= 0)
		close(cache_lock_fd);
	cache_lock_fd = fd;
	write_owner(cache_lock_fd, cfg);
	snprintf(cache_lock_path, sizeof(cache_lock_path), "%s", path);
	return 0;
}

void instance_unlock(void)
{
	drop_lock(&cache_lock_fd, cache_lock_path);
	drop_lock(&sock_lock_fd, sock_lock_path);
}
