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
 * or CUDA compiler before kilnd runs it with anything but --version (key.h's
 * key_toolchain_identify): a site directory with python3 in it does not
 * make python3 a compiler an admitted user may have kilnd run on their
 * source. Every other program the identification runs (the linker the
 * driver prints, nvcc's host compiler) passes the same rules first
 * (rules_gate).
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
#include "validate.h"

/* Permitted names remembered (permitted()); beyond, forgotten at once. */
#define NAMED_OK_MAX 1024
/* Identifications running at once. */
#define NAMED_IDENT_MAX 2
/* Replaced identities kept until stop (builds may hold them). */
#define NAMED_RETIRED_MAX 4096
/* A full table lets go of a name no request had for this long. */
#define NAMED_IDLE_NS (600ull * 1000000000ull)
/* A named toolchain is checked again at most this often. */
#define NAMED_RECHECK_NS 1000000000ull
/* One that could not be identified is tried again after this. */
#define NAMED_RETRY_NS 5000000000ull

/* Whose rules an identification runs programs under: the owner's, or
 * those of a user kilnd admits (all of them have the same). */
struct named_rules {
	const struct kilnd *d;
	uid_t uid;
};

struct named_wait {
	void (*cb)(void *arg);
	void *arg;
	struct named_wait *next;
};

struct named {
	struct kilnd *d;
	char *key;                /* its key in d->named */
	char *path, *host;        /* as first named: what runs */
	struct named_rules rules; /* whose rules its identification runs under */
	struct toolchain *tc;     /* identified, or NULL */
	bool busy;                /* being identified, or waiting to be */
	char why[512];            /* why it cannot be used, or "" */
	uint64_t checked_ns;      /* when last identified or found current */
	uint64_t used_ns;         /* when a request last had it */
	struct named_wait *waiters;
	struct named *queue_next; /* waiting for an identification slot */
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

/* At most this many links followed resolving a named compiler. */
#define NAMED_MAX_LINKS 40

/* One object met resolving a named compiler (lstat's): owned by root or
 * owner, and no group or other write permission unless it is a link (its
 * own mode means nothing) or a directory with the sticky bit (others may
 * add names there, not replace ours). */
static bool object_ok(const char *p, const struct stat *st, uid_t owner, char *why, size_t cap)
{
	bool sticky_dir = S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX) != 0;
	if (st->st_uid != 0 && st->st_uid != owner) {
		snprintf(why, cap, "%s belongs to uid %u, who could replace the compiler", p,
			 (unsigned)st->st_uid);
		return false;
	}
	if (!S_ISLNK(st->st_mode) && (st->st_mode & (S_IWGRP | S_IWOTH)) != 0 && !sticky_dir) {
		snprintf(why, cap, "%s is writable by group or others (mode %04o): they could "
			 "replace the compiler", p, (unsigned)(st->st_mode & 07777));
		return false;
	}
	return true;
}

/* real's last component dropped ("/" stays "/"). */
static void up(char *real)
{
	char *slash = strrchr(real, '/');
	if (slash == real)
		slash[1] = '\0';
	else if (slash != NULL)
		*slash = '\0';
}

/*
 * Resolves path as the kernel would, one component at a time, checking
 * every object met on the way with object_ok: each directory entered,
 * each symbolic link followed (and the links its target leads through),
 * and the file. Then nothing on the way to the compiler can be changed
 * but by root or the owner, so the path can be run as named. The
 * resolved path into real.
 */
static bool safe_resolve(const char *path, uid_t owner, char real[PATH_MAX], char *why, size_t cap)
{
	char rest[2 * PATH_MAX + 2], next[2 * PATH_MAX + 2], cand[PATH_MAX + NAME_MAX + 2];
	struct stat st;
	int links = 0;
	if (path[0] != '/' || snprintf(rest, sizeof(rest), "%s", path) >= (int)sizeof(rest)) {
		snprintf(why, cap, "%.64s: not an absolute path of a usable length", path);
		return false;
	}
	snprintf(real, PATH_MAX, "/");
	if (lstat("/", &st) != 0 || !object_ok("/", &st, owner, why, cap))
		return false;
	for (const char *p = rest; *p != '\0';) {
		while (*p == '/')
			p++;
		size_t n = strcspn(p, "/");
		if (n == 0)
			break;
		const char *comp = p;
		p += n;
		if (n == 1 && comp[0] == '.')
			continue;
		if (n == 2 && comp[0] == '.' && comp[1] == '.') {
			up(real);
			continue;
		}
		if (snprintf(cand, sizeof(cand), "%s%s%.*s", real, real[1] != '\0' ? "/" : "", (int)n,
			     comp) >= PATH_MAX) {
			snprintf(why, cap, "%.64s: the path is too long", path);
			return false;
		}
		if (lstat(cand, &st) != 0) {
			snprintf(why, cap, "%s: %s", cand, strerror(errno));
			return false;
		}
		if (!object_ok(cand, &st, owner, why, cap))
			return false;
		if (S_ISLNK(st.st_mode)) {
			char target[PATH_MAX];
			ssize_t t = readlink(cand, target, sizeof(target) - 1);
			if (t <= 0 || ++links > NAMED_MAX_LINKS) {
				snprintf(why, cap, "%s: %s", cand, t <= 0 ? strerror(errno) : "too many links");
				return false;
			}
			target[t] = '\0';
			if (snprintf(next, sizeof(next), "%s%s%s", target, *p != '\0' ? "/" : "", p) >=
			    (int)sizeof(next)) {
				snprintf(why, cap, "%.64s: the path is too long", path);
				return false;
			}
			memcpy(rest, next, strlen(next) + 1);
			p = rest;
			if (target[0] == '/')
				snprintf(real, PATH_MAX, "/");
			continue;
		}
		if (p[strspn(p, "/")] != '\0' && !S_ISDIR(st.st_mode)) {
			snprintf(why, cap, "%s: %s", cand, strerror(ENOTDIR));
			return false;
		}
		memcpy(real, cand, strlen(cand) + 1);
	}
	return true;
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

/* The rules for uid on the program at path, its resolved path in real:
 * KEY_GATE_REFUSED when another user could change it (or the way to it),
 * KEY_GATE_OUTSIDE when uid is admitted and it lies under no
 * --toolchain-dir. */
static enum key_gate_verdict rules_of(const struct kilnd *d, const char *path, uid_t uid,
				      char *real, char *why, size_t cap)
{
	uid_t owner = getuid();
	if (!safe_resolve(path, owner, real, why, cap))
		return KEY_GATE_REFUSED;
	if (uid != owner && !under_toolchain_dir(d->cfg, real)) {
		snprintf(why, cap, "%s is not under a directory kilnd's --toolchain-dir names "
			 "(%s): users kilnd admits may name only those compilers", path,
			 d->cfg->ntoolchain_dirs == 0 ? "none given" : d->cfg->toolchain_dirs[0]);
		return KEY_GATE_OUTSIDE;
	}
	return KEY_GATE_RUN;
}

bool named_may(const struct kilnd *d, const char *path, uid_t uid, char *real, char *why,
	       size_t cap)
{
	return rules_of(d, path, uid, real, why, cap) == KEY_GATE_RUN;
}

/* key.h's gate: every program the identification runs besides the
 * driver passes the rules the named compiler passed, for the same user. */
static enum key_gate_verdict rules_gate(void *arg, const char *path, char *why, size_t cap)
{
	const struct named_rules *r = arg;
	char real[PATH_MAX];
	return rules_of(r->d, path, r->uid, real, why, cap);
}

static const char *base_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash != NULL ? slash + 1 : path;
}

/* The table's key: what the compiler is (its resolved path) and what it
 * is called (the name it runs under: clang++ is not clang), the same for
 * nvcc's host compiler, and whose rules its identification ran under (an
 * admitted user's runs fewer programs: a linker outside every
 * --toolchain-dir is not asked); newlines apart, which no part may contain
 * (validate_compiler_path). Spellings of one path share an entry. */
static void named_key(const char *real, const char *path, const char *host_real, const char *host,
		      bool owner, char *out, size_t cap)
{
	snprintf(out, cap, "%s\n%s\n%s\n%s\n%s", real, base_of(path),
		 host_real != NULL ? host_real : "", host != NULL ? base_of(host) : "",
		 owner ? "owner" : "admitted");
}

static void ident_work(void *arg)
{
	struct ident_job *j = arg;
	ASSERT_POOL();
	char name[2 * PATH_MAX + 16];
	/* Its name in entries and logs: the path, and nvcc's host compiler. */
	snprintf(name, sizeof(name), "%s%s%s", j->n->path, j->n->host != NULL ? " -ccbin " : "",
		 j->n->host != NULL ? j->n->host : "");
	/* key.c refuses one whose --version names no compiler kiln knows
	 * before it runs anything else, and runs every other program only
	 * once it passed the rules the named one passed. */
	struct key_gate gate = { rules_gate, &j->n->rules };
	j->tc = calloc(1, sizeof(*j->tc));
	j->rc = j->tc == NULL ? -ENOMEM
			      : key_toolchain_identify(j->tc, name, j->n->path, j->n->host, &gate,
						       j->err, sizeof(j->err));
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

static void identify_next(struct kilnd *d);

static void ident_done(void *arg, int status)
{
	struct ident_job *j = arg;
	struct named *n = j->n;
	ASSERT_LOOP();
	if (status != 0) {
		j->rc = status;
		snprintf(j->err, sizeof(j->err), "its identification did not run: %s",
			 uv_strerror(status));
	}
	n->d->named_running--;
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
	identify_next(n->d);
}

/* Starts n's identification on the pool; false when it cannot (n is then
 * failed and its waiters woken by the caller). */
static bool submit(struct named *n)
{
	if (n->d->stopping) {
		/* No new work while stopping: its waiters are answered now. */
		n->busy = false;
		n->checked_ns = util_now_ns();
		snprintf(n->why, sizeof(n->why), "%s: kilnd is stopping", n->path);
		return false;
	}
	struct ident_job *j = calloc(1, sizeof(*j));
	if (j != NULL) {
		j->n = n;
		if (kilnd_work(n->d, POOL_IDENT, ident_work, ident_done, j) == 0) {
			n->d->named_running++;
			return true;
		}
	}
	free(j);
	n->busy = false;
	n->checked_ns = util_now_ns();
	snprintf(n->why, sizeof(n->why), "%s: out of memory", n->path);
	return false;
}

/* Identifications run NAMED_IDENT_MAX at a time: a compiler whose probes
 * are slow (10 s each at most) holds no more of the pool that builds use.
 * The others wait in order. */
static void identify(struct named *n)
{
	struct kilnd *d = n->d;
	n->busy = true;
	if (d->named_running < NAMED_IDENT_MAX) {
		if (!submit(n))
			wake(n);
		return;
	}
	n->queue_next = NULL;
	if (d->named_queue_tail != NULL)
		d->named_queue_tail->queue_next = n;
	else
		d->named_queue = n;
	d->named_queue_tail = n;
}

/* After an identification: the next one waiting. */
static void identify_next(struct kilnd *d)
{
	while (d->named_queue != NULL && d->named_running < NAMED_IDENT_MAX) {
		struct named *n = d->named_queue;
		d->named_queue = n->queue_next;
		if (d->named_queue == NULL)
			d->named_queue_tail = NULL;
		if (!submit(n))
			wake(n);
	}
}

struct sweep {
	struct named *drop[NAMED_MAX + 1];
	size_t n;
	uint64_t now;
};

/* The names a full table can let go: those that failed, and those no
 * request had for NAMED_IDLE_NS; never one being identified or waited for. */
static void collect_idle(const char *key, void *val, void *arg)
{
	struct named *n = val;
	struct sweep *sw = arg;
	(void)key;
	if (!n->busy && n->waiters == NULL && sw->n < NAMED_MAX &&
	    (n->tc == NULL || sw->now - n->used_ns >= NAMED_IDLE_NS))
		sw->drop[sw->n++] = n;
}

static void free_named(void *val);

/* A full table drops what collect_idle finds; an identity a build may still
 * hold is kept (retired) until stop. */
static void drop_idle(struct kilnd *d)
{
	struct sweep *sw = calloc(1, sizeof(*sw));
	if (sw == NULL)
		return;
	sw->now = util_now_ns();
	table_foreach(d->named, collect_idle, sw);
	for (size_t i = 0; i < sw->n; i++) {
		struct named *n = sw->drop[i];
		if (n->tc != NULL && d->nnamed_retired >= NAMED_RETIRED_MAX)
			continue;   /* a build may hold it: kept */
		table_del(d->named, n->key);
		if (n->tc != NULL) {
			retire(d, n->tc);
			n->tc = NULL;
		}
		free_named(n);
	}
	free(sw);
}

static struct named *named_new(struct kilnd *d, const char *key, const char *path, const char *host,
			       uid_t uid)
{
	if (d->named == NULL && (d->named = table_new()) == NULL)
		return NULL;
	if (table_count(d->named) >= NAMED_MAX)
		drop_idle(d);
	if (table_count(d->named) >= NAMED_MAX)
		return NULL;
	struct named *n = calloc(1, sizeof(*n));
	if (n == NULL || (n->path = strdup(path)) == NULL || (n->key = strdup(key)) == NULL ||
	    (host != NULL && (n->host = strdup(host)) == NULL) || table_put(d->named, key, n, NULL) != 0) {
		if (n != NULL) {
			free(n->path);
			free(n->key);
			free(n->host);
		}
		free(n);
		return NULL;
	}
	n->d = d;
	n->rules = (struct named_rules){ .d = d, .uid = uid };
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
	if (n->d->nnamed_retired >= NAMED_RETIRED_MAX) {
		/* It keeps the identity it has: builds with it are still
		 * checked per entry (the programs they ran are inputs). */
		log_warn("toolchain %s changed, but kilnd holds %d replaced identities already: "
			 "restart it to identify the compiler again", n->path, NAMED_RETIRED_MAX);
		n->checked_ns = now;
		return false;
	}
	log_info("toolchain %s changed: identified again", n->path);
	return true;
}

/* A name found permitted for a uid, and what it resolved to. */
struct named_ok {
	char *real, *host_real;
	uint64_t at;
};

static void free_ok(void *val)
{
	struct named_ok *ok = val;
	free(ok->real);
	free(ok->host_real);
	free(ok);
}

/*
 * named_may for the compiler and its host, remembered for NAMED_RECHECK_NS
 * per uid and spelling, so that a rank's every get and lookup does not walk
 * the path with an lstat per component on the loop. Only root or the owner
 * can change what the walk found permitted (that is the rule), so a result
 * a second old can only be stale by their own doing; a refusal is not
 * remembered.
 */
static bool permitted(struct kilnd *d, const char *path, const char *host, uid_t uid, char *real,
		      char *host_real, char *why, size_t cap)
{
	char key[2 * VALIDATE_COMPILER_PATH_MAX + 32];
	uint64_t now = util_now_ns();
	snprintf(key, sizeof(key), "%u\n%s\n%s", (unsigned)uid, path, host != NULL ? host : "");
	struct named_ok *ok = d->named_ok != NULL ? table_get(d->named_ok, key) : NULL;
	if (ok != NULL && now - ok->at < NAMED_RECHECK_NS) {
		snprintf(real, PATH_MAX, "%s", ok->real);
		snprintf(host_real, PATH_MAX, "%s", ok->host_real);
		return true;
	}
	if (ok != NULL)
		free_ok(table_del(d->named_ok, key));
	if (!named_may(d, path, uid, real, why, cap) ||
	    (host != NULL && !named_may(d, host, uid, host_real, why, cap)))
		return false;
	if (host == NULL)
		host_real[0] = '\0';
	if (d->named_ok == NULL || table_count(d->named_ok) >= NAMED_OK_MAX) {
		table_free(d->named_ok, free_ok);
		d->named_ok = table_new();
	}
	if (d->named_ok != NULL && (ok = calloc(1, sizeof(*ok))) != NULL) {
		ok->real = strdup(real);
		ok->host_real = strdup(host_real);
		ok->at = now;
		if (ok->real == NULL || ok->host_real == NULL ||
		    table_put(d->named_ok, key, ok, NULL) != 0)
			free_ok(ok);
	}
	return true;
}

enum named_result named_find(struct kilnd *d, const char *name, const char *host, uid_t uid,
			     const struct toolchain **out, void (*cb)(void *arg), void *arg,
			     char *why, size_t cap)
{
	char key[4 * PATH_MAX + 8];
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
	char real[PATH_MAX], host_real[PATH_MAX];
	if (!permitted(d, path, host, uid, real, host_real, why, cap))
		return NAMED_REFUSED;
	named_key(real, path, host != NULL ? host_real : NULL, host, uid == getuid(), key, sizeof(key));
	struct named *n = d->named != NULL ? table_get(d->named, key) : NULL;
	if (n == NULL && (n = named_new(d, key, path, host, uid)) == NULL) {
		snprintf(why, cap, "kilnd knows %d toolchains named by path already, or is out of "
			 "memory", NAMED_MAX);
		return NAMED_REFUSED;
	}
	uint64_t now = util_now_ns();
	n->used_ns = now;
	if (stale(n, now))
		identify(n);
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
	char real[PATH_MAX];
	snprintf(path, sizeof(path), "%.*s", sep != NULL ? (int)(sep - name) : PATH_MAX, name);
	host = sep != NULL ? sep + 8 : NULL;
	if (!named_may(d, path, getuid(), real, why, cap) ||
	    (host != NULL && !named_may(d, host, getuid(), real, why, cap)))
		return -1;
	struct named_rules rules = { .d = d, .uid = getuid() };
	struct key_gate gate = { rules_gate, &rules };
	struct toolchain *tc = calloc(1, sizeof(*tc));
	if (tc == NULL || key_toolchain_identify(tc, name, path, host, &gate, why, cap) != 0) {
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

bool named_built_by(const struct store_entry *e, const struct toolchain *tc)
{
	if (tc == NULL || e->toolchain == NULL || strcmp(e->toolchain, tc->name) != 0)
		return false;
	bool driver = false, host = tc->host_real == NULL;
	for (size_t i = 0; i < e->ndeps; i++) {
		const struct store_dep *dep = &e->deps[i];
		if (dep->kind != STORE_DEP_FILE)
			continue;
		driver = driver || strcmp(dep->path, tc->real_path) == 0 || strcmp(dep->path, tc->path) == 0;
		host = host || strcmp(dep->path, tc->host_real) == 0 ||
		       (tc->host != NULL && strcmp(dep->path, tc->host) == 0);
	}
	return driver && host;
}

void named_foreach(struct kilnd *d, void (*fn)(const struct toolchain *tc, void *arg), void *arg)
{
	struct each e = { .fn = fn, .arg = arg };
	if (d->named != NULL)
		table_foreach(d->named, each_named, &e);
}

static void free_named(void *val)
{
	struct named *n = val;
	if (n->tc != NULL)
		key_toolchain_fini(n->tc);
	free(n->tc);
	free(n->key);
	free(n->path);
	free(n->host);
	free(n);
}

void named_fini(struct kilnd *d)
{
	table_free(d->named, free_named);
	d->named = NULL;
	table_free(d->named_ok, free_ok);
	d->named_ok = NULL;
	while (d->named_retired != NULL) {
		struct named_retired *r = d->named_retired;
		d->named_retired = r->next;
		key_toolchain_fini(r->tc);
		free(r->tc);
		free(r);
	}
	d->nnamed_retired = 0;
}
