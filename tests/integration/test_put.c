/*
 * put: an artifact built by one kilnd imported into another (what
 * libkiln-mpi does between nodes), through libkiln's private kiln_x_
 * interface, and every way a put must be refused: tampered or truncated
 * bytes, a key this node would not compute, a dependency that differs here,
 * another compiler environment, no descriptor, a descriptor that is no file,
 * a descriptor sent with another request (closed, never a later put's).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "kiln_x.h"

/* Builds a program on the harness daemon; fills skeleton, meta and a memfd
 * copy of the artifact. */
static void export_program(struct harness_export *x, const char *name, int value, const char *text_extra)
{
	struct kiln *k;
	struct kiln_request req;
	struct kiln_source src;
	struct kiln_program *p;
	char *text = harness_program(name, value), *full;

	full = malloc(strlen(text) + strlen(text_extra) + 2);
	sprintf(full, "%s%s%s", text_extra, *text_extra ? "\n" : "", text);
	free(text);
	harness_request(&req, &src, "prog.c", full);
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	ck_assert_msg(kiln_get(k, &req, &p) == KILN_OK, "%s", kiln_errmsg(k));
	snprintf(x->key, sizeof(x->key), "%s", kiln_program_key(p));
	x->skel = kiln_x_skeleton(&req);
	ck_assert_ptr_nonnull(x->skel);
	x->size = (size_t)lseek(kiln_program_fd(p), 0, SEEK_END);
	x->bytes = malloc(x->size);
	ck_assert_int_eq(pread(kiln_program_fd(p), x->bytes, x->size, 0), (ssize_t)x->size);
	ck_assert_msg(kiln_x_export(k, x->key, x->bytes, x->size, &x->meta) == KILN_OK, "%s",
		      kiln_errmsg(k));
	kiln_close(k);
	/* The text stays alive: req pointed into it, and the skeleton is made. */
	free(full);
}

static void exported_free(struct harness_export *x)
{
	free(x->skel);
	free(x->meta);
	free(x->bytes);
}

static int memfd_of(const char *bytes, size_t size)
{
	int fd = memfd_create("put-test", MFD_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, bytes, size), (ssize_t)size);
	return fd;
}

/* Puts x (with meta replaced when not NULL) into the kilnd at sock. */
static int put_to(const char *sock, const struct harness_export *x, const char *meta, const char *bytes,
		  size_t size, char *msg, size_t msglen)
{
	struct kiln *k;
	int fd = memfd_of(bytes, size), rc;

	ck_assert_int_eq(kiln_open(sock, &k), KILN_OK);
	rc = kiln_x_put(k, x->skel, meta ? meta : x->meta, fd);
	snprintf(msg, msglen, "%s", kiln_errmsg(k));
	kiln_close(k);
	close(fd);
	return rc;
}

/* meta with the first occurrence of from replaced by to (malloc'd). */
static char *meta_with(const char *meta, const char *from, const char *to)
{
	const char *at = strstr(meta, from);
	char *out;

	ck_assert_ptr_nonnull(at);
	out = malloc(strlen(meta) + strlen(to) + 1);
	memcpy(out, meta, (size_t)(at - meta));
	strcpy(out + (at - meta), to);
	strcat(out, at + strlen(from));
	return out;
}

START_TEST(put_then_hit_without_building)
{
	struct harness_export x;
	char sock[HARNESS_PATH], msg[4096];
	struct kiln *k;
	struct kiln_request req;
	struct kiln_source src;
	struct kiln_program *p;
	char *text = harness_program("moved", 31);

	harness_start(NULL);
	export_program(&x, "moved", 31, "");
	harness_start_named("b", NULL, NULL, sock);
	ck_assert_msg(put_to(sock, &x, NULL, x.bytes, x.size, msg, sizeof(msg)) == KILN_OK, "%s", msg);
	ck_assert_int_eq(harness_status_num_at(sock, "imports"), 1);
	ck_assert_int_eq(harness_status_num_at(sock, "entries"), 1);
	/* A second put of the same artifact finds it there. */
	ck_assert_msg(put_to(sock, &x, NULL, x.bytes, x.size, msg, sizeof(msg)) == KILN_OK, "%s", msg);
	ck_assert_int_eq(harness_status_num_at(sock, "imports"), 1);

	/* Node b serves it as a hit with the same key, and never compiled. */
	harness_request(&req, &src, "prog.c", text);
	ck_assert_int_eq(kiln_open(sock, &k), KILN_OK);
	ck_assert_msg(kiln_get(k, &req, &p) == KILN_OK, "%s", kiln_errmsg(k));
	ck_assert_str_eq(kiln_program_key(p), x.key);
	int (*fn)(void);
	*(void **)&fn = kiln_sym(p, "kiln_test_value");
	ck_assert_int_eq(fn(), 31);
	kiln_close(k);
	ck_assert_int_eq(harness_status_num_at(sock, "builds_started"), 0);
	ck_assert_int_eq(harness_status_num_at(sock, "hits"), 1);
	free(text);
	exported_free(&x);
}
END_TEST

START_TEST(put_refuses_bad_bytes)
{
	struct harness_export x;
	char sock[HARNESS_PATH], msg[4096];

	harness_start(NULL);
	export_program(&x, "tampered", 5, "");
	harness_start_named("b", NULL, NULL, sock);
	/* One byte flipped in the middle. */
	x.bytes[x.size / 2] ^= 0x40;
	ck_assert_int_eq(put_to(sock, &x, NULL, x.bytes, x.size, msg, sizeof(msg)), KILN_EREFUSED);
	ck_assert_msg(harness_contains(msg, "SHA-256"), "%s", msg);
	x.bytes[x.size / 2] ^= 0x40;
	/* Truncated. */
	ck_assert_int_eq(put_to(sock, &x, NULL, x.bytes, x.size - 100, msg, sizeof(msg)), KILN_EREFUSED);
	ck_assert_msg(harness_contains(msg, "bytes"), "%s", msg);
	ck_assert_int_eq(harness_status_num_at(sock, "entries"), 0);
	ck_assert_int_eq(harness_status_num_at(sock, "imports"), 0);
	/* Nothing half-written is left behind in the cache. */
	char tmp[HARNESS_PATH];
	ck_assert_int_eq(harness_count_dir(harness_path(tmp, "b.cache/tmp")), 0);
	/* The intact artifact still goes in. */
	ck_assert_msg(put_to(sock, &x, NULL, x.bytes, x.size, msg, sizeof(msg)) == KILN_OK, "%s", msg);
	exported_free(&x);
}
END_TEST

START_TEST(put_refuses_foreign_key_and_deps)
{
	struct harness_export x;
	char sock[HARNESS_PATH], msg[4096], hdr[HARNESS_PATH], inc[HARNESS_PATH + 16];
	char *meta;

	harness_start(NULL);
	/* A program with a header dependency. */
	harness_write_file(harness_path(hdr, "dep.h"), "#define DEP_VALUE 9\n");
	snprintf(inc, sizeof(inc), "#include \"%s\"", hdr);
	export_program(&x, "withdep", 9, inc);
	harness_start_named("b", NULL, NULL, sock);

	/* A key this node does not compute for the request. */
	char wrong[80];
	snprintf(wrong, sizeof(wrong), "\"key\":\"%s\"", x.key);
	wrong[8] = wrong[8] == 'a' ? 'b' : 'a';
	char right[80];
	snprintf(right, sizeof(right), "\"key\":\"%s\"", x.key);
	meta = meta_with(x.meta, right, wrong);
	ck_assert_int_eq(put_to(sock, &x, meta, x.bytes, x.size, msg, sizeof(msg)), KILN_EREFUSED);
	ck_assert_msg(harness_contains(msg, "computes key"), "%s", msg);
	free(meta);

	/* The header differs on this node (simulated: the recorded digest). */
	const char *d = strstr(x.meta, "\"deps\":[{\"path\":");
	ck_assert_ptr_nonnull(d);
	const char *dg = strstr(d, "\"sha256\":\"") + 10;
	char from[80], to[80];
	snprintf(from, sizeof(from), "%.64s", dg);
	snprintf(to, sizeof(to), "%.64s", dg);
	to[0] = to[0] == '0' ? '1' : '0';
	meta = meta_with(x.meta, from, to);
	ck_assert_int_eq(put_to(sock, &x, meta, x.bytes, x.size, msg, sizeof(msg)), KILN_EREFUSED);
	ck_assert_msg(harness_contains(msg, "differs on this node"), "%s", msg);
	free(meta);

	/* Really different here: the header changed after the build. */
	harness_write_file(hdr, "#define DEP_VALUE 10\n");
	ck_assert_int_eq(put_to(sock, &x, NULL, x.bytes, x.size, msg, sizeof(msg)), KILN_EREFUSED);
	ck_assert_msg(harness_contains(msg, "differs on this node"), "%s", msg);
	ck_assert_int_eq(harness_status_num_at(sock, "entries"), 0);
	exported_free(&x);
}
END_TEST

START_TEST(put_refuses_other_toolchain_environment)
{
	struct harness_export x;
	char sock[HARNESS_PATH], msg[4096];
	const char *env[] = { "SOURCE_DATE_EPOCH=1", NULL };

	harness_start(NULL);
	export_program(&x, "envdiff", 3, "");
	harness_start_named("b", NULL, env, sock);
	ck_assert_int_eq(put_to(sock, &x, NULL, x.bytes, x.size, msg, sizeof(msg)), KILN_EREFUSED);
	ck_assert_msg(harness_contains(msg, "computes key"), "%s", msg);
	ck_assert_int_eq(harness_status_num_at(sock, "entries"), 0);
	exported_free(&x);
}
END_TEST

/* Sends a put with no descriptor (a raw frame) on fd; it must be refused
 * for want of one ("field": "fd"). */
static void put_without_descriptor(int fd, int id, const char *key)
{
	char req[512];
	snprintf(req, sizeof(req),
		 "{\"op\":\"put\",\"id\":%d,\"sources\":[{\"name\":\"a.c\",\"text\":\"int x;\"}],"
		 "\"key\":\"%s\",\"sha256\":\"%064d\",\"size\":1}", id, key, 0);
	harness_raw_send(fd, req);
	cJSON *r = harness_raw_recv(fd);
	ck_assert_str_eq(harness_error_code(r), "bad_request");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "error"), "field")), "fd");
	cJSON_Delete(r);
}

START_TEST(put_needs_a_file_descriptor)
{
	struct harness_export x;
	cJSON *r;
	int fd;

	harness_start(NULL);
	export_program(&x, "nofd", 4, "");
	/* No descriptor at all: a raw frame. */
	fd = harness_raw_connect(harness.socket);
	harness_raw_send(fd, "{\"op\":\"hello\",\"id\":1,\"proto\":3}");
	cJSON_Delete(harness_raw_recv(fd));
	put_without_descriptor(fd, 2, x.key);
	/* Malformed put fields. */
	harness_raw_send(fd, "{\"op\":\"put\",\"id\":3,\"sources\":[{\"name\":\"a.c\",\"text\":\"int x;\"}],"
			     "\"key\":\"zz\",\"sha256\":\"00\",\"size\":1}");
	r = harness_raw_recv(fd);
	ck_assert_str_eq(harness_error_code(r), "bad_request");
	cJSON_Delete(r);
	close(fd);

	/* A descriptor that is not a regular file (a pipe), to a daemon that
	 * lacks the entry. */
	struct kiln *k;
	char sock[HARNESS_PATH];
	int p[2];
	harness_start_named("b", NULL, NULL, sock);
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(kiln_open(sock, &k), KILN_OK);
	ck_assert_int_eq(kiln_x_put(k, x.skel, x.meta, p[0]), KILN_EREFUSED);
	ck_assert_msg(harness_contains(kiln_errmsg(k), "regular file"), "%s", kiln_errmsg(k));
	kiln_close(k);
	ck_assert(harness_socket_answers(sock));
	close(p[0]);
	close(p[1]);
	/* The daemon is still fine. */
	ck_assert(harness_socket_answers(harness.socket));
	exported_free(&x);
}
END_TEST

/* Sends text as one frame on fd with pass attached (SCM_RIGHTS). */
static void raw_send_with_fd(int fd, const char *text, int pass)
{
	size_t len = strlen(text);
	char *frame = malloc(len + 4);
	frame[0] = (char)(len >> 24), frame[1] = (char)(len >> 16);
	frame[2] = (char)(len >> 8), frame[3] = (char)len;
	memcpy(frame + 4, text, len);
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = { .iov_base = frame, .iov_len = len + 4 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf.buf, .msg_controllen = sizeof(cbuf.buf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &pass, sizeof(int));
	ck_assert_int_eq(sendmsg(fd, &mh, MSG_NOSIGNAL), (ssize_t)(len + 4));
	free(frame);
}

/* A descriptor sent with a request that takes none (status: no OPF_FD in
 * proto/ops.def) is closed once that request is read, never kept for the
 * connection's next put: that put, sent without a descriptor, is refused
 * for want of one rather than taking the status's for its artifact. */
START_TEST(put_never_takes_another_requests_descriptor)
{
	struct harness_export x;
	int p[2];

	harness_start(NULL);
	export_program(&x, "stray", 5, "");
	ck_assert_int_eq(pipe(p), 0);
	int fd = harness_raw_hello(harness.socket);
	raw_send_with_fd(fd, "{\"op\":\"status\",\"id\":2}", p[1]);
	close(p[1]);
	cJSON *r = harness_raw_recv(fd);
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(r, "ok")));
	cJSON_Delete(r);
	/* kilnd held the pipe's only other write end: closed, the read end
	 * sees end of file (within the test's own timeout, never a timing). */
	struct pollfd pf = { .fd = p[0], .events = POLLIN };
	ck_assert_int_eq(poll(&pf, 1, 60000), 1);
	char c;
	ck_assert_int_eq(read(p[0], &c, 1), 0);
	close(p[0]);
	put_without_descriptor(fd, 3, x.key);
	close(fd);
	char *log = harness_read_file(harness.log);
	ck_assert_msg(harness_contains(log, "with a request that takes none; closed"), "%s", log);
	free(log);
	exported_free(&x);
}
END_TEST

/* A put whose checks outlast libkiln's deadline (KILN_TIMEOUT=10): both
 * kilnds run a toolchain wrapper that takes 12 s when kilnd checks another
 * node's artifact with it (recheck.c, in tmp/v-*), as a loaded node can.
 * kilnd sends heartbeats while it works, so the put succeeds; it used to
 * fail with KILN_EIO ("answered no put for 10 s"), which libkiln-mpi takes
 * for a dead kilnd (seen with 128 simulated nodes on 2 cores). */
START_TEST(put_slower_than_the_deadline_succeeds)
{
	struct harness_export x;
	char sock[HARNESS_PATH], msg[4096], wrapper[HARNESS_PATH], tc[HARNESS_PATH + 8];
	char marks[HARNESS_PATH], *text = NULL;

	harness_path(marks, "rechecks");
	/* Builds and checks run the same programs (so that both record the
	 * same inputs); only the sleep differs. */
	ck_assert(asprintf(&text,
		"#!/bin/sh\n"
		"t=0\n"
		"case \"$PWD\" in */tmp/v-*) t=12; echo recheck >> '%s' ;; esac\n"
		"/bin/sh -c '/usr/bin/sleep \"$1\"' sh $t\n"
		"exec /usr/bin/cc \"$@\"\n", marks) > 0);
	harness_write_file(harness_path(wrapper, "slowcheck.sh"), text);
	free(text);
	ck_assert_int_eq(chmod(wrapper, 0755), 0);
	snprintf(tc, sizeof(tc), "cc=%s", wrapper);
	const char *extra[] = { "--toolchain", tc, "--allow-write", harness.dir, NULL };
	char ignore[HARNESS_PATH + 32];
	snprintf(ignore, sizeof(ignore), "KILN_OBSERVE_IGNORE=%s", marks);
	const char *env[] = { ignore, NULL };
	harness_start_env(extra, env);
	export_program(&x, "slowcheck", 34, "");
	harness_start_named("b", extra, env, sock);
	setenv("KILN_TIMEOUT", "10", 1);
	int rc = put_to(sock, &x, NULL, x.bytes, x.size, msg, sizeof(msg));
	unsetenv("KILN_TIMEOUT");
	ck_assert_msg(rc == KILN_OK, "%s", msg);
	ck_assert_int_eq(harness_status_num_at(sock, "imports"), 1);
	/* The check did take longer than the deadline. */
	char *m = harness_read_file(marks);
	ck_assert_msg(m != NULL && harness_contains(m, "recheck"), "no recheck ran: %s", m);
	free(m);
	exported_free(&x);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("put");

	suite_add_tcase(s, harness_tcase("put_then_hit_without_building", put_then_hit_without_building, 120));
	suite_add_tcase(s, harness_tcase("put_refuses_bad_bytes", put_refuses_bad_bytes, 120));
	suite_add_tcase(s, harness_tcase("put_refuses_foreign_key_and_deps", put_refuses_foreign_key_and_deps, 120));
	suite_add_tcase(s, harness_tcase("put_refuses_other_toolchain_environment", put_refuses_other_toolchain_environment, 120));
	suite_add_tcase(s, harness_tcase("put_needs_a_file_descriptor", put_needs_a_file_descriptor, 120));
	suite_add_tcase(s, harness_tcase("put_never_takes_another_requests_descriptor",
					 put_never_takes_another_requests_descriptor, 120));
	suite_add_tcase(s, harness_tcase("put_slower_than_the_deadline", put_slower_than_the_deadline_succeeds, 120));
	return harness_main(s);
}
