/*
 * The compact encoding of an entry's deps for the index (one blob per row),
 * apart from store.c so that each file keeps to one concern.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "store_int.h"

#define DEPS_BLOB_VERSION 1
/* Per dep: u16 path length, path, u64 size, i64 mtime_ns, 32-byte digest. */
#define DEP_FIXED (2 + 8 + 8 + 32)

static void put_le(uint8_t *p, uint64_t v, int nbytes)
{
	int i;

	for (i = 0; i < nbytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int nbytes)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < nbytes; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/*
 * Blob layout, little-endian: u8 version, u32 count, then per dep u16 path
 * length, the path bytes (no NUL), u64 size, i64 mtime_ns, 32-byte SHA-256.
 * One blob per row lets store_get fill the deps with its one indexed query.
 */
int store_deps_encode(const struct store_dep *deps, size_t n, uint8_t **out, size_t *len)
{
	size_t total = 5, i, plen;
	uint8_t *buf, *p;

	*out = NULL;
	*len = 0;
	if (n == 0)
		return 0;
	if (n > UINT32_MAX)
		return -E2BIG;
	for (i = 0; i < n; i++) {
		if (!deps[i].path || (plen = strlen(deps[i].path)) == 0)
			return -EINVAL;
		if (plen > UINT16_MAX)
			return -ENAMETOOLONG;
		total += DEP_FIXED + plen;
	}
	buf = malloc(total);
	if (!buf)
		return -ENOMEM;
	buf[0] = DEPS_BLOB_VERSION;
	put_le(buf + 1, n, 4);
	p = buf + 5;
	for (i = 0; i < n; i++) {
		plen = strlen(deps[i].path);
		put_le(p, plen, 2);
		memcpy(p + 2, deps[i].path, plen);
		p += 2 + plen;
		put_le(p, deps[i].size, 8);
		put_le(p + 8, (uint64_t)deps[i].mtime_ns, 8);
		memcpy(p + 16, deps[i].digest, 32);
		p += 48;
	}
	*out = buf;
	*len = total;
	return 0;
}

int store_deps_decode(const uint8_t *buf, size_t len, struct store_dep **out, size_t *n)
{
	struct store_dep *deps;
	size_t count, i, pos = 5, plen;
	int rc = -EBADMSG;

	*out = NULL;
	*n = 0;
	if (!buf || len == 0)
		return 0;
	if (len < 5 || buf[0] != DEPS_BLOB_VERSION)
		return -EBADMSG;
	count = get_le(buf + 1, 4);
	/* Bounding the count by the bytes present keeps a corrupt count from
	 * turning into a huge allocation. */
	if (count == 0 || count > (len - 5) / DEP_FIXED)
		return -EBADMSG;
	deps = calloc(count, sizeof(*deps));
	if (!deps)
		return -ENOMEM;
	for (i = 0; i < count; i++) {
		if (len - pos < DEP_FIXED)
			goto bad;
		plen = get_le(buf + pos, 2);
		pos += 2;
		if (plen == 0 || len - pos < plen + 48 || memchr(buf + pos, '\0', plen))
			goto bad;
		deps[i].path = strndup((const char *)buf + pos, plen);
		if (!deps[i].path) {
			rc = -ENOMEM;
			goto bad;
		}
		pos += plen;
		deps[i].size = get_le(buf + pos, 8);
		deps[i].mtime_ns = (int64_t)get_le(buf + pos + 8, 8);
		memcpy(deps[i].digest, buf + pos + 16, 32);
		pos += 48;
	}
	if (pos != len)
		goto bad;
	*out = deps;
	*n = count;
	return 0;
bad:
	for (i = 0; i < count; i++)
		free(deps[i].path);
	free(deps);
	return rc;
}
