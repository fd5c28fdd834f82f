/*
 * The entries' operations (docs/protocol.md): list and show read the index
 * on the loop thread; remove, pin, unpin and gc write it on the pool
 * (op_write). A reference (a key, a key prefix, an alias or a label) is
 * resolved here, once for all of them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "entry_codec.h"
#include "kilnd.h"
#include "log.h"
#include "msg.h"
#include "ops.h"
#include "server.h"
#include "store.h"
#include "thread.h"
#include "upgrade.h"
#include "util.h"

#define ADD_NUM(obj, name, v) cJSON_AddNumberToObject(obj, name, (double)(v))

void op_list(struct conn *c, struct msg_request *req)
{
	struct kilnd *d = c->d;
	struct store_entry *list = NULL;
	size_t n = 0;
	int rc = store_list(d->store, &list, &n);
	if (rc != 0) {
		conn_reply_error(c, req->id, ERR_IO, NULL, "cannot read the index: %s", strerror(-rc));
		return;
	}
	cJSON *r = msg_ok_reply(req->id);
	cJSON *arr = r != NULL ? cJSON_AddArrayToObject(r, "entries") : NULL;
	for (size_t i = 0; arr != NULL && i < n; i++) {
		kilnd_pending_uses(d, &list[i]);
		cJSON_AddItemToArray(arr, store_entry_json(d->store, &list[i], false));
	}
	store_entries_free(list, n);
	conn_reply(c, r, -1);
}

/* An ambiguous key prefix: the error names the entries it matches (the
 * first eight, by key) in its message and in "matches". */
static void ambiguous_ref(struct conn *c, const struct msg_request *req)
{
	char keys[8][65], list[8 * 14 + 16] = "";
	size_t n = 0;
	(void)store_keys_with_prefix(c->d->store, req->ref, keys, 8, &n);
	bool label = n == 0;
	if (label)
		(void)store_keys_with_label(c->d->store, req->ref, keys, 8, &n);
	for (size_t i = 0; i < n; i++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%.12s", i ? ", " : "",
			 keys[i]);
	struct msg_error err = { .code = ERR_AMBIGUOUS };
	snprintf(err.field, sizeof(err.field), "ref");
	snprintf(err.message, sizeof(err.message), "\"%.64s\" %s several entries (%s%s); %s",
		 req->ref, label ? "labels" : "matches", list, n == 8 ? ", ..." : "",
		 label ? "name one by its key" : "give more digits");
	cJSON *reply = msg_error_reply(req->id, &err);
	cJSON *eo = reply != NULL ? cJSON_GetObjectItem(reply, "error") : NULL;
	cJSON *arr = eo != NULL ? cJSON_AddArrayToObject(eo, "matches") : NULL;
	for (size_t i = 0; arr != NULL && i < n; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(keys[i]));
	if (reply != NULL)
		conn_reply(c, reply, -1);
	else
		conn_reply_error(c, req->id, ERR_INTERNAL, NULL, "out of memory");
}

/* Resolves req->ref; on failure answers the request and returns non-zero. */
static int resolve_ref(struct conn *c, struct msg_request *req, struct store_entry *e)
{
	int rc = store_resolve(c->d->store, req->ref, e);
	if (rc == -ENOENT && strlen(req->ref) < 4 && strspn(req->ref, "0123456789abcdefABCDEF") == strlen(req->ref))
		conn_reply_error(c, req->id, ERR_NOT_FOUND, "ref",
				 "no entry matches \"%s\" (a key prefix needs at least 4 hex digits)", req->ref);
	else if (rc == -ENOENT)
		conn_reply_error(c, req->id, ERR_NOT_FOUND, "ref", "no entry matches \"%s\"", req->ref);
	else if (rc == -ENOTUNIQ)
		ambiguous_ref(c, req);
	else if (rc != 0)
		conn_reply_error(c, req->id, ERR_IO, NULL, "cannot read the index: %s", strerror(-rc));
	return rc;
}

void op_show(struct conn *c, struct msg_request *req)
{
	struct store_entry e = { 0 };
	if (resolve_ref(c, req, &e) != 0)
		return;
	kilnd_pending_uses(c->d, &e);
	cJSON *r = msg_ok_reply(req->id);
	if (r != NULL)
		cJSON_AddItemToObject(r, "entry", store_entry_json(c->d->store, &e, true));
	store_entry_free(&e);
	conn_reply(c, r, -1);
}

/* remove, pin, unpin and gc write the index, so they run on the pool. */
struct write_job {
	struct conn *c;
	enum msg_op op;
	uint64_t id;
	char key[65];
	uint64_t max_size;
	bool stale;         /* gc --stale */
	void *touches;      /* gc: uses to write before choosing what to evict */
	int rc;
	uint64_t removed, freed, pinned_removed;
	uint64_t index, other;  /* gc: store_overhead after it */
	uint64_t logs_removed;  /* gc: logs of failed builds pruned */
};

static void write_work(void *arg)
{
	ASSERT_POOL();
	struct write_job *j = arg;
	struct store *s = j->c->d->store;
	switch (j->op) {
	case OP_REMOVE:
		j->rc = store_remove(s, j->key);
		break;
	case OP_PIN:
	case OP_UNPIN:
		j->rc = store_set_pinned(s, j->key, j->op == OP_PIN);
		break;
	default:
		kilnd_touches_write(j->touches);
		j->touches = NULL;
		j->rc = j->stale ? store_remove_stale(s, &j->removed, &j->freed, &j->pinned_removed)
				 : store_evict(s, j->max_size, &j->removed, &j->freed);
		/* The eviction's result stands whatever the logs' pruning does. */
		int prc = j->rc == 0 ? store_prune_failed(s, util_wall_s(), STORE_FAILED_MAX_AGE_S,
							  STORE_FAILED_MAX_FILES, &j->logs_removed)
				     : 0;
		if (prc < 0)
			log_warn("gc: cannot prune the logs of failed builds: %s", strerror(-prc));
		store_overhead(s, &j->index, &j->other);
		break;
	}
}

static void write_done(void *arg, int status)
{
	struct write_job *j = arg;
	struct conn *c = j->c;
	struct kilnd *d = c->d;
	if (status != 0)
		j->rc = status;
	if (j->op == OP_GC && status == 0)
		kilnd_set_overhead(d, j->index, j->other);
	kilnd_refresh_totals(d);
	if (j->rc == 0 && j->op == OP_GC) {
		d->c.evicted += j->removed;
		d->c.evicted_bytes += j->freed;
		upgrade_count_formats(d);
		char sz[32];
		if (j->stale && j->removed > 0)
			log_info("gc --stale: removed %llu entries of an older or unknown key format "
				 "(%llu pinned), %s", (unsigned long long)j->removed,
				 (unsigned long long)j->pinned_removed,
				 util_format_size(j->freed, sz, sizeof(sz)));
	}
	if (j->rc == -ENOENT) {
		conn_reply_error(c, j->id, ERR_NOT_FOUND, "ref", "entry %s is gone", j->key);
	} else if (j->rc != 0) {
		conn_reply_error(c, j->id, ERR_IO, NULL, "cannot update the index: %s", strerror(-j->rc));
	} else {
		cJSON *r = msg_ok_reply(j->id);
		if (r != NULL && j->op == OP_GC) {
			ADD_NUM(r, "removed", j->removed);
			ADD_NUM(r, "freed", j->freed);
			ADD_NUM(r, "failed_logs_removed", j->logs_removed);
			if (j->stale)
				ADD_NUM(r, "pinned_removed", j->pinned_removed);
			ADD_NUM(r, "entries", d->entries);
			ADD_NUM(r, "bytes", d->bytes);
			ADD_NUM(r, "disk", d->disk.total);
		} else if (r != NULL) {
			cJSON_AddStringToObject(r, "key", j->key);
		}
		conn_reply(c, r, -1);
	}
	conn_unref(c);
	free(j);
}

void op_write(struct conn *c, struct msg_request *req)
{
	struct write_job *j = calloc(1, sizeof(*j));
	if (j == NULL) {
		conn_reply_error(c, req->id, ERR_INTERNAL, NULL, "out of memory");
		return;
	}
	j->c = c;
	j->op = req->op;
	j->id = req->id;
	j->max_size = req->max_size >= 0 ? (uint64_t)req->max_size : c->d->cfg->max_size;
	j->stale = req->stale;
	if (req->op != OP_GC) {
		struct store_entry e = { 0 };
		if (resolve_ref(c, req, &e) != 0) {
			free(j);
			return;
		}
		memcpy(j->key, e.key, sizeof(j->key));
		store_entry_free(&e);
	} else {
		j->touches = kilnd_touches_take(c->d);
	}
	if (conn_queue_work(c, req->id, POOL_WRITE, write_work, write_done, j) != 0) {
		kilnd_touches_write(j->touches);
		free(j);
	}
}
