/*
 * An entry's dependencies: the compact encoding for the index (one blob per
 * row) and the JSON form of metadata files, `kiln show` and the upstream
 * tier, apart from store.c so that each file keeps to one concern.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include "store.h"
#include "store_int.h"
#include "util.h"

/* 1: files only (path, size, mtime, digest), from the compiler's
 *    dependency files; decoded as kind "file", source "depfile".
 * 2: a source byte, then per dep its kind, mode and identity as well. */
#define DEPS_BLOB_V1 1
#define DEPS_BLOB_V2 2
/* v1 per dep: u16 path length, path, u64 size, i64 mtime_ns, 32-byte digest. */
#define DEP_FIXED_V1 (2 + 8 + 8 + 32)
/* v2 per dep: u8 kind, u32 mode, u16 path length, path, u64 size,
 * i64 mtime_ns, i64 ctime_ns, u64 dev, u64 ino, 32-byte digest. */
#define DEP_FIXED_V2 (1 + 4 + 2 + 8 * 5 + 32)
#define HEAD_V2 6

const char *store_dep_kind_name(int kind)
{
	return dep_kind_name(kind);
}

int store_dep_kind_parse(const char *name)
{
	return dep_kind_parse(name);
}

const char *store_deps_source_name(int source)
{
	return source == STORE_DEPS_OBSERVED ? "observed" : "depfile";
}

static void put_le(uint8_t *p, uint64_t v, int nbytes)
{
	for (int i = 0; i < nbytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int nbytes)
{
	uint64_t v = 0;
	for (int i = 0; i < nbytes; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/*
 * Blob layout, little-endian: u8 version (2), u8 source, u32 count, then
 * the deps as DEP_FIXED_V2 says. One blob per row lets store_get fill the
 * deps with its one indexed query. No deps and the depfile source is an
 * empty blob (NULL), as in version 1.
 */
int store_deps_encode(const struct store_dep *deps, size_t n, int source, uint8_t **out,
		      size_t *len)
{
	size_t total = HEAD_V2, plen;
	*out = NULL;
	*len = 0;
	if (n == 0 && source == STORE_DEPS_DEPFILE)
		return 0;
	if (n > UINT32_MAX)
		return -E2BIG;
	for (size_t i = 0; i < n; i++) {
		if (deps[i].path == NULL || (plen = strlen(deps[i].path)) == 0 ||
		    deps[i].kind >= STORE_DEP__COUNT)
			return -EINVAL;
		if (plen > UINT16_MAX)
			return -ENAMETOOLONG;
		total += DEP_FIXED_V2 + plen;
	}
	uint8_t *buf = malloc(total), *p;
	if (buf == NULL)
		return -ENOMEM;
	buf[0] = DEPS_BLOB_V2;
	buf[1] = (uint8_t)source;
	put_le(buf + 2, n, 4);
	p = buf + HEAD_V2;
	for (size_t i = 0; i < n; i++) {
		const struct store_dep *d = &deps[i];
		plen = strlen(d->path);
		p[0] = d->kind;
		put_le(p + 1, d->mode, 4);
		put_le(p + 5, plen, 2);
		memcpy(p + 7, d->path, plen);
		p += 7 + plen;
		put_le(p, d->size, 8);
		put_le(p + 8, (uint64_t)d->mtime_ns, 8);
		put_le(p + 16, (uint64_t)d->ctime_ns, 8);
		put_le(p + 24, d->dev, 8);
		put_le(p + 32, d->ino, 8);
		memcpy(p + 40, d->digest, 32);
		p += 72;
	}
	*out = buf;
	*len = total;
	return 0;
}

static void free_deps(struct store_dep *deps, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(deps[i].path);
	free(deps);
}

/* One dep of either version at *pos; advances *pos. */
static int decode_one(int version, const uint8_t *buf, size_t len, size_t *pos, struct store_dep *d)
{
	size_t fixed = version == DEPS_BLOB_V1 ? DEP_FIXED_V1 : DEP_FIXED_V2, p = *pos;
	if (len - p < fixed)
		return -EBADMSG;
	if (version == DEPS_BLOB_V2) {
		d->kind = buf[p];
		d->mode = (uint32_t)get_le(buf + p + 1, 4);
		p += 5;
		if (d->kind >= STORE_DEP__COUNT)
			return -EBADMSG;
	}
	size_t plen = get_le(buf + p, 2);
	p += 2;
	if (plen == 0 || len - p < plen + fixed - (version == DEPS_BLOB_V1 ? 2 : 7) ||
	    memchr(buf + p, '\0', plen))
		return -EBADMSG;
	if ((d->path = strndup((const char *)buf + p, plen)) == NULL)
		return -ENOMEM;
	p += plen;
	d->size = get_le(buf + p, 8);
	d->mtime_ns = (int64_t)get_le(buf + p + 8, 8);
	p += 16;
	if (version == DEPS_BLOB_V2) {
		d->ctime_ns = (int64_t)get_le(buf + p, 8);
		d->dev = get_le(buf + p + 8, 8);
		d->ino = get_le(buf + p + 16, 8);
		p += 24;
	}
	memcpy(d->digest, buf + p, 32);
	*pos = p + 32;
	return 0;
}

int store_deps_decode(const uint8_t *buf, size_t len, struct store_dep **out, size_t *n,
		      int *source)
{
	*out = NULL;
	*n = 0;
	*source = STORE_DEPS_DEPFILE;
	if (buf == NULL || len == 0)
		return 0;
	int version = buf[0];
	size_t head = version == DEPS_BLOB_V1 ? 5 : HEAD_V2;
	size_t fixed = version == DEPS_BLOB_V1 ? DEP_FIXED_V1 : DEP_FIXED_V2;
	if ((version != DEPS_BLOB_V1 && version != DEPS_BLOB_V2) || len < head)
		return -EBADMSG;
	if (version == DEPS_BLOB_V2 && buf[1] > STORE_DEPS_OBSERVED)
		return -EBADMSG;
	size_t count = get_le(buf + head - 4, 4), pos = head;
	/* Bounding the count by the bytes present keeps a corrupt count from
	 * turning into a huge allocation. */
	if ((count == 0 && version == DEPS_BLOB_V1) || count > (len - head) / fixed)
		return -EBADMSG;
	struct store_dep *deps = count > 0 ? calloc(count, sizeof(*deps)) : NULL;
	if (count > 0 && deps == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < count; i++) {
		int rc = decode_one(version, buf, len, &pos, &deps[i]);
		if (rc != 0) {
			free_deps(deps, count);
			return rc;
		}
	}
	if (pos != len) {
		free_deps(deps, count);
		return -EBADMSG;
	}
	*out = deps;
	*n = count;
	*source = version == DEPS_BLOB_V2 ? buf[1] : STORE_DEPS_DEPFILE;
	return 0;
}
