/*
 * Unit tests of the dependency-file reader (daemon/flight/deps.c), the
 * fallback when a build could not be observed: gcc's make rules with their
 * escapes and continuations, and linkers' --dependency-file output.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "deps.h"
#include "unit.h"

static size_t parse(const char *dir, const char *text, bool ld, struct store_dep **deps)
{
	size_t n = 0;
	char *copy = strdup(text);
	ck_assert_ptr_nonnull(copy);
	ck_assert_int_eq(deps_parse_depfile_text(dir, copy, strlen(copy), ld, deps, &n), 0);
	free(copy);
	return n;
}

static void free_deps(struct store_dep *deps, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(deps[i].path);
	free(deps);
}

START_TEST(make_rules_with_escapes_and_continuations)
{
	struct store_dep *d;
	size_t n = parse("/b",
			 "out/x.o: src/x.c /usr/include/stdio.h \\\n"
			 " /opt/my\\ dir/a.h /opt/cost$$s/b.h /opt/hash\\#/c.h \\\r\n"
			 "  /usr/include/stdio.h /b/tmp/cc123.s relative.h\n", false, &d);
	const char *want[] = { "/usr/include/stdio.h", "/opt/my dir/a.h", "/opt/cost$s/b.h",
			       "/opt/hash#/c.h" };
	ck_assert_int_eq(n, 4);
	for (size_t i = 0; i < n; i++)
		ck_assert_str_eq(d[i].path, want[i]);
	free_deps(d, n);
}
END_TEST

START_TEST(a_target_with_an_escaped_colon_and_an_empty_rule)
{
	struct store_dep *d;
	size_t n = parse("/b", "C\\:/out.o: /x/y.h\n", false, &d);
	ck_assert_int_eq(n, 1);
	ck_assert_str_eq(d[0].path, "/x/y.h");
	free_deps(d, n);
	n = parse("/b", "out.o:\n", false, &d);
	ck_assert_int_eq(n, 0);
	free_deps(d, n);
}
END_TEST

/* Linkers: one name per line; only names that exist, as written (GNU ld
 * escapes nothing) or unescaped (lld); phony "path:" rules count. */
START_TEST(linker_dependency_files)
{
	char dir[] = "/tmp/kiln-test-deps-XXXXXX", plain[128], spaced[128], text[1024];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(plain, sizeof(plain), "%s/libx.so", dir);
	snprintf(spaced, sizeof(spaced), "%s/My Cache.a", dir);
	FILE *f = fopen(plain, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	ck_assert_ptr_nonnull(f = fopen(spaced, "w"));
	fclose(f);
	snprintf(text, sizeof(text),
		 "out/artifact.so: \\\n"
		 "  %s \\\n"
		 "  %s/My\\ Cache.a \\\n"
		 "  %s/gone.o \\\n"
		 "\n"
		 "%s:\n", plain, dir, dir, plain);
	struct store_dep *d;
	size_t n = parse("/b", text, true, &d);
	ck_assert_int_eq(n, 2);
	ck_assert_str_eq(d[0].path, plain);
	ck_assert_str_eq(d[1].path, spaced);
	free_deps(d, n);
	/* GNU ld's form: the space written as it is. */
	snprintf(text, sizeof(text), "out/artifact.so: \\\n  %s \\\n", spaced);
	n = parse("/b", text, true, &d);
	ck_assert_int_eq(n, 1);
	ck_assert_str_eq(d[0].path, spaced);
	free_deps(d, n);
	unlink(plain);
	unlink(spaced);
	rmdir(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("deps");
	TCase *tc = tcase_create("depfiles");

	tcase_add_test(tc, make_rules_with_escapes_and_continuations);
	tcase_add_test(tc, a_target_with_an_escaped_colon_and_an_empty_rule);
	tcase_add_test(tc, linker_dependency_files);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
