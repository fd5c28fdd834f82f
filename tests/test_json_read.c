/*
 * Unit tests of the strict JSON reader (proto/json_read.c) against cJSON's
 * own parser: every valid text of a corpus reads to a tree equal to
 * cJSON's (numbers to the same double, strings to the same bytes); what it
 * refuses, it refuses on purpose (RFC 8259's grammar, which cJSON bends);
 * no prefix of a valid text is misread; nesting stops at JSON_READ_DEPTH.
 */
#include <check.h>
#include <locale.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_read.h"
#include "unit.h"

static const char *const valid[] = {
	"{}", "[]", "0", "-0", "1", "-1", "123456789012345", "-123456789012345",
	"1234567890123456", "9007199254740991", "9007199254740993", "18446744073709551615",
	"1.5", "-0.25", "1e3", "1E+3", "2.5e-3", "1.7976931348623157e308", "4.9e-324",
	"2147483647", "2147483648", "-2147483649", "true", "false", "null",
	"\"\"", "\"plain\"", "\"q\\\"b\\\\s\\/f\\bf\\fn\\nr\\rt\\t\"", "\"\\u00e9\\u20ac\"",
	"\"\\ud83d\\ude00 smile\"", "\"raw \xc3\xa9 utf-8\"", "\"\\u0001\\u001f\"",
	" \t\r\n{ \"a\" : 1 , \"b\" : [ true , false , null ] } \n",
	"{\"id\":42,\"ok\":true,\"fd\":true,\"key\":\"0123abcd\",\"path\":\"/c/o/x \\\"q\\\".so\","
	"\"size\":16384,\"cached\":false,\"build_ms\":812}",
	"{\"id\":1,\"ok\":false,\"error\":{\"code\":\"build_failed\",\"message\":\"m\\n\\tx\","
	"\"field\":\"sources\"}}",
	"{\"a\":1,\"a\":2}", "[[[[]]],{\"x\":{\"y\":[1,{\"z\":null}]}}]",
	"{\"programs\":[{\"id\":1},{\"id\":2},{\"id\":3}],\"n\":3}",
};

/* Refused: malformed JSON, and what cJSON bends and kilnd never prints
 * (leading zeros, "1.", raw control characters, lone surrogates, \u0000,
 * text after the value). */
static const char *const refused[] = {
	"", " ", "{", "}", "[1,]", "[,1]", "{\"a\"}", "{\"a\":}", "{\"a\" 1}", "{1:2}", "{\"a\":1,}",
	"01", "-01", "1.", ".5", "-", "+1", "1e", "1e+", "0x10", "Infinity", "NaN", "tru", "nul",
	"\"open", "\"bad \\x escape\"", "\"\\u12\"", "\"\\u12G4\"", "\"\\u0000\"",
	"\"\\ud83d\"", "\"\\ud83d\\u0041\"", "\"\\ude00\"", "\"raw\ttab\"", "\"raw\nline\"",
	"1 2", "{} {}", "[] x", "{\"a\":1}x", "true false",
	"123456789012345678901234567890123456789012345678901234567890123456789",
};

static void check_same(const char *text)
{
	cJSON *mine = json_read(text, strlen(text));
	cJSON *theirs = cJSON_ParseWithLength(text, strlen(text));
	ck_assert_msg(mine != NULL, "refused valid JSON: %s", text);
	ck_assert_msg(theirs != NULL, "cJSON refused: %s", text);
	/* Printed alike: members in order (cJSON_Compare cannot tell duplicate
	 * keys apart), numbers to 17 digits where 15 do not read back. */
	char *pm = cJSON_PrintUnformatted(mine), *pt = cJSON_PrintUnformatted(theirs);
	ck_assert_msg(pm != NULL && pt != NULL && strcmp(pm, pt) == 0,
		      "read differently from cJSON: %s: %s against %s", text, pm, pt);
	free(pm);
	free(pt);
	ck_assert(cJSON_Compare(mine, theirs, true) || strstr(text, "\"a\":1,\"a\"") != NULL);
	/* The same numbers bit for bit, as cJSON_Compare allows an epsilon. */
	if (cJSON_IsNumber(mine)) {
		ck_assert_msg(memcmp(&mine->valuedouble, &theirs->valuedouble, sizeof(double)) == 0,
			      "%s: %.17g against %.17g", text, mine->valuedouble, theirs->valuedouble);
		ck_assert_int_eq(mine->valueint, theirs->valueint);
	}
	cJSON_Delete(mine);
	cJSON_Delete(theirs);
}

START_TEST(test_valid_like_cjson)
{
	for (size_t i = 0; i < sizeof(valid) / sizeof(valid[0]); i++)
		check_same(valid[i]);
}
END_TEST

START_TEST(test_refused)
{
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		cJSON *v = json_read(refused[i], strlen(refused[i]));
		ck_assert_msg(v == NULL, "took %s", refused[i]);
	}
	ck_assert_ptr_null(json_read(NULL, 0));
}
END_TEST

/* A reply cut anywhere is refused or, where the cut leaves valid JSON
 * (a number's first digits), read as cJSON reads it; the bytes after the
 * cut are never looked at (the text is copied to an allocation of exactly
 * its size). */
START_TEST(test_prefixes)
{
	for (size_t i = 0; i < sizeof(valid) / sizeof(valid[0]); i++) {
		size_t len = strlen(valid[i]);
		for (size_t n = 0; n < len; n++) {
			/* Exactly n bytes: ASan sees a read past them. */
			char *exact = malloc(n ? n : 1);
			memcpy(exact, valid[i], n);
			cJSON *v = json_read(exact, n);
			free(exact);
			if (v != NULL) {
				cJSON_Delete(v);
				char *copy = strndup(valid[i], n);
				check_same(copy);
				free(copy);
			}
		}
	}
}
END_TEST

START_TEST(test_numbers_exact)
{
	const char *text = "[9007199254740991,-9007199254740991,999999999999999,1e2,-0]";
	cJSON *v = json_read(text, strlen(text));
	ck_assert_ptr_nonnull(v);
	ck_assert(cJSON_GetArrayItem(v, 0)->valuedouble == 9007199254740991.0);
	ck_assert(cJSON_GetArrayItem(v, 1)->valuedouble == -9007199254740991.0);
	ck_assert(cJSON_GetArrayItem(v, 2)->valuedouble == 999999999999999.0);
	ck_assert_int_eq(cJSON_GetArrayItem(v, 3)->valueint, 100);
	ck_assert(1.0 / cJSON_GetArrayItem(v, 4)->valuedouble < 0);   /* -0 */
	cJSON_Delete(v);
}
END_TEST

/* A process whose locale writes "1,5" still reads "1.5" as 1.5. */
START_TEST(test_locale_decimal_point)
{
	if (setlocale(LC_NUMERIC, "de_DE.UTF-8") == NULL && setlocale(LC_NUMERIC, "fr_FR.UTF-8") == NULL) {
		fprintf(stderr, "test_locale_decimal_point: no de_DE or fr_FR locale installed: "
				"the comma decimal point is not checked here\n");
		return;
	}
	ck_assert_str_eq(localeconv()->decimal_point, ",");
	cJSON *v = json_read("[1.5,2.5e1]", 11);
	ck_assert_ptr_nonnull(v);
	ck_assert(cJSON_GetArrayItem(v, 0)->valuedouble == 1.5);
	ck_assert(cJSON_GetArrayItem(v, 1)->valuedouble == 25.0);
	cJSON_Delete(v);
	setlocale(LC_NUMERIC, "C");
}
END_TEST

START_TEST(test_depth)
{
	char text[2 * JSON_READ_DEPTH + 8];
	for (int depth = JSON_READ_DEPTH; depth <= JSON_READ_DEPTH + 1; depth++) {
		memset(text, '[', (size_t)depth);
		memset(text + depth, ']', (size_t)depth);
		cJSON *v = json_read(text, 2 * (size_t)depth);
		ck_assert_msg((v != NULL) == (depth <= JSON_READ_DEPTH), "depth %d", depth);
		cJSON_Delete(v);
	}
}
END_TEST

/* Linked as cJSON links its own: items can be added and detached. */
START_TEST(test_tree_links)
{
	cJSON *v = json_read("{\"a\":1,\"b\":2,\"c\":3}", 19);
	ck_assert_ptr_nonnull(v);
	ck_assert_ptr_eq(v->child->prev, cJSON_GetObjectItem(v, "c"));
	cJSON_AddNumberToObject(v, "d", 4);
	cJSON_Delete(cJSON_DetachItemFromObject(v, "b"));
	char *s = cJSON_PrintUnformatted(v);
	ck_assert_str_eq(s, "{\"a\":1,\"c\":3,\"d\":4}");
	free(s);
	cJSON_Delete(v);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("json_read");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_valid_like_cjson);
	tcase_add_test(tc, test_refused);
	tcase_add_test(tc, test_prefixes);
	tcase_add_test(tc, test_numbers_exact);
	tcase_add_test(tc, test_locale_decimal_point);
	tcase_add_test(tc, test_depth);
	tcase_add_test(tc, test_tree_links);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
