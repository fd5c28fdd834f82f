/*
 * Unit tests of the shared helpers (proto/util.c) and of the string hash
 * table (proto/table.c) that the daemon and libkiln's fast path rely on.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "table.h"
#include "sha256.h"
#include "util.h"
#include "unit.h"

START_TEST(test_parse_size)
{
	static const struct {
		const char *s;
		uint64_t v;
	} ok[] = {
		{ "0", 0 }, { "4096", 4096 }, { "64k", 65536 }, { "64K", 65536 },
		{ "512M", 512ull << 20 }, { "10G", 10ull << 30 }, { "2T", 2ull << 40 },
		{ "1.5G", 3ull << 29 }, { "0.5k", 512 }, { "1.25KiB", 1280 },
		{ "1kb", 1024 }, { "1KB", 1024 }, { "1gib", 1ull << 30 }, { "100B", 100 },
		{ "100b", 100 }, { "1.1K", 1126 }, { "1P", 1ull << 50 }, { "15E", 15ull << 60 },
		{ "18446744073709551615", UINT64_MAX }, { "007", 7 },
		{ "1.000000000000000000000001K", 1024 },
	};
	static const char *const einval[] = {
		"", "-1", "-1G", "+5", "G", "1.", ".5G", "1..5", "1GG", "1Gx", "1 G", " 1",
		"1G ", "abc", "1iB", "1X", "0x10", "1e3", "1,5G", "1ib", "1.5.G",
	};
	static const char *const erange[] = {
		"18446744073709551616", "16E", "99999999999999999999", "17179869184G",
		"16384P",
	};
	uint64_t v;
	size_t i;

	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		v = 12345;
		ck_assert_msg(util_parse_size(ok[i].s, &v) == 0, "%s refused", ok[i].s);
		ck_assert_msg(v == ok[i].v, "%s: %llu, expected %llu", ok[i].s,
			      (unsigned long long)v, (unsigned long long)ok[i].v);
	}
	for (i = 0; i < sizeof(einval) / sizeof(einval[0]); i++)
		ck_assert_msg(util_parse_size(einval[i], &v) == -EINVAL, "%s accepted",
			      einval[i]);
	for (i = 0; i < sizeof(erange) / sizeof(erange[0]); i++)
		ck_assert_msg(util_parse_size(erange[i], &v) == -ERANGE, "%s not ERANGE",
			      erange[i]);
	ck_assert_int_eq(util_parse_size(NULL, &v), -EINVAL);
}
END_TEST

/* Seconds computed from nanoseconds print short in JSON: the number
 * cJSON writes for 0.239 s measured as 238999999 ns / 1e9 is "0.239". */
START_TEST(test_round3)
{
	const double in[] = { 238999999 / 1e9, 0.23899999999999999, 1.0005, 12.5, 0, -0.0014, 86400.0001 };
	const char *want[] = { "0.239", "0.239", "1.001", "12.5", "0", "-0.001", "86400" };
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		cJSON *n = cJSON_CreateNumber(util_round3(in[i]));
		char *text = cJSON_PrintUnformatted(n);
		ck_assert_str_eq(text, want[i]);
		free(text);
		cJSON_Delete(n);
	}
}
END_TEST

START_TEST(test_format_size)
{
	char buf[32];

	ck_assert_str_eq(util_format_size(0, buf, sizeof(buf)), "0 B");
	ck_assert_str_eq(util_format_size(512, buf, sizeof(buf)), "512 B");
	ck_assert_str_eq(util_format_size(1023, buf, sizeof(buf)), "1023 B");
	ck_assert_str_eq(util_format_size(1024, buf, sizeof(buf)), "1 KiB");
	ck_assert_str_eq(util_format_size(1536, buf, sizeof(buf)), "1.5 KiB");
	ck_assert_str_eq(util_format_size(3ull << 29, buf, sizeof(buf)), "1.5 GiB");
	ck_assert_str_eq(util_format_size(10ull << 30, buf, sizeof(buf)), "10 GiB");
	ck_assert_str_eq(util_format_size((1ull << 20) - 1, buf, sizeof(buf)), "1 MiB");
	ck_assert_str_eq(util_format_size(871234, buf, sizeof(buf)), "850.8 KiB");
	ck_assert_str_eq(util_format_size(UINT64_MAX, buf, sizeof(buf)), "16 EiB");
	/* A short buffer is truncated, never overrun. */
	ck_assert_str_eq(util_format_size(3ull << 29, buf, 4), "1.5");
}
END_TEST

START_TEST(test_format_age)
{
	char buf[16];

	ck_assert_str_eq(util_format_age(0, buf, sizeof(buf)), "0s");
	ck_assert_str_eq(util_format_age(12, buf, sizeof(buf)), "12s");
	ck_assert_str_eq(util_format_age(59, buf, sizeof(buf)), "59s");
	ck_assert_str_eq(util_format_age(300, buf, sizeof(buf)), "5m");
	ck_assert_str_eq(util_format_age(3 * 3600 + 59, buf, sizeof(buf)), "3h");
	ck_assert_str_eq(util_format_age(2 * 86400 + 5, buf, sizeof(buf)), "2d");
	ck_assert_str_eq(util_format_age(-30, buf, sizeof(buf)), "0s");
}
END_TEST

START_TEST(test_default_socket)
{
	char want[64], dir[] = "/tmp/kiln-test-xdg-XXXXXX", path[128], *s;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	setenv("KILN_SOCKET", "/run/x/k.sock", 1);
	setenv("XDG_RUNTIME_DIR", dir, 1);
	s = util_default_socket();
	ck_assert_str_eq(s, "/run/x/k.sock");
	free(s);
	ck_assert_ptr_null(util_runtime_dir_ignored());

	unsetenv("KILN_SOCKET");
	s = util_default_socket();
	snprintf(path, sizeof(path), "%s/kiln/kilnd.sock", dir);
	ck_assert_str_eq(s, path);
	free(s);
	ck_assert_ptr_null(util_runtime_dir_ignored());

	/* Set but missing (inherited through su, sudo or a batch system):
	 * the next default, and util_runtime_dir_ignored says which. */
	snprintf(want, sizeof(want), "/tmp/kiln-%u/kilnd.sock", (unsigned)getuid());
	snprintf(path, sizeof(path), "%s/gone", dir);
	setenv("XDG_RUNTIME_DIR", path, 1);
	s = util_default_socket();
	ck_assert_str_eq(s, want);
	free(s);
	ck_assert_str_eq(util_runtime_dir_ignored(), path);
	/* Another user's directory is skipped the same way (root can chown). */
	if (getuid() == 0 && chown(dir, 65534, 65534) == 0) {
		setenv("XDG_RUNTIME_DIR", dir, 1);
		s = util_default_socket();
		ck_assert_str_eq(s, want);
		free(s);
		ck_assert_str_eq(util_runtime_dir_ignored(), dir);
	}
	rmdir(dir);

	/* Empty variables and relative XDG paths are ignored. */
	setenv("KILN_SOCKET", "", 1);
	setenv("XDG_RUNTIME_DIR", "relative", 1);
	s = util_default_socket();
	ck_assert_str_eq(s, want);
	free(s);
	unsetenv("XDG_RUNTIME_DIR");
	s = util_default_socket();
	ck_assert_str_eq(s, want);
	free(s);
	ck_assert_ptr_null(util_runtime_dir_ignored());
}
END_TEST

START_TEST(test_default_cache_dir)
{
	char *s;

	setenv("KILN_CACHE_DIR", "/scratch/kiln", 1);
	setenv("XDG_CACHE_HOME", "/xdg/cache", 1);
	setenv("HOME", "/home/u", 1);
	s = util_default_cache_dir();
	ck_assert_str_eq(s, "/scratch/kiln");
	free(s);

	unsetenv("KILN_CACHE_DIR");
	s = util_default_cache_dir();
	ck_assert_str_eq(s, "/xdg/cache/kiln");
	free(s);

	setenv("XDG_CACHE_HOME", "", 1);
	s = util_default_cache_dir();
	ck_assert_str_eq(s, "/home/u/.cache/kiln");
	free(s);

	/* Without HOME the password database answers. */
	unsetenv("XDG_CACHE_HOME");
	unsetenv("HOME");
	s = util_default_cache_dir();
	if (s) {
		ck_assert_int_eq(s[0], '/');
		ck_assert_ptr_nonnull(strstr(s, "/.cache/kiln"));
		free(s);
	}
}
END_TEST

/* A fresh temporary directory; the caller removes it with rm_rf(). */
static void make_tmpdir(char dir[64])
{
	strcpy(dir, "/tmp/kiln-test-util-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void rm_rf(const char *dir)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_mkdir_p)
{
	char dir[64], path[256];
	struct stat st;
	int fd;

	make_tmpdir(dir);
	snprintf(path, sizeof(path), "%s/a/b//c/", dir);
	ck_assert_int_eq(util_mkdir_p(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/a/b/c", dir);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_int_eq(st.st_mode & 0777 & ~0700, 0);
	/* Existing directories are fine. */
	ck_assert_int_eq(util_mkdir_p(path, 0700), 0);
	ck_assert_int_eq(util_mkdir_p("/", 0700), 0);

	snprintf(path, sizeof(path), "%s/file", dir);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(util_mkdir_p(path, 0700), -ENOTDIR);
	snprintf(path, sizeof(path), "%s/file/sub", dir);
	ck_assert_int_eq(util_mkdir_p(path, 0700), -ENOTDIR);
	ck_assert_int_eq(util_mkdir_p("", 0700), -EINVAL);
	rm_rf(dir);
}
END_TEST

START_TEST(test_read_write_file)
{
	char dir[64], path[256], *out = NULL;
	size_t len = 0;
	int fd;

	make_tmpdir(dir);
	snprintf(path, sizeof(path), "%s/f", dir);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(util_write_all(fd, "hello world", 11), 0);
	close(fd);

	ck_assert_int_eq(util_read_file(path, 11, &out, &len), 0);
	ck_assert_uint_eq(len, 11);
	ck_assert_str_eq(out, "hello world");
	free(out);
	ck_assert_int_eq(util_read_file(path, 10, &out, &len), -EFBIG);
	ck_assert_ptr_null(out);
	ck_assert_int_eq(util_read_file(dir, 100, &out, &len), -EISDIR);
	snprintf(path, sizeof(path), "%s/missing", dir);
	ck_assert_int_eq(util_read_file(path, 100, &out, &len), -ENOENT);

	/* An empty file reads as an empty string. */
	snprintf(path, sizeof(path), "%s/empty", dir);
	close(open(path, O_CREAT | O_WRONLY, 0600));
	ck_assert_int_eq(util_read_file(path, 0, &out, &len), 0);
	ck_assert_uint_eq(len, 0);
	ck_assert_str_eq(out, "");
	free(out);

	/* Files without a size in stat are read to the end, within the limit. */
	ck_assert_int_eq(util_read_file("/proc/self/status", 1 << 20, &out, &len), 0);
	ck_assert_uint_gt(len, 0);
	ck_assert_uint_eq(strlen(out), len);
	free(out);
	ck_assert_int_eq(util_read_file("/proc/self/status", 10, &out, &len), -EFBIG);
	rm_rf(dir);
}
END_TEST

/* The entries of dir, "." and ".." left out. */
static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

START_TEST(test_replace_file)
{
	char dir[64], path[256], *out = NULL;
	size_t len = 0;
	int dfd;

	make_tmpdir(dir);
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(dfd, 0);
	/* Created, then replaced whole; durable or not. */
	ck_assert_int_eq(util_replace_file_at(dfd, "m.prom", "one\n", 4, true), 0);
	ck_assert_int_eq(util_replace_file_at(dfd, "m.prom", "two!\n", 5, false), 0);
	snprintf(path, sizeof(path), "%s/m.prom", dir);
	ck_assert_int_eq(util_read_file(path, 100, &out, &len), 0);
	ck_assert_str_eq(out, "two!\n");
	free(out);
	/* By path from the working directory, in a subdirectory. */
	snprintf(path, sizeof(path), "%s/sub", dir);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/sub/x", dir);
	ck_assert_int_eq(util_replace_file_at(AT_FDCWD, path, "", 0, true), 0);
	ck_assert_int_eq(util_read_file(path, 100, &out, &len), 0);
	ck_assert_uint_eq(len, 0);
	free(out);
	/* A failure leaves the old file and no temporary one: a directory
	 * cannot be replaced by a file. */
	snprintf(path, sizeof(path), "%s/sub", dir);
	ck_assert_int_eq(util_replace_file_at(dfd, "sub", "x", 1, false), -EISDIR);
	ck_assert_int_eq(util_replace_file_at(dfd, "nodir/f", "x", 1, false), -ENOENT);
	ck_assert_int_eq(count_entries(dir), 2);
	/* A symbolic link as the name is replaced, never written through. */
	snprintf(path, sizeof(path), "%s/target", dir);
	ck_assert_int_eq(symlinkat(path, dfd, "link"), 0);
	ck_assert_int_eq(util_replace_file_at(dfd, "link", "y", 1, false), 0);
	ck_assert_int_eq(access(path, F_OK), -1);
	/* With a mode, the file has it whatever the umask. */
	struct stat st;
	mode_t old = umask(077);
	ck_assert_int_eq(util_replace_file_mode_at(dfd, "m.prom", "3\n", 2, true, 0644), 0);
	umask(old);
	ck_assert_int_eq(fstatat(dfd, "m.prom", &st, 0), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0644);
	close(dfd);
	rm_rf(dir);
}
END_TEST

START_TEST(test_read_large_file)
{
	enum { LEN = 5 << 20 };
	char dir[64], path[256], *buf, *out;
	size_t len, i;
	int fd;

	make_tmpdir(dir);
	snprintf(path, sizeof(path), "%s/big", dir);
	buf = malloc(LEN);
	for (i = 0; i < LEN; i++)
		buf[i] = (char)(i * 7);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_eq(util_write_all(fd, buf, LEN), 0);
	close(fd);
	ck_assert_int_eq(util_read_file(path, LEN, &out, &len), 0);
	ck_assert_uint_eq(len, LEN);
	ck_assert_mem_eq(out, buf, LEN);
	free(out);
	ck_assert_int_eq(util_read_file(path, LEN - 1, &out, &len), -EFBIG);
	free(buf);
	rm_rf(dir);
}
END_TEST

START_TEST(test_sha256)
{
	uint8_t d[32];
	char hex[65], dir[64], path[256];
	int fd;

	util_sha256("abc", 3, d);
	util_hex(d, 32, hex);
	ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	util_sha256("", 0, d);
	util_hex(d, 32, hex);
	ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");

	make_tmpdir(dir);
	snprintf(path, sizeof(path), "%s/abc", dir);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_eq(util_write_all(fd, "abc", 3), 0);
	close(fd);
	memset(d, 0, sizeof(d));
	ck_assert_int_eq(util_sha256_file(path, d), 0);
	util_hex(d, 32, hex);
	ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	snprintf(path, sizeof(path), "%s/missing", dir);
	ck_assert_int_eq(util_sha256_file(path, d), -ENOENT);
	rm_rf(dir);
}
END_TEST

/* Only a regular file is opened for reading, and nothing else blocks or
 * is opened: a FIFO with no writer, a directory, a symlink with O_NOFOLLOW. */
START_TEST(test_open_regular)
{
	char dir[256], path[300], fifo[300], link[300];
	struct stat st;
	uint8_t d[32];

	make_tmpdir(dir);
	snprintf(path, sizeof(path), "%s/file", dir);
	int fd = open(path, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_eq(util_write_all(fd, "abc", 3), 0);
	close(fd);
	fd = util_open_regular_at(AT_FDCWD, path, 0, &st);
	ck_assert_int_ge(fd, 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_int_eq(st.st_size, 3);
	close(fd);
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	ck_assert_int_eq(util_open_regular_at(AT_FDCWD, fifo, 0, &st), -EINVAL);
	ck_assert(S_ISFIFO(st.st_mode));
	ck_assert_int_eq(util_sha256_file(fifo, d), -EINVAL);
	ck_assert_int_eq(util_open_regular_at(AT_FDCWD, dir, 0, &st), -EINVAL);
	snprintf(link, sizeof(link), "%s/link", dir);
	ck_assert_int_eq(symlink("file", link), 0);
	fd = util_open_regular_at(AT_FDCWD, link, 0, &st);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(util_open_regular_at(AT_FDCWD, link, O_NOFOLLOW, &st), -EINVAL);
	rm_rf(dir);
}
END_TEST

/* A listing's digest: the names, in any order of creation; not "." and
 * ".."; another name or one name less differs; a non-directory fails. */
START_TEST(test_sha256_listing)
{
	char a[256], b[256], path[300];
	struct stat st;
	uint8_t da[32], db[32];

	make_tmpdir(a);
	make_tmpdir(b);
	static const char *const names[] = { "x.gch", "y.gch", "z" };
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/%s", a, names[i]);
		close(open(path, O_CREAT | O_WRONLY, 0600));
		snprintf(path, sizeof(path), "%s/%s", b, names[2 - i]);
		ck_assert_int_eq(mkdir(path, 0700), 0);
	}
	ck_assert_int_eq(util_sha256_listing(a, da, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_int_eq(util_sha256_listing(b, db, &st), 0);
	ck_assert_mem_eq(da, db, 32);
	snprintf(path, sizeof(path), "%s/w", b);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	ck_assert_int_eq(util_sha256_listing(b, db, &st), 0);
	ck_assert_mem_ne(da, db, 32);
	snprintf(path, sizeof(path), "%s/z", a);
	ck_assert_int_eq(util_sha256_listing(path, db, &st), -ENOTDIR);
	rm_rf(a);
	rm_rf(b);
}
END_TEST

/*
 * libkiln's own SHA-256 (proto/sha256.c), both the portable and the SHA-NI
 * compression, against OpenSSL: every length through four blocks (all the
 * padding cases), then long and unaligned buffers of pseudo-random bytes.
 */
START_TEST(test_sha256_own)
{
	enum { MAX = 70000 };
	uint8_t *buf = malloc(MAX + 1), want[32], got[32], port[32];
	uint64_t x = 0x9E3779B97F4A7C15ULL;

	ck_assert_ptr_nonnull(buf);
	for (size_t i = 0; i <= MAX; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (uint8_t)x;
	}
	sha256_buf("abc", 3, got);
	util_sha256("abc", 3, want);
	ck_assert_mem_eq(got, want, 32);
	for (size_t len = 0; len <= 260; len++) {
		util_sha256(buf, len, want);
		sha256_buf(buf, len, got);
		sha256_buf_portable(buf, len, port);
		ck_assert_msg(memcmp(got, want, 32) == 0, "length %zu (hw %d)", len, sha256_hw());
		ck_assert_msg(memcmp(port, want, 32) == 0, "portable, length %zu", len);
	}
	static const size_t lens[] = { 1000, 4095, 4096, 11264, 65535, 65536, MAX };
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		util_sha256(buf + 1, lens[i], want);
		sha256_buf(buf + 1, lens[i], got);
		sha256_buf_portable(buf + 1, lens[i], port);
		ck_assert_msg(memcmp(got, want, 32) == 0, "length %zu", lens[i]);
		ck_assert_msg(memcmp(port, want, 32) == 0, "portable, length %zu", lens[i]);
	}
	free(buf);
}
END_TEST

/*
 * sha256_init/update/final against OpenSSL: every length through four
 * blocks given in pieces of every size from 1 to 70 bytes (a piece that
 * fills the pending block, one that spans it and more, empty updates), and
 * long messages in chunks that straddle block edges.
 */
START_TEST(test_sha256_stream)
{
	enum { MAX = 300000 };
	uint8_t *buf = malloc(MAX), want[32], got[32];
	uint64_t x = 0x9E3779B97F4A7C15ULL;
	ck_assert_ptr_nonnull(buf);
	for (size_t i = 0; i < MAX; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (uint8_t)x;
	}
	for (size_t len = 0; len <= 260; len++) {
		util_sha256(buf, len, want);
		for (size_t piece = 1; piece <= 70; piece++) {
			struct sha256_ctx c;
			sha256_init(&c);
			for (size_t off = 0; off < len; off += piece) {
				sha256_update(&c, buf + off, len - off < piece ? len - off : piece);
				sha256_update(&c, buf, 0);
			}
			sha256_final(&c, got);
			ck_assert_msg(memcmp(got, want, 32) == 0, "length %zu in pieces of %zu", len, piece);
		}
	}
	static const size_t chunks[] = { 1, 63, 64, 65, 4095, 131072, 131073, MAX };
	for (size_t i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
		struct sha256_ctx c;
		util_sha256(buf + 3, MAX - 3, want);
		sha256_init(&c);
		for (size_t off = 3; off < MAX; off += chunks[i])
			sha256_update(&c, buf + off, MAX - off < chunks[i] ? MAX - off : chunks[i]);
		sha256_final(&c, got);
		ck_assert_msg(memcmp(got, want, 32) == 0, "chunks of %zu", chunks[i]);
	}
	free(buf);
}
END_TEST

/*
 * Two digests at once (sha256_buf2, the two messages' rounds interleaved)
 * against OpenSSL: every pair of lengths through four blocks, so that either
 * message ends first, at every padding case, and long unequal pairs at odd
 * offsets; the two results must not leak into each other.
 */
START_TEST(test_sha256_two)
{
	/* Without the SHA instructions sha256_buf2 is two sha256_buf: this
	 * then checks only that. */
	if (!sha256_hw())
		fprintf(stderr, "test_sha256_two: no SHA instructions here, the interleaved "
			"compression is not tested\n");
	enum { MAX = 70000 };
	uint8_t *buf = malloc(2 * MAX + 2), wa[32], wb[32], ga[32], gb[32];
	uint64_t x = 0x2545F4914F6CDD1DULL;

	ck_assert_ptr_nonnull(buf);
	for (size_t i = 0; i < 2 * MAX + 2; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (uint8_t)x;
	}
	const uint8_t *a = buf, *b = buf + MAX + 1;
	for (size_t la = 0; la <= 260; la++)
		for (size_t lb = 0; lb <= 260; lb++) {
			util_sha256(a, la, wa);
			util_sha256(b, lb, wb);
			sha256_buf2(a, la, ga, b, lb, gb);
			ck_assert_msg(memcmp(ga, wa, 32) == 0 && memcmp(gb, wb, 32) == 0,
				      "lengths %zu and %zu (hw %d)", la, lb, sha256_hw());
		}
	static const size_t lens[][2] = { { 11264, 11264 }, { 11777, 4095 }, { 64, 65536 },
					  { MAX, 1000 }, { 0, MAX }, { MAX, MAX } };
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		util_sha256(a + 1, lens[i][0], wa);
		util_sha256(b + 1, lens[i][1], wb);
		sha256_buf2(a + 1, lens[i][0], ga, b + 1, lens[i][1], gb);
		ck_assert_msg(memcmp(ga, wa, 32) == 0 && memcmp(gb, wb, 32) == 0, "lengths %zu and %zu",
			      lens[i][0], lens[i][1]);
	}
	/* One buffer twice. */
	util_sha256(a, 11264, wa);
	sha256_buf2(a, 11264, ga, a, 11264, gb);
	ck_assert(memcmp(ga, wa, 32) == 0 && memcmp(gb, wa, 32) == 0);
	free(buf);
}
END_TEST

START_TEST(test_hex_and_clocks)
{
	static const uint8_t in[] = { 0x00, 0x0f, 0xa5, 0xff };
	char hex[9];
	uint64_t a, b;

	util_hex(in, 4, hex);
	ck_assert_str_eq(hex, "000fa5ff");
	util_hex(in, 0, hex);
	ck_assert_str_eq(hex, "");
	a = util_now_ns();
	usleep(2000);
	b = util_now_ns();
	ck_assert_uint_ge(b - a, 2000000);
	ck_assert_int_gt(util_wall_s(), 1700000000);
}
END_TEST

/* util_hex_value and util_unhex32 against the obvious definition: every
 * byte, and every byte at every position of a digest. */
START_TEST(test_unhex_every_byte)
{
	const char *k = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	uint8_t out[32], want[32];
	char buf[65];

	for (int c = 0; c < 256; c++) {
		unsigned ref = c >= '0' && c <= '9' ? (unsigned)(c - '0')
			       : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10) : 16;
		ck_assert_uint_eq(util_hex_value((char)c), ref);
	}
	ck_assert(util_unhex32(k, want));
	util_hex(want, 32, buf);
	ck_assert_str_eq(buf, k);
	for (int pos = 0; pos < 64; pos++)
		for (int c = 1; c < 256; c++) {
			bool digit = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
			memcpy(buf, k, 65);
			buf[pos] = (char)c;
			ck_assert_int_eq(util_unhex32(buf, out), digit);
			if (digit) {
				char back[65];
				util_hex(out, 32, back);
				ck_assert_str_eq(back, buf);
			}
		}
	ck_assert(!util_unhex32("0123", out));
	ck_assert(!util_unhex32(NULL, out));
}
END_TEST

START_TEST(test_int_text)
{
	char buf[24];
	static const uint64_t u[] = { 0, 7, 10, 99, 100, 9007199254740991ull, UINT64_MAX };
	static const char *const us[] = { "0", "7", "10", "99", "100", "9007199254740991",
					  "18446744073709551615" };
	for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++) {
		ck_assert_uint_eq(util_u64_text(u[i], buf), strlen(us[i]));
		ck_assert_str_eq(buf, us[i]);
	}
	util_i64_text(INT64_MIN, buf);
	ck_assert_str_eq(buf, "-9223372036854775808");
	util_i64_text(-5, buf);
	ck_assert_str_eq(buf, "-5");
	util_i64_text(INT64_MAX, buf);
	ck_assert_str_eq(buf, "9223372036854775807");
}
END_TEST

static void count_val(const char *key, void *val, void *ctx)
{
	size_t *sum = ctx;

	ck_assert_ptr_nonnull(key);
	*sum += (size_t)(uintptr_t)val;
}

static int freed;

static void free_counted(void *val)
{
	freed++;
	free(val);
}

START_TEST(test_table_basic)
{
	struct table *t = table_new();
	void *old = (void *)1;
	size_t sum = 0;
	char key[8];

	ck_assert_ptr_nonnull(t);
	ck_assert_uint_eq(table_count(t), 0);
	ck_assert_ptr_null(table_get(t, "a"));
	ck_assert_int_eq(table_put(t, "a", (void *)10, &old), 0);
	ck_assert_ptr_null(old);
	ck_assert_int_eq(table_put(t, "b", (void *)20, NULL), 0);
	ck_assert_int_eq(table_put(t, "", (void *)30, NULL), 0);
	ck_assert_ptr_eq(table_get(t, "a"), (void *)10);
	ck_assert_ptr_eq(table_get(t, "b"), (void *)20);
	ck_assert_ptr_eq(table_get(t, ""), (void *)30);
	ck_assert_ptr_null(table_get(t, "c"));
	ck_assert_uint_eq(table_count(t), 3);

	/* Replacing hands back the old value and keeps the count. */
	ck_assert_int_eq(table_put(t, "a", (void *)11, &old), 0);
	ck_assert_ptr_eq(old, (void *)10);
	ck_assert_ptr_eq(table_get(t, "a"), (void *)11);
	ck_assert_uint_eq(table_count(t), 3);

	/* Keys are copied. */
	strcpy(key, "temp");
	ck_assert_int_eq(table_put(t, key, (void *)40, NULL), 0);
	strcpy(key, "xxxx");
	ck_assert_ptr_eq(table_get(t, "temp"), (void *)40);
	ck_assert_ptr_null(table_get(t, "xxxx"));

	table_foreach(t, count_val, &sum);
	ck_assert_uint_eq(sum, 11 + 20 + 30 + 40);

	ck_assert_ptr_eq(table_del(t, "a"), (void *)11);
	ck_assert_ptr_null(table_del(t, "a"));
	ck_assert_ptr_null(table_get(t, "a"));
	ck_assert_uint_eq(table_count(t), 3);
	table_free(t, NULL);
	table_free(NULL, NULL);

	t = table_new();
	freed = 0;
	ck_assert_int_eq(table_put(t, "x", malloc(4), NULL), 0);
	ck_assert_int_eq(table_put(t, "y", malloc(4), NULL), 0);
	table_free(t, free_counted);
	ck_assert_int_eq(freed, 2);
}
END_TEST

START_TEST(test_table_100k)
{
	enum { N = 100000 };
	struct table *t = table_new();
	char key[64];
	size_t i;

	for (i = 0; i < N; i++) {
		snprintf(key, sizeof(key), "gt4py:%zx", i * 2654435761u);
		ck_assert_int_eq(table_put(t, key, (void *)(uintptr_t)(i + 1), NULL), 0);
	}
	ck_assert_uint_eq(table_count(t), N);
	for (i = 0; i < N; i++) {
		snprintf(key, sizeof(key), "gt4py:%zx", i * 2654435761u);
		ck_assert_ptr_eq(table_get(t, key), (void *)(uintptr_t)(i + 1));
	}
	ck_assert_ptr_null(table_get(t, "gt4py:nothere"));

	/* Delete every other key; the rest must stay reachable across the
	 * entries that backward-shift deletion moved. */
	for (i = 0; i < N; i += 2) {
		snprintf(key, sizeof(key), "gt4py:%zx", i * 2654435761u);
		ck_assert_ptr_eq(table_del(t, key), (void *)(uintptr_t)(i + 1));
	}
	ck_assert_uint_eq(table_count(t), N / 2);
	for (i = 0; i < N; i++) {
		snprintf(key, sizeof(key), "gt4py:%zx", i * 2654435761u);
		if (i % 2)
			ck_assert_ptr_eq(table_get(t, key), (void *)(uintptr_t)(i + 1));
		else
			ck_assert_ptr_null(table_get(t, key));
	}
	table_free(t, NULL);
}
END_TEST

/* Random puts and deletes against a plain array as the reference, with a
 * small key space so that probe runs collide and wrap around often. */
START_TEST(test_table_random)
{
	enum { KEYS = 2000, OPS = 200000 };
	static uintptr_t ref[KEYS];
	struct table *t = table_new();
	uint64_t r = 88172645463325252ull;
	size_t live = 0, i, k;
	char key[32];
	void *old;

	memset(ref, 0, sizeof(ref));
	for (i = 0; i < OPS; i++) {
		r ^= r << 13;
		r ^= r >> 7;
		r ^= r << 17;
		k = (size_t)(r % KEYS);
		snprintf(key, sizeof(key), "k%zu", k);
		if ((r >> 32) % 3) {
			ck_assert_int_eq(table_put(t, key, (void *)(uintptr_t)(i + 1), &old), 0);
			ck_assert_ptr_eq(old, (void *)ref[k]);
			live += ref[k] == 0;
			ref[k] = i + 1;
		} else {
			ck_assert_ptr_eq(table_del(t, key), (void *)ref[k]);
			live -= ref[k] != 0;
			ref[k] = 0;
		}
		ck_assert_uint_eq(table_count(t), live);
	}
	for (k = 0; k < KEYS; k++) {
		snprintf(key, sizeof(key), "k%zu", k);
		ck_assert_ptr_eq(table_get(t, key), (void *)ref[k]);
	}
	table_free(t, NULL);
}
END_TEST

/* The distance a "did you mean" ranks commands by: a swap of neighbours
 * is one edit, as are an insertion, a deletion, a substitution. */
START_TEST(test_edit_distance)
{
	ck_assert_uint_eq(util_edit_distance("stats", "stats"), 0);
	ck_assert_uint_eq(util_edit_distance("statsu", "stats"), 1);
	ck_assert_uint_eq(util_edit_distance("stauts", "status"), 1);
	ck_assert_uint_eq(util_edit_distance("sttaus", "status"), 1);
	ck_assert_uint_eq(util_edit_distance("sutats", "status"), 2);
	ck_assert_uint_eq(util_edit_distance("", "ls"), 2);
	ck_assert_uint_eq(util_edit_distance("lss", "ls"), 1);
	ck_assert_uint_eq(util_edit_distance("export", "import"), 2);
	ck_assert_uint_eq(util_edit_distance("status", "stop"), 4);
	char big[70];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ck_assert_uint_eq(util_edit_distance(big, "a"), SIZE_MAX);
}
END_TEST

static Suite *util_suite(void)
{
	Suite *s = suite_create("util");
	TCase *tu = tcase_create("util");
	TCase *tt = tcase_create("table");

	tcase_add_test(tu, test_parse_size);
	tcase_add_test(tu, test_format_size);
	tcase_add_test(tu, test_round3);
	tcase_add_test(tu, test_format_age);
	tcase_add_test(tu, test_default_socket);
	tcase_add_test(tu, test_default_cache_dir);
	tcase_add_test(tu, test_mkdir_p);
	tcase_add_test(tu, test_read_write_file);
	tcase_add_test(tu, test_replace_file);
	tcase_add_test(tu, test_read_large_file);
	tcase_add_test(tu, test_sha256);
	tcase_add_test(tu, test_open_regular);
	tcase_add_test(tu, test_sha256_listing);
	tcase_add_test(tu, test_sha256_own);
	tcase_add_test(tu, test_sha256_two);
	tcase_add_test(tu, test_sha256_stream);
	tcase_add_test(tu, test_hex_and_clocks);
	tcase_add_test(tu, test_unhex_every_byte);
	tcase_add_test(tu, test_int_text);
	tcase_add_test(tu, test_edit_distance);
	suite_add_tcase(s, tu);

	tcase_add_test(tt, test_table_basic);
	tcase_add_test(tt, test_table_100k);
	tcase_add_test(tt, test_table_random);
	suite_add_tcase(s, tt);
	return s;
}

int main(void)
{
	return unit_run(util_suite());
}
