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

/* Fills e's alias, label, toolchain, output, args and source names from in. */
int publish_names(struct store_entry *e, const struct build_input *in);
/* Writes logs/<key>.log (replacing it atomically). Thread pool. */
void publish_write_log(struct kilnd *d, const char *key, const char *log, size_t len);

#endif
