/*
 * A hit's reply: the entry's descriptor and the artifact reply printed
 * directly (hit_reply.h, proto/msg_artifact.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "publish.h"
#include "claims.h"
#include "fdcache.h"
#include "hit_reply.h"
#include "kilnd.h"
#include "msg_artifact.h"
#include "server.h"
#include "store.h"
#include "verify.h"

/* Sends the printed reply (text, or a larger one when data needs it) with
 * ref's descriptor: 0, or 1 when it answered with an error instead. */
static int send_hit(struct conn *c, uint64_t id, const struct msg_artifact *a, char *text,
		    size_t cap, struct fdref *ref)
{
	size_t len = msg_artifact_print(a, text, cap);
	char *big = NULL;
	if (len >= cap && a->alias_data != NULL && (big = malloc(len + 1)) != NULL)
		msg_artifact_print(a, big, len + 1);
	if (len >= cap && big == NULL) {
		fdref_put(ref);
		conn_reply_error(c, id, ERR_INTERNAL, NULL, "the reply does not fit in %zu bytes",
				 cap);
		return 1;
	}
	conn_reply_text_ref(c, big != NULL ? big : text, len, ref);
	free(big);
	return 0;
}

/* Answers a hit: the artifact's descriptor and where it lives, with data
 * (a lookup's alias data; may be NULL). Returns 0, 1 when it answered with
 * an error instead (no descriptor left, say), or a negative errno when the
 * object is gone (then nothing is sent). */
static int reply_entry(struct conn *c, uint64_t id, const struct store_entry *e, const char *data)
{
	struct kilnd *d = c->d;
	char *path = store_object_path(d->store, e->key, e->output);
	if (path == NULL)
		return -ENOMEM;
	struct fdref *ref = NULL;
	int rc = fdcache_borrow(d->fds, store_generation(d->store), d->store, e->key, e->output,
				&ref);
	char why[96];
	struct msg_file_id file = { 0 };
	if (rc == 0 && verify_served(d, e, fdref_fd(ref), &file, why, sizeof(why)) != 0) {
		/* Never served: the flight that follows rebuilds and replaces it. */
		log_error("entry %.16s: its object %s is damaged (%s); rebuilding", e->key, path, why);
		d->c.damaged++;
		fdref_put(ref);
		free(path);
		return -ENOENT;
	}
	if (rc < 0) {
		free(path);
		if (rc != -ENOENT) {
			/* Out of descriptors, say: the object is fine, building would not help. */
			conn_reply_error(c, id, ERR_IO, NULL, "cannot open the artifact: %s", strerror(-rc));
			return 1;
		}
		log_warn("entry %.16s has lost its object; rebuilding", e->key);
		return rc;
	}
	/* Printed directly, not through cJSON: the one reply on the warm path
	 * (cJSON would allocate a node per member and print each number with
	 * sprintf and check it with sscanf). */
	char text[PATH_MAX * 2 + 512];
	const struct msg_artifact a = {
		.id = id, .fd = true, .key = e->key, .rkey = e->rkey, .path = path,
		.output = e->output, .size = e->size, .cached = true, .build_ms = e->build_ms,
		.file = file, .alias_data = data,
	};
	int sent = send_hit(c, id, &a, text, sizeof(text), ref);
	free(path);
	if (sent != 0)
		return 1;
	kilnd_touch(d, e->key);
	return 0;
}

static bool same_data(const char *a, const char *b)
{
	return a == NULL ? b == NULL : b != NULL && strcmp(a, b) == 0;
}

/* Whether alias names e now (with data, when data is not NULL: a request
 * without data leaves what the alias holds as it is): the last reply's
 * target first, then the entry's own alias (no lookup on the warm path),
 * then the index. */
static bool alias_at(struct kilnd *d, const char *alias, const char *data,
		     const struct store_entry *e)
{
	const struct alias_target *pending = publish_alias_pending(d, alias);
	if (pending != NULL)
		return strcmp(pending->key, e->key) == 0 &&
		       (data == NULL || same_data(pending->data, data));
	struct store_entry cur = { 0 };
	bool same = (e->alias != NULL && strcmp(e->alias, alias) == 0) ||
		    (store_get_by_alias(d->store, alias, &cur) == 0 && strcmp(cur.key, e->key) == 0);
	store_entry_free(&cur);
	char *stored = NULL;
	if (same && data != NULL)
		same = store_alias_data(d->store, alias, e->key, &stored) == 0 &&
		       same_data(stored, data);
	free(stored);
	return same;
}

int reply_hit(struct conn *c, uint64_t id, const struct store_entry *e, const char *alias,
	      const char *alias_data)
{
	int rc = reply_entry(c, id, e, NULL);
	if (rc != 0 || alias == NULL)
		return rc;
	if (!alias_at(c->d, alias, alias_data, e))
		publish_set_alias(c->d, alias, e->key, alias_data);
	else
		claims_published(c->d, alias);   /* a claim's producer found it: done */
	return 0;
}

int reply_lookup_hit(struct conn *c, uint64_t id, const struct store_entry *e, const char *data)
{
	return reply_entry(c, id, e, data);
}

