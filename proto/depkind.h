/*
 * The kinds of dependency, defined once: what a build's toolchain was seen
 * to read (the trace), what an entry records (store/), what put and export
 * carry (proto/), what libkiln and the CLI show. One row per kind: its
 * number (on disk and in the index's blobs: never renumber), its name (on
 * the wire, in JSON and in `kiln show`), the trace records that make it
 * (trace_rec.h), whether its state is a digest, whether its path is a name
 * with a yes/no for its mode, what the artifact key hashes of it, and how a
 * hit revalidates it (docs/design.md, "What the key covers").
 * store/store.h's enum store_dep_kind takes its numbers from here.
 */
#ifndef KILN_PROTO_DEPKIND_H
#define KILN_PROTO_DEPKIND_H

#include <stdbool.h>

enum dep_kind {
	DEP_FILE,      /* read: its content */
	DEP_EXISTS,    /* looked at and found: its type and permissions */
	DEP_ABSENT,    /* looked for and not found: must stay absent */
	DEP_ENV,       /* an environment variable read (path: its name) */
	DEP_LISTING,   /* a directory listed: its names */
	DEP_SEARCH,    /* a program looked up along PATH (path: its name) */
	DEP__COUNT
};

struct dep_kind_info {
	const char *name;       /* "file", "exists", ...: wire, JSON, kiln show */
	const char *records;    /* the trace records that make it (trace_rec.h); "" none */
	bool has_digest;        /* its state is a SHA-256 ("sha256" on the wire) */
	bool has_size;          /* the size of what was hashed is kept ("size") */
	bool has_mode;          /* its state is a file's type and permissions ("mode") */
	bool named;             /* its path is a name, its mode a yes (1) or no (0) */
	bool bare;              /* named by a bare program name: no '/' in it */
	const char *flag;       /* named: the member that carries the yes/no */
	const char *key;        /* what the artifact key hashes of it */
	const char *hit;        /* how a hit revalidates it */
};

/* By kind; every row filled (checked at compile time by its count). The
 * codecs that write and read a dependency (proto/msg_parse.c, msg_pack.c,
 * store/entry_codec.c) and the artifact key (daemon/key.c) are driven by
 * these columns: what a kind carries is said here only. */
extern const struct dep_kind_info dep_kinds[DEP__COUNT];

/* The name of kind, or "unknown" out of range. */
const char *dep_kind_name(int kind);
/* The kind named name, or -1. */
int dep_kind_parse(const char *name);
/* The row of kind, or NULL out of range. */
const struct dep_kind_info *dep_kind_info(int kind);

#endif
