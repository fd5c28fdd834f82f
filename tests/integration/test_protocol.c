/*
 * Integration tests of the wire protocol against the real daemon, spoken
 * with raw frames: invalid requests get error replies on a connection that
 * stays usable, framing errors get one reply and a close, and nothing takes
 * the daemon down.
 */
#include "harness.h"

#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Connects and says hello; returns the socket. */
static int hello(void)
{
	int fd = harness_raw_connect(harness.socket);
	cJSON *r;

	harness_raw_send(fd, "{\"op\":\"hello\",\"id\":1,\"proto\":3,\"client\":\"kiln-tests\"}");
	r = harness_raw_recv(fd);
	ck_assert_msg(r != NULL, "no reply to hello");
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok")));
	ck_assert_int_eq(harness_num(r, "id"), 1);
	ck_assert_int_eq(harness_num(r, "proto"), 3);
	/* kilnd prints what never changes once; every member must be there. */
	if (harness.pid > 0)
		ck_assert_int_eq(harness_num(r, "pid"), harness.pid);
	ck_assert_str_eq(harness_str(r, "socket"), harness.socket);
	ck_assert_str_eq(harness_str(r, "cache_dir"), harness.cache);
	ck_assert_ptr_nonnull(harness_str(r, "version"));
	ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(r, "heartbeat_ms"));
	cJSON_Delete(r);
	return fd;
}

/* A hit's reply says which file its descriptor is open on (dev and ino, the
 * object at its path); a build's reply leaves it to the client's fstat. */
START_TEST(hit_reply_says_the_file)
{
	struct kiln *k;
	char key[72];

	harness_start(NULL);
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	harness_get_program(k, "said", 77, "t:said", key);
	kiln_close(k);
	int fd = harness_raw_connect(harness.socket);
	harness_raw_send(fd, "{\"op\":\"hello\",\"id\":1,\"proto\":3}");
	cJSON_Delete(harness_raw_recv(fd));
	harness_raw_send(fd, "{\"op\":\"lookup\",\"id\":2,\"alias\":\"t:said\"}");
	cJSON *r = harness_raw_recv(fd);
	ck_assert_ptr_nonnull(r);
	ck_assert_msg(cJSON_IsTrue(cJSON_GetObjectItem(r, "cached")), "not a hit");
	struct stat st;
	ck_assert_int_eq(stat(harness_str(r, "path"), &st), 0);
	ck_assert_int_eq(harness_num(r, "dev"), (int64_t)st.st_dev);
	ck_assert_int_eq(harness_num(r, "ino"), (int64_t)st.st_ino);
	cJSON_Delete(r);
	close(fd);
	harness_stop();
}
END_TEST

/* hello's reply: the id exact up to 2^53 - 1, heartbeats when asked, the
 * same members on every connection. */
START_TEST(hello_reply_carries_the_daemon)
{
	harness_start(NULL);
	for (int i = 0; i < 3; i++)
		close(hello());
	int fd = harness_raw_connect(harness.socket);
	harness_raw_send(fd, "{\"op\":\"hello\",\"id\":9007199254740991,\"proto\":3,"
			 "\"heartbeat\":true}");
	cJSON *r = harness_raw_recv(fd);
	ck_assert_ptr_nonnull(r);
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok")));
	ck_assert(harness_num(r, "id") == 9007199254740991LL);
	ck_assert_int_eq(harness_num(r, "heartbeat_ms"), 5000);
	ck_assert_int_eq(harness_num(r, "pid"), harness.pid);
	ck_assert_str_eq(harness_str(r, "cache_dir"), harness.cache);
	cJSON_Delete(r);
	close(fd);
	harness_stop();
}
END_TEST

/* Sends one request and requires a failure reply with code and id. */
static void expect_error(int fd, const char *request, uint64_t id, const char *code)
{
	cJSON *r;

	harness_raw_send(fd, request);
	r = harness_raw_recv(fd);
	ck_assert_msg(r != NULL, "the daemon closed the connection after %s", request);
	ck_assert_msg(strcmp(harness_error_code(r), code) == 0, "%s got %s, expected %s", request,
		      harness_error_code(r), code);
	ck_assert_msg(harness_num(r, "id") == (int64_t)id, "%s: the reply has id %lld", request,
		      (long long)harness_num(r, "id"));
	cJSON_Delete(r);
}

/* Requires that the connection still answers a status request. */
static void expect_usable(int fd, uint64_t id)
{
	char req[64];
	cJSON *r;

	snprintf(req, sizeof(req), "{\"op\":\"status\",\"id\":%llu}", (unsigned long long)id);
	harness_raw_send(fd, req);
	r = harness_raw_recv(fd);
	ck_assert_msg(r != NULL, "the connection was closed");
	ck_assert_msg(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok")), "status failed");
	ck_assert_int_eq(harness_num(r, "id"), (int64_t)id);
	ck_assert_int_eq(harness_num(r, "pid"), harness.pid);
	cJSON_Delete(r);
}

/* Requires one error reply with code and id 0, then the close. */
static void expect_error_then_close(int fd, const char *code)
{
	cJSON *r = harness_raw_recv(fd);

	ck_assert_msg(r != NULL, "no error reply before the close (expected %s)", code);
	ck_assert_str_eq(harness_error_code(r), code);
	ck_assert_int_eq(harness_num(r, "id"), 0);
	cJSON_Delete(r);
	r = harness_raw_recv(fd);
	ck_assert_msg(r == NULL, "the connection stayed open after %s", code);
}

/* The daemon is up and its status answers through the CLI. */
static void expect_daemon_up(void)
{
	cJSON *st;

	ck_assert_msg(harness_alive(harness.pid), "kilnd died");
	st = harness_status();
	ck_assert_int_eq(harness_num(st, "pid"), harness.pid);
	cJSON_Delete(st);
}

START_TEST(invalid_requests_get_errors_and_the_connection_stays)
{
	static const struct {
		const char *request;
		uint64_t id;
		const char *code;
	} cases[] = {
		{ "{\"op\":\"frobnicate\",\"id\":2}", 2, "unknown_op" },
		{ "{\"op\":\"get\",\"id\":3,\"sources\":\"x.c\"}", 3, "bad_request" },
		{ "{\"op\":\"get\",\"id\":4,\"sources\":[{\"name\":\"a.c\",\"text\":5}]}", 4,
		  "bad_request" },
		{ "{\"op\":\"get\",\"id\":5,\"sources\":[{\"name\":\"a.c\",\"text\":\"int x;\"}],"
		  "\"args\":\"-O2\"}", 5, "bad_request" },
		{ "{\"op\":\"get\",\"id\":6}", 6, "bad_request" },
		{ "{\"op\":\"get\",\"id\":7,\"sources\":[{\"name\":\"a.c\",\"text\":\"x\","
		  "\"path\":\"/etc/hostname\"}]}", 7, "bad_request" },
		{ "{\"op\":\"lookup\",\"id\":8,\"alias\":42}", 8, "bad_request" },
		{ "{\"op\":\"lookup\",\"id\":9}", 9, "bad_request" },
		{ "{\"op\":\"gc\",\"id\":10,\"max_size\":\"1G\"}", 10, "bad_request" },
		{ "{\"op\":\"show\",\"id\":11}", 11, "bad_request" },
		{ "{\"op\":\"status\",\"id\":\"twelve\"}", 0, "bad_request" },
		{ "{\"op\":\"get\",\"id\":13,\"sources\":[{\"name\":\"../x.c\",\"text\":\"int x;\"}]}",
		  13, "bad_name" },
		{ "{\"op\":\"get\",\"id\":14,\"sources\":[{\"name\":\"a//b.c\",\"text\":\"int x;\"}]}",
		  14, "bad_name" },
		{ "{\"op\":\"get\",\"id\":15,\"sources\":[{\"name\":\".x.c\",\"text\":\"int x;\"}]}",
		  15, "bad_name" },
		{ "{\"op\":\"get\",\"id\":16,\"sources\":[{\"name\":\"a.c\",\"text\":\"int x;\"}],"
		  "\"alias\":\"two words\"}", 16, "bad_name" },
		{ "{\"op\":\"get\",\"id\":17,\"sources\":[{\"name\":\"a.c\",\"text\":\"int x;\"}],"
		  "\"args\":[\"-o\",\"/tmp/x\"]}", 17, "bad_arg" },
		{ "{\"op\":\"get\",\"id\":18,\"sources\":[{\"name\":\"a.c\",\"text\":\"int x;\"}],"
		  "\"args\":[\"-MF\",\"/tmp/x.d\"]}", 18, "bad_arg" },
		{ "{\"op\":\"get\",\"id\":19,\"sources\":[{\"name\":\"a.c\",\"text\":\"int x;\"}],"
		  "\"args\":[\"-c\"]}", 19, "bad_arg" },
		{ "{\"op\":\"get\",\"id\":20,\"sources\":[{\"name\":\"a.c\",\"text\":\"int x;\"}],"
		  "\"args\":[\"@/etc/hostname\"]}", 20, "bad_arg" },
		{ "{\"op\":\"get\",\"id\":21,\"sources\":[{\"name\":\"a.c\",\"text\":\"int x;\"}],"
		  "\"args\":[\"-fplugin=/tmp/p.so\"]}", 21, "bad_arg" },
		{ "{\"op\":\"get\",\"id\":22,\"sources\":[{\"name\":\"a.c\",\"text\":\"int x;\"}],"
		  "\"args\":[\"-Wl,-o,/tmp/x\"]}", 22, "bad_arg" },
		{ "{\"op\":\"get\",\"id\":23,\"sources\":[{\"name\":\"a.c\",\"text\":\"int x;\"}],"
		  "\"toolchain\":\"nonesuch\"}", 23, "bad_toolchain" },
		{ "{\"op\":\"lookup\",\"id\":24,\"alias\":\"it:nothing\"}", 24, "not_found" },
		{ "{\"op\":\"show\",\"id\":25,\"ref\":\"abcd\"}", 25, "not_found" },
	};
	int fd;

	harness_start(NULL);
	fd = hello();
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		expect_error(fd, cases[i].request, cases[i].id, cases[i].code);
		expect_usable(fd, 1000 + i);
	}
	close(fd);

	/* Nothing but hello is served before a hello. */
	fd = harness_raw_connect(harness.socket);
	expect_error(fd, "{\"op\":\"status\",\"id\":1}", 1, "bad_request");
	/* A protocol version mismatch says which version the daemon speaks. */
	{
		cJSON *r, *err;

		harness_raw_send(fd, "{\"op\":\"hello\",\"id\":2,\"proto\":999}");
		r = harness_raw_recv(fd);
		ck_assert_ptr_nonnull(r);
		ck_assert_str_eq(harness_error_code(r), "proto_mismatch");
		err = cJSON_GetObjectItemCaseSensitive(r, "error");
		ck_assert_int_eq(harness_num(err, "proto"), 3);
		cJSON_Delete(r);
	}
	close(fd);
	expect_daemon_up();
	harness_stop();
}
END_TEST

START_TEST(pipelined_requests_are_answered_in_order)
{
	static const char *reqs[] = {
		"{\"op\":\"hello\",\"id\":1,\"proto\":3}",
		"{\"op\":\"status\",\"id\":2}",
		"{\"op\":\"list\",\"id\":3}",
		"{\"op\":\"frobnicate\",\"id\":4}",
		"{\"op\":\"status\",\"id\":5}",
	};
	char buf[1024];
	size_t len = 0;
	int fd;

	harness_start(NULL);
	/* All requests in one write. */
	for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
		size_t n = strlen(reqs[i]);

		buf[len++] = 0;
		buf[len++] = 0;
		buf[len++] = (char)(n >> 8);
		buf[len++] = (char)n;
		memcpy(buf + len, reqs[i], n);
		len += n;
	}
	fd = harness_raw_connect(harness.socket);
	harness_raw_send_bytes(fd, buf, len);
	for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
		cJSON *r = harness_raw_recv(fd);

		ck_assert_msg(r != NULL, "no reply %zu", i + 1);
		ck_assert_int_eq(harness_num(r, "id"), (int64_t)i + 1);
		ck_assert_int_eq(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok")), i != 3);
		if (i == 2)
			ck_assert(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(r, "entries")));
		cJSON_Delete(r);
	}
	close(fd);
	expect_daemon_up();
	harness_stop();
}
END_TEST

START_TEST(framing_errors_get_a_reply_then_a_close)
{
	static const unsigned char zero[4] = { 0, 0, 0, 0 };
	static const unsigned char huge[4] = { 0xff, 0xff, 0xff, 0xff };
	static const unsigned char over[4] = { 0, 0x01, 0, 0 };   /* 64 KiB, over --max-frame */
	int fd;

	harness_start("--max-frame", "32K", NULL);

	fd = hello();
	harness_raw_send_bytes(fd, zero, sizeof(zero));
	expect_error_then_close(fd, "bad_frame");
	close(fd);

	fd = hello();
	harness_raw_send_bytes(fd, huge, sizeof(huge));
	expect_error_then_close(fd, "bad_frame");
	close(fd);

	fd = hello();
	harness_raw_send_bytes(fd, over, sizeof(over));
	expect_error_then_close(fd, "bad_frame");
	close(fd);

	fd = hello();
	harness_raw_send(fd, "this is not JSON at all");
	expect_error_then_close(fd, "bad_json");
	close(fd);

	fd = hello();
	harness_raw_send(fd, "[1, 2, 3]");
	expect_error_then_close(fd, "bad_json");
	close(fd);

	/* Also before hello. */
	fd = harness_raw_connect(harness.socket);
	harness_raw_send(fd, "{\"op\":");
	expect_error_then_close(fd, "bad_json");
	close(fd);

	expect_daemon_up();
	harness_stop();
}
END_TEST

START_TEST(abrupt_clients_do_not_hurt_the_daemon)
{
	static const unsigned char partial[6] = { 0, 0, 0, 100, '{', '"' };
	char *text = harness_program("abandoned", 5);
	char *req = NULL, *escaped;
	cJSON *src;
	int fd;

	harness_start(NULL);

	/* Half a header, half a frame, then gone. */
	fd = harness_raw_connect(harness.socket);
	harness_raw_send_bytes(fd, partial, 2);
	close(fd);
	fd = hello();
	harness_raw_send_bytes(fd, partial, sizeof(partial));
	close(fd);

	/* A client that leaves while its build runs. */
	src = cJSON_CreateString(text);
	escaped = cJSON_PrintUnformatted(src);
	ck_assert(asprintf(&req, "{\"op\":\"get\",\"id\":2,\"sources\":[{\"name\":\"a.c\",\"text\":%s}],"
				 "\"alias\":\"it:abandoned\"}", escaped) > 0);
	fd = hello();
	harness_raw_send(fd, req);
	close(fd);

	/* Many connections that say nothing. */
	for (int i = 0; i < 50; i++)
		close(harness_raw_connect(harness.socket));

	expect_daemon_up();
	/* Whatever became of the abandoned build, the same request works. */
	{
		struct kiln_request kreq;
		struct kiln_source ksrc;
		struct harness_result r;

		harness_request(&kreq, &ksrc, "a.c", text);
		kreq.alias = "it:abandoned";
		r = harness_in_child(&kreq, NULL);
		ck_assert_msg(r.rc == KILN_OK, "get after an abandoned build: %s: %s",
			      kiln_strerror(r.rc), r.msg);
		ck_assert_int_eq(r.value, 5);
	}
	harness_stop();
	cJSON_Delete(src);
	free(escaped);
	free(req);
	free(text);
}
END_TEST

/* A get whose source is named by "sha256" or "text"; malloc'd JSON. */
static char *get_json_args(uint64_t id, const char *text, bool by_digest, const char *arg);

static char *get_json(uint64_t id, const char *text, bool by_digest)
{
	return get_json_args(id, text, by_digest, NULL);
}

/* As get_json, with one compiler argument (or none when arg is NULL). */
static char *get_json_args(uint64_t id, const char *text, bool by_digest, const char *arg)
{
	cJSON *o = cJSON_CreateObject(), *srcs, *src;
	char hex[65];
	char *s;

	cJSON_AddStringToObject(o, "op", "get");
	cJSON_AddNumberToObject(o, "id", (double)id);
	if (arg != NULL)
		cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "args"), cJSON_CreateString(arg));
	srcs = cJSON_AddArrayToObject(o, "sources");
	src = cJSON_CreateObject();
	cJSON_AddItemToArray(srcs, src);
	cJSON_AddStringToObject(src, "name", "prog.c");
	if (by_digest) {
		harness_sha256_hex(text, hex);
		cJSON_AddStringToObject(src, "sha256", hex);
	} else {
		cJSON_AddStringToObject(src, "text", text);
	}
	s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	ck_assert_ptr_nonnull(s);
	return s;
}

/*
 * A source named by digest: a miss is answered need_sources and builds
 * nothing; once the text has been sent and built, the digest alone is a hit
 * on the same key, from a raw client and through libkiln.
 */
START_TEST(get_by_digest_hits_without_the_text)
{
	char *text = harness_program("digest", 31);
	char *by_digest = get_json(2, text, true), *with_text = get_json(3, text, false);
	char key[65];
	cJSON *r, *st;
	int fd;

	harness_start(NULL);
	fd = hello();
	expect_error(fd, by_digest, 2, "need_sources");
	st = harness_status();
	ck_assert_int_eq(harness_num(st, "need_sources"), 1);
	ck_assert_int_eq(harness_num(st, "builds_started"), 0);
	ck_assert_int_eq(harness_num(st, "misses"), 0);
	cJSON_Delete(st);

	harness_raw_send(fd, with_text);
	r = harness_raw_recv(fd);
	ck_assert_msg(r && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok")),
		      "the get with text failed");
	ck_assert(!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "cached")));
	snprintf(key, sizeof(key), "%s", harness_str(r, "key"));
	cJSON_Delete(r);

	harness_raw_send(fd, by_digest);
	r = harness_raw_recv(fd);
	ck_assert_msg(r && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok")),
		      "the get by digest missed after the build");
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "cached")));
	ck_assert_str_eq(harness_str(r, "key"), key);
	cJSON_Delete(r);
	close(fd);

	/* libkiln goes by digest first: a fresh process hits without a second try. */
	{
		struct kiln_request kreq;
		struct kiln_source ksrc;
		struct harness_result res;

		harness_request(&kreq, &ksrc, "prog.c", text);
		res = harness_in_child(&kreq, NULL);
		ck_assert_msg(res.rc == KILN_OK, "%s: %s", kiln_strerror(res.rc), res.msg);
		ck_assert_int_eq(res.value, 31);
	}
	st = harness_status();
	ck_assert_int_eq(harness_num(st, "need_sources"), 1);
	ck_assert_int_eq(harness_num(st, "builds_started"), 1);
	ck_assert_int_eq(harness_num(st, "hits"), 2);
	cJSON_Delete(st);
	harness_stop();
	free(by_digest);
	free(with_text);
	free(text);
}
END_TEST

/* Waits until kilnd's status counter field reaches value, asking on a raw
 * socket (no CLI started: these waits sit inside a 2 s text wait). */
static void wait_raw_status(const char *field, int64_t value)
{
	double end = harness_now_s() + 30;
	while (harness_status_num_at(harness.socket, field) < value) {
		ck_assert_msg(harness_now_s() < end, "%s stayed below %lld", field, (long long)value);
		harness_sleep_ms(2);
	}
}

/* Requires the next reply on fd to be a success for id; returns its key. */
static void expect_artifact(int fd, uint64_t id, char key[65])
{
	cJSON *r = harness_raw_recv(fd);
	ck_assert_msg(r != NULL, "no reply for request %llu", (unsigned long long)id);
	ck_assert_msg(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok")),
		      "request %llu failed: %s", (unsigned long long)id, harness_error_code(r));
	ck_assert_int_eq(harness_num(r, "id"), (int64_t)id);
	snprintf(key, 65, "%s", harness_str(r, "key"));
	cJSON_Delete(r);
}

/*
 * A herd by digest: the first get of a new program is asked for its text;
 * the others wait for that text instead of each being asked for theirs, and
 * join the build it starts. One need_sources, one build, three artifacts.
 */
START_TEST(herd_by_digest_waits_for_one_text)
{
	char *text = harness_program("herdtext", 41);
	char *by_digest = get_json(2, text, true), *with_text = get_json(3, text, false);
	char ka[65], kb[65], kc[65];

	harness_start(NULL);
	int a = hello(), b = hello(), c = hello();
	expect_error(a, by_digest, 2, "need_sources");
	harness_raw_send(b, by_digest);
	harness_raw_send(c, by_digest);
	wait_raw_status("text_waits", 2);
	harness_raw_send(a, with_text);
	expect_artifact(a, 3, ka);
	expect_artifact(b, 2, kb);
	expect_artifact(c, 2, kc);
	ck_assert_str_eq(ka, kb);
	ck_assert_str_eq(ka, kc);
	cJSON *st = harness_status();
	ck_assert_int_eq(harness_num(st, "need_sources"), 1);
	ck_assert_int_eq(harness_num(st, "text_waits"), 2);
	ck_assert_int_eq(harness_num(st, "text_timeouts"), 0);
	ck_assert_int_eq(harness_num(st, "builds_started"), 1);
	ck_assert_int_eq(harness_num(st, "joined"), 2);
	ck_assert_int_eq(harness_num(st, "claims_held"), 0);
	ck_assert_int_eq(harness_num(st, "claims"), 0);   /* aliases' claims only */
	cJSON_Delete(st);
	close(a);
	close(b);
	close(c);
	harness_stop();
	free(by_digest);
	free(with_text);
	free(text);
}
END_TEST

/*
 * The client asked for the text goes away without sending it: the waiter
 * is asked instead and takes the turn (claims_held 1), its text builds, and
 * the next waiter joins. No wait ran out (text_timeouts 0): the turn passed
 * when the connection closed.
 */
START_TEST(text_wait_passes_when_its_client_leaves)
{
	char *text = harness_program("textleft", 42);
	char *by_digest = get_json(2, text, true), *with_text = get_json(3, text, false);
	char kb[65], kc[65];

	harness_start(NULL);
	int a = hello(), b = hello();
	expect_error(a, by_digest, 2, "need_sources");
	harness_raw_send(b, by_digest);
	wait_raw_status("text_waits", 1);
	close(a);
	cJSON *r = harness_raw_recv(b);
	ck_assert_ptr_nonnull(r);
	ck_assert_str_eq(harness_error_code(r), "need_sources");
	ck_assert_int_eq(harness_num(r, "id"), 2);
	cJSON_Delete(r);
	cJSON *st = harness_status();
	ck_assert_int_eq(harness_num(st, "claims_held"), 1);
	ck_assert_int_eq(harness_num(st, "need_sources"), 2);
	ck_assert_int_eq(harness_num(st, "text_timeouts"), 0);
	cJSON_Delete(st);
	int c = hello();
	harness_raw_send(c, by_digest);
	wait_raw_status("text_waits", 2);
	harness_raw_send(b, with_text);
	expect_artifact(b, 3, kb);
	expect_artifact(c, 2, kc);
	ck_assert_str_eq(kb, kc);
	st = harness_status();
	ck_assert_int_eq(harness_num(st, "text_timeouts"), 0);
	ck_assert_int_eq(harness_num(st, "builds_started"), 1);
	cJSON_Delete(st);
	close(b);
	close(c);
	harness_stop();
	free(by_digest);
	free(with_text);
	free(text);
}
END_TEST

/*
 * The client asked for the text stays and never sends it: the waiter is
 * asked for its own text when its wait (2 s) runs out, and the silent
 * client's turn ends with it (claims_held 0), so later gets do not wait on
 * it again; the waiter's text builds, and the silent client's next get by
 * digest hits.
 */
START_TEST(text_wait_runs_out)
{
	char *text = harness_program("textslow", 43);
	char *by_digest = get_json(2, text, true), *with_text = get_json(3, text, false);
	char kb[65], ka[65];

	harness_start(NULL);
	int a = hello(), b = hello();
	expect_error(a, by_digest, 2, "need_sources");
	expect_error(b, by_digest, 2, "need_sources");
	cJSON *st = harness_status();
	ck_assert_int_eq(harness_num(st, "text_waits"), 1);
	ck_assert_int_eq(harness_num(st, "text_timeouts"), 1);
	ck_assert_int_eq(harness_num(st, "claims_held"), 0);
	cJSON_Delete(st);
	harness_raw_send(b, with_text);
	expect_artifact(b, 3, kb);
	harness_raw_send(a, by_digest);
	expect_artifact(a, 2, ka);
	ck_assert_str_eq(ka, kb);
	close(a);
	close(b);
	harness_stop();
	free(by_digest);
	free(with_text);
	free(text);
}
END_TEST

/*
 * Two batches that each hold the turn of a program the other asks for next:
 * a connection holding a turn never waits (libkiln sends a batch's texts
 * only after all its replies, so each would hold the other up until the
 * waits ran out). Both are asked at once, nothing waits, both build.
 */
START_TEST(text_turn_holders_do_not_wait)
{
	char *t1 = harness_program("cycle1", 44), *t2 = harness_program("cycle2", 45);
	char *d1 = get_json(2, t1, true), *d2 = get_json(2, t2, true);
	char *x1 = get_json(3, t1, false), *x2 = get_json(3, t2, false);
	char k[65];

	harness_start(NULL);
	int a = hello(), b = hello();
	expect_error(a, d1, 2, "need_sources");
	expect_error(b, d2, 2, "need_sources");
	expect_error(a, d2, 2, "need_sources");
	expect_error(b, d1, 2, "need_sources");
	cJSON *st = harness_status();
	ck_assert_int_eq(harness_num(st, "text_waits"), 0);
	ck_assert_int_eq(harness_num(st, "claims_held"), 2);
	cJSON_Delete(st);
	harness_raw_send(a, x1);
	expect_artifact(a, 3, k);
	harness_raw_send(b, x2);
	expect_artifact(b, 3, k);
	st = harness_status();
	ck_assert_int_eq(harness_num(st, "claims_held"), 0);
	ck_assert_int_eq(harness_num(st, "builds_started"), 2);
	cJSON_Delete(st);
	close(a);
	close(b);
	harness_stop();
	free(d1);
	free(d2);
	free(x1);
	free(x2);
	free(t1);
	free(t2);
}
END_TEST

/*
 * A get by digest parked while a large changed header is hashed on the
 * pool, whose client closes meanwhile: once the hash says the entry is
 * stale, the get is dropped; no turn is taken in the closed connection's
 * name (it would outlive the connection: under ASan, the next text of the
 * key wrote into the freed connection). The next get with the text builds.
 */
START_TEST(parked_get_of_a_closed_client)
{
	char inc[HARNESS_PATH], hdr[HARNESS_PATH], arg[HARNESS_PATH + 8], k[65];
	size_t size = (size_t)24 << 20;
	char *big = malloc(size + 1);
	ck_assert_ptr_nonnull(big);
	memset(big, ' ', size);
	memcpy(big, "/*", 2);
	memcpy(big + size - 40, "*/\n#define BIG_VALUE 5\n", 24);
	big[size] = '\0';
	ck_assert_int_eq(mkdir(harness_path(inc, "inc"), 0700), 0);
	harness_path(hdr, "inc/big.h");
	harness_write_file(hdr, big);
	snprintf(arg, sizeof(arg), "-I%s", inc);
	const char *text = "#include \"big.h\"\nint big_value(void) { return BIG_VALUE; }\n";
	char *by_digest = get_json_args(2, text, true, arg), *with_text = get_json_args(3, text, false, arg);

	harness_start(NULL);
	int a = hello();
	harness_raw_send(a, with_text);
	expect_artifact(a, 3, k);
	close(a);
	big[10] = 'x';   /* the same size, another text: hashed on the pool */
	harness_write_file(hdr, big);
	a = hello();
	harness_raw_send(a, by_digest);
	close(a);
	harness_sleep_ms(1000);   /* the hash ends (a slower one only tests less) */
	cJSON *st = harness_status();
	ck_assert_int_eq(harness_num(st, "claims_held"), 0);
	cJSON_Delete(st);
	int b = hello();
	harness_raw_send(b, with_text);
	expect_artifact(b, 3, k);
	close(b);
	st = harness_status();
	ck_assert_int_eq(harness_num(st, "builds_started"), 2);
	ck_assert_int_eq(harness_num(st, "claims_held"), 0);
	cJSON_Delete(st);
	harness_stop();
	free(by_digest);
	free(with_text);
	free(big);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("protocol");

	suite_add_tcase(s, harness_tcase("invalid_requests",
					 invalid_requests_get_errors_and_the_connection_stays, 60));
	suite_add_tcase(s, harness_tcase("hello", hello_reply_carries_the_daemon, 60));
	suite_add_tcase(s, harness_tcase("hit_file", hit_reply_says_the_file, 60));
	suite_add_tcase(s, harness_tcase("pipelining", pipelined_requests_are_answered_in_order, 60));
	suite_add_tcase(s, harness_tcase("framing", framing_errors_get_a_reply_then_a_close, 60));
	suite_add_tcase(s, harness_tcase("digest", get_by_digest_hits_without_the_text, 60));
	suite_add_tcase(s, harness_tcase("abrupt", abrupt_clients_do_not_hurt_the_daemon, 90));
	suite_add_tcase(s, harness_tcase("text_herd", herd_by_digest_waits_for_one_text, 60));
	suite_add_tcase(s, harness_tcase("text_left", text_wait_passes_when_its_client_leaves, 60));
	suite_add_tcase(s, harness_tcase("text_slow", text_wait_runs_out, 60));
	suite_add_tcase(s, harness_tcase("text_cycle", text_turn_holders_do_not_wait, 60));
	suite_add_tcase(s, harness_tcase("text_closed", parked_get_of_a_closed_client, 120));
	return harness_main(s);
}
