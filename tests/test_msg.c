/*
 * Unit tests of protocol messages (proto/msg.c, msg_parse.c): every operation parses,
 * every bad field gets the documented code and field, and what the client
 * packs, the daemon parses back to the same request.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include "unit.h"

static const char key64[] =
	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/* Parses json, which must succeed, into req. */
static void parse_ok(const char *json, struct msg_request *req)
{
	struct msg_error err;
	int rc = msg_request_parse(json, strlen(json), req, &err);

	ck_assert_msg(rc == 0, "%s refused: %s (%s, field %s)", json, err.message,
		      msg_err_name(err.code), err.field);
	ck_assert_int_eq(err.code, ERR_NONE);
}

/* Parses json, which must fail with code in field, keeping id. */
static void parse_err(const char *json, enum msg_err code, const char *field, uint64_t id)
{
	struct msg_request req;
	struct msg_error err;
	int rc = msg_request_parse(json, strlen(json), &req, &err);

	ck_assert_msg(rc == -1, "%s accepted", json);
	ck_assert_msg(err.code == code, "%s: code %s, expected %s (%s)", json,
		      msg_err_name(err.code), msg_err_name(code), err.message);
	ck_assert_msg(strcmp(err.field, field) == 0, "%s: field \"%s\", expected \"%s\"",
		      json, err.field, field);
	ck_assert_msg(req.id == id, "%s: id %llu, expected %llu", json,
		      (unsigned long long)req.id, (unsigned long long)id);
	ck_assert_msg(strlen(err.message) > 10, "%s: message \"%s\"", json, err.message);
	/* The request is left freed and empty. */
	ck_assert_ptr_null(req.sources);
	ck_assert_ptr_null(req.args);
	ck_assert_ptr_null(req.toolchain);
	ck_assert_uint_eq(req.nsources, 0);
}

START_TEST(test_names)
{
	int i;

	for (i = 0; i < OP__COUNT; i++) {
		ck_assert_ptr_nonnull(msg_op_name((enum msg_op)i));
		ck_assert_int_eq(msg_op_parse(msg_op_name((enum msg_op)i)), i);
	}
	ck_assert_ptr_null(msg_op_name(OP_UNKNOWN));
	ck_assert_ptr_null(msg_op_name(OP__COUNT));
	ck_assert_int_eq(msg_op_parse("GET"), OP_UNKNOWN);
	ck_assert_int_eq(msg_op_parse(NULL), OP_UNKNOWN);
	ck_assert_str_eq(msg_op_name(OP_SHUTDOWN), "shutdown");

	for (i = ERR_NONE + 1; i < ERR__COUNT; i++)
		ck_assert_int_eq(msg_err_parse(msg_err_name((enum msg_err)i)), i);
	ck_assert_str_eq(msg_err_name(ERR_BAD_FRAME), "bad_frame");
	ck_assert_str_eq(msg_err_name(ERR_SHUTTING_DOWN), "shutting_down");
	ck_assert_str_eq(msg_err_name(ERR_BUILD_TIMEOUT), "build_timeout");
	ck_assert_int_eq(msg_err_parse("something_new"), ERR_INTERNAL);
	ck_assert_int_eq(msg_err_parse(NULL), ERR_INTERNAL);
}
END_TEST

/* Every row of proto/ops.def: its numbers are the enum's, in the rows'
 * order (HELLO first, 0), and an empty request of the op packs and parses
 * back to the op, or is refused for a field (never "no parser": the
 * tables are generated from the rows). */
START_TEST(test_every_row)
{
	static const char *const names[] = {
#define KILN_OP(id, name, parse, pack, run, family, flags) name,
#include "ops.def"
	};
	ck_assert_int_eq(sizeof(names) / sizeof(names[0]), OP__COUNT);
	ck_assert_int_eq(OP_HELLO, 0);
	for (int i = 0; i < OP__COUNT; i++) {
		ck_assert_str_eq(msg_op_name((enum msg_op)i), names[i]);
		struct msg_request req, back;
		struct msg_error err;
		msg_request_init(&req);
		req.op = (enum msg_op)i;
		req.id = 7;
		size_t len;
		char *json = msg_request_pack(&req, &len);
		ck_assert_ptr_nonnull(json);
		if (msg_request_parse(json, len, &back, &err) == 0) {
			ck_assert_int_eq(back.op, i);
			ck_assert_uint_eq(back.id, 7);
			msg_request_free(&back);
		} else {
			ck_assert_msg(err.code != ERR_INTERNAL && err.code != ERR_UNKNOWN_OP,
				      "%s: %s", names[i], err.message);
		}
		free(json);
	}
}
END_TEST

/* msg_add_int writes integers exactly, without printf: the extremes, zero,
 * and 2^53 - 1 (which cJSON's double printing would round). */
START_TEST(test_add_int_exact)
{
	static const struct { int64_t v; const char *text; } cases[] = {
		{ 0, "{\"n\":0}" }, { 7, "{\"n\":7}" }, { -1, "{\"n\":-1}" },
		{ 9007199254740991LL, "{\"n\":9007199254740991}" },
		{ INT64_MAX, "{\"n\":9223372036854775807}" },
		{ INT64_MIN, "{\"n\":-9223372036854775808}" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cJSON *o = cJSON_CreateObject();
		ck_assert_ptr_nonnull(msg_add_int(o, "n", cases[i].v));
		char *text = cJSON_PrintUnformatted(o);
		ck_assert_str_eq(text, cases[i].text);
		free(text);
		cJSON_Delete(o);
	}
}
END_TEST

START_TEST(test_parse_hello)
{
	struct msg_request req;

	parse_ok("{\"op\":\"hello\",\"id\":1,\"proto\":1,\"client\":\"libkiln/0.1.0\"}", &req);
	ck_assert_int_eq(req.op, OP_HELLO);
	ck_assert_uint_eq(req.id, 1);
	ck_assert_int_eq(req.proto, 1);
	ck_assert_str_eq(req.client, "libkiln/0.1.0");
	ck_assert_int_eq(req.max_size, -1);
	msg_request_free(&req);

	/* Another version parses: the daemon answers proto_mismatch itself. */
	parse_ok("{\"id\":0,\"op\":\"hello\",\"proto\":99}", &req);
	ck_assert_int_eq(req.proto, 99);
	ck_assert_ptr_null(req.client);
	ck_assert(!req.heartbeat);
	msg_request_free(&req);

	/* Heartbeats asked for, and packed back. */
	parse_ok("{\"op\":\"hello\",\"id\":2,\"proto\":1,\"heartbeat\":true}", &req);
	ck_assert(req.heartbeat);
	size_t len;
	char *packed = msg_request_pack(&req, &len);
	ck_assert_ptr_nonnull(strstr(packed, "\"heartbeat\":true"));
	ck_assert_ptr_null(strstr(packed, "job_nodes"));
	free(packed);
	msg_request_free(&req);

	/* The job's size, said by the client, and packed back. */
	parse_ok("{\"op\":\"hello\",\"id\":3,\"proto\":1,\"job_nodes\":4096}", &req);
	ck_assert_int_eq(req.job_nodes, 4096);
	packed = msg_request_pack(&req, &len);
	ck_assert_ptr_nonnull(strstr(packed, "\"job_nodes\":4096"));
	free(packed);
	msg_request_free(&req);
}
END_TEST

START_TEST(test_parse_get)
{
	struct msg_request req;

	parse_ok("{\"op\":\"get\",\"id\":2,\"toolchain\":\"c++\",\"output\":\"shared\","
		 "\"args\":[\"-O2\",\"-I/opt/dace/include\"],"
		 "\"sources\":[{\"name\":\"prog.cpp\",\"text\":\"int f(void){return 1;}\\n\"},"
		 "{\"name\":\"util.cpp\",\"path\":\"/abs/util.cpp\"}],"
		 "\"alias\":\"gt4py:4f3a\",\"label\":\"diffusion step \\u2207\"}", &req);
	ck_assert_int_eq(req.op, OP_GET);
	ck_assert_uint_eq(req.id, 2);
	ck_assert_str_eq(req.toolchain, "c++");
	ck_assert_str_eq(req.output, "shared");
	ck_assert_uint_eq(req.nargs, 2);
	ck_assert_str_eq(req.args[0], "-O2");
	ck_assert_str_eq(req.args[1], "-I/opt/dace/include");
	ck_assert_uint_eq(req.nsources, 2);
	ck_assert_str_eq(req.sources[0].name, "prog.cpp");
	ck_assert_str_eq(req.sources[0].text, "int f(void){return 1;}\n");
	ck_assert_uint_eq(req.sources[0].len, 23);
	ck_assert_ptr_null(req.sources[0].path);
	ck_assert_str_eq(req.sources[1].name, "util.cpp");
	ck_assert_ptr_null(req.sources[1].text);
	ck_assert_str_eq(req.sources[1].path, "/abs/util.cpp");
	ck_assert_str_eq(req.alias, "gt4py:4f3a");
	ck_assert_str_eq(req.label, "diffusion step \xe2\x88\x87");
	ck_assert_int_eq(req.proto, -1);
	msg_request_free(&req);
	ck_assert_ptr_null(req.sources);
	/* A second free is harmless. */
	msg_request_free(&req);
}
END_TEST

/* A source named by digest: no text, no path, the 32 bytes. */
START_TEST(test_parse_get_digest)
{
	struct msg_request req;

	parse_ok("{\"op\":\"get\",\"id\":3,\"sources\":[{\"name\":\"a.c\",\"sha256\":"
		 "\"00ff0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab\"}]}", &req);
	ck_assert_uint_eq(req.nsources, 1);
	ck_assert(req.sources[0].has_digest);
	ck_assert_ptr_null(req.sources[0].text);
	ck_assert_ptr_null(req.sources[0].path);
	ck_assert_uint_eq(req.sources[0].digest[0], 0x00);
	ck_assert_uint_eq(req.sources[0].digest[1], 0xff);
	ck_assert_uint_eq(req.sources[0].digest[2], 0x01);
	ck_assert_uint_eq(req.sources[0].digest[31], 0xab);
	msg_request_free(&req);
}
END_TEST

START_TEST(test_parse_get_defaults)
{
	struct msg_request req;

	/* Defaults fill in; null counts as absent; unknown fields are ignored. */
	parse_ok("{\"op\":\"get\",\"id\":3,\"sources\":[{\"name\":\"a.c\",\"text\":\"\"}],"
		 "\"alias\":null,\"future_field\":[1,2]}", &req);
	ck_assert_str_eq(req.toolchain, "cc");
	ck_assert_str_eq(req.output, "shared");
	ck_assert_uint_eq(req.nargs, 0);
	ck_assert_ptr_null(req.args);
	ck_assert_ptr_null(req.alias);
	ck_assert_ptr_null(req.label);
	ck_assert_str_eq(req.sources[0].text, "");
	ck_assert_uint_eq(req.sources[0].len, 0);
	msg_request_free(&req);
}
END_TEST

START_TEST(test_parse_other_ops)
{
	static const char *const ref_ops[] = { "show", "remove", "pin", "unpin" };
	struct msg_request req;
	char json[512];
	size_t i;

	parse_ok("{\"op\":\"lookup\",\"id\":3,\"alias\":\"gt4py:4f3a\"}", &req);
	ck_assert_int_eq(req.op, OP_LOOKUP);
	ck_assert_str_eq(req.alias, "gt4py:4f3a");
	ck_assert_ptr_null(req.key);
	msg_request_free(&req);

	snprintf(json, sizeof(json), "{\"op\":\"lookup\",\"id\":3,\"key\":\"%s\"}", key64);
	parse_ok(json, &req);
	ck_assert_str_eq(req.key, key64);
	ck_assert_ptr_null(req.alias);
	msg_request_free(&req);

	parse_ok("{\"op\":\"status\",\"id\":4}", &req);
	ck_assert_int_eq(req.op, OP_STATUS);
	msg_request_free(&req);
	parse_ok("{\"op\":\"list\",\"id\":5}", &req);
	ck_assert_int_eq(req.op, OP_LIST);
	msg_request_free(&req);
	parse_ok("{\"op\":\"shutdown\",\"id\":9}", &req);
	ck_assert_int_eq(req.op, OP_SHUTDOWN);
	msg_request_free(&req);

	for (i = 0; i < 4; i++) {
		snprintf(json, sizeof(json), "{\"op\":\"%s\",\"id\":6,\"ref\":\"4f3a\"}",
			 ref_ops[i]);
		parse_ok(json, &req);
		ck_assert_int_eq(req.op, msg_op_parse(ref_ops[i]));
		ck_assert_str_eq(req.ref, "4f3a");
		msg_request_free(&req);
	}

	parse_ok("{\"op\":\"gc\",\"id\":8,\"max_size\":1073741824}", &req);
	ck_assert_int_eq(req.op, OP_GC);
	ck_assert_int_eq(req.max_size, 1073741824);
	msg_request_free(&req);
	parse_ok("{\"op\":\"gc\",\"id\":8}", &req);
	ck_assert_int_eq(req.max_size, -1);
	msg_request_free(&req);
	parse_ok("{\"op\":\"gc\",\"id\":8,\"max_size\":0}", &req);
	ck_assert_int_eq(req.max_size, 0);
	msg_request_free(&req);
}
END_TEST

START_TEST(test_parse_id)
{
	struct msg_request req;

	parse_ok("{\"op\":\"status\",\"id\":9007199254740991}", &req);
	ck_assert_uint_eq(req.id, 9007199254740991ull);
	msg_request_free(&req);
	parse_ok("{\"op\":\"status\",\"id\":0}", &req);
	ck_assert_uint_eq(req.id, 0);
	msg_request_free(&req);
	/* Whitespace around the object is fine. */
	parse_ok(" \n{\"op\":\"status\",\"id\":1e2}\r\n\t", &req);
	ck_assert_uint_eq(req.id, 100);
	msg_request_free(&req);

	parse_err("{\"op\":\"status\"}", ERR_BAD_REQUEST, "id", 0);
	parse_err("{\"op\":\"status\",\"id\":\"1\"}", ERR_BAD_REQUEST, "id", 0);
	parse_err("{\"op\":\"status\",\"id\":-1}", ERR_BAD_REQUEST, "id", 0);
	parse_err("{\"op\":\"status\",\"id\":1.5}", ERR_BAD_REQUEST, "id", 0);
	parse_err("{\"op\":\"status\",\"id\":9007199254740992}", ERR_BAD_REQUEST, "id", 0);
	parse_err("{\"op\":\"status\",\"id\":1e300}", ERR_BAD_REQUEST, "id", 0);
	parse_err("{\"op\":\"status\",\"id\":1e999}", ERR_BAD_REQUEST, "id", 0);
	parse_err("{\"op\":\"status\",\"id\":true}", ERR_BAD_REQUEST, "id", 0);
	parse_err("{\"op\":\"status\",\"id\":null}", ERR_BAD_REQUEST, "id", 0);
	parse_err("{\"op\":\"status\",\"id\":[1]}", ERR_BAD_REQUEST, "id", 0);
}
END_TEST

START_TEST(test_parse_op)
{
	parse_err("{\"id\":7}", ERR_BAD_REQUEST, "op", 7);
	parse_err("{\"id\":7,\"op\":3}", ERR_BAD_REQUEST, "op", 7);
	parse_err("{\"id\":7,\"op\":null}", ERR_BAD_REQUEST, "op", 7);
	parse_err("{\"id\":42,\"op\":\"explode\"}", ERR_UNKNOWN_OP, "op", 42);
	parse_err("{\"id\":42,\"op\":\"GET\"}", ERR_UNKNOWN_OP, "op", 42);
	parse_err("{\"id\":42,\"op\":\"\"}", ERR_UNKNOWN_OP, "op", 42);
}
END_TEST

START_TEST(test_parse_not_object)
{
	static const char *const bad[] = {
		"[]", "1", "\"x\"", "null", "true", "{", "{\"op\":", "not json",
		"{} {}", "{}x", "{\"id\":1,\"op\":\"status\"}]", " ",
	};
	struct msg_request req;
	struct msg_error err;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		parse_err(bad[i], ERR_BAD_JSON, "", 0);
	ck_assert_int_eq(msg_request_parse("", 0, &req, &err), -1);
	ck_assert_int_eq(err.code, ERR_BAD_JSON);
	/* A NUL inside the payload would hide what follows it. */
	ck_assert_int_eq(msg_request_parse("{\"id\":1,\"op\":\"list\"}\0x", 22, &req, &err), -1);
	ck_assert_int_eq(err.code, ERR_BAD_JSON);
	/* The length bounds the parse: the bytes after it are not read. */
	ck_assert_int_eq(msg_request_parse("{\"id\":1,\"op\":\"list\"}garbage", 20, &req, &err),
			 0);
	msg_request_free(&req);
}
END_TEST

START_TEST(test_parse_hello_errors)
{
	parse_err("{\"op\":\"hello\",\"id\":1}", ERR_BAD_REQUEST, "proto", 1);
	parse_err("{\"op\":\"hello\",\"id\":1,\"proto\":\"1\"}", ERR_BAD_REQUEST, "proto", 1);
	parse_err("{\"op\":\"hello\",\"id\":1,\"proto\":1.5}", ERR_BAD_REQUEST, "proto", 1);
	parse_err("{\"op\":\"hello\",\"id\":1,\"proto\":-1}", ERR_BAD_REQUEST, "proto", 1);
	parse_err("{\"op\":\"hello\",\"id\":1,\"proto\":1,\"client\":5}", ERR_BAD_REQUEST,
		  "client", 1);
	parse_err("{\"op\":\"hello\",\"id\":1,\"proto\":1,\"client\":\"a\\nb\"}",
		  ERR_BAD_REQUEST, "client", 1);
	parse_err("{\"op\":\"hello\",\"id\":1,\"proto\":1,\"heartbeat\":1}", ERR_BAD_REQUEST,
		  "heartbeat", 1);
	parse_err("{\"op\":\"hello\",\"id\":1,\"proto\":1,\"job_nodes\":-1}", ERR_BAD_REQUEST,
		  "job_nodes", 1);
	parse_err("{\"op\":\"hello\",\"id\":1,\"proto\":1,\"job_nodes\":10000001}",
		  ERR_BAD_REQUEST, "job_nodes", 1);
	parse_err("{\"op\":\"hello\",\"id\":1,\"proto\":1,\"job_nodes\":\"4\"}", ERR_BAD_REQUEST,
		  "job_nodes", 1);
	parse_err("{\"op\":\"hello\",\"id\":1,\"proto\":1,\"job_nodes\":2.5}", ERR_BAD_REQUEST,
		  "job_nodes", 1);
}
END_TEST

#define SRC "\"sources\":[{\"name\":\"a.c\",\"text\":\"x\"}]"

START_TEST(test_parse_get_errors)
{
	/* sources */
	parse_err("{\"op\":\"get\",\"id\":2}", ERR_BAD_REQUEST, "sources", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"sources\":{}}", ERR_BAD_REQUEST, "sources", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"sources\":[]}", ERR_BAD_REQUEST, "sources", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"sources\":[\"a.c\"]}", ERR_BAD_REQUEST,
		  "sources", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"sources\":[{\"text\":\"x\"}]}", ERR_BAD_REQUEST,
		  "sources", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"sources\":[{\"name\":5,\"text\":\"x\"}]}",
		  ERR_BAD_REQUEST, "sources", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"sources\":[{\"name\":\"../x.c\",\"text\":\"x\"}]}",
		  ERR_BAD_NAME, "sources", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"sources\":[{\"name\":\"a.c\"}]}",
		  ERR_BAD_REQUEST, "sources", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"sources\":[{\"name\":\"a.c\",\"text\":\"x\","
		  "\"path\":\"/a.c\"}]}", ERR_BAD_REQUEST, "sources", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"sources\":[{\"name\":\"a.c\",\"text\":\"x\","
		  "\"sha256\":\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"}]}",
		  ERR_BAD_REQUEST, "sources", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"sources\":[{\"name\":\"a.c\",\"sha256\":5}]}",
		  ERR_BAD_REQUEST, "sources", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"sources\":[{\"name\":\"a.c\",\"sha256\":\"abc\"}]}",
		  ERR_BAD_REQUEST, "sources", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"sources\":[{\"name\":\"a.c\",\"sha256\":"
		  "\"0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef\"}]}",
		  ERR_BAD_REQUEST, "sources", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"sources\":[{\"name\":\"a.c\",\"sha256\":"
		  "\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeg\"}]}",
		  ERR_BAD_REQUEST, "sources", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"sources\":[{\"name\":\"a.c\",\"text\":5}]}",
		  ERR_BAD_REQUEST, "sources", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"sources\":[{\"name\":\"a.c\",\"path\":true}]}",
		  ERR_BAD_REQUEST, "sources", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"sources\":[{\"name\":\"a.c\",\"path\":\"a.c\"}]}",
		  ERR_BAD_REQUEST, "sources", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"sources\":[{\"name\":\"a.c\",\"text\":\"x\"},"
		  "{\"name\":\"a.c\",\"path\":\"/b.c\"}]}", ERR_BAD_NAME, "sources", 2);
	/* A file cannot hold another source; folders are fine. */
	parse_err("{\"op\":\"get\",\"id\":2,\"sources\":[{\"name\":\"a/b.c\",\"text\":\"x\"},"
		  "{\"name\":\"a\",\"text\":\"y\"}]}", ERR_BAD_NAME, "sources", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"sources\":[{\"name\":\"a/../b.c\",\"text\":\"x\"}]}",
		  ERR_BAD_NAME, "sources", 2);
	/* toolchain and output */
	parse_err("{\"op\":\"get\",\"id\":2,\"toolchain\":5," SRC "}", ERR_BAD_REQUEST,
		  "toolchain", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"toolchain\":\"../cc\"," SRC "}",
		  ERR_BAD_TOOLCHAIN, "toolchain", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"toolchain\":\"\"," SRC "}", ERR_BAD_TOOLCHAIN,
		  "toolchain", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"output\":\"object\"," SRC "}", ERR_BAD_REQUEST,
		  "output", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"output\":1," SRC "}", ERR_BAD_REQUEST,
		  "output", 2);
	/* args */
	parse_err("{\"op\":\"get\",\"id\":2,\"args\":\"-O2\"," SRC "}", ERR_BAD_REQUEST,
		  "args", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"args\":[\"-O2\",1]," SRC "}", ERR_BAD_REQUEST,
		  "args", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"args\":[\"-o\",\"x\"]," SRC "}", ERR_BAD_ARG,
		  "args", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"args\":[\"\"]," SRC "}", ERR_BAD_ARG, "args", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"args\":[\"-Xlinker\",\"-o\"]," SRC "}",
		  ERR_BAD_ARG, "args", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"args\":[\"-Wl,-o,/tmp/x\"]," SRC "}",
		  ERR_BAD_ARG, "args", 2);
	/* alias and label */
	parse_err("{\"op\":\"get\",\"id\":2,\"alias\":5," SRC "}", ERR_BAD_REQUEST, "alias", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"alias\":\"a b\"," SRC "}", ERR_BAD_NAME,
		  "alias", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"alias\":\"\"," SRC "}", ERR_BAD_NAME, "alias", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"label\":[]," SRC "}", ERR_BAD_REQUEST, "label", 2);
	parse_err("{\"op\":\"get\",\"id\":2,\"label\":\"a\\nb\"," SRC "}", ERR_BAD_NAME,
		  "label", 2);
}
END_TEST

START_TEST(test_parse_get_messages)
{
	struct msg_request req;
	struct msg_error err;
	const char *json = "{\"op\":\"get\",\"id\":2,\"sources\":[{\"name\":\"../x.c\","
			   "\"text\":\"x\"}]}";
	cJSON *reply;
	char *text;

	ck_assert_int_eq(msg_request_parse(json, strlen(json), &req, &err), -1);
	ck_assert_str_eq(err.message, "source name \"../x.c\" has \"..\" in it; folders must go "
			 "down, never up or nowhere");
	reply = msg_error_reply(req.id, &err);
	ck_assert_ptr_nonnull(reply);
	text = cJSON_PrintUnformatted(reply);
	ck_assert_str_eq(text, "{\"id\":2,\"ok\":false,\"error\":{\"code\":\"bad_name\","
			 "\"message\":\"source name \\\"../x.c\\\" has \\\"..\\\" in it; folders "
			 "must go down, never up or nowhere\",\"field\":\"sources\"}}");
	free(text);
	cJSON_Delete(reply);

	/* No field, no "field" member; the largest id is written exactly. */
	msg_error_set(&err, ERR_BUSY, NULL, "%d builds queued", 12);
	ck_assert_str_eq(err.message, "12 builds queued");
	ck_assert_str_eq(err.field, "");
	reply = msg_error_reply(9007199254740991ull, &err);
	text = cJSON_PrintUnformatted(reply);
	ck_assert_str_eq(text, "{\"id\":9007199254740991,\"ok\":false,\"error\":"
			 "{\"code\":\"busy\",\"message\":\"12 builds queued\"}}");
	free(text);
	cJSON_Delete(reply);

	/* Unknown ops are quoted without control characters. */
	json = "{\"op\":\"bad\\nop\",\"id\":4}";
	ck_assert_int_eq(msg_request_parse(json, strlen(json), &req, &err), -1);
	ck_assert_str_eq(err.message, "unknown operation \"bad?op\"");
}
END_TEST

/* Builds {"op":"get","id":1,"args":[n args],"sources":[m sources]}. */
static char *big_get(size_t nargs, size_t nsources, size_t arglen)
{
	size_t cap = 64 + nargs * (arglen + 8) + nsources * 64, i;
	char *s = malloc(cap), *p = s;

	ck_assert_ptr_nonnull(s);
	p += sprintf(p, "{\"op\":\"get\",\"id\":1,\"args\":[");
	for (i = 0; i < nargs; i++) {
		*p++ = i ? ',' : '"';
		if (i)
			*p++ = '"';
		*p++ = '-';
		*p++ = 'D';
		memset(p, 'X', arglen - 2);
		p += arglen - 2;
		*p++ = '"';
	}
	p += sprintf(p, "],\"sources\":[");
	for (i = 0; i < nsources; i++)
		p += sprintf(p, "%s{\"name\":\"s%zu.c\",\"text\":\"\"}", i ? "," : "", i);
	sprintf(p, "]}");
	return s;
}

START_TEST(test_parse_limits)
{
	struct msg_request req;
	char *json;

	json = big_get(MSG_MAX_ARGS, MSG_MAX_SOURCES, 8);
	parse_ok(json, &req);
	ck_assert_uint_eq(req.nargs, MSG_MAX_ARGS);
	ck_assert_uint_eq(req.nsources, MSG_MAX_SOURCES);
	ck_assert_str_eq(req.sources[255].name, "s255.c");
	msg_request_free(&req);
	free(json);

	json = big_get(MSG_MAX_ARGS + 1, 1, 8);
	parse_err(json, ERR_TOO_LARGE, "args", 1);
	free(json);
	json = big_get(1, MSG_MAX_SOURCES + 1, 8);
	parse_err(json, ERR_TOO_LARGE, "sources", 1);
	free(json);
	json = big_get(1, 1, MSG_MAX_ARG_LEN);
	parse_ok(json, &req);
	ck_assert_uint_eq(strlen(req.args[0]), MSG_MAX_ARG_LEN);
	msg_request_free(&req);
	free(json);
	json = big_get(1, 1, MSG_MAX_ARG_LEN + 1);
	parse_err(json, ERR_TOO_LARGE, "args", 1);
	free(json);
}
END_TEST

START_TEST(test_parse_lookup_errors)
{
	char json[256];

	parse_err("{\"op\":\"lookup\",\"id\":3}", ERR_BAD_REQUEST, "alias", 3);
	snprintf(json, sizeof(json), "{\"op\":\"lookup\",\"id\":3,\"alias\":\"a\",\"key\":\"%s\"}",
		 key64);
	parse_err(json, ERR_BAD_REQUEST, "key", 3);
	parse_err("{\"op\":\"lookup\",\"id\":3,\"key\":\"4f3a\"}", ERR_BAD_REQUEST, "key", 3);
	parse_err("{\"op\":\"lookup\",\"id\":3,\"key\":5}", ERR_BAD_REQUEST, "key", 3);
	parse_err("{\"op\":\"lookup\",\"id\":3,\"alias\":5}", ERR_BAD_REQUEST, "alias", 3);
	parse_err("{\"op\":\"lookup\",\"id\":3,\"alias\":\"\"}", ERR_BAD_NAME, "alias", 3);
	parse_err("{\"op\":\"lookup\",\"id\":3,\"alias\":\"x\\ty\"}", ERR_BAD_NAME, "alias", 3);
	/* claims: only an alias, a boolean, a wait in range and only with claim */
	snprintf(json, sizeof(json), "{\"op\":\"lookup\",\"id\":3,\"key\":\"%s\",\"claim\":true}",
		 key64);
	parse_err(json, ERR_BAD_REQUEST, "claim", 3);
	parse_err("{\"op\":\"lookup\",\"id\":3,\"alias\":\"a\",\"claim\":1}", ERR_BAD_REQUEST,
		  "claim", 3);
	parse_err("{\"op\":\"lookup\",\"id\":3,\"alias\":\"a\",\"claim\":true,\"wait_ms\":600001}",
		  ERR_BAD_REQUEST, "wait_ms", 3);
	parse_err("{\"op\":\"lookup\",\"id\":3,\"alias\":\"a\",\"claim\":true,\"wait_ms\":-5}",
		  ERR_BAD_REQUEST, "wait_ms", 3);
	parse_err("{\"op\":\"lookup\",\"id\":3,\"alias\":\"a\",\"wait_ms\":5}", ERR_BAD_REQUEST,
		  "wait_ms", 3);
	parse_err("{\"op\":\"release\",\"id\":3}", ERR_BAD_REQUEST, "alias", 3);
	parse_err("{\"op\":\"release\",\"id\":3,\"alias\":\"a b\"}", ERR_BAD_NAME, "alias", 3);
}
END_TEST

static void round_trip(const struct msg_request *req);

START_TEST(test_claim_round_trip)
{
	struct msg_request req = { .op = OP_LOOKUP, .id = 9, .alias = "gt4py:ab", .claim = true,
				   .wait_ms = 600000, .proto = -1, .max_size = -1 };
	round_trip(&req);
	struct msg_request rel = { .op = OP_RELEASE, .id = 10, .alias = "gt4py:ab", .proto = -1,
				   .max_size = -1 };
	round_trip(&rel);
}
END_TEST

START_TEST(test_parse_ref_and_gc_errors)
{
	static const char *const ops[] = { "show", "remove", "pin", "unpin" };
	char json[512], big[300];
	size_t i;

	memset(big, 'a', 257);
	big[257] = '\0';
	for (i = 0; i < 4; i++) {
		snprintf(json, sizeof(json), "{\"op\":\"%s\",\"id\":6}", ops[i]);
		parse_err(json, ERR_BAD_REQUEST, "ref", 6);
		snprintf(json, sizeof(json), "{\"op\":\"%s\",\"id\":6,\"ref\":5}", ops[i]);
		parse_err(json, ERR_BAD_REQUEST, "ref", 6);
		snprintf(json, sizeof(json), "{\"op\":\"%s\",\"id\":6,\"ref\":\"\"}", ops[i]);
		parse_err(json, ERR_BAD_REQUEST, "ref", 6);
		snprintf(json, sizeof(json), "{\"op\":\"%s\",\"id\":6,\"ref\":\"%s\"}", ops[i], big);
		parse_err(json, ERR_BAD_REQUEST, "ref", 6);
		/* A label may have spaces; no reference has a control character. */
		snprintf(json, sizeof(json), "{\"op\":\"%s\",\"id\":6,\"ref\":\"a\\tb\"}", ops[i]);
		parse_err(json, ERR_BAD_REQUEST, "ref", 6);
	}
	parse_err("{\"op\":\"gc\",\"id\":8,\"max_size\":-1}", ERR_BAD_REQUEST, "max_size", 8);
	parse_err("{\"op\":\"gc\",\"id\":8,\"max_size\":\"1G\"}", ERR_BAD_REQUEST, "max_size", 8);
	parse_err("{\"op\":\"gc\",\"id\":8,\"max_size\":1.5}", ERR_BAD_REQUEST, "max_size", 8);
	parse_err("{\"op\":\"gc\",\"id\":8,\"stale\":1}", ERR_BAD_REQUEST, "stale", 8);
	parse_err("{\"op\":\"gc\",\"id\":8,\"stale\":true,\"max_size\":5}", ERR_BAD_REQUEST,
		  "stale", 8);
}
END_TEST

static void assert_str_eq_null(const char *a, const char *b)
{
	if (!a || !b)
		ck_assert_ptr_eq(a, b);
	else
		ck_assert_str_eq(a, b);
}

static void assert_req_eq(const struct msg_request *a, const struct msg_request *b)
{
	size_t i;

	ck_assert_int_eq(a->op, b->op);
	ck_assert_uint_eq(a->id, b->id);
	ck_assert_int_eq(a->proto, b->proto);
	assert_str_eq_null(a->client, b->client);
	assert_str_eq_null(a->toolchain, b->toolchain);
	assert_str_eq_null(a->output, b->output);
	ck_assert_uint_eq(a->nargs, b->nargs);
	for (i = 0; i < a->nargs; i++)
		ck_assert_str_eq(a->args[i], b->args[i]);
	ck_assert_uint_eq(a->nsources, b->nsources);
	for (i = 0; i < a->nsources; i++) {
		ck_assert_str_eq(a->sources[i].name, b->sources[i].name);
		assert_str_eq_null(a->sources[i].path, b->sources[i].path);
		ck_assert_int_eq(a->sources[i].has_digest, b->sources[i].has_digest);
		if (a->sources[i].has_digest) {
			/* By digest, the text stays home. */
			ck_assert_mem_eq(a->sources[i].digest, b->sources[i].digest, 32);
			ck_assert_ptr_null(b->sources[i].text);
			continue;
		}
		ck_assert_uint_eq(!a->sources[i].text, !b->sources[i].text);
		if (a->sources[i].text) {
			ck_assert_uint_eq(a->sources[i].len, b->sources[i].len);
			ck_assert_mem_eq(a->sources[i].text, b->sources[i].text,
					 a->sources[i].len);
		}
	}
	assert_str_eq_null(a->alias, b->alias);
	assert_str_eq_null(a->alias_data, b->alias_data);
	assert_str_eq_null(a->label, b->label);
	assert_str_eq_null(a->key, b->key);
	assert_str_eq_null(a->ref, b->ref);
	ck_assert_int_eq(a->max_size, b->max_size);
	ck_assert_int_eq(a->claim, b->claim);
	ck_assert_uint_eq(a->wait_ms, b->wait_ms);
}

/* Packs req, checks the text is compact JSON, parses it back and compares. */
static void round_trip(const struct msg_request *req)
{
	struct msg_request back;
	struct msg_error err;
	size_t len = 0;
	char *s = msg_request_pack(req, &len);

	ck_assert_ptr_nonnull(s);
	ck_assert_uint_eq(len, strlen(s));
	ck_assert_ptr_null(strchr(s, '\n'));
	ck_assert_msg(msg_request_parse(s, len, &back, &err) == 0, "%s: %s", s, err.message);
	assert_req_eq(req, &back);
	msg_request_free(&back);
	free(s);
}

static struct msg_request blank(enum msg_op op, uint64_t id)
{
	struct msg_request r;

	memset(&r, 0, sizeof(r));
	r.op = op;
	r.id = id;
	r.proto = -1;
	r.max_size = -1;
	return r;
}

#define PUT_HEAD "{\"op\":\"put\",\"id\":9,\"sources\":[{\"name\":\"a.c\",\"sha256\":\"" \
	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"}]"
#define KEYF ",\"key\":\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\""
#define SHAF ",\"sha256\":\"fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210\""

START_TEST(test_parse_put)
{
	struct msg_request req, back;
	char *packed;
	size_t len;

	parse_ok(PUT_HEAD KEYF SHAF ",\"size\":123,\"build_ms\":45,\"label\":\"x\","
		 "\"log\":\"warning: y\",\"deps\":[{\"path\":\"/usr/include/stdio.h\","
		 "\"sha256\":\"00000000000000000000000000000000000000000000000000000000000000ff\"}]}",
		 &req);
	ck_assert_int_eq(req.op, OP_PUT);
	ck_assert_str_eq(req.key, key64);
	ck_assert_int_eq(req.art_size, 123);
	ck_assert_int_eq(req.build_ms, 45);
	ck_assert_int_eq(req.art_digest[0], 0xfe);
	ck_assert_int_eq(req.art_digest[31], 0x10);
	ck_assert_uint_eq(req.ndeps, 1);
	ck_assert_str_eq(req.deps[0].path, "/usr/include/stdio.h");
	ck_assert_int_eq(req.deps[0].digest[31], 0xff);
	ck_assert_str_eq(req.log, "warning: y");
	ck_assert_str_eq(req.toolchain, "cc");
	ck_assert(req.sources[0].has_digest);
	/* Packed and parsed again: the same request. */
	packed = msg_request_pack(&req, &len);
	ck_assert_ptr_nonnull(packed);
	parse_ok(packed, &back);
	ck_assert_int_eq(back.op, OP_PUT);
	ck_assert_str_eq(back.key, req.key);
	ck_assert_mem_eq(back.art_digest, req.art_digest, 32);
	ck_assert_int_eq(back.art_size, 123);
	ck_assert_uint_eq(back.ndeps, 1);
	ck_assert_mem_eq(back.deps[0].digest, req.deps[0].digest, 32);
	ck_assert_str_eq(back.log, "warning: y");
	free(packed);
	msg_request_free(&back);
	msg_request_free(&req);
	/* No deps is fine (a program that includes nothing absolute). */
	parse_ok(PUT_HEAD KEYF SHAF ",\"size\":0}", &req);
	ck_assert_uint_eq(req.ndeps, 0);
	msg_request_free(&req);
}
END_TEST

START_TEST(test_parse_put_errors)
{
	parse_err(PUT_HEAD SHAF ",\"size\":1}", ERR_BAD_REQUEST, "key", 9);
	parse_err(PUT_HEAD ",\"key\":\"ABC\"" SHAF ",\"size\":1}", ERR_BAD_REQUEST, "key", 9);
	parse_err(PUT_HEAD KEYF ",\"size\":1}", ERR_BAD_REQUEST, "sha256", 9);
	parse_err(PUT_HEAD KEYF ",\"sha256\":\"xyz\",\"size\":1}", ERR_BAD_REQUEST, "sha256", 9);
	parse_err(PUT_HEAD KEYF SHAF "}", ERR_BAD_REQUEST, "size", 9);
	parse_err(PUT_HEAD KEYF SHAF ",\"size\":-1}", ERR_BAD_REQUEST, "size", 9);
	parse_err(PUT_HEAD KEYF SHAF ",\"size\":1,\"deps\":{}}", ERR_BAD_REQUEST, "deps", 9);
	parse_err(PUT_HEAD KEYF SHAF ",\"size\":1,\"deps\":[\"/a\"]}", ERR_BAD_REQUEST, "deps", 9);
	parse_err(PUT_HEAD KEYF SHAF ",\"size\":1,\"deps\":[{\"path\":\"rel.h\",\"sha256\":"
		  "\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"}]}",
		  ERR_BAD_REQUEST, "deps", 9);
	parse_err(PUT_HEAD KEYF SHAF ",\"size\":1,\"deps\":[{\"path\":\"/a.h\",\"sha256\":\"no\"}]}",
		  ERR_BAD_REQUEST, "deps", 9);
	parse_err(PUT_HEAD KEYF SHAF ",\"size\":1,\"log\":5}", ERR_BAD_REQUEST, "log", 9);
	/* The program part follows get's rules. */
	parse_err("{\"op\":\"put\",\"id\":9" KEYF SHAF ",\"size\":1}", ERR_BAD_REQUEST,
		  "sources", 9);
}
END_TEST

/* Data stored with the alias: padded base64, beside an alias only, bounded;
 * packed and parsed back as sent. */
START_TEST(test_parse_alias_data)
{
	struct msg_request req;
	const char *head = "{\"op\":\"get\",\"id\":4,\"sources\":[{\"name\":\"a.c\",\"text\":\"x\"}]";
	char json[512];
	static const char *const good[] = { "QQ==", "QUI=", "QUJD", "a2lsbi9ndDRweQ==" };
	static const char *const bad[] = { "", "QQ", "QQ=", "Q===", "QQ==QUJD", "Q Q=", "QU\\nJ",
					   "QU=D", "=QUJ", "QUJ-", "QUJ_" };

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(json, sizeof(json), "%s,\"alias\":\"g:1\",\"alias_data\":\"%s\"}", head,
			 good[i]);
		parse_ok(json, &req);
		ck_assert_str_eq(req.alias_data, good[i]);
		round_trip(&req);
		msg_request_free(&req);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(json, sizeof(json), "%s,\"alias\":\"g:1\",\"alias_data\":\"%s\"}", head,
			 bad[i]);
		parse_err(json, ERR_BAD_REQUEST, "alias_data", 4);
	}
	snprintf(json, sizeof(json), "%s,\"alias_data\":\"QUJD\"}", head);
	parse_err(json, ERR_BAD_REQUEST, "alias_data", 4);       /* no alias to store it with */
	snprintf(json, sizeof(json), "%s,\"alias\":\"g:1\",\"alias_data\":7}", head);
	parse_err(json, ERR_BAD_REQUEST, "alias_data", 4);
	/* One byte past the bound. */
	size_t n = MSG_ALIAS_DATA_MAX + 4, len = strlen(head) + n + 64;
	char *big = malloc(len);
	ck_assert_ptr_nonnull(big);
	int at = snprintf(big, len, "%s,\"alias\":\"g:1\",\"alias_data\":\"", head);
	memset(big + at, 'A', n);
	snprintf(big + at + n, len - at - n, "\"}");
	parse_err(big, ERR_BAD_REQUEST, "alias_data", 4);
	/* At the bound: accepted. */
	snprintf(big + at + n - 4, len - at - n + 4, "\"}");
	parse_ok(big, &req);
	ck_assert_uint_eq(strlen(req.alias_data), MSG_ALIAS_DATA_MAX);
	msg_request_free(&req);
	free(big);
}
END_TEST

START_TEST(test_parse_get_probe)
{
	struct msg_request req;
	char *packed;

	parse_ok("{\"op\":\"get\",\"id\":1,\"sources\":[{\"name\":\"a.c\",\"text\":\"x\"}],"
		 "\"build\":false}", &req);
	ck_assert(req.no_build);
	packed = msg_request_pack(&req, NULL);
	ck_assert_ptr_nonnull(strstr(packed, "\"build\":false"));
	free(packed);
	msg_request_free(&req);
	parse_ok("{\"op\":\"get\",\"id\":1,\"sources\":[{\"name\":\"a.c\",\"text\":\"x\"}],"
		 "\"build\":true}", &req);
	ck_assert(!req.no_build);
	packed = msg_request_pack(&req, NULL);
	ck_assert_ptr_null(strstr(packed, "build"));
	free(packed);
	msg_request_free(&req);
	parse_err("{\"op\":\"get\",\"id\":1,\"sources\":[{\"name\":\"a.c\",\"text\":\"x\"}],"
		  "\"build\":0}", ERR_BAD_REQUEST, "build", 1);
}
END_TEST

START_TEST(test_round_trip)
{
	char *args[] = { "-O2", "-I/opt/dace/include", "-DN=\"quoted\\\"\"", "-Wl,-rpath,/x" };
	/* The text is not NUL-terminated at len: pack copies len bytes. */
	char text[] = "int f(void) { return '\\n' + \"\xc3\xa9\t\"[0]; }\nTRAILING";
	struct msg_source src[3] = {
		{ .name = "prog.cpp", .text = text, .len = sizeof(text) - 1 - 9 },
		{ .name = "util.cpp", .path = "/abs/util.cpp" },
		{ .name = "big.cpp", .text = text, .len = 3, .has_digest = true,
		  .digest = { 0x00, 0x01, 0xfe, 0xff, [31] = 0xa5 } },
	};
	struct msg_request r;

	r = blank(OP_HELLO, 1);
	r.proto = KILN_PROTO_VERSION;
	r.client = "libkiln/0.1.0";
	round_trip(&r);

	r = blank(OP_GET, 9007199254740991ull);
	r.toolchain = "c++";
	r.output = "shared";
	r.args = args;
	r.nargs = 4;
	r.sources = src;
	r.nsources = 3;
	r.alias = "gt4py:4f3a\"\\";
	r.label = "diffusion \xe2\x88\x87 step";
	round_trip(&r);

	r = blank(OP_LOOKUP, 3);
	r.alias = "gt4py:x";
	round_trip(&r);
	r = blank(OP_LOOKUP, 3);
	r.key = (char *)key64;
	round_trip(&r);

	r = blank(OP_SHOW, 6);
	r.ref = "4f3a";
	round_trip(&r);
	r.op = OP_REMOVE;
	round_trip(&r);
	r.op = OP_PIN;
	round_trip(&r);
	r.op = OP_UNPIN;
	round_trip(&r);

	r = blank(OP_GC, 8);
	r.max_size = 1073741824;
	round_trip(&r);
	r.max_size = -1;
	round_trip(&r);

	r = blank(OP_STATUS, 4);
	round_trip(&r);
	r = blank(OP_LIST, 5);
	round_trip(&r);
	r = blank(OP_SHUTDOWN, 0);
	round_trip(&r);
}
END_TEST

START_TEST(test_pack_fields)
{
	struct msg_request r = blank(OP_STATUS, 4);
	char *s;
	size_t len;

	/* Fields that do not belong to the op are left out. */
	r.alias = "ignored";
	r.max_size = 5;
	s = msg_request_pack(&r, &len);
	ck_assert_str_eq(s, "{\"op\":\"status\",\"id\":4}");
	free(s);

	r = blank(OP_GC, 8);
	s = msg_request_pack(&r, &len);
	ck_assert_str_eq(s, "{\"op\":\"gc\",\"id\":8}");
	free(s);

	r = blank(OP_UNKNOWN, 1);
	ck_assert_ptr_null(msg_request_pack(&r, &len));
}
END_TEST

/*
 * The packer writes JSON itself: its text must be what cJSON printed for
 * the same members (a reference built with cJSON here), with every byte
 * from 1 to 255 in a source, quotes, backslashes and controls in the
 * arguments, and a source cut at an embedded NUL as cJSON cut it.
 */
START_TEST(test_pack_like_cjson)
{
	char text[300];
	size_t n = 0;
	for (int c = 1; c < 256; c++)
		text[n++] = (char)c;
	memcpy(text + n, "tail\0after", 10);
	n += 10;
	char *args[] = { "-DQ=\"x\\y\"", "-Dtab=\t\x01\x7f", "-I/\xc3\xa9" };
	struct msg_source src = { .name = "a_b.c", .text = text, .len = n };
	struct msg_request req = blank(OP_GET, 9007199254740991ull);
	req.toolchain = "c++";
	req.args = args;
	req.nargs = 3;
	req.sources = &src;
	req.nsources = 1;
	req.alias = "x:\xe2\x82\xac";
	req.no_build = true;
	size_t len = 0;
	char *packed = msg_request_pack(&req, &len);
	ck_assert_ptr_nonnull(packed);
	ck_assert_uint_eq(len, strlen(packed));

	cJSON *ref = cJSON_CreateObject();
	cJSON_AddStringToObject(ref, "op", "get");
	cJSON_AddRawToObject(ref, "id", "9007199254740991");
	cJSON_AddFalseToObject(ref, "build");
	cJSON_AddStringToObject(ref, "toolchain", "c++");
	cJSON_AddItemToObject(ref, "args", cJSON_CreateStringArray((const char *const *)args, 3));
	cJSON *so = cJSON_CreateObject();
	cJSON_AddStringToObject(so, "name", "a_b.c");
	cJSON_AddStringToObject(so, "text", text);   /* cut at the NUL */
	cJSON_AddItemToArray(cJSON_AddArrayToObject(ref, "sources"), so);
	cJSON_AddStringToObject(ref, "alias", "x:\xe2\x82\xac");
	char *want = cJSON_PrintUnformatted(ref);
	cJSON_Delete(ref);
	ck_assert_str_eq(packed, want);
	free(want);

	/* kilnd reads it back byte for byte (an alias of printable ASCII). */
	free(packed);
	req.alias = "x:y";
	packed = msg_request_pack(&req, &len);
	struct msg_request back;
	struct msg_error err;
	ck_assert_msg(msg_request_parse(packed, len, &back, &err) == 0, "%s", err.message);
	ck_assert_uint_eq(back.sources[0].len, strlen(text));
	ck_assert_mem_eq(back.sources[0].text, text, strlen(text));
	ck_assert_str_eq(back.args[0], args[0]);
	ck_assert_str_eq(back.args[1], args[1]);
	ck_assert_str_eq(back.alias, req.alias);
	msg_request_free(&back);
	free(packed);
	/* A NULL argument is refused, as cJSON refused it. */
	args[1] = NULL;
	ck_assert_ptr_null(msg_request_pack(&req, &len));
}
END_TEST

static Suite *msg_suite(void)
{
	Suite *s = suite_create("msg");
	TCase *tp = tcase_create("parse");
	TCase *te = tcase_create("errors");
	TCase *tk = tcase_create("pack");

	tcase_add_test(tp, test_names);
	tcase_add_test(tp, test_every_row);
	tcase_add_test(tp, test_add_int_exact);
	tcase_add_test(tp, test_parse_hello);
	tcase_add_test(tp, test_parse_get);
	tcase_add_test(tp, test_parse_get_defaults);
	tcase_add_test(tp, test_parse_alias_data);
	tcase_add_test(tp, test_parse_get_digest);
	tcase_add_test(tp, test_parse_other_ops);
	tcase_add_test(tp, test_parse_id);
	tcase_add_test(tp, test_parse_limits);
	tcase_add_test(tp, test_parse_put);
	tcase_add_test(tp, test_parse_get_probe);
	suite_add_tcase(s, tp);

	tcase_add_test(te, test_parse_op);
	tcase_add_test(te, test_parse_not_object);
	tcase_add_test(te, test_parse_hello_errors);
	tcase_add_test(te, test_parse_get_errors);
	tcase_add_test(te, test_parse_get_messages);
	tcase_add_test(te, test_parse_lookup_errors);
	tcase_add_test(te, test_claim_round_trip);
	tcase_add_test(te, test_parse_ref_and_gc_errors);
	tcase_add_test(te, test_parse_put_errors);
	suite_add_tcase(s, te);

	tcase_add_test(tk, test_round_trip);
	tcase_add_test(tk, test_pack_fields);
	tcase_add_test(tk, test_pack_like_cjson);
	suite_add_tcase(s, tk);
	return s;
}

int main(void)
{
	return unit_run(msg_suite());
}
