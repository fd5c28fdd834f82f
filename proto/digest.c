/*
 * SHA-256 digests through OpenSSL's EVP interface. Apart from util.c so that
 * libkiln, which needs none, does not pull libcrypto into every rank.
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "util.h"

/*
 * OpenSSL 3 looks the algorithm up in its provider tables on every
 * EVP_sha256() init (an "implicit fetch", a measurable part of keying a warm
 * request); fetching it once and reusing it avoids that.
 */
static const EVP_MD *sha256_md;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void sha256_fetch(void)
{
	sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
	if (!sha256_md)
		sha256_md = EVP_sha256();
}

const EVP_MD *util_sha256_md(void)
{
	pthread_once(&sha256_once, sha256_fetch);
	return sha256_md;
}

void util_sha256(const void *buf, size_t len, uint8_t out[32])
{
	/* EVP_Digest fails only when OpenSSL cannot allocate. A wrong digest
	 * would silently poison a content-addressed cache, so stop instead. */
	if (EVP_Digest(buf, len, out, NULL, util_sha256_md(), NULL) != 1)
		abort();
}

int util_sha256_file(const char *path, uint8_t out[32])
{
	return util_sha256_file_at(AT_FDCWD, path, out);
}

int util_sha256_file_at(int dirfd, const char *path, uint8_t out[32])
{
	enum { CHUNK = 1 << 17 };
	EVP_MD_CTX *ctx = NULL;
	char *buf = NULL;
	ssize_t n;
	int fd, rc;

	fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	buf = malloc(CHUNK);
	ctx = EVP_MD_CTX_new();
	if (!buf || !ctx || EVP_DigestInit_ex(ctx, util_sha256_md(), NULL) != 1) {
		rc = -ENOMEM;
		goto cleanup;
	}
	for (;;) {
		n = util_read_retry(fd, buf, CHUNK);
		if (n < 0) {
			rc = (int)n;
			goto cleanup;
		}
		if (n == 0)
			break;
		if (EVP_DigestUpdate(ctx, buf, (size_t)n) != 1) {
			rc = -ENOMEM;
			goto cleanup;
		}
	}
	rc = EVP_DigestFinal_ex(ctx, out, NULL) == 1 ? 0 : -ENOMEM;
cleanup:
	EVP_MD_CTX_free(ctx);
	free(buf);
	close(fd);
	return rc;
}

int util_copy_sha256(int in, int out, uint64_t *size, uint8_t digest[32])
{
	enum { CHUNK = 1 << 20 };
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	char *buf = malloc(CHUNK);
	int rc = md && buf && EVP_DigestInit_ex(md, util_sha256_md(), NULL) == 1 ? 0 : -ENOMEM;
	uint64_t off = 0;

	while (rc == 0) {
		ssize_t n = pread(in, buf, CHUNK, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			break;
		}
		if (n == 0)
			break;
		if (EVP_DigestUpdate(md, buf, (size_t)n) != 1)
			rc = -ENOMEM;
		else if (out >= 0)
			rc = util_write_all(out, buf, (size_t)n);
		off += (uint64_t)n;
	}
	if (rc == 0 && EVP_DigestFinal_ex(md, digest, NULL) != 1)
		rc = -ENOMEM;
	EVP_MD_CTX_free(md);
	free(buf);
	*size = off;
	return rc;
}
