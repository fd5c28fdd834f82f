/*
 * Unit tests of the frame codec (proto/frame.c) and of the blocking wire I/O
 * with descriptor passing (proto/wire.c), over real socketpairs.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frame.h"
#include "wire.h"
#include "unit.h"

/* A small deterministic generator, so that a failure can be replayed. */
static uint64_t rng_state;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

START_TEST(test_put_header)
{
	uint8_t hdr[FRAME_HDR_LEN];

	frame_put_header(hdr, 0x01020304u);
	ck_assert_uint_eq(hdr[0], 1);
	ck_assert_uint_eq(hdr[1], 2);
	ck_assert_uint_eq(hdr[2], 3);
	ck_assert_uint_eq(hdr[3], 4);
	frame_put_header(hdr, 7);
	ck_assert_mem_eq(hdr, "\0\0\0\x07", 4);
}
END_TEST

START_TEST(test_encode)
{
	size_t n = 0;
	char *f = frame_encode("{\"a\":1}", 7, &n);

	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(n, 11);
	ck_assert_mem_eq(f, "\0\0\0\x07{\"a\":1}", 11);
	free(f);
	ck_assert_ptr_null(frame_encode("x", 0, &n));
}
END_TEST

START_TEST(test_byte_by_byte)
{
	const char *payload = "{\"op\":\"status\",\"id\":4}";
	struct frame_decoder d;
	size_t n, i, outlen = 0;
	char *f = frame_encode(payload, strlen(payload), &n), *out = NULL;
	ssize_t used;

	frame_decoder_init(&d, 1024);
	for (i = 0; i < n; i++) {
		used = frame_decoder_feed(&d, f + i, 1, &out, &outlen);
		ck_assert_int_eq(used, 1);
		if (i + 1 < n)
			ck_assert_ptr_null(out);
	}
	ck_assert_ptr_nonnull(out);
	ck_assert_uint_eq(outlen, strlen(payload));
	ck_assert_str_eq(out, payload);
	free(out);
	/* Feeding nothing is allowed and consumes nothing. */
	ck_assert_int_eq(frame_decoder_feed(&d, "", 0, &out, &outlen), 0);
	ck_assert_ptr_null(out);
	frame_decoder_fini(&d);
	free(f);
}
END_TEST

START_TEST(test_one_frame_per_call)
{
	struct frame_decoder d;
	char buf[64], *out;
	size_t outlen;
	ssize_t used;

	/* Two frames back to back: the first call stops at the first's end. */
	memcpy(buf, "\0\0\0\x02{}\0\0\0\x03[1]", 13);
	frame_decoder_init(&d, 0);
	ck_assert_uint_eq(d.max, FRAME_MAX_DEFAULT);
	used = frame_decoder_feed(&d, buf, 13, &out, &outlen);
	ck_assert_int_eq(used, 6);
	ck_assert_str_eq(out, "{}");
	ck_assert_uint_eq(outlen, 2);
	free(out);
	used = frame_decoder_feed(&d, buf + 6, 7, &out, &outlen);
	ck_assert_int_eq(used, 7);
	ck_assert_str_eq(out, "[1]");
	free(out);
	frame_decoder_fini(&d);
}
END_TEST

START_TEST(test_header_split)
{
	struct frame_decoder d;
	char *out;
	size_t outlen;

	frame_decoder_init(&d, 100);
	ck_assert_int_eq(frame_decoder_feed(&d, "\0\0", 2, &out, &outlen), 2);
	ck_assert_ptr_null(out);
	ck_assert_int_eq(frame_decoder_feed(&d, "\0", 1, &out, &outlen), 1);
	ck_assert_ptr_null(out);
	ck_assert_int_eq(frame_decoder_feed(&d, "\x05" "ab", 3, &out, &outlen), 3);
	ck_assert_ptr_null(out);
	ck_assert_int_eq(frame_decoder_feed(&d, "cdeXYZ", 6, &out, &outlen), 3);
	ck_assert_ptr_nonnull(out);
	ck_assert_str_eq(out, "abcde");
	free(out);
	frame_decoder_fini(&d);
}
END_TEST

START_TEST(test_zero_length)
{
	struct frame_decoder d;
	char *out;

	frame_decoder_init(&d, 100);
	ck_assert_int_eq(frame_decoder_feed(&d, "\0\0", 2, &out, NULL), 2);
	ck_assert_int_eq(frame_decoder_feed(&d, "\0\0{}", 4, &out, NULL), -EBADMSG);
	ck_assert_ptr_null(out);
	frame_decoder_fini(&d);
}
END_TEST

START_TEST(test_oversize)
{
	struct frame_decoder d;
	uint8_t hdr[4];
	char *out;

	frame_decoder_init(&d, 100);
	frame_put_header(hdr, 101);
	ck_assert_int_eq(frame_decoder_feed(&d, hdr, 4, &out, NULL), -EMSGSIZE);
	frame_decoder_fini(&d);

	/* Exactly the maximum is accepted. */
	frame_decoder_init(&d, 100);
	frame_put_header(hdr, 100);
	ck_assert_int_eq(frame_decoder_feed(&d, hdr, 4, &out, NULL), 4);
	ck_assert_ptr_null(out);
	frame_decoder_fini(&d);

	/* The largest header value does not overflow anything. */
	frame_decoder_init(&d, FRAME_MAX_DEFAULT);
	ck_assert_int_eq(frame_decoder_feed(&d, "\xff\xff\xff\xff", 4, &out, NULL),
			 -EMSGSIZE);
	frame_decoder_fini(&d);
}
END_TEST

START_TEST(test_fini_partial)
{
	struct frame_decoder d;
	char *out;

	/* A partly read frame is freed by fini (ASan would report a leak). */
	frame_decoder_init(&d, 100);
	ck_assert_int_eq(frame_decoder_feed(&d, "\0\0\0\x10" "abc", 7, &out, NULL), 7);
	ck_assert_ptr_null(out);
	frame_decoder_fini(&d);
	ck_assert_ptr_null(d.buf);
}
END_TEST

START_TEST(test_random_splits)
{
	enum { NFRAMES = 12, ITER = 300 };
	char *payload[NFRAMES];
	size_t plen[NFRAMES], slen = 0, off, chunk, got, i, j, outlen;
	struct frame_decoder d;
	char *stream, *out;
	ssize_t used;
	int iter;

	rng_state = 0x9e3779b97f4a7c15ull;
	for (iter = 0; iter < ITER; iter++) {
		slen = 0;
		for (i = 0; i < NFRAMES; i++) {
			/* Mostly small frames, some larger than a typical read. */
			plen[i] = 1 + rng() % (rng() % 4 == 0 ? 70000 : 300);
			payload[i] = malloc(plen[i]);
			ck_assert_ptr_nonnull(payload[i]);
			for (j = 0; j < plen[i]; j++)
				payload[i][j] = (char)(rng() & 0xff);
			slen += FRAME_HDR_LEN + plen[i];
		}
		stream = malloc(slen);
		ck_assert_ptr_nonnull(stream);
		for (off = 0, i = 0; i < NFRAMES; i++) {
			frame_put_header((uint8_t *)stream + off, (uint32_t)plen[i]);
			memcpy(stream + off + FRAME_HDR_LEN, payload[i], plen[i]);
			off += FRAME_HDR_LEN + plen[i];
		}

		frame_decoder_init(&d, 100000);
		got = 0;
		for (off = 0; off < slen; off += chunk) {
			chunk = 1 + rng() % (rng() % 3 == 0 ? 9 : 5000);
			if (chunk > slen - off)
				chunk = slen - off;
			/* Feed one read's worth until it is all consumed. */
			for (j = 0; j < chunk; j += (size_t)used) {
				used = frame_decoder_feed(&d, stream + off + j, chunk - j,
							  &out, &outlen);
				ck_assert_int_gt(used, 0);
				if (!out)
					continue;
				ck_assert_uint_lt(got, NFRAMES);
				ck_assert_uint_eq(outlen, plen[got]);
				ck_assert_mem_eq(out, payload[got], plen[got]);
				ck_assert_int_eq(out[outlen], '\0');
				free(out);
				got++;
			}
		}
		ck_assert_uint_eq(got, NFRAMES);
		ck_assert_uint_eq(d.hdr_have, 0);
		frame_decoder_fini(&d);
		for (i = 0; i < NFRAMES; i++)
			free(payload[i]);
		free(stream);
	}
}
END_TEST

/* Counts this process's open descriptors, to catch leaks. */
static int count_fds(void)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(dir);
	while ((e = readdir(dir)))
		if (e->d_name[0] != '.')
			n++;
	closedir(dir);
	return n - 1; /* the directory's own descriptor */
}

static int temp_file(void)
{
	char path[] = "/tmp/kiln-test-frame-XXXXXX";
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_assert_int_eq(write(fd, "hello", 5), 5);
	return fd;
}

START_TEST(test_wire_pass_fd)
{
	const char *payload = "{\"id\":2,\"ok\":true,\"fd\":true}";
	struct stat a, b;
	struct wire_conn c;
	int sv[2], fd, got;
	char *f, *out = NULL;
	size_t n, outlen = 0;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	fd = temp_file();
	f = frame_encode(payload, strlen(payload), &n);
	ck_assert_int_eq(wire_sendmsg(sv[0], f, n, fd), (long)n);
	/* A second frame without a descriptor, in the same stream. */
	ck_assert_int_eq(wire_sendmsg(sv[0], f, n, -1), (long)n);

	wire_conn_init(&c, sv[1], 1024);
	ck_assert_int_eq(wire_recv_frame(&c, &out, &outlen), 0);
	ck_assert_str_eq(out, payload);
	ck_assert_uint_eq(outlen, strlen(payload));
	free(out);
	ck_assert_uint_eq(c.nfds, 1);
	ck_assert_int_eq(wire_recv_frame(&c, &out, &outlen), 0);
	ck_assert_str_eq(out, payload);
	free(out);
	ck_assert_uint_eq(c.nfds, 1);

	got = wire_take_fd(&c);
	ck_assert_int_ge(got, 0);
	ck_assert_int_eq(wire_take_fd(&c), -1);
	ck_assert_int_eq(fstat(fd, &a), 0);
	ck_assert_int_eq(fstat(got, &b), 0);
	ck_assert_uint_eq(a.st_ino, b.st_ino);
	ck_assert_uint_eq(a.st_dev, b.st_dev);
	ck_assert_int_ne(fcntl(got, F_GETFD) & FD_CLOEXEC, 0);
	close(got);

	/* The peer going away reads as a reset. */
	close(sv[0]);
	ck_assert_int_eq(wire_recv_frame(&c, &out, &outlen), -ECONNRESET);
	ck_assert_ptr_null(out);
	wire_conn_fini(&c);
	ck_assert_int_eq(c.fd, -1);
	close(fd);
	free(f);
}
END_TEST

START_TEST(test_wire_fifo_and_fini)
{
	struct wire_conn c;
	int sv[2], fds[3], i, before;
	char *out;
	size_t n;
	char *f = frame_encode("{}", 2, &n);

	before = count_fds();
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	for (i = 0; i < 3; i++) {
		fds[i] = temp_file();
		ck_assert_int_eq(wire_sendmsg(sv[0], f, n, fds[i]), (long)n);
	}
	wire_conn_init(&c, sv[1], 0);
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(wire_recv_frame(&c, &out, NULL), 0);
		free(out);
	}
	ck_assert_uint_eq(c.nfds, 3);
	/* Descriptors come out in arrival order. */
	{
		struct stat a, b;
		int got = wire_take_fd(&c);

		ck_assert_int_eq(fstat(fds[0], &a), 0);
		ck_assert_int_eq(fstat(got, &b), 0);
		ck_assert_uint_eq(a.st_ino, b.st_ino);
		close(got);
	}
	/* fini closes the socket and the two unclaimed descriptors. */
	wire_conn_fini(&c);
	close(sv[0]);
	for (i = 0; i < 3; i++)
		close(fds[i]);
	ck_assert_int_eq(count_fds(), before);
	free(f);
}
END_TEST

START_TEST(test_wire_many_fds_one_sendmsg)
{
	struct wire_conn c;
	struct iovec iov[WIRE_SEND_FDS_MAX];
	int sv[2], fds[WIRE_SEND_FDS_MAX + 1], i, before;
	char *frames[WIRE_SEND_FDS_MAX], *out;
	size_t n;

	before = count_fds();
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	for (i = 0; i < WIRE_SEND_FDS_MAX; i++) {
		char text[32];

		snprintf(text, sizeof(text), "{\"i\":%d}", i);
		frames[i] = frame_encode(text, strlen(text), &n);
		iov[i].iov_base = frames[i];
		iov[i].iov_len = n;
		fds[i] = temp_file();
	}
	fds[WIRE_SEND_FDS_MAX] = temp_file();
	/* More than a receiver is sure to hold in one go is refused. */
	ck_assert_int_eq(wire_sendmsgv(sv[0], iov, 1, fds, WIRE_SEND_FDS_MAX + 1), -EINVAL);
	ck_assert_int_gt(wire_sendmsgv(sv[0], iov, WIRE_SEND_FDS_MAX, fds, WIRE_SEND_FDS_MAX), 0);
	wire_conn_init(&c, sv[1], 0);
	/* Every frame finds its own descriptor, in order. */
	for (i = 0; i < WIRE_SEND_FDS_MAX; i++) {
		char want[32];
		struct stat a, b;
		int got;

		ck_assert_int_eq(wire_recv_frame(&c, &out, NULL), 0);
		snprintf(want, sizeof(want), "{\"i\":%d}", i);
		ck_assert_str_eq(out, want);
		free(out);
		got = wire_take_fd(&c);
		ck_assert_int_ge(got, 0);
		ck_assert_int_eq(fstat(fds[i], &a), 0);
		ck_assert_int_eq(fstat(got, &b), 0);
		ck_assert_uint_eq(a.st_ino, b.st_ino);
		close(got);
	}
	ck_assert_int_eq(wire_take_fd(&c), -1);
	wire_conn_fini(&c);
	close(sv[0]);
	for (i = 0; i <= WIRE_SEND_FDS_MAX; i++)
		close(fds[i]);
	for (i = 0; i < WIRE_SEND_FDS_MAX; i++)
		free(frames[i]);
	ck_assert_int_eq(count_fds(), before);
}
END_TEST

START_TEST(test_wire_ctrunc)
{
	enum { N = WIRE_MAX_FDS + 1 };
	union {
		char buf[CMSG_SPACE(sizeof(int) * N)];
		struct cmsghdr align;
	} cbuf;
	struct wire_conn c;
	struct msghdr mh;
	struct cmsghdr *cm;
	struct iovec iov;
	int sv[2], fds[N], i, before;
	char *out, *f;
	size_t n;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	f = frame_encode("{}", 2, &n);
	fds[0] = temp_file();
	for (i = 1; i < N; i++)
		fds[i] = fds[0];
	memset(&mh, 0, sizeof(mh));
	memset(&cbuf, 0, sizeof(cbuf));
	iov.iov_base = f;
	iov.iov_len = n;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cbuf.buf;
	mh.msg_controllen = sizeof(cbuf.buf);
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int) * N);
	memcpy(CMSG_DATA(cm), fds, sizeof(fds));
	ck_assert_int_eq(sendmsg(sv[0], &mh, 0), (ssize_t)n);

	before = count_fds();
	wire_conn_init(&c, sv[1], 0);
	ck_assert_int_eq(wire_recv_frame(&c, &out, NULL), -EPROTO);
	ck_assert_uint_eq(c.nfds, 0);
	/* Whatever did arrive was closed again. */
	ck_assert_int_eq(count_fds(), before);
	wire_conn_fini(&c);
	close(sv[0]);
	close(fds[0]);
	free(f);
}
END_TEST

START_TEST(test_wire_sendmsg_nonblocking)
{
	static char big[1 << 16];
	int sv[2];
	long n, total = 0;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	/* Fill the socket buffer: writes end short or with -EAGAIN. */
	for (;;) {
		n = wire_sendmsg(sv[0], big, sizeof(big), -1);
		if (n == -EAGAIN)
			break;
		ck_assert_int_gt(n, 0);
		ck_assert_int_le(n, (long)sizeof(big));
		total += n;
		ck_assert_int_lt(total, 1L << 30);
	}
	ck_assert_int_gt(total, 0);
	ck_assert_int_eq(wire_sendmsg(sv[0], big, 0, 3), -EINVAL);
	close(sv[1]);
	ck_assert_int_eq(wire_sendmsg(sv[0], big, 1, -1), -EPIPE);
	close(sv[0]);
}
END_TEST

START_TEST(test_wire_large_frame)
{
	enum { LEN = 3 << 20 };
	struct wire_conn c;
	char *payload, *out = NULL;
	size_t outlen = 0, i;
	int sv[2], status;
	pid_t pid;

	payload = malloc(LEN);
	ck_assert_ptr_nonnull(payload);
	for (i = 0; i < LEN; i++)
		payload[i] = (char)('a' + i % 26);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	/* A frame larger than the socket buffer needs a concurrent reader. */
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct wire_conn w;

		close(sv[1]);
		wire_conn_init(&w, sv[0], 0);
		_exit(wire_send_frame(&w, payload, LEN) == 0 &&
		      wire_send_frame(&w, "{}", 2) == 0 ? 0 : 1);
	}
	close(sv[0]);
	wire_conn_init(&c, sv[1], LEN);
	ck_assert_int_eq(wire_recv_frame(&c, &out, &outlen), 0);
	ck_assert_uint_eq(outlen, LEN);
	ck_assert_mem_eq(out, payload, LEN);
	free(out);
	ck_assert_int_eq(wire_recv_frame(&c, &out, &outlen), 0);
	ck_assert_str_eq(out, "{}");
	free(out);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_eq(wire_send_frame(&c, "x", 0), -EINVAL);
	wire_conn_fini(&c);
	free(payload);
}
END_TEST

START_TEST(test_wire_oversize)
{
	struct wire_conn c;
	int sv[2];
	char *out;
	size_t n;
	char *f = frame_encode("0123456789", 10, &n);

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	ck_assert_int_eq(wire_sendmsg(sv[0], f, n, -1), (long)n);
	wire_conn_init(&c, sv[1], 9);
	ck_assert_int_eq(wire_recv_frame(&c, &out, NULL), -EMSGSIZE);
	wire_conn_fini(&c);
	close(sv[0]);
	free(f);
}
END_TEST

START_TEST(test_wire_connect)
{
	char dir[] = "/tmp/kiln-test-wire-XXXXXX", path[200], longpath[200];
	struct sockaddr_un sa;
	int ls, fd, ac;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/s.sock", dir);
	ck_assert_int_eq(wire_connect(path), -ENOENT);

	ls = socket(AF_UNIX, SOCK_STREAM, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	strcpy(sa.sun_path, path);
	ck_assert_int_eq(bind(ls, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(ls, 4), 0);
	fd = wire_connect(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_ne(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
	ac = accept(ls, NULL, NULL);
	ck_assert_int_ge(ac, 0);
	close(ac);
	close(fd);
	close(ls);
	unlink(path);
	rmdir(dir);

	memset(longpath, 'a', sizeof(sa.sun_path));
	longpath[0] = '/';
	longpath[sizeof(sa.sun_path)] = '\0';
	ck_assert_int_eq(wire_connect(longpath), -ENAMETOOLONG);
	ck_assert_int_eq(wire_connect(""), -EINVAL);
}
END_TEST

static Suite *frame_suite(void)
{
	Suite *s = suite_create("frame");
	TCase *tc = tcase_create("codec");
	TCase *tw = tcase_create("wire");

	tcase_add_test(tc, test_put_header);
	tcase_add_test(tc, test_encode);
	tcase_add_test(tc, test_byte_by_byte);
	tcase_add_test(tc, test_one_frame_per_call);
	tcase_add_test(tc, test_header_split);
	tcase_add_test(tc, test_zero_length);
	tcase_add_test(tc, test_oversize);
	tcase_add_test(tc, test_fini_partial);
	tcase_add_test(tc, test_random_splits);
	suite_add_tcase(s, tc);

	tcase_add_test(tw, test_wire_pass_fd);
	tcase_add_test(tw, test_wire_fifo_and_fini);
	tcase_add_test(tw, test_wire_many_fds_one_sendmsg);
	tcase_add_test(tw, test_wire_ctrunc);
	tcase_add_test(tw, test_wire_sendmsg_nonblocking);
	tcase_add_test(tw, test_wire_large_frame);
	tcase_add_test(tw, test_wire_oversize);
	tcase_add_test(tw, test_wire_connect);
	suite_add_tcase(s, tw);
	return s;
}

int main(void)
{
	return unit_run(frame_suite());
}
