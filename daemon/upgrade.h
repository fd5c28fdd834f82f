/*
 * What kilnd finds in a cache another kilnd wrote (docs/operations.md,
 * "Upgrades"): it records itself among the cache's writers, says which
 * version wrote the cache last when that was another, and counts the
 * entries of another key format: older ones (stale: they will never be
 * hit; `kiln gc --stale` removes them, eviction takes them first), unknown
 * ones (from before kiln recorded formats; a hit makes one current), newer
 * ones (a newer kilnd's, kept). Loop thread.
 */
#ifndef KILN_DAEMON_UPGRADE_H
#define KILN_DAEMON_UPGRADE_H

struct kilnd;

/* The version kilnd records and reports: "0.1.0 (43c42fd)". */
extern const char upgrade_version[];

/* After every open of the store (start, a recreated cache directory). */
void upgrade_adopt_store(struct kilnd *d);
/* Counts the entries by key format again (after gc). */
void upgrade_count_formats(struct kilnd *d);

#endif
