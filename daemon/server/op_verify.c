/*
 * The verify operation (server layer): every entry's object checked on the
 * pool against its recorded size and SHA-256 (verify.c), damaged ones
 * removed, then files in objects/ that the store never writes removed, the
 * result answered on the connection.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kilnd.h"
#include "log.h"
#include "msg.h"
#include "server.h"
#include "util.h"
#include "verify.h"
#include "ops.h"
#include "thread.h"

struct verify_job {
	struct conn *c;
	uint64_t id;
	struct store_entry *list;
	size_t n;
	char (*why)[96];        /* per entry: "" when intact */
	uint64_t unverified;    /* rows from before schema 3: size checked only */
	uint64_t removed;
	cJSON *strays;          /* files the store never writes, removed (names) */
	uint64_t nstrays;
	int rc;
};

#define STRAYS_LISTED 100

static void note_stray(void *ctx, const char *rel)
{
	struct verify_job *j = ctx;

	if (cJSON_GetArraySize(j->strays) < STRAYS_LISTED)
		cJSON_AddItemToArray(j->strays, cJSON_CreateString(rel));
}

static void verify_work(void *arg)
{
	ASSERT_POOL();
	struct verify_job *j = arg;
	struct kilnd *d = j->c->d;
	for (size_t i = 0; i < j->n; i++) {
		const struct store_entry *e = &j->list[i];
		int fd = store_object_open(d->store, e->key, e->output);
		if (fd < 0) {
			snprintf(j->why[i], sizeof(j->why[i]), "object %s",
				 fd == -ENOENT ? "missing" : strerror(-fd));
		} else {
			(void)verify_bytes(e, fd, j->why[i], sizeof(j->why[i]));
			close(fd);
		}
		if (!e->has_sha256)
			j->unverified++;
		if (j->why[i][0] == '\0')
			continue;
		int rc = store_remove(d->store, e->key);
		if (rc == 0 || rc == -ENOENT)
			j->removed++;
		else
			j->rc = rc;
	}
	/* Then what the store did not write: a loader's copy of an object
	 * (DaCe's "<key>.so_0"), a file put there by hand. */
	if (j->strays != NULL) {
		int rc = store_remove_strays(d->store, note_stray, j, &j->nstrays);
		if (rc != 0 && j->rc == 0)
			j->rc = rc;
	}
}

static void verify_done(void *arg, int status)
{
	struct verify_job *j = arg;
	struct conn *c = j->c;
	struct kilnd *d = c->d;
	uint64_t damaged = 0;
	if (status != 0) {
		/* Nothing was checked: no "intact" answer. */
		conn_reply_error(c, j->id, ERR_INTERNAL, NULL, "the check did not run: %s",
				 uv_strerror(status));
		cJSON_Delete(j->strays);
		store_entries_free(j->list, j->n);
		free(j->why);
		conn_unref(c);
		free(j);
		return;
	}
	kilnd_refresh_totals(d);
	cJSON *r = msg_ok_reply(j->id);
	cJSON *list = r != NULL ? cJSON_AddArrayToObject(r, "damaged") : NULL;
	for (int i = 0; i < cJSON_GetArraySize(j->strays); i++)
		log_warn("verify: objects/%s is not the store's; removed",
			 cJSON_GetStringValue(cJSON_GetArrayItem(j->strays, i)));
	for (size_t i = 0; i < j->n; i++) {
		if (j->why[i][0] == '\0')
			continue;
		damaged++;
		log_warn("verify: entry %.16s is damaged (%s); removed", j->list[i].key, j->why[i]);
		cJSON *o = cJSON_CreateObject();
		if (o == NULL || !cJSON_AddItemToArray(list, o)) {
			cJSON_Delete(o);
			continue;
		}
		cJSON_AddStringToObject(o, "key", j->list[i].key);
		cJSON_AddStringToObject(o, "problem", j->why[i]);
	}
	d->c.damaged += damaged;
	if (j->rc != 0) {
		cJSON_Delete(r);
		conn_reply_error(c, j->id, ERR_IO, NULL, "cannot remove a damaged entry or a stray file: %s",
				 strerror(-j->rc));
	} else if (r == NULL || list == NULL) {
		cJSON_Delete(r);
		conn_reply_error(c, j->id, ERR_INTERNAL, NULL, "out of memory");
	} else {
		cJSON_AddNumberToObject(r, "checked", (double)j->n);
		cJSON_AddNumberToObject(r, "intact", (double)(j->n - damaged));
		cJSON_AddNumberToObject(r, "removed", (double)j->removed);
		cJSON_AddNumberToObject(r, "unverified", (double)j->unverified);
		cJSON_AddNumberToObject(r, "strays_removed", (double)j->nstrays);
		cJSON_AddItemToObject(r, "strays", j->strays);
		j->strays = NULL;
		conn_reply(c, r, -1);
	}
	cJSON_Delete(j->strays);
	store_entries_free(j->list, j->n);
	free(j->why);
	conn_unref(c);
	free(j);
}

void op_verify(struct conn *c, struct msg_request *req)
{
	struct kilnd *d = c->d;
	struct verify_job *j = calloc(1, sizeof(*j));
	int rc = j != NULL ? store_list(d->store, &j->list, &j->n) : -ENOMEM;
	if (rc == 0 && (j->why = calloc(j->n ? j->n : 1, sizeof(*j->why))) == NULL)
		rc = -ENOMEM;
	if (rc == 0 && (j->strays = cJSON_CreateArray()) == NULL)
		rc = -ENOMEM;
	if (rc != 0) {
		if (j != NULL) {
			store_entries_free(j->list, j->n);
			free(j->why);
		}
		free(j);
		conn_reply_error(c, req->id, rc == -ENOMEM ? ERR_INTERNAL : ERR_IO, NULL,
				 "cannot read the index: %s", strerror(-rc));
		return;
	}
	j->c = c;
	j->id = req->id;
	if (conn_queue_work(c, req->id, POOL_VERIFY, verify_work, verify_done, j) != 0) {
		store_entries_free(j->list, j->n);
		free(j->why);
		free(j);
	}
}
