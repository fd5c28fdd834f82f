/*
 * The reader's hot cache: what store_get_by_rkey and store_get_by_alias found
 * (or did not find), kept in memory so that a repeated hit costs no SQLite
 * read transaction (two file locks, a B-tree walk and a row decode each).
 *
 * Correctness rests on one counter, s->gen, which every committed change of
 * entries or aliases bumps after its commit, leaving a record of what it
 * touched (store_changes.c); touches, which change only use counts and
 * times, do not. Each lookup first compares the counter with the one the
 * cache was filled under and, when they differ, forgets every name the
 * records since then touch (a publish: its request key, its alias, and
 * every answer holding its key), or everything when a record says rows of
 * any entry changed or the records no longer reach back. A lookup that
 * misses the cache reads the counter before its SQLite query, so a result
 * that a concurrent commit made stale carries a name that commit's record
 * touches: the next lookup forgets it, it is never served twice. The cache
 * therefore never answers with anything older than a plain read just before
 * the commit would have. (Before, every change emptied the cache: each
 * build cost every other entry its cached answer, 470-800 us for the next
 * hit of each against 130-220.)
 *
 * Only the daemon's store (the one writer while it runs) caches; a read-only
 * store of the CLI cannot see another process's commits in the counter.
 * Memory is bounded: past HOT_BYTES_MAX the cache is emptied and refills.
 * An entry's dependencies (hundreds of paths) are held once, interned by
 * its key, however many answers hold the entry (its rkey, every alias that
 * names it): counted once against the bound. Before, each alias held a
 * copy, and 1,216 aliases of 8 programs filled the bound every ~5,000
 * requests; emptying it stalled the loop ~20 ms (bench/run throughput p99).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "store_int.h"
#include "table.h"
#include "util.h"

/* Entries now carry every path their build looked at (hundreds, a
 * thousand for nvcc): room for a few hundred programs, more than a job
 * uses. The bound is most of kilnd's memory after many distinct lookups
 * (freed memory stays with the process): at 64 MiB, kilnd reached 92 MiB
 * at 100k entries of 30 dependencies, above the 64 MiB it should stay in. */
#define HOT_BYTES_MAX ((size_t)32 << 20)

/* A cached answer: the entries found (n may be 0: a cached miss). */
struct hot_val {
	struct store_entry *list;
	size_t n;
};

struct store_hot {
	struct table *rkey;   /* rkey -> struct hot_val */
	struct table *alias;  /* alias -> struct hot_val (n 0 or 1) */
	struct table *deps;   /* key -> struct store_deps_ref (one reference held):
	                       * an entry's dependencies once, however many
	                       * answers (its rkey, each alias) hold it */
	uint64_t gen;         /* s->gen the contents were read under */
	size_t bytes;         /* rough size of the contents */
};

static void hot_val_free(void *p)
{
	struct hot_val *v = p;

	if (v) {
		store_entries_free(v->list, v->n);
		free(v);
	}
}

static void deps_ref_drop(void *p)
{
	if (p != NULL)
		store_deps_unref(p);
}

static void hot_clear(struct store_hot *h)
{
	table_free(h->rkey, hot_val_free);
	table_free(h->alias, hot_val_free);
	table_free(h->deps, deps_ref_drop);
	h->rkey = table_new();
	h->alias = table_new();
	h->deps = table_new();
	h->bytes = 0;
}

int store_hot_init(struct store *s)
{
#ifdef KILN_NO_HOT_CACHE
	/* For A/B measurements of the cache only. */
	return 0;
#endif
	if (s->readonly)
		return 0;
	s->hot = calloc(1, sizeof(*s->hot));
	if (!s->hot)
		return -ENOMEM;
	hot_clear(s->hot);
	if (!s->hot->rkey || !s->hot->alias || !s->hot->deps) {
		store_hot_fini(s);
		return -ENOMEM;
	}
	return 0;
}

void store_hot_fini(struct store *s)
{
	if (!s->hot)
		return;
	table_free(s->hot->rkey, hot_val_free);
	table_free(s->hot->alias, hot_val_free);
	table_free(s->hot->deps, deps_ref_drop);
	free(s->hot);
	s->hot = NULL;
}

/* Changes forgotten name by name at most per lookup: each forgotten key or
 * alias scans every cached answer, so past this the cache is emptied. */
#define FORGET_MAX 16

/* One change to forget, copied out of the store's records. */
struct forget_rec {
	char key[KILN_KEY_HEX + 1];    /* "" when none */
	char rkey[KILN_KEY_HEX + 1];
	char *alias;
};

struct forget {
	struct forget_rec recs[FORGET_MAX];
	size_t n;
	bool ok;       /* false: empty the cache instead */
};

/* store_changes_since's callback, under the store's lock: only copies, so
 * that writers do not wait on the scans. */
static void note_change(void *ctx, const char *key, const char *rkey, const char *alias)
{
	struct forget *f = ctx;
	if (!f->ok)
		return;
	if (f->n == FORGET_MAX) {
		f->ok = false;
		return;
	}
	struct forget_rec *r = &f->recs[f->n++];
	snprintf(r->key, sizeof(r->key), "%s", key != NULL ? key : "");
	snprintf(r->rkey, sizeof(r->rkey), "%s", rkey != NULL ? rkey : "");
	r->alias = alias != NULL ? strdup(alias) : NULL;
	if (alias != NULL && r->alias == NULL)
		f->ok = false;
}

struct holders {
	const struct forget_rec *r;
	char **names;
	size_t n, cap;
	bool oom;      /* some holder could not be listed */
};

/* Whether an answer holds the record's key (an entry written again: its
 * size, digest, pin or dependencies may be new; an alias's new target,
 * whose newest alias may now be that one), or an entry whose newest alias
 * is the record's alias (its old target: the entry's alias field changes). */
static bool holds(const struct hot_val *v, const struct forget_rec *r)
{
	for (size_t i = 0; i < v->n; i++) {
		const struct store_entry *e = &v->list[i];
		if ((r->key[0] != '\0' && strcmp(e->key, r->key) == 0) ||
		    (r->alias != NULL && e->alias != NULL && strcmp(e->alias, r->alias) == 0))
			return true;
	}
	return false;
}

static void collect_holder(const char *name, void *val, void *ctx)
{
	struct holders *hs = ctx;
	if (!holds(val, hs->r))
		return;
	if (hs->n == hs->cap) {
		size_t cap = hs->cap ? hs->cap * 2 : 8;
		char **names = realloc(hs->names, cap * sizeof(*names));
		if (names == NULL) {
			hs->oom = true;
			return;
		}
		hs->names = names;
		hs->cap = cap;
	}
	hs->names[hs->n++] = (char *)name;
}

/* Drops every answer of t that holds what r names. False when it could
 * not (no memory): the caller empties the cache. */
static bool drop_holders(struct table *t, const struct forget_rec *r)
{
	struct holders hs = { .r = r };
	table_foreach(t, collect_holder, &hs);
	/* The names are the table's own keys: each stays valid until its own
	 * deletion (a deletion moves slots, not the strings). */
	for (size_t i = 0; i < hs.n; i++)
		hot_val_free(table_del(t, hs.names[i]));
	free(hs.names);
	return !hs.oom;
}

/* Forgets one change: the answers by its request key and alias, and every
 * answer holding its key or its alias. */
static bool forget_one(struct store_hot *h, const struct forget_rec *r)
{
	if (r->rkey[0] != '\0')
		hot_val_free(table_del(h->rkey, r->rkey));
	if (r->alias != NULL)
		hot_val_free(table_del(h->alias, r->alias));
	if (r->key[0] != '\0')
		deps_ref_drop(table_del(h->deps, r->key));
	if (r->key[0] == '\0' && r->alias == NULL)
		return true;
	return drop_holders(h->rkey, r) && drop_holders(h->alias, r);
}

/*
 * Before a lookup: forgets what changed since the cache was filled. Only
 * the names a change touched go (a publish: its request key, its alias,
 * every answer holding its key or that alias), so that one build does not
 * cost every other entry its cached answer; a change of many rows, more
 * changes than the store keeps records of, or more than FORGET_MAX since
 * the last lookup empty the cache as before.
 */
uint64_t store_hot_begin(struct store *s)
{
	uint64_t g = store_generation(s);

	if (s->hot && s->hot->gen != g) {
		struct forget f = { .ok = true };
		bool known = store_changes_since(s, s->hot->gen, g, note_change, &f) && f.ok;
		for (size_t i = 0; i < f.n; i++) {
			if (known && !forget_one(s->hot, &f.recs[i]))
				known = false;
			free(f.recs[i].alias);
		}
		if (!known)
			hot_clear(s->hot);
		s->hot->gen = g;
	}
	return g;
}

static char *dup_or_null(const char *p, bool *ok)
{
	char *d;

	if (!p)
		return NULL;
	d = strdup(p);
	if (!d)
		*ok = false;
	return d;
}

static size_t deps_bytes(const struct store_entry *e)
{
	size_t b = 0;
	for (size_t i = 0; i < e->ndeps; i++)
		b += sizeof(e->deps[i]) + (e->deps[i].path ? strlen(e->deps[i].path) + 1 : 0);
	return b;
}

void store_deps_unref(struct store_deps_ref *r)
{
	if (__atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	for (size_t i = 0; i < r->n; i++)
		free(r->deps[i].path);
	free(r->deps);
	free(r);
}

/* dst's deps: a new reference to src's block, or a new block made from
 * src's own deps (the first time an entry enters the cache). */
static bool deps_share(struct store_entry *dst, const struct store_entry *src)
{
	bool ok = true;
	struct store_deps_ref *r = src->deps_ref;
	if (r != NULL) {
		__atomic_add_fetch(&r->refs, 1, __ATOMIC_RELAXED);
	} else {
		if ((r = calloc(1, sizeof(*r))) == NULL ||
		    (r->deps = calloc(src->ndeps, sizeof(*r->deps))) == NULL) {
			free(r);
			return false;
		}
		r->refs = 1;
		for (size_t i = 0; ok && i < src->ndeps; i++) {
			r->deps[i] = src->deps[i];
			r->deps[i].path = dup_or_null(src->deps[i].path, &ok);
			r->n = i + 1;
		}
		if (!ok) {
			store_deps_unref(r);
			return false;
		}
	}
	dst->deps = r->deps;
	dst->ndeps = src->ndeps;
	dst->deps_ref = r;
	return true;
}

/* Copy of src into dst, the deps shared (deps_share); 0 or -ENOMEM (dst
 * is then empty). */
static int entry_copy(struct store_entry *dst, const struct store_entry *src)
{
	bool ok = true;

	*dst = *src;
	dst->deps = NULL;
	dst->ndeps = 0;
	dst->deps_ref = NULL;
	dst->alias = dup_or_null(src->alias, &ok);
	dst->label = dup_or_null(src->label, &ok);
	dst->toolchain = dup_or_null(src->toolchain, &ok);
	dst->output = dup_or_null(src->output, &ok);
	dst->args_json = dup_or_null(src->args_json, &ok);
	dst->sources_json = dup_or_null(src->sources_json, &ok);
	if (ok && src->ndeps > 0)
		ok = deps_share(dst, src);
	if (!ok) {
		store_entry_free(dst);
		return -ENOMEM;
	}
	return 0;
}

static int list_copy(const struct store_entry *src, size_t n, struct store_entry **out)
{
	struct store_entry *list;
	size_t i;

	*out = NULL;
	if (n == 0)
		return 0;
	list = calloc(n, sizeof(*list));
	if (!list)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		if (entry_copy(&list[i], &src[i]) < 0) {
			store_entries_free(list, i);
			return -ENOMEM;
		}
	}
	*out = list;
	return 0;
}

static struct table *hot_table(struct store *s, enum store_hot_kind kind)
{
	return kind == STORE_HOT_RKEY ? s->hot->rkey : s->hot->alias;
}

int store_hot_get(struct store *s, enum store_hot_kind kind, const char *name,
		  struct store_entry **out, size_t *n)
{
	const struct hot_val *v;

	*out = NULL;
	*n = 0;
	if (!s->hot)
		return -EAGAIN;
	v = table_get(hot_table(s, kind), name);
	if (!v)
		return -EAGAIN;
	if (v->n == 0)
		return -ENOENT;
	if (list_copy(v->list, v->n, out) < 0)
		return -EAGAIN;   /* let SQLite answer instead */
	*n = v->n;
	return 0;
}

/*
 * The cache's copy of src: its dependencies the block already interned for
 * src's key when there is one (an entry read again from SQLite under
 * another alias), else a new block, interned. *bytes grows by what is new.
 */
static int entry_copy_interned(struct store_hot *h, struct store_entry *dst,
			       const struct store_entry *src, size_t *bytes)
{
	struct store_entry tmp = *src;
	struct store_deps_ref *r = src->deps_ref != NULL || src->ndeps == 0 ? NULL
				 : table_get(h->deps, src->key);
	if (r != NULL && r->n == src->ndeps)
		tmp.deps_ref = r;   /* the same entry, the same generation: the same deps */
	if (entry_copy(dst, &tmp) < 0)
		return -ENOMEM;
	*bytes += sizeof(*dst) + 128;
	if (dst->deps_ref != NULL && table_get(h->deps, src->key) == NULL &&
	    table_put(h->deps, src->key, dst->deps_ref, NULL) == 0) {
		__atomic_add_fetch(&dst->deps_ref->refs, 1, __ATOMIC_RELAXED);
		*bytes += deps_bytes(src);
	} else if (tmp.deps_ref == NULL && src->deps_ref == NULL) {
		*bytes += deps_bytes(src);   /* not interned: counted whole */
	}
	return 0;
}

void store_hot_put(struct store *s, uint64_t gen, enum store_hot_kind kind, const char *name,
		   const struct store_entry *list, size_t n)
{
	struct hot_val *v;
	void *old = NULL;
	size_t bytes = strlen(name) + sizeof(*v) + 64, i, whole = 0;

	/* A commit since the query began: the answer may be stale already. */
	if (!s->hot || gen != s->hot->gen)
		return;
	/* What it would add: an entry whose dependencies are interned
	 * already adds its own fields only. */
	for (i = 0; i < n; i++) {
		whole += sizeof(list[i]) + 128;
		if (list[i].deps_ref == NULL && table_get(s->hot->deps, list[i].key) == NULL)
			whole += deps_bytes(&list[i]);
	}
	if (bytes + whole > HOT_BYTES_MAX / 16)
		return;
	if (s->hot->bytes + bytes + whole > HOT_BYTES_MAX)
		hot_clear(s->hot);
	v = calloc(1, sizeof(*v));
	if (!v || (n > 0 && (v->list = calloc(n, sizeof(*v->list))) == NULL)) {
		free(v);
		return;
	}
	for (i = 0; i < n; i++) {
		if (entry_copy_interned(s->hot, &v->list[i], &list[i], &bytes) < 0) {
			store_entries_free(v->list, i);
			free(v);
			return;
		}
	}
	v->n = n;
	if (!hot_table(s, kind) || table_put(hot_table(s, kind), name, v, &old) < 0) {
		hot_val_free(v);
		return;
	}
	hot_val_free(old);
	s->hot->bytes += bytes;
}

int store_recent_keys(struct store *s, size_t max, char (**keys)[65], size_t *n)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(s->rd, "SELECT key FROM entries ORDER BY last_used DESC,"
				    " created DESC LIMIT ?1", -1, &st, NULL);
	*keys = NULL;
	*n = 0;
	if (rc == SQLITE_OK)
		sqlite3_bind_int64(st, 1, (sqlite3_int64)max);
	/* As many as there are entries, up to max. */
	int64_t count = 0;
	sqlite3_stmt *c = NULL;
	if (rc == SQLITE_OK && sqlite3_prepare_v2(s->rd, "SELECT entries FROM totals WHERE id = 1",
						  -1, &c, NULL) == SQLITE_OK && sqlite3_step(c) == SQLITE_ROW)
		count = sqlite3_column_int64(c, 0);
	sqlite3_finalize(c);
	if ((uint64_t)count < max)
		max = (size_t)count;
	if (rc == SQLITE_OK && max > 0 && (*keys = malloc(max * sizeof(**keys))) == NULL)
		rc = SQLITE_NOMEM;
	while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		const unsigned char *t = sqlite3_column_text(st, 0);
		rc = SQLITE_OK;
		if (t != NULL && sqlite3_column_bytes(st, 0) == KILN_KEY_HEX && *n < max)
			memcpy((*keys)[(*n)++], t, KILN_KEY_HEX + 1);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_OK && rc != SQLITE_DONE) {
		free(*keys);
		*keys = NULL;
		*n = 0;
		return store_sql_errno(rc);
	}
	return 0;
}
