/*
 * Integration tests of precompiled headers managed by kilnd (docs/pch.md): a
 * request naming headers in "pch" gets them precompiled once (an entry of
 * output "pch", built beside the first program, not waited for), later
 * builds with the same toolchain and arguments use that .gch, a header
 * inside it that changes is a new .gch and a new build (never a stale hit),
 * a missing header is the compiler's error, a backlog of builds puts the
 * .gch first, and bad names are refused.
 */
#include "observe_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* inc/outer.h includes inc/inner.h, which defines H_VALUE and says (with a
 * #pragma message) when the compiler parses it: a build that used the .gch
 * never parses it, so its log lacks the line. */
static void write_headers(int value)
{
	char path[HARNESS_PATH], *text = header_text(value, 0), *all = NULL;
	if (!harness_exists(harness_path(path, "inc")))
		make_dir(path, "inc");
	ck_assert(asprintf(&all, "#pragma message \"parsing inner.h\"\n%s", text) > 0);
	harness_write_file(harness_path(path, "inc/inner.h"), all);
	harness_write_file(harness_path(path, "inc/outer.h"),
			   "#ifndef OUTER_H\n#define OUTER_H\n#include \"inner.h\"\n#endif\n");
	free(all);
	free(text);
}

struct pch_req {
	struct kiln_request req;
	struct kiln_source src;
	char text[256];
	char inc[HARNESS_PATH + 8];
	const char *args[2];
	const char *pch[1];
};

/* A program returning H_VALUE + add, in C or C++, with "outer.h" in pch. */
static void pch_request(struct pch_req *r, int add, bool cxx, const char *pch)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->text, sizeof(r->text), "#include <outer.h>\n%sint kiln_test_value(void) "
		 "{ return H_VALUE + %d; }\n", cxx ? "extern \"C\" " : "", add);
	snprintf(r->inc, sizeof(r->inc), "-I%s/inc", harness.dir);
	r->args[0] = r->inc;
	r->args[1] = "-O1";
	r->pch[0] = pch;
	r->src = (struct kiln_source){ .name = cxx ? "prog.cpp" : "prog.c", .text = r->text };
	r->req = (struct kiln_request){ .toolchain = cxx ? "c++" : "cc", .args = r->args,
					.nargs = 2, .sources = &r->src, .nsources = 1,
					.pch = r->pch, .npch = 1 };
}

/* The entries of output "pch" in the cache. */
static int pch_entries(void)
{
	cJSON *ls = harness_cli_json("ls", NULL);
	const cJSON *e, *arr = cJSON_IsArray(ls) ? ls : cJSON_GetObjectItem(ls, "entries");
	int n = 0;
	cJSON_ArrayForEach(e, arr)
		n += strcmp(harness_str(e, "output"), "pch") == 0;
	cJSON_Delete(ls);
	return n;
}

/* The uses kiln ls gives the (one) .gch entry. */
static int64_t pch_uses(void)
{
	cJSON *ls = harness_cli_json("ls", NULL);
	const cJSON *e, *arr = cJSON_IsArray(ls) ? ls : cJSON_GetObjectItem(ls, "entries");
	int64_t uses = -1;
	cJSON_ArrayForEach(e, arr)
		if (strcmp(harness_str(e, "output"), "pch") == 0)
			uses = harness_num(e, "uses");
	cJSON_Delete(ls);
	return uses;
}

/* Whether the build log of key says the compiler parsed inner.h. */
static bool parsed_inner(const char *key)
{
	char *out = NULL, *err = NULL;
	ck_assert_int_eq(harness_cli(&out, &err, "log", key, NULL), 0);
	bool parsed = strstr(out, "parsing inner.h") != NULL;
	free(out);
	free(err);
	return parsed;
}

/* Whether entry key records path among its dependencies. */
static bool has_dep(const char *key, const char *path)
{
	cJSON *e = harness_cli_json("show", key, NULL);
	const cJSON *d, *deps = cJSON_GetObjectItem(e, "deps");
	bool found = false;
	cJSON_ArrayForEach(d, deps)
		found = found || (cJSON_IsString(d) && strcmp(d->valuestring, path) == 0);
	cJSON_Delete(e);
	return found;
}

static struct harness_result get(const struct pch_req *r, int value, const char *what)
{
	struct harness_result res = harness_in_child(&r->req, NULL);
	check_result(&res, value, what);
	return res;
}

/* Waits until the cache holds n .gch entries (they build in the
 * background: nobody waits for them). */
static void wait_pch_entries(int n)
{
	double end = harness_now_s() + 90;
	while (pch_entries() < n && harness_now_s() < end)
		harness_sleep_ms(50);
	ck_assert_int_eq(pch_entries(), n);
}

/* The first program does not wait for the .gch (it parses the header);
 * the .gch builds beside it, once, and the next program uses it; the
 * program's dependencies name the header inside it; a hit stays a hit. */
START_TEST(built_once_used_by_all)
{
	struct pch_req a, b;
	char inner[HARNESS_PATH];
	write_headers(1);
	harness_start(NULL);
	pch_request(&a, 0, false, "outer.h");
	pch_request(&b, 10, false, "outer.h");

	struct harness_result ra = get(&a, 1, "the first program");
	ck_assert_msg(parsed_inner(ra.key), "the first program waited for the .gch");
	wait_pch_entries(1);
	ck_assert_int_eq(builds_started(), 2);
	struct harness_result rb = get(&b, 11, "a second program with the same arguments");
	ck_assert_int_eq(builds_started(), 3);
	ck_assert_int_eq(pch_entries(), 1);
	ck_assert_msg(!parsed_inner(rb.key), "the build parsed inner.h: the .gch was not used");
	/* That build is a use of the .gch (kiln ls's USES, eviction). */
	ck_assert_int_eq(pch_uses(), 1);
	ck_assert_msg(has_dep(rb.key, harness_path(inner, "inc/inner.h")),
		      "the program does not record inner.h, which reached it through the .gch");
	get(&a, 1, "the first program again");
	get(&b, 11, "the second program again");
	ck_assert_int_eq(builds_started(), 3);
	harness_stop();
}
END_TEST

/* A header inside the .gch changes: a new .gch, new builds, the new value;
 * the old entries are never served for it. */
START_TEST(changed_header_inside)
{
	struct pch_req a, b;
	write_headers(1);
	harness_start(NULL);
	pch_request(&a, 0, true, "outer.h");
	pch_request(&b, 10, true, "outer.h");
	get(&a, 1, "C++, before the change");
	wait_pch_entries(1);
	struct harness_result rb = get(&b, 11, "C++, with the .gch");
	ck_assert(!parsed_inner(rb.key));

	write_headers(2);
	get(&a, 2, "after inner.h changed");
	wait_pch_entries(2);
	rb = get(&b, 12, "another program after the change");
	ck_assert_msg(!parsed_inner(rb.key), "the new .gch was not used");
	ck_assert_int_eq(builds_started(), 6);
	get(&a, 2, "after inner.h changed, again");
	get(&b, 12, "the other, again");
	ck_assert_int_eq(builds_started(), 6);
	harness_stop();
}
END_TEST

/* The headers are part of the program: one that does not exist is a
 * compiler error naming it, as without a .gch. */
START_TEST(missing_header_is_a_build_error)
{
	struct pch_req a;
	struct kiln_program *p = NULL;
	struct kiln *k = NULL;
	write_headers(3);
	harness_start(NULL);
	pch_request(&a, 0, false, "no_such_header.h");
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	ck_assert_int_eq(kiln_get(k, &a.req, &p), KILN_EBUILD);
	ck_assert_msg(strstr(kiln_errmsg(k), "no_such_header.h") != NULL, "%s", kiln_errmsg(k));
	kiln_close(k);
	harness_stop();
}
END_TEST

/* With builds queued up (one slot, six programs at once), the .gch goes to
 * the head of the queue, once, and the programs that start after it use it. */
START_TEST(backlog_puts_it_first)
{
	struct pch_req r[6];
	struct kiln_request reqs[6];
	struct kiln_program *out[6];
	struct kiln *k = NULL;
	write_headers(4);
	harness_start("--jobs", "1", NULL);
	for (int i = 0; i < 6; i++) {
		pch_request(&r[i], 100 * i, true, "outer.h");
		reqs[i] = r[i].req;  /* points into r[i], which stays */
	}
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	ck_assert_msg(kiln_get_many(k, reqs, 6, out, NULL) == KILN_OK, "%s", kiln_errmsg(k));
	for (int i = 0; i < 6; i++) {
		int (*f)(void);
		*(void **)&f = kiln_sym(out[i], "kiln_test_value");
		ck_assert_ptr_nonnull(f);
		ck_assert_int_eq(f(), 4 + 100 * i);
	}
	ck_assert_msg(!parsed_inner(kiln_program_key(out[5])),
		      "the last of six queued programs did not use the .gch");
	kiln_close(k);
	ck_assert_int_eq(pch_entries(), 1);
	ck_assert_int_eq(builds_started(), 7);
	harness_stop();
}
END_TEST

/* Names that are not relative header names are refused by libkiln, and by
 * kilnd when a client sends them anyway. */
START_TEST(bad_names_refused)
{
	static const char *const bad[] = { "../outer.h", "/usr/include/stdio.h", "a//b.h", "" };
	struct pch_req a;
	struct kiln_program *p = NULL;
	struct kiln *k = NULL;
	harness_start(NULL);
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		pch_request(&a, 0, false, bad[i]);
		ck_assert_int_eq(kiln_get(k, &a.req, &p), KILN_EINVAL);
	}
	kiln_close(k);

	static const char *const frames[] = {
		"{\"op\":\"get\",\"id\":1,\"sources\":[{\"name\":\"a.c\",\"text\":\"int x;\"}],"
		"\"pch\":[\"../x.h\"]}",
		"{\"op\":\"get\",\"id\":2,\"sources\":[{\"name\":\"a.c\",\"text\":\"int x;\"}],"
		"\"pch\":\"x.h\"}",
		"{\"op\":\"get\",\"id\":3,\"sources\":[{\"name\":\"a.c\",\"text\":\"int x;\"}],"
		"\"pch\":[7]}",
	};
	static const char *const codes[] = { "bad_name", "bad_request", "bad_request" };
	int fd = harness_raw_connect(harness.socket);
	harness_raw_send(fd, "{\"op\":\"hello\",\"id\":1,\"proto\":3,\"client\":\"kiln-tests\"}");
	cJSON_Delete(harness_raw_recv(fd));
	for (size_t i = 0; i < sizeof(frames) / sizeof(frames[0]); i++) {
		harness_raw_send(fd, frames[i]);
		cJSON *reply = harness_raw_recv(fd);
		ck_assert_str_eq(harness_error_code(reply), codes[i]);
		cJSON_Delete(reply);
	}
	close(fd);
	harness_stop();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pch");

	suite_add_tcase(s, harness_tcase("built_once", built_once_used_by_all, 120));
	suite_add_tcase(s, harness_tcase("changed_inside", changed_header_inside, 120));
	suite_add_tcase(s, harness_tcase("missing", missing_header_is_a_build_error, 120));
	suite_add_tcase(s, harness_tcase("backlog", backlog_puts_it_first, 120));
	suite_add_tcase(s, harness_tcase("bad_names", bad_names_refused, 60));
	return harness_main(s);
}
