/*
 * A hit's reply: the entry's descriptor and a small JSON text written
 * directly (hit_reply.h).
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
#include "server.h"
#include "store.h"
#include "verify.h"

/* Appends s to buf as a JSON string; false when it does not fit. */
static bool put_json_str(char *buf, size_t cap, size_t *off, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = *off;
	if (o + 1 >= cap)
		return false;
	buf[o++] = '"';
	for (; *s != '\0'; s++) {
		unsigned char ch = (unsigned char)*s;
		if (o + 7 >= cap)
			return false;
		if (ch == '"' || ch == '\\') {
			buf[o++] = '\\';
			buf[o++] = (char)ch;
		} else if (ch < 0x20) {
			memcpy(buf + o, "\\u00", 4);
			buf[o + 4] = hex[ch >> 4];
			buf[o + 5] = hex[ch & 15];
			o += 6;
		} else {
			buf[o++] = (char)ch;
		}
	}
	buf[o++] = '"';
	*off = o;
	return true;
}

/*
 * The reply to a hit, printed directly: it is the one reply on the warm path,
 * and cJSON would allocate a node per member and print each number with
 * sprintf and check it with sscanf. Returns its length, or 0 when it does
 * not fit (a cache directory path near PATH_MAX full of escapes).
 */
static size_t hit_reply_text(char *buf, size_t cap, uint64_t id, const struct store_entry *e,
			     const char *path)
{
	size_t off;
	int n = snprintf(buf, cap, "{\"id\":%llu,\"ok\":true,\"key\":\"%s\",\"rkey\":\"%s\",\"path\":",
			 (unsigned long long)id, e->key, e->rkey);
	if (n < 0 || (size_t)n >= cap)
		return 0;
	off = (size_t)n;
	if (!put_json_str(buf, cap, &off, path))
		return 0;
	n = snprintf(buf + off, cap - off, ",\"output\":");
	if (n < 0 || (size_t)n >= cap - off)
		return 0;
	off += (size_t)n;
	if (!put_json_str(buf, cap, &off, e->output))
		return 0;
	n = snprintf(buf + off, cap - off,
		     ",\"size\":%llu,\"cached\":true,\"joined\":false,\"build_ms\":%llu,"
		     "\"fd\":true}",
		     (unsigned long long)e->size, (unsigned long long)e->build_ms);
	if (n < 0 || (size_t)n >= cap - off)
		return 0;
	return off + (size_t)n;
}

/* Answers a hit: the artifact's descriptor and where it lives. Returns 0, 1
 * when it answered with an error instead (no descriptor left, say), or a
 * negative errno when the object is gone (then nothing is sent). */
int reply_hit(struct conn *c, uint64_t id, const struct store_entry *e, const char *alias)
{
	struct kilnd *d = c->d;
	char *path = store_object_path(d->store, e->key, e->output);
	if (path == NULL)
		return -ENOMEM;
	int fd = fdcache_open(d->fds, store_generation(d->store), d->store, e->key, e->output);
	char why[96];
	if (fd >= 0 && verify_served(d, e, fd, why, sizeof(why)) != 0) {
		/* Never served: the flight that follows rebuilds and replaces it. */
		log_error("entry %.16s: its object %s is damaged (%s); rebuilding", e->key, path, why);
		d->c.damaged++;
		close(fd);
		free(path);
		return -ENOENT;
	}
	if (fd < 0) {
		int rc = fd;
		free(path);
		if (rc != -ENOENT) {
			/* Out of descriptors, say: the object is fine, building would not help. */
			conn_reply_error(c, id, ERR_IO, NULL, "cannot open the artifact: %s", strerror(-rc));
			return 1;
		}
		log_warn("entry %.16s has lost its object; rebuilding", e->key);
		return rc;
	}
	char text[PATH_MAX * 2 + 512];
	size_t len = hit_reply_text(text, sizeof(text), id, e, path);
	free(path);
	if (len == 0) {
		close(fd);
		conn_reply_error(c, id, ERR_INTERNAL, NULL, "the reply does not fit in %zu bytes",
				 sizeof(text));
		return 1;
	}
	conn_reply_text(c, text, len, fd);
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

