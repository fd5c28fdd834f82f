/*
 * The trace of a build read into dependencies; see trace.h. Runs on the
 * thread pool (publish), allocates, does no I/O.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "table.h"
#include "trace.h"
#include "trace_rec.h"
#include "util.h"

/* Never inputs: variables kiln-exec and kilnd set for the build; the one
 * that only names the working directory (ignored by libiberty unless it
 * is the build directory); TMP and TEMP, read only when TMPDIR (always set
 * by kilnd) is not; MAKEFLAGS (lto-wrapper's jobserver: parallelism only);
 * and those that only shape diagnostics (colours, links, width, format,
 * demangling, the messages' language, libctf's debugging), which would
 * otherwise make a kilnd started from a terminal miss on every entry made
 * by one started from a batch job. LANG and LC_* stay: the locale gives
 * the compiler its input character set. */
static const char *const own_vars[] = {
	"LD_PRELOAD", "KILN_TRACE_DIR", "KILN_TRACE_TOKEN", "TMPDIR", "PWD", "OLDPWD",
	"KILN_OBSERVE_IGNORE", "TMP", "TEMP", "MAKEFLAGS", "TERM", "COLUMNS", "LINES",
	"GCC_COLORS", "GCC_URLS", "TERM_URLS", "NO_COLOR", "CLICOLOR", "CLICOLOR_FORCE",
	"LANGUAGE", "GCC_EXTRA_DIAGNOSTIC_OUTPUT", "COLLECT_NO_DEMANGLE", "LIBCTF_DEBUG", NULL,
};

struct rec {
	char kind;
	long pid;
	long long f[7];
	int nf;
	const char *path;
};

/* Splits "TOKEN K pid f...\tpath" in place; false for a malformed record
 * or one without the build's token. */
static bool parse_rec(char *s, const char *token, struct rec *r)
{
	size_t tl = strlen(token);
	if (strncmp(s, token, tl) != 0 || s[tl] != ' ')
		return false;
	s += tl + 1;
	char *tab = strchr(s, '\t');
	if (tab == NULL || s[0] == '\0' || s[1] != ' ')
		return false;
	*tab = '\0';
	r->kind = s[0];
	r->path = tab + 1;
	char *p = s + 2, *end;
	r->pid = strtol(p, &end, 10);
	if (end == p)
		return false;
	r->nf = 0;
	for (p = end; *p == ' ' && r->nf < 7;) {
		/* Modes are octal; every other field is decimal. */
		bool octal = (r->kind == REC_STAT && r->nf == 0) ||
			     ((r->kind == REC_OPEN || r->kind == REC_EXEC || r->kind == REC_LOAD ||
			       r->kind == REC_LISTING || r->kind == REC_INTERP || r->kind == REC_IMAGE) &&
			      r->nf == 5) ||
			     ((r->kind == REC_SPAWN || r->kind == REC_HELLO) && r->nf == 6);
		r->f[r->nf] = strtoll(p + 1, &end, octal ? 8 : 10);
		if (end == p + 1)
			return false;
		r->nf++;
		p = end;
	}
	return *p == '\0';
}

bool trace_normalize(const char *in, const char *bdir, char *out, size_t cap)
{
	size_t bl = strlen(bdir), o = 0;
	/* physical: everything so far is a prefix of bdir, which has no
	 * symlinks, so ".." may be applied by text. */
	bool physical = true;
	if (in[0] != '/' || cap < 2)
		return false;
	out[o++] = '/';
	out[o] = '\0';
	for (const char *p = in; *p != '\0';) {
		while (*p == '/')
			p++;
		size_t n = strcspn(p, "/");
		if (n == 0)
			break;
		if (n == 1 && p[0] == '.') {
			p += n;
			continue;
		}
		if (n == 2 && p[0] == '.' && p[1] == '.' && physical) {
			while (o > 1 && out[o - 1] != '/')
				o--;
			if (o > 1)
				o--;
			out[o] = '\0';
			p += n;
			continue;
		}
		if (o + (o > 1) + n + 1 > cap)
			return false;
		if (o > 1)
			out[o++] = '/';
		memcpy(out + o, p, n);
		o += n;
		out[o] = '\0';
		/* Still on bdir's way, or inside it (where only kilnd and the
		 * compiler made directories and files, no symlinks). */
		physical = physical && ((strncmp(bdir, out, o) == 0 && (bdir[o] == '/' || bdir[o] == '\0')) ||
					(o > bl && strncmp(out, bdir, bl) == 0 && out[bl] == '/'));
		p += n;
	}
	return !(strncmp(out, bdir, bl) == 0 && (out[bl] == '/' || out[bl] == '\0'));
}

struct builder {
	struct table *index;      /* path (or "$NAME") -> 1 + position in deps */
	struct table *written;    /* paths the toolchain wrote: outputs */
	struct table *read;       /* paths it read, ran or loaded: inputs, written or not */
	/* "pid dev ino" -> images expected to start (X, P, I) minus those
	 * that started (H) and execs that failed (F) */
	struct table *pending;
	struct table *last;       /* pid -> the image its last exec or spawn expects */
	/* "pid dev ino" -> images the kernel started (K, kiln-exec's watch)
	 * minus those that started observed (H) */
	struct table *kernel;
	struct table *names;      /* an expected image's key -> its path, for the log */
	struct trace_result *r;
	size_t cap;
};

static void note_changed(struct trace_result *r, const char *path, const char *how)
{
	if (r->changed[0] == '\0')
		snprintf(r->changed, sizeof(r->changed), "%.400s %s during the build", path, how);
}

static struct store_dep *dep_slot(struct builder *b, const char *key, const char *path, int *isnew)
{
	uintptr_t at = (uintptr_t)table_get(b->index, key);
	*isnew = at == 0;
	if (at != 0)
		return &b->r->deps[at - 1];
	if (b->r->ndeps == b->cap) {
		size_t ncap = b->cap == 0 ? 256 : b->cap * 2;
		struct store_dep *nd = realloc(b->r->deps, ncap * sizeof(*nd));
		if (nd == NULL)
			return NULL;
		b->r->deps = nd;
		b->cap = ncap;
	}
	struct store_dep *d = &b->r->deps[b->r->ndeps];
	memset(d, 0, sizeof(*d));
	if ((d->path = strdup(path)) == NULL)
		return NULL;
	if (table_put(b->index, key, (void *)(uintptr_t)(b->r->ndeps + 1), NULL) != 0) {
		free(d->path);
		return NULL;
	}
	b->r->ndeps++;
	return d;
}

static void set_ident(struct store_dep *d, const struct rec *r)
{
	d->dev = (uint64_t)r->f[0];
	d->ino = (uint64_t)r->f[1];
	d->size = (uint64_t)r->f[2];
	d->mtime_ns = r->f[3];
	d->ctime_ns = r->f[4];
	d->mode = (uint32_t)r->f[5];
}

/* Merges one observation of a file into its dep. */
static int add_file(struct builder *b, const char *path, const struct rec *r)
{
	int isnew;
	struct store_dep *d = dep_slot(b, path, path, &isnew);
	if (d == NULL)
		return -ENOMEM;
	bool ident = r->kind == REC_OPEN || r->kind == REC_EXEC || r->kind == REC_LOAD;
	if (r->kind == REC_ABSENT) {
		if (isnew)
			d->kind = STORE_DEP_ABSENT;
		else if (d->kind != STORE_DEP_ABSENT)
			note_changed(b->r, path, "was found, then missing");
		return 0;
	}
	if (!isnew && d->kind == STORE_DEP_ABSENT) {
		note_changed(b->r, path, "was missing, then found");
		return 0;
	}
	if (ident && d->kind == STORE_DEP_FILE && !isnew && d->ino != 0 &&
	    (d->dev != (uint64_t)r->f[0] || d->ino != (uint64_t)r->f[1] ||
	     d->size != (uint64_t)r->f[2] || d->mtime_ns != r->f[3] || d->ctime_ns != r->f[4])) {
		note_changed(b->r, path, "changed");
		return 0;
	}
	if (r->kind == REC_LISTING) {
		/* Listed: its names count, as they were when it was opened. */
		if (!isnew && d->kind == STORE_DEP_LISTING &&
		    (d->dev != (uint64_t)r->f[0] || d->ino != (uint64_t)r->f[1] ||
		     d->mtime_ns != r->f[3] || d->ctime_ns != r->f[4])) {
			note_changed(b->r, path, "changed");
			return 0;
		}
		if (!isnew && d->kind == STORE_DEP_FILE) {
			note_changed(b->r, path, "was a file, then a directory");
			return 0;
		}
		d->kind = STORE_DEP_LISTING;
		set_ident(d, r);
		return 0;
	}
	if (!isnew && d->kind == STORE_DEP_LISTING)
		return 0; /* found again (stat, opendir's own probe): listed counts */
	if (ident && (isnew || d->kind != STORE_DEP_FILE || d->ino == 0)) {
		d->kind = STORE_DEP_FILE;
		set_ident(d, r);
	} else if (isnew) {
		/* Found (stat, access, opendir): what it is, kilnd looks up. */
		d->kind = STORE_DEP_EXISTS;
		d->mode = r->kind == REC_STAT && r->nf > 0 ? (uint32_t)r->f[0] : 0;
	} else if (d->kind == STORE_DEP_EXISTS && d->mode == 0 && r->kind == REC_STAT && r->nf > 0) {
		d->mode = (uint32_t)r->f[0];
	}
	return 0;
}

static int add_env(struct builder *b, const struct rec *r, trace_env_fn env)
{
	char name[256], key[260];
	const char *eq = strchr(r->path, '=');
	size_t n = eq != NULL ? (size_t)(eq - r->path) : strlen(r->path);
	if (n == 0 || n >= sizeof(name))
		return 0;
	memcpy(name, r->path, n);
	name[n] = '\0';
	for (size_t i = 0; own_vars[i] != NULL; i++) {
		if (strcmp(name, own_vars[i]) == 0)
			return 0;
	}
	/* What was looked up along PATH decides, not PATH (deps.c). */
	if (strcmp(name, "PATH") == 0)
		return 0;
	const char *mine = env(name), *seen = eq != NULL ? eq + 1 : NULL;
	char hex[65];
	if (r->nf == 1 && r->f[0] == 2 && mine != NULL) {
		/* A long value came as its SHA-256. */
		uint8_t d[32];
		util_sha256(mine, strlen(mine), d);
		util_hex(d, sizeof(d), hex);
		mine = hex;
	}
	/* Set by the toolchain for its own children, not taken from kilnd. */
	if ((mine == NULL) != (seen == NULL) || (mine != NULL && strcmp(mine, seen) != 0))
		return 0;
	mine = env(name);
	snprintf(key, sizeof(key), "$%s", name);
	int isnew;
	struct store_dep *d = dep_slot(b, key, name, &isnew);
	if (d == NULL)
		return -ENOMEM;
	d->kind = STORE_DEP_ENV;
	d->mode = mine != NULL;
	util_sha256(mine != NULL ? mine : "", mine != NULL ? strlen(mine) : 0, d->digest);
	return 0;
}

/*
 * Each exec (X) and spawn (P) of a pid expects an image to start in that
 * pid: the program itself, or the interpreter its `#!` line names (I
 * records, which replace what the last X or P of the pid expects). Each
 * must be answered by a start record (H) of that pid that names the same
 * file (device and inode), or by a failure (F): counted per pid and image,
 * in any order (the records of a process and of its child are in
 * different files). A program that runs without the interposer (a static
 * launcher) and then execs an observed compiler in the same pid leaves
 * its own image unanswered: the compiler's start names another file.
 */
static void image_key(char *key, size_t cap, long pid, long long dev, long long ino)
{
	snprintf(key, cap, "%ld %lld %lld", pid, dev, ino);
}

static int count(struct table *t, const char *key, int delta)
{
	intptr_t n = (intptr_t)table_get(t, key) + delta;
	if (n == 0) {
		table_del(t, key);
		return 0;
	}
	return table_put(t, key, (void *)n, NULL) == 0 ? 0 : -ENOMEM;
}

static int pend(struct builder *b, const char *key, int delta)
{
	return count(b->pending, key, delta);
}

/* The path an expected image's key stands for, for the log. */
static int name_image(struct builder *b, const char *key, const char *path)
{
	char *name;
	if (table_get(b->names, key) != NULL)
		return 0;
	if ((name = strdup(path)) == NULL || table_put(b->names, key, name, NULL) != 0) {
		free(name);
		return -ENOMEM;
	}
	return 0;
}

/* What pid's newest exec or spawn expects to start: key, or nothing. */
static int set_last(struct builder *b, long pid, const char *key)
{
	char p[32], *dup = NULL;
	snprintf(p, sizeof(p), "%ld", pid);
	free(table_del(b->last, p));
	if (key != NULL && ((dup = strdup(key)) == NULL || table_put(b->last, p, dup, NULL) != 0)) {
		free(dup);
		return -ENOMEM;
	}
	return 0;
}

static const char *last_of(const struct builder *b, long pid)
{
	char p[32];
	snprintf(p, sizeof(p), "%ld", pid);
	return table_get(b->last, p);
}

/* An image (path) is expected to start in pid (X, P, I): its H is due. */
static int expect_image(struct builder *b, long pid, long long dev, long long ino, const char *path)
{
	char key[96];
	image_key(key, sizeof(key), pid, dev, ino);
	int rc = pend(b, key, +1);
	if (rc == 0)
		rc = name_image(b, key, path);
	return rc == 0 ? set_last(b, pid, key) : rc;
}

/* The last exec or spawn of pid runs an interpreter instead (I), or
 * nothing at all (F: dev and ino NULL). */
static int replace_image(struct builder *b, long pid, const long long *dev, const long long *ino,
			 const char *path)
{
	const char *last = last_of(b, pid);
	int rc = last != NULL ? pend(b, last, -1) : 0;
	if (rc != 0)
		return rc;
	if (dev == NULL || last == NULL)
		return set_last(b, pid, NULL);
	return expect_image(b, pid, *dev, *ino, path);
}

struct unanswered {
	const struct builder *b;
	size_t n;
	const char *first;   /* the path of one of them */
};

static void count_pending(const char *key, void *val, void *arg)
{
	struct unanswered *u = arg;
	if ((intptr_t)val <= 0)
		return;
	u->n++;
	const char *name = table_get(u->b->names, key);
	if (u->first == NULL || (name != NULL && strcmp(name, u->first) < 0))
		u->first = name;
}

static bool skipped(const char *path, const char *const *skip)
{
	for (size_t i = 0; skip != NULL && skip[i] != NULL; i++) {
		if (strcmp(path, skip[i]) == 0)
			return true;
	}
	return false;
}

static int take(struct builder *b, struct rec *r, const char *bdir, const char *const *skip,
		trace_env_fn env)
{
	char path[PATH_MAX + 8];
	char key[96];
	int rc;
	switch (r->kind) {
	case REC_HELLO:
		/* Without the image's identity it answers no exec. */
		if (r->nf != 7)
			return 0;
		image_key(key, sizeof(key), r->pid, r->f[1], r->f[2]);
		if ((rc = pend(b, key, -1)) != 0 || (rc = count(b->kernel, key, -1)) != 0)
			return rc;
		/* The program this process runs is an input like any it read,
		 * whoever started it (an exec no hook saw, system()). */
		memmove(r->f, r->f + 1, 6 * sizeof(r->f[0]));
		r->nf = 6;
		r->kind = REC_EXEC;
		break;
	case REC_EXEC_FAILED:
		return replace_image(b, r->pid, NULL, NULL, NULL);
	case REC_IMAGE:
		/* The kernel's word: this image ran in the pid, however it was
		 * started; an input, and its own start record is due. */
		if (r->nf != 6)
			return 0;
		image_key(key, sizeof(key), r->pid, r->f[0], r->f[1]);
		if ((rc = count(b->kernel, key, +1)) != 0 || (rc = name_image(b, key, r->path)) != 0)
			return rc;
		r->kind = REC_EXEC;
		break;
	case REC_UNWATCHED:
		/* The hooks' records alone tell what ran. */
		snprintf(b->r->unwatched, sizeof(b->r->unwatched), "%s", r->path);
		return 0;
	case REC_SPAWN:
		if (r->nf != 7)
			return 0;
		if ((rc = expect_image(b, (long)r->f[0], r->f[1], r->f[2], r->path)) != 0)
			return rc;
		/* The program it runs, with its identity, as for X. */
		memmove(r->f, r->f + 1, 6 * sizeof(r->f[0]));
		r->nf = 6;
		r->kind = REC_EXEC;
		break;
	case REC_INTERP:
		if (r->nf != 6)
			return 0;
		if ((rc = replace_image(b, r->pid, &r->f[0], &r->f[1], r->path)) != 0)
			return rc;
		r->kind = REC_EXEC;
		break;
	case REC_INCOMPLETE:
		snprintf(b->r->incomplete, sizeof(b->r->incomplete), "%s", r->path);
		b->r->complete = false;
		return 0;
	case REC_ENV:
		return add_env(b, r, env);
	case REC_EXEC:
		/* The exec'ing process starts anew: its next start record is due. */
		if (r->nf != 6)
			return 0;
		if ((rc = expect_image(b, r->pid, r->f[0], r->f[1], r->path)) != 0)
			return rc;
		break;
	case REC_OPEN: case REC_LOAD: case REC_LISTING:
		if (r->nf != 6)
			return 0;
		break;
	case REC_STAT: case REC_ABSENT: case REC_FAILED: case REC_WRITE:
		break;
	default:
		return 0;
	}
	if (!trace_normalize(r->path, bdir, path, sizeof(path)) || skipped(path, skip))
		return 0;
	if (r->kind == REC_WRITE)
		return table_put(b->written, path, (void *)1, NULL) == 0 ? 0 : -ENOMEM;
	if ((r->kind == REC_OPEN || r->kind == REC_EXEC || r->kind == REC_LOAD || r->kind == REC_LISTING) &&
	    table_put(b->read, path, (void *)1, NULL) != 0)
		return -ENOMEM;
	if (r->kind == REC_FAILED) {
		/* Found but not readable (EACCES, ELOOP): its errno is no mode. */
		r->kind = REC_STAT;
		r->nf = 0;
	}
	return add_file(b, path, r);
}

/* Drops what the toolchain wrote itself and never read: an output is not
 * an input, but a file that was read stays one whatever else was done to
 * it (a wrapper that reads its flags file and touches it). */
static void drop_written(struct builder *b)
{
	size_t w = 0;
	for (size_t i = 0; i < b->r->ndeps; i++) {
		struct store_dep *d = &b->r->deps[i];
		if (d->kind != STORE_DEP_ENV && table_get(b->written, d->path) != NULL &&
		    table_get(b->read, d->path) == NULL) {
			free(d->path);
			continue;
		}
		b->r->deps[w++] = *d;
	}
	b->r->ndeps = w;
}

int trace_parse(const char *text, size_t len, const char *token, const char *bdir,
		const char *const *skip, trace_env_fn env, struct trace_result *out)
{
	struct builder b = { .r = out };
	memset(out, 0, sizeof(*out));
	out->complete = true;
	b.index = table_new();
	b.written = table_new();
	b.read = table_new();
	b.pending = table_new();
	b.last = table_new();
	b.names = table_new();
	b.kernel = table_new();
	char *copy = malloc(len + 1);
	int rc = b.index != NULL && b.written != NULL && b.read != NULL && b.pending != NULL &&
		 b.last != NULL && b.names != NULL && b.kernel != NULL && copy != NULL ? 0 : -ENOMEM;
	if (copy != NULL) {
		memcpy(copy, text, len);
		copy[len] = '\0';
	}
	for (size_t off = 0; rc == 0 && off < len;) {
		char *s = copy + off;
		size_t n = strnlen(s, len - off);
		struct rec r;
		off += n + 1;
		if (n == 0)
			continue;
		if (!parse_rec(s, token, &r)) {
			/* Not written by kiln-observe.so for this build: an argument
			 * made the toolchain write here, and what else it wrote over
			 * cannot be told. */
			if (out->damaged[0] == '\0')
				snprintf(out->damaged, sizeof(out->damaged),
					 "a record of the trace is not kiln's (\"%.60s\")", s);
			continue;
		}
		out->records++;
		rc = take(&b, &r, bdir, skip, env);
	}
	struct unanswered u = { .b = &b };
	if (rc == 0) {
		table_foreach(b.pending, count_pending, &u);
		table_foreach(b.kernel, count_pending, &u);
	}
	if (rc == 0 && out->complete && u.n > 0) {
		out->complete = false;
		snprintf(out->incomplete, sizeof(out->incomplete),
			 "%.300s%s ran without kiln's interposer (a statically linked program, a Go "
			 "program, or one started with LD_PRELOAD removed or a cleared environment)",
			 u.first != NULL ? u.first : "a program", u.n > 1 ? " (and others)" : "");
	}
	if (rc == 0)
		drop_written(&b);
	table_free(b.index, NULL);
	table_free(b.written, NULL);
	table_free(b.read, NULL);
	table_free(b.pending, NULL);
	table_free(b.last, free);
	table_free(b.names, free);
	table_free(b.kernel, NULL);
	free(copy);
	if (rc != 0)
		trace_result_free(out);
	return rc;
}

void trace_result_free(struct trace_result *r)
{
	for (size_t i = 0; r->deps != NULL && i < r->ndeps; i++)
		free(r->deps[i].path);
	free(r->deps);
	r->deps = NULL;
	r->ndeps = 0;
}
