/*
 * Blocking frame I/O over a Unix stream socket, with descriptors passed as
 * SCM_RIGHTS ancillary data. libkiln and the CLI use it as is; the daemon
 * shares only wire_sendmsg() for its non-blocking writer.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "wire.h"

/* A control buffer that can hold WIRE_MAX_FDS descriptors, aligned for
 * struct cmsghdr as the CMSG macros require. */
union wire_cmsg_buf {
	char buf[CMSG_SPACE(sizeof(int) * WIRE_MAX_FDS)];
	struct cmsghdr align;
};

/* Waits for an interrupted connect() to finish, as POSIX leaves it running
 * in the background, and reports its outcome. */
static int finish_connect(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	socklen_t slen;
	int soerr = 0;

	for (;;) {
		if (poll(&pfd, 1, -1) >= 0)
			break;
		if (errno != EINTR)
			return -errno;
	}
	slen = sizeof(soerr);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &slen) < 0)
		return -errno;
	return -soerr;
}

/* The uid in $KILN_DAEMON_UID (a number), or -1: the user whose kilnd a
 * client of another user, let in by --allow-uid or --allow-group, trusts. */
static long trusted_daemon_uid(void)
{
	const char *s = getenv("KILN_DAEMON_UID");
	char *end;
	if (s == NULL || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno != 0 || *end != '\0' || v >= (unsigned long)(uid_t)-1)
		return -1;
	return (long)v;
}

/* The daemon hands out code to load: only one run by this very user counts,
 * or by the one $KILN_DAEMON_UID names. Anyone else who managed to put a
 * socket at the path gets -EPERM. */
static int check_server(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
		return -errno;
	if (cred.uid == geteuid() || (long)cred.uid == trusted_daemon_uid())
		return 0;
	return -EPERM;
}

int wire_connect(const char *path)
{
	struct sockaddr_un sa;
	size_t plen;
	int fd, rc;

	if (!path || !*path)
		return -EINVAL;
	plen = strlen(path);
	if (plen >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, plen + 1);

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	if (rc < 0)
		rc = errno == EINTR ? finish_connect(fd) : -errno;
	if (rc == 0)
		rc = check_server(fd);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	return fd;
}

void wire_conn_init(struct wire_conn *c, int fd, size_t max_frame)
{
	c->fd = fd;
	frame_decoder_init(&c->dec, max_frame);
	c->rbuf = NULL;
	c->rlen = 0;
	c->roff = 0;
	c->nfds = 0;
	c->recv_timeout_ms = 0;
}

/* Waits until fd is readable, at most ms milliseconds. 0 or -ETIMEDOUT. */
static int wait_readable(int fd, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		long spent = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
		if (spent >= ms)
			return -ETIMEDOUT;
		int n = poll(&pfd, 1, ms - (int)spent);
		if (n > 0)
			return 0;
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

void wire_conn_fini(struct wire_conn *c)
{
	size_t i;

	for (i = 0; i < c->nfds; i++)
		close(c->fds[i]);
	c->nfds = 0;
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	frame_decoder_fini(&c->dec);
	free(c->rbuf);
	c->rbuf = NULL;
	c->rlen = 0;
	c->roff = 0;
}

int wire_send_frame(struct wire_conn *c, const char *payload, size_t len)
{
	uint8_t hdr[FRAME_HDR_LEN];
	struct iovec iov[2];
	struct msghdr mh;
	size_t total, sent = 0;
	ssize_t n;

	if (len == 0 || len > UINT32_MAX)
		return -EINVAL;
	frame_put_header(hdr, (uint32_t)len);
	total = FRAME_HDR_LEN + len;
	while (sent < total) {
		/* Rebuild the vector from what is left, so that a short write in
		 * the header or in the payload simply continues. */
		memset(&mh, 0, sizeof(mh));
		if (sent < FRAME_HDR_LEN) {
			iov[0].iov_base = hdr + sent;
			iov[0].iov_len = FRAME_HDR_LEN - sent;
			iov[1].iov_base = (char *)payload;
			iov[1].iov_len = len;
			mh.msg_iovlen = 2;
		} else {
			iov[0].iov_base = (char *)payload + (sent - FRAME_HDR_LEN);
			iov[0].iov_len = total - sent;
			mh.msg_iovlen = 1;
		}
		mh.msg_iov = iov;
		n = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		sent += (size_t)n;
	}
	return 0;
}

/*
 * Moves the descriptors of mh into the queue of c, or closes them all when c
 * is NULL. A peer that sends more than the queue holds is broken; those it
 * cannot keep are closed so that nothing leaks, and the caller reports a
 * protocol error.
 */
static int queue_cmsg_fds(struct wire_conn *c, struct msghdr *mh)
{
	struct cmsghdr *cm;
	size_t i, n;
	int fd, rc = 0;

	for (cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < n; i++) {
			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (c && c->nfds < WIRE_MAX_FDS) {
				c->fds[c->nfds++] = fd;
			} else {
				close(fd);
				rc = -EPROTO;
			}
		}
	}
	return rc;
}

/* Reads once from the socket into the empty read buffer. */
static int fill_rbuf(struct wire_conn *c)
{
	union wire_cmsg_buf cbuf;
	struct iovec iov;
	struct msghdr mh;
	ssize_t n;
	int rc;

	c->rlen = 0;
	c->roff = 0;
	/* Allocated here rather than with the connection: a fresh process
	 * then faults in only the pages its replies fill, not 64 KiB of zeros. */
	if (!c->rbuf) {
		c->rbuf = malloc(WIRE_RBUF);
		if (!c->rbuf)
			return -ENOMEM;
	}
	iov.iov_base = c->rbuf;
	iov.iov_len = WIRE_RBUF;
	if (c->recv_timeout_ms > 0 && (rc = wait_readable(c->fd, c->recv_timeout_ms)) != 0)
		return rc;
	for (;;) {
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cbuf.buf;
		mh.msg_controllen = sizeof(cbuf.buf);
		n = recvmsg(c->fd, &mh, MSG_CMSG_CLOEXEC);
		if (n >= 0)
			break;
		if (errno != EINTR)
			return -errno;
	}
	/* With truncated ancillary data some descriptors were lost, so the
	 * pairing of descriptors and replies can no longer be trusted. */
	if (mh.msg_flags & MSG_CTRUNC) {
		queue_cmsg_fds(NULL, &mh);
		return -EPROTO;
	}
	rc = queue_cmsg_fds(c, &mh);
	if (rc < 0)
		return rc;
	if (n == 0)
		return -ECONNRESET;
	c->rlen = (size_t)n;
	return 0;
}

int wire_recv_frame(struct wire_conn *c, char **out, size_t *outlen)
{
	ssize_t used;
	int rc;

	*out = NULL;
	for (;;) {
		if (c->roff < c->rlen) {
			used = frame_decoder_feed(&c->dec, c->rbuf + c->roff,
						  c->rlen - c->roff, out, outlen);
			if (used < 0)
				return (int)used;
			c->roff += (size_t)used;
			if (*out)
				return 0;
		}
		rc = fill_rbuf(c);
		if (rc < 0)
			return rc;
	}
}

int wire_take_fd(struct wire_conn *c)
{
	int fd;

	if (c->nfds == 0)
		return -1;
	fd = c->fds[0];
	c->nfds--;
	memmove(c->fds, c->fds + 1, c->nfds * sizeof(c->fds[0]));
	return fd;
}

long wire_sendmsgv(int sock, const struct iovec *iov, size_t iovcnt, const int *fds, size_t nfds)
{
	union wire_cmsg_buf cbuf;
	struct cmsghdr *cm;
	struct msghdr mh;
	ssize_t n;

	if (nfds > WIRE_SEND_FDS_MAX)
		return -EINVAL;
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = (struct iovec *)iov;
	mh.msg_iovlen = iovcnt;
	if (nfds > 0) {
		memset(&cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
	}
	for (;;) {
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
		if (n >= 0)
			return (long)n;
		if (errno != EINTR)
			return -errno;
	}
}

int wire_send_frames(struct wire_conn *c, const char *const *payloads, const size_t *lens, size_t n)
{
	size_t total = 0, off = 0;
	char *buf;
	int rc = 0;

	for (size_t i = 0; i < n; i++) {
		if (lens[i] == 0 || lens[i] > UINT32_MAX)
			return -EINVAL;
		total += FRAME_HDR_LEN + lens[i];
	}
	buf = malloc(total);
	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		frame_put_header((uint8_t *)buf + off, (uint32_t)lens[i]);
		memcpy(buf + off + FRAME_HDR_LEN, payloads[i], lens[i]);
		off += FRAME_HDR_LEN + lens[i];
	}
	for (off = 0; off < total;) {
		ssize_t w = send(c->fd, buf + off, total - off, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			rc = -errno;
			break;
		}
		off += (size_t)w;
	}
	free(buf);
	return rc;
}

long wire_sendmsg(int sock, const void *buf, size_t len, int pass_fd)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	/* A descriptor needs at least one byte of data to travel with. */
	if (len == 0 && pass_fd >= 0)
		return -EINVAL;
	return wire_sendmsgv(sock, &iov, 1, &pass_fd, pass_fd >= 0 ? 1 : 0);
}
