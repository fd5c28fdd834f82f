/*
 * SHA-256 without OpenSSL, for libkiln. A rank names its sources by digest
 * (docs/protocol.md), and linking libcrypto for that would cost every rank
 * its load and relocation, and OpenSSL 3's first EVP use (reading
 * openssl.cnf, starting the default provider) about 1.8 ms per process here.
 * On x86-64 CPUs with the SHA extensions the compression runs on them
 * (about 6 µs per 11 KiB source, OpenSSL's speed); elsewhere in portable C. The daemon keeps
 * OpenSSL (util_sha256), and tests/test_util.c checks both against it.
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

#endif
