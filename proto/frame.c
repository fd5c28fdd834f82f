/*
 * Frame codec: a 4-byte big-endian length, then that many bytes of JSON.
 * The decoder keeps its state between calls so that the daemon's loop and the
 * client's blocking reader can both feed it whatever one read returned.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"

void frame_decoder_init(struct frame_decoder *d, size_t max)
{
	memset(d, 0, sizeof(*d));
	d->max = max ? max : FRAME_MAX_DEFAULT;
}

void frame_decoder_fini(struct frame_decoder *d)
{
	free(d->buf);
	d->buf = NULL;
	d->hdr_have = 0;
	d->len = 0;
	d->have = 0;
	d->cap = 0;
}

/* Turns a complete header into a payload buffer, or refuses the length. */
static int start_payload(struct frame_decoder *d)
{
	d->len = (size_t)d->hdr[0] << 24 | (size_t)d->hdr[1] << 16 |
		 (size_t)d->hdr[2] << 8 | (size_t)d->hdr[3];
	if (d->len == 0)
		return -EBADMSG;
	if (d->len > d->max)
		return -EMSGSIZE;
	d->have = 0;
	d->cap = 0;
	return 0;
}

/*
 * Makes room for need payload bytes. The buffer grows with what has arrived
 * (doubling, from FRAME_FIRST_ALLOC) rather than with what the header
 * claims: a peer that announces 64 MiB and sends one byte holds 64 KiB. One
 * extra byte lets the payload be handed out NUL-terminated.
 */
static int reserve(struct frame_decoder *d, size_t need)
{
	if (need + 1 <= d->cap)
		return 0;
	size_t cap = d->cap ? d->cap : FRAME_FIRST_ALLOC;
	while (cap < need + 1)
		cap *= 2;
	if (cap > d->len + 1)
		cap = d->len + 1;
	char *buf = realloc(d->buf, cap);
	if (!buf)
		return -ENOMEM;
	d->buf = buf;
	d->cap = cap;
	return 0;
}

ssize_t frame_decoder_feed(struct frame_decoder *d, const void *data, size_t len,
			   char **out, size_t *outlen)
{
	const uint8_t *p = data;
	size_t used = 0;
	size_t n;
	int rc;

	*out = NULL;
	if (len == 0)
		return 0;
	if (d->hdr_have < FRAME_HDR_LEN) {
		n = FRAME_HDR_LEN - d->hdr_have;
		if (n > len)
			n = len;
		memcpy(d->hdr + d->hdr_have, p, n);
		d->hdr_have += n;
		used += n;
		if (d->hdr_have < FRAME_HDR_LEN)
			return (ssize_t)used;
		rc = start_payload(d);
		if (rc < 0)
			return rc;
	}

	n = d->len - d->have;
	if (n > len - used)
		n = len - used;
	rc = reserve(d, d->have + n);
	if (rc < 0)
		return rc;
	memcpy(d->buf + d->have, p + used, n);
	d->have += n;
	used += n;
	if (d->have < d->len)
		return (ssize_t)used;

	/* The frame is complete: hand the buffer over and start afresh, so that
	 * the bytes after it in the caller's buffer begin the next frame. */
	d->buf[d->len] = '\0';
	*out = d->buf;
	if (outlen)
		*outlen = d->len;
	d->buf = NULL;
	d->hdr_have = 0;
	d->len = 0;
	d->have = 0;
	d->cap = 0;
	return (ssize_t)used;
}

bool frame_decoder_partial(const struct frame_decoder *d)
{
	return d->hdr_have > 0;
}

void frame_put_header(uint8_t hdr[FRAME_HDR_LEN], uint32_t len)
{
	hdr[0] = (uint8_t)(len >> 24);
	hdr[1] = (uint8_t)(len >> 16);
	hdr[2] = (uint8_t)(len >> 8);
	hdr[3] = (uint8_t)len;
}

char *frame_encode(const char *payload, size_t len, size_t *outlen)
{
	char *buf;

	if (len == 0 || len > UINT32_MAX)
		return NULL;
	buf = malloc(FRAME_HDR_LEN + len);
	if (!buf)
		return NULL;
	frame_put_header((uint8_t *)buf, (uint32_t)len);
	memcpy(buf + FRAME_HDR_LEN, payload, len);
	if (outlen)
		*outlen = FRAME_HDR_LEN + len;
	return buf;
}
