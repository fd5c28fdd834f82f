/*
 * Publishing (publish.c), as the layers above the flights see it: aliases,
 * an entry's names, compiler logs.
 */
#ifndef KILN_DAEMON_PUBLISH_H
#define KILN_DAEMON_PUBLISH_H

#include <stddef.h>

struct kilnd;
struct build_input;
struct store_entry;

/* Where an alias points: its entry's key and the data stored with it
 * (store.h, store_set_alias_data; NULL: none). */
struct alias_target {
	const char *key;
	const char *data;
};

/* Points alias at key with data (may be NULL), in the order of the calls
 * (loop thread). */
void publish_set_alias(struct kilnd *d, const char *alias, const char *key, const char *data);
/* Where alias was last pointed while its write is not done, or NULL. */
const struct alias_target *publish_alias_pending(const struct kilnd *d, const char *alias);

/* Fills e's alias, label, toolchain, output, args and source names from in. */
int publish_names(struct store_entry *e, const struct build_input *in);
/* Writes logs/<key>.log (replacing it atomically). Thread pool. */
void publish_write_log(struct kilnd *d, const char *key, const char *log, size_t len);

/* Writes the alias re-points not yet written and frees their table
 * (blocking: at the stop, after the loop ended). */
void publish_flush_aliases(struct kilnd *d);


#endif
