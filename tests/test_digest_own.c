/*
 * proto/digest.c built as kiln's CLI builds it (KILN_DIGEST_OWN: hashing
 * with proto/sha256.c, no libcrypto), against OpenSSL called here directly:
 * buffers, files around the read chunk's edges, descriptors, copies and
 * directory listings give the digests kilnd's build gives; and the CLI
 * itself loads no libcrypto.
 */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"
#include "unit.h"

#ifndef KILN_DIGEST_OWN
#error "this suite tests the KILN_DIGEST_OWN build of proto/digest.c"
#endif

static void openssl_sha256(const void *buf, size_t len, uint8_t out[32])
{
	ck_assert_int_eq(EVP_Digest(buf, len, out, NULL, EVP_sha256(), NULL), 1);
}

static uint8_t *random_bytes(size_t n)
{
	uint8_t *b = malloc(n + 1);
	uint64_t x = 0xD1B54A32D192ED03ULL ^ n;
	ck_assert_ptr_nonnull(b);
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b[i] = (uint8_t)x;
	}
	return b;
}

static void make_dir(char dir[64])
{
	snprintf(dir, 64, "/tmp/kiln-test-digest-own.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

START_TEST(test_buffers)
{
	uint8_t *b = random_bytes(70000), want[32], got[32];
	for (size_t len = 0; len < 70000; len = len < 300 ? len + 1 : len * 3 + 7) {
		openssl_sha256(b, len, want);
		util_sha256(b, len, got);
		ck_assert_msg(memcmp(got, want, 32) == 0, "length %zu", len);
	}
	free(b);
}
END_TEST

/* Sizes at the edges of util_sha256_fd's 128 KiB reads and of a block. */
START_TEST(test_files)
{
	static const size_t sizes[] = { 0, 1, 55, 56, 63, 64, 65, 131071, 131072, 131073,
					(1u << 20) + 5 };
	char dir[64], path[128];
	make_dir(dir);
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(dfd, 0);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint8_t *b = random_bytes(sizes[i]), want[32], got[32];
		snprintf(path, sizeof(path), "%s/f%zu", dir, i);
		ck_assert_int_eq(util_write_new_file(path, b, sizes[i]), 0);
		openssl_sha256(b, sizes[i], want);
		ck_assert_int_eq(util_sha256_file(path, got), 0);
		ck_assert_msg(memcmp(got, want, 32) == 0, "file of %zu bytes", sizes[i]);
		snprintf(path, sizeof(path), "f%zu", i);
		memset(got, 0, sizeof(got));
		ck_assert_int_eq(util_sha256_file_at(dfd, path, got), 0);
		ck_assert_msg(memcmp(got, want, 32) == 0, "file_at, %zu bytes", sizes[i]);
		int fd = openat(dfd, path, O_RDONLY);
		ck_assert_int_ge(fd, 0);
		memset(got, 0, sizeof(got));
		ck_assert_int_eq(util_sha256_fd(fd, got), 0);
		ck_assert_msg(memcmp(got, want, 32) == 0, "fd, %zu bytes", sizes[i]);

		/* A copy: the same digest, the same bytes, the size. */
		char copy[128];
		snprintf(copy, sizeof(copy), "%s/c%zu", dir, i);
		int out = open(copy, O_WRONLY | O_CREAT | O_EXCL, 0600);
		uint64_t size = 1;
		memset(got, 0, sizeof(got));
		ck_assert_int_eq(util_copy_sha256(fd, out, &size, got), 0);
		close(out);
		close(fd);
		ck_assert_uint_eq(size, sizes[i]);
		ck_assert_msg(memcmp(got, want, 32) == 0, "copy, %zu bytes", sizes[i]);
		char *text = NULL;
		size_t len = 0;
		ck_assert_int_eq(util_read_file(copy, 4u << 20, &text, &len), 0);
		ck_assert_uint_eq(len, sizes[i]);
		ck_assert(len == 0 || memcmp(text, b, len) == 0);
		free(text);
		free(b);
	}
	close(dfd);
	ck_assert_int_eq(util_sha256_file("/proc/self/status", (uint8_t[32]){ 0 }), -EINVAL);
	snprintf(path, sizeof(path), "%s/none", dir);
	ck_assert_int_eq(util_sha256_file(path, (uint8_t[32]){ 0 }), -ENOENT);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* A listing: its sorted names, each with its NUL. */
START_TEST(test_listing)
{
	char dir[64], path[128];
	make_dir(dir);
	static const char *const names[] = { "zeta", "a.gch", "m" };
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		ck_assert_int_eq(mkdir(path, 0700), 0);
	}
	static const char sorted[] = "a.gch\0m\0zeta";
	uint8_t want[32], got[32];
	struct stat st;
	openssl_sha256(sorted, sizeof(sorted), want);
	ck_assert_int_eq(util_sha256_listing(dir, got, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_mem_eq(got, want, 32);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* The CLI, as built: glibc's loader lists what it would load (what ldd
 * asks it), which must hold libc and no libcrypto. */
START_TEST(test_cli_loads_no_libcrypto)
{
	const char *cli = getenv("KILN_CLI");
	ck_assert_msg(cli != NULL && access(cli, X_OK) == 0, "KILN_CLI names no program: %s",
		      cli != NULL ? cli : "(unset)");
	char cmd[4200], line[512];
	snprintf(cmd, sizeof(cmd), "LD_TRACE_LOADED_OBJECTS=1 '%s' 2>&1", cli);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	bool libc = false, crypto = false;
	while (fgets(line, sizeof(line), p) != NULL) {
		libc |= strstr(line, "libc.so") != NULL;
		crypto |= strstr(line, "libcrypto") != NULL;
	}
	ck_assert_int_eq(pclose(p), 0);
	ck_assert_msg(libc, "the loader's list of %s names no libc: the check would see nothing", cli);
	ck_assert_msg(!crypto, "%s loads libcrypto", cli);
}
END_TEST

static Suite *digest_own_suite(void)
{
	Suite *s = suite_create("digest_own");
	TCase *t = tcase_create("digest_own");
	tcase_add_test(t, test_buffers);
	tcase_add_test(t, test_files);
	tcase_add_test(t, test_listing);
	tcase_add_test(t, test_cli_loads_no_libcrypto);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return unit_run(digest_own_suite());
}
