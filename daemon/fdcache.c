/* The descriptor cache; see fdcache.h. Loop thread only. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fdcache.h"
#include "store.h"
#include "table.h"

struct fdref {
	int fd;
	unsigned refs;
};

struct fdcache {
	struct table *fds;   /* key -> struct fdref, holding one reference */
	uint64_t gen;
	size_t max;
};

int fdref_fd(const struct fdref *r)
{
	return r->fd;
}

void fdref_put(struct fdref *r)
{
	if (r == NULL || --r->refs > 0)
		return;
	close(r->fd);
	free(r);
}

static struct fdref *fdref_new(int fd)
{
	struct fdref *r = malloc(sizeof(*r));
	if (r != NULL) {
		r->fd = fd;
		r->refs = 1;
	}
	return r;
}

static void close_one(const char *key, void *val, void *arg)
{
	(void)key;
	(void)arg;
	fdref_put(val);
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
	fdref_put(key != NULL ? table_del(fc->fds, key) : NULL);
}

int fdcache_borrow(struct fdcache *fc, uint64_t gen, struct store *s, const char *key,
		   const char *output, struct fdref **ref)
{
	*ref = NULL;
	if (fc != NULL && fc->fds != NULL && gen != fc->gen) {
		if (!store_changes_since(s, fc->gen, gen, forget, fc))
			empty(fc);
		fc->gen = gen;
	}
	struct fdref *r = fc != NULL && fc->fds != NULL ? table_get(fc->fds, key) : NULL;
	if (r != NULL) {
		r->refs++;
		*ref = r;
		return 0;
	}
	int fd = store_object_open(s, key, output);
	if (fd < 0)
		return fd;
	if ((r = fdref_new(fd)) == NULL) {
		close(fd);
		return -ENOMEM;
	}
	*ref = r;
	if (fc == NULL || fc->fds == NULL || fc->max == 0)
		return 0;
	if (table_count(fc->fds) >= fc->max)
		empty(fc);
	/* Not cached when the table cannot take it: the caller's reference
	 * is then the only one. */
	if (fc->fds != NULL && table_put(fc->fds, key, r, NULL) == 0)
		r->refs++;
	return 0;
}
