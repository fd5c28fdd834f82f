/*
 * Integration tests of claims on aliases across nodes: two daemons on one
 * upstream directory, each with its own socket and cache as on separate
 * nodes. A claim on node a makes a claiming lookup on node b wait (the
 * lease claims/alias-<sha256>.claim); a's publication ends b's wait with a
 * hit, a's release or a's death (kill -9, after --upstream-stale) lets b
 * claim, and b's wait running out is answered as a local wait's.
 * (The tier's other tests are test_upstream.c; these are the claims' own.)
 */
#include "harness.h"
#include "upstream_util.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ALIAS "gt4py:4f3a0000000000000000000000000000000000000000000000000000-lease"

static int hello_at(const struct node *n)
{
	return harness_raw_hello(n->socket);
}

/* A claiming lookup of ALIAS by toolchain cc (only such a lookup asks the
 * tier). */
static void send_claim(int fd, int id, int wait_ms)
{
	char text[512];
	snprintf(text, sizeof(text),
		 "{\"op\":\"lookup\",\"id\":%d,\"alias\":\"%s\",\"toolchain\":\"cc\","
		 "\"claim\":true,\"wait_ms\":%d}", id, ALIAS, wait_ms);
	harness_raw_send(fd, text);
}

/* The next reply on fd: "ok" (its key in key) or its error code (its
 * error's field in field, "" for none). malloc'd. */
static char *reply_code(int fd, char key[72], char field[32])
{
	cJSON *r = harness_raw_recv(fd);
	ck_assert_msg(r != NULL, "kilnd closed the connection");
	bool ok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok"));
	char *code = strdup(ok ? "ok" : harness_error_code(r));
	const cJSON *err = cJSON_GetObjectItemCaseSensitive(r, "error");
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(err, "field");
	if (key != NULL)
		snprintf(key, 72, "%s", ok ? harness_str(r, "key") : "");
	if (field != NULL)
		snprintf(field, 32, "%s", cJSON_IsString(f) ? f->valuestring : "");
	cJSON_Delete(r);
	return code;
}

static void expect(int fd, const char *want)
{
	char *code = reply_code(fd, NULL, NULL);
	ck_assert_msg(strcmp(code, want) == 0, "got %s, expected %s", code, want);
	free(code);
}

static int64_t num(const struct node *n, const char *field)
{
	return harness_status_num_at(n->socket, field);
}

/* Waits (up to timeout_s: a limit, not a measurement) until n's status
 * field reaches value. */
static void wait_num(const struct node *n, const char *field, int64_t value, double timeout_s)
{
	node_use(n);
	harness_wait_status(field, value, timeout_s);
}

/* The lease file of ALIAS in the tier. */
static const char *lease_path(const struct node_args *args, char *buf)
{
	char hex[65];
	harness_sha256_hex(ALIAS, hex);
	snprintf(buf, HARNESS_PATH * 2, "%s/claims/alias-%s.claim", args->upstream, hex);
	return buf;
}

/* Waits until the lease file is gone (its holder removes it on the pool). */
static void wait_lease_gone(const char *path)
{
	double end = harness_now_s() + 30;
	while (harness_exists(path)) {
		ck_assert_msg(harness_now_s() < end, "lease %s stayed", path);
		harness_sleep_ms(50);
	}
}

/* a and b on one tier (stale: --upstream-stale or NULL); a's client
 * claims ALIAS (*fa), b's client asks with wait_ms and waits on a's lease
 * (*fb). */
static void lease_race(struct node *a, struct node *b, struct node_args *args, const char *stale,
		       int *fa, int *fb, int wait_ms)
{
	char path[HARNESS_PATH * 2];
	node_args_init(args, NULL, stale, NULL);
	node_init(a, "a");
	node_init(b, "b");
	node_start(a, args->argv);
	node_start(b, args->argv);
	*fa = hello_at(a);
	send_claim(*fa, 2, 0);
	expect(*fa, "claimed");
	ck_assert_msg(harness_exists(lease_path(args, path)), "no lease %s", path);
	ck_assert_int_eq(num(a, "upstream_alias_claims"), 1);
	*fb = hello_at(b);
	send_claim(*fb, 2, wait_ms);
	wait_num(b, "upstream_alias_claim_waits", 1, 30);
}

/*
 * a claims; b's lookup waits on a's lease, and a second lookup on b waits
 * on b's local claim. a's client builds with the alias: both of b's
 * lookups get a's entry, and b builds nothing. The lease is gone.
 */
START_TEST(publication_on_one_node_ends_the_wait_on_another)
{
	struct node a, b;
	struct node_args args;
	char key[72], got[72], path[HARNESS_PATH * 2];
	int fa, fb;

	lease_race(&a, &b, &args, NULL, &fa, &fb, 60000);
	int fb2 = hello_at(&b);
	send_claim(fb2, 2, 60000);
	wait_num(&b, "claim_waits", 1, 30);

	node_use(&a);
	harness_get_program(NULL, "leased", 7, ALIAS, key);
	char *code = reply_code(fb, got, NULL);
	ck_assert_msg(strcmp(code, "ok") == 0 && strcmp(got, key) == 0, "b: %s %s", code, got);
	free(code);
	code = reply_code(fb2, got, NULL);
	ck_assert_msg(strcmp(code, "ok") == 0 && strcmp(got, key) == 0, "b's second: %s %s", code,
		      got);
	free(code);
	ck_assert_int_eq(num(&b, "builds_started"), 0);
	ck_assert_int_eq(num(&b, "upstream_alias_hits"), 1);
	ck_assert_int_eq(num(&b, "upstream_alias_claims"), 0);
	ck_assert_int_eq(num(&b, "claims_held"), 0);
	ck_assert_int_eq(num(&a, "builds_started"), 1);
	wait_lease_gone(lease_path(&args, path));
	close(fa);
	close(fb);
	close(fb2);
	node_stop(&a);
	node_stop(&b);
}
END_TEST

/* a holds the lease and is killed with -9: its lease stays, goes stale
 * after --upstream-stale, and b takes it over: b's client is answered
 * claimed. b stopping removes b's lease. */
START_TEST(killed_lease_holder_is_taken_over)
{
	struct node a, b;
	struct node_args args;
	char path[HARNESS_PATH * 2];
	int fa, fb;

	lease_race(&a, &b, &args, "1", &fa, &fb, 60000);
	node_use(&a);
	harness_kill9();
	a.pid = 0;
	close(fa);
	ck_assert(harness_exists(lease_path(&args, path)));
	expect(fb, "claimed");
	ck_assert_int_eq(num(&b, "upstream_alias_claim_takeovers"), 1);
	ck_assert_int_eq(num(&b, "upstream_alias_claims"), 1);
	ck_assert_int_eq(num(&b, "claims_held"), 1);
	ck_assert(harness_exists(path));
	node_stop(&b);
	ck_assert_msg(!harness_exists(path), "a stopped kilnd left its lease %s", path);
	close(fb);
}
END_TEST

/* a releases its claim (its lowering failed): its lease goes, and b's
 * waiting lookup takes it: claimed, without a takeover. */
START_TEST(release_on_one_node_lets_another_claim)
{
	struct node a, b;
	struct node_args args;
	char path[HARNESS_PATH * 2];
	int fa, fb;

	lease_race(&a, &b, &args, NULL, &fa, &fb, 60000);
	harness_raw_send(fa, "{\"op\":\"release\",\"id\":3,\"alias\":\"" ALIAS "\"}");
	cJSON *r = harness_raw_recv(fa);
	ck_assert(r != NULL && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "released")));
	cJSON_Delete(r);
	expect(fb, "claimed");
	ck_assert_int_eq(num(&b, "upstream_alias_claims"), 1);
	ck_assert_int_eq(num(&b, "upstream_alias_claim_takeovers"), 0);
	ck_assert(harness_exists(lease_path(&args, path)));
	/* b's lookup asked again on its connection: its own claim still. */
	send_claim(fb, 3, 0);
	expect(fb, "claimed");
	close(fb);
	wait_lease_gone(path);
	close(fa);
	node_stop(&a);
	node_stop(&b);
}
END_TEST

/* b's wait runs out while a holds the lease: not_found with field claim,
 * as for a local wait (and at once with wait_ms 0); b holds no claim. */
START_TEST(wait_for_another_nodes_lease_runs_out)
{
	struct node a, b;
	struct node_args args;
	char field[32];
	int fa, fb;

	lease_race(&a, &b, &args, NULL, &fa, &fb, 1500);
	char *code = reply_code(fb, NULL, field);
	ck_assert_msg(strcmp(code, "not_found") == 0 && strcmp(field, "claim") == 0,
		      "b: %s (field %s)", code, field);
	free(code);
	ck_assert_int_eq(num(&b, "claim_timeouts"), 1);
	ck_assert_int_eq(num(&b, "claims_held"), 0);
	ck_assert_int_eq(num(&b, "upstream_alias_claims"), 0);
	send_claim(fb, 3, 0);
	code = reply_code(fb, NULL, field);
	ck_assert_msg(strcmp(code, "not_found") == 0 && strcmp(field, "claim") == 0,
		      "b, wait_ms 0: %s (field %s)", code, field);
	free(code);
	ck_assert_int_eq(num(&b, "claims_held"), 0);
	close(fa);
	close(fb);
	node_stop(&a);
	node_stop(&b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("upstream_claims");

	suite_add_tcase(s, harness_tcase("publish", publication_on_one_node_ends_the_wait_on_another, 120));
	suite_add_tcase(s, harness_tcase("killed", killed_lease_holder_is_taken_over, 120));
	suite_add_tcase(s, harness_tcase("release", release_on_one_node_lets_another_claim, 120));
	suite_add_tcase(s, harness_tcase("timeout", wait_for_another_nodes_lease_runs_out, 120));
	return harness_main(s);
}
