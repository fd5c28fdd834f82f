/*
 * Small helpers shared by the daemon, libkiln and the CLI: human sizes and
 * ages, the default socket and cache paths, directories, whole-file reads and
 * hex. Digests live in digest.c.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


#include "util.h"

/* Fractional digits beyond this many cannot change a byte count. */
#define FRAC_DIGITS_MAX 18

/* Returns the shift of a binary unit letter, or -1 when c is not one. */
static int unit_shift(char c)
{
	switch (toupper((unsigned char)c)) {
	case 'K': return 10;
	case 'M': return 20;
	case 'G': return 30;
	case 'T': return 40;
	case 'P': return 50;
	case 'E': return 60;
	default: return -1;
	}
}

int util_parse_size(const char *s, uint64_t *out)
{
	uint64_t whole = 0, frac = 0, scale = 1, val;
	unsigned __int128 part;
	int shift = 0;
	size_t nfrac = 0;
	const char *p = s;

	if (!s || !(*p >= '0' && *p <= '9'))
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		uint64_t digit = (uint64_t)(*p - '0');

		if (whole > (UINT64_MAX - digit) / 10)
			return -ERANGE;
		whole = whole * 10 + digit;
	}
	if (*p == '.') {
		p++;
		if (!(*p >= '0' && *p <= '9'))
			return -EINVAL;
		for (; *p >= '0' && *p <= '9'; p++) {
			if (nfrac++ < FRAC_DIGITS_MAX) {
				frac = frac * 10 + (uint64_t)(*p - '0');
				scale *= 10;
			}
		}
	}
	if (*p && unit_shift(*p) >= 0)
		shift = unit_shift(*p++);
	/* "B" may follow a number or a unit; "iB" only a unit, as in "GiB". */
	if (shift && (*p == 'i' || *p == 'I') && (p[1] == 'b' || p[1] == 'B'))
		p += 2;
	else if (*p == 'b' || *p == 'B')
		p++;
	if (*p)
		return -EINVAL;

	if (shift && whole > UINT64_MAX >> shift)
		return -ERANGE;
	val = whole << shift;
	/* The fraction times the unit fits easily in 128 bits; bytes below one
	 * are dropped, as a size cannot hold part of a byte. */
	part = (unsigned __int128)frac * ((uint64_t)1 << shift) / scale;
	if (val > UINT64_MAX - (uint64_t)part)
		return -ERANGE;
	*out = val + (uint64_t)part;
	return 0;
}

char *util_format_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v;
	int u = 0;

	if (!len)
		return buf;
	if (bytes < 1024) {
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
		return buf;
	}
	v = (double)bytes / 1024.0;
	/* Step up while one decimal would round to 1024 or more, so that
	 * 1048575 bytes reads "1 MiB" and not "1024.0 KiB". */
	while (v >= 1023.95 && u < 5) {
		v /= 1024.0;
		u++;
	}
	if (v - (double)(uint64_t)v < 0.05 || (double)(uint64_t)v + 1 - v < 0.05)
		snprintf(buf, len, "%.0f %s", v, units[u]);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
}

char *util_format_age(int64_t seconds, char *buf, size_t len)
{
	if (!len)
		return buf;
	/* A time in the future is clock skew between hosts; show it as now. */
	if (seconds < 0)
		seconds = 0;
	if (seconds < 60)
		snprintf(buf, len, "%llds", (long long)seconds);
	else if (seconds < 3600)
		snprintf(buf, len, "%lldm", (long long)(seconds / 60));
	else if (seconds < 86400)
		snprintf(buf, len, "%lldh", (long long)(seconds / 3600));
	else
		snprintf(buf, len, "%lldd", (long long)(seconds / 86400));
	return buf;
}

/* An environment variable that is set and not empty, or NULL. The XDG base
 * directory spec says relative paths in its variables must be ignored. */
static const char *env_path(const char *name, int absolute)
{
	const char *v = getenv(name);

	if (!v || !*v || (absolute && v[0] != '/'))
		return NULL;
	return v;
}

/* XDG_RUNTIME_DIR when it names a directory of this user: under su, sudo
 * and in batch jobs it is often inherited from another session and missing. */
static const char *runtime_dir(void)
{
	const char *v = env_path("XDG_RUNTIME_DIR", 1);
	struct stat st;

	if (!v || stat(v, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid())
		return NULL;
	return v;
}

const char *util_runtime_dir_ignored(void)
{
	const char *v = env_path("XDG_RUNTIME_DIR", 1);
	return v != NULL && runtime_dir() == NULL && !env_path("KILN_SOCKET", 0) ? v : NULL;
}

char *util_default_socket(void)
{
	const char *v;
	char *s = NULL;

	if ((v = env_path("KILN_SOCKET", 0)))
		return strdup(v);
	if ((v = runtime_dir())) {
		if (asprintf(&s, "%s/kiln/kilnd.sock", v) < 0)
			return NULL;
		return s;
	}
	if (asprintf(&s, "/tmp/kiln-%u/kilnd.sock", (unsigned)getuid()) < 0)
		return NULL;
	return s;
}

/* The home directory from the password database, for when HOME is unset
 * (batch systems and daemons started by init do that). malloc'd or NULL. */
static char *home_from_passwd(void)
{
	struct passwd pw, *res = NULL;
	long sz = sysconf(_SC_GETPW_R_SIZE_MAX);
	char *buf, *home = NULL;

	if (sz <= 0)
		sz = 16384;
	buf = malloc((size_t)sz);
	if (!buf)
		return NULL;
	if (getpwuid_r(getuid(), &pw, buf, (size_t)sz, &res) == 0 && res &&
	    res->pw_dir && res->pw_dir[0] == '/')
		home = strdup(res->pw_dir);
	free(buf);
	return home;
}

char *util_default_cache_dir(void)
{
	const char *v;
	char *home = NULL, *s = NULL;

	if ((v = env_path("KILN_CACHE_DIR", 0)))
		return strdup(v);
	if ((v = env_path("XDG_CACHE_HOME", 1))) {
		if (asprintf(&s, "%s/kiln", v) < 0)
			return NULL;
		return s;
	}
	if ((v = env_path("HOME", 0)))
		home = strdup(v);
	else
		home = home_from_passwd();
	if (!home)
		return NULL;
	if (asprintf(&s, "%s/.cache/kiln", home) < 0)
		s = NULL;
	free(home);
	return s;
}

/* Creates one directory; an existing directory is fine. */
static int mkdir_one(const char *dir, unsigned mode)
{
	struct stat st;

	if (mkdir(dir, (mode_t)mode) == 0)
		return 0;
	if (errno != EEXIST)
		return -errno;
	if (stat(dir, &st) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

int util_mkdir_p(const char *dir, unsigned mode)
{
	char *copy, *p;
	int rc = 0;

	if (!dir || !*dir)
		return -EINVAL;
	copy = strdup(dir);
	if (!copy)
		return -ENOMEM;
	/* Create each parent in turn; "a//b" and a trailing '/' are harmless
	 * because an empty component is skipped. */
	for (p = copy + 1; *p; p++) {
		if (*p != '/' || p[-1] == '/')
			continue;
		*p = '\0';
		rc = mkdir_one(copy, mode);
		*p = '/';
		if (rc < 0)
			goto cleanup;
	}
	rc = mkdir_one(copy, mode);
cleanup:
	free(copy);
	return rc;
}

int util_write_new_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	int rc;

	if (fd < 0)
		return -errno;
	rc = util_write_all(fd, data, len);
	if (close(fd) != 0 && rc == 0)
		rc = -errno;
	return rc;
}

int util_mkdir_parents_at(int dirfd, const char *base, const char *name, unsigned mode)
{
	char path[4096];

	for (const char *slash = strchr(name, '/'); slash != NULL; slash = strchr(slash + 1, '/')) {
		int n = snprintf(path, sizeof(path), "%s/%.*s", base, (int)(slash - name), name);
		if (n < 0 || (size_t)n >= sizeof(path))
			return -ENAMETOOLONG;
		if (mkdirat(dirfd, path, (mode_t)mode) != 0 && errno != EEXIST)
			return -errno;
	}
	return 0;
}

/* util_replace_file_at, and with mode >= 0 the file set to mode before the
 * rename (util_replace_file_mode_at). */
static int replace_file(int dirfd, const char *name, const void *data, size_t len, bool durable,
			int mode)
{
	static atomic_uint seq;
	char tmp[4096], dir[4096];
	int n = snprintf(tmp, sizeof(tmp), "%s.tmp%d.%u", name, (int)getpid(),
			 atomic_fetch_add(&seq, 1));

	if (n < 0 || (size_t)n >= sizeof(tmp))
		return -ENAMETOOLONG;
	int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	int rc = util_write_all(fd, data, len);
	/* fchmod, not the open's mode: the umask must not take bits away. */
	if (rc == 0 && mode >= 0 && fchmod(fd, (mode_t)mode) != 0)
		rc = -errno;
	if (rc == 0 && durable && fsync(fd) != 0)
		rc = -errno;
	/* close() reports deferred write errors (NFS, quota). */
	if (close(fd) != 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && renameat(dirfd, tmp, dirfd, name) != 0)
		rc = -errno;
	if (rc != 0) {
		unlinkat(dirfd, tmp, 0);
		return rc;
	}
	if (!durable)
		return 0;
	/* The directory that holds name: "." for a bare name. */
	const char *slash = strrchr(name, '/');
	if (slash == NULL)
		return util_fsync_dir_at(dirfd, ".");
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - name) + (slash == name), name);
	return util_fsync_dir_at(dirfd, dir);
}

int util_replace_file_at(int dirfd, const char *name, const void *data, size_t len,
			 bool durable)
{
	return replace_file(dirfd, name, data, len, durable, -1);
}

int util_replace_file_mode_at(int dirfd, const char *name, const void *data, size_t len,
			      bool durable, unsigned mode)
{
	return replace_file(dirfd, name, data, len, durable, (int)(mode & 07777));
}

int util_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	ssize_t n;

	while (len > 0) {
		n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* read(2) that retries when a signal interrupts it. Returns the byte count,
 * 0 at the end of the file, or a negative errno. */
ssize_t util_read_retry(int fd, void *buf, size_t len)
{
	ssize_t n;

	do {
		n = read(fd, buf, len);
	} while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

int util_read_file(const char *path, size_t max, char **out, size_t *outlen)
{
	return util_read_file_at(AT_FDCWD, path, max, out, outlen);
}

int util_read_file_at(int dirfd, const char *path, size_t max, char **out, size_t *outlen)
{
	struct stat st;
	size_t cap, have = 0;
	char *buf = NULL, *nbuf;
	ssize_t n;
	int fd, rc;

	*out = NULL;
	/* O_NONBLOCK: a FIFO without a writer must not hang the caller. */
	fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto cleanup;
	}
	if (S_ISDIR(st.st_mode)) {
		rc = -EISDIR;
		goto cleanup;
	}
	if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > max) {
		rc = -EFBIG;
		goto cleanup;
	}
	/* Size the buffer from fstat, but keep reading to EOF: the file may
	 * grow, and /proc files report a size of 0. */
	cap = S_ISREG(st.st_mode) && st.st_size > 0 ? (size_t)st.st_size + 1 : 4096;
	buf = malloc(cap);
	if (!buf) {
		rc = -ENOMEM;
		goto cleanup;
	}
	for (;;) {
		/* Keep one byte for the NUL, and let the buffer grow to one byte
		 * past max so that a file over the limit is noticed. */
		if (have + 1 == cap) {
			cap = max - have < have ? max + 2 : cap * 2;
			nbuf = realloc(buf, cap);
			if (!nbuf) {
				rc = -ENOMEM;
				goto cleanup;
			}
			buf = nbuf;
		}
		n = util_read_retry(fd, buf + have, cap - have - 1);
		if (n < 0) {
			rc = (int)n;
			goto cleanup;
		}
		if (n == 0)
			break;
		have += (size_t)n;
		if (have > max) {
			rc = -EFBIG;
			goto cleanup;
		}
	}
	buf[have] = '\0';
	*out = buf;
	buf = NULL;
	if (outlen)
		*outlen = have;
	rc = 0;
cleanup:
	free(buf);
	close(fd);
	return rc;
}

void util_hex(const uint8_t *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 0xf];
	}
	out[2 * n] = '\0';
}

uint64_t util_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double util_round3(double x)
{
	if (!(x > -9e15 / 1000 && x < 9e15 / 1000))
		return x;   /* NaN, infinite or beyond exact integers: as it is */
	double k = (double)(int64_t)(x * 1000 + (x >= 0 ? 0.5 : -0.5));
	return k / 1000;
}

int64_t util_wall_s(void)
{
	return (int64_t)time(NULL);
}

bool util_unhex32(const char *hex, uint8_t out[32])
{
	size_t i;

	unsigned bad = 0;

	if (!hex || strlen(hex) != 64)
		return false;
	/* Without a branch per digit: random hex mispredicts every other one
	 * (kilnd decodes a digest per source of every request). */
	for (i = 0; i < 32; i++) {
		unsigned hi = util_hex_value(hex[2 * i]), lo = util_hex_value(hex[2 * i + 1]);
		bad |= (hi | lo) & 16;
		out[i] = (uint8_t)((hi << 4) | (lo & 15));
	}
	return bad == 0;
}

int util_swappable_ancestor(const char *path, char *out, size_t cap, unsigned *mode)
{
	char real[PATH_MAX];
	struct stat st;
	if (realpath(path, real) == NULL)
		return -errno;
	for (char *slash = strrchr(real, '/'); slash != NULL; slash = strrchr(real, '/')) {
		if (slash == real)
			slash[1] = '\0';
		else
			*slash = '\0';
		if (stat(real, &st) == 0 && (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 &&
		    (st.st_mode & S_ISVTX) == 0) {
			snprintf(out, cap, "%s", real);
			*mode = (unsigned)(st.st_mode & 07777);
			return 1;
		}
		if (strcmp(real, "/") == 0)
			break;
	}
	return 0;
}

int util_fsync_dir_at(int dirfd, const char *path)
{
	int fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = 0;

	if (fd < 0)
		return -errno;
	/* Some filesystems cannot fsync a directory and say EINVAL; there is
	 * nothing more durable to ask them for, so that is not a failure. */
	if (fsync(fd) < 0 && errno != EINVAL)
		rc = -errno;
	close(fd);
	return rc;
}

size_t util_u64_text(uint64_t u, char *buf)
{
	char tmp[20];
	size_t n = 0, o = 0;
	do {
		tmp[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u != 0);
	while (n > 0)
		buf[o++] = tmp[--n];
	buf[o] = '\0';
	return o;
}

void util_i64_text(int64_t v, char *buf)
{
	if (v < 0)
		*buf++ = '-';
	/* The magnitude as unsigned: INT64_MIN has none as int64_t. */
	util_u64_text(v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v, buf);
}

void util_json_string(const char *s, size_t n, void (*put)(void *ctx, const char *p, size_t len),
		      void *ctx)
{
	static const char hex[] = "0123456789abcdef";
	static const char named_in[] = "\"\\\b\f\n\r\t", named_out[] = "\"\\bfnrt";
	size_t i = 0, start = 0;
	put(ctx, "\"", 1);
	for (; i < n && s[i] != '\0'; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		put(ctx, s + start, i - start);
		start = i + 1;
		const char *named = strchr(named_in, c);   /* c is not NUL here */
		if (named != NULL) {
			char esc[2] = { '\\', named_out[named - named_in] };
			put(ctx, esc, 2);
		} else {
			char u[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };
			put(ctx, u, 6);
		}
	}
	put(ctx, s + start, i - start);
	put(ctx, "\"", 1);
}

size_t util_edit_distance(const char *a, const char *b)
{
	size_t n = strlen(a), m = strlen(b);
	size_t d[64][64];
	if (n >= 64 || m >= 64)
		return SIZE_MAX;
	for (size_t i = 0; i <= n; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= m; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= n; i++) {
		for (size_t j = 1; j <= m; j++) {
			size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	}
	return d[n][m];
}
