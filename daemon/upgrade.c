/*
 * A cache written by another kilnd (upgrade.h). The key format is
 * KEY_FORMAT_VERSION (key.h): a kilnd of another format computes other keys
 * for the same requests, so an entry of an older format is never hit again.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "kiln_build.h"
#include "kilnd.h"
#include "log.h"
#include "upgrade.h"
#include "util.h"

const char upgrade_version[] = KILN_VERSION_STR " (" KILN_BUILD_STR ")";

static void mib(uint64_t bytes, char out[32])
{
	snprintf(out, 32, "%.1f MiB", (double)bytes / (1024.0 * 1024.0));
}

static void report_formats(const struct store_formats *f)
{
	char size[32];

	if (f->older.entries > 0) {
		mib(f->older.disk, size);
		log_warn("cache: %" PRIu64 " entries (%s, %" PRIu64 " pinned) were built under key "
			 "format %d%s, older than this kilnd's %d: they will never be hit; "
			 "'kiln gc --stale' removes them, and eviction takes them first",
			 f->older.entries, size, f->older.pinned, f->older.lowest,
			 f->older.lowest != f->older.highest ? " and later" : "", KEY_FORMAT_VERSION);
	}
	if (f->unknown.entries > 0) {
		mib(f->unknown.disk, size);
		log_info("cache: %" PRIu64 " entries (%s, %" PRIu64 " pinned) are from before kiln "
			 "recorded key formats: each one hit counts as current from then on; 'kiln "
			 "gc --stale' removes the others, and eviction takes them first",
			 f->unknown.entries, size, f->unknown.pinned);
	}
	if (f->newer.entries > 0) {
		mib(f->newer.disk, size);
		log_warn("cache: %" PRIu64 " entries (%s) were built by a newer kilnd (key format "
			 "%d, this one %d): this kilnd does not hit them and keeps them",
			 f->newer.entries, size, f->newer.highest, KEY_FORMAT_VERSION);
	}
}

void upgrade_count_formats(struct kilnd *d)
{
	int rc = store_key_formats(d->store, &d->formats);
	if (rc != 0)
		log_warn("cannot count the cache's entries by key format: %s", strerror(-rc));
}

void upgrade_adopt_store(struct kilnd *d)
{
	char previous[96];

	store_set_key_format(d->store, KEY_FORMAT_VERSION);
	int rc = store_record_writer(d->store, upgrade_version, KEY_FORMAT_VERSION, util_wall_s(),
				     previous, sizeof(previous));
	if (rc != 0)
		log_warn("cannot record this kilnd among the cache's writers: %s", strerror(-rc));
	else if (previous[0] != '\0')
		log_info("cache %s was last written by kilnd %s; this is kilnd %s",
			 d->cfg->cache_dir, previous, upgrade_version);
	upgrade_count_formats(d);
	report_formats(&d->formats);
}
