/*
 * Counters kept in the index (kiln stats): one row per name, so that
 * kilnd's statistics survive a restart and `kiln stats --zero` can reset
 * them. The table is created by every writer that opens the index (no
 * schema version bump: an older kiln ignores it), and a reader of an index
 * that has none sees no counters.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "store_int.h"

const char store_counters_sql[] =
	"CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY NOT NULL,"
	" value INTEGER NOT NULL);"
	/* An alias's data (store.h, store_set_alias_data), bound to the key
	 * the alias named when it was written: a table of its own, created
	 * like counters, so that an index without it stays readable by this
	 * kiln and this one's by an older (which ignores it). */
	"CREATE TABLE IF NOT EXISTS alias_data (alias TEXT PRIMARY KEY NOT NULL,"
	" key TEXT NOT NULL, data TEXT NOT NULL);";

const uint64_t store_build_bucket_ms[STORE_BUILD_BUCKETS - 1] = {
	100, 250, 500, 1000, 2000, 5000, 10000, 30000, 60000, 300000,
};

int store_counters_read(struct store *s, struct store_counter **out, size_t *n)
{
	sqlite3_stmt *st = NULL;
	struct store_counter *list = NULL;
	size_t len = 0, cap = 0;
	int rc;

	*out = NULL;
	*n = 0;
	rc = sqlite3_prepare_v2(s->rd, "SELECT name, value FROM counters", -1, &st, NULL);
	if (rc != SQLITE_OK) {
		/* An index no writer of this kiln has opened yet: none saved. */
		bool missing = strstr(sqlite3_errmsg(s->rd), "no such table") != NULL;
		sqlite3_finalize(st);
		return missing ? 0 : store_sql_errno(rc);
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);
		int64_t v = sqlite3_column_int64(st, 1);
		if (name == NULL || strlen(name) >= sizeof(list[0].name) || v < 0)
			continue;   /* not ours: left alone */
		if (len == cap) {
			size_t ncap = cap != 0 ? cap * 2 : 64;
			struct store_counter *p = realloc(list, ncap * sizeof(*p));
			if (p == NULL) {
				rc = SQLITE_NOMEM;
				break;
			}
			list = p;
			cap = ncap;
		}
		strcpy(list[len].name, name);
		list[len++].value = (uint64_t)v;
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		free(list);
		return store_step_err(rc);
	}
	*out = list;
	*n = len;
	return 0;
}

struct counters_job {
	const struct store_counter *c;
	size_t n;
	bool all;
};

static int counters_body(struct store *s, void *arg)
{
	struct counters_job *j = arg;
	sqlite3_stmt *st = NULL;
	int rc = store_exec(s->wr, store_counters_sql);

	if (rc == 0 && j->all)
		rc = store_exec(s->wr, "DELETE FROM counters");
	if (rc == 0)
		rc = store_sql_errno(sqlite3_prepare_v2(s->wr,
			"INSERT OR REPLACE INTO counters (name, value) VALUES (?1, ?2)", -1, &st, NULL));
	for (size_t i = 0; rc == 0 && i < j->n; i++) {
		sqlite3_bind_text(st, 1, j->c[i].name, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, j->c[i].value > INT64_MAX ? INT64_MAX
								    : (int64_t)j->c[i].value);
		int step = sqlite3_step(st);
		rc = step == SQLITE_DONE ? 0 : store_step_err(step);
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	return rc;
}

int store_counters_write(struct store *s, const struct store_counter *c, size_t n, bool all)
{
	struct counters_job j = { .c = c, .n = n, .all = all };

	if (s->readonly)
		return -EROFS;
	return store_txn(s, false, counters_body, &j);
}
