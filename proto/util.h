/*
 * Small helpers shared by daemon, client and CLI: sizes, times, default
 * paths, directories, digests.
 */
#ifndef KILN_PROTO_UTIL_H
#define KILN_PROTO_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define KILN_KEY_HEX 64

/* Parses "10G", "512M", "64k", "1.5G", "4096" (binary units, case-insensitive,
 * optional trailing "B" or "iB"). Returns 0 or -EINVAL / -ERANGE. */
int util_parse_size(const char *s, uint64_t *out);
/* Formats bytes as "1.5 GiB", "512 B". Returns buf. */
char *util_format_size(uint64_t bytes, char *buf, size_t len);
/* Formats an age in seconds as "12s", "5m", "3h", "2d". Returns buf. */
char *util_format_age(int64_t seconds, char *buf, size_t len);

/* Default socket path: $KILN_SOCKET, else $XDG_RUNTIME_DIR/kiln/kilnd.sock,
 * else /tmp/kiln-<uid>/kilnd.sock. Returns a malloc'd string or NULL. */
char *util_default_socket(void);
/* XDG_RUNTIME_DIR when it is set (and KILN_SOCKET is not) but names no
 * directory of this user, so that util_default_socket skipped it; else
 * NULL. For a note saying why the socket is in /tmp. */
const char *util_runtime_dir_ignored(void);
/* Default cache directory: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else
 * $HOME/.cache/kiln (getpwuid when HOME is unset). malloc'd or NULL. */
char *util_default_cache_dir(void);
/* Creates dir and missing parents with mode (existing ones are left alone).
 * Returns 0 or a negative errno. */
int util_mkdir_p(const char *dir, unsigned mode);
/* Makes the folders of the relative name under base (in dirfd or
 * AT_FDCWD), which exists: for "a/b/f.h", base/a and base/a/b, mode, those
 * already there left alone. 0 or a negative errno. */
int util_mkdir_parents_at(int dirfd, const char *base, const char *name, unsigned mode);
/* Writes len bytes to fd, retrying short writes and EINTR. 0 or -errno. */
int util_write_all(int fd, const void *buf, size_t len);
/* Creates path (O_EXCL, mode 0600) holding len bytes of data; 0 or a
 * negative errno. */
int util_write_new_file(const char *path, const void *data, size_t len);
/* Replaces name in the directory dirfd (or AT_FDCWD) with len bytes of data
 * atomically: written to a unique temporary name beside it (O_EXCL, mode
 * 0600, no symlink followed), then renamed over it, so a reader sees the old
 * file or the new one, never half. durable: the file and the directory are
 * fsync'ed too. On failure the temporary file is removed and name is left as
 * it was. 0 or a negative errno. */
int util_replace_file_at(int dirfd, const char *name, const void *data, size_t len,
			 bool durable);
/* As util_replace_file_at, the file getting mode (07777 bits) whatever the
 * umask, before it is renamed into place: a reader never sees another mode. */
int util_replace_file_mode_at(int dirfd, const char *name, const void *data, size_t len,
			      bool durable, unsigned mode);
/* Reads a whole file (at most max bytes; -EFBIG beyond). *out is malloc'd and
 * NUL-terminated, owned by the caller. Returns 0 or a negative errno. */
int util_read_file(const char *path, size_t max, char **out, size_t *outlen);
/* As util_read_file, path relative to the directory dirfd (or AT_FDCWD). */
int util_read_file_at(int dirfd, const char *path, size_t max, char **out, size_t *outlen);

/* Lower-case hex of n bytes into out (2n + 1 bytes). */
void util_hex(const uint8_t *in, size_t n, char *out);
/* v in decimal into buf (at least 21 bytes), NUL-terminated; no printf (its
 * first use costs a fresh process microseconds). */
void util_i64_text(int64_t v, char *buf);
/* As util_i64_text for an unsigned value (buf: at least 21 bytes); returns
 * the number of digits. */
size_t util_u64_text(uint64_t v, char *buf);
/* The value of a lower-case hex digit, 0 to 15, or 16 for any other byte;
 * without branches. */
static inline unsigned util_hex_value(char c)
{
	unsigned d = (unsigned)(unsigned char)c - '0', a = (unsigned)(unsigned char)c - 'a';
	unsigned is_d = (unsigned)(d < 10), is_a = (unsigned)(a < 6);
	return (d & (0u - is_d)) | ((a + 10) & (0u - is_a)) | (16 & (0u - (1 - (is_d | is_a))));
}
/* The n bytes at s (up to a NUL) as a quoted JSON string, escaped as cJSON
 * escapes: quote, backslash, \b \f \n \r \t, other controls as \u00xx,
 * everything else (UTF-8 included) as it is. Written through put, in runs:
 * the one escaper of the requests libkiln packs and the replies kilnd prints. */
void util_json_string(const char *s, size_t n, void (*put)(void *ctx, const char *p, size_t len),
		      void *ctx);
/* 64 lower-case hex digits into 32 bytes; false for anything else (NULL too). */
bool util_unhex32(const char *hex, uint8_t out[32]);
/* read() that retries EINTR: bytes read, 0 at end of file, or -errno. */
ssize_t util_read_retry(int fd, void *buf, size_t len);

/* SHA-256 of buf into out (32 bytes; proto/digest.c, which needs libcrypto). */
void util_sha256(const void *buf, size_t len, uint8_t out[32]);
/* SHA-256 of a file's content. Returns 0 or a negative errno. */
int util_sha256_file(const char *path, uint8_t out[32]);
/* As util_sha256_file, path relative to the directory dirfd (or AT_FDCWD).
 * Opened without blocking (a FIFO or device never holds the caller);
 * anything but a regular file is -EINVAL. */
int util_sha256_file_at(int dirfd, const char *path, uint8_t out[32]);
/* A filesystem (statfs f_type) whose files the kernel makes when read:
 * procfs, sysfs, debugfs, tracefs, securityfs, cgroup, configfs, bpf,
 * efivarfs, pstore, devpts, fusectl, binfmt_misc, selinuxfs, mqueue. */
bool util_pseudo_fs(long type);
/* Opens path (relative to dirfd) for reading only if it is a regular file
 * (and not one of a pseudo filesystem: util_pseudo_fs),
 * never blocking and never opening anything else (a FIFO, a device, a
 * socket): the descriptor, with *st its identity; -EINVAL (st filled) for
 * anything but a regular file, or another negative errno. nofollow:
 * O_NOFOLLOW (a symlink at path is then not a regular file) or 0. */
struct stat;
int util_open_regular_at(int dirfd, const char *path, int nofollow, struct stat *st);
/* The SHA-256 of the directory path's listing: its names but "." and "..",
 * sorted, each with its NUL. *st gets the directory's identity (fstat of
 * what was listed). Anything but a directory is an error (never blocks).
 * 0 or a negative errno. */
int util_sha256_listing(const char *path, uint8_t out[32], struct stat *st);
/* The SHA-256 of what the open descriptor fd holds, read with pread from
 * offset 0 to its end; 0 or a negative errno (-EAGAIN when a regular file
 * gives more bytes than its size). fd stays open. */
int util_sha256_fd(int fd, uint8_t out[32]);
/* OpenSSL's SHA-256 (an EVP_MD), fetched once (digest.c). */
struct evp_md_st;
const struct evp_md_st *util_sha256_md(void);
/*
 * Copies the file open as in (read with pread from offset 0) to out, or only
 * reads it when out is -1, while hashing; *size and digest get the bytes
 * read and their SHA-256. Returns 0 or a negative errno (digest.c).
 */
int util_copy_sha256(int in, int out, uint64_t *size, uint8_t digest[32]);

/* Monotonic and wall clocks. */
uint64_t util_now_ns(void);       /* CLOCK_MONOTONIC */
/* x rounded to 3 decimals (milliseconds of seconds, a rate): the double
 * nearest that decimal, which JSON prints short ("0.239", never
 * "0.23899999999999999"). */
double util_round3(double x);
/* The optimal string alignment distance between a and b (insertions,
 * deletions, substitutions and swaps of two neighbours, one each), for a
 * "did you mean"; strings longer than 63 bytes are SIZE_MAX apart. */
size_t util_edit_distance(const char *a, const char *b);
int64_t util_wall_s(void);        /* time(NULL) */

/*
 * The first directory above path (by its real path) that group or others
 * may write without the sticky bit: they could move what lies in it away
 * and put their own in its place. 1 with its path in out and its mode, 0
 * when there is none, or a negative errno when path cannot be resolved.
 */
int util_swappable_ancestor(const char *path, char *out, size_t cap, unsigned *mode);

/* fsync of the directory path (relative to dirfd, or AT_FDCWD): 0 or
 * -errno; a filesystem that cannot (EINVAL) is not an error. */
int util_fsync_dir_at(int dirfd, const char *path);

#endif
