/*
 * Blocking frame I/O over a Unix stream socket with descriptor passing, for
 * libkiln and the CLI (the daemon does its own non-blocking I/O on the loop).
 */
#ifndef KILN_PROTO_WIRE_H
#define KILN_PROTO_WIRE_H

#include <stddef.h>
#include <sys/uio.h>

#include "frame.h"

#define WIRE_MAX_FDS 64
#define WIRE_RBUF 65536
/*
 * The most descriptors one sendmsg may carry. A receiver holds the ones of
 * one sendmsg (they come with its first byte) plus at most one of a frame
 * still being read, so WIRE_MAX_FDS leaves room to spare.
 */
#define WIRE_SEND_FDS_MAX 16

/* Receive state of one connection: the frame decoder plus descriptors received
 * but not yet claimed by a reply, in arrival order. */
struct wire_conn {
	int fd;
	struct frame_decoder dec;
	char *rbuf;              /* WIRE_RBUF bytes, allocated by the first read */
	size_t rlen, roff;       /* bytes read but not yet fed */
	int fds[WIRE_MAX_FDS];   /* received descriptors, FIFO */
	size_t nfds;
	int recv_timeout_ms;     /* > 0: a read gets -ETIMEDOUT after this long
				  * without a byte (0, the default: waits for ever) */
};

/* Connects to the Unix socket at path (blocking, close-on-exec). Returns the
 * descriptor or a negative errno; -ENAMETOOLONG for an over-long path, and
 * -EPERM when the process serving it runs as another user (SO_PEERCRED). */
int wire_connect(const char *path);

void wire_conn_init(struct wire_conn *c, int fd, size_t max_frame);
/* Closes the socket and every unclaimed descriptor. */
void wire_conn_fini(struct wire_conn *c);

/* Sends one frame holding payload (len bytes), blocking until written.
 * Retries EINTR; MSG_NOSIGNAL. Returns 0 or a negative errno. */
int wire_send_frame(struct wire_conn *c, const char *payload, size_t len);

/*
 * Receives the next frame, blocking. *out gets the malloc'd NUL-terminated
 * payload (owned by the caller). Descriptors that arrive are appended to
 * c->fds (received with MSG_CMSG_CLOEXEC). Returns 0, -ECONNRESET when the
 * peer closed, -EMSGSIZE/-EBADMSG for bad framing, -EPROTO when ancillary
 * data was truncated, -ETIMEDOUT when c->recv_timeout_ms passed without a
 * byte, or another negative errno.
 */
int wire_recv_frame(struct wire_conn *c, char **out, size_t *outlen);

/* Removes and returns the oldest received descriptor, or -1 when none. */
int wire_take_fd(struct wire_conn *c);

/* Sends n frames with one write where the socket takes them (a request
 * pipelined behind hello reaches the daemon in one read). 0 or -errno. */
int wire_send_frames(struct wire_conn *c, const char *const *payloads, const size_t *lens, size_t n);

/* As wire_sendmsg, for a vector of buffers and up to WIRE_SEND_FDS_MAX
 * descriptors, which all go with the first byte (-EINVAL for more). */
long wire_sendmsgv(int sock, const struct iovec *iov, size_t iovcnt, const int *fds, size_t nfds);

/*
 * Sends len bytes on a non-blocking or blocking socket with sendmsg, attaching
 * pass_fd (when >= 0) as SCM_RIGHTS to the first byte. Returns the number of
 * bytes written (possibly short), or a negative errno (-EAGAIN included).
 * Shared by the daemon's writer.
 */
long wire_sendmsg(int sock, const void *buf, size_t len, int pass_fd);

#endif
