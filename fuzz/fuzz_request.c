/*
 * libFuzzer harness for the request parser and validator (proto/msg_parse.c,
 * proto/validate.c): whatever a peer sends as a frame's payload. Checked: it
 * never crashes or leaks; a refusal has a known error code and a message; an
 * accepted request packs (as the client would send it) and the packed form
 * parses again to the same operation, id, key and counts; kilnd's parse
 * with an argument memo kept across inputs gives the same verdict.
 */
#include "fuzz_check.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct msg_request req, again;
	struct msg_error err;
	char *packed;
	size_t plen = 0;

	/* kilnd's parse, with the argument memo kept from input to input, must
	 * say what a parse without one says. */
	static struct msg_args_memo memo;
	struct msg_request kept;
	struct msg_error kerr;
	int krc = msg_request_parse_memo((const char *)data, size, &kept, &kerr, &memo);
	int rc = msg_request_parse((const char *)data, size, &req, &err);
	/* Checked with abort, not assert: the replay runs in release builds too. */
	if (krc != rc || kerr.code != err.code || strcmp(kerr.message, err.message) != 0)
		abort();
	if (rc == 0) {
		if (kept.code_arg != req.code_arg || kept.nargs != req.nargs)
			abort();
		for (size_t i = 0; i < req.nargs; i++)
			if (strcmp(kept.args[i], req.args[i]) != 0)
				abort();
	}
	msg_request_free(&kept);
	if (rc != 0) {
		FUZZ_CHECK(err.code > ERR_NONE && err.code < ERR__COUNT);
		FUZZ_CHECK(err.message[0] != '\0');
		FUZZ_CHECK(!req.sources && !req.args && !req.deps);
		return 0;
	}
	FUZZ_CHECK(req.op > OP_UNKNOWN && req.op < OP__COUNT);
	packed = msg_request_pack(&req, &plen);
	FUZZ_CHECK(packed);
	if (msg_request_parse(packed, plen, &again, &err) != 0)
		abort(); /* what we accept, we must be able to send */
	FUZZ_CHECK(again.op == req.op && again.id == req.id);
	FUZZ_CHECK(again.nsources == req.nsources && again.nargs == req.nargs && again.ndeps == req.ndeps);
	FUZZ_CHECK(again.no_build == req.no_build);
	FUZZ_CHECK(!req.key == !again.key && (!req.key || strcmp(req.key, again.key) == 0));
	for (size_t i = 0; i < req.nsources; i++) {
		FUZZ_CHECK(strcmp(req.sources[i].name, again.sources[i].name) == 0);
		FUZZ_CHECK(req.sources[i].len == again.sources[i].len);
		FUZZ_CHECK(req.sources[i].has_digest == again.sources[i].has_digest);
	}
	msg_request_free(&again);
	msg_request_free(&req);
	free(packed);
	return 0;
}
