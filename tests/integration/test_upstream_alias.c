/*
 * Integration tests of aliases in the upstream tier (daemon/tier/
 * upstream_alias.c): an alias set on one node is a hit on another with an
 * empty cache, and a miss where its entry does not fit there (another
 * header, another toolchain, another compiler named by path); export and
 * import carry aliases and their data; and an alias whose entry another
 * alias already brought to the node takes it from the node's cache.
 */
#include "harness.h"
#include "upstream_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A lookup of alias by toolchain through node n: KILN_OK with the
 * program's value in *value, or the error. */
static int lookup_value(const struct node *n, const char *alias, const char *toolchain, int *value)
{
	struct kiln_program *p = NULL, *loaded = NULL;
	struct kiln *k = NULL;
	int (*fn)(void) = NULL;

	ck_assert_int_eq(kiln_open(n->socket, &k), KILN_OK);
	int rc = kiln_lookup_file(k, alias, toolchain, &p);
	if (rc == KILN_OK) {
		ck_assert_int_eq(kiln_lookup(k, alias, &loaded), KILN_OK);
		*(void **)&fn = kiln_sym(loaded, "kiln_test_value");
		ck_assert_ptr_nonnull(fn);
		*value = fn();
	}
	kiln_close(k);
	return rc;
}

static void expect_alias_stats(const struct node *n, int alias_hits, int builds)
{
	cJSON *st = node_status(n);
	ck_assert_int_eq(harness_num(st, "upstream_alias_hits"), alias_hits);
	ck_assert_int_eq(harness_num(st, "builds_started"), builds);
	cJSON_Delete(st);
}

/*
 * An alias set on node a is a hit on node b, whose cache is empty (a new
 * job's node): no build, no lowering. It is a miss where the entry does not
 * fit: on c, whose copy of a header differs, and for a lookup naming
 * another toolchain; a damaged record beside the good one is skipped.
 */
START_TEST(alias_is_an_upstream_hit_on_another_node)
{
	static const char text[] =
		"#include <kiln_up_value.h>\n"
		"int kiln_test_value(void) { return KILN_UP_VALUE; }\n";
	static const char alias[] = "gt4py:0123456789abcdef-upstream";
	char inc[HARNESS_PATH], header[HARNESS_PATH + 32], incarg[HARNESS_PATH + 8];
	char aliases[HARNESS_PATH + 16], junk[HARNESS_PATH * 2];
	const char *argv[1];
	struct kiln_request req;
	struct kiln_source src;
	struct node a, b, c, d;
	struct node_args args;
	int value = 0;

	value_request(&req, &src, text, inc, header, incarg, argv);
	node_args_init(&args, NULL, NULL, NULL);
	req.alias = alias;

	node_init(&a, "a");
	node_start(&a, args.argv);
	get_value(&a, &req, 11);
	node_stop(&a);   /* its publishes are done once it has stopped */
	snprintf(aliases, sizeof(aliases), "%s/aliases", args.upstream);
	ck_assert_int_eq(count_files(aliases, ".json"), 1);

	node_init(&b, "b");
	node_start(&b, args.argv);
	ck_assert_int_eq(lookup_value(&b, alias, "cc", &value), KILN_OK);
	ck_assert_int_eq(value, 11);
	expect_alias_stats(&b, 1, 0);
	/* Local now: asked again, no second look upstream. */
	ck_assert_int_eq(lookup_value(&b, alias, "cc", &value), KILN_OK);
	expect_alias_stats(&b, 1, 0);
	node_stop(&b);

	/* Another node's header: the entry is not for it. */
	harness_write_file(header, "#define KILN_UP_VALUE 22\n");
	node_init(&c, "c");
	node_start(&c, args.argv);
	ck_assert_int_eq(lookup_value(&c, alias, "cc", &value), KILN_ENOTFOUND);
	expect_alias_stats(&c, 0, 0);
	node_stop(&c);

	/* Another toolchain named; then a damaged record beside the good one. */
	harness_write_file(header, "#define KILN_UP_VALUE 11\n");
	node_init(&d, "d");
	node_start(&d, args.argv);
	ck_assert_int_eq(lookup_value(&d, alias, "c++", &value), KILN_ENOTFOUND);
	expect_alias_stats(&d, 0, 0);
	snprintf(junk, sizeof(junk), "%s", find_one(aliases, ".json"));
	strcpy(strrchr(junk, '/') + 1,
	       "0000000000000000000000000000000000000000000000000000000000000000.json");
	harness_write_file(junk, "{\"kiln_upstream_alias\": 1, \"alias\": \"gt4py:other\"}");
	ck_assert_int_eq(lookup_value(&d, alias, "cc", &value), KILN_OK);
	ck_assert_int_eq(value, 11);
	expect_alias_stats(&d, 1, 0);
	cJSON *st = node_status(&d);
	ck_assert_int_eq(harness_num(st, "upstream_errors"), 1);
	cJSON_Delete(st);
	node_stop(&d);
}
END_TEST

/*
 * An alias of a compiler named by path: a hit on another node with the
 * same compiler, a miss once that compiler differs there (its identity).
 */
START_TEST(alias_needs_the_same_named_compiler)
{
	static const char text[] = "extern \"C\" int kiln_test_value(void) { return 7; }\n";
	static const char alias[] = "gt4py:named-compiler";
	char cxx[HARNESS_PATH];
	struct kiln_request req;
	struct kiln_source src;
	struct node a, b, c;
	struct node_args args;
	int value = 0;

	harness_module_compiler(cxx, 1);
	node_args_init(&args, NULL, NULL, NULL);
	harness_request(&req, &src, "prog.cpp", text);
	req.toolchain = cxx;
	req.alias = alias;
	node_init(&a, "a");
	node_start(&a, args.argv);
	get_value(&a, &req, 7);
	node_stop(&a);

	node_init(&b, "b");
	node_start(&b, args.argv);
	ck_assert_int_eq(lookup_value(&b, alias, cxx, &value), KILN_OK);
	ck_assert_int_eq(value, 7);
	expect_alias_stats(&b, 1, 0);
	node_stop(&b);

	harness_module_compiler(cxx, 2);
	node_init(&c, "c");
	node_start(&c, args.argv);
	ck_assert_int_eq(lookup_value(&c, alias, cxx, &value), KILN_ENOTFOUND);
	expect_alias_stats(&c, 0, 0);
	node_stop(&c);
}
END_TEST

/*
 * kiln export writes the alias records of the entries it exports, and
 * kiln import sets those aliases in a cache that had none: a lookup by the
 * alias is a hit there without a build (and without --upstream).
 */
START_TEST(export_and_import_carry_aliases)
{
	static const char alias[] = "gt4py:exported-alias";
	char dir[HARNESS_PATH], aliases[HARNESS_PATH + 16], *out = NULL;
	struct kiln_request req;
	struct kiln_source src;
	struct node a, b;
	struct node_args args;
	char *text = harness_program("exported", 31);
	int value = 0;

	node_args_init(&args, NULL, NULL, NULL);
	harness_request(&req, &src, "prog.c", text);
	req.alias = alias;
	node_init(&a, "a");
	node_start(&a, NULL);
	get_value(&a, &req, 31);
	node_use(&a);
	ck_assert_int_eq(harness_cli(NULL, NULL, "export", harness_path(dir, "exported"), NULL), 0);
	node_stop(&a);
	snprintf(aliases, sizeof(aliases), "%s/aliases", dir);
	ck_assert_int_eq(count_files(aliases, ".json"), 1);

	node_init(&b, "b");
	node_start(&b, NULL);
	ck_assert_int_eq(lookup_value(&b, alias, "cc", &value), KILN_ENOTFOUND);
	node_use(&b);
	ck_assert_int_eq(harness_cli(&out, NULL, "import", dir, NULL), 0);
	ck_assert_msg(strstr(out, "set 1 alias") != NULL, "import said: %s", out);
	free(out);
	ck_assert_int_eq(lookup_value(&b, alias, "cc", &value), KILN_OK);
	ck_assert_int_eq(value, 31);
	cJSON *st = node_status(&b);
	ck_assert_int_eq(harness_num(st, "builds_started"), 0);
	cJSON_Delete(st);
	node_stop(&b);
	free(text);
}
END_TEST

/* The data a lookup of alias through node n returns (malloc'd), failing
 * the test unless it is a hit. */
static char *lookup_data(const struct node *n, const char *alias)
{
	struct kiln_program *p = NULL;
	struct kiln *k = NULL;
	char *data = NULL;

	ck_assert_int_eq(kiln_open(n->socket, &k), KILN_OK);
	int rc = kiln_lookup_data(k, alias, "cc", NULL, 0, 0, &p, &data);
	ck_assert_msg(rc == KILN_OK, "kiln_lookup_data through %s: %s: %s", n->socket,
		      kiln_strerror(rc), kiln_errmsg(k));
	kiln_close(k);
	return data;
}

/*
 * An alias's data (kiln.gt4py's load metadata) travels with its record: an
 * upstream alias hit on another node, and an import, return the same data.
 */
START_TEST(alias_data_travels_with_the_alias)
{
	static const char alias[] = "gt4py:with-data";
	static const char data[] = "bG9hZCBtZXRhZGF0YQ==";
	char dir[HARNESS_PATH], *got;
	struct kiln_program *p = NULL;
	struct kiln_request req;
	struct kiln_source src;
	struct kiln *k = NULL;
	struct node a, b, c;
	struct node_args args;
	char *text = harness_program("with_data", 41);

	node_args_init(&args, NULL, NULL, NULL);
	harness_request(&req, &src, "prog.c", text);
	req.alias = alias;
	node_init(&a, "a");
	node_start(&a, args.argv);
	ck_assert_int_eq(kiln_open(a.socket, &k), KILN_OK);
	ck_assert_int_eq(kiln_get_file_data(k, &req, data, &p), KILN_OK);
	kiln_close(k);
	node_use(&a);
	ck_assert_int_eq(harness_cli(NULL, NULL, "export", harness_path(dir, "exported"), NULL), 0);
	node_stop(&a);

	node_init(&b, "b");
	node_start(&b, args.argv);
	got = lookup_data(&b, alias);
	ck_assert_pstr_eq(got, data);
	free(got);
	expect_alias_stats(&b, 1, 0);
	node_stop(&b);

	node_init(&c, "c");
	node_start(&c, NULL);
	node_use(&c);
	ck_assert_int_eq(harness_cli(NULL, NULL, "import", dir, NULL), 0);
	got = lookup_data(&c, alias);
	ck_assert_pstr_eq(got, data);
	free(got);
	node_stop(&c);
	free(text);
}
END_TEST

/* node n's status.observation member name. */
static int64_t observation_num(const struct node *n, const char *name)
{
	cJSON *st = node_status(n);
	int64_t v = harness_num(cJSON_GetObjectItemCaseSensitive(st, "observation"), name);

	cJSON_Delete(st);
	return v;
}

/*
 * Two aliases of one program (two ranks' tables, the same code): on a node
 * with an empty cache, the first lookup fetches the entry and checks it,
 * the second finds the entry here and points its alias at it, without a
 * second fetch or check (status.observation.peer_checks stays 1).
 */
START_TEST(second_alias_of_an_entry_takes_it_from_the_cache)
{
	static const char text[] =
		"#include <kiln_up_value.h>\n"
		"int kiln_test_value(void) { return KILN_UP_VALUE; }\n";
	char inc[HARNESS_PATH], header[HARNESS_PATH + 32], incarg[HARNESS_PATH + 8];
	const char *argv[1];
	struct kiln_request req;
	struct kiln_source src;
	struct node a, b;
	struct node_args args;
	int value = 0;

	value_request(&req, &src, text, inc, header, incarg, argv);
	node_args_init(&args, NULL, NULL, NULL);
	node_init(&a, "a");
	node_start(&a, args.argv);
	req.alias = "gt4py:rank0-tables";
	get_value(&a, &req, 11);
	req.alias = "gt4py:rank1-tables";
	get_value(&a, &req, 11);
	node_stop(&a);   /* its publishes are done once it has stopped */

	node_init(&b, "b");
	node_start(&b, args.argv);
	ck_assert_int_eq(lookup_value(&b, "gt4py:rank0-tables", "cc", &value), KILN_OK);
	ck_assert_int_eq(value, 11);
	expect_alias_stats(&b, 1, 0);
	ck_assert_int_eq(observation_num(&b, "peer_checks"), 1);
	ck_assert_int_eq(lookup_value(&b, "gt4py:rank1-tables", "cc", &value), KILN_OK);
	ck_assert_int_eq(value, 11);
	expect_alias_stats(&b, 2, 0);
	ck_assert_msg(observation_num(&b, "peer_checks") == 1,
		      "the second alias of the entry fetched and checked it again");
	cJSON *st = node_status(&b);
	ck_assert_int_eq(harness_num(st, "entries"), 1);
	cJSON_Delete(st);
	node_stop(&b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("upstream_alias");

	suite_add_tcase(s, harness_tcase("alias", alias_is_an_upstream_hit_on_another_node, 120));
	suite_add_tcase(s, harness_tcase("alias_named", alias_needs_the_same_named_compiler, 120));
	suite_add_tcase(s, harness_tcase("alias_export", export_and_import_carry_aliases, 120));
	suite_add_tcase(s, harness_tcase("alias_data", alias_data_travels_with_the_alias, 120));
	suite_add_tcase(s, harness_tcase("alias_second", second_alias_of_an_entry_takes_it_from_the_cache, 120));
	return harness_main(s);
}
