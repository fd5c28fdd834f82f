/*
 * Unit tests for the compiler messages in the user's terms
 * (daemon/flight/diag.c): src/NAME becomes the user's name or path where a
 * message names it, and nowhere else.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "unit.h"

static void rewrites(const char *in, const char *want)
{
	static const char *const from[] = { "src/a.c", "src/src/cpu/p.cpp", "src/k.cu", "src/a.cc" };
	static const char *const to[] = { "/home/me/a.c", "src/cpu/p.cpp", "k.cu", "a.cc" };
	size_t len = 0;
	char *out = diag_user_paths(in, strlen(in), from, to, 4, &len);
	ck_assert_ptr_nonnull(out);
	ck_assert_str_eq(out, want);
	ck_assert_uint_eq(len, strlen(want));
	free(out);
}

START_TEST(mentions_are_rewritten)
{
	/* gcc's forms */
	rewrites("src/a.c: In function 'f':\nsrc/a.c:1:20: error: 'x' undeclared\n",
		 "/home/me/a.c: In function 'f':\n/home/me/a.c:1:20: error: 'x' undeclared\n");
	rewrites("In file included from src/a.c:1:\n", "In file included from /home/me/a.c:1:\n");
	/* a source in folders (DaCe's tree) */
	rewrites("src/src/cpu/p.cpp:9:51: warning: unused\n", "src/cpu/p.cpp:9:51: warning: unused\n");
	/* nvcc's */
	rewrites("src/k.cu(12): error: identifier \"y\" is undefined\n",
		 "k.cu(12): error: identifier \"y\" is undefined\n");
	/* the longest name wins: src/a.cc is not src/a.c followed by "c" */
	rewrites("src/a.cc:3:1: error\n", "a.cc:3:1: error\n");
	/* at the very end, with nothing after: no mention */
	rewrites("see src/a.c", "see src/a.c");
}
END_TEST

START_TEST(other_text_is_kept)
{
	/* inside a word or a longer path, or without ':' or '(' after */
	rewrites("mysrc/a.c:1: x\n", "mysrc/a.c:1: x\n");
	rewrites("/tmp/b/src/a.c:1: x\n", "/tmp/b/src/a.c:1: x\n");
	rewrites("src/a.c is fine\n", "src/a.c is fine\n");
	rewrites("", "");
	/* quoted and parenthesised mentions */
	rewrites("'src/a.c:2'", "'/home/me/a.c:2'");
	rewrites("(src/k.cu(3))", "(k.cu(3))");
}
END_TEST

START_TEST(growth_is_bounded)
{
	/* 500 mentions, each growing by 38 bytes: the output holds them all */
	static const char *const from[] = { "src/x" };
	static const char *const to[] = { "/a/much/longer/path/to/the/users/own/file/x" };
	static char in[4096], want[32768];
	in[0] = want[0] = '\0';
	for (int i = 0; i < 500; i++) {
		strcat(in, "src/x:\n");
		strcat(want, to[0]);
		strcat(want, ":\n");
	}
	size_t len = 0;
	char *out = diag_user_paths(in, strlen(in), from, to, 1, &len);
	ck_assert_ptr_nonnull(out);
	ck_assert_str_eq(out, want);
	ck_assert_uint_eq(len, strlen(want));
	free(out);
}
END_TEST

static Suite *diag_suite(void)
{
	Suite *s = suite_create("diag");
	TCase *t = tcase_create("diag");
	tcase_add_test(t, mentions_are_rewritten);
	tcase_add_test(t, other_text_is_kept);
	tcase_add_test(t, growth_is_bounded);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return unit_run(diag_suite());
}
