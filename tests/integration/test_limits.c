/*
 * Integration tests of kilnd's resource limits (docs/security.md, "Limits"):
 * connections, requests in progress per connection and in all, the build
 * queue, stalled frames, nesting and the size of sources read by path.
 */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* Does the printed reply contain needle? */
static bool reply_says(const cJSON *r, const char *needle)
{
	char *text = cJSON_PrintUnformatted(r);
	bool yes = harness_contains(text, needle);

	free(text);
	return yes;
}

/* A raw connection that said hello. */
static int hello_conn(void)
{
	int fd = harness_raw_connect(harness.socket);
	cJSON *r;

	harness_raw_send(fd, "{\"op\":\"hello\",\"id\":1,\"proto\":3}");
	r = harness_raw_recv(fd);
	ck_assert_msg(r != NULL, "no reply to hello");
	ck_assert_msg(cJSON_IsTrue(cJSON_GetObjectItem(r, "ok")), "hello failed");
	cJSON_Delete(r);
	return fd;
}

START_TEST(connections_beyond_the_limit_get_busy)
{
	int fds[3], extra;
	cJSON *r, *st;

	/* Started with a low soft descriptor limit (systemd's default is
	 * 1024), which kilnd raises as far as the hard limit allows. */
	struct rlimit rl, low;
	ck_assert(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	low = rl;
	low.rlim_cur = rl.rlim_cur < 256 ? rl.rlim_cur : 256;
	ck_assert(setrlimit(RLIMIT_NOFILE, &low) == 0);
	harness_start("--max-connections", "3", NULL);
	ck_assert(setrlimit(RLIMIT_NOFILE, &rl) == 0);
	/* Its descriptor table was sized at start for the descriptor cache
	 * (1024) and the connections: grown later, with threads running, the
	 * kernel makes the loop wait for an RCU grace period. */
	unsigned room = harness_fd_room(1024 + 3 + 64), size = harness_fd_table_size(harness.pid);
	ck_assert_msg(size >= room, "kilnd's descriptor table holds %u, not %u", size, room);
	unsigned soft = harness_nofile_soft(harness.pid), want = harness_fd_room(65536);
	ck_assert_msg(soft >= want, "kilnd's soft descriptor limit is %u, not %u", soft, want);
	for (int i = 0; i < 3; i++)
		fds[i] = hello_conn();
	extra = harness_raw_connect(harness.socket);
	r = harness_raw_recv(extra);
	ck_assert_msg(r != NULL, "the 4th connection got no reply");
	ck_assert_str_eq(harness_error_code(r), "busy");
	ck_assert_msg(reply_says(r, "--max-connections"),
		      "the busy reply does not name the limit");
	cJSON_Delete(r);
	ck_assert_msg(harness_raw_recv(extra) == NULL, "the refused connection stays open");
	close(extra);

	/* A freed place is taken again, once kilnd saw the close. */
	close(fds[0]);
	for (int tries = 0;; tries++) {
		int fd = harness_raw_connect(harness.socket);

		harness_raw_send(fd, "{\"op\":\"hello\",\"id\":1,\"proto\":3}");
		r = harness_raw_recv(fd);
		ck_assert_ptr_nonnull(r);
		if (cJSON_IsTrue(cJSON_GetObjectItem(r, "ok"))) {
			cJSON_Delete(r);
			harness_raw_send(fd, "{\"op\":\"status\",\"id\":2}");
			st = harness_raw_recv(fd);
			ck_assert_ptr_nonnull(st);
			close(fd);
			break;
		}
		ck_assert_str_eq(harness_error_code(r), "busy");
		cJSON_Delete(r);
		close(fd);
		ck_assert_msg(tries < 100, "no place 5 s after closing a connection");
		harness_sleep_ms(50);
	}
	ck_assert_int_ge(harness_num(st, "busy"), 1);
	cJSON_Delete(st);
	close(fds[1]);
	close(fds[2]);
	harness_stop();
}
END_TEST

/*
 * A hard descriptor limit too low for the descriptor cache and the
 * connections: kilnd raises its soft limit to it, serves, and says in its
 * log what the limit costs and what to raise it to. (The test runs in its
 * own process: the lowered hard limit cannot be raised again.)
 */
START_TEST(low_descriptor_limit_is_reported)
{
	struct rlimit rl;
	ck_assert(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	rlim_t hard = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 1000 ? rl.rlim_max : 1000;
	struct rlimit low = { .rlim_cur = 256 < hard ? 256 : hard, .rlim_max = hard };
	ck_assert_msg(setrlimit(RLIMIT_NOFILE, &low) == 0, "setrlimit: %s", strerror(errno));
	harness_start(NULL);
	ck_assert_uint_eq(harness_nofile_soft(harness.pid), hard);
	close(hello_conn());
	char *log = harness_read_file(harness.log), said[160];
	ck_assert_ptr_nonnull(log);
	snprintf(said, sizeof(said), "descriptor limit %llu (the hard limit): the descriptor cache "
		 "keeps at most %llu of 1024 objects open", (unsigned long long)hard,
		 (unsigned long long)hard / 4);
	ck_assert_msg(harness_contains(log, said), "no \"%s\" in the log:\n%s", said, log);
	ck_assert_msg(harness_contains(log, "LimitNOFILE=) to 4096"), "%s", log);
	free(log);
	harness_stop();
}
END_TEST

/*
 * A warm batch over more objects than the descriptor cache holds: the cache
 * empties itself in the middle of the batch while the replies it answered
 * still wait to be written (one read's replies go out together). The
 * descriptors those replies carry are borrowed from the cache, not dup'ed
 * (daemon/fdcache.h), so they must stay open until written: each program
 * is still the one asked for. A descriptor closed under a queued reply
 * would fail the send, or, reused by the next object opened, carry another
 * program. (In its own process: the lowered hard limit stays.)
 */
#define PAST_CACHE 72

START_TEST(warm_batch_past_the_descriptor_cache)
{
	struct kiln_request reqs[PAST_CACHE];
	struct kiln_source srcs[PAST_CACHE];
	char *texts[PAST_CACHE];

	/* 128 descriptors: the cache keeps at most 32 objects open. */
	struct rlimit rl;
	ck_assert(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	rlim_t hard = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 128 ? rl.rlim_max : 128;
	struct rlimit low = { .rlim_cur = hard, .rlim_max = hard };
	ck_assert_msg(setrlimit(RLIMIT_NOFILE, &low) == 0, "setrlimit: %s", strerror(errno));
	harness_start("--jobs", "2", NULL);
	char *log = harness_read_file(harness.log);
	ck_assert_msg(harness_contains(log, "keeps at most 32 of 1024 objects open"), "%s", log);
	free(log);
	harness_requests(PAST_CACHE, "past", 5000, "past.c", reqs, srcs, texts);
	/* Cold in one process, then warm in a fresh one, twice: the second
	 * warm batch finds the cache holding the first's last objects. */
	harness_get_many_values(reqs, PAST_CACHE, 5000, "cold");
	harness_get_many_values(reqs, PAST_CACHE, 5000, "first warm batch");
	harness_get_many_values(reqs, PAST_CACHE, 5000, "second warm batch");
	cJSON *st = harness_status();
	ck_assert_int_eq(harness_num(st, "builds_started"), PAST_CACHE);
	ck_assert_int_ge(harness_num(st, "hits"), 2 * PAST_CACHE);
	cJSON_Delete(st);
	harness_stop();
	for (int i = 0; i < PAST_CACHE; i++)
		free(texts[i]);
}
END_TEST

/* Sends n status requests, ids from first; returns how many whole frames
 * went before the socket filled. *rest gets the unsent tail of a frame
 * that went in part (malloc'd, *restlen bytes), or NULL. */
static int send_until_full(int fd, int first, int n, char **rest, size_t *restlen)
{
	*rest = NULL;
	*restlen = 0;
	for (int i = 0; i < n; i++) {
		char json[96], frame[100];
		int len = snprintf(json, sizeof(json), "{\"op\":\"status\",\"id\":%d}", first + i);
		ssize_t sent;

		frame[0] = frame[1] = frame[2] = 0;
		frame[3] = (char)len;
		memcpy(frame + 4, json, (size_t)len);
		sent = send(fd, frame, (size_t)len + 4, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return i;
		ck_assert_msg(sent > 0, "send: %s", strerror(errno));
		if (sent < len + 4) {
			*restlen = (size_t)(len + 4 - sent);
			*rest = malloc(*restlen);
			memcpy(*rest, frame + sent, *restlen);
			return i + 1;
		}
	}
	return n;
}

/*
 * A client that pipelines requests and never reads its replies: kilnd stops
 * reading it once 4 MiB of replies wait, so the client's socket fills and stays full
 * (kilnd's memory does not grow with it), other clients are served, and once
 * the client reads, every request is answered in order.
 */
START_TEST(pipelining_without_reading_is_throttled)
{
	enum { MANY = 200000 };
	char *rest;
	size_t restlen, off = 0;
	int fd, sent, got = 0;
	struct pollfd pfd;
	cJSON *st;

	harness_start("--max-requests", "4", NULL);
	fd = hello_conn();
	/* Fill the socket; a daemon still reading empties it again. Given a
	 * moment after each fill, a throttled one leaves it full. */
	sent = 0;
	rest = NULL;
	for (int round = 0;; round++) {
		if (rest == NULL)
			sent += send_until_full(fd, 100 + sent, MANY - sent, &rest, &restlen);
		ck_assert_msg(sent < MANY, "%d requests went in without the socket filling", sent);
		harness_sleep_ms(200);
		pfd = (struct pollfd){ .fd = fd, .events = POLLOUT };
		if (poll(&pfd, 1, 0) == 0)
			break;
		/* kilnd queues up to 4 MiB of replies (~3,000 status replies)
		 * before it stops reading; each round sends a socketful. */
		ck_assert_msg(round < 100, "kilnd goes on reading a client that does not read "
			      "(%d requests sent)", sent);
		if (rest != NULL) {
			/* The tail of a frame that went in part goes first. */
			ssize_t n = send(fd, rest + off, restlen - off, MSG_DONTWAIT | MSG_NOSIGNAL);

			if (n > 0 && (off += (size_t)n) == restlen) {
				free(rest);
				rest = NULL;
				off = 0;
			}
		}
	}
	st = harness_status();
	ck_assert_int_le(harness_num(st, "pending"), 4);
	cJSON_Delete(st);

	/* Now read: everything sent is answered, in order. */
	while (got < sent) {
		cJSON *r;

		if (rest != NULL) {
			pfd = (struct pollfd){ .fd = fd, .events = POLLIN | POLLOUT };
			ck_assert_int_ge(poll(&pfd, 1, 5000), 1);
			if (pfd.revents & POLLOUT) {
				ssize_t n = send(fd, rest + off, restlen - off, MSG_DONTWAIT | MSG_NOSIGNAL);
				if (n > 0 && (off += (size_t)n) == restlen) {
					free(rest);
					rest = NULL;
				}
			}
			if (!(pfd.revents & POLLIN))
				continue;
		}
		r = harness_raw_recv(fd);
		ck_assert_msg(r != NULL, "connection closed after %d of %d replies", got, sent);
		ck_assert_int_eq(harness_num(r, "id"), 100 + got);
		cJSON_Delete(r);
		got++;
	}
	free(rest);
	close(fd);
	harness_stop();
}
END_TEST

/* One build runs, one waits for the only slot; a third is "busy". */
START_TEST(full_build_queue_answers_busy)
{
	char wrapper[HARNESS_PATH], log[HARNESS_PATH], gate[HARNESS_PATH], tc[HARNESS_PATH + 8];
	struct kiln_request reqs[3];
	struct kiln_source srcs[3];
	char *texts[3];
	struct harness_fleet *f;
	struct harness_result r;

	harness_write_wrapper(harness_path(wrapper, "cc-wrapper"), harness_path(log, "wrapper.log"),
			      harness_path(gate, "gate"), 0);
	snprintf(tc, sizeof(tc), "cc=%s", wrapper);
	harness_start("--jobs", "1", "--max-queue", "1", "--toolchain", tc, NULL);
	for (int i = 0; i < 3; i++) {
		char name[32];

		snprintf(name, sizeof(name), "queued_%d", i);
		texts[i] = harness_program(name, 300 + i);
		harness_request(&reqs[i], &srcs[i], "queued.c", texts[i]);
	}
	f = harness_fleet_start(2, &(struct harness_fleet_opts){
		.socket = harness.socket, .reqs = reqs, .nreqs = 2 });
	harness_wait_wrapper_starts(log, 1, 60);
	harness_wait_status("queued", 1, 60);

	r = harness_in_child(&reqs[2], NULL);
	ck_assert_msg(r.rc == KILN_EBUSY, "a build beyond --max-queue got %s: %s",
		      kiln_strerror(r.rc), r.msg);
	ck_assert_msg(harness_contains(r.msg, "--max-queue"), "message: %s", r.msg);
	/* A hit or a join is not a new build: it still waits. */
	harness_write_file(gate, "open");
	harness_fleet_wait(f, 120);
	for (int i = 0; i < 2; i++)
		ck_assert_msg(f->results[i].rc == KILN_OK && f->results[i].value == 300 + i,
			      "client %d: %s", i, f->results[i].msg);
	/* With room again, the refused request builds. */
	r = harness_in_child(&reqs[2], NULL);
	ck_assert_msg(r.rc == KILN_OK && r.value == 302, "retry: %s", r.msg);
	harness_fleet_free(f);
	harness_stop();
	for (int i = 0; i < 3; i++)
		free(texts[i]);
}
END_TEST

/* Two gets wait on a slow build; with --max-pending 2 a third get is busy,
 * while status is still answered. */
START_TEST(too_many_pending_requests_answer_busy)
{
	char wrapper[HARNESS_PATH], log[HARNESS_PATH], gate[HARNESS_PATH], tc[HARNESS_PATH + 8];
	char *text = harness_program("pending", 77);
	struct kiln_request req;
	struct kiln_source src;
	struct harness_fleet *f;
	struct harness_result r;
	cJSON *st;

	harness_write_wrapper(harness_path(wrapper, "cc-wrapper"), harness_path(log, "wrapper.log"),
			      harness_path(gate, "gate"), 0);
	snprintf(tc, sizeof(tc), "cc=%s", wrapper);
	harness_start("--max-pending", "2", "--toolchain", tc, NULL);
	harness_request(&req, &src, "pending.c", text);
	f = harness_fleet_start(2, &(struct harness_fleet_opts){
		.socket = harness.socket, .reqs = &req, .nreqs = 1 });
	harness_wait_wrapper_starts(log, 1, 60);
	harness_wait_status("pending", 2, 60);
	r = harness_in_child(&req, NULL);
	ck_assert_msg(r.rc == KILN_EBUSY, "a get beyond --max-pending got %s: %s",
		      kiln_strerror(r.rc), r.msg);
	ck_assert_msg(harness_contains(r.msg, "--max-pending"), "message: %s", r.msg);
	st = harness_status();
	ck_assert_int_ge(harness_num(st, "busy"), 1);
	cJSON_Delete(st);
	harness_write_file(gate, "open");
	harness_fleet_wait(f, 120);
	for (int i = 0; i < 2; i++)
		ck_assert_msg(f->results[i].rc == KILN_OK && f->results[i].value == 77,
			      "client %d: %s", i, f->results[i].msg);
	harness_fleet_free(f);
	harness_stop();
	free(text);
}
END_TEST

/* One byte of a frame, then nothing: closed after --frame-timeout. A frame
 * sent slowly but steadily is served. */
START_TEST(stalled_frame_is_closed)
{
	static const char hello[] = "{\"op\":\"hello\",\"id\":1,\"proto\":3}";
	unsigned char hdr[4] = { 0, 0, 0, sizeof(hello) - 1 };
	int stalled, slow;
	double t0;
	cJSON *r, *st;

	harness_start("--frame-timeout", "1", NULL);
	stalled = harness_raw_connect(harness.socket);
	harness_raw_send_bytes(stalled, hdr, 1);
	t0 = harness_now_s();
	r = harness_raw_recv(stalled);
	ck_assert_msg(r != NULL, "a stalled connection was closed without a reply");
	ck_assert_str_eq(harness_error_code(r), "bad_frame");
	cJSON_Delete(r);
	ck_assert_msg(harness_raw_recv(stalled) == NULL, "the stalled connection stays open");
	ck_assert_msg(harness_now_s() - t0 < 10, "closed only after %.1f s", harness_now_s() - t0);
	close(stalled);

	/* 0.25 s between bytes: slow, never stalled for a second. */
	slow = harness_raw_connect(harness.socket);
	harness_raw_send_bytes(slow, hdr, 4);
	for (size_t i = 0; i < sizeof(hello) - 1; i += 8) {
		size_t n = sizeof(hello) - 1 - i < 8 ? sizeof(hello) - 1 - i : 8;

		harness_sleep_ms(250);
		harness_raw_send_bytes(slow, hello + i, n);
	}
	r = harness_raw_recv(slow);
	ck_assert_msg(r != NULL && cJSON_IsTrue(cJSON_GetObjectItem(r, "ok")),
		      "a slow hello was not answered");
	cJSON_Delete(r);
	close(slow);
	st = harness_status();
	ck_assert_int_eq(harness_num(st, "stalled"), 1);
	cJSON_Delete(st);
	harness_stop();
}
END_TEST

/* Deep nesting is refused before parsing; the connection stays usable. */
START_TEST(deep_nesting_is_refused)
{
	char deep[4096];
	size_t n = 0;
	int fd;
	cJSON *r;

	harness_start(NULL);
	fd = hello_conn();
	n += (size_t)snprintf(deep, sizeof(deep), "{\"op\":\"status\",\"id\":2,\"x\":");
	for (int i = 0; i < 1000; i++)
		deep[n++] = '[';
	for (int i = 0; i < 1000; i++)
		deep[n++] = ']';
	deep[n++] = '}';
	deep[n] = '\0';
	harness_raw_send(fd, deep);
	r = harness_raw_recv(fd);
	ck_assert_msg(r != NULL, "no reply to a deep request");
	ck_assert_str_eq(harness_error_code(r), "bad_request");
	ck_assert_msg(reply_says(r, "deeper than"),
		      "the reply does not say why");
	cJSON_Delete(r);
	harness_raw_send(fd, "{\"op\":\"status\",\"id\":3}");
	r = harness_raw_recv(fd);
	ck_assert_msg(r != NULL && harness_num(r, "id") == 3, "the connection did not survive");
	cJSON_Delete(r);
	close(fd);
	harness_stop();
}
END_TEST

/* Sources by path may not add up to more than --max-frame. */
START_TEST(sources_by_path_are_capped_in_total)
{
	char a[HARNESS_PATH], b[HARNESS_PATH];
	struct kiln_request req = { .toolchain = "cc", .output = "shared" };
	struct kiln_source srcs[2];
	size_t big = 700 * 1024;
	char *text = malloc(big + 1);
	struct kiln_program *p;
	struct kiln *k;
	int rc;

	memset(text, ' ', big);
	memcpy(text, "int x;", 6);
	text[big] = '\0';
	harness_write_file(harness_path(a, "a.c"), text);
	memcpy(text, "int y;", 6);
	harness_write_file(harness_path(b, "b.c"), text);
	harness_start("--max-frame", "1M", NULL);
	srcs[0] = (struct kiln_source){ .name = "a.c", .path = a };
	srcs[1] = (struct kiln_source){ .name = "b.c", .path = b };
	req.sources = srcs;
	req.nsources = 2;
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	rc = kiln_get(k, &req, &p);
	ck_assert_msg(rc == KILN_EREFUSED, "two 700 KiB sources got %s: %s", kiln_strerror(rc),
		      kiln_errmsg(k));
	ck_assert_msg(harness_contains(kiln_errmsg(k), "add up to more than 1 MiB"), "message: %s",
		      kiln_errmsg(k));
	/* One source over the limit: the message names the limit and the
	 * option that raises it (not a bare "File too large"). */
	char *huge = malloc(1100 * 1024 + 1);
	memset(huge, ' ', 1100 * 1024);
	memcpy(huge, "int z;", 6);
	huge[1100 * 1024] = '\0';
	char c[HARNESS_PATH];
	harness_write_file(harness_path(c, "c.c"), huge);
	free(huge);
	srcs[0] = (struct kiln_source){ .name = "c.c", .path = c };
	req.nsources = 1;
	rc = kiln_get(k, &req, &p);
	ck_assert_msg(rc == KILN_EREFUSED, "a 1.1 MiB source got %s", kiln_strerror(rc));
	ck_assert_msg(harness_contains(kiln_errmsg(k), "--max-frame") &&
		      harness_contains(kiln_errmsg(k), "larger than 1 MiB"), "message: %s", kiln_errmsg(k));
	srcs[0] = (struct kiln_source){ .name = "a.c", .path = a };
	/* One of them alone is fine. */
	req.nsources = 1;
	rc = kiln_get(k, &req, &p);
	ck_assert_msg(rc == KILN_OK, "one 700 KiB source got %s: %s", kiln_strerror(rc),
		      kiln_errmsg(k));
	kiln_close(k);
	harness_stop();
	free(text);
}
END_TEST

/* A batch far larger than --max-requests and than what the sockets hold
 * (kiln_get_many writes before it reads) completes: back-pressure must not
 * make client and daemon wait on each other. */
START_TEST(large_batch_completes)
{
	enum { BATCH = 20000, DISTINCT = 10 };
	struct kiln_request *reqs = calloc(BATCH, sizeof(*reqs));
	struct kiln_source *srcs = calloc(BATCH, sizeof(*srcs));
	struct kiln_program **out = calloc(BATCH, sizeof(*out));
	int *status = calloc(BATCH, sizeof(*status));
	char *texts[DISTINCT];
	struct kiln *k;

	harness_start("--max-requests", "16", NULL);
	for (int i = 0; i < DISTINCT; i++) {
		char name[16];

		snprintf(name, sizeof(name), "batch_%d", i);
		texts[i] = harness_program(name, 400 + i);
	}
	for (int i = 0; i < BATCH; i++)
		harness_request(&reqs[i], &srcs[i], "batch.c", texts[i % DISTINCT]);
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	ck_assert_msg(kiln_get_many(k, reqs, BATCH, out, status) == KILN_OK, "%s", kiln_errmsg(k));
	for (int i = 0; i < BATCH; i++) {
		int (*fn)(void);

		*(void **)&fn = kiln_sym(out[i], "kiln_test_value");
		ck_assert_int_eq(fn(), 400 + i % DISTINCT);
	}
	kiln_close(k);
	harness_stop();
	for (int i = 0; i < DISTINCT; i++)
		free(texts[i]);
	free(reqs);
	free(srcs);
	free(out);
	free(status);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("limits");

	suite_add_tcase(s, harness_tcase("connections", connections_beyond_the_limit_get_busy, 60));
	suite_add_tcase(s, harness_tcase("low_nofile", low_descriptor_limit_is_reported, 60));
	suite_add_tcase(s, harness_tcase("past_fdcache", warm_batch_past_the_descriptor_cache, 180));
	suite_add_tcase(s, harness_tcase("pipelining", pipelining_without_reading_is_throttled, 120));
	suite_add_tcase(s, harness_tcase("queue", full_build_queue_answers_busy, 120));
	suite_add_tcase(s, harness_tcase("pending", too_many_pending_requests_answer_busy, 120));
	suite_add_tcase(s, harness_tcase("stalled", stalled_frame_is_closed, 60));
	suite_add_tcase(s, harness_tcase("nesting", deep_nesting_is_refused, 60));
	suite_add_tcase(s, harness_tcase("sources_total", sources_by_path_are_capped_in_total, 60));
	suite_add_tcase(s, harness_tcase("large_batch", large_batch_completes, 120));
	return harness_main(s);
}
