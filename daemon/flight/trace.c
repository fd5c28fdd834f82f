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
			     ((r->kind == REC_OPEN || r->kind == REC_EXEC || r->kind == REC_LOAD || r->kind == REC_LISTING) &&
			      r->nf == 5) ||
			     (r->kind == REC_SPAWN && r->nf == 6);
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
	struct table *pending;    /* pid -> execs (X, P) minus starts (H) and failures (F) */
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
 * Each exec (X) and spawn (P) of a pid must be answered by a start record
 * (H) of that pid, or by a failure (F): counted per pid, in any order (the
 * records of a process and of its child are in different files).
 */
static void pend(struct builder *b, long pid, int delta)
{
	char key[32];
	snprintf(key, sizeof(key), "%ld", pid);
	intptr_t n = (intptr_t)table_get(b->pending, key) + delta;
	if (n == 0)
		table_del(b->pending, key);
	else
		table_put(b->pending, key, (void *)n, NULL);
}

static void count_pending(const char *key, void *val, void *arg)
{
	size_t *n = arg;
	*n += (intptr_t)val > 0;
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
	switch (r->kind) {
	case REC_HELLO:
		pend(b, r->pid, -1);
		break;
	case REC_EXEC_FAILED:
		pend(b, r->pid, -1);
		return 0;
	case REC_SPAWN:
		if (r->nf != 7)
			return 0;
		pend(b, (long)r->f[0], +1);
		/* The program it runs, with its identity, as for X. */
		memmove(r->f, r->f + 1, 6 * sizeof(r->f[0]));
		r->nf = 6;
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
		pend(b, r->pid, +1);
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
	if ((r->kind == REC_EXEC && r->nf != 6) || r->kind == REC_HELLO)
		return 0;
	if (!trace_normalize(r->path, bdir, path, sizeof(path)) || skipped(path, skip))
		return 0;
	if (r->kind == REC_WRITE) {
		table_put(b->written, path, (void *)1, NULL);
		return 0;
	}
	if (r->kind == REC_FAILED) {
		/* Found but not readable (EACCES, ELOOP): its errno is no mode. */
		r->kind = REC_STAT;
		r->nf = 0;
	}
	return add_file(b, path, r);
}

/* Drops what the toolchain wrote itself: an output is not an input. */
static void drop_written(struct builder *b)
{
	size_t w = 0;
	for (size_t i = 0; i < b->r->ndeps; i++) {
		struct store_dep *d = &b->r->deps[i];
		if (d->kind != STORE_DEP_ENV && table_get(b->written, d->path) != NULL) {
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
	b.pending = table_new();
	char *copy = malloc(len + 1);
	int rc = b.index != NULL && b.written != NULL && b.pending != NULL && copy != NULL ? 0 : -ENOMEM;
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
	size_t untraced = 0;
	if (rc == 0)
		table_foreach(b.pending, count_pending, &untraced);
	if (rc == 0 && out->complete && untraced > 0) {
		out->complete = false;
		snprintf(out->incomplete, sizeof(out->incomplete),
			 "%zu program(s) of the toolchain ran without the interposer (statically "
			 "linked, or started with a cleared environment)", untraced);
	}
	if (rc == 0)
		drop_written(&b);
	table_free(b.index, NULL);
	table_free(b.written, NULL);
	table_free(b.pending, NULL);
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
