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
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static int hello(void)
{
	return harness_raw_hello(harness.socket);
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

/* ---- a node's claims are shared: per process, a full table, expiry ---- */

/* A get of text's program by digest (id), or with its text. */
static char *get_json(int id, const char *text, bool by_digest)
{
	cJSON *o = cJSON_CreateObject(), *src = cJSON_CreateObject();
	char hex[65];
	cJSON_AddStringToObject(o, "op", "get");
	cJSON_AddNumberToObject(o, "id", id);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "sources"), src);
	cJSON_AddStringToObject(src, "name", "prog.c");
	if (by_digest) {
		harness_sha256_hex(text, hex);
		cJSON_AddStringToObject(src, "sha256", hex);
	} else {
		cJSON_AddStringToObject(src, "text", text);
	}
	char *s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	ck_assert_ptr_nonnull(s);
	return s;
}

/* Another process's claims: it claims per_conn made-up aliases on each of
 * nconns connections, all sent before any reply is read (as fast as one
 * process can ask), counts the replies, and holds its connections until
 * the test closes ctl. */
struct hog {
	pid_t pid;
	int ctl;                 /* closing it lets the process go */
	int granted, refused;    /* "claimed", "not_found" */
	char said[256];          /* the message of its first refusal */
};

struct hog_report {
	int granted, refused;
	char said[256];
};

static void hog_run(int up, int down, const char *prefix, int nconns, int per_conn)
{
	struct hog_report rep = { 0 };
	char alias[64];
	int *fds = calloc((size_t)nconns, sizeof(int));
	for (int i = 0; i < nconns; i++) {
		fds[i] = hello();
		for (int j = 0; j < per_conn; j++) {
			snprintf(alias, sizeof(alias), "%s:%d:%d", prefix, i, j);
			send_claim(fds[i], j + 2, alias, 0);
		}
	}
	for (int i = 0; i < nconns; i++) {
		for (int j = 0; j < per_conn; j++) {
			cJSON *r = harness_raw_recv(fds[i]);
			const char *code = r == NULL ? "closed" : harness_error_code(r);
			if (strcmp(code, "claimed") == 0) {
				rep.granted++;
			} else {
				if (rep.refused++ == 0)
					snprintf(rep.said, sizeof(rep.said), "%s: %s", code,
						 harness_str(cJSON_GetObjectItem(r, "error"), "message"));
			}
			cJSON_Delete(r);
		}
	}
	if (write(up, &rep, sizeof(rep)) != (ssize_t)sizeof(rep))
		_exit(1);
	char byte;
	while (read(down, &byte, 1) > 0)
		;
	_exit(0);
}

/* The test's ends of the running hogs' pipes: a hog forked later closes
 * them, so that each hog sees its own pipe close. */
static int hog_ctls[32];
static int nhog_ctls;

static void hog_start(struct hog *h, const char *prefix, int nconns, int per_conn)
{
	int up[2], down[2];
	ck_assert_int_lt(nhog_ctls, 32);
	ck_assert_int_eq(pipe(up), 0);
	ck_assert_int_eq(pipe(down), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);   /* a test that fails takes it along */
		for (int i = 0; i < nhog_ctls; i++)
			close(hog_ctls[i]);
		close(up[0]);
		close(down[1]);
		hog_run(up[1], down[0], prefix, nconns, per_conn);
	}
	close(up[1]);
	close(down[0]);
	hog_ctls[nhog_ctls++] = down[1];
	*h = (struct hog){ .pid = pid, .ctl = down[1] };
	struct hog_report rep;
	ck_assert_msg(read(up[0], &rep, sizeof(rep)) == (ssize_t)sizeof(rep),
		      "the claiming process %d failed", (int)pid);
	close(up[0]);
	h->granted = rep.granted;
	h->refused = rep.refused;
	snprintf(h->said, sizeof(h->said), "%s", rep.said);
}

static void hog_stop(struct hog *h)
{
	for (int i = 0; i < nhog_ctls; i++)
		if (hog_ctls[i] == h->ctl)
			hog_ctls[i] = hog_ctls[--nhog_ctls];
	close(h->ctl);
	ck_assert_int_eq(harness_wait(h->pid, 60), 0);
}

/* The member of status's claim_holders for pid, or NULL. */
static const cJSON *holder_of(const cJSON *st, pid_t pid)
{
	const cJSON *h;
	cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(st, "claim_holders"))
		if (harness_num(h, "pid") == pid)
			return h;
	return NULL;
}

/* Gets by digest of a new program on two fresh connections of this
 * process: the first takes the text's turn (need_sources), the second
 * waits for that text rather than being asked for its own; the text sent
 * answers both. */
static void a_herd_still_sends_one_text(const char *name, int value)
{
	char *text = harness_program(name, value);
	char *by_digest = get_json(2, text, true), *with_text = get_json(3, text, false);
	int64_t waits = st("text_waits");
	int a = hello(), b = hello();
	harness_raw_send(a, by_digest);
	expect(a, "need_sources");
	harness_raw_send(b, by_digest);
	st_until("text_waits", waits + 1);
	harness_raw_send(a, with_text);
	expect(a, "ok");
	expect(b, "ok");
	close(a);
	close(b);
	free(by_digest);
	free(with_text);
	free(text);
}

/*
 * One process asks for 64 x 1,024 claims at once (the table's 65,536):
 * it is granted its share, 4,096, and told so; another process still
 * claims, and a herd of gets by digest still takes its text's turn; status
 * (and kiln status) names the holder: its pid, connections and claims.
 */
START_TEST(one_process_cannot_fill_the_table)
{
	harness_start(NULL);
	struct hog h;
	hog_start(&h, "t:hog", 64, 1024);
	ck_assert_msg(h.granted == 4096, "granted %d claims", h.granted);
	ck_assert_int_eq(h.refused, 64 * 1024 - 4096);
	ck_assert_msg(strstr(h.said, "not_found") == h.said && strstr(h.said, "this process") != NULL &&
		      strstr(h.said, "4096") != NULL, "%s", h.said);
	int v = hello();
	send_claim(v, 2, "t:victim", 0);
	expect(v, "claimed");
	a_herd_still_sends_one_text("herd1", 51);
	cJSON *s = harness_status_at(harness.socket);
	const cJSON *hh = holder_of(s, h.pid), *me = holder_of(s, getpid());
	ck_assert_msg(hh != NULL, "status names no holder pid %d", (int)h.pid);
	ck_assert_int_eq(harness_num(hh, "claims"), 4096);
	ck_assert_int_eq(harness_num(hh, "connections"), 64);
	ck_assert_msg(me != NULL && harness_num(me, "claims") == 1, "this process's claim");
	ck_assert_int_eq(harness_num(s, "claims_held"), 4097);
	ck_assert_int_eq(harness_num(s, "claims_refused"), 64 * 1024 - 4096);
	cJSON_Delete(s);
	char *out = NULL, *err = NULL, want[64];
	ck_assert_int_eq(harness_cli(&out, &err, "status", "-v", NULL), 0);
	snprintf(want, sizeof(want), "pid %d", (int)h.pid);
	ck_assert_msg(strstr(out, want) != NULL && strstr(out, "4096 claims on 64 connections") != NULL,
		      "%s", out);
	free(out);
	free(err);
	hog_stop(&h);
	st_until("claims_held", 1);
	close(v);
	harness_stop();
}
END_TEST

/*
 * Sixteen processes take 4,096 claims each and fill the table: a process
 * that holds none still claims (the one that holds the most gives up its
 * least recent claim: claims_displaced), and a herd still takes its
 * text's turn.
 */
START_TEST(a_full_table_makes_room_for_a_lighter_process)
{
	harness_start(NULL);
	struct hog h[16];
	char prefix[32];
	for (int i = 0; i < 16; i++) {
		snprintf(prefix, sizeof(prefix), "t:full%d", i);
		hog_start(&h[i], prefix, 4, 1024);
		ck_assert_msg(h[i].granted == 4096, "process %d: granted %d", i, h[i].granted);
	}
	ck_assert_int_eq(st("claims_held"), 65536);
	int v = hello();
	send_claim(v, 2, "t:light", 0);
	expect(v, "claimed");
	ck_assert_int_eq(st("claims_displaced"), 1);
	ck_assert_int_eq(st("claims_held"), 65536);
	a_herd_still_sends_one_text("herd2", 52);
	for (int i = 0; i < 16; i++)
		hog_stop(&h[i]);
	st_until("claims_held", 1);
	close(v);
	harness_stop();
}
END_TEST

/*
 * A claim whose owner shows no progress for --claim-expiry ends as if its
 * owner had gone: the waiter takes it over; the old owner's release then
 * finds nothing to release.
 */
START_TEST(an_idle_claim_expires_and_is_taken_over)
{
	harness_start("--claim-expiry", "1", NULL);
	int a = hello(), b = hello();
	send_claim(a, 2, "t:idle", 0);
	expect(a, "claimed");
	send_claim(b, 2, "t:idle", 60000);
	expect(b, "claimed");
	ck_assert_int_eq(st("claims_expired"), 1);
	ck_assert_int_eq(st("claim_takeovers"), 1);
	harness_raw_send(a, "{\"op\":\"release\",\"id\":3,\"alias\":\"t:idle\"}");
	cJSON *r = harness_raw_recv(a);
	ck_assert_msg(r != NULL && cJSON_IsFalse(cJSON_GetObjectItem(r, "released")),
		      "the expired claim was still its owner's");
	cJSON_Delete(r);
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
	harness_add(s, "one_process", one_process_cannot_fill_the_table, 180);
	harness_add(s, "full_table", a_full_table_makes_room_for_a_lighter_process, 180);
	harness_add(s, "expiry", an_idle_claim_expires_and_is_taken_over, 120);
	return harness_main(s);
}
