/*
 * The alias map of libkiln's fast path: alias -> loaded program. Readers take
 * no lock (acquire loads only), so a repeated kiln_lookup costs a hash and a
 * string compare, tens of nanoseconds. Writers are serialised by the caller.
 */
#ifndef KILN_CLIENT_LIB_ALIAS_H
#define KILN_CLIENT_LIB_ALIAS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct kiln_program;
struct alias_arr;

struct alias_map {
	_Atomic(struct alias_arr *) cur;
	size_t count;          /* writers only */
};

int alias_map_init(struct alias_map *m);
/* Frees the map and every array it ever used; no reader may be inside. */
void alias_map_fini(struct alias_map *m);
/* Lock-free; NULL when alias is not mapped. */
struct kiln_program *alias_map_get(struct alias_map *m, const char *alias);
/* Maps (or re-points) alias; the caller serialises writers. 0 or -ENOMEM. */
int alias_map_put(struct alias_map *m, const char *alias, struct kiln_program *p);
/* Unmaps every alias that names p (kiln_release); writers serialised. */
void alias_map_drop(struct alias_map *m, const struct kiln_program *p);

#endif
