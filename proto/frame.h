/*
 * Frame codec: a 4-byte big-endian length, then that many bytes of JSON.
 * The decoder is incremental so that it can be fed whatever a read returned.
 */
#ifndef KILN_PROTO_FRAME_H
#define KILN_PROTO_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FRAME_HDR_LEN 4
#define FRAME_MAX_DEFAULT ((size_t)64 << 20)
#define FRAME_FIRST_ALLOC ((size_t)64 << 10)

struct frame_decoder {
	uint8_t hdr[FRAME_HDR_LEN];
	size_t hdr_have;
	size_t len;   /* payload length of the frame being read */
	char *buf;    /* payload being read, cap bytes (at most len + 1) */
	size_t have;
	size_t cap;
	size_t max;   /* largest payload accepted */
};

void frame_decoder_init(struct frame_decoder *d, size_t max);
/* Frees a partly read frame; the decoder may be initialised again. */
void frame_decoder_fini(struct frame_decoder *d);

/*
 * Feeds up to len bytes and consumes them up to the end of at most one frame.
 * Returns the number of bytes consumed (0..len), or -EMSGSIZE for a length
 * over d->max, -EBADMSG for a zero length, -ENOMEM. When a frame completes,
 * *out receives its payload (malloc'd, NUL-terminated, owned by the caller)
 * and *outlen its length; otherwise *out is set to NULL. After an error the
 * decoder must not be fed again.
 */
ssize_t frame_decoder_feed(struct frame_decoder *d, const void *data, size_t len,
			   char **out, size_t *outlen);

/* True while a frame has begun and not ended (bytes fed, no payload out). */
bool frame_decoder_partial(const struct frame_decoder *d);

/* Writes the 4-byte big-endian header for a payload of len bytes. */
void frame_put_header(uint8_t hdr[FRAME_HDR_LEN], uint32_t len);

/*
 * Returns a malloc'd buffer holding header and payload (owned by the caller),
 * its length in *outlen; NULL on ENOMEM or when len is 0 or above UINT32_MAX.
 */
char *frame_encode(const char *payload, size_t len, size_t *outlen);

#endif
