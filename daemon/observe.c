/*
 * kiln-observe.so: the interposer that kiln-exec preloads into every
 * compiler run, so that kilnd learns what the toolchain really read. Every
 * process of the toolchain (driver, cc1, as, collect2, ld, nvcc's tools)
 * loads it through LD_PRELOAD and appends one record per file it opened,
 * probed, executed or loaded, and per environment variable it read, to a
 * file of its own in the directory KILN_TRACE_DIR names (created with a
 * random name and O_EXCL: an argument that makes the toolchain write a file
 * cannot name it, let alone truncate it). Every record starts with the
 * build's secret KILN_TRACE_TOKEN, so a file written there by other means
 * reads as damage. Records are NUL-terminated text written with one write()
 * to an O_APPEND file, so threads never interleave within a record.
 * daemon/flight/trace.c reads them. The hooks on the programs the
 * toolchain starts (exec, posix_spawn: X, F, P, I) are observe_exec.c's;
 * observe_int.h is what the two share.
 *
 * Record: "<token> <kind> <pid> <fields...>\t<path or name>\0", kinds
 * (their letters: proto/trace_rec.h):
 *   H ppid dev ino size mtime ctime mode   this process started, path = its
 *                       executable (/proc/self/exe) and its identity: the image
 *                       that answers the exec (X, P, I) of that file
 *   O dev ino size mtime ctime mode   opened for reading (identity by fstat)
 *   W                   opened for writing only
 *   S mode              exists (stat, access, opendir, readlink succeeded)
 *   A errno             looked for and not found (ENOENT, ENOTDIR)
 *   Q errno             looked for, failed otherwise (EACCES, ELOOP, ...)
 *   X dev ino size mtime ctime mode   about to execute the program
 *   F errno             the exec failed; the process goes on
 *   P child dev ino size mtime ctime mode   posix_spawn started child
 *                       running path (its H comes before or after this)
 *   I dev ino size mtime ctime mode   the exec or spawn just recorded runs a
 *                       script: the kernel starts this `#!` interpreter (one
 *                       record per level), which must answer instead
 *   N                   this process cannot be observed (why)
 *   L dev ino size mtime ctime mode   a shared object loaded in this process
 *   E 1|0               getenv of a variable, path = "NAME=VALUE" or "NAME"
 *   D dev ino size mtime ctime mode   a directory listed (opendir, fdopendir,
 *                       scandir): its names are an input
 *
 * KILN_OBSERVE_IGNORE, set for kilnd or in a toolchain's own process, is a
 * ':'-separated list of paths (starting with '/': those and everything
 * below) and variable names whose records are left out: a wrapper's lock or
 * log files, which it may poll while they change, and its own variables.
 * Only the configured toolchain runs here, never a client's code, so this
 * hides nothing a client controls.
 *
 * Nothing here allocates on the heap: the hooks also run in vfork children.
 * Paths are made absolute with the working directory or the directory
 * descriptor of the *at call; kilnd normalizes them.
 */
/* The hooks must define the plain names (open, not open64 in disguise). */
#undef _FILE_OFFSET_BITS
#undef _FORTIFY_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "observe_image.h"
#include "observe_int.h"
#include "observe_path.h"
#include "sha256.h"
#include "trace_rec.h"

/* libc declares some arguments nonnull; programs pass NULL all the same,
 * and a hook must not crash where libc would fail with EFAULT. */
#pragma GCC diagnostic ignored "-Wnonnull-compare"

#define REC_MAX (PATH_MAX * 2 + 256)
/* Out of the way of the descriptors a toolchain opens itself. */
#define TRACE_FD_MIN 900

extern char **environ;

const char *observe_env_get(char *const *env, const char *name)
{
	size_t n = strlen(name);
	for (; env != NULL && *env != NULL; env++) {
		if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
			return *env + n + 1;
	}
	return NULL;
}

static int trace_fd = -1;
static char trace_token[72];
static dev_t trace_dev;
static ino_t trace_ino;
static int trace_state; /* 0: not yet, 1: tracing, 2: off */

REAL(open); REAL(open64); REAL(openat); REAL(openat64); REAL(fopen); REAL(fopen64);
REAL(freopen); REAL(freopen64); REAL(stat); REAL(lstat); REAL(fstatat); REAL(statx);
REAL(access); REAL(faccessat); REAL(euidaccess); REAL(readlink); REAL(readlinkat);
REAL(realpath); REAL(opendir); REAL(fdopendir); REAL(scandir); REAL(scandir64);
REAL(scandirat); REAL(dlopen); REAL(creat);
static int (*real___open_2)(const char *, int);
static int (*real___open64_2)(const char *, int);
static int (*real___openat_2)(int, const char *, int);
static int (*real___openat64_2)(int, const char *, int);
static int (*real___xstat)(int, const char *, struct stat *);
static int (*real___lxstat)(int, const char *, struct stat *);
static int (*real___fxstatat)(int, int, const char *, struct stat *, int);
static int (*real_stat64)(const char *, struct stat64 *);
static int (*real_lstat64)(const char *, struct stat64 *);
static int (*real_fstatat64)(int, const char *, struct stat64 *, int);
static int (*real___xstat64)(int, const char *, struct stat64 *);
static int (*real___lxstat64)(int, const char *, struct stat64 *);
static int (*real___fxstatat64)(int, int, const char *, struct stat64 *, int);
static char *(*real_canonicalize_file_name)(const char *);


/* Each process opens a trace file of its own: a descriptor inherited from
 * the parent could have been closed and its number reused. */
static void trace_open(void)
{
	const char *dir = observe_env_get(environ, "KILN_TRACE_DIR");
	const char *token = observe_env_get(environ, "KILN_TRACE_TOKEN");
	char path[PATH_MAX];
	unsigned char rnd[8];
	trace_state = 2;
	if (dir == NULL || dir[0] != '/' || token == NULL || strlen(token) >= sizeof(trace_token) ||
	    syscall(SYS_getrandom, rnd, sizeof(rnd), 0) != (long)sizeof(rnd))
		return;
	snprintf(trace_token, sizeof(trace_token), "%s", token);
	int n = snprintf(path, sizeof(path), "%s/%d-", dir, (int)getpid());
	for (size_t i = 0; i < sizeof(rnd) && n > 0 && (size_t)n + 3 < sizeof(path); i++)
		n += snprintf(path + n, sizeof(path) - (size_t)n, "%02x", rnd[i]);
	int fd = (int)syscall(SYS_openat, AT_FDCWD, path,
			      O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	/* High, out of the way; under a descriptor limit lower than that,
	 * as high as the limit leaves room for (a process that could not
	 * trace would make every build it takes part in unobserved). */
	struct rlimit rl;
	int hi = fcntl(fd, F_DUPFD_CLOEXEC, TRACE_FD_MIN);
	if (hi < 0 && getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur > 64 &&
	    rl.rlim_cur <= TRACE_FD_MIN)
		hi = fcntl(fd, F_DUPFD_CLOEXEC, (int)(rl.rlim_cur - rl.rlim_cur / 8));
	if (hi < 0)
		hi = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	syscall(SYS_close, fd);
	struct stat st;
	if (hi < 0 || fstat(hi, &st) != 0)
		return;
	trace_fd = hi;
	trace_dev = st.st_dev;
	trace_ino = st.st_ino;
	trace_state = 1;
}

/*
 * What this process read can no longer be recorded (the disk is full, the
 * toolchain closed the trace's descriptor): its build must not be
 * published with a partial record, so the whole build stops here, with a
 * message in its log. kiln-exec leads the process group.
 */
static void trace_lost(const char *why)
{
	char msg[256];
	int n = snprintf(msg, sizeof(msg), "kiln-observe: cannot record what the toolchain reads "
			 "(%s); the build is stopped\n", why);
	if (n > 0)
		syscall(SYS_write, STDERR_FILENO, msg, (size_t)n);
	kill(0, SIGKILL);
	_exit(137);
}

bool observe_tracing(void)
{
	if (trace_state == 0)
		trace_open();
	if (trace_state != 1)
		return false;
	/* The descriptor must still be ours: never write into a toolchain's file. */
	struct stat st;
	if (fstat(trace_fd, &st) != 0 || st.st_dev != trace_dev || st.st_ino != trace_ino)
		trace_lost("the toolchain closed the trace's descriptor");
	return true;
}

/* path is one of KILN_OBSERVE_IGNORE's entries or below one; a variable
 * name (len: its length in name) is one of them. */
static bool ignored_in(const char *name, size_t len)
{
	const char *list = observe_env_get(environ, "KILN_OBSERVE_IGNORE");
	bool path = name[0] == '/';
	while (list != NULL && *list != '\0') {
		size_t n = strcspn(list, ":");
		if (n > 0 && path && list[0] == '/' && strncmp(name, list, n) == 0 &&
		    (name[n] == '\0' || name[n] == '/'))
			return true;
		if (n > 0 && !path && n == len && strncmp(name, list, n) == 0)
			return true;
		list += n + (list[n] == ':');
	}
	return false;
}

static bool ignored(const char *path)
{
	return ignored_in(path, strlen(path));
}

void observe_emit(const char *head, const char *path)
{
	char rec[REC_MAX];
	if (path[0] == '/' && ignored(path))
		return;
	int n = snprintf(rec, sizeof(rec), "%s %s\t%s", trace_token, head, path);
	if (n < 0 || (size_t)n >= sizeof(rec))
		trace_lost("a record longer than the longest path");
	int saved = errno;
	long w = syscall(SYS_write, trace_fd, rec, (size_t)n + 1);
	if (w != (long)n + 1)
		trace_lost(w < 0 && errno == ENOSPC ? "No space left on device" : "a write failed");
	errno = saved;
}

void observe_emit_ident(char kind, const char *path, const struct stat *st)
{
	char head[256];
	image_ident_head(head, sizeof(head), kind, (long)getpid(), "", st);
	observe_emit(head, path);
}

/* A probe's outcome: rc < 0 with errno, or success with the mode. */
void observe_note_probe(int dirfd, const char *path, int rc, int err, unsigned mode)
{
	char abs[PATH_MAX + 8], head[64];
	bool resolved;
	if (!observe_tracing() || !observe_absolute(dirfd, path, abs, sizeof(abs), &resolved))
		return;
	if (rc == 0)
		snprintf(head, sizeof(head), "%c %d %o", REC_STAT, (int)getpid(), resolved ? 0 : mode);
	else
		snprintf(head, sizeof(head), "%c %d %d", err == ENOENT || err == ENOTDIR ? REC_ABSENT : REC_FAILED,
			 (int)getpid(), err);
	observe_emit(head, abs);
}

/* After an open: the identity of what was opened, or the miss. */
static void note_open(int dirfd, const char *path, int flags, int fd, int err)
{
	char abs[PATH_MAX + 8], head[64];
	if (!observe_tracing() || !observe_absolute(dirfd, path, abs, sizeof(abs), NULL))
		return;
	if (fd < 0 && ((flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC)))) {
		/* A refused attempt to write (Landlock, permissions) wrote
		 * nothing: it must not hide the path, which the toolchain may
		 * read too. What is there counts as a probe would. */
		struct stat st;
		RESOLVE(fstatat);
		int rc = real_fstatat(dirfd, path, &st, 0);
		observe_note_probe(dirfd, path, rc, errno, rc == 0 ? (unsigned)st.st_mode : 0);
		errno = err; /* the caller reads the open's */
		return;
	}
	if (fd < 0) {
		observe_note_probe(dirfd, path, -1, err, 0);
		return;
	}
	struct stat st;
	if (fstat(fd, &st) != 0)
		return;
	if ((flags & O_PATH) || S_ISDIR(st.st_mode)) {
		snprintf(head, sizeof(head), "%c %d %o", REC_STAT, (int)getpid(), (unsigned)st.st_mode);
		observe_emit(head, abs);
	} else if ((flags & O_ACCMODE) == O_WRONLY) {
		snprintf(head, sizeof(head), "%c %d", REC_WRITE, (int)getpid());
		observe_emit(head, abs);
	} else {
		observe_emit_ident(REC_OPEN, abs, &st);
	}
}

static int open_mode(int flags, va_list ap)
{
	return (flags & (O_CREAT | O_TMPFILE)) ? va_arg(ap, int) : 0;
}

/* Declares mode: the variadic mode argument after flags, or 0. */
#define TAKE_MODE(flags)                                \
	va_list ap;                                     \
	va_start(ap, flags);                            \
	int mode = open_mode(flags, ap);                \
	va_end(ap)

#define OPEN_HOOK(name, ...)                                                    \
	int name(const char *path, int flags, ...)                              \
	{                                                                       \
		TAKE_MODE(flags);                                               \
		RESOLVE(name);                                                  \
		int fd = real_##name(path, flags, mode);                        \
		note_open(AT_FDCWD, path, flags, fd, errno);                    \
		return fd;                                                      \
	}
OPEN_HOOK(open)
OPEN_HOOK(open64)

#define OPENAT_HOOK(name)                                                       \
	int name(int dirfd, const char *path, int flags, ...)                   \
	{                                                                       \
		TAKE_MODE(flags);                                               \
		RESOLVE(name);                                                  \
		int fd = real_##name(dirfd, path, flags, mode);                 \
		note_open(dirfd, path, flags, fd, errno);                       \
		return fd;                                                      \
	}
OPENAT_HOOK(openat)
OPENAT_HOOK(openat64)

int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);

int __open_2(const char *path, int flags)
{
	RESOLVE(__open_2);
	int fd = real___open_2(path, flags);
	note_open(AT_FDCWD, path, flags, fd, errno);
	return fd;
}

int __open64_2(const char *path, int flags)
{
	RESOLVE(__open64_2);
	int fd = real___open64_2(path, flags);
	note_open(AT_FDCWD, path, flags, fd, errno);
	return fd;
}

int __openat_2(int dirfd, const char *path, int flags)
{
	RESOLVE(__openat_2);
	int fd = real___openat_2(dirfd, path, flags);
	note_open(dirfd, path, flags, fd, errno);
	return fd;
}

int __openat64_2(int dirfd, const char *path, int flags)
{
	RESOLVE(__openat64_2);
	int fd = real___openat64_2(dirfd, path, flags);
	note_open(dirfd, path, flags, fd, errno);
	return fd;
}

int creat(const char *path, mode_t mode)
{
	RESOLVE(creat);
	int fd = real_creat(path, mode);
	note_open(AT_FDCWD, path, O_WRONLY | O_CREAT, fd, errno);
	return fd;
}

/* fopen's mode string: reading unless it is "w" or "a" without "+". */
static int fopen_flags(const char *mode)
{
	if (mode == NULL)
		return O_RDONLY;
	bool plus = strchr(mode, '+') != NULL;
	if (mode[0] == 'r')
		return plus ? O_RDWR : O_RDONLY;
	return plus ? O_RDWR : O_WRONLY;
}

#define FOPEN_HOOK(name)                                                        \
	FILE *name(const char *path, const char *mode)                          \
	{                                                                       \
		RESOLVE(name);                                                  \
		FILE *fp = real_##name(path, mode);                             \
		note_open(AT_FDCWD, path, fopen_flags(mode), fp != NULL ? fileno(fp) : -1, errno); \
		return fp;                                                      \
	}
FOPEN_HOOK(fopen)
FOPEN_HOOK(fopen64)

#define FREOPEN_HOOK(name)                                                      \
	FILE *name(const char *path, const char *mode, FILE *stream)            \
	{                                                                       \
		RESOLVE(name);                                                  \
		FILE *fp = real_##name(path, mode, stream);                     \
		if (path != NULL)                                               \
			note_open(AT_FDCWD, path, fopen_flags(mode), fp != NULL ? fileno(fp) : -1, errno); \
		return fp;                                                      \
	}
FREOPEN_HOOK(freopen)
FREOPEN_HOOK(freopen64)

#define STAT_HOOK(name, type)                                                   \
	int name(const char *path, type *st)                                    \
	{                                                                       \
		RESOLVE(name);                                                  \
		int rc = real_##name(path, st);                                 \
		observe_note_probe(AT_FDCWD, path, rc, errno, rc == 0 ? (unsigned)st->st_mode : 0); \
		return rc;                                                      \
	}
STAT_HOOK(stat, struct stat)
STAT_HOOK(lstat, struct stat)
STAT_HOOK(stat64, struct stat64)
STAT_HOOK(lstat64, struct stat64)

#define FSTATAT_HOOK(name, type)                                                \
	int name(int dirfd, const char *path, type *st, int flags)              \
	{                                                                       \
		RESOLVE(name);                                                  \
		int rc = real_##name(dirfd, path, st, flags);                   \
		if (path != NULL && path[0] != '\0')                            \
			observe_note_probe(dirfd, path, rc, errno, rc == 0 ? (unsigned)st->st_mode : 0); \
		return rc;                                                      \
	}
FSTATAT_HOOK(fstatat, struct stat)
FSTATAT_HOOK(fstatat64, struct stat64)

#define XSTAT_HOOK(name, type)                                                  \
	int name(int ver, const char *path, type *st)                           \
	{                                                                       \
		RESOLVE(name);                                                  \
		int rc = real_##name(ver, path, st);                            \
		observe_note_probe(AT_FDCWD, path, rc, errno, rc == 0 ? (unsigned)st->st_mode : 0); \
		return rc;                                                      \
	}
int __xstat(int ver, const char *path, struct stat *st);
int __lxstat(int ver, const char *path, struct stat *st);
int __xstat64(int ver, const char *path, struct stat64 *st);
int __lxstat64(int ver, const char *path, struct stat64 *st);
XSTAT_HOOK(__xstat, struct stat)
XSTAT_HOOK(__lxstat, struct stat)
XSTAT_HOOK(__xstat64, struct stat64)
XSTAT_HOOK(__lxstat64, struct stat64)

#define FXSTATAT_HOOK(name, type)                                               \
	int name(int ver, int dirfd, const char *path, type *st, int flags)     \
	{                                                                       \
		RESOLVE(name);                                                  \
		int rc = real_##name(ver, dirfd, path, st, flags);              \
		if (path != NULL && path[0] != '\0')                            \
			observe_note_probe(dirfd, path, rc, errno, rc == 0 ? (unsigned)st->st_mode : 0); \
		return rc;                                                      \
	}
int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags);
int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags);
FXSTATAT_HOOK(__fxstatat, struct stat)
FXSTATAT_HOOK(__fxstatat64, struct stat64)

int statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *sx)
{
	RESOLVE(statx);
	int rc = real_statx(dirfd, path, flags, mask, sx);
	if (path != NULL && path[0] != '\0')
		observe_note_probe(dirfd, path, rc, errno, rc == 0 ? sx->stx_mode : 0);
	return rc;
}

/* access() and friends: success says the file exists (the mode is read
 * afterwards by kilnd); a failure other than ENOENT says it exists too. */
#define ACCESS_HOOK(name)                                 \
	int name(const char *path, int how)               \
	{                                                 \
		RESOLVE(name);                            \
		int rc = real_##name(path, how);          \
		observe_note_probe(AT_FDCWD, path, rc, errno, 0); \
		return rc;                                \
	}
ACCESS_HOOK(access)
ACCESS_HOOK(euidaccess)

int faccessat(int dirfd, const char *path, int how, int flags)
{
	RESOLVE(faccessat);
	int rc = real_faccessat(dirfd, path, how, flags);
	observe_note_probe(dirfd, path, rc, errno, 0);
	return rc;
}

int eaccess(const char *path, int how)
{
	return euidaccess(path, how);
}

ssize_t readlink(const char *path, char *buf, size_t len)
{
	RESOLVE(readlink);
	ssize_t n = real_readlink(path, buf, len);
	observe_note_probe(AT_FDCWD, path, n < 0 ? -1 : 0, errno, S_IFLNK);
	return n;
}

ssize_t readlinkat(int dirfd, const char *path, char *buf, size_t len)
{
	RESOLVE(readlinkat);
	ssize_t n = real_readlinkat(dirfd, path, buf, len);
	observe_note_probe(dirfd, path, n < 0 ? -1 : 0, errno, S_IFLNK);
	return n;
}

char *realpath(const char *path, char *resolved)
{
	RESOLVE(realpath);
	char *r = real_realpath(path, resolved);
	observe_note_probe(AT_FDCWD, path, r == NULL ? -1 : 0, errno, 0);
	return r;
}

char *canonicalize_file_name(const char *path)
{
	RESOLVE(canonicalize_file_name);
	char *r = real_canonicalize_file_name(path);
	observe_note_probe(AT_FDCWD, path, r == NULL ? -1 : 0, errno, 0);
	return r;
}

/* A directory listed: its names decide what a toolchain that lists it
 * does (gcc tries every file of a "h.h.gch" directory), so kilnd records
 * its listing (D, with the identity of what was opened). */
static void note_listed(int dirfd, const char *path, int fd)
{
	char abs[PATH_MAX + 8];
	struct stat st;
	if (!observe_tracing() || !observe_absolute(dirfd, path, abs, sizeof(abs), NULL))
		return;
	RESOLVE(stat);
	if ((fd >= 0 ? fstat(fd, &st) : real_stat(abs, &st)) == 0 && S_ISDIR(st.st_mode))
		observe_emit_ident(REC_LISTING, abs, &st);
}

DIR *opendir(const char *path)
{
	RESOLVE(opendir);
	DIR *d = real_opendir(path);
	int err = errno;
	observe_note_probe(AT_FDCWD, path, d == NULL ? -1 : 0, err, S_IFDIR);
	if (d != NULL)
		note_listed(AT_FDCWD, path, dirfd(d));
	errno = err;
	return d;
}

DIR *fdopendir(int fd)
{
	RESOLVE(fdopendir);
	DIR *d = real_fdopendir(fd);
	int err = errno;
	if (d != NULL)
		note_listed(fd, ".", fd);
	errno = err;
	return d;
}

/* glibc's scandir opens the directory inside libc, past the hooks. */
#define SCANDIR_HOOK(name, type)                                                \
	int name(const char *path, type ***list, int (*sel)(const type *),      \
		 int (*cmp)(const type **, const type **))                       \
	{                                                                       \
		RESOLVE(name);                                                  \
		int n = real_##name(path, list, sel, cmp);                      \
		int err = errno;                                                \
		observe_note_probe(AT_FDCWD, path, n < 0 ? -1 : 0, err, S_IFDIR);       \
		if (n >= 0)                                                     \
			note_listed(AT_FDCWD, path, -1);                        \
		errno = err;                                                    \
		return n;                                                       \
	}
SCANDIR_HOOK(scandir, struct dirent)
SCANDIR_HOOK(scandir64, struct dirent64)

int scandirat(int dirfd, const char *path, struct dirent ***list, int (*sel)(const struct dirent *),
	      int (*cmp)(const struct dirent **, const struct dirent **))
{
	RESOLVE(scandirat);
	int n = real_scandirat(dirfd, path, list, sel, cmp);
	int err = errno;
	observe_note_probe(dirfd, path, n < 0 ? -1 : 0, err, S_IFDIR);
	if (n >= 0)
		note_listed(dirfd, path, -1);
	errno = err;
	return n;
}

static void note_object(const char *path)
{
	struct stat st;
	RESOLVE(stat);
	if (path == NULL || path[0] != '/' || real_stat(path, &st) != 0)
		return;
	observe_emit_ident(REC_LOAD, path, &st);
}

void *dlopen(const char *file, int flags)
{
	RESOLVE(dlopen);
	void *h = real_dlopen(file, flags);
	struct link_map *lm = NULL;
	if (h != NULL && observe_tracing() && dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm != NULL)
		note_object(lm->l_name);
	else if (h == NULL && file != NULL && strchr(file, '/') != NULL)
		observe_note_probe(AT_FDCWD, file, -1, ENOENT, 0);
	return h;
}

/* getenv and secure_getenv read environ themselves: calling into libc
 * before the hooks are resolved could recurse. */
static char *env_note(const char *name)
{
	char *v = (char *)observe_env_get(environ, name);
	if (name != NULL && strchr(name, '=') == NULL && !ignored_in(name, strlen(name)) && observe_tracing()) {
		char head[64], rec[PATH_MAX + 8];
		size_t nl = strlen(name);
		if (nl + 80 > sizeof(rec))
			trace_lost("a variable name longer than a path");
		/* A long value goes as its SHA-256 ("E pid 2"). */
		bool digest = v != NULL && nl + 1 + strlen(v) + 1 > sizeof(rec);
		snprintf(head, sizeof(head), "%c %d %d", REC_ENV, (int)getpid(), v == NULL ? 0 : digest ? 2 : 1);
		if (digest) {
			uint8_t d[32];
			sha256_buf(v, strlen(v), d);
			int n = snprintf(rec, sizeof(rec), "%s=", name);
			for (int i = 0; i < 32; i++)
				n += snprintf(rec + n, sizeof(rec) - (size_t)n, "%02x", d[i]);
		} else if (v != NULL) {
			snprintf(rec, sizeof(rec), "%s=%s", name, v);
		} else {
			snprintf(rec, sizeof(rec), "%s", name);
		}
		observe_emit(head, rec);
	}
	return v;
}

char *getenv(const char *name)
{
	return name != NULL ? env_note(name) : NULL;
}

char *secure_getenv(const char *name)
{
	if (getauxval(AT_SECURE) != 0)
		return NULL;
	return name != NULL ? env_note(name) : NULL;
}

static int note_loaded(struct dl_phdr_info *info, size_t size, void *arg)
{
	const char *self = arg;
	if (info->dlpi_name != NULL && info->dlpi_name[0] == '/' &&
	    (self == NULL || strcmp(info->dlpi_name, self) != 0))
		note_object(info->dlpi_name);
	return 0;
}

/* Whether the n bytes of notes at p hold Go's build ID note (name "Go",
 * padded to 4 bytes, type 4: the Go linker writes it into every ELF
 * binary, also one linked externally for cgo). */
static bool go_note(const unsigned char *p, size_t n)
{
	for (size_t at = 0; at + 12 <= n;) {
		uint32_t nsz, dsz, type;
		memcpy(&nsz, p + at, 4);
		memcpy(&dsz, p + at + 4, 4);
		memcpy(&type, p + at + 8, 4);
		size_t name = at + 12, next = name + ((nsz + 3u) & ~3u) + ((dsz + 3u) & ~3u);
		if (next > n || next <= at)
			return false;
		if (type == 4 && (nsz == 3 || nsz == 4) && memcmp(p + name, "Go", 3) == 0)
			return true;
		at = next;
	}
	return false;
}

/* dl_iterate_phdr's first object is the program: a Go program makes its
 * system calls itself, past every hook (*arg turns true). */
static int find_go(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_NOTE &&
		    go_note((const unsigned char *)(info->dlpi_addr + ph->p_vaddr), ph->p_memsz))
			*(bool *)arg = true;
	}
	return 1; /* the program only */
}

/* At start: say who we are (the image that answers the exec of this file,
 * with its identity) and which shared objects the loader brought in
 * (their reads never pass through the hooks). */
__attribute__((constructor)) static void observe_start(void)
{
	char exe[PATH_MAX + 8], head[256], pre[24];
	struct stat st;
	Dl_info self;
	bool go = false;
	if (!observe_tracing())
		return;
	ssize_t n = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	snprintf(pre, sizeof(pre), " %d", (int)getppid());
	RESOLVE(stat);
	if (real_stat("/proc/self/exe", &st) == 0)
		image_ident_head(head, sizeof(head), REC_HELLO, (long)getpid(), pre, &st);
	else
		snprintf(head, sizeof(head), "%c %d%s", REC_HELLO, (int)getpid(), pre);
	observe_emit(head, exe);
	const char *me = dladdr((void *)observe_start, &self) != 0 ? self.dli_fname : NULL;
	dl_iterate_phdr(note_loaded, (void *)me);
	dl_iterate_phdr(find_go, &go);
	if (go) {
		char why[PATH_MAX + 160];
		snprintf(head, sizeof(head), "%c %d", REC_INCOMPLETE, (int)getpid());
		snprintf(why, sizeof(why), "%.300s is a Go program: its system calls bypass libc, "
			 "so what it reads cannot be observed", exe);
		observe_emit(head, why);
	}
}
