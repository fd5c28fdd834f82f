/*
 * The digest cache; see digests.h. One mutex around a string table: the
 * hashing itself runs outside the lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "digests.h"
#include "table.h"
#include "util.h"

/* Plenty for every input of a node's builds; emptied when full. */
#define DIGESTS_MAX 65536

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct table *cache;

static void ident_key(const struct stat *st, char *key, size_t cap)
{
	snprintf(key, cap, "%llx:%llx:%llx:%llx.%lx:%llx.%lx", (unsigned long long)st->st_dev,
		 (unsigned long long)st->st_ino, (unsigned long long)st->st_size,
		 (unsigned long long)st->st_mtim.tv_sec, (long)st->st_mtim.tv_nsec,
		 (unsigned long long)st->st_ctim.tv_sec, (long)st->st_ctim.tv_nsec);
}

bool digests_settled(const struct stat *st)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	int64_t n = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
	int64_t c = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
	int64_t m = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
	return n - c > DIGESTS_RACY_NS && n - m > DIGESTS_RACY_NS;
}

static bool digest_same_ident(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

static atomic_uint_least64_t n_hashed, n_hashed_bytes, n_cached;

void digests_counts(uint64_t *hashed, uint64_t *hashed_bytes, uint64_t *cached)
{
	*hashed = atomic_load(&n_hashed);
	*hashed_bytes = atomic_load(&n_hashed_bytes);
	*cached = atomic_load(&n_cached);
}

/* The cached digest of the identity st, if any. */
static bool cached(const struct stat *st, uint8_t out[32])
{
	char key[160];
	ident_key(st, key, sizeof(key));
	pthread_mutex_lock(&lock);
	uint8_t *hit = cache != NULL ? table_get(cache, key) : NULL;
	if (hit != NULL)
		memcpy(out, hit, 32);
	pthread_mutex_unlock(&lock);
	return hit != NULL;
}

int digests_file(const char *path, uint8_t out[32], struct stat *st)
{
	char key[160];
	struct stat after;
	/* Opened without blocking and checked by what was opened, not by an
	 * earlier stat: a FIFO or device swapped in for a file between the two
	 * must neither hold the thread in open() or read() nor be hashed. */
	int fd = util_open_regular_at(AT_FDCWD, path, 0, st);
	if (fd < 0)
		return fd == -EINVAL ? -EISDIR : fd;
	if (cached(st, out)) {
		close(fd);
		atomic_fetch_add(&n_cached, 1);
		return 0;
	}
	int rc = util_sha256_fd(fd, out) != 0 ? -EIO : 0;
	if (rc == 0 && fstat(fd, &after) != 0)
		rc = -errno;
	close(fd);
	if (rc != 0)
		return rc;
	atomic_fetch_add(&n_hashed, 1);
	atomic_fetch_add(&n_hashed_bytes, (uint64_t)st->st_size);
	/* Unchanged while read, and still what the path names. */
	if (!digest_same_ident(st, &after))
		return -EAGAIN;
	if (stat(path, &after) != 0)
		return -errno;
	if (!digest_same_ident(st, &after))
		return -EAGAIN;
	ident_key(st, key, sizeof(key));
	if (!digests_settled(st))
		return 0;
	uint8_t *copy = malloc(32);
	if (copy == NULL)
		return 0;
	memcpy(copy, out, 32);
	pthread_mutex_lock(&lock);
	if (cache != NULL && table_count(cache) >= DIGESTS_MAX) {
		table_free(cache, free);
		cache = NULL;
	}
	if (cache == NULL)
		cache = table_new();
	void *old = NULL;
	if (cache == NULL || table_put(cache, key, copy, &old) != 0)
		free(copy);
	free(old);
	pthread_mutex_unlock(&lock);
	return 0;
}

void digests_fini(void)
{
	pthread_mutex_lock(&lock);
	table_free(cache, free);
	cache = NULL;
	pthread_mutex_unlock(&lock);
}
