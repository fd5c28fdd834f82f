/*
 * SHA-256 (FIPS 180-4) for libkiln; see sha256.h for why it is not
 * OpenSSL's. The padding and the portable compression follow the standard
 * directly; the x86 path does the same rounds with the SHA-NI instructions
 * (sha256rnds2 does two rounds, sha256msg1/msg2 extend the message schedule
 * four words at a time) and is chosen at run time from glibc's record of
 * the CPU's features (cpuid where glibc has none).
 */
#include <pthread.h>
#include <string.h>

#include "sha256.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SHA256_X86 1
#include <immintrin.h>
#if defined(__has_include)
#if __has_include(<sys/platform/x86.h>)
#include <sys/platform/x86.h>   /* glibc: the loader's CPU features */
#ifdef CPU_FEATURE_ACTIVE       /* glibc 2.34+; older ones name it otherwise */
#define SHA256_GLIBC_FEATURES 1
#endif
#endif
#endif
#ifndef SHA256_GLIBC_FEATURES
#include <cpuid.h>
#endif
#endif

static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
	0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
	0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
	0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
	0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
	0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
	0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
	0xc67178f2,
};

static const uint32_t H0[8] = {
	0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
	0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
};

typedef void (*compress_fn)(uint32_t state[8], const uint8_t *data, size_t blocks);

static inline uint32_t ror(uint32_t x, int n)
{
	return (x >> n) | (x << (32 - n));
}

static inline uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void compress_portable(uint32_t state[8], const uint8_t *data, size_t blocks)
{
	uint32_t w[64];

	for (; blocks > 0; blocks--, data += 64) {
		for (int t = 0; t < 16; t++)
			w[t] = be32(data + 4 * t);
		for (int t = 16; t < 64; t++) {
			uint32_t s0 = ror(w[t - 15], 7) ^ ror(w[t - 15], 18) ^ (w[t - 15] >> 3);
			uint32_t s1 = ror(w[t - 2], 17) ^ ror(w[t - 2], 19) ^ (w[t - 2] >> 10);
			w[t] = w[t - 16] + s0 + w[t - 7] + s1;
		}
		uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
		uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
		for (int t = 0; t < 64; t++) {
			uint32_t s1 = ror(e, 6) ^ ror(e, 11) ^ ror(e, 25);
			uint32_t ch = (e & f) ^ (~e & g);
			uint32_t t1 = h + s1 + ch + K[t] + w[t];
			uint32_t s0 = ror(a, 2) ^ ror(a, 13) ^ ror(a, 22);
			uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
			uint32_t t2 = s0 + maj;
			h = g;
			g = f;
			f = e;
			e = d + t1;
			d = c;
			c = b;
			b = a;
			a = t1 + t2;
		}
		state[0] += a;
		state[1] += b;
		state[2] += c;
		state[3] += d;
		state[4] += e;
		state[5] += f;
		state[6] += g;
		state[7] += h;
	}
}

#ifdef SHA256_X86
/*
 * The state lives in two registers as ABEF and CDGH (the order sha256rnds2
 * wants). Each group g of four rounds uses message words 4g..4g+3, kept in a
 * ring of four registers: group g overwrites the words of group g - 4 with
 * W[t] = W[t-16] + s0(W[t-15]) + W[t-7] + s1(W[t-2]).
 */
#define SHANI __attribute__((target("sha,sse4.1,ssse3"), always_inline)) static inline

SHANI void shani_load(const uint32_t state[8], __m128i *st0, __m128i *st1)
{
	__m128i tmp = _mm_loadu_si128((const __m128i *)&state[0]);    /* DCBA */
	__m128i hgfe = _mm_loadu_si128((const __m128i *)&state[4]);   /* HGFE */

	tmp = _mm_shuffle_epi32(tmp, 0xB1);            /* CDAB */
	hgfe = _mm_shuffle_epi32(hgfe, 0x1B);          /* EFGH */
	*st0 = _mm_alignr_epi8(tmp, hgfe, 8);          /* ABEF */
	*st1 = _mm_blend_epi16(hgfe, tmp, 0xF0);       /* CDGH */
}

SHANI void shani_store(uint32_t state[8], __m128i st0, __m128i st1)
{
	__m128i tmp = _mm_shuffle_epi32(st0, 0x1B);    /* FEBA */
	st1 = _mm_shuffle_epi32(st1, 0xB1);            /* DCHG */
	_mm_storeu_si128((__m128i *)&state[0], _mm_blend_epi16(tmp, st1, 0xF0)); /* DCBA */
	_mm_storeu_si128((__m128i *)&state[4], _mm_alignr_epi8(st1, tmp, 8));    /* HGFE */
}

/* Message words 4g..4g+3 of the block at data, into the ring x, plus K. */
SHANI __m128i shani_words(__m128i x[4], int g, const uint8_t *data)
{
	const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);

	if (g < 4) {
		x[g] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 16 * g)), bswap);
	} else {
		__m128i m = _mm_sha256msg1_epu32(x[g & 3], x[(g - 3) & 3]);
		m = _mm_add_epi32(m, _mm_alignr_epi8(x[(g - 1) & 3], x[(g - 2) & 3], 4));
		x[g & 3] = _mm_sha256msg2_epu32(m, x[(g - 1) & 3]);
	}
	return _mm_add_epi32(x[g & 3], _mm_loadu_si128((const __m128i *)&K[4 * g]));
}

/* Four rounds with the words wk (message plus K). */
SHANI void shani_rounds(__m128i *st0, __m128i *st1, __m128i wk)
{
	*st1 = _mm_sha256rnds2_epu32(*st1, *st0, wk);
	*st0 = _mm_sha256rnds2_epu32(*st0, *st1, _mm_shuffle_epi32(wk, 0x0E));
}

/* Unrolled, the ring stays in registers and the g < 4 test goes: 1.45 ->
 * 1.81 GB/s here at -O2 (OpenSSL's assembly: 1.74). */
#if defined(__clang__)
#define SHANI_UNROLL _Pragma("unroll")
#else
#define SHANI_UNROLL _Pragma("GCC unroll 16")
#endif

__attribute__((target("sha,sse4.1,ssse3")))
static void compress_shani(uint32_t state[8], const uint8_t *data, size_t blocks)
{
	__m128i st0, st1;

	shani_load(state, &st0, &st1);
	for (; blocks > 0; blocks--, data += 64) {
		__m128i abef = st0, cdgh = st1, x[4];

		SHANI_UNROLL
		for (int g = 0; g < 16; g++)
			shani_rounds(&st0, &st1, shani_words(x, g, data));
		st0 = _mm_add_epi32(st0, abef);
		st1 = _mm_add_epi32(st1, cdgh);
	}
	shani_store(state, st0, st1);
}

/*
 * Two messages at once, block by block. Each sha256rnds2 waits for the one
 * before it, so one message leaves the SHA unit idle most cycles; two
 * independent ones interleaved: 3.35 against 1.82 GB/s here (11.5 KiB
 * buffers). Four would need more than the 16 registers the SHA
 * instructions can name.
 */
__attribute__((target("sha,sse4.1,ssse3")))
static void compress_shani2(uint32_t sa[8], const uint8_t *da, uint32_t sb[8], const uint8_t *db,
			    size_t blocks)
{
	__m128i a0, a1, b0, b1;

	shani_load(sa, &a0, &a1);
	shani_load(sb, &b0, &b1);
	for (; blocks > 0; blocks--, da += 64, db += 64) {
		__m128i sa0 = a0, sa1 = a1, sb0 = b0, sb1 = b1, x[4], y[4];

		SHANI_UNROLL
		for (int g = 0; g < 16; g++) {
			__m128i wa = shani_words(x, g, da), wb = shani_words(y, g, db);
			shani_rounds(&a0, &a1, wa);
			shani_rounds(&b0, &b1, wb);
		}
		a0 = _mm_add_epi32(a0, sa0);
		a1 = _mm_add_epi32(a1, sa1);
		b0 = _mm_add_epi32(b0, sb0);
		b1 = _mm_add_epi32(b1, sb1);
	}
	shani_store(sa, a0, a1);
	shani_store(sb, b0, b1);
}

/*
 * Asks glibc, whose loader ran cpuid at start-up anyway: in a virtual machine
 * each cpuid instruction traps to the hypervisor (15-20 µs each on the
 * reference VM), which a fresh process would pay on its first get.
 */
static bool cpu_has_sha(void)
{
#ifdef SHA256_GLIBC_FEATURES
	return CPU_FEATURE_ACTIVE(SHA) && CPU_FEATURE_ACTIVE(SSSE3) && CPU_FEATURE_ACTIVE(SSE4_1);
#else
	unsigned a, b, c, d;

	/* SSSE3 and SSE4.1 (leaf 1, ecx bits 9 and 19), SHA (leaf 7, ebx bit 29). */
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 9)) || !(c & (1u << 19)))
		return false;
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return false;
	return (b & (1u << 29)) != 0;
#endif
}
#endif

static compress_fn best = compress_portable;
static pthread_once_t best_once = PTHREAD_ONCE_INIT;

static void choose(void)
{
#ifdef SHA256_X86
	if (cpu_has_sha())
		best = compress_shani;
#endif
}

/* The end of a message whose first `before` bytes (whole blocks) are in
 * state: its last len bytes at p (their whole blocks, then the padding and
 * the length of all of it); the digest into out. */
static void finish_at(compress_fn compress, uint32_t state[8], const uint8_t *p, size_t len,
		      uint64_t before, uint8_t out[32])
{
	uint8_t tail[128];
	size_t full = len / 64, rest = len % 64, tlen;
	uint64_t bits = (before + (uint64_t)len) * 8;

	if (full > 0)
		compress(state, p, full);
	/* The rest, 0x80, zeros, and the length in bits: one or two blocks. */
	memcpy(tail, p + full * 64, rest);
	tail[rest] = 0x80;
	tlen = rest + 1 + 8 <= 64 ? 64 : 128;
	memset(tail + rest + 1, 0, tlen - rest - 1 - 8);
	for (int i = 0; i < 8; i++)
		tail[tlen - 1 - i] = (uint8_t)(bits >> (8 * i));
	compress(state, tail, tlen / 64);
	for (int i = 0; i < 8; i++) {
		out[4 * i] = (uint8_t)(state[i] >> 24);
		out[4 * i + 1] = (uint8_t)(state[i] >> 16);
		out[4 * i + 2] = (uint8_t)(state[i] >> 8);
		out[4 * i + 3] = (uint8_t)state[i];
	}
}

/* The rest of a message after its first done bytes (whole blocks): its
 * other blocks, the padding and the length; the digest into out. */
static void finish(compress_fn compress, uint32_t state[8], const uint8_t *buf, size_t done,
		   size_t len, uint8_t out[32])
{
	finish_at(compress, state, buf + done, len - done, done, out);
}

static void digest(compress_fn compress, const void *buf, size_t len, uint8_t out[32])
{
	uint32_t state[8];

	memcpy(state, H0, sizeof(state));
	finish(compress, state, buf, 0, len, out);
}

void sha256_buf(const void *buf, size_t len, uint8_t out[32])
{
	pthread_once(&best_once, choose);
	digest(best, buf, len, out);
}

void sha256_buf_portable(const void *buf, size_t len, uint8_t out[32])
{
	digest(compress_portable, buf, len, out);
}

void sha256_buf2(const void *a, size_t alen, uint8_t outa[32], const void *b, size_t blen,
		 uint8_t outb[32])
{
	pthread_once(&best_once, choose);
#ifdef SHA256_X86
	if (best == compress_shani) {
		size_t both = (alen < blen ? alen : blen) / 64;
		uint32_t sa[8], sb[8];

		memcpy(sa, H0, sizeof(sa));
		memcpy(sb, H0, sizeof(sb));
		if (both > 0)
			compress_shani2(sa, a, sb, b, both);
		finish(best, sa, a, both * 64, alen, outa);
		finish(best, sb, b, both * 64, blen, outb);
		return;
	}
#endif
	digest(best, a, alen, outa);
	digest(best, b, blen, outb);
}

void sha256_init(struct sha256_ctx *c)
{
	pthread_once(&best_once, choose);
	memcpy(c->state, H0, sizeof(c->state));
	c->nblock = 0;
	c->len = 0;
}

void sha256_update(struct sha256_ctx *c, const void *data, size_t len)
{
	const uint8_t *p = data;
	c->len += len;
	if (c->nblock > 0) {
		size_t take = 64 - c->nblock < len ? 64 - c->nblock : len;
		memcpy(c->block + c->nblock, p, take);
		c->nblock += take;
		p += take;
		len -= take;
		if (c->nblock < 64)
			return;
		best(c->state, c->block, 1);
		c->nblock = 0;
	}
	if (len >= 64) {
		best(c->state, p, len / 64);
		p += len / 64 * 64;
		len %= 64;
	}
	memcpy(c->block, p, len);
	c->nblock = len;
}

void sha256_final(struct sha256_ctx *c, uint8_t out[32])
{
	/* finish() pads from the message's total length; the bytes before the
	 * block it is given are already in the state. */
	finish_at(best, c->state, c->block, c->nblock, c->len - c->nblock, out);
}

bool sha256_hw(void)
{
	pthread_once(&best_once, choose);
	return best != compress_portable;
}
