/*
 * Integration tests of claims (daemon/claims.h): a lookup that claims an
 * alias on a miss, lookups that wait for another client's claim and are
 * answered when the alias is published (a hit), when the claim ends
 * without it (a takeover), or when their own wait runs out; release; a
 * waiter or owner that goes away; limits and malformed fields; kilnd
 * stopping with lookups waiting. Spoken with raw frames, published with
 * libkiln's real get.
 */
#include "harness.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int hello(void)
{
	int fd = harness_raw_connect(harness.socket);
	harness_raw_send(fd, "{\"op\":\"hello\",\"id\":1,\"proto\":3,\"client\":\"kiln-tests\"}");
	cJSON *r = harness_raw_recv(fd);
	ck_assert_msg(r != NULL && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok")),
		      "hello failed");
	cJSON_Delete(r);
	return fd;
}

static void send_claim(int fd, int id, const char *alias, int wait_ms)
{
	char text[512];
	snprintf(text, sizeof(text),
		 "{\"op\":\"lookup\",\"id\":%d,\"alias\":\"%s\",\"claim\":true,\"wait_ms\":%d}", id,
		 alias, wait_ms);
	harness_raw_send(fd, text);
}

/* The next reply on fd: its error code, or "ok" (then *key is its key). */
static char *reply_code(int fd, char key[72])
{
	cJSON *r = harness_raw_recv(fd);
	ck_assert_msg(r != NULL, "kilnd closed the connection");
	char *code = strdup(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok")) ? "ok"
			    : harness_error_code(r));
	if (key != NULL)
		snprintf(key, 72, "%s", cJSON_IsString(cJSON_GetObjectItem(r, "key"))
			 ? harness_str(r, "key") : "");
	cJSON_Delete(r);
	return code;
}

static void expect(int fd, const char *want)
{
	char *code = reply_code(fd, NULL);
	ck_assert_msg(strcmp(code, want) == 0, "got %s, expected %s", code, want);
	free(code);
}

/* Nothing arrives on fd within ms: the lookup waits. */
static void silent(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	ck_assert_msg(poll(&p, 1, ms) == 0, "a waiting lookup was answered");
}

static int64_t st(const char *field)
{
	return harness_status_num_at(harness.socket, field);
}

/* A claim, a second client waiting on it, the first client's build with
 * the alias: the waiter is answered with that entry; the claim is gone. */
START_TEST(publication_answers_the_waiters)
{
	char key[72], got[72];
	harness_start(NULL);
	int a = hello(), b = hello(), c = hello();
	send_claim(a, 2, "t:pub", 0);
	expect(a, "claimed");
	send_claim(a, 3, "t:pub", 0);     /* asked again: still its own */
	expect(a, "claimed");
	send_claim(b, 2, "t:pub", 30000);
	send_claim(c, 2, "t:pub", 30000);
	silent(b, 300);
	ck_assert_int_eq(st("claims_held"), 1);
	harness_get_program(NULL, "pub", 7, "t:pub", key);
	char *code = reply_code(b, got);
	ck_assert_msg(strcmp(code, "ok") == 0 && strcmp(got, key) == 0, "b: %s %s", code, got);
	free(code);
	code = reply_code(c, got);
	ck_assert_msg(strcmp(code, "ok") == 0 && strcmp(got, key) == 0, "c: %s %s", code, got);
	free(code);
	ck_assert_int_eq(st("claims_held"), 0);
	ck_assert_int_eq(st("claims"), 1);
	ck_assert_int_eq(st("claim_waits"), 2);
	/* found now: a claiming lookup is a plain hit */
	send_claim(a, 4, "t:pub", 0);
	expect(a, "ok");
	close(a);
	close(b);
	close(c);
	harness_stop();
}
END_TEST

/* The owner goes away, then releases: the first waiter takes the claim
 * over each time, the others wait on. A stranger cannot release it. */
START_TEST(owner_gone_or_released_is_taken_over)
{
	harness_start(NULL);
	int a = hello(), b = hello(), c = hello();
	send_claim(a, 2, "t:over", 0);
	expect(a, "claimed");
	send_claim(b, 2, "t:over", 30000);
	harness_sleep_ms(50);
	send_claim(c, 2, "t:over", 30000);
	silent(b, 200);
	close(a);                          /* the producer died */
	expect(b, "claimed");
	silent(c, 200);
	harness_raw_send(c, "{\"op\":\"release\",\"id\":3,\"alias\":\"t:over\"}");
	cJSON *r = harness_raw_recv(c);
	ck_assert_msg(r != NULL && cJSON_IsFalse(cJSON_GetObjectItem(r, "released")),
		      "a stranger released the claim");
	cJSON_Delete(r);
	harness_raw_send(b, "{\"op\":\"release\",\"id\":3,\"alias\":\"t:over\"}");
	r = harness_raw_recv(b);
	ck_assert_msg(r != NULL && cJSON_IsTrue(cJSON_GetObjectItem(r, "released")), "not released");
	cJSON_Delete(r);
	expect(c, "claimed");
	ck_assert_int_eq(st("claim_takeovers"), 2);
	ck_assert_int_eq(st("claims_held"), 1);
	close(c);
	ck_assert_int_eq(st("claims_held"), 0);
	close(b);
	harness_stop();
}
END_TEST

/* A wait that runs out, and one of 0: not found, no claim; a waiter that
 * goes away; kilnd healthy after. */
START_TEST(waits_end_and_waiters_may_leave)
{
	char key[72];
	harness_start(NULL);
	int a = hello(), b = hello();
	send_claim(a, 2, "t:wait", 0);
	expect(a, "claimed");
	double t0 = harness_now_s();
	send_claim(b, 2, "t:wait", 300);
	expect(b, "not_found");
	ck_assert_msg(harness_now_s() - t0 >= 0.25, "the wait did not wait");
	send_claim(b, 3, "t:wait", 0);
	expect(b, "not_found");
	ck_assert_int_eq(st("claim_timeouts"), 1);
	int w = hello();
	send_claim(w, 2, "t:wait", 30000);
	harness_sleep_ms(100);
	close(w);                          /* gone while it waits */
	harness_get_program(NULL, "waited", 3, "t:wait", key);
	send_claim(b, 4, "t:wait", 0);
	expect(b, "ok");
	ck_assert_int_eq(st("claims_held"), 0);
	close(a);
	close(b);
	harness_stop();
}
END_TEST

/* Malformed claims are refused naming the field, on a connection that
 * stays usable. */
START_TEST(malformed_claims_are_refused)
{
	harness_start(NULL);
	int fd = hello();
	static const char *const bad[] = {
		"{\"op\":\"lookup\",\"id\":2,\"key\":\"" "0123456789abcdef0123456789abcdef"
		"0123456789abcdef0123456789abcdef\",\"claim\":true}",
		"{\"op\":\"lookup\",\"id\":2,\"alias\":\"t:m\",\"claim\":\"yes\"}",
		"{\"op\":\"lookup\",\"id\":2,\"alias\":\"t:m\",\"claim\":true,\"wait_ms\":-1}",
		"{\"op\":\"lookup\",\"id\":2,\"alias\":\"t:m\",\"claim\":true,\"wait_ms\":600001}",
		"{\"op\":\"lookup\",\"id\":2,\"alias\":\"t:m\",\"claim\":true,\"wait_ms\":1.5}",
		"{\"op\":\"lookup\",\"id\":2,\"alias\":\"t:m\",\"wait_ms\":100}",
		"{\"op\":\"release\",\"id\":2}",
		"{\"op\":\"release\",\"id\":2,\"alias\":\"has space\"}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		harness_raw_send(fd, bad[i]);
		char *code = reply_code(fd, NULL);
		ck_assert_msg(strcmp(code, "bad_request") == 0 || strcmp(code, "bad_name") == 0,
			      "%s: %s", bad[i], code);
		free(code);
	}
	ck_assert_int_eq(st("claims_held"), 0);
	close(fd);
	harness_stop();
}
END_TEST

/* kilnd stops while lookups wait: they are answered, kilnd exits cleanly. */
START_TEST(stopping_answers_the_waiters)
{
	harness_start(NULL);
	int a = hello(), b = hello();
	send_claim(a, 2, "t:stop", 0);
	expect(a, "claimed");
	send_claim(b, 2, "t:stop", 60000);
	silent(b, 200);
	harness_stop();
	cJSON *r = harness_raw_recv(b);
	if (r != NULL) {
		ck_assert_str_eq(harness_error_code(r), "shutting_down");
		cJSON_Delete(r);
	}
	close(a);
	close(b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("claims");
	harness_add(s, "publication", publication_answers_the_waiters, 120);
	harness_add(s, "takeover", owner_gone_or_released_is_taken_over, 120);
	harness_add(s, "waits", waits_end_and_waiters_may_leave, 120);
	harness_add(s, "malformed", malformed_claims_are_refused, 60);
	harness_add(s, "stopping", stopping_answers_the_waiters, 60);
	return harness_main(s);
}
