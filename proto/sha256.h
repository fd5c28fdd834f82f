/*
 * SHA-256 without OpenSSL, for libkiln. A rank names its sources by digest
 * (docs/protocol.md), and linking libcrypto for that would cost every rank
 * its load and relocation, and OpenSSL 3's first EVP use (reading
 * openssl.cnf, starting the default provider) about 1.8 ms per process here.
 * On x86-64 CPUs with the SHA extensions the compression runs on them
 * (about 6 µs per 11 KiB source, OpenSSL's speed); elsewhere in portable C. The daemon keeps
 * OpenSSL (util_sha256), and tests/test_util.c checks both against it. kiln's CLI
 * hashes with it too (sha256_init below): loading libcrypto cost every CLI
 * command about 2.9 ms here, before it did anything.
 */
#ifndef KILN_PROTO_SHA256_H
#define KILN_PROTO_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The SHA-256 of len bytes at buf, with the fastest compression available. */
void sha256_buf(const void *buf, size_t len, uint8_t out[32]);
/* Two digests, the same as two sha256_buf; with the SHA instructions the
 * two messages' rounds are interleaved, about 1.8 times as fast. */
void sha256_buf2(const void *a, size_t alen, uint8_t outa[32], const void *b, size_t blen,
		 uint8_t outb[32]);
/* The same in portable C only (for tests). */
void sha256_buf_portable(const void *buf, size_t len, uint8_t out[32]);
/* True when sha256_buf runs on the CPU's SHA instructions. */
bool sha256_hw(void);

/* A digest over data given in pieces (a file read in chunks): init, any
 * number of updates, final; the same digest as sha256_buf of the pieces
 * joined. For kiln's CLI, which hashes without OpenSSL (proto/digest.c's
 * KILN_DIGEST_OWN). */
struct sha256_ctx {
	uint32_t state[8];
	uint8_t block[64];  /* a block not yet compressed */
	size_t nblock;      /* bytes in block */
	uint64_t len;       /* bytes given so far */
};
void sha256_init(struct sha256_ctx *c);
void sha256_update(struct sha256_ctx *c, const void *data, size_t len);
void sha256_final(struct sha256_ctx *c, uint8_t out[32]);

#endif
