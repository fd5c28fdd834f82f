/*
 * Toolchains named by path (named.h). Who may name which: the daemon's
 * owner any compiler that only they or root can change; a user admitted
 * with --allow-uid/--allow-group only one under a --toolchain-dir, under the
 * same rule. "Change" covers the file and every directory above its
 * resolved path (a directory others may write without the sticky bit lets
 * them put their own program in its place, the rule --upstream applies),
 * and every symbolic link on the way as named: each one lies in a
 * directory the rule covers, so none can be turned to another program
 * between the check and a run. The program must also say it is a C, C++
 * or CUDA compiler (key.h's key_toolchain_known): a site directory with
 * python3 in it does not make python3 a compiler an admitted user may
 * have kilnd run on their source.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpu.h"
#include "kilnd.h"
#include "log.h"
#include "named.h"
#include "table.h"
#include "thread.h"
#include "util.h"

/* A named toolchain is checked again at most this often. */
#define NAMED_RECHECK_NS 1000000000ull
/* One that could not be identified is tried again after this. */
#define NAMED_RETRY_NS 5000000000ull

struct named_wait {
	void (*cb)(void *arg);
	void *arg;
	struct named_wait *next;
};

struct named {
	struct kilnd *d;
	char *path, *host;        /* as named */
	struct toolchain *tc;     /* identified, or NULL */
	bool busy;                /* being identified on the pool */
	char why[512];            /* why it cannot be used, or "" */
	uint64_t checked_ns;      /* when last identified or found current */
	struct named_wait *waiters;
};

/* What the pool job makes. */
struct ident_job {
	struct named *n;
	struct toolchain *tc;
	int rc;
	char err[512];
};

/* Identities replaced while builds may still hold them: freed at stop. */
struct named_retired {
	struct toolchain *tc;
	struct named_retired *next;
};

/* The table's key: path, and the host compiler after a newline (which
 * neither may contain: validate_compiler_path). */
static void named_key(const char *path, const char *host, char *out, size_t cap)
{
	snprintf(out, cap, "%s\n%s", path, host != NULL ? host : "");
}

/* Whether root or owner alone can change path: it and every directory
 * above its resolved path. */
static bool only_owner_changes(const char *path, uid_t owner, char *why, size_t cap)
{
	char real[PATH_MAX];
	struct stat st;
	if (realpath(path, real) == NULL) {
		snprintf(why, cap, "%s: %s", path, strerror(errno));
		return false;
	}
	for (;;) {
		if (stat(real, &st) != 0) {
			snprintf(why, cap, "%s: %s", real, strerror(errno));
			return false;
		}
		/* Others may add names to a sticky directory, not replace ours. */
		bool sticky_dir = S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX) != 0;
		if (st.st_uid != 0 && st.st_uid != owner) {
			snprintf(why, cap, "%s belongs to uid %u, who could replace the compiler",
				 real, (unsigned)st.st_uid);
			return false;
		}
		if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && !sticky_dir) {
			snprintf(why, cap, "%s is writable by group or others (mode %04o): they could "
				 "replace the compiler", real, (unsigned)(st.st_mode & 07777));
			return false;
		}
		if (strcmp(real, "/") == 0)
			return true;
		char *slash = strrchr(real, '/');
		if (slash == real)
			slash[1] = '\0';
		else
			*slash = '\0';
	}
}

static bool under_toolchain_dir(const struct config *cfg, const char *real)
{
	for (size_t i = 0; i < cfg->ntoolchain_dirs; i++) {
		size_t n = strlen(cfg->toolchain_dirs[i]);
		if (strncmp(real, cfg->toolchain_dirs[i], n) == 0 &&
		    (real[n] == '/' || strcmp(cfg->toolchain_dirs[i], "/") == 0))
			return true;
	}
	return false;
}

/* Whether root or owner alone can change what path names: every prefix
 * of it as written ("/opt", "/opt/gcc", ...) by its resolved path and the
 * directories above that. A symbolic link among the prefixes lies in the
 * directory the one before it resolved to, and its target is the next
 * one's resolved path: both covered. */
static bool named_chain_safe(const char *path, uid_t owner, char *why, size_t cap)
{
	char prefix[PATH_MAX];
	size_t len = strlen(path);
	if (len >= sizeof(prefix)) {
		snprintf(why, cap, "%.64s...: the path is too long", path);
		return false;
	}
	for (size_t i = 1; i <= len; i++) {
		if (i < len && path[i] != '/')
			continue;
		memcpy(prefix, path, i);
		prefix[i] = '\0';
		if (!only_owner_changes(prefix, owner, why, cap))
			return false;
	}
	return true;
}

bool named_may(const struct kilnd *d, const char *path, uid_t uid, char *why, size_t cap)
{
	char real[PATH_MAX];
	uid_t owner = getuid();
	if (uid != owner) {
		if (realpath(path, real) == NULL || !under_toolchain_dir(d->cfg, real)) {
			snprintf(why, cap, "%s is not under a directory kilnd's --toolchain-dir names "
				 "(%s): users kilnd admits may name only those compilers", path,
				 d->cfg->ntoolchain_dirs == 0 ? "none given" : d->cfg->toolchain_dirs[0]);
			return false;
		}
	}
	return named_chain_safe(path, owner, why, cap);
}

static void ident_work(void *arg)
{
	struct ident_job *j = arg;
	ASSERT_POOL();
	char name[2 * PATH_MAX + 16];
	/* Its name in entries and logs: the path, and nvcc's host compiler. */
	snprintf(name, sizeof(name), "%s%s%s", j->n->path, j->n->host != NULL ? " -ccbin " : "",
		 j->n->host != NULL ? j->n->host : "");
	j->tc = calloc(1, sizeof(*j->tc));
	j->rc = j->tc == NULL ? -ENOMEM
			      : key_toolchain_init(j->tc, name, j->n->path, j->n->host, j->err,
						   sizeof(j->err));
	if (j->rc == 0 && !key_toolchain_known(j->tc)) {
		snprintf(j->err, sizeof(j->err), "%s: its --version (\"%.120s\") names no C, C++ or "
			 "CUDA compiler kiln knows (GCC, Clang, NVIDIA, Intel, Cray); configure it "
			 "with kilnd --toolchain NAME=PATH instead", j->n->path, j->tc->version);
		key_toolchain_fini(j->tc);
		j->rc = -EINVAL;
	}
}

/* nvcc's architectures, as for a configured nvcc (main.c's gpus_init). */
static void finish_nvcc(struct kilnd *d, struct toolchain *tc)
{
	if (!tc->is_nvcc)
		return;
	for (size_t i = 0; i < d->ntoolchains; i++) {
		if (d->toolchains[i].is_nvcc && d->toolchains[i].cuda_arch != NULL) {
			tc->cuda_arch = strdup(d->toolchains[i].cuda_arch);
			return;
		}
	}
	tc->cuda_arch = d->gpus != NULL ? gpu_arch_list(d->gpus, d->cfg->cuda_arch) : NULL;
}

static void retire(struct kilnd *d, struct toolchain *tc)
{
	struct named_retired *r = calloc(1, sizeof(*r));
	if (r == NULL) {
		/* Leaked rather than freed under a build that may use it. */
		return;
	}
	r->tc = tc;
	r->next = d->named_retired;
	d->named_retired = r;
	d->nnamed_retired++;
}

static void wake(struct named *n)
{
	struct named_wait *w = n->waiters;
	n->waiters = NULL;
	while (w != NULL) {
		struct named_wait *next = w->next;
		w->cb(w->arg);
		free(w);
		w = next;
	}
}

static void ident_done(void *arg)
{
	struct ident_job *j = arg;
	struct named *n = j->n;
	ASSERT_LOOP();
	n->busy = false;
	n->checked_ns = util_now_ns();
	if (n->tc != NULL)
		retire(n->d, n->tc);
	n->tc = NULL;
	if (j->rc == 0) {
		n->tc = j->tc;
		n->tc->named = true;  /* runs by the path as named: named_may checked it */
		finish_nvcc(n->d, n->tc);
		n->why[0] = '\0';
		log_info("toolchain %s%s%s: %s (%s)", n->path, n->host != NULL ? " with host compiler " : "",
			 n->host != NULL ? n->host : "", n->tc->real_path, n->tc->version);
	} else {
		if (j->tc != NULL)
			key_toolchain_fini(j->tc);
		free(j->tc);
		snprintf(n->why, sizeof(n->why), "%s", j->err);
		log_warn("%s", n->why);
	}
	free(j);
	wake(n);
}

static int identify(struct named *n)
{
	struct ident_job *j = calloc(1, sizeof(*j));
	if (j == NULL)
		return -ENOMEM;
	j->n = n;
	if (kilnd_work(n->d, ident_work, ident_done, j) != 0) {
		free(j);
		return -ENOMEM;
	}
	n->busy = true;
	return 0;
}

/* Collects the names that failed and nobody waits for. */
static void collect_failed(const char *key, void *val, void *arg)
{
	struct named *n = val;
	char ***keys = arg;
	if (n->tc == NULL && !n->busy && n->waiters == NULL && (**keys = strdup(key)) != NULL)
		(*keys)++;
}

static void free_named(void *val);

/* A full table drops the names that could not be identified. */
static void drop_failed(struct kilnd *d)
{
	char *keys[NAMED_MAX + 1] = { NULL }, **end = keys;
	table_foreach(d->named, collect_failed, &end);
	for (char **k = keys; k < end; k++) {
		struct named *n = table_del(d->named, *k);
		if (n != NULL)
			free_named(n);
		free(*k);
	}
}

static struct named *named_new(struct kilnd *d, const char *key, const char *path, const char *host)
{
	if (d->named == NULL && (d->named = table_new()) == NULL)
		return NULL;
	if (table_count(d->named) + d->nnamed_retired >= NAMED_MAX)
		drop_failed(d);
	if (table_count(d->named) + d->nnamed_retired >= NAMED_MAX)
		return NULL;
	struct named *n = calloc(1, sizeof(*n));
	if (n == NULL || (n->path = strdup(path)) == NULL ||
	    (host != NULL && (n->host = strdup(host)) == NULL) || table_put(d->named, key, n, NULL) != 0) {
		if (n != NULL)
			free(n->path);
		free(n);
		return NULL;
	}
	n->d = d;
	return n;
}

/* Whether n's identity needs taking (again) now. */
static bool stale(struct named *n, uint64_t now)
{
	if (n->busy)
		return false;
	if (n->tc == NULL)
		return n->checked_ns == 0 || now - n->checked_ns >= NAMED_RETRY_NS;
	if (now - n->checked_ns < NAMED_RECHECK_NS)
		return false;
	if (key_toolchain_current(n->tc)) {
		n->checked_ns = now;
		return false;
	}
	log_info("toolchain %s changed: identified again", n->path);
	return true;
}

enum named_result named_find(struct kilnd *d, const char *name, const char *host, uid_t uid,
			     const struct toolchain **out, void (*cb)(void *arg), void *arg,
			     char *why, size_t cap)
{
	char key[2 * PATH_MAX + 2];
	ASSERT_LOOP();
	*out = NULL;
	if (name[0] != '/' && host == NULL) {
		*out = kilnd_toolchain(d, name);
		if (*out == NULL)
			snprintf(why, cap, "toolchain \"%s\" is not configured", name);
		return *out != NULL ? NAMED_READY : NAMED_REFUSED;
	}
	/* A configured name with a host compiler: nvcc's path. */
	const struct toolchain *conf = name[0] != '/' ? kilnd_toolchain(d, name) : NULL;
	if (name[0] != '/' && conf == NULL) {
		snprintf(why, cap, "toolchain \"%s\" is not configured", name);
		return NAMED_REFUSED;
	}
	const char *path = conf != NULL ? conf->path : name;
	if (!named_may(d, path, uid, why, cap) || (host != NULL && !named_may(d, host, uid, why, cap)))
		return NAMED_REFUSED;
	named_key(path, host, key, sizeof(key));
	struct named *n = d->named != NULL ? table_get(d->named, key) : NULL;
	if (n == NULL && (n = named_new(d, key, path, host)) == NULL) {
		snprintf(why, cap, "kilnd knows %d toolchains named by path already, or is out of "
			 "memory", NAMED_MAX);
		return NAMED_REFUSED;
	}
	if (stale(n, util_now_ns()) && identify(n) != 0) {
		snprintf(why, cap, "out of memory");
		return NAMED_REFUSED;
	}
	if (!n->busy && n->tc != NULL) {
		*out = n->tc;
		return NAMED_READY;
	}
	if (!n->busy) {
		snprintf(why, cap, "%s", n->why);
		return NAMED_REFUSED;
	}
	struct named_wait *w = calloc(1, sizeof(*w));
	if (w == NULL) {
		snprintf(why, cap, "out of memory");
		return NAMED_REFUSED;
	}
	*w = (struct named_wait){ .cb = cb, .arg = arg, .next = n->waiters };
	n->waiters = w;
	return NAMED_PENDING;
}

const struct toolchain *named_known(struct kilnd *d, const char *name, const char *host)
{
	char key[2 * PATH_MAX + 2];
	if (name[0] != '/' && host == NULL)
		return kilnd_toolchain(d, name);
	named_key(name, host, key, sizeof(key));
	struct named *n = d->named != NULL ? table_get(d->named, key) : NULL;
	return n != NULL && !n->busy ? n->tc : NULL;
}

int named_of_entry(const struct kilnd *d, const char *name, const struct toolchain **conf,
		   struct toolchain **owned, char *why, size_t cap)
{
	char path[PATH_MAX + 1];
	const char *host = NULL;
	*conf = NULL;
	*owned = NULL;
	if (name[0] != '/') {
		*conf = kilnd_toolchain(d, name);
		if (*conf == NULL)
			snprintf(why, cap, "its toolchain \"%s\" is not configured here", name);
		return *conf != NULL ? 0 : -1;
	}
	const char *sep = strstr(name, " -ccbin /");
	snprintf(path, sizeof(path), "%.*s", sep != NULL ? (int)(sep - name) : PATH_MAX, name);
	host = sep != NULL ? sep + 8 : NULL;
	if (!named_may(d, path, getuid(), why, cap) || (host != NULL && !named_may(d, host, getuid(), why, cap)))
		return -1;
	struct toolchain *tc = calloc(1, sizeof(*tc));
	if (tc == NULL || key_toolchain_init(tc, name, path, host, why, cap) != 0) {
		free(tc);
		return -1;
	}
	tc->named = true;
	*owned = tc;
	return 0;
}

struct each {
	void (*fn)(const struct toolchain *tc, void *arg);
	void *arg;
};

static void each_named(const char *key, void *val, void *arg)
{
	const struct named *n = val;
	const struct each *e = arg;
	(void)key;
	if (n->tc != NULL && !n->busy)
		e->fn(n->tc, e->arg);
}

void named_foreach(struct kilnd *d, void (*fn)(const struct toolchain *tc, void *arg), void *arg)
{
	struct each e = { .fn = fn, .arg = arg };
	if (d->named != NULL)
		table_foreach(d->named, each_named, &e);
}

size_t named_count(const struct kilnd *d)
{
	return d->named != NULL ? table_count(d->named) : 0;
}

static void free_named(void *val)
{
	struct named *n = val;
	if (n->tc != NULL)
		key_toolchain_fini(n->tc);
	free(n->tc);
	free(n->path);
	free(n->host);
	free(n);
}

void named_fini(struct kilnd *d)
{
	table_free(d->named, free_named);
	d->named = NULL;
	while (d->named_retired != NULL) {
		struct named_retired *r = d->named_retired;
		d->named_retired = r->next;
		key_toolchain_fini(r->tc);
		free(r->tc);
		free(r);
	}
	d->nnamed_retired = 0;
}
