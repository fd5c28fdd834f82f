/*
 * SHA-256 digests of buffers, files, descriptors and directory listings.
 * Apart from util.c so that libkiln, which needs none, does not pull
 * libcrypto into every rank. kilnd hashes through OpenSSL's EVP interface;
 * built with KILN_DIGEST_OWN (kiln's CLI, client/meson.build) the same
 * functions hash with proto/sha256.c, and the program needs no libcrypto.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#ifndef KILN_DIGEST_OWN
#include <openssl/evp.h>
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "util.h"

#ifdef KILN_DIGEST_OWN
#include "sha256.h"

/* One digest in pieces: OpenSSL's context, or sha256.c's. */
struct hash {
	struct sha256_ctx c;
};

static int hash_begin(struct hash *h)
{
	sha256_init(&h->c);
	return 0;
}

static int hash_add(struct hash *h, const void *data, size_t len)
{
	sha256_update(&h->c, data, len);
	return 0;
}

static int hash_end(struct hash *h, uint8_t out[32])
{
	sha256_final(&h->c, out);
	return 0;
}

static void hash_drop(struct hash *h)
{
	(void)h;
}

void util_sha256(const void *buf, size_t len, uint8_t out[32])
{
	sha256_buf(buf, len, out);
}
#else
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

struct hash {
	EVP_MD_CTX *ctx;
};

/* 0, or -ENOMEM (what an EVP call's failure means: OpenSSL could not
 * allocate); hash_drop frees whatever hash_begin made, either way. */
static int hash_begin(struct hash *h)
{
	h->ctx = EVP_MD_CTX_new();
	return h->ctx != NULL && EVP_DigestInit_ex(h->ctx, util_sha256_md(), NULL) == 1 ? 0 : -ENOMEM;
}

static int hash_add(struct hash *h, const void *data, size_t len)
{
	return EVP_DigestUpdate(h->ctx, data, len) == 1 ? 0 : -ENOMEM;
}

static int hash_end(struct hash *h, uint8_t out[32])
{
	return EVP_DigestFinal_ex(h->ctx, out, NULL) == 1 ? 0 : -ENOMEM;
}

static void hash_drop(struct hash *h)
{
	EVP_MD_CTX_free(h->ctx);
	h->ctx = NULL;
}
#endif

int util_sha256_file(const char *path, uint8_t out[32])
{
	return util_sha256_file_at(AT_FDCWD, path, out);
}

/* Filesystems whose files the kernel makes when they are read. */
bool util_pseudo_fs(long type)
{
	static const long types[] = {
		0x9fa0,      /* proc */
		0x62656572,  /* sysfs */
		0x64626720,  /* debugfs */
		0x74726163,  /* tracefs */
		0x73636673,  /* securityfs */
		0x27e0eb,    /* cgroup */
		0x63677270,  /* cgroup2 */
		0x62656570,  /* configfs */
		0xcafe4a11,  /* bpf */
		0xde5e81e4,  /* efivarfs */
		0x6165676c,  /* pstore */
		0x1cd1,      /* devpts */
		0x65735543,  /* fusectl */
		0x42494e4d,  /* binfmt_misc */
		0xf97cff8c,  /* selinuxfs */
		0x19800202,  /* mqueue */
	};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (type == types[i])
			return true;
	return false;
}

int util_open_regular_at(int dirfd, const char *path, int nofollow, struct stat *st)
{
	/* O_PATH opens nothing of the file itself: no FIFO waits for a writer,
	 * no device's open runs. Only a regular file is then opened for
	 * reading, through the descriptor, so it is the same inode. */
	int pfd = openat(dirfd, path, O_PATH | O_CLOEXEC | (nofollow & O_NOFOLLOW));
	if (pfd < 0)
		return -errno;
	if (fstat(pfd, st) != 0) {
		int e = -errno;
		close(pfd);
		return e;
	}
	/* A "regular file" of procfs or sysfs is made when read, whatever size
	 * it claims (/proc/self/pagemap gives 256 GiB): not a file to hash. */
	struct statfs fs;
	if (!S_ISREG(st->st_mode) || (fstatfs(pfd, &fs) == 0 && util_pseudo_fs((long)fs.f_type))) {
		close(pfd);
		return -EINVAL;
	}
	char self[64];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	int fd = open(self, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0 && errno == ENOENT) /* no /proc: a regular file cannot block */
		fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	int e = -errno;
	close(pfd);
	if (fd < 0)
		return e;
	struct stat now;
	if (fstat(fd, &now) != 0 || now.st_ino != st->st_ino || now.st_dev != st->st_dev) {
		close(fd);
		return -EAGAIN;
	}
	return fd;
}

int util_sha256_file_at(int dirfd, const char *path, uint8_t out[32])
{
	struct stat st;
	int fd = util_open_regular_at(dirfd, path, 0, &st);
	if (fd < 0)
		return fd;
	int rc = util_sha256_fd(fd, out);
	close(fd);
	return rc;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int util_sha256_listing(const char *path, uint8_t out[32], struct stat *st)
{
	/* O_DIRECTORY: anything but a directory fails at once (no FIFO waits). */
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, st) != 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	DIR *dir = fdopendir(fd);
	if (dir == NULL) {
		int e = -errno;
		close(fd);
		return e;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	for (struct dirent *de; rc == 0 && (errno = 0, de = readdir(dir)) != NULL;) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (n == cap) {
			size_t ncap = cap == 0 ? 32 : cap * 2;
			char **nn = realloc(names, ncap * sizeof(*nn));
			if (nn == NULL) {
				rc = -ENOMEM;
				break;
			}
			names = nn;
			cap = ncap;
		}
		if ((names[n] = strdup(de->d_name)) == NULL)
			rc = -ENOMEM;
		else
			n++;
	}
	if (rc == 0 && errno != 0)
		rc = -errno;
	closedir(dir);
	struct hash h;
	int hrc = hash_begin(&h);
	if (rc == 0)
		rc = hrc;
	if (rc == 0 && n > 0)
		qsort(names, n, sizeof(*names), cmp_names);
	/* Each name with its NUL: no two listings hash alike. */
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = hash_add(&h, names[i], strlen(names[i]) + 1);
	if (rc == 0)
		rc = hash_end(&h, out);
	hash_drop(&h);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

int util_sha256_fd(int fd, uint8_t out[32])
{
	enum { CHUNK = 1 << 17 };
	struct hash h;
	char *buf = NULL;
	uint64_t off = 0;
	ssize_t n;
	int rc;

	struct stat st;
	/* At most the size it has now, and one byte more to see it grow: a file
	 * that gives more than its size is changing, or is no file. */
	uint64_t limit = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? (uint64_t)st.st_size + 1 : UINT64_MAX;
	buf = malloc(CHUNK);
	rc = hash_begin(&h);
	if (!buf || rc != 0) {
		rc = -ENOMEM;
		goto cleanup;
	}
	for (;;) {
		if (off >= limit) {
			rc = -EAGAIN;
			goto cleanup;
		}
		/* pread: the descriptor's offset is left alone. */
		n = pread(fd, buf, off + CHUNK > limit ? (size_t)(limit - off) : CHUNK, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			goto cleanup;
		}
		if (n == 0)
			break;
		off += (uint64_t)n;
		if ((rc = hash_add(&h, buf, (size_t)n)) != 0)
			goto cleanup;
	}
	rc = hash_end(&h, out);
cleanup:
	hash_drop(&h);
	free(buf);
	return rc;
}

int util_copy_sha256(int in, int out, uint64_t *size, uint8_t digest[32])
{
	enum { CHUNK = 1 << 20 };
	struct hash h;
	char *buf = malloc(CHUNK);
	int rc = hash_begin(&h) == 0 && buf != NULL ? 0 : -ENOMEM;
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
		rc = hash_add(&h, buf, (size_t)n);
		if (rc == 0 && out >= 0)
			rc = util_write_all(out, buf, (size_t)n);
		off += (uint64_t)n;
	}
	if (rc == 0)
		rc = hash_end(&h, digest);
	hash_drop(&h);
	free(buf);
	*size = off;
	return rc;
}
