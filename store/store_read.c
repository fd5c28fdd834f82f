/*
 * The store's reader queries, the ones the daemon runs on every request:
 * an entry by key, alias, request key, hex prefix or label, an alias's
 * data, the list, and the one decoding of an entry row they all share
 * (row_to_entry, in ENTRY_COLS order: store_int.h). Opening the index and
 * preparing these statements is store.c's; writing is store_write.c's.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "store.h"
#include "store_int.h"
#include "util.h"

void store_entry_free(struct store_entry *e)
{
	size_t i;

	if (!e)
		return;
	free(e->alias);
	free(e->label);
	free(e->toolchain);
	free(e->output);
	free(e->args_json);
	free(e->sources_json);
	if (e->deps_ref) {
		store_deps_unref(e->deps_ref);
	} else {
		for (i = 0; i < e->ndeps; i++)
			free(e->deps[i].path);
		free(e->deps);
	}
	memset(e, 0, sizeof(*e));
}

void store_entries_free(struct store_entry *list, size_t n)
{
	size_t i;

	if (!list)
		return;
	for (i = 0; i < n; i++)
		store_entry_free(&list[i]);
	free(list);
}

static int dup_col(sqlite3_stmt *st, int col, bool required, char **out)
{
	const unsigned char *t;

	*out = NULL;
	if (sqlite3_column_type(st, col) == SQLITE_NULL)
		return required ? -EBADMSG : 0;
	t = sqlite3_column_text(st, col);
	if (!t)
		return -ENOMEM;
	*out = strdup((const char *)t);
	return *out ? 0 : -ENOMEM;
}

static int key_col(sqlite3_stmt *st, int col, char dst[65])
{
	const unsigned char *t = sqlite3_column_text(st, col);

	if (!t || sqlite3_column_bytes(st, col) != KILN_KEY_HEX)
		return -EBADMSG;
	memcpy(dst, t, KILN_KEY_HEX + 1);
	return 0;
}

static int row_to_entry(sqlite3_stmt *st, struct store_entry *e)
{
	int rc, source = STORE_DEPS_DEPFILE;

	memset(e, 0, sizeof(*e));
	rc = key_col(st, C_KEY, e->key);
	if (rc == 0)
		rc = key_col(st, C_RKEY, e->rkey);
	if (rc == 0)
		rc = dup_col(st, C_LABEL, false, &e->label);
	if (rc == 0)
		rc = dup_col(st, C_TOOLCHAIN, true, &e->toolchain);
	if (rc == 0)
		rc = dup_col(st, C_OUTPUT, true, &e->output);
	if (rc == 0)
		rc = dup_col(st, C_ARGS, false, &e->args_json);
	if (rc == 0)
		rc = dup_col(st, C_SOURCES, false, &e->sources_json);
	if (rc == 0)
		rc = dup_col(st, C_ALIAS, false, &e->alias);
	if (rc == 0)
		rc = store_deps_decode(sqlite3_column_blob(st, C_DEPS),
			(size_t)sqlite3_column_bytes(st, C_DEPS), &e->deps, &e->ndeps, &source);
	if (rc < 0) {
		store_entry_free(e);
		return rc;
	}
	e->deps_source = (uint8_t)source;
	e->size = (uint64_t)sqlite3_column_int64(st, C_SIZE);
	e->created = sqlite3_column_int64(st, C_CREATED);
	e->last_used = sqlite3_column_int64(st, C_LAST_USED);
	e->uses = (uint64_t)sqlite3_column_int64(st, C_USES);
	e->build_ms = (uint64_t)sqlite3_column_int64(st, C_BUILD_MS);
	e->pinned = sqlite3_column_int(st, C_PINNED) != 0;
	e->key_format = sqlite3_column_int(st, C_KEY_FORMAT);
	e->disk = (uint64_t)sqlite3_column_int64(st, C_DISK);
	if (sqlite3_column_bytes(st, C_SHA256) == 32) {
		memcpy(e->sha256, sqlite3_column_blob(st, C_SHA256), 32);
		e->has_sha256 = true;
	}
	return 0;
}

/* Steps a bound statement expecting at most one entry, then resets it so
 * that the reader does not keep a snapshot open between requests. */
static int get_one(sqlite3_stmt *st, struct store_entry *e)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW)
		rc = row_to_entry(st, e);
	else
		rc = rc == SQLITE_DONE ? -ENOENT : store_sql_errno(rc);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc;
}

static int rows_get_many(sqlite3_stmt *st, struct store_entry **out, size_t *n)
{
	struct store_entry *list = NULL, *grown;
	size_t cnt = 0, cap = 0;
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (cnt == cap) {
			cap = cap ? cap * 2 : 16;
			grown = realloc(list, cap * sizeof(*list));
			if (!grown) {
				rc = -ENOMEM;
				goto fail;
			}
			list = grown;
		}
		rc = row_to_entry(st, &list[cnt]);
		if (rc < 0)
			goto fail;
		cnt++;
	}
	rc = store_sql_errno(rc);
	if (rc < 0)
		goto fail;
	sqlite3_reset(st);
	*out = list;
	*n = cnt;
	return 0;
fail:
	sqlite3_reset(st);
	store_entries_free(list, cnt);
	return rc;
}

int store_get(struct store *s, const char *key, struct store_entry *e)
{
	memset(e, 0, sizeof(*e));
	sqlite3_bind_text(s->q_get, 1, key, -1, SQLITE_STATIC);
	return get_one(s->q_get, e);
}

/* One entry by sql (?1 = arg) from any thread: the writer connection,
 * under its lock (the reader's cached statements belong to the thread
 * that opened the store). */
static int get_any_thread(struct store *s, const char *sql, const char *arg, struct store_entry *e)
{
	sqlite3_stmt *st = NULL;
	int rc;

	memset(e, 0, sizeof(*e));
	if (s->wr == NULL)
		return -EROFS;
	pthread_mutex_lock(&s->wlock);
	rc = sqlite3_prepare_v2(s->wr, sql, -1, &st, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_text(st, 1, arg, -1, SQLITE_STATIC);
		rc = get_one(st, e);
	} else {
		rc = store_sql_errno(rc);
	}
	sqlite3_finalize(st);
	pthread_mutex_unlock(&s->wlock);
	return rc;
}

int store_get_any_thread(struct store *s, const char *key, struct store_entry *e)
{
	return get_any_thread(s, ENTRY_COLS "WHERE e.key = ?1", key, e);
}

int store_get_by_alias_any_thread(struct store *s, const char *alias, struct store_entry *e)
{
	return get_any_thread(s, ENTRY_COLS "JOIN aliases x ON x.key = e.key WHERE x.alias = ?1",
			      alias, e);
}

int store_get_by_alias(struct store *s, const char *alias, struct store_entry *e)
{
	struct store_entry *hit = NULL;
	uint64_t gen = store_hot_begin(s);
	size_t n = 0;
	int rc;

	memset(e, 0, sizeof(*e));
	rc = store_hot_get(s, STORE_HOT_ALIAS, alias, &hit, &n);
	if (rc == 0) {
		*e = hit[0];  /* n is 1 for an alias */
		free(hit);
		return 0;
	}
	if (rc == -ENOENT)
		return rc;
	sqlite3_bind_text(s->q_alias, 1, alias, -1, SQLITE_STATIC);
	rc = get_one(s->q_alias, e);
	if (rc == 0 || rc == -ENOENT)
		store_hot_put(s, gen, STORE_HOT_ALIAS, alias, e, rc == 0 ? 1 : 0);
	return rc;
}

int store_alias_data(struct store *s, const char *alias, const char *key, char **data)
{
	sqlite3_stmt *st = NULL;
	/* The alias must name key now (the data is bound to its target); an
	 * index written before the table existed has none. */
	int rc = sqlite3_prepare_v2(s->rd, "SELECT d.data FROM aliases a LEFT JOIN alias_data d"
				    " ON d.alias = a.alias AND d.key = a.key"
				    " WHERE a.alias = ?1 AND a.key = ?2", -1, &st, NULL);

	*data = NULL;
	if (rc != SQLITE_OK) {
		sqlite3_finalize(st);
		st = NULL;
		rc = sqlite3_prepare_v2(s->rd, "SELECT NULL FROM aliases"
					" WHERE alias = ?1 AND key = ?2", -1, &st, NULL);
	}
	if (rc == SQLITE_OK) {
		sqlite3_bind_text(st, 1, alias, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
		rc = sqlite3_step(st);
	}
	if (rc == SQLITE_ROW) {
		const unsigned char *t = sqlite3_column_text(st, 0);
		rc = 0;
		if (t != NULL && (*data = strdup((const char *)t)) == NULL)
			rc = -ENOMEM;
	} else {
		rc = rc == SQLITE_DONE ? -ENOENT : store_step_err(rc);
	}
	sqlite3_finalize(st);
	return rc;
}

int store_get_by_rkey(struct store *s, const char *rkey, struct store_entry **out, size_t *n)
{
	uint64_t gen = store_hot_begin(s);
	int rc;

	rc = store_hot_get(s, STORE_HOT_RKEY, rkey, out, n);
	if (rc != -EAGAIN)
		return rc;
	sqlite3_bind_text(s->q_rkey, 1, rkey, -1, SQLITE_STATIC);
	rc = rows_get_many(s->q_rkey, out, n);
	sqlite3_clear_bindings(s->q_rkey);
	if (rc == 0)
		store_hot_put(s, gen, STORE_HOT_RKEY, rkey, *out, *n);
	if (rc == 0 && *n == 0) {
		free(*out);
		*out = NULL;
		rc = -ENOENT;
	}
	return rc;
}

/* Looks a hex prefix up; at most two rows are read to tell unique from
 * ambiguous, over the primary key's index. */
static int resolve_prefix(struct store *s, const char *prefix, struct store_entry *e)
{
	char key[KILN_KEY_HEX + 1] = "";
	int rows = 0, rc;

	sqlite3_bind_text(s->q_prefix, 1, prefix, -1, SQLITE_STATIC);
	while ((rc = sqlite3_step(s->q_prefix)) == SQLITE_ROW) {
		const unsigned char *t = sqlite3_column_text(s->q_prefix, 0);

		if (rows++ == 0 && t && sqlite3_column_bytes(s->q_prefix, 0) == KILN_KEY_HEX)
			memcpy(key, t, sizeof(key));
	}
	sqlite3_reset(s->q_prefix);
	sqlite3_clear_bindings(s->q_prefix);
	if (rc != SQLITE_DONE)
		return store_sql_errno(rc);
	if (rows == 0)
		return -ENOENT;
	if (rows > 1)
		return -ENOTUNIQ;
	return key[0] ? store_get(s, key, e) : -EBADMSG;
}

int store_keys_with_prefix(struct store *s, const char *prefix, char (*keys)[65],
			   size_t max, size_t *n)
{
	char hex[KILN_KEY_HEX + 1];
	sqlite3_stmt *st = NULL;
	size_t len = strlen(prefix);
	int rc;

	*n = 0;
	if (len > KILN_KEY_HEX)
		return -EINVAL;
	for (size_t i = 0; i <= len; i++)
		hex[i] = (char)tolower((unsigned char)prefix[i]);
	rc = sqlite3_prepare_v2(s->rd, "SELECT key FROM entries WHERE key >= ?1 AND key < ?1 || 'g' "
				"ORDER BY key LIMIT ?2", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store_sql_errno(rc);
	sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)max);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW && *n < max) {
		const unsigned char *t = sqlite3_column_text(st, 0);
		if (t != NULL && sqlite3_column_bytes(st, 0) == KILN_KEY_HEX)
			memcpy(keys[(*n)++], t, KILN_KEY_HEX + 1);
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : store_sql_errno(rc);
}

/*
 * An exact key wins, then an exact alias (an alias may look like hex), and
 * only then a prefix, so that a longer key never hides a user's alias.
 */
int store_resolve(struct store *s, const char *ref, struct store_entry *e)
{
	char hex[KILN_KEY_HEX + 1];
	size_t len = strlen(ref), i;
	bool is_hex = len >= 4 && len <= KILN_KEY_HEX;
	int rc;

	memset(e, 0, sizeof(*e));
	for (i = 0; is_hex && i < len; i++) {
		is_hex = isxdigit((unsigned char)ref[i]);
		hex[i] = (char)tolower((unsigned char)ref[i]);
	}
	if (is_hex) {
		hex[len] = '\0';
		if (len == KILN_KEY_HEX) {
			rc = store_get(s, hex, e);
			if (rc != -ENOENT)
				return rc;
		}
	}
	rc = store_get_by_alias(s, ref, e);
	if (rc == -ENOENT && is_hex && len < KILN_KEY_HEX)
		rc = resolve_prefix(s, hex, e);
	if (rc != -ENOENT)
		return rc;
	/* Last, a label: one entry's, else ambiguous (store_keys_with_label). */
	char keys[2][65];
	size_t n = 0;
	rc = store_keys_with_label(s, ref, keys, 2, &n);
	if (rc != 0)
		return rc;
	return n == 0 ? -ENOENT : n > 1 ? -ENOTUNIQ : store_get(s, keys[0], e);
}

int store_keys_with_label(struct store *s, const char *label, char (*keys)[65], size_t max,
			  size_t *n)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(s->rd, "SELECT key FROM entries WHERE label = ?1"
				    " ORDER BY last_used DESC, key LIMIT ?2", -1, &st, NULL);
	*n = 0;
	if (rc == SQLITE_OK) {
		sqlite3_bind_text(st, 1, label, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)max);
	}
	while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		const unsigned char *t = sqlite3_column_text(st, 0);
		rc = SQLITE_OK;
		if (t != NULL && sqlite3_column_bytes(st, 0) == KILN_KEY_HEX)
			memcpy(keys[(*n)++], t, KILN_KEY_HEX + 1);
	}
	sqlite3_finalize(st);
	return rc == SQLITE_OK || rc == SQLITE_DONE ? 0 : store_sql_errno(rc);
}

int store_list(struct store *s, struct store_entry **out, size_t *n)
{
	sqlite3_stmt *st = NULL;
	int rc;

	*out = NULL;
	*n = 0;
	rc = sqlite3_prepare_v2(s->rd, ENTRY_COLS_NODEPS
		"ORDER BY e.last_used DESC, e.created DESC, e.key", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store_sql_errno(rc);
	rc = rows_get_many(st, out, n);
	sqlite3_finalize(st);
	return rc;
}
