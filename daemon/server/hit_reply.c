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

/* Answers a hit: the artifact's descriptor and where it lives. Returns 0, 1
 * when it answered with an error instead (no descriptor left, say), or a
 * negative errno when the object is gone (then nothing is sent). */
int reply_hit(struct conn *c, uint64_t id, const struct store_entry *e, const char *alias)
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
		.file = file,
	};
	size_t len = msg_artifact_print(&a, text, sizeof(text));
	free(path);
	if (len >= sizeof(text)) {
		fdref_put(ref);
		conn_reply_error(c, id, ERR_INTERNAL, NULL, "the reply does not fit in %zu bytes",
				 sizeof(text));
		return 1;
	}
	conn_reply_text_ref(c, text, len, ref);
	kilnd_touch(d, e->key);
	if (alias != NULL) {
		/* Where the alias points now: the last reply's target first, then
		 * the entry's own alias (no lookup on the warm path), then the index. */
		const char *pending = publish_alias_pending(d, alias);
		struct store_entry cur = { 0 };
		bool same = pending != NULL ? strcmp(pending, e->key) == 0
			  : (e->alias != NULL && strcmp(e->alias, alias) == 0) ||
			    (store_get_by_alias(d->store, alias, &cur) == 0 && strcmp(cur.key, e->key) == 0);
		store_entry_free(&cur);
		if (!same)
			publish_set_alias(d, alias, e->key);
		else
			claims_published(d, alias);   /* a claim's producer found it: done */
	}
	return 0;
}

