/*
 * What a finished build depends on, on the thread pool before publishing:
 * the trace that kiln-observe.so wrote (daemon/flight/trace.c); a build
 * the toolchain could not be traced completely for is served and not
 * cached (no other list is complete). Every input is checked against the identity
 * it had when the toolchain opened it, and hashed; an input that changed
 * while the build ran is reported, and the build is not published.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "deps.h"
#include "digests.h"
#include "log.h"
#include "pseudo.h"
#include "tcenv.h"
#include "table.h"
#include "trace.h"
#include "tracedir.h"
#include "util.h"

bool deps_search(const char *path, const char *name, char *out, size_t cap)
{
	out[0] = '\0';
	for (const char *p = path; *p != '\0';) {
		size_t n = strcspn(p, ":");
		struct stat st;
		if (n > 0 && p[0] == '/' &&
		    snprintf(out, cap, "%.*s%s%s", (int)n, p, p[n - 1] == '/' ? "" : "/", name) < (int)cap &&
		    stat(out, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) != 0)
			return true;
		p += n + (p[n] == ':');
	}
	out[0] = '\0';
	return false;
}

/* Whether the directory of the absolute path p (len bytes up to its last
 * '/') is an entry of the ':'-separated list. */
static bool dir_in_path(const char *list, const char *p, size_t len)
{
	for (const char *e = list; *e != '\0';) {
		size_t n = strcspn(e, ":"), m = n;
		while (m > 1 && e[m - 1] == '/')
			m--;
		if (m == len && strncmp(e, p, len) == 0)
			return true;
		e += n + (e[n] == ':');
	}
	return false;
}

/*
 * The programs the toolchain looked up along PATH: a path it opened,
 * stat'ed or found missing in a directory of PATH stands for a lookup of
 * its name (the interposer records execvp's and posix_spawnp's search
 * the same way, observe.c). Each becomes a "search" dependency, the path
 * found along this PATH: PATH itself is not an input (trace.c leaves it
 * out), so that a PATH that gained a directory without such a program
 * still hits, and one that puts another program of that name first
 * misses.
 */
static int add_searches(struct trace_result *r)
{
	const char *list = tcenv()->path;
	size_t n0 = r->ndeps;
	for (size_t i = 0; i < n0; i++) {
		const struct store_dep *d = &r->deps[i];
		const char *slash = strrchr(d->path, '/');
		if (d->kind == STORE_DEP_ENV || slash == NULL || slash[1] == '\0' ||
		    !dir_in_path(list, d->path, slash == d->path ? 1 : (size_t)(slash - d->path)))
			continue;
		bool have = false;
		for (size_t j = n0; j < r->ndeps && !have; j++)
			have = strcmp(r->deps[j].path, slash + 1) == 0;
		if (have)
			continue;
		struct store_dep *nd = realloc(r->deps, (r->ndeps + 1) * sizeof(*nd));
		if (nd == NULL)
			return -ENOMEM;
		r->deps = nd;
		struct store_dep *s = &nd[r->ndeps];
		memset(s, 0, sizeof(*s));
		if ((s->path = strdup(slash + 1)) == NULL)
			return -ENOMEM;
		char found[PATH_MAX];
		s->kind = STORE_DEP_SEARCH;
		s->mode = deps_search(list, s->path, found, sizeof(found));
		util_sha256(found, strlen(found), s->digest);
		r->ndeps++;
	}
	return 0;
}

/* The interposer and kiln-exec: kiln's own, not the toolchain's. */
static void own_paths(const char *exec_helper, char exec_real[PATH_MAX], char lib_real[PATH_MAX])
{
	char lib[PATH_MAX + 32];
	exec_real[0] = lib_real[0] = '\0';
	if (realpath(exec_helper, exec_real) == NULL)
		snprintf(exec_real, PATH_MAX, "%s", exec_helper);
	snprintf(lib, sizeof(lib), "%s", exec_real);
	char *slash = strrchr(lib, '/');
	if (slash != NULL)
		snprintf(slash, sizeof(lib) - (size_t)(slash - lib), "/kiln-observe.so");
	if (realpath(lib, lib_real) == NULL)
		snprintf(lib_real, PATH_MAX, "%.*s", PATH_MAX - 1, lib);
}

/*
 * Pseudo-files among the trace's dependencies (pseudo.c): those that
 * cannot change what is built go; the first that decides and cannot be
 * recorded is named in r->untrusted, and it goes too (it has no digest
 * to check); the build is then not cached.
 */
/* The filesystems the trace's files are on, each asked its type once. */
enum { FS_SEEN_MAX = 16 };
struct fs_seen {
	uint64_t dev[FS_SEEN_MAX];
	long type[FS_SEEN_MAX];
	size_t n;
};

/*
 * pseudo.c's verdict on one dependency, with as few looks at the disk as it
 * takes (a build's publish asks this of hundreds): by its name first; a
 * path looked for and not found holds nothing that is read (settle_dep
 * checks that it is still missing); a file the toolchain opened, with its
 * identity in the record, is a regular file (the record's mode), a
 * pseudo-file only on a filesystem whose files the kernel makes, and
 * settle_dep then requires the path to name that very file (device, inode,
 * size, times), so its device stands for its filesystem, whose type is
 * asked once per device (seen->type), of a path found on it now. Anything
 * else is looked at as pseudo_classify does.
 */
static enum pseudo_kind classify(const struct store_dep *d, bool cpu_in_key, struct fs_seen *seen,
				 const char **why)
{
	*why = "";
	if (d->kind == STORE_DEP_ENV || d->kind == STORE_DEP_SEARCH)
		return PSEUDO_NO;
	enum pseudo_kind k = pseudo_by_name(d->path, cpu_in_key, why);
	if (k != PSEUDO_NO || d->kind == STORE_DEP_ABSENT)
		return k;
	if (d->kind == STORE_DEP_FILE && d->ino != 0 && S_ISREG(d->mode)) {
		const struct stat rec = { .st_mode = (mode_t)d->mode };
		for (size_t i = 0; i < seen->n; i++)
			if (seen->dev[i] == d->dev)
				return pseudo_by_stat(d->path, &rec, seen->type[i], why);
		struct stat st;
		struct statfs fs;
		if (seen->n < FS_SEEN_MAX && stat(d->path, &st) == 0 && (uint64_t)st.st_dev == d->dev &&
		    statfs(d->path, &fs) == 0) {
			seen->dev[seen->n] = d->dev;
			seen->type[seen->n++] = (long)fs.f_type;
			return pseudo_by_stat(d->path, &st, (long)fs.f_type, why);
		}
	}
	return pseudo_classify(d->path, cpu_in_key, why);
}

/*
 * A device judged harmless by what stat found (pseudo_by_stat: null, zero,
 * full, random, urandom, the terminal, the GPU) under a name of its own in
 * /dev, where nothing else will ever be. Reached by any other name (a
 * header that is a symlink to /dev/null), the name is an input like any
 * path: what it names may change.
 */
static bool own_device_name(const char *path)
{
	static const char *const names[] = { "/dev/null", "/dev/zero", "/dev/full", "/dev/random",
					      "/dev/urandom", "/dev/tty" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(path, names[i]) == 0)
			return true;
	return strncmp(path, "/dev/nvidia", 11) == 0 && strchr(path + 5, '/') == NULL;
}

static void filter_pseudo(struct trace_result *r, bool cpu_in_key)
{
	struct fs_seen seen = { .n = 0 };
	size_t w = 0;
	for (size_t i = 0; i < r->ndeps; i++) {
		struct store_dep *d = &r->deps[i];
		const char *why, *by_name;
		struct stat st;
		enum pseudo_kind k = classify(d, cpu_in_key, &seen, &why);
		if (k == PSEUDO_UNTRUSTED && r->untrusted[0] == '\0')
			snprintf(r->untrusted, sizeof(r->untrusted), "the toolchain read %.300s, and %s",
				 d->path, why);
		if (k == PSEUDO_HARMLESS && pseudo_by_name(d->path, cpu_in_key, &by_name) == PSEUDO_NO &&
		    !own_device_name(d->path) && stat(d->path, &st) == 0) {
			/* What the name leads to is kept as found (a hit then
			 * requires that again), not its content. */
			log_debug("%s is %s: recorded as found, not read", d->path, why);
			d->kind = STORE_DEP_EXISTS;
			d->mode = (uint32_t)st.st_mode;
			d->dev = d->ino = d->size = 0;
			d->mtime_ns = d->ctime_ns = 0;
			r->deps[w++] = *d;
			continue;
		}
		if (k != PSEUDO_NO) {
			log_debug("%s is no input: %s", d->path, why);
			free(d->path);
			continue;
		}
		r->deps[w++] = *d;
	}
	r->ndeps = w;
}

int deps_read_trace(const char *dir, const char *token, const char *exec_helper,
		    bool cpu_in_key, struct trace_result *r, bool *have)
{
	char path[PATH_MAX + 16], bdir[PATH_MAX], exec_real[PATH_MAX], lib_real[PATH_MAX];
	char *text = NULL;
	size_t len = 0;
	memset(r, 0, sizeof(*r));
	*have = false;
	if (realpath(dir, bdir) == NULL)
		return -errno;
	snprintf(path, sizeof(path), "%s/trace", dir);
	int rc = tracedir_read(path, &text, &len);
	*have = rc == 0 && len > 0;
	if (rc == -ENOENT || (rc == 0 && len == 0)) {
		free(text);
		return 0;
	}
	if (rc != 0)
		return rc;
	own_paths(exec_helper, exec_real, lib_real);
	const char *skip[] = { exec_real, lib_real, NULL };
	rc = trace_parse(text, len, token, bdir, skip, tcenv_get, r);
	free(text);
	if (rc == 0)
		filter_pseudo(r, cpu_in_key);
	if (rc == 0 && (rc = add_searches(r)) != 0)
		trace_result_free(r);   /* nothing half-made goes back */
	return rc;
}

static bool ident_differs(const struct store_dep *d, const struct stat *st)
{
	return d->dev != (uint64_t)st->st_dev || d->ino != (uint64_t)st->st_ino ||
	       d->size != (uint64_t)st->st_size ||
	       d->mtime_ns != (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec ||
	       d->ctime_ns != (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
}

static void deps_set_ident(struct store_dep *d, const struct stat *st)
{
	d->size = (uint64_t)st->st_size;
	d->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
	d->ctime_ns = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
	d->mode = (uint32_t)st->st_mode;
	/* Too fresh to stand for the content later: the next check hashes. */
	d->dev = digests_settled(st) ? (uint64_t)st->st_dev : 0;
	d->ino = digests_settled(st) ? (uint64_t)st->st_ino : 0;
}

/*
 * Brings one dependency to its recorded state: a file is hashed and must
 * still have the identity it had when the toolchain opened it (or, from a
 * dependency file, no mtime after the build's start); a found path must
 * still be there; a missing one still missing. A difference is written to
 * why and returns -EAGAIN.
 */
static int settle_dep(const struct deps_build *b, struct store_dep *d, char *why, size_t cap)
{
	struct stat st;
	int rc;
	switch (d->kind) {
	case STORE_DEP_FILE:
		rc = digests_file(d->path, d->digest, &st);
		if (rc == -EISDIR && d->ino != 0 && S_ISREG(d->mode)) {
			/* The toolchain opened a regular file there (its record
			 * says so); now it names something else: a directory, a
			 * FIFO, a device, a file the kernel makes. classify()
			 * judged the path by that record, so it must not pass. */
			snprintf(why, cap, "%s changed while the build ran: it is no regular file now",
				 d->path);
			return -EAGAIN;
		}
		if (rc == -EISDIR) {
			d->kind = STORE_DEP_EXISTS;
			d->mode = (uint32_t)st.st_mode;
			return 0;
		}
		if (rc != 0 || (d->ino != 0 && ident_differs(d, &st)) ||
		    (d->ino == 0 && (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec >= b->start_wall_ns)) {
			snprintf(why, cap, "%s changed while the build ran%s%s", d->path,
				 rc != 0 ? ": " : "", rc != 0 ? strerror(-rc) : "");
			return -EAGAIN;
		}
		deps_set_ident(d, &st);
		return 0;
	case STORE_DEP_LISTING:
		/* The names now, from the directory the toolchain listed: same
		 * inode, unchanged since (a directory's times move with every
		 * name added, removed or renamed in it). */
		rc = util_sha256_listing(d->path, d->digest, &st);
		if (rc == 0 && ident_differs(d, &st))
			rc = -EAGAIN;
		if (rc != 0) {
			snprintf(why, cap, "the listing of %s changed while the build ran%s%s", d->path,
				 rc != -EAGAIN ? ": " : "", rc != -EAGAIN ? strerror(-rc) : "");
			return -EAGAIN;
		}
		deps_set_ident(d, &st);
		return 0;
	case STORE_DEP_EXISTS:
		if (stat(d->path, &st) != 0 && lstat(d->path, &st) != 0) {
			/* A probe that failed other than by a missing name (a Q
			 * record: EACCES behind a directory this user cannot
			 * search, a PATH entry of another user's) fails for kilnd
			 * too: the path is out of reach, which a hit checks as it
			 * checks an absent one (it must still fail stat). */
			if (d->mode == 0 && errno != ENOENT && errno != ENOTDIR) {
				d->kind = STORE_DEP_ABSENT;
				return 0;
			}
			snprintf(why, cap, "%s was removed while the build ran", d->path);
			return -EAGAIN;
		}
		if (d->mode != 0 && (d->mode & S_IFMT) != (st.st_mode & S_IFMT)) {
			snprintf(why, cap, "%s changed its type while the build ran", d->path);
			return -EAGAIN;
		}
		d->mode = (uint32_t)st.st_mode;
		return 0;
	case STORE_DEP_ABSENT:
		if (stat(d->path, &st) == 0) {
			snprintf(why, cap, "%s appeared while the build ran", d->path);
			return -EAGAIN;
		}
		return 0;
	default:
		return 0;
	}
}

/*
 * A second thread for the files a publish hashes: it takes the list from
 * the end while settle_dep takes it from the start, and only fills the
 * digest cache (digests_file, under the cache's own rules), so every file
 * is still checked by settle_dep, in order. On a kilnd that has not hashed
 * the toolchain's libraries yet (its first build), these are megabytes.
 */
#define SETTLE_HELP_MIN 8   /* files; fewer are not worth a thread */

struct settle_help {
	/* The files' paths (deps' own strings, which settle_dep never changes;
	 * their kinds it may, so the helper reads only these). */
	const char **paths;
	size_t *at;             /* each one's index in deps */
	size_t n;
	atomic_size_t main_at;  /* the next index settle_dep takes */
};

static void *settle_help(void *arg)
{
	struct settle_help *h = arg;
	for (size_t i = h->n; i-- > 0 && h->at[i] > atomic_load(&h->main_at);) {
		struct stat st;
		uint8_t digest[32];
		digests_file(h->paths[i], digest, &st);
	}
	return NULL;
}

/* Whether this machine has a second CPU for the helper: asked once
 * (glibc reads /sys for it on every call). */
static bool two_cpus(void)
{
	static atomic_int known;   /* 0 not asked yet, 1 no, 2 yes */
	int v = atomic_load_explicit(&known, memory_order_relaxed);
	if (v == 0) {
		v = sysconf(_SC_NPROCESSORS_ONLN) > 1 ? 2 : 1;
		atomic_store_explicit(&known, v, memory_order_relaxed);
	}
	return v == 2;
}

/* Starts the helper on deps' files; false when it is not worth it or
 * cannot be (then h holds nothing). */
static bool settle_help_start(struct settle_help *h, const struct store_dep *deps, size_t n,
			      pthread_t *t)
{
	memset(h, 0, sizeof(*h));
	atomic_init(&h->main_at, 0);
	size_t files = 0;
	for (size_t i = 0; i < n; i++)
		files += deps[i].kind == STORE_DEP_FILE;
	if (files < SETTLE_HELP_MIN || !two_cpus())
		return false;
	h->paths = calloc(files, sizeof(*h->paths));
	h->at = calloc(files, sizeof(*h->at));
	for (size_t i = 0; h->paths != NULL && h->at != NULL && i < n; i++)
		if (deps[i].kind == STORE_DEP_FILE) {
			h->paths[h->n] = deps[i].path;
			h->at[h->n++] = i;
		}
	if (h->paths != NULL && h->at != NULL && pthread_create(t, NULL, settle_help, h) == 0)
		return true;
	free(h->paths);
	free(h->at);
	return false;
}

static int settle_all(const struct deps_build *b, struct store_dep *deps, size_t n, char *why,
		      size_t cap)
{
	struct settle_help h;
	pthread_t t;
	bool helped = settle_help_start(&h, deps, n, &t);
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		atomic_store(&h.main_at, i);
		rc = settle_dep(b, &deps[i], why, cap);
	}
	atomic_store(&h.main_at, n);
	if (helped) {
		pthread_join(t, NULL);
		free(h.paths);
		free(h.at);
	}
	return rc;
}

/* Once per kilnd: the kernel refused kiln-exec's watch of the execs, so
 * an exec made past libc goes unseen (docs/design.md, "Known limitations"). */
static void warn_unwatched(const char *why)
{
	static atomic_bool said;
	if (!atomic_exchange(&said, true))
		log_warn("the kernel refuses kiln-exec's watch of the compilers' execs (ptrace: %s): "
			 "a program started past libc's exec functions is not seen", why);
}

int deps_collect(const struct deps_build *b, struct store_entry *e, char *why, size_t cap)
{
	struct trace_result r;
	bool traced;
	why[0] = '\0';
	int rc = deps_read_trace(b->dir, b->token, b->exec_helper, b->cpu_in_key, &r, &traced);
	if (rc != 0)
		return rc;
	if (r.damaged[0] != '\0') {
		snprintf(why, cap, "kiln's record of what the toolchain read was written over: %s",
			 r.damaged);
		trace_result_free(&r);
		return -EBADMSG;
	}
	if (r.changed[0] != '\0') {
		snprintf(why, cap, "%s", r.changed);
		trace_result_free(&r);
		return -EAGAIN;
	}
	struct store_dep *deps = r.deps;
	size_t n = r.ndeps;
	e->deps_source = STORE_DEPS_OBSERVED;
	if (r.unwatched[0] != '\0')
		warn_unwatched(r.unwatched);
	if (!traced || !r.complete) {
		/* What a program no hook saw read is unknown: no list (the
		 * compiler's dependency file least of all, which holds no path
		 * probed and not found) makes a hit that cannot go wrong. */
		snprintf(why, cap, "kiln could not observe every program of the toolchain (%s); "
			 "run the compiler from the wrapper without removing LD_PRELOAD or clearing "
			 "the environment, and through dynamically linked launchers (not static or Go "
			 "ones)", traced ? r.incomplete : "no trace was written: is kiln-observe.so "
			 "next to kiln-exec?");
		e->deps = deps;
		e->ndeps = n;
		return DEPS_UNOBSERVED;
	}
	rc = settle_all(b, deps, n, why, cap);
	e->deps = deps;
	e->ndeps = n;
	if (rc == 0 && r.untrusted[0] != '\0') {
		snprintf(why, cap, "%s", r.untrusted);
		rc = DEPS_UNCACHEABLE;
	}
	log_debug("build %.16s: %zu dependencies (%s, %zu trace records)", b->rkey, n,
		  store_deps_source_name(e->deps_source), r.records);
	return rc;
}

int deps_check_here(struct store_dep *d, char *why, size_t cap)
{
	struct stat st;
	uint8_t digest[32];
	const char *v;
	switch (d->kind) {
	case STORE_DEP_FILE:
		if (digests_file(d->path, digest, &st) != 0) {
			snprintf(why, cap, "dependency %s is missing or unreadable on this node", d->path);
			return -1;
		}
		if (memcmp(digest, d->digest, 32) != 0) {
			snprintf(why, cap, "dependency %s differs on this node", d->path);
			return -1;
		}
		deps_set_ident(d, &st);
		return 0;
	case STORE_DEP_LISTING:
		if (util_sha256_listing(d->path, digest, &st) != 0) {
			snprintf(why, cap, "directory %s is missing or unreadable on this node", d->path);
			return -1;
		}
		if (memcmp(digest, d->digest, 32) != 0) {
			snprintf(why, cap, "directory %s lists other names on this node", d->path);
			return -1;
		}
		deps_set_ident(d, &st);
		return 0;
	case STORE_DEP_EXISTS:
		if (stat(d->path, &st) != 0 && lstat(d->path, &st) != 0) {
			snprintf(why, cap, "%s does not exist on this node", d->path);
			return -1;
		}
		if ((uint32_t)st.st_mode != d->mode) {
			snprintf(why, cap, "%s has another type or permissions on this node", d->path);
			return -1;
		}
		return 0;
	case STORE_DEP_ABSENT:
		if (stat(d->path, &st) == 0) {
			snprintf(why, cap, "%s exists on this node (the build looked for it and "
				 "did not find it)", d->path);
			return -1;
		}
		return 0;
	case STORE_DEP_SEARCH: {
		char found[PATH_MAX];
		bool ok = deps_search(tcenv()->path, d->path, found, sizeof(found));
		util_sha256(found, strlen(found), digest);
		if (ok != (d->mode != 0) || memcmp(digest, d->digest, 32) != 0) {
			snprintf(why, cap, "%s is found elsewhere along PATH on this node (%s)", d->path,
				 ok ? found : "nowhere");
			return -1;
		}
		return 0;
	}
	case STORE_DEP_ENV:
		v = tcenv_get(d->path);
		util_sha256(v != NULL ? v : "", v != NULL ? strlen(v) : 0, digest);
		if ((v != NULL) != (d->mode != 0) || memcmp(digest, d->digest, 32) != 0) {
			snprintf(why, cap, "environment variable %s differs on this node", d->path);
			return -1;
		}
		return 0;
	default:
		snprintf(why, cap, "a dependency of an unknown kind");
		return -1;
	}
}
