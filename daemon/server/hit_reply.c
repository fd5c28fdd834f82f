/*
 * A hit's reply: the entry's descriptor and the artifact reply printed
 * directly (hit_reply.h, proto/msg_artifact.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alias.h"
#include "fdcache.h"
#include "hit.h"
#include "hit_reply.h"
#include "kilnd.h"
#include "msg_artifact.h"
#include "server.h"
#include "store.h"

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

/* Answers a hit: the artifact's descriptor (h's reference passes to the
 * reply) and where it lives, with data (a lookup's alias data; may be
 * NULL). 0, or 1 when it answered with an error instead. */
static int reply_entry(struct conn *c, uint64_t id, struct hit *h, const char *data)
{
	struct kilnd *d = c->d;
	const struct store_entry *e = &h->entry;
	char *path = store_object_path(d->store, e->key, e->output);
	if (path == NULL) {
		conn_reply_error(c, id, ERR_INTERNAL, NULL, "out of memory");
		return 1;
	}
	/* Printed directly, not through cJSON: the one reply on the warm path
	 * (cJSON would allocate a node per member and print each number with
	 * sprintf and check it with sscanf). */
	char text[PATH_MAX * 2 + 512];
	const struct msg_artifact a = {
		.id = id, .fd = true, .key = e->key, .rkey = e->rkey, .path = path,
		.output = e->output, .size = e->size, .cached = true, .build_ms = e->build_ms,
		.file = h->file, .alias_data = data,
	};
	struct fdref *ref = h->ref;
	h->ref = NULL;
	int sent = send_hit(c, id, &a, text, sizeof(text), ref);
	free(path);
	if (sent != 0)
		return 1;
	kilnd_touch(d, e->key);
	return 0;
}

int reply_hit(struct conn *c, uint64_t id, struct hit *h, const char *alias, const char *alias_data)
{
	int rc = reply_entry(c, id, h, NULL);
	if (rc == 0 && alias != NULL)
		alias_found(c->d, alias, alias_data, &h->entry);
	return rc;
}

int reply_lookup_hit(struct conn *c, uint64_t id, struct hit *h)
{
	return reply_entry(c, id, h, h->alias_data);
}
