/*
 * Data stored with an alias (docs/protocol.md, "alias_data"): what a
 * framework needs besides the artifact to use the program (kiln.gt4py's
 * load metadata), so that aliases of identical code share one compile and
 * one entry. The real kilnd, libkiln's kiln_get_file_data and
 * kiln_lookup_data.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "harness.h"
#include "kiln/kiln.h"

static struct kiln *open_kiln(void)
{
	struct kiln *k = NULL;
	int rc = kiln_open(harness.socket, &k);
	ck_assert_msg(rc == KILN_OK, "kiln_open: %s", kiln_errmsg(NULL));
	return k;
}

/* Gets program (name, value) as a file under alias with data (may be NULL);
 * its key into key. */
static int get_with(struct kiln *k, const char *name, int value, const char *alias,
		    const char *data, char key[72])
{
	char *text = harness_program(name, value);
	struct kiln_request req;
	struct kiln_source src;
	struct kiln_program *p = NULL;

	harness_request(&req, &src, "prog.c", text);
	req.alias = alias;
	int rc = kiln_get_file_data(k, &req, data, &p);
	if (rc == KILN_OK)
		snprintf(key, 72, "%s", kiln_program_key(p));
	free(text);
	return rc;
}

/* The lookup of alias: its key and data (NULL: none), or the status. */
static int look(struct kiln *k, const char *alias, char key[72], char **data)
{
	struct kiln_program *p = NULL;
	int rc = kiln_lookup_data(k, alias, NULL, NULL, 0, 0, &p, data);
	if (rc == KILN_OK)
		snprintf(key, 72, "%s", kiln_program_key(p));
	return rc;
}

static void expect_data(struct kiln *k, const char *alias, const char *key, const char *want)
{
	char got[72];
	char *data = NULL;
	int rc = look(k, alias, got, &data);
	ck_assert_msg(rc == KILN_OK, "lookup %s: %s", alias, kiln_errmsg(k));
	ck_assert_str_eq(got, key);
	if (want == NULL)
		ck_assert_msg(data == NULL, "%s: data %.40s, expected none", alias, data);
	else
		ck_assert_msg(data != NULL && strcmp(data, want) == 0, "%s: data %.40s, expected %.40s",
			      alias, data != NULL ? data : "(none)", want);
	free(data);
}

/*
 * Two "ranks" with the same code under their own aliases and data: one
 * build, one entry, each alias with its own data, before and after the
 * writes reach the index and across a restart.
 */
START_TEST(aliases_of_one_program_keep_their_own_data)
{
	char k0[72], k1[72];
	harness_start(NULL);
	struct kiln *k = open_kiln();
	ck_assert_int_eq(get_with(k, "same", 7, "g:rank0", "cmFuazA=", k0), KILN_OK);
	ck_assert_int_eq(get_with(k, "same", 7, "g:rank1", "cmFuazE=", k1), KILN_OK);
	ck_assert_str_eq(k0, k1);
	ck_assert_int_eq(harness_status_num_at(harness.socket, "builds_started"), 1);
	expect_data(k, "g:rank0", k0, "cmFuazA=");
	expect_data(k, "g:rank1", k0, "cmFuazE=");
	kiln_close(k);
	harness_stop();
	harness_start(NULL);
	k = open_kiln();
	expect_data(k, "g:rank0", k0, "cmFuazA=");
	expect_data(k, "g:rank1", k0, "cmFuazE=");
	kiln_close(k);
	harness_stop();
}
END_TEST

/*
 * The data is bound to the entry the alias names: new data replaces it, a
 * get without data leaves the data of an alias already naming the entry,
 * and an alias re-pointed at another program never shows the old data.
 */
START_TEST(data_follows_the_alias_target)
{
	char ka[72], kb[72];
	harness_start(NULL);
	struct kiln *k = open_kiln();
	ck_assert_int_eq(get_with(k, "pa", 1, "g:x", "QUFBQQ==", ka), KILN_OK);
	ck_assert_int_eq(get_with(k, "pa", 1, "g:x", "QkJCQg==", ka), KILN_OK);
	expect_data(k, "g:x", ka, "QkJCQg==");
	ck_assert_int_eq(get_with(k, "pa", 1, "g:x", NULL, ka), KILN_OK);
	expect_data(k, "g:x", ka, "QkJCQg==");
	ck_assert_int_eq(get_with(k, "pb", 2, "g:x", NULL, kb), KILN_OK);
	ck_assert_str_ne(ka, kb);
	expect_data(k, "g:x", kb, NULL);
	/* Back at the first program, without data: the old data stays gone. */
	ck_assert_int_eq(get_with(k, "pa", 1, "g:x", NULL, ka), KILN_OK);
	expect_data(k, "g:x", ka, NULL);
	kiln_close(k);
	harness_stop();
	harness_start(NULL);   /* from the index, not the writes pending */
	k = open_kiln();
	expect_data(k, "g:x", ka, NULL);
	kiln_close(k);
	harness_stop();
}
END_TEST

/* Data larger than a hit's fixed reply buffer comes back whole. */
START_TEST(large_data_round_trips)
{
	char key[72], got[72];
	size_t n = 3u << 20;   /* 3 MiB of base64 */
	char *big = malloc(n + 1), *data = NULL;
	ck_assert_ptr_nonnull(big);
	for (size_t i = 0; i < n; i++)
		big[i] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef"[i % 32];
	big[n] = '\0';
	harness_start(NULL);
	struct kiln *k = open_kiln();
	ck_assert_int_eq(get_with(k, "big", 3, "g:big", big, key), KILN_OK);
	ck_assert_int_eq(look(k, "g:big", got, &data), KILN_OK);
	ck_assert_ptr_nonnull(data);
	ck_assert_uint_eq(strlen(data), n);
	ck_assert_int_eq(memcmp(data, big, n), 0);
	free(data);
	free(big);
	kiln_close(k);
	harness_stop();
}
END_TEST

/* Malformed data is refused before it is sent and by kilnd; a lookup of an
 * alias another client claimed says so (KILN_EHELD), where kiln_lookup_claim
 * keeps its KILN_ENOTFOUND. */
START_TEST(refusals_and_held_claims)
{
	char key[72];
	struct kiln_program *p = NULL;
	char *data = NULL;
	harness_start(NULL);
	struct kiln *k1 = open_kiln(), *k2 = open_kiln();
	ck_assert_int_eq(get_with(k1, "r", 1, "g:r", "not base64!", key), KILN_EINVAL);
	ck_assert_int_eq(get_with(k1, "r", 1, "g:r", "QQ=", key), KILN_EINVAL);
	ck_assert_int_eq(get_with(k1, "r", 1, NULL, "QUJD", key), KILN_EINVAL);
	int fd = harness_raw_connect(harness.socket);
	harness_raw_send(fd, "{\"op\":\"hello\",\"id\":1,\"proto\":2}");
	cJSON_Delete(harness_raw_recv(fd));
	harness_raw_send(fd, "{\"op\":\"get\",\"id\":2,\"sources\":[{\"name\":\"a.c\",\"text\":"
			 "\"int x;\"}],\"alias\":\"g:r\",\"alias_data\":\"Q===\"}");
	cJSON *r = harness_raw_recv(fd);
	ck_assert_str_eq(harness_error_code(r), "bad_request");
	cJSON_Delete(r);
	close(fd);
	ck_assert_int_eq(kiln_lookup_data(k1, "g:held", NULL, NULL, 1, 0, &p, &data), KILN_ECLAIMED);
	ck_assert_int_eq(kiln_lookup_data(k2, "g:held", NULL, NULL, 1, 0, &p, &data), KILN_EHELD);
	ck_assert_msg(strstr(kiln_errmsg(k2), "claimed by another client") != NULL, "%s",
		      kiln_errmsg(k2));
	ck_assert_int_eq(kiln_lookup_claim(k2, "g:held", NULL, NULL, 0, &p), KILN_ENOTFOUND);
	/* Not claimed: a plain miss. */
	ck_assert_int_eq(kiln_lookup_data(k2, "g:none", NULL, NULL, 0, 0, &p, &data), KILN_ENOTFOUND);
	ck_assert_ptr_null(data);
	/* The claim's producer publishes with data: the waiter's lookup has it. */
	ck_assert_int_eq(get_with(k1, "h", 5, "g:held", "aGVsZA==", key), KILN_OK);
	ck_assert_int_eq(kiln_lookup_data(k2, "g:held", NULL, NULL, 1, 0, &p, &data), KILN_OK);
	ck_assert_str_eq(data, "aGVsZA==");
	free(data);
	kiln_close(k1);
	kiln_close(k2);
	harness_stop();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("alias_data");
	harness_add(s, "own_data", aliases_of_one_program_keep_their_own_data, 120);
	harness_add(s, "target", data_follows_the_alias_target, 120);
	harness_add(s, "large", large_data_round_trips, 120);
	harness_add(s, "refusals", refusals_and_held_claims, 120);
	return harness_main(s);
}
