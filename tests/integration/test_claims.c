/*
 * Integration tests of claims (daemon/claims.h): a lookup that claims an
 * alias on a miss, lookups that wait for another client's claim and are
 * answered when the alias is published (a hit), when the claim ends
 * without it (a takeover), or when their own wait runs out; release; a
 * waiter or owner that goes away; limits and malformed fields; kilnd
 * stopping with lookups waiting; libkiln's kiln_lookup_claim and
 * kiln_release_claim, and a client timeout shorter than the wait. Spoken
 * with raw frames and libkiln, published with libkiln's real get.
 */
#include "harness.h"

#include <poll.h>
#include <pthread.h>
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
	/* four lookups, each counted once as a miss when it came */
	ck_assert_int_eq(st("misses"), 4);
	ck_assert_int_eq(st("hits"), 0);
	harness_get_program(NULL, "pub", 7, "t:pub", key);
	int64_t misses = st("misses");
	char *code = reply_code(b, got);
	ck_assert_msg(strcmp(code, "ok") == 0 && strcmp(got, key) == 0, "b: %s %s", code, got);
	free(code);
	code = reply_code(c, got);
	ck_assert_msg(strcmp(code, "ok") == 0 && strcmp(got, key) == 0, "c: %s %s", code, got);
	free(code);
	ck_assert_int_eq(st("claims_held"), 0);
	ck_assert_int_eq(st("claims"), 1);
	ck_assert_int_eq(st("claim_waits"), 2);
	/* the waiters' answers are not counted a second time */
	ck_assert_int_eq(st("misses"), misses);
	ck_assert_int_eq(st("hits"), 0);
	/* found now: a claiming lookup is a plain hit */
	send_claim(a, 4, "t:pub", 0);
	expect(a, "ok");
	ck_assert_int_eq(st("hits"), 1);
	close(a);
	close(b);
	close(c);
	harness_stop();
}
END_TEST

/* The owner goes away: the first waiter takes the claim over, the others
 * wait on. A stranger cannot release it. The new owner releases it (its
 * build failed): the waiters are answered not_found at once, to produce
 * it themselves, not one after another. */
START_TEST(owner_gone_is_taken_over_a_release_is_not)
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
	expect(c, "not_found");
	ck_assert_int_eq(st("claim_takeovers"), 1);
	ck_assert_int_eq(st("claims_held"), 0);
	close(c);
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

/* Polls status until field reaches want (a generous deadline bounds it). */
static void st_until(const char *field, int64_t want)
{
	double end = harness_now_s() + 30;
	int64_t got;
	while ((got = st(field)) != want && harness_now_s() < end)
		harness_sleep_ms(20);
	ck_assert_msg(got == want, "status %s: %lld, expected %lld", field, (long long)got,
		      (long long)want);
}

/* A kiln_lookup_claim in a thread of its own. */
struct claimer {
	struct kiln *k;
	const char *alias;
	unsigned wait_ms;
	int rc;
	char key[72];
	char msg[512];         /* kiln_errmsg is the failing thread's */
	pthread_t thread;
};

static void *claim_thread(void *arg)
{
	struct claimer *c = arg;
	struct kiln_program *p = NULL;
	c->rc = kiln_lookup_claim(c->k, c->alias, NULL, NULL, c->wait_ms, &p);
	snprintf(c->key, sizeof(c->key), "%s", p != NULL ? kiln_program_key(p) : "");
	snprintf(c->msg, sizeof(c->msg), "%s", c->rc != KILN_OK ? kiln_errmsg(c->k) : "");
	return NULL;
}

static struct kiln *open_kiln(void)
{
	struct kiln *k = NULL;
	int rc = kiln_open(harness.socket, &k);
	ck_assert_msg(rc == KILN_OK, "kiln_open: %s", kiln_errmsg(NULL));
	return k;
}

/* libkiln's side: KILN_ECLAIMED for the first, a wait in another thread
 * answered with the program the first gets (while the same connection
 * serves other calls), KILN_ENOTFOUND when another holds the claim and
 * the caller does not wait, kiln_release_claim for the owner only. */
START_TEST(libkiln_claims)
{
	char key[72];
	struct kiln_program *p = NULL;
	harness_start(NULL);
	struct kiln *k1 = open_kiln(), *k2 = open_kiln();
	ck_assert_int_eq(kiln_lookup_claim(k1, "t:lib", NULL, NULL, 0, &p), KILN_ECLAIMED);
	ck_assert_ptr_null(p);
	ck_assert_msg(strstr(kiln_errmsg(k1), "holds its claim") != NULL, "%s", kiln_errmsg(k1));
	ck_assert_msg(strstr(kiln_strerror(KILN_ECLAIMED), "claim") != NULL, "%s",
		      kiln_strerror(KILN_ECLAIMED));
	struct claimer w = { .k = k2, .alias = "t:lib", .wait_ms = 60000 };
	ck_assert_int_eq(pthread_create(&w.thread, NULL, claim_thread, &w), 0);
	st_until("claim_waits", 1);
	/* k2 waits in its thread; its connection still answers this one */
	ck_assert_int_eq(kiln_lookup_claim(k2, "t:lib", NULL, NULL, 0, &p), KILN_ENOTFOUND);
	ck_assert_msg(strstr(kiln_errmsg(k2), "claimed by another client") != NULL, "%s",
		      kiln_errmsg(k2));
	harness_get_program(k1, "lib", 11, "t:lib", key);
	ck_assert_int_eq(pthread_join(w.thread, NULL), 0);
	ck_assert_msg(w.rc == KILN_OK, "%s: %s", kiln_strerror(w.rc), w.msg);
	ck_assert_str_eq(w.key, key);
	ck_assert_int_eq(kiln_lookup_claim(k2, "t:lib", NULL, NULL, 0, &p), KILN_OK);
	ck_assert_str_eq(kiln_program_key(p), key);
	/* release: the owner's only; then another claims it */
	ck_assert_int_eq(kiln_lookup_claim(k1, "t:lib2", NULL, NULL, 0, &p), KILN_ECLAIMED);
	ck_assert_int_eq(kiln_release_claim(k2, "t:lib2"), 0);
	ck_assert_int_eq(kiln_release_claim(k1, "t:lib2"), 1);
	ck_assert_int_eq(kiln_release_claim(k1, "t:lib2"), 0);
	ck_assert_int_eq(kiln_lookup_claim(k2, "t:lib2", NULL, NULL, 0, &p), KILN_ECLAIMED);
	/* refused before any IPC */
	ck_assert_int_eq(kiln_lookup_claim(k2, "t:lib2", NULL, NULL, 600001, &p), KILN_EINVAL);
	ck_assert_int_eq(kiln_lookup_claim(k2, "has space", NULL, NULL, 0, &p), KILN_EINVAL);
	ck_assert_int_eq(kiln_release_claim(k2, NULL), KILN_EINVAL);
	kiln_close(k2);
	st_until("claims_held", 0);
	kiln_close(k1);
	harness_stop();
}
END_TEST

/* kiln_set_timeout bounds a silent kilnd, not a wait: a lookup waits
 * past it (kilnd's heartbeats keep the connection talking) and gets the
 * program published after the deadline would have passed. */
START_TEST(the_client_timeout_spares_the_wait)
{
	char key[72];
	harness_start(NULL);
	struct kiln *k1 = open_kiln(), *k2 = open_kiln();
	struct kiln_program *p = NULL;
	ck_assert_int_eq(kiln_lookup_claim(k1, "t:slow", NULL, NULL, 0, &p), KILN_ECLAIMED);
	ck_assert_int_eq(kiln_set_timeout(k2, 0.5), KILN_OK);   /* 10 s: two heartbeats */
	struct claimer w = { .k = k2, .alias = "t:slow", .wait_ms = 120000 };
	ck_assert_int_eq(pthread_create(&w.thread, NULL, claim_thread, &w), 0);
	st_until("claim_waits", 1);
	harness_sleep_ms(12500);
	harness_get_program(k1, "slow", 4, "t:slow", key);
	ck_assert_int_eq(pthread_join(w.thread, NULL), 0);
	ck_assert_msg(w.rc == KILN_OK, "%s: %s", kiln_strerror(w.rc), w.msg);
	ck_assert_str_eq(w.key, key);
	kiln_close(k1);
	kiln_close(k2);
	harness_stop();
}
END_TEST

/* 1,024 claims per connection (then not_found, no claim), 4,096 lookups
 * waiting on one claim (then not_found at once). */
START_TEST(limits_hold)
{
	char text[256];
	harness_start("--max-requests", "5000", NULL);
	int a = hello(), w = hello();
	for (int i = 0; i < 1024; i++) {
		snprintf(text, sizeof(text), "t:lim%d", i);
		send_claim(a, i + 2, text, 0);
		expect(a, "claimed");
	}
	send_claim(a, 2000, "t:lim-more", 0);
	cJSON *r = harness_raw_recv(a);
	ck_assert_str_eq(harness_error_code(r), "not_found");
	ck_assert_msg(strstr(harness_str(cJSON_GetObjectItem(r, "error"), "message"), "limit") != NULL,
		      "no word of the limit");
	cJSON_Delete(r);
	ck_assert_int_eq(st("claims_held"), 1024);
	for (int i = 0; i <= 4096; i++)
		send_claim(w, i + 2, "t:lim0", 60000);
	r = harness_raw_recv(w);     /* the one past the limit, at once */
	ck_assert_str_eq(harness_error_code(r), "not_found");
	ck_assert_int_eq((int)cJSON_GetObjectItem(r, "id")->valuedouble, 4096 + 2);
	cJSON_Delete(r);
	st_until("claim_waits", 4096);
	close(w);                    /* its 4,096 waits go with it */
	close(a);
	st_until("claims_held", 0);
	ck_assert_int_eq(st("claim_takeovers"), 0);
	harness_stop();
}
END_TEST

/* A waiter that left is passed over: the next live one takes over. */
START_TEST(a_waiter_that_left_is_passed_over)
{
	harness_start(NULL);
	int a = hello(), gone = hello(), b = hello();
	send_claim(a, 2, "t:left", 0);
	expect(a, "claimed");
	send_claim(gone, 2, "t:left", 30000);
	st_until("claim_waits", 1);
	send_claim(b, 2, "t:left", 30000);
	st_until("claim_waits", 2);
	close(gone);
	harness_sleep_ms(100);
	close(a);
	expect(b, "claimed");
	ck_assert_int_eq(st("claim_takeovers"), 1);
	ck_assert_int_eq(st("claims_held"), 1);
	close(b);
	harness_stop();
}
END_TEST

/* The producer's get hits an entry the alias names already (a waiting
 * lookup that asked for another toolchain missed it): that ends the
 * claim too, and the waiter looks again at once. */
START_TEST(a_hit_under_the_alias_ends_the_claim)
{
	char key[72];
	harness_start(NULL);
	harness_get_program(NULL, "same", 5, "t:same", key);
	int a = hello(), b = hello();
	harness_raw_send(a, "{\"op\":\"lookup\",\"id\":2,\"alias\":\"t:same\",\"toolchain\":\"nope\","
			 "\"claim\":true}");
	expect(a, "claimed");
	harness_raw_send(b, "{\"op\":\"lookup\",\"id\":2,\"alias\":\"t:same\",\"toolchain\":\"nope\","
			 "\"claim\":true,\"wait_ms\":20000}");
	st_until("claim_waits", 1);
	harness_get_program(NULL, "same", 5, "t:same", key);
	expect(b, "claimed");        /* ended, looked again, missed again: its claim */
	ck_assert_int_eq(st("claim_timeouts"), 0);
	close(a);
	close(b);
	harness_stop();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("claims");
	harness_add(s, "publication", publication_answers_the_waiters, 120);
	harness_add(s, "takeover", owner_gone_is_taken_over_a_release_is_not, 120);
	harness_add(s, "waits", waits_end_and_waiters_may_leave, 120);
	harness_add(s, "malformed", malformed_claims_are_refused, 60);
	harness_add(s, "stopping", stopping_answers_the_waiters, 60);
	harness_add(s, "libkiln", libkiln_claims, 120);
	harness_add(s, "limits", limits_hold, 120);
	harness_add(s, "client_timeout", the_client_timeout_spares_the_wait, 120);
	harness_add(s, "waiter_left", a_waiter_that_left_is_passed_over, 120);
	harness_add(s, "hit_ends_claim", a_hit_under_the_alias_ends_the_claim, 120);
	return harness_main(s);
}
