/*
 * Unit tests of the artifact reply (proto/msg_artifact.c): the printer and
 * the parser round-trip every member, escapes what JSON must, never writes
 * past the buffer and says how much it needs; the parser refuses malformed
 * replies; and the members are those of docs/protocol.md's example reply
 * (KILN_SOURCE_ROOT), so that the code and the protocol's description
 * cannot drift apart.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg_artifact.h"
#include "unit.h"

#define KEY "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define RKEY "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

static const struct msg_artifact full = {
	.id = 42, .fd = true, .key = KEY, .rkey = RKEY, .path = "/c/objects/01/x \"q\".so",
	.output = "cubin", .size = 16384, .cached = false, .joined = true, .build_ms = 812,
	.uncacheable = "read /proc/cpuinfo",
	.log = "warning: \"x\" unused\n\tat \\line 3\x01\x1f end",
};

START_TEST(test_round_trip)
{
	char buf[1024];
	size_t len = msg_artifact_print(&full, buf, sizeof(buf));
	ck_assert_uint_lt(len, sizeof(buf));
	ck_assert_uint_eq(strlen(buf), len);
	cJSON *j = cJSON_Parse(buf);
	ck_assert_msg(j != NULL, "not JSON: %s", buf);
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "ok")));
	struct msg_artifact a;
	const char *why = NULL;
	ck_assert_msg(msg_artifact_parse(j, &a, &why) == 0, "%s", why);
	ck_assert_uint_eq(a.id, 42);
	ck_assert(a.fd && !a.cached && a.joined);
	ck_assert_str_eq(a.key, KEY);
	ck_assert_str_eq(a.rkey, RKEY);
	ck_assert_str_eq(a.path, full.path);
	ck_assert_str_eq(a.output, "cubin");
	ck_assert_uint_eq(a.size, 16384);
	ck_assert_uint_eq(a.build_ms, 812);
	ck_assert_str_eq(a.uncacheable, full.uncacheable);
	ck_assert_str_eq(a.log, full.log);
	cJSON_Delete(j);

	/* The hit's form: no rkey-less gap, no optional members. */
	struct msg_artifact hit = { .id = 7, .fd = true, .key = KEY, .rkey = RKEY, .path = "/p.so",
				    .output = "shared", .cached = true };
	len = msg_artifact_print(&hit, buf, sizeof(buf));
	j = cJSON_Parse(buf);
	ck_assert_ptr_nonnull(j);
	ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(j, "log"));
	ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(j, "uncacheable"));
	ck_assert_int_eq(msg_artifact_parse(j, &a, &why), 0);
	ck_assert(a.cached && a.log == NULL && a.uncacheable == NULL);
	ck_assert(a.file.dev == 0 && a.file.ino == 0);
	ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(j, "ino"));
	cJSON_Delete(j);

	/* A hit says its descriptor's file; JSON's exact integers carry it. */
	hit.file = (struct msg_file_id){ .dev = 66306, .ino = (1ULL << 53) - 1 };
	msg_artifact_print(&hit, buf, sizeof(buf));
	j = cJSON_Parse(buf);
	ck_assert_ptr_nonnull(j);
	ck_assert_int_eq(msg_artifact_parse(j, &a, &why), 0);
	ck_assert_uint_eq(a.file.dev, 66306);
	ck_assert_uint_eq(a.file.ino, (1ULL << 53) - 1);
	cJSON_Delete(j);
	/* Past what JSON carries exactly: left unsaid (the client fstats). */
	hit.file = (struct msg_file_id){ .dev = 1ULL << 53, .ino = 5 };
	msg_artifact_print(&hit, buf, sizeof(buf));
	j = cJSON_Parse(buf);
	ck_assert_ptr_nonnull(j);
	ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(j, "dev"));
	ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(j, "ino"));
	cJSON_Delete(j);
}
END_TEST

/* Too small a buffer: nothing past its end, NUL-terminated, and the length
 * needed, which then fits exactly. */
START_TEST(test_sizes)
{
	char ref[1024];
	size_t need = msg_artifact_print(&full, ref, sizeof(ref));
	ck_assert_uint_eq(msg_artifact_print(&full, NULL, 0), need);
	for (size_t cap = 1; cap <= need + 1; cap += cap < 40 ? 1 : 37) {
		char *buf = malloc(cap + 8);
		memset(buf, 'Z', cap + 8);
		ck_assert_uint_eq(msg_artifact_print(&full, buf, cap), need);
		ck_assert_int_eq(buf[cap - 1], '\0');
		for (size_t i = cap; i < cap + 8; i++)
			ck_assert_int_eq(buf[i], 'Z');
		free(buf);
	}
	char *exact = malloc(need + 1);
	ck_assert_uint_eq(msg_artifact_print(&full, exact, need + 1), need);
	ck_assert_str_eq(exact, ref);
	free(exact);
}
END_TEST

START_TEST(test_refused)
{
	static const char *const bad[] = {
		"{\"ok\":true,\"path\":\"/p.so\"}",                               /* no key */
		"{\"ok\":true,\"key\":\"abc\",\"path\":\"/p.so\"}",                 /* short key */
		"{\"ok\":true,\"key\":\"" KEY "\"}",                               /* no path */
		"{\"ok\":true,\"key\":\"" KEY "\",\"path\":\"p.so\"}",              /* relative */
		"{\"ok\":true,\"key\":\"" KEY "\",\"rkey\":\"xyz\",\"path\":\"/p\"}", /* bad rkey */
		"{\"ok\":true,\"key\":\"" KEY "\",\"path\":\"/p\",\"size\":\"9\"}", /* a string */
		"{\"ok\":true,\"key\":\"" KEY "\",\"path\":\"/p\",\"cached\":1}",   /* not a bool */
		"{\"ok\":true,\"key\":\"" KEY "\",\"path\":\"/p\",\"log\":[]}",     /* not a string */
		"{\"ok\":true,\"key\":\"" KEY "\",\"path\":\"/p\",\"build_ms\":-1}",
		"{\"ok\":true,\"key\":\"" KEY "\",\"path\":\"/p\",\"size\":1e30}",  /* no count */
		"{\"id\":1e300,\"ok\":true,\"key\":\"" KEY "\",\"path\":\"/p\"}",
		"{\"ok\":true,\"key\":\"" KEY "\",\"path\":\"/p\",\"ino\":5}",  /* no dev */
		"{\"ok\":true,\"key\":\"" KEY "\",\"path\":\"/p\",\"dev\":5}",  /* no ino */
		"{\"ok\":true,\"key\":\"" KEY "\",\"path\":\"/p\",\"dev\":1,\"ino\":\"5\"}",
		"{\"ok\":true,\"key\":\"" KEY "\",\"path\":\"/p\",\"dev\":-1,\"ino\":5}",
		"{\"ok\":true,\"key\":\"" KEY "\",\"path\":\"/p\",\"dev\":1,\"ino\":5.5}",
		"{\"ok\":true,\"key\":\"" KEY "\",\"path\":\"/p\",\"dev\":1,\"ino\":9007199254740993}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cJSON *j = cJSON_Parse(bad[i]);
		struct msg_artifact a;
		const char *why = NULL;
		ck_assert_ptr_nonnull(j);
		ck_assert_msg(msg_artifact_parse(j, &a, &why) == -1, "accepted %s", bad[i]);
		ck_assert_ptr_nonnull(why);
		cJSON_Delete(j);
	}
}
END_TEST

static bool member_known(const char *name)
{
	for (size_t i = 0; msg_artifact_members[i] != NULL; i++)
		if (strcmp(msg_artifact_members[i], name) == 0)
			return true;
	return false;
}

/* docs/protocol.md's get reply: every member it shows is one the printer
 * writes, and every member the printer always writes is in it; the optional
 * ones are described in its text. */
START_TEST(test_members_match_the_protocol_doc)
{
	const char *root = getenv("KILN_SOURCE_ROOT");
	char path[4096];
	ck_assert_msg(root != NULL, "KILN_SOURCE_ROOT is not set (meson test sets it)");
	snprintf(path, sizeof(path), "%s/docs/protocol.md", root);
	FILE *f = fopen(path, "r");
	ck_assert_msg(f != NULL, "cannot read %s", path);
	static char doc[1 << 20];
	size_t n = fread(doc, 1, sizeof(doc) - 1, f);
	fclose(f);
	doc[n] = '\0';
	const char *mark = strstr(doc, "Reply on success, with the artifact's descriptor attached:");
	ck_assert_msg(mark != NULL, "protocol.md has no get reply example");
	const char *open = strstr(mark, "```json\n");
	ck_assert_ptr_nonnull(open);
	open += 8;
	const char *close = strstr(open, "```");
	ck_assert_ptr_nonnull(close);
	char *example = strndup(open, (size_t)(close - open));
	cJSON *j = cJSON_Parse(example);
	ck_assert_msg(j != NULL, "the example is not JSON: %s", example);
	const cJSON *m;
	cJSON_ArrayForEach(m, j)
		ck_assert_msg(member_known(m->string), "protocol.md shows \"%s\", which kilnd never "
			      "sends", m->string);
	static const char *const always[] = { "id", "ok", "fd", "key", "rkey", "path", "output",
					      "size", "cached", "joined", "build_ms" };
	for (size_t i = 0; i < sizeof(always) / sizeof(always[0]); i++)
		ck_assert_msg(cJSON_GetObjectItemCaseSensitive(j, always[i]) != NULL,
			      "protocol.md's get reply lacks \"%s\"", always[i]);
	const char *text = close;
	ck_assert_msg(strstr(text, "`log`") != NULL && strstr(text, "`uncacheable`") != NULL &&
		      strstr(text, "`dev`") != NULL && strstr(text, "`ino`") != NULL,
		      "protocol.md does not describe the optional log, uncacheable, dev and ino");
	/* And what the printer writes is what the example shows, in its order. */
	char buf[1024];
	struct msg_artifact a = full;
	a.log = a.uncacheable = NULL;
	msg_artifact_print(&a, buf, sizeof(buf));
	cJSON *p = cJSON_Parse(buf);
	const cJSON *x = j->child, *y = p->child;
	for (; x != NULL && y != NULL; x = x->next, y = y->next)
		ck_assert_str_eq(x->string, y->string);
	ck_assert_msg(x == NULL && y == NULL, "the example and the printer differ in length");
	cJSON_Delete(p);
	cJSON_Delete(j);
	free(example);
}
END_TEST

static Suite *msg_artifact_suite(void)
{
	Suite *s = suite_create("msg_artifact");
	TCase *tc = tcase_create("msg_artifact");

	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_sizes);
	tcase_add_test(tc, test_refused);
	tcase_add_test(tc, test_members_match_the_protocol_doc);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(msg_artifact_suite());
}
