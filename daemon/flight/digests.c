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

/*
 * Kept across restarts of kilnd within one boot (a job's prologue starts
 * kilnd anew on the node's cache): saved at a clean stop, loaded at start,
 * tagged with the kernel's boot id. An identity stands for content only
 * while device numbers mean the same devices, which a reboot may change
 * (and a tmpfs begins anew), so a file of another boot is not read.
 */
#define SAVE_MAGIC "kiln-digests 1 "
#define SAVE_MAX ((size_t)DIGESTS_MAX * 180 + 128)

static bool boot_id(char out[40])
{
	char *text = NULL;
	size_t len = 0;
	if (util_read_file("/proc/sys/kernel/random/boot_id", 64, &text, &len) != 0)
		return false;
	size_t n = strcspn(text, "\n");
	bool ok = n >= 16 && n < 40;
	if (ok) {
		memcpy(out, text, n);
		out[n] = '\0';
	}
	free(text);
	return ok;
}

struct save_buf {
	char *text;
	size_t len, cap;
	bool oom;
};

static void save_one(const char *key, void *val, void *arg)
{
	struct save_buf *b = arg;
	char hex[65];
	util_hex(val, 32, hex);
	size_t need = strlen(key) + 1 + 64 + 1;
	if (b->oom || b->len + need + 1 > b->cap) {
		b->oom = true;
		return;
	}
	b->len += (size_t)snprintf(b->text + b->len, b->cap - b->len, "%s %s\n", key, hex);
}

int digests_save(int dirfd, const char *name, int tmpfd)
{
	char boot[40], tmp[300];
	if (!boot_id(boot))
		return -ENOENT;
	pthread_mutex_lock(&lock);
	size_t n = cache != NULL ? table_count(cache) : 0;
	struct save_buf b = { .cap = n * 180 + 128 };
	b.text = malloc(b.cap);
	if (b.text != NULL) {
		b.len = (size_t)snprintf(b.text, b.cap, SAVE_MAGIC "%s\n", boot);
		if (cache != NULL)
			table_foreach(cache, save_one, &b);
	}
	pthread_mutex_unlock(&lock);
	if (b.text == NULL || b.oom) {
		free(b.text);
		return -ENOMEM;
	}
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", name, (int)getpid());
	int fd = openat(tmpfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int rc = fd < 0 ? -errno : 0;
	if (rc == 0 && (write(fd, b.text, b.len) != (ssize_t)b.len || fsync(fd) != 0))
		rc = errno != 0 ? -errno : -EIO;
	if (fd >= 0)
		close(fd);
	free(b.text);
	if (rc == 0 && renameat(tmpfd, tmp, dirfd, name) != 0)
		rc = -errno;
	if (rc != 0)
		unlinkat(tmpfd, tmp, 0);
	return rc;
}

/* "dev:ino:size:mtime.ns:ctime.ns", as ident_key writes it. */
static bool ident_key_ok(const char *k, size_t len)
{
	int colons = 0, dots = 0;
	if (len == 0 || len >= 160)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = k[i];
		colons += c == ':';
		dots += c == '.';
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == ':' || c == '.'))
			return false;
	}
	return colons == 4 && dots == 2;
}

long digests_load(int dirfd, const char *name)
{
	char boot[40], *text = NULL;
	size_t len = 0;
	long n = 0;
	if (!boot_id(boot))
		return -ENOENT;
	int rc = util_read_file_at(dirfd, name, SAVE_MAX, &text, &len);
	if (rc != 0)
		return rc;
	size_t head = strlen(SAVE_MAGIC) + strlen(boot);
	if (len <= head || memcmp(text, SAVE_MAGIC, strlen(SAVE_MAGIC)) != 0 ||
	    memcmp(text + strlen(SAVE_MAGIC), boot, strlen(boot)) != 0 || text[head] != '\n') {
		free(text);
		return -ESTALE;   /* another boot, or not ours */
	}
	pthread_mutex_lock(&lock);
	if (cache == NULL)
		cache = table_new();
	for (char *line = text + head + 1, *end; cache != NULL && line < text + len; line = end + 1) {
		end = memchr(line, '\n', (size_t)(text + len - line));
		if (end == NULL)
			break;
		char *sp = memchr(line, ' ', (size_t)(end - line));
		uint8_t digest[32], *copy;
		if (sp == NULL || end - sp - 1 != 64 || !ident_key_ok(line, (size_t)(sp - line)))
			continue;
		*sp = '\0';
		*end = '\0';
		if (!util_unhex32(sp + 1, digest) || table_count(cache) >= DIGESTS_MAX ||
		    table_get(cache, line) != NULL || (copy = malloc(32)) == NULL)
			continue;
		memcpy(copy, digest, 32);
		if (table_put(cache, line, copy, NULL) != 0)
			free(copy);
		else
			n++;
	}
	pthread_mutex_unlock(&lock);
	free(text);
	return n;
}

void digests_fini(void)
{
	pthread_mutex_lock(&lock);
	table_free(cache, free);
	cache = NULL;
	pthread_mutex_unlock(&lock);
}
