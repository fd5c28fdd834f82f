/* The descriptor cache; see fdcache.h. Loop thread only. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fdcache.h"
#include "store.h"
#include "table.h"

struct fdcache {
	struct table *fds;   /* key -> descriptor + 1 */
	uint64_t gen;
	size_t max;
};

static void close_one(const char *key, void *val, void *arg)
{
	(void)key;
	(void)arg;
	close((int)((intptr_t)val - 1));
}

static void empty(struct fdcache *fc)
{
	table_foreach(fc->fds, close_one, NULL);
	table_free(fc->fds, NULL);
	fc->fds = table_new();
}

struct fdcache *fdcache_new(size_t max)
{
	struct fdcache *fc = calloc(1, sizeof(*fc));
	struct rlimit rl;

	if (fc == NULL)
		return NULL;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    max > rl.rlim_cur / 4)
		max = rl.rlim_cur / 4;
	fc->max = max;
	fc->fds = table_new();
	if (fc->fds == NULL) {
		free(fc);
		return NULL;
	}
	return fc;
}

size_t fdcache_capacity(const struct fdcache *fc)
{
	return fc->max;
}

void fdcache_free(struct fdcache *fc)
{
	if (fc == NULL)
		return;
	if (fc->fds != NULL) {
		table_foreach(fc->fds, close_one, NULL);
		table_free(fc->fds, NULL);
	}
	free(fc);
}

/* An entry written again (store_changes_since's callback): its object may
 * have been replaced (a damaged one rebuilt), so its descriptor goes. */
static void forget(void *ctx, const char *key, const char *rkey, const char *alias)
{
	struct fdcache *fc = ctx;
	(void)rkey;
	(void)alias;
	void *v = key != NULL ? table_del(fc->fds, key) : NULL;
	if (v != NULL)
		close((int)((intptr_t)v - 1));
}

int fdcache_open(struct fdcache *fc, uint64_t gen, struct store *s, const char *key,
		 const char *output)
{
	if (fc != NULL && fc->fds != NULL && gen != fc->gen) {
		if (!store_changes_since(s, fc->gen, gen, forget, fc))
			empty(fc);
		fc->gen = gen;
	}
	intptr_t v = fc != NULL && fc->fds != NULL ? (intptr_t)table_get(fc->fds, key) : 0;
	if (v > 0) {
		int fd = fcntl((int)(v - 1), F_DUPFD_CLOEXEC, 0);
		return fd >= 0 ? fd : -errno;
	}
	int fd = store_object_open(s, key, output);
	if (fd < 0)
		return fd;
	if (fc == NULL || fc->fds == NULL || fc->max == 0)
		return fd;
	if (table_count(fc->fds) >= fc->max)
		empty(fc);
	int keep = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (keep >= 0 && (fc->fds == NULL || table_put(fc->fds, key, (void *)(intptr_t)(keep + 1), NULL) != 0))
		close(keep);
	return fd;
}
