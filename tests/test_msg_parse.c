/*
 * Unit tests of kilnd's parse of requests (proto/msg_parse.c with a
 * struct msg_args_memo): an argument list's verdict kept from request to
 * request, and strings taken out of cJSON's tree. The parse itself, its
 * errors and the packer are tests/test_msg.c's.
 */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include "unit.h"

/* Parses a get whose "args" is args_json, keeping the verdict in memo. */
static int parse_memo(const char *args_json, struct msg_args_memo *memo, struct msg_request *req)
{
	struct msg_error err;
	size_t cap = strlen(args_json) + 256;
	char *json = malloc(cap);
	ck_assert_ptr_nonnull(json);
	snprintf(json, cap, "{\"op\":\"get\",\"id\":3,\"args\":%s,"
		 "\"sources\":[{\"name\":\"a.c\",\"text\":\"x\"}]}", args_json);
	int rc = msg_request_parse_memo(json, strlen(json), req, &err, memo);
	ck_assert_msg(rc == 0 || err.code == ERR_BAD_ARG, "%.80s: %s", json, err.message);
	free(json);
	return rc;
}

/* A list equal to the kept one takes its verdict; any other is checked, so
 * the memo never lets a refused list through. */
START_TEST(test_args_memo)
{
	struct msg_args_memo *memo = calloc(1, sizeof(*memo));
	struct msg_request req;

	ck_assert_int_eq(parse_memo("[\"-DA-o\",\"-g\"]", memo, &req), 0);
	ck_assert_uint_eq(req.code_arg, 0);
	msg_request_free(&req);
	ck_assert_uint_eq(memo->len, 9);
	ck_assert_int_eq(parse_memo("[\"-DA-o\",\"-g\"]", memo, &req), 0);
	msg_request_free(&req);
	/* The same bytes split otherwise: "-o-g" writes the output. */
	ck_assert_int_eq(parse_memo("[\"-DA\",\"-o-g\"]", memo, &req), -1);
	ck_assert_int_eq(parse_memo("[\"-DA-o\",\"-g\"]", memo, &req), 0);
	msg_request_free(&req);
	/* Longer, shorter, one byte changed. */
	ck_assert_int_eq(parse_memo("[\"-DA-o\",\"-g\",\"-o\",\"x\"]", memo, &req), -1);
	ck_assert_int_eq(parse_memo("[\"-DA-o\"]", memo, &req), 0);
	msg_request_free(&req);
	ck_assert_int_eq(parse_memo("[\"-DA-o\",\"-g\"]", memo, &req), 0);
	msg_request_free(&req);
	ck_assert_int_eq(parse_memo("[\"-DA-o\",\"-o\"]", memo, &req), -1);
	ck_assert_int_eq(parse_memo("[\"-DA-o\",\"\"]", memo, &req), -1);
	/* A list that loads code keeps where (code_arg) through the memo. */
	ck_assert_int_eq(parse_memo("[\"-O2\",\"-fplugin=/p.so\"]", memo, &req), 0);
	ck_assert_uint_eq(req.code_arg, 2);
	msg_request_free(&req);
	ck_assert_int_eq(parse_memo("[\"-O2\",\"-fplugin=/p.so\"]", memo, &req), 0);
	ck_assert_uint_eq(req.code_arg, 2);
	msg_request_free(&req);
	ck_assert_int_eq(parse_memo("[\"-O2\",\"-DX\"]", memo, &req), 0);
	ck_assert_uint_eq(req.code_arg, 0);
	msg_request_free(&req);
	/* A refused list is not kept: refused again. */
	ck_assert_int_eq(parse_memo("[\"-DA\",\"-o-g\"]", memo, &req), -1);
	ck_assert_int_eq(parse_memo("[\"-DA\",\"-o-g\"]", memo, &req), -1);
	/* The memo is what decides for an equal list: a forged verdict shows. */
	ck_assert_int_eq(parse_memo("[\"-O2\",\"-DX\"]", memo, &req), 0);
	msg_request_free(&req);
	ck_assert_uint_eq(memo->nargs, 2);
	memo->code_arg = 2;
	ck_assert_int_eq(parse_memo("[\"-O2\",\"-DX\"]", memo, &req), 0);
	ck_assert_uint_eq(req.code_arg, 2);
	msg_request_free(&req);
	ck_assert_int_eq(parse_memo("[\"-O2\",\"-DY\"]", memo, &req), 0);
	ck_assert_uint_eq(req.code_arg, 0);
	msg_request_free(&req);
	/* A list of exactly MSG_ARGS_MEMO_MAX bytes (NULs included) is kept, one
	 * byte more is not. */
	for (size_t extra = 0; extra < 2; extra++) {
		size_t a = MSG_ARGS_MEMO_MAX / 2 - 1, b = MSG_ARGS_MEMO_MAX - (a + 1) - 1 + extra;
		char *l = malloc(a + b + 64), *q = l;
		q += sprintf(q, "[\"-DA=");
		memset(q, 'x', a - 4), q += a - 4;
		q += sprintf(q, "\",\"-DB=");
		memset(q, 'y', b - 4), q += b - 4;
		sprintf(q, "\"]");
		ck_assert_int_eq(parse_memo(l, memo, &req), 0);
		msg_request_free(&req);
		ck_assert_uint_eq(memo->len, extra ? 0 : MSG_ARGS_MEMO_MAX);
		free(l);
	}
	/* A list longer than the memo is checked and not kept. */
	size_t n = MSG_ARGS_MEMO_MAX * 3 / 4;
	char *big = malloc(2 * n + 64), *p = big;
	p += sprintf(p, "[\"-DA=");
	memset(p, 'x', n), p += n;
	p += sprintf(p, "\",\"-DB=");
	memset(p, 'y', n), p += n;
	p += sprintf(p, "\",\"-g\"]");
	ck_assert_int_eq(parse_memo(big, memo, &req), 0);
	msg_request_free(&req);
	ck_assert_uint_eq(memo->len, 0);
	ck_assert_int_eq(parse_memo(big, memo, &req), 0);
	msg_request_free(&req);
	memcpy(strstr(big, "-g"), "-o", 2);
	ck_assert_int_eq(parse_memo(big, memo, &req), -1);
	free(big);
	free(memo);
}
END_TEST

/* The strings a parse with a memo takes out of the tree are the request's:
 * every kind of string member, freed with the request (ASan watches). */
START_TEST(test_taken_strings)
{
	struct msg_args_memo *memo = calloc(1, sizeof(*memo));
	static const char json[] =
		"{\"op\":\"get\",\"id\":4,\"toolchain\":\"c++\",\"output\":\"shared\","
		"\"args\":[\"-O2\",\"-DX=1\"],\"pch\":[\"dace/dace.h\"],\"alias\":\"a:1\","
		"\"label\":\"lbl\",\"sources\":[{\"name\":\"a.cpp\",\"text\":\"int x;\"},"
		"{\"name\":\"b.cpp\",\"path\":\"/tmp/b.cpp\"}]}";
	struct msg_request req, again;
	struct msg_error err;

	ck_assert_int_eq(msg_request_parse_memo(json, strlen(json), &req, &err, memo), 0);
	ck_assert_int_eq(msg_request_parse(json, strlen(json), &again, &err), 0);
	ck_assert_str_eq(req.toolchain, "c++");
	ck_assert_str_eq(req.output, "shared");
	ck_assert_str_eq(req.args[1], "-DX=1");
	ck_assert_str_eq(req.pch[0], "dace/dace.h");
	ck_assert_str_eq(req.alias, "a:1");
	ck_assert_str_eq(req.label, "lbl");
	ck_assert_str_eq(req.sources[0].name, "a.cpp");
	ck_assert_str_eq(req.sources[0].text, "int x;");
	ck_assert_uint_eq(req.sources[0].len, 6);
	ck_assert_str_eq(req.sources[1].path, "/tmp/b.cpp");
	ck_assert_str_eq(again.sources[1].path, req.sources[1].path);
	ck_assert_str_eq(again.args[0], req.args[0]);
	msg_request_free(&again);
	msg_request_free(&req);
	free(memo);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("msg_parse");
	TCase *t = tcase_create("memo");

	tcase_add_test(t, test_args_memo);
	tcase_add_test(t, test_taken_strings);
	suite_add_tcase(s, t);
	return unit_run(s);
}
