/*
 * One dependency of each kind (file, exists, absent, env), with identities
 * that need all 64 bits: shared by the store's and the entry codec's suites.
 */
#ifndef KILN_TESTS_DEP_FIXTURE_H
#define KILN_TESTS_DEP_FIXTURE_H

#include <string.h>

#include "store.h"

static inline void fixture_deps(struct store_dep d[4])
{
	static const char *const paths[4] = { "/usr/include/a.h", "/usr/include",
					      "/usr/local/include/a.h", "CPATH" };
	memset(d, 0, 4 * sizeof(*d));
	for (int i = 0; i < 4; i++) {
		d[i].path = (char *)paths[i];
		d[i].kind = (uint8_t)i;
		d[i].mode = 0100644u + (uint32_t)i;
		d[i].size = 0x8000000000000000ull + (uint64_t)i;
		d[i].mtime_ns = -1700000000123456789LL - i;
		d[i].ctime_ns = 1700000001987654321LL + i;
		d[i].dev = 0xfedcba9876543210ull - (uint64_t)i;
		d[i].ino = 0x0123456789abcdefull + (uint64_t)i;
		for (int j = 0; j < 32; j++)
			d[i].digest[j] = (uint8_t)(i * 32 + j);
	}
}

#endif
