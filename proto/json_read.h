/*
 * A strict JSON reader that builds cJSON trees, for the replies libkiln
 * reads on a fresh process's path. cJSON's own parser reads every number
 * with strtod, whose first use in a process costs more than the rest of a
 * reply's parse (docs/performance.md); this one reads integers of up to 15
 * digits itself (exactly, as strtod would) and leaves only fractions and
 * exponents to strtod.
 *
 * What it accepts is RFC 8259's grammar and nothing else: no leading zeros,
 * no "1." or ".5", no raw control characters or \u0000 in strings, no lone
 * surrogates, nothing after the value but white space, at most
 * JSON_READ_DEPTH levels of nesting. The bytes of a string are not checked
 * for valid UTF-8 (cJSON does not check them either). Whatever it accepts, cJSON accepts
 * and reads to an equal tree (tests/test_json_read.c checks both ways on a
 * corpus; fuzz/fuzz_json.c against cJSON). Nodes and strings come from
 * cJSON_malloc, so cJSON_Delete frees them under any cJSON hooks.
 */
#ifndef KILN_JSON_READ_H
#define KILN_JSON_READ_H

#include <stddef.h>

#include <cjson/cJSON.h>

#define JSON_READ_DEPTH 64

/* The tree of the len bytes at text (no terminating NUL needed), or NULL
 * when they are not one JSON value or memory ran out. */
cJSON *json_read(const char *text, size_t len);

#endif
