/* The kinds of dependency, one row each (depkind.h). */
#include <string.h>

#include "depkind.h"
#include "trace_rec.h"

#define RECS(...) ((const char[]){ __VA_ARGS__, '\0' })

const struct dep_kind_info dep_kinds[DEP__COUNT] = {
	[DEP_FILE] = { .name = "file", .records = RECS(REC_OPEN, REC_EXEC, REC_SPAWN, REC_LOAD, REC_HELLO, REC_INTERP, REC_IMAGE),
		       .has_digest = true, .has_size = true,
		       .key = "its path and the SHA-256 of its content",
		       .hit = "its identity (dev, ino, size, mtime, ctime) unchanged, else hashed again" },
	[DEP_EXISTS] = { .name = "exists", .records = RECS(REC_STAT, REC_FAILED), .has_mode = true,
			 .key = "its path, type and permissions",
			 .hit = "the same type and permissions" },
	[DEP_ABSENT] = { .name = "absent", .records = RECS(REC_ABSENT),
			 .key = "its path",
			 .hit = "still missing" },
	[DEP_ENV] = { .name = "env", .records = RECS(REC_ENV), .has_digest = true, .named = true,
		      .flag = "set",
		      .key = "its name, whether it was set, the SHA-256 of its value",
		      .hit = "the toolchains' environment, fixed while kilnd runs, compared" },
	[DEP_LISTING] = { .name = "listing", .records = RECS(REC_LISTING), .has_digest = true,
			  .key = "its path and the SHA-256 of its sorted names",
			  .hit = "its identity unchanged, else listed again" },
	[DEP_SEARCH] = { .name = "search", .records = "", .has_digest = true, .named = true,
			 .bare = true, .flag = "found",
			 .key = "the name, whether found, the SHA-256 of the path found along PATH",
			 .hit = "the name looked up again along kilnd's PATH" },
};

_Static_assert(sizeof(dep_kinds) / sizeof(dep_kinds[0]) == DEP__COUNT,
	       "one row per dependency kind");

const struct dep_kind_info *dep_kind_info(int kind)
{
	return kind >= 0 && kind < DEP__COUNT ? &dep_kinds[kind] : NULL;
}

const char *dep_kind_name(int kind)
{
	const struct dep_kind_info *k = dep_kind_info(kind);
	return k != NULL ? k->name : "unknown";
}

int dep_kind_parse(const char *name)
{
	for (int i = 0; name != NULL && i < DEP__COUNT; i++) {
		if (strcmp(name, dep_kinds[i].name) == 0)
			return i;
	}
	return -1;
}
