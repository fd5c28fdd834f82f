/*
 * The entry codec: the one place where a store entry becomes JSON and JSON
 * becomes an entry. Four forms share it (docs/design.md, "Entry metadata"):
 *
 *   META      the .meta file beside each object (kiln_meta 1): everything,
 *             including this node's identity of each input, so that
 *             reconcile can rebuild a lost index row;
 *   UPSTREAM  an upstream tier entry (kiln_upstream 2): what another node
 *             needs to check and use the artifact, nothing of this node's
 *             (the caller adds "object", "host", "created" and "log");
 *   LIST      a protocol entry object (ls, and the CLI's --json);
 *   SHOW      LIST plus sha256, args, sources and the dependencies as
 *             parallel arrays (show, and what a put carries).
 *
 * Pure: no I/O (store_entry_json only asks the store for its paths).
 * Thread-safe.
 */
#ifndef KILN_ENTRY_CODEC_H
#define KILN_ENTRY_CODEC_H

#include <cjson/cJSON.h>

#include "store.h"

enum entry_form {
	ENTRY_FORM_META,
	ENTRY_FORM_UPSTREAM,
	ENTRY_FORM_LIST,
	ENTRY_FORM_SHOW,
};

/* The format numbers written in "kiln_meta" and "kiln_upstream". */
#define ENTRY_META_VERSION 1
#define ENTRY_UPSTREAM_VERSION 2

/* e as a new JSON object of that form (caller owns), or NULL: out of
 * memory, or (META) stored args or sources that are not a JSON array. */
cJSON *entry_encode(const struct store_entry *e, enum entry_form form);

/*
 * Fills e (zeroed first; free with store_entry_free) from a META or UPSTREAM
 * object. 0; -EBADMSG for anything kiln does not write (a missing or
 * mistyped field, a bad key or digest, an unknown output kind or dependency
 * kind); -ENOENT for an UPSTREAM entry of an older format (keys this kilnd
 * never computes); -ENOMEM. UPSTREAM leaves the node-local fields zero.
 */
int entry_decode(const cJSON *o, enum entry_form form, struct store_entry *e);

/*
 * One dependency as {path, kind, and by kind: size and sha256 (file), mode
 * (exists), set and sha256 (env)}, with identity its node identity too
 * (mtime_ns, ctime_ns, dev, ino as decimal strings, a file's mode): the
 * form of META, UPSTREAM and a put. entry_dep_decode fills dep (path
 * malloc'd): 0, -EBADMSG or -ENOMEM. A dependency without a kind is a file
 * (metadata from before kinds).
 */
cJSON *entry_dep_encode(const struct store_dep *dep, bool identity);
int entry_dep_decode(const cJSON *o, bool identity, struct store_dep *dep);

/* The entry as a protocol entry object (docs/protocol.md): LIST, with
 * "path"; detail: SHOW, with "log" too. New object, caller owns. */
cJSON *store_entry_json(const struct store *s, const struct store_entry *e, bool detail);

#endif
