/*
 * SHA-256 digests through OpenSSL's EVP interface. Apart from util.c so that
 * libkiln, which needs none, does not pull libcrypto into every rank.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
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
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (rc == 0 && (ctx == NULL || EVP_DigestInit_ex(ctx, util_sha256_md(), NULL) != 1))
		rc = -ENOMEM;
	if (rc == 0 && n > 0)
		qsort(names, n, sizeof(*names), cmp_names);
	/* Each name with its NUL: no two listings hash alike. */
	for (size_t i = 0; rc == 0 && i < n; i++)
		if (EVP_DigestUpdate(ctx, names[i], strlen(names[i]) + 1) != 1)
			rc = -ENOMEM;
	if (rc == 0 && EVP_DigestFinal_ex(ctx, out, NULL) != 1)
		rc = -ENOMEM;
	EVP_MD_CTX_free(ctx);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

int util_sha256_fd(int fd, uint8_t out[32])
{
	enum { CHUNK = 1 << 17 };
	EVP_MD_CTX *ctx = NULL;
	char *buf = NULL;
	uint64_t off = 0;
	ssize_t n;
	int rc;

	struct stat st;
	/* At most the size it has now, and one byte more to see it grow: a file
	 * that gives more than its size is changing, or is no file. */
	uint64_t limit = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? (uint64_t)st.st_size + 1 : UINT64_MAX;
	buf = malloc(CHUNK);
	ctx = EVP_MD_CTX_new();
	if (!buf || !ctx || EVP_DigestInit_ex(ctx, util_sha256_md(), NULL) != 1) {
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
		if (EVP_DigestUpdate(ctx, buf, (size_t)n) != 1) {
			rc = -ENOMEM;
			goto cleanup;
		}
	}
	rc = EVP_DigestFinal_ex(ctx, out, NULL) == 1 ? 0 : -ENOMEM;
cleanup:
	EVP_MD_CTX_free(ctx);
	free(buf);
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
