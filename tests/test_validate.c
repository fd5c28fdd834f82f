/*
 * Unit tests of the rules for client-supplied names (proto/validate.c),
 * with the hostile values a client might send; compiler arguments are
 * test_args.c's.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "validate.h"
#include "unit.h"

static char *repeat(char c, size_t n)
{
	char *s = malloc(n + 1);

	ck_assert_ptr_nonnull(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

START_TEST(test_source_names_allowed)
{
	static const char *const ok[] = {
		"prog.cpp", "a.c", "x", "kernel_0.cu", "A-B+C_d.hpp", "9lives.c",
		"a..c", "foo-.c", "a.b.c.d",
		/* A generated tree: DaCe's src/cpu/<prog>.cpp and include/hash.h. */
		"src/cpu/prog.cpp", "include/hash.h", "a/b", "a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p.c",
	};
	char why[200];
	size_t i;

	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		why[0] = '\0';
		ck_assert_msg(validate_source_name(ok[i], why, sizeof(why)) == 0,
			      "%s refused: %s", ok[i], why);
	}
}
END_TEST

START_TEST(test_source_names_refused)
{
	static const char *const bad[] = {
		"", "../etc/passwd", "/abs.c", ".hidden", "..", ".", "-rf",
		"-o", "a b.c", "a\nb.c", "a\tb", "caf\xc3\xa9.c", "a;b", "a*b", "$x",
		"a\\b", "a:b", "~x", "a\x7f",
		/* Folders: only down, each name plain. */
		"a/../b.c", "a/./b.c", "a/..", "a//b.c", "a/", "/", "a/.git/x.c", "a/-o",
		"a/b c.c", "a/b\n.c", "./a.c", "a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q.c",
	};
	char why[200];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		ck_assert_msg(validate_source_name(bad[i], why, sizeof(why)) == -1,
			      "%s allowed", bad[i]);
		ck_assert_msg(strlen(why) > 10, "no reason for %s", bad[i]);
		/* The reason never echoes a control character back. */
		ck_assert_ptr_null(strchr(why, '\n'));
		ck_assert_ptr_null(strchr(why, '\t'));
	}
	ck_assert_int_eq(validate_source_name(NULL, why, sizeof(why)), -1);
	/* A zero-sized buffer gets no text but the same verdict. */
	ck_assert_int_eq(validate_source_name("a/../b", NULL, 0), -1);
}
END_TEST

START_TEST(test_source_name_messages)
{
	char why[200];

	ck_assert_int_eq(validate_source_name("../x.c", why, sizeof(why)), -1);
	ck_assert_str_eq(why, "source name \"../x.c\" has \"..\" in it; folders must go down, "
			 "never up or nowhere");
	ck_assert_int_eq(validate_source_name("/abs.c", why, sizeof(why)), -1);
	ck_assert_ptr_nonnull(strstr(why, "absolute"));
	ck_assert_int_eq(validate_source_name("a/.git/x.c", why, sizeof(why)), -1);
	ck_assert_ptr_nonnull(strstr(why, "\".git\""));
	ck_assert_int_eq(validate_source_name(".hidden", why, sizeof(why)), -1);
	ck_assert_str_eq(why, "source name \".hidden\" is not a plain file name: it starts with '.'");
	ck_assert_int_eq(validate_source_name("a b.c", why, sizeof(why)), -1);
	ck_assert_ptr_nonnull(strstr(why, "a space"));
	ck_assert_int_eq(validate_source_name("a\nb", why, sizeof(why)), -1);
	ck_assert_ptr_nonnull(strstr(why, "\"a?b\""));
	ck_assert_ptr_nonnull(strstr(why, "control character"));
	ck_assert_int_eq(validate_source_name("-rf", why, sizeof(why)), -1);
	ck_assert_ptr_nonnull(strstr(why, "option"));
	/* A short buffer truncates the reason but stays terminated. */
	ck_assert_int_eq(validate_source_name("a//b", why, 8), -1);
	ck_assert_str_eq(why, "source ");
}
END_TEST

/* The names of one request together. */
START_TEST(test_source_sets)
{
	struct named {
		const char *name;
		int other;
	};
	static const struct named ok[] = { { "src/cpu/p.cpp", 0 }, { "include/hash.h", 0 },
					   { "src/cpu/q.cpp", 0 }, { "src/cpu.h", 0 },
					   { "src/cpux/r.cpp", 0 } };
	static const struct named twice[] = { { "a.c", 0 }, { "b/a.c", 0 }, { "a.c", 0 } };
	static const struct named inside[] = { { "src/cpu/p.cpp", 0 }, { "src/cpu", 0 } };
	char why[300];

	ck_assert_int_eq(validate_source_set(&ok[0].name, 5, sizeof(ok[0]), why, sizeof(why)), 0);
	ck_assert_int_eq(validate_source_set(&twice[0].name, 3, sizeof(twice[0]), why,
					     sizeof(why)), -1);
	ck_assert_str_eq(why, "source name \"a.c\" appears twice");
	ck_assert_int_eq(validate_source_set(&inside[0].name, 2, sizeof(inside[0]), why,
					     sizeof(why)), -1);
	ck_assert_str_eq(why, "source \"src/cpu\" is a file, so \"src/cpu/p.cpp\" cannot be "
			 "inside it");
	ck_assert_int_eq(validate_source_set(&ok[0].name, 0, sizeof(ok[0]), why, sizeof(why)), 0);
}
END_TEST

START_TEST(test_source_name_length)
{
	char why[200];
	char *n255 = repeat('a', 255), *n256 = repeat('a', 256);

	ck_assert_int_eq(validate_source_name(n255, why, sizeof(why)), 0);
	ck_assert_int_eq(validate_source_name(n256, why, sizeof(why)), -1);
	ck_assert_ptr_nonnull(strstr(why, "longer than 255"));
	/* The quoted name is cut short, not the sentence. */
	ck_assert_ptr_nonnull(strstr(why, "..."));
	free(n255);
	free(n256);
}
END_TEST

START_TEST(test_toolchain_names)
{
	char why[200];
	char *n64 = repeat('t', 64), *n65 = repeat('t', 65);

	ck_assert_int_eq(validate_toolchain_name("cc", why, sizeof(why)), 0);
	ck_assert_int_eq(validate_toolchain_name("c++", why, sizeof(why)), 0);
	ck_assert_int_eq(validate_toolchain_name("nvcc-12.4", why, sizeof(why)), 0);
	ck_assert_int_eq(validate_toolchain_name("gcc_13", why, sizeof(why)), 0);
	ck_assert_int_eq(validate_toolchain_name(n64, why, sizeof(why)), 0);
	ck_assert_int_eq(validate_toolchain_name(n65, why, sizeof(why)), -1);
	ck_assert_int_eq(validate_toolchain_name("", why, sizeof(why)), -1);
	ck_assert_int_eq(validate_toolchain_name("-cc", why, sizeof(why)), -1);
	ck_assert_int_eq(validate_toolchain_name("bin/cc", why, sizeof(why)), -1);
	ck_assert_int_eq(validate_toolchain_name("c c", why, sizeof(why)), -1);
	ck_assert_int_eq(validate_toolchain_name("cc;rm", why, sizeof(why)), -1);
	ck_assert_ptr_nonnull(strstr(why, "toolchain name"));
	free(n64);
	free(n65);
}
END_TEST

/* A compiler named by path: absolute, at most 1024 bytes, no control
 * characters; the same rule for nvcc's host compiler. */
START_TEST(test_compiler_paths)
{
	char why[200];
	char *long_path = repeat('p', 1025);
	long_path[0] = '/';

	ck_assert_int_eq(validate_toolchain_name("/usr/bin/cc", why, sizeof(why)), 0);
	ck_assert_int_eq(validate_toolchain_name("/opt/gcc 13/bin/g++", why, sizeof(why)), 0);
	ck_assert_int_eq(validate_toolchain_name(long_path, why, sizeof(why)), -1);
	ck_assert_ptr_nonnull(strstr(why, "longer than"));
	ck_assert_int_eq(validate_toolchain_name("/usr/bin/c\nc", why, sizeof(why)), -1);
	ck_assert_ptr_nonnull(strstr(why, "control character"));
	ck_assert_int_eq(validate_compiler_path("host compiler", "g++", why, sizeof(why)), -1);
	ck_assert_ptr_nonnull(strstr(why, "host compiler \"g++\" is not an absolute path"));
	ck_assert_int_eq(validate_compiler_path("host compiler", "", why, sizeof(why)), -1);
	ck_assert_int_eq(validate_compiler_path("host compiler", "/usr/bin/g++", why, sizeof(why)), 0);
	ck_assert_int_eq(validate_toolchain_name("/opt/x -ccbin /tmp/g++", why, sizeof(why)), -1);
	long_path[1024] = '\0';
	ck_assert_int_eq(validate_compiler_path("compiler", long_path, why, sizeof(why)), 0);
	free(long_path);
}
END_TEST

START_TEST(test_alias)
{
	char why[200];
	char *a256 = repeat('k', 256), *a257 = repeat('k', 257);

	ck_assert_int_eq(validate_alias("gt4py:4f3a9c", why, sizeof(why)), 0);
	ck_assert_int_eq(validate_alias("a/b\\c\"d'~!", why, sizeof(why)), 0);
	ck_assert_int_eq(validate_alias(a256, why, sizeof(why)), 0);
	ck_assert_int_eq(validate_alias(a257, why, sizeof(why)), -1);
	ck_assert_int_eq(validate_alias("", why, sizeof(why)), -1);
	ck_assert_int_eq(validate_alias("has space", why, sizeof(why)), -1);
	ck_assert_ptr_nonnull(strstr(why, "a space"));
	ck_assert_int_eq(validate_alias("tab\there", why, sizeof(why)), -1);
	ck_assert_int_eq(validate_alias("nl\n", why, sizeof(why)), -1);
	ck_assert_int_eq(validate_alias("caf\xc3\xa9", why, sizeof(why)), -1);
	ck_assert_int_eq(validate_alias("del\x7f", why, sizeof(why)), -1);
	ck_assert_int_eq(validate_alias(NULL, why, sizeof(why)), -1);
	free(a256);
	free(a257);
}
END_TEST

START_TEST(test_label)
{
	char why[200];
	char *l256 = repeat('l', 256), *l257 = repeat('l', 257);

	ck_assert_int_eq(validate_label("diffusion_step", why, sizeof(why)), 0);
	ck_assert_int_eq(validate_label("with spaces and / slashes", why, sizeof(why)), 0);
	ck_assert_int_eq(validate_label("caf\xc3\xa9 \xe2\x88\x87 \xf0\x9f\x94\xa5", why,
					sizeof(why)), 0);
	ck_assert_int_eq(validate_label(l256, why, sizeof(why)), 0);
	ck_assert_int_eq(validate_label(l257, why, sizeof(why)), -1);
	ck_assert_int_eq(validate_label("", why, sizeof(why)), -1);
	ck_assert_int_eq(validate_label("line\nbreak", why, sizeof(why)), -1);
	ck_assert_ptr_nonnull(strstr(why, "control character"));
	ck_assert_int_eq(validate_label("esc\x1b[31m", why, sizeof(why)), -1);
	ck_assert_int_eq(validate_label("del\x7f", why, sizeof(why)), -1);
	/* C1 control U+0085 (NEL), encoded as UTF-8. */
	ck_assert_int_eq(validate_label("c1\xc2\x85", why, sizeof(why)), -1);
	/* Invalid UTF-8: stray continuation, truncated, overlong, surrogate,
	 * beyond U+10FFFF. */
	ck_assert_int_eq(validate_label("\x80", why, sizeof(why)), -1);
	ck_assert_ptr_nonnull(strstr(why, "UTF-8"));
	ck_assert_int_eq(validate_label("ab\xc3", why, sizeof(why)), -1);
	ck_assert_int_eq(validate_label("\xc0\xaf", why, sizeof(why)), -1);
	ck_assert_int_eq(validate_label("\xed\xa0\x80", why, sizeof(why)), -1);
	ck_assert_int_eq(validate_label("\xf4\x90\x80\x80", why, sizeof(why)), -1);
	ck_assert_int_eq(validate_label("\xff", why, sizeof(why)), -1);
	free(l256);
	free(l257);
}
END_TEST

START_TEST(test_keys)
{
	const char *k = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	char buf[80];

	ck_assert_int_eq(validate_key(k), 0);
	ck_assert_int_eq(validate_key(NULL), -1);
	ck_assert_int_eq(validate_key(""), -1);
	memcpy(buf, k, 65);
	buf[63] = '\0';
	ck_assert_int_eq(validate_key(buf), -1);
	memcpy(buf, k, 65);
	buf[10] = 'A';
	ck_assert_int_eq(validate_key(buf), -1);
	memcpy(buf, k, 65);
	buf[10] = 'g';
	ck_assert_int_eq(validate_key(buf), -1);
	snprintf(buf, sizeof(buf), "%s0", k);
	ck_assert_int_eq(validate_key(buf), -1);
	/* Every byte at every position: only 0-9 and a-f pass. */
	for (int pos = 0; pos < 64; pos++)
		for (int c = 1; c < 256; c++) {
			memcpy(buf, k, 65);
			buf[pos] = (char)c;
			bool digit = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
			ck_assert_int_eq(validate_key(buf), digit ? 0 : -1);
			ck_assert_int_eq(validate_key_prefix(buf), digit ? 0 : -1);
		}
	snprintf(buf, sizeof(buf), "%s0", k);

	ck_assert_int_eq(validate_key_prefix("4f3a"), 0);
	ck_assert_int_eq(validate_key_prefix(k), 0);
	ck_assert_int_eq(validate_key_prefix("4f3"), -1);
	ck_assert_int_eq(validate_key_prefix("4F3A"), -1);
	ck_assert_int_eq(validate_key_prefix("4f3a-"), -1);
	ck_assert_int_eq(validate_key_prefix(buf), -1);
	ck_assert_int_eq(validate_key_prefix(NULL), -1);
}
END_TEST

START_TEST(default_toolchain)
{
	const char *c[] = { "k.h", "a.c", "b.cpp" };
	const char *cxx[] = { "include/hash.h", "src/cpu/p.cpp", "x.c" };
	const char *cu[] = { "k.cuh", "k.cu" };
	const char *others[] = { "m.f90" };
	const char *headers[] = { "a.h", "b.hpp" };
	ck_assert_str_eq(validate_default_toolchain(c, 3, sizeof(char *)), "cc");
	ck_assert_str_eq(validate_default_toolchain(cxx, 3, sizeof(char *)), "c++");
	ck_assert_str_eq(validate_default_toolchain(cu, 2, sizeof(char *)), "nvcc");
	ck_assert_str_eq(validate_default_toolchain(others, 1, sizeof(char *)), "cc");
	ck_assert_str_eq(validate_default_toolchain(headers, 2, sizeof(char *)), "cc");
	ck_assert_str_eq(validate_default_toolchain(NULL, 0, sizeof(char *)), "cc");
	/* One table for headers and languages (build, pch and this). */
	ck_assert(validate_is_header("x/k.cuh") && validate_is_header("a.hpp"));
	ck_assert(!validate_is_header("a.c") && !validate_is_header("noext"));
	ck_assert_int_eq(validate_source_lang("a.c"), 'c');
	ck_assert_int_eq(validate_source_lang("a.CPP"), 'x');
	ck_assert_int_eq(validate_source_lang("k.cu"), 'u');
	ck_assert_int_eq(validate_source_lang("m.f90"), 0);
	static const char *const exts[] = { "a.cc", "a.cxx", "a.c++", "a.C", "a.cp" };
	for (size_t i = 0; i < 5; i++)
		ck_assert_str_eq(validate_default_toolchain(&exts[i], 1, sizeof(char *)), "c++");
}
END_TEST

static Suite *validate_suite(void)
{
	Suite *s = suite_create("validate");
	TCase *tn = tcase_create("names");

	tcase_add_test(tn, test_source_names_allowed);
	tcase_add_test(tn, test_source_names_refused);
	tcase_add_test(tn, test_source_name_messages);
	tcase_add_test(tn, test_source_name_length);
	tcase_add_test(tn, test_source_sets);
	tcase_add_test(tn, test_toolchain_names);
	tcase_add_test(tn, test_compiler_paths);
	tcase_add_test(tn, test_alias);
	tcase_add_test(tn, test_label);
	tcase_add_test(tn, test_keys);
	tcase_add_test(tn, default_toolchain);
	suite_add_tcase(s, tn);

	return s;
}

int main(void)
{
	return unit_run(validate_suite());
}
