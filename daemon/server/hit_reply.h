/*
 * A hit's reply (hit_reply.c): written by hand, not through cJSON, because
 * it is the hot path of every warm get and lookup (docs/design.md, "The
 * daemon's hit path"), with the artifact's descriptor attached.
 */
#ifndef KILN_DAEMON_HIT_REPLY_H
#define KILN_DAEMON_HIT_REPLY_H

#include <stdint.h>

struct conn;
struct hit;

/* How often one request waits for inputs hashed on the pool before a
 * changing input counts as changed (a miss): each wait ends with the
 * digest, unless the file changed again meanwhile. */
#define HASH_WAITS_MAX 4

/* Answers request id on c with h (hit.h: HIT_VALID; its descriptor passes
 * to the reply) and points alias (when the request named one) at it with
 * alias_data (may be NULL): 0, or 1 when it answered with an error instead
 * (out of memory, a reply too large). */
int reply_hit(struct conn *c, uint64_t id, struct hit *h, const char *alias, const char *alias_data);
/* A lookup's hit: as reply_hit, the reply carrying what is stored with the
 * alias looked up (h->alias_data), pointing nothing. */
int reply_lookup_hit(struct conn *c, uint64_t id, struct hit *h);

#endif
