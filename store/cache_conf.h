/*
 * Settings kept in the cache directory, <cache>/kiln.conf (kiln config):
 * they belong to the cache, so they hold for every kilnd that serves it.
 * A text file of "key = value" lines; '#' starts a comment. Known keys:
 *   max-size = 20G     the cache's size limit (kilnd --max-size overrides it)
 */
#ifndef KILN_STORE_CACHE_CONF_H
#define KILN_STORE_CACHE_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CACHE_CONF_NAME "kiln.conf"

struct cache_conf {
	bool has_max_size;
	uint64_t max_size;    /* bytes, > 0 */
};

/* Parses the text of a kiln.conf. 0, or -1 with err naming the line and
 * what is wrong with it (an unknown key, a value that is no size). */
int cache_conf_parse(const char *text, size_t len, struct cache_conf *c, char *err, size_t errlen);
/* Reads <cache_dir>/kiln.conf; a missing file is no settings (0). 0, or -1
 * with err. */
int cache_conf_read(const char *cache_dir, struct cache_conf *c, char *err, size_t errlen);
/* Sets one setting by its name ("max-size") from its text ("20G"); value
 * NULL unsets it. 0, or -1 with err (unknown key, bad value). */
int cache_conf_set(struct cache_conf *c, const char *key, const char *value, char *err,
		   size_t errlen);
/* Writes the settings to <cache_dir>/kiln.conf atomically (a reader sees the
 * old file or the new). 0, or -1 with err. */
int cache_conf_write(const char *cache_dir, const struct cache_conf *c, char *err, size_t errlen);
/* kiln config's read-modify-write: reads <cache_dir>/kiln.conf into *c and,
 * unless max_size is -1 (only read), sets max-size to it (0 unsets) and
 * writes the file. A file that does not parse is then replaced, not kept
 * half-read: *replaced is set and err says why (for a warning). 0, or -1
 * with err. */
int cache_conf_update(const char *cache_dir, int64_t max_size, struct cache_conf *c,
		      bool *replaced, char *err, size_t errlen);

#endif
