/*
 * The stand-in runs' memo; see recheck_memo.h. A ring of RECHECK_MEMO_MAX
 * records under one mutex; a record is a digest and its dependencies,
 * copied.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "depkind.h"
#include "recheck_memo.h"
#include "store.h"
#include "table.h"

struct memo_record {
	bool used;
	uint8_t key[32];
	struct store_dep *deps;
	size_t n;
};

struct recheck_memo {
	pthread_mutex_t lock;
	pthread_cond_t left;         /* a run's owner left (recheck_memo_leave) */
	struct memo_record rec[RECHECK_MEMO_MAX];
	size_t next;                 /* the slot the next new record takes */
	uint8_t running[RECHECK_MEMO_RUNNING][32];   /* steps being run, by their owners */
	bool run_used[RECHECK_MEMO_RUNNING];
	uint64_t checks, reused;
	unsigned waiting;            /* checks waiting in recheck_memo_enter */
};

struct recheck_memo *recheck_memo_new(void)
{
	struct recheck_memo *m = calloc(1, sizeof(*m));
	if (m == NULL)
		return NULL;
	if (pthread_mutex_init(&m->lock, NULL) != 0) {
		free(m);
		return NULL;
	}
	if (pthread_cond_init(&m->left, NULL) != 0) {
		pthread_mutex_destroy(&m->lock);
		free(m);
		return NULL;
	}
	return m;
}

static void record_clear(struct memo_record *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->deps[i].path);
	free(r->deps);
	memset(r, 0, sizeof(*r));
}

void recheck_memo_free(struct recheck_memo *m)
{
	if (m == NULL)
		return;
	for (size_t i = 0; i < RECHECK_MEMO_MAX; i++)
		record_clear(&m->rec[i]);
	pthread_cond_destroy(&m->left);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

void recheck_dep_key(int kind, const char *path, char *out, size_t cap)
{
	snprintf(out, cap, "%d:%s", kind, path);
}

struct table *recheck_sent_index(const struct store_dep *sent, size_t nsent)
{
	struct table *t = table_new();
	char key[PATH_MAX + 8];
	for (size_t i = 0; t != NULL && i < nsent; i++) {
		recheck_dep_key(sent[i].kind, sent[i].path, key, sizeof(key));
		if (table_put(t, key, (void *)&sent[i], NULL) != 0) {
			table_free(t, NULL);
			t = NULL;
		}
	}
	return t;
}

/* The state a dependency's kind carries, the same in a and b. */
static bool same_state(const struct store_dep *a, const struct store_dep *b)
{
	const struct dep_kind_info *k = dep_kind_info(a->kind);
	if (k == NULL || a->kind != b->kind || strcmp(a->path, b->path) != 0)
		return false;
	if (k->has_digest && memcmp(a->digest, b->digest, 32) != 0)
		return false;
	if (k->has_size && a->size != b->size)
		return false;
	return !(k->has_mode || k->named) || a->mode == b->mode;
}

static struct memo_record *find(struct recheck_memo *m, const uint8_t key[32])
{
	for (size_t i = 0; i < RECHECK_MEMO_MAX; i++) {
		if (m->rec[i].used && memcmp(m->rec[i].key, key, 32) == 0)
			return &m->rec[i];
	}
	return NULL;
}

/* Under the lock. */
static bool holds_locked(struct recheck_memo *m, const uint8_t key[32], const struct table *sent_index)
{
	char k[PATH_MAX + 8];
	const struct memo_record *r = find(m, key);
	bool holds = r != NULL;
	for (size_t i = 0; holds && r != NULL && i < r->n; i++) {
		recheck_dep_key(r->deps[i].kind, r->deps[i].path, k, sizeof(k));
		const struct store_dep *s = table_get(sent_index, k);
		holds = s != NULL && same_state(&r->deps[i], s);
	}
	return holds;
}

bool recheck_memo_holds(struct recheck_memo *m, const uint8_t key[32], const struct table *sent_index)
{
	pthread_mutex_lock(&m->lock);
	bool holds = holds_locked(m, key, sent_index);
	pthread_mutex_unlock(&m->lock);
	return holds;
}

static int running_slot(const struct recheck_memo *m, const uint8_t key[32])
{
	for (int i = 0; i < RECHECK_MEMO_RUNNING; i++) {
		if (m->run_used[i] && memcmp(m->running[i], key, 32) == 0)
			return i;
	}
	return -1;
}

int recheck_memo_enter(struct recheck_memo *m, const uint8_t key[32], const struct table *sent_index)
{
	bool waited = false;
	pthread_mutex_lock(&m->lock);
	while (running_slot(m, key) >= 0) {
		m->waiting++;
		pthread_cond_wait(&m->left, &m->lock);
		m->waiting--;
		waited = true;
	}
	int rc = RECHECK_MEMO_HOLDS;
	if (!holds_locked(m, key, sent_index)) {
		rc = RECHECK_MEMO_RUN;
		/* One who waited runs beside the others, owning nothing: checks
		 * whose lists the record does not fit never queue behind each
		 * other. */
		for (int i = 0; !waited && i < RECHECK_MEMO_RUNNING; i++) {
			if (!m->run_used[i]) {
				m->run_used[i] = true;
				memcpy(m->running[i], key, 32);
				rc = RECHECK_MEMO_OWN;
				break;
			}
		}
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

void recheck_memo_leave(struct recheck_memo *m, const uint8_t key[32])
{
	pthread_mutex_lock(&m->lock);
	int i = running_slot(m, key);
	if (i >= 0)
		m->run_used[i] = false;
	pthread_cond_broadcast(&m->left);
	pthread_mutex_unlock(&m->lock);
}

int recheck_memo_put(struct recheck_memo *m, const uint8_t key[32], const struct store_dep *const *deps,
		     size_t n)
{
	struct memo_record nr = { .used = true, .n = n };
	memcpy(nr.key, key, 32);
	nr.deps = calloc(n + 1, sizeof(*nr.deps));
	for (size_t i = 0; nr.deps != NULL && i < n; i++) {
		nr.deps[i] = *deps[i];
		if ((nr.deps[i].path = strdup(deps[i]->path)) == NULL) {
			nr.n = i;
			record_clear(&nr);
			return -ENOMEM;
		}
	}
	if (nr.deps == NULL)
		return -ENOMEM;
	pthread_mutex_lock(&m->lock);
	struct memo_record *r = find(m, key);
	if (r == NULL) {
		r = &m->rec[m->next];
		m->next = (m->next + 1) % RECHECK_MEMO_MAX;
	}
	record_clear(r);
	*r = nr;
	pthread_mutex_unlock(&m->lock);
	return 0;
}

void recheck_memo_count(struct recheck_memo *m, bool reused)
{
	pthread_mutex_lock(&m->lock);
	m->checks++;
	m->reused += reused;
	pthread_mutex_unlock(&m->lock);
}

void recheck_memo_counts(struct recheck_memo *m, uint64_t *checks, uint64_t *reused)
{
	pthread_mutex_lock(&m->lock);
	*checks = m->checks;
	*reused = m->reused;
	pthread_mutex_unlock(&m->lock);
}

unsigned recheck_memo_waiting(struct recheck_memo *m)
{
	pthread_mutex_lock(&m->lock);
	unsigned n = m->waiting;
	pthread_mutex_unlock(&m->lock);
	return n;
}
