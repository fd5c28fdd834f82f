/*
 * kiln-observe.so's paths (observe_path.h): a path of a hooked call made
 * absolute, and what it names under /proc and /dev resolved in the
 * process that used it. Part of the interposer: no allocation, raw
 * syscalls only (nothing here may pass through the hooks).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "observe_path.h"

static bool under(const char *path, const char *root)
{
	size_t n = strlen(root);
	return strncmp(path, root, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

/* The walk stops: path becomes the resolved part out (o bytes) followed
 * by the rest s as written, when it fits in cap. */
static void keep_rest(char *path, size_t cap, char *out, size_t o, const char *s)
{
	if (o + strlen(s) >= cap)
		return;
	memcpy(out + o, s, strlen(s) + 1);
	memcpy(path, out, strlen(out) + 1);
}

/* "/proc/<digits>" (not this process, which is spelled /proc/self). */
static bool other_process(const char *p)
{
	if (strncmp(p, "/proc/", 6) != 0 || p[6] == '\0')
		return false;
	for (p += 6; *p != '\0'; p++)
		if (*p < '0' || *p > '9')
			return false;
	return true;
}

/*
 * Resolves what a path under /proc or /dev names in this process, so that
 * the record names the file itself, valid in kilnd too: the magic links
 * of /proc (/proc/self/root, cwd, exe, fd/N, /proc/<pid>/...) and the
 * links of /dev into /proc (/dev/fd, /dev/stdin) are read with readlink,
 * and ".." is applied by text where everything before it was found to be
 * no symlink ("/dev/../x" is "/x"). The walk stops as soon as the path has
 * left /proc and /dev, or at an ordinary symlink under /dev (/dev/shm/link,
 * which may be flipped later): from there on, kilnd resolves the path as
 * the kernel did here. "/proc/<own pid>" is spelled
 * "/proc/self", which kilnd classifies (daemon/flight/pseudo.c). A link
 * that names no path (a pipe, a socket, a deleted file) stays as it is:
 * kilnd counts such a pseudo-file as an input it cannot trust. path has
 * cap bytes; no allocation.
 */
static void unmagic(char *path, size_t cap)
{
	char out[PATH_MAX], tgt[PATH_MAX], self[32];
	snprintf(self, sizeof(self), "/proc/%d", (int)getpid());
	for (int hops = 0; hops < 16 && (under(path, "/proc") || under(path, "/dev")); hops++) {
		size_t o = 0;
		const char *s = path;
		bool restart = false;
		out[0] = '\0';
		while (*s != '\0' && !restart) {
			while (*s == '/')
				s++;
			size_t n = strcspn(s, "/");
			if (n == 0 || (n == 1 && s[0] == '.')) {
				s += n;
				continue;
			}
			if (n == 2 && s[0] == '.' && s[1] == '.') {
				while (o > 0 && out[o - 1] != '/')
					o--;
				if (o > 0)
					o--;
				out[o] = '\0';
				s += n;
			} else {
				if (o + 1 + n >= sizeof(out))
					return;
				out[o++] = '/';
				memcpy(out + o, s, n);
				o += n;
				out[o] = '\0';
				s += n;
				if (strcmp(out, self) == 0) {
					snprintf(out, sizeof(out), "/proc/self");
					o = strlen(out);
				}
			}
			if (!(under(out, "/proc") || under(out, "/dev")) && o > 0) {
				/* Left /proc and /dev: the rest as written. */
				keep_rest(path, cap, out, o, s);
				return;
			}
			if (strcmp(out, "/proc/self") == 0 || strcmp(out, "/proc/thread-self") == 0)
				continue;
			if (other_process(out)) {
				/* Another process's links (/proc/<pid>/cwd) may point
				 * elsewhere later: kept as written, and kilnd counts
				 * them as pseudo-files (uncacheable). */
				keep_rest(path, cap, out, o, s);
				return;
			}
			long t = syscall(SYS_readlinkat, AT_FDCWD, out, tgt, sizeof(tgt) - 1);
			if (t <= 0)
				continue; /* no symlink (or no such path): go on */
			tgt[t] = '\0';
			size_t tl = (size_t)t;
			if (tgt[0] != '/' && strchr(tgt, ':') != NULL)
				return; /* "pipe:[42]", "anon_inode:...": no path */
			if (tl > 10 && strcmp(tgt + tl - 10, " (deleted)") == 0)
				return;
			char next[PATH_MAX];
			int w;
			if (tgt[0] == '/') {
				w = snprintf(next, sizeof(next), "%s%s", tgt, s);
			} else {
				size_t d = o;
				while (d > 0 && out[d - 1] != '/')
					d--;
				w = snprintf(next, sizeof(next), "%.*s%s%s", (int)d, out, tgt, s);
			}
			if (!under(out, "/proc") && w > 0 && !under(next, "/proc")) {
				/* An ordinary symlink under /dev (not into /proc): kept as
				 * written, so that kilnd sees it flip. */
				keep_rest(path, cap, out, o, s);
				return;
			}
			if (w < 0 || (size_t)w >= cap || (size_t)w >= sizeof(next))
				return;
			memcpy(path, next, (size_t)w + 1);
			restart = true;
		}
		if (!restart) {
			if (o == 0)
				snprintf(out, sizeof(out), "/");
			memcpy(path, out, strlen(out) + 1);
			return;
		}
	}
}

static bool absolute_as_written(int dirfd, const char *path, char *out, size_t cap)
{
	if (path == NULL)
		return false;
	if (path[0] == '/') {
		size_t n = strlen(path);
		if (n >= cap)
			return false;
		memcpy(out, path, n + 1);
		return true;
	}
	size_t dl;
	if (dirfd == AT_FDCWD) {
		if (getcwd(out, cap) == NULL)
			return false;
		dl = strlen(out);
	} else {
		char link[64];
		snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
		ssize_t n = syscall(SYS_readlinkat, AT_FDCWD, link, out, cap - 1);
		if (n <= 0)
			return false;
		dl = (size_t)n;
		out[dl] = '\0';
	}
	size_t pl = strlen(path);
	if (dl + 1 + pl + 1 > cap)
		return false;
	out[dl] = '/';
	memcpy(out + dl + 1, path, pl + 1);
	return true;
}

/* "//" and "/./" are "/" whatever the path names: squashed in place, so
 * that "//proc/self/..." or "/./proc/..." is seen as under /proc. */
static void squash(char *p)
{
	char *w = p;
	for (const char *r = p; *r != '\0';) {
		if (r[0] == '/' && (r[1] == '/' || (r[1] == '.' && (r[2] == '/' || r[2] == '\0')))) {
			r += r[1] == '/' ? 1 : 2;
			continue;
		}
		*w++ = *r++;
	}
	if (w == p)
		*w++ = '/';
	*w = '\0';
}

bool observe_absolute(int dirfd, const char *path, char *out, size_t cap, bool *resolved)
{
	if (resolved != NULL)
		*resolved = false;
	if (!absolute_as_written(dirfd, path, out, cap))
		return false;
	squash(out);
	if (under(out, "/proc") || under(out, "/dev")) {
		/* The toolchain sees the errno of its own call, not of ours. */
		int saved = errno;
		char before[PATH_MAX];
		snprintf(before, sizeof(before), "%s", out);
		unmagic(out, cap);
		if (resolved != NULL)
			*resolved = strcmp(before, out) != 0;
		errno = saved;
	}
	return true;
}
