/*
 * Control socket and connections. Each connection is a non-blocking Unix
 * socket watched with uv_poll, so that replies can carry SCM_RIGHTS
 * descriptors (uv_write2 only passes libuv handles). Reads feed the frame
 * decoder; writes go straight out when the queue is empty and are queued
 * (with their descriptor) when the socket is full.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "access.h"
#include "kilnd.h"
#include "log.h"
#include "msg.h"
#include "claims.h"
#include "fdcache.h"
#include "server.h"
#include "util.h"
#include "wire.h"
#include "thread.h"

struct outbuf {
	struct outbuf *next;
	char *data;       /* frame header and payload */
	size_t len, off;
	int fd;           /* descriptor to attach to the first byte, or -1 */
	struct fdref *ref;  /* fd's holder when borrowed (fdcache.h), else NULL */
};

struct server {
	int fd;
	uv_poll_t poll;
	uv_timer_t retry;           /* resumes accepting after running out of descriptors */
	bool listening;
	char *path;
	uv_timer_t stall;           /* --frame-timeout sweep */
	uv_timer_t beat;            /* heartbeats to clients waiting on requests */
	uv_timer_t resume_timer;    /* feeds held bytes (conn_resume) */
	struct conn *resume;        /* connections to feed, each with a reference */
	struct conn *conns;
	unsigned nconns;
	unsigned pending;           /* sum of the live connections' pending */
	uint64_t busy_log_ns;       /* last "refusing connections" warning */
	struct server_hooks hooks;
};

static void conn_on_io(uv_poll_t *h, int status, int events);
static void conn_resume(struct conn *c);

unsigned server_connections(const struct kilnd *d)
{
	return d->server != NULL ? d->server->nconns : 0;
}

unsigned server_pending(const struct kilnd *d)
{
	return d->server != NULL ? d->server->pending : 0;
}

/*
 * A connection stops being read while --max-requests of its requests are in
 * progress, or while CONN_OUT_MAX bytes of its replies wait to be written: a
 * client that pipelines without reading its replies fills its own socket,
 * not kilnd's memory. Replies already answered do not count against
 * --max-requests, so a client that writes a large batch before it reads
 * (libkiln's kiln_get_many) is not stopped while its replies queue here.
 */
static bool conn_full(const struct conn *c)
{
	return c->pending >= c->d->cfg->max_requests || c->out_bytes >= CONN_OUT_MAX;
}

/* Lets go of o's descriptor: sent, or never to be. */
static void outbuf_drop_fd(struct outbuf *o)
{
	if (o->ref != NULL)
		fdref_put(o->ref);
	else if (o->fd >= 0)
		close(o->fd);
	o->ref = NULL;
	o->fd = -1;
}

static void outbuf_free(struct outbuf *o)
{
	outbuf_drop_fd(o);
	free(o->data);
	free(o);
}

static void conn_on_closed(uv_handle_t *h)
{
	struct conn *c = h->data;
	conn_unref(c);
}

void conn_ref(struct conn *c)
{
	ASSERT_LOOP();
	c->refs++;
}

int conn_queue_work(struct conn *c, uint64_t id, enum pool_job kind, void (*fn)(void *arg),
		    void (*done)(void *arg, int status), void *arg)
{
	conn_ref(c);
	if (kilnd_work(c->d, kind, fn, done, arg) == 0)
		return 0;
	conn_reply_error(c, id, ERR_INTERNAL, NULL, KILND_WORK_REFUSED);
	conn_unref(c);
	return -1;
}

void conn_unref(struct conn *c)
{
	ASSERT_LOOP();
	if (--c->refs > 0)
		return;
	while (c->nrx > 0)
		close(c->rx_fds[--c->nrx]);
	frame_decoder_fini(&c->dec);
	free(c->held);
	free(c);
}

/* Closes the socket now; queued output is dropped and pending replies will be. */
static void conn_kill(struct conn *c)
{
	if (c->dead)
		return;
	struct server *s = c->d->server;
	c->dead = true;
	c->closing = true;
	while (c->out_head != NULL) {
		struct outbuf *o = c->out_head;
		c->out_head = o->next;
		outbuf_free(o);
	}
	c->out_tail = NULL;
	c->nout = 0;
	c->out_bytes = 0;
	/* Its requests go on (a build others wait for), unanswered; a build
	 * that only it waited for stops (the closed hook, after the unlink
	 * below). A connection with nothing pending waited for no build, so
	 * the hook, which walks the flights, runs only for one that did.
	 * Its claims end (another connection's lookup may take one over) and
	 * its lookups that wait on others' claims are dropped. */
	claims_owner_gone(c->d, &c->claims);
	bool waited = c->pending > 0;
	s->pending -= c->pending;
	c->pending = 0;
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	s->nconns--;
	kilnd_activity(c->d);
	/* uv_close takes the descriptor out of epoll; closed after, not
	 * before (one epoll_ctl, not two, one of them failing). */
	uv_close((uv_handle_t *)&c->poll, conn_on_closed);
	close(c->fd);
	c->fd = -1;
	if (s->hooks.closed != NULL && !c->d->stopping && waited)
		s->hooks.closed(c->d);
}

static void conn_set_events(struct conn *c, int events)
{
	if (c->dead || events == c->events)
		return;
	c->events = events;
	if (events == 0)
		uv_poll_stop(&c->poll);
	else
		uv_poll_start(&c->poll, events, conn_on_io);
}

static void conn_update_events(struct conn *c)
{
	int ev = 0;
	if (!c->closing && !conn_full(c)) {
		ev |= UV_READABLE | UV_DISCONNECT;
		if (c->held != NULL)
			conn_resume(c);
	}
	if (c->out_head != NULL)
		ev |= UV_WRITABLE;
	if (ev == 0 && c->closing) {
		conn_kill(c);
		return;
	}
	conn_set_events(c, ev);
}

#define FLUSH_IOV 64

/*
 * Writes as much queued output as the socket takes, many replies per sendmsg
 * (a batch of requests read at once is answered with one write, and the
 * client wakes once). Descriptors travel with the first byte of the sendmsg
 * that carries the start of their replies, so each arrives with or before its
 * reply's frame, never after, and in the order of the replies; at most
 * WIRE_SEND_FDS_MAX go in one sendmsg (what a client is sure to receive).
 */
static void conn_flush(struct conn *c)
{
	while (c->out_head != NULL) {
		struct iovec iov[FLUSH_IOV];
		struct outbuf *owners[WIRE_SEND_FDS_MAX];
		int fds[WIRE_SEND_FDS_MAX];
		size_t n_iov = 0, n_fds = 0;
		for (struct outbuf *o = c->out_head; o != NULL && n_iov < FLUSH_IOV; o = o->next) {
			if (o->fd >= 0 && o->off == 0) {
				if (n_fds == WIRE_SEND_FDS_MAX)
					break;
				owners[n_fds] = o;
				fds[n_fds++] = o->fd;
			}
			iov[n_iov].iov_base = o->data + o->off;
			iov[n_iov].iov_len = o->len - o->off;
			n_iov++;
		}
		long n = wire_sendmsgv(c->fd, iov, n_iov, fds, n_fds);
		if (n == -EAGAIN)
			break;
		if (n < 0) {
			log_debug("connection from pid %d: write: %s", (int)c->pid, strerror((int)-n));
			conn_kill(c);
			return;
		}
		/* Once any byte went, every descriptor of the sendmsg went with it. */
		for (size_t i = 0; n > 0 && i < n_fds; i++)
			outbuf_drop_fd(owners[i]);
		size_t left = (size_t)n;
		while (c->out_head != NULL && left > 0) {
			struct outbuf *o = c->out_head;
			size_t take = o->len - o->off < left ? o->len - o->off : left;
			o->off += take;
			left -= take;
			if (o->off < o->len)
				break;
			c->out_head = o->next;
			if (c->out_head == NULL)
				c->out_tail = NULL;
			c->out_bytes -= o->len;
			outbuf_free(o);
			c->nout--;
		}
		if (c->out_head != NULL && c->out_head->off > 0)
			break;
	}
	conn_update_events(c);
}

/* Queues a reply; its descriptor is fd (owned) or ref's (a reference
 * owned), or none. */
static void reply_queue(struct conn *c, const char *json, size_t len, int fd, struct fdref *ref)
{
	ASSERT_LOOP();
	struct outbuf *o = NULL;
	if (c->dead)
		goto drop;
	/* Every request gets one reply; a framing error's reply answers none. */
	if (c->pending > 0) {
		c->pending--;
		c->d->server->pending--;
	}
	o = calloc(1, sizeof(*o));
	if (o == NULL || (o->data = frame_encode(json, len, &o->len)) == NULL) {
		log_error("out of memory writing a reply; closing the connection");
		free(o);
		conn_kill(c);
		goto drop;
	}
	o->fd = ref != NULL ? fdref_fd(ref) : fd;
	o->ref = ref;
	if (c->out_tail != NULL)
		c->out_tail->next = o;
	else
		c->out_head = o;
	c->out_tail = o;
	c->nout++;
	c->out_bytes += o->len;
	/* Replies to requests of one read go out together, after it. */
	if (!c->batching)
		conn_flush(c);
	return;
drop:
	if (ref != NULL)
		fdref_put(ref);
	else if (fd >= 0)
		close(fd);
}

void conn_reply_text(struct conn *c, const char *json, size_t len, int fd)
{
	reply_queue(c, json, len, fd, NULL);
}

void conn_reply_text_ref(struct conn *c, const char *json, size_t len, struct fdref *ref)
{
	reply_queue(c, json, len, -1, ref);
}

void conn_reply(struct conn *c, cJSON *reply, int fd)
{
	ASSERT_LOOP();
	char *json = NULL;
	if (!c->dead && fd >= 0)
		cJSON_AddBoolToObject(reply, "fd", 1);
	if (!c->dead && (json = cJSON_PrintUnformatted(reply)) == NULL) {
		log_error("out of memory writing a reply; closing the connection");
		conn_kill(c);
	}
	if (json != NULL) {
		conn_reply_text(c, json, strlen(json), fd);
		fd = -1;
	}
	if (fd >= 0)
		close(fd);
	free(json);
	cJSON_Delete(reply);
}

void conn_reply_error(struct conn *c, uint64_t id, int code, const char *field,
		      const char *fmt, ...)
{
	struct msg_error err = { .code = (enum msg_err)code };
	if (field != NULL)
		snprintf(err.field, sizeof(err.field), "%s", field);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err.message, sizeof(err.message), fmt, ap);
	va_end(ap);
	cJSON *r = msg_error_reply(id, &err);
	if (r != NULL)
		conn_reply(c, r, -1);
}

void conn_close_after_reply(struct conn *c)
{
	ASSERT_LOOP();
	if (c->dead)
		return;
	c->closing = true;
	conn_update_events(c);
}

/* A framing error leaves no way to find the next frame: answer, then close. */
static void conn_fatal(struct conn *c, enum msg_err code, const char *msg)
{
	/* This reply answers no request: counted as one of its own, so that it
	 * does not consume the count of a request still in progress (the
	 * closed hook runs only for a connection that has some). */
	if (!c->dead) {
		c->pending++;
		c->d->server->pending++;
	}
	conn_reply_error(c, 0, code, NULL, "%s", msg);
	c->closing = true;
	conn_update_events(c);
}

static void conn_read_frames(struct conn *c);

/* Descriptors left once every frame they could have come with was handled
 * (the whole write they came with read, fed and dispatched): sent with ops
 * that take none (no OPF_FD, ops.h). Closed, so that a later put cannot
 * take another request's descriptor for its artifact. */
static void conn_drop_stray_fds(struct conn *c)
{
	if (c->nrx == 0 || !c->rx_whole || c->held != NULL || frame_decoder_partial(&c->dec))
		return;
	log_warn("pid %d sent %u descriptor%s with a request that takes none; closed", (int)c->pid,
		 c->nrx, c->nrx == 1 ? "" : "s");
	while (c->nrx > 0)
		close(c->rx_fds[--c->nrx]);
}

static void conn_read(struct conn *c)
{
	c->batching = true;
	conn_read_frames(c);
	c->batching = false;
	if (!c->dead)
		conn_drop_stray_fds(c);
	if (!c->dead && c->out_head != NULL)
		conn_flush(c);
}

int conn_take_fd(struct conn *c)
{
	ASSERT_LOOP();
	if (c->nrx == 0)
		return -1;
	int fd = c->rx_fds[0];
	c->nrx--;
	memmove(c->rx_fds, c->rx_fds + 1, c->nrx * sizeof(c->rx_fds[0]));
	return fd;
}

/* Keeps the descriptors that came with a read (a put's artifact); beyond
 * CONN_RX_FDS they are closed, and the put that wanted one is refused. */
static void conn_keep_fds(struct conn *c, struct msghdr *mh)
{
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm != NULL; cm = CMSG_NXTHDR(mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (c->nrx < CONN_RX_FDS) {
				c->rx_fds[c->nrx++] = fd;
			} else {
				log_warn("pid %d sent more descriptors than it may; closed", (int)c->pid);
				close(fd);
			}
		}
	}
}

static ssize_t conn_recv(struct conn *c, char *buf, size_t len)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * CONN_RX_FDS)];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf.buf, .msg_controllen = sizeof(cbuf.buf),
	};
	ssize_t n = recvmsg(c->fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n >= 0 && mh.msg_controllen > 0)
		conn_keep_fds(c, &mh);
	/* The kernel ends a read after the whole write that descriptors came
	 * with, unless the buffer filled first: a short read means every byte
	 * of that write is in. */
	if (n >= 0 && (size_t)n < len)
		c->rx_whole = true;
	else if (n >= 0 && mh.msg_controllen > 0)
		c->rx_whole = false;
	return n;
}

/*
 * Feeds n bytes to c's decoder and dispatches each complete frame. Stops
 * early when c closes or is full (conn_full); returns the bytes consumed,
 * or -1 when c is gone or closing after a framing error.
 */
static ssize_t conn_feed(struct conn *c, const char *data, size_t n)
{
	size_t off = 0;
	while (off < n && !c->closing && !conn_full(c)) {
		char *payload;
		size_t plen;
		ssize_t used = frame_decoder_feed(&c->dec, data + off, n - off, &payload, &plen);
		if (used < 0) {
			conn_fatal(c, ERR_BAD_FRAME, used == -EMSGSIZE ?
				   "frame length is above the daemon's --max-frame" :
				   "frame length is zero or invalid");
			return -1;
		}
		off += (size_t)used;
		if (payload != NULL) {
			kilnd_activity(c->d);
			c->pending++;
			c->d->server->pending++;
			c->d->server->hooks.frame(c, payload, plen);
			free(payload);
			if (c->dead)
				return -1;
		}
	}
	return (ssize_t)off;
}

/* Keeps bytes read but not fed because c is full; they are fed first once
 * it has room (conn_resume). */
static void conn_hold(struct conn *c, const char *data, size_t n)
{
	char *held = malloc(n);
	if (held == NULL) {
		log_error("out of memory holding a request; closing the connection");
		conn_kill(c);
		return;
	}
	memcpy(held, data, n);
	free(c->held);
	c->held = held;
	c->held_len = n;
}

/* Feeds what c holds; false while some of it is still held. */
static bool conn_feed_held(struct conn *c)
{
	if (c->held == NULL)
		return true;
	ssize_t used = conn_feed(c, c->held, c->held_len);
	if (used < 0 || (size_t)used == c->held_len || c->closing) {
		free(c->held);
		c->held = NULL;
		c->held_len = 0;
		return used >= 0 && !c->closing;
	}
	memmove(c->held, c->held + used, c->held_len - (size_t)used);
	c->held_len -= (size_t)used;
	return false;
}

static void conn_read_frames(struct conn *c)
{
	char buf[65536];
	if (!conn_feed_held(c))
		return;
	for (int rounds = 0; rounds < 16 && !c->closing && !conn_full(c); rounds++) {
		ssize_t n = conn_recv(c, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			/* The peer hung up: nothing more will be read or written. */
			conn_kill(c);
			return;
		}
		if (c->d->server->hooks.batch != NULL)
			c->d->server->hooks.batch(c->d);
		c->rx_ns = util_now_ns();
		ssize_t used = conn_feed(c, buf, (size_t)n);
		if (used < 0 || c->closing)
			return;
		if ((size_t)used < (size_t)n) {
			conn_hold(c, buf + used, (size_t)n - (size_t)used);
			return;
		}
		/* A short read took all there was: another would only say EAGAIN
		 * (one system call per request on the warm path). What arrives
		 * later, or was left behind a message with descriptors, makes the
		 * descriptor readable again for the next turn of the loop. */
		if ((size_t)n < sizeof(buf))
			return;
	}
}

/* Connections that hold bytes and have room again: fed on the next turn of
 * the loop, since the room appears in the middle of writing a reply. */
static void on_resume(uv_timer_t *t)
{
	ASSERT_LOOP();
	struct kilnd *d = t->data;
	struct server *s = d->server;
	while (s->resume != NULL) {
		struct conn *c = s->resume;
		s->resume = c->resume_next;
		c->resume_next = NULL;
		c->resume_queued = false;
		if (!c->dead && !conn_full(c)) {
			c->batching = true;
			conn_read_frames(c);
			c->batching = false;
			if (!c->dead) {
				conn_drop_stray_fds(c);
				if (c->out_head != NULL)
					conn_flush(c);
				else
					conn_update_events(c);
			}
		}
		conn_unref(c);
	}
}

static void conn_resume(struct conn *c)
{
	struct server *s = c->d->server;
	if (c->resume_queued || s == NULL)
		return;
	c->resume_queued = true;
	conn_ref(c);
	c->resume_next = s->resume;
	s->resume = c;
	uv_timer_start(&s->resume_timer, on_resume, 0, 0);
}

static void conn_on_io(uv_poll_t *h, int status, int events)
{
	ASSERT_LOOP();
	struct conn *c = h->data;
	if (c->dead)
		return;
	if (status < 0) {
		conn_kill(c);
		return;
	}
	conn_ref(c);
	if (events & UV_WRITABLE)
		conn_flush(c);
	if (!c->dead && (events & (UV_READABLE | UV_DISCONNECT)))
		conn_read(c);
	conn_unref(c);
}

static void server_on_accept(uv_poll_t *h, int status, int events);

static void on_accept_retry(uv_timer_t *t)
{
	struct kilnd *d = t->data;
	if (d->server->listening)
		uv_poll_start(&d->server->poll, UV_READABLE, server_on_accept);
}

static void server_on_accept(uv_poll_t *h, int status, int events)
{
	ASSERT_LOOP();
	struct kilnd *d = h->data;
	struct server *s = d->server;
	for (int i = 0; i < 64 && s->listening; i++) {
		int fd = accept4(s->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
			/* The pending connection stays readable: polling on would spin.
			 * Pause accepting until descriptors may be free again. */
			log_warn("accept: %s; pausing new connections for 100 ms", strerror(errno));
			uv_poll_stop(&s->poll);
			uv_timer_start(&s->retry, on_accept_retry, 100, 0);
			return;
		}
		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				log_warn("accept: %s", strerror(errno));
			return;
		}
		uid_t uid = (uid_t)-1;
		pid_t pid = 0;
		bool status_only = false;
		if (access_check_peer(fd, d->cfg, &uid, &pid, &status_only) != 0) {
			log_warn("refused connection from uid %d (pid %d)", (int)uid, (int)pid);
			d->c.denied++;
			access_refuse(fd, ERR_DENIED, "kilnd serves uid %d%s; connection from uid %d refused",
				    (int)geteuid(), d->cfg->nallow_uids + d->cfg->nallow_gids > 0 ?
				    " and the users and groups it allows" : " only", (int)uid);
			continue;
		}
		if (s->nconns >= d->cfg->max_connections) {
			/* Logged once per second at most: a flood must not fill the log. */
			uint64_t now = util_now_ns();
			if (now - s->busy_log_ns > 1000000000ull) {
				log_warn("refusing connections: %u open (--max-connections)", s->nconns);
				s->busy_log_ns = now;
			}
			d->c.busy++;
			access_refuse(fd, ERR_BUSY, "kilnd has %u connections open, its --max-connections; "
				    "try again later", s->nconns);
			continue;
		}
		struct conn *c = calloc(1, sizeof(*c));
		if (c == NULL) {
			close(fd);
			continue;
		}
		c->d = d;
		c->fd = fd;
		c->uid = uid;
		c->pid = pid;
		c->status_only = status_only;
		claims_owner_init(&c->claims, uid, pid);
		c->refs = 1;
		c->rx_ns = util_now_ns();
		frame_decoder_init(&c->dec, d->cfg->max_frame);
		uv_poll_init(d->loop, &c->poll, fd);
		c->poll.data = c;
		c->next = s->conns;
		if (s->conns != NULL)
			s->conns->prev = c;
		s->conns = c;
		s->nconns++;
		kilnd_activity(d);
		conn_update_events(c);
		/* A client usually writes right after connecting (libkiln sends
		 * hello and its first request at once), and one that only probed
		 * the socket has closed it already: read now rather than after
		 * another turn of the loop, so that the request is served, or the
		 * closed connection's place freed, at once. (Skipping this read
		 * for the first connection of a wake-up saved one EAGAIN, within
		 * the noise, and kept a probe's place taken for a turn: a kilnd
		 * at --max-connections then refused a connection it had room for.) */
		conn_ref(c);
		conn_read(c);
		conn_unref(c);
	}
}

/* Heartbeats: to every connection that asked for them and waits on a
 * request, unless replies are still queued for it (it reads slowly, and
 * those say kilnd is alive). The frame has no id and is not a reply. */
static void on_beat(uv_timer_t *t)
{
	ASSERT_LOOP();
	static const char beat[] = "{\"heartbeat\":true}";
	struct kilnd *d = t->data;
	for (struct conn *c = d->server->conns; c != NULL; c = c->next) {
		if (!c->heartbeat || c->pending == 0 || c->dead || c->closing || c->out_head != NULL)
			continue;
		struct outbuf *o = calloc(1, sizeof(*o));
		if (o == NULL || (o->data = frame_encode(beat, sizeof(beat) - 1, &o->len)) == NULL) {
			free(o);
			return;   /* out of memory: the next beat tries again */
		}
		o->fd = -1;
		c->out_head = c->out_tail = o;
		c->nout++;
		c->out_bytes += o->len;
		conn_flush(c);
	}
}

/* A client that sends part of a frame and stops would hold its connection
 * and the bytes it sent for ever: after --frame-timeout without a byte, it
 * gets bad_frame and is closed. An idle connection between frames is fine. */
static void on_stall_sweep(uv_timer_t *t)
{
	ASSERT_LOOP();
	struct kilnd *d = t->data;
	uint64_t now = util_now_ns();
	uint64_t limit = (uint64_t)(d->cfg->frame_timeout_s * 1e9);
	struct conn *next;
	for (struct conn *c = d->server->conns; c != NULL; c = next) {
		next = c->next;
		if (c->closing || !frame_decoder_partial(&c->dec) || now - c->rx_ns < limit)
			continue;
		log_warn("pid %d sent part of a request and nothing for %.0f s; closing its connection",
			 (int)c->pid, d->cfg->frame_timeout_s);
		d->c.stalled++;
		conn_ref(c);
		conn_fatal(c, ERR_BAD_FRAME, "the request stopped arriving halfway (--frame-timeout)");
		if (!c->dead && c->out_head != NULL)
			conn_kill(c);   /* and it does not read either */
		conn_unref(c);
	}
}

int server_init(struct kilnd *d, const struct server_hooks *hooks, char *err, size_t errlen)
{
	const char *path = d->cfg->socket_path;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "socket path %s is longer than %zu bytes", path, sizeof(sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	int rc = d->activated ? 0 : access_prepare_dir(path, err, errlen);
	if (rc != 0)
		return rc;
	struct server *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	s->path = strdup(path);
	s->hooks = *hooks;
	if (d->activated) {
		/* systemd bound and listens; kilnd only accepts. The server
		 * owns the descriptor from here on. */
		s->fd = d->activated_fd;
		d->activated_fd = -1;
		if (s->path == NULL) {
			rc = -ENOMEM;
			goto fail;
		}
		goto listening;
	}
	s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->path == NULL || s->fd < 0) {
		rc = -errno;
		goto fail;
	}
	strcpy(sa.sun_path, path);
	if ((rc = access_clear_socket(path, err, errlen)) != 0)
		goto fail;
	mode_t old = umask(0177);
	rc = bind(s->fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	/* Allowed users need to write to the socket; SO_PEERCRED keeps out
	 * everyone else (check_peer). */
	bool shared = d->cfg->nallow_uids + d->cfg->nallow_gids > 0;
	if (rc != 0 || chmod(path, shared ? 0666 : 0600) != 0 || listen(s->fd, 1024) != 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(-rc));
		goto fail;
	}
listening:
	uv_poll_init(d->loop, &s->poll, s->fd);
	s->poll.data = d;
	uv_timer_init(d->loop, &s->retry);
	s->retry.data = d;
	uv_timer_init(d->loop, &s->stall);
	s->stall.data = d;
	uv_timer_init(d->loop, &s->resume_timer);
	s->resume_timer.data = d;
	uv_timer_init(d->loop, &s->beat);
	s->beat.data = d;
	uv_timer_start(&s->beat, on_beat, SERVER_HEARTBEAT_MS, SERVER_HEARTBEAT_MS);
	if (d->cfg->frame_timeout_s > 0) {
		/* Swept four times per timeout, at least every second. */
		double ms = d->cfg->frame_timeout_s * 250.0;
		uint64_t every = ms < 1 ? 1 : ms > 1000 ? 1000 : (uint64_t)ms;
		uv_timer_start(&s->stall, on_stall_sweep, every, every);
	}
	uv_poll_start(&s->poll, UV_READABLE, server_on_accept);
	s->listening = true;
	d->server = s;
	return 0;
fail:
	if (s->fd >= 0)
		close(s->fd);
	free(s->path);
	free(s);
	return rc;
}

void server_stop_listening(struct kilnd *d)
{
	struct server *s = d->server;
	if (s == NULL || !s->listening)
		return;
	s->listening = false;
	uv_poll_stop(&s->poll);
	uv_close((uv_handle_t *)&s->poll, NULL);
	uv_timer_stop(&s->retry);
	uv_close((uv_handle_t *)&s->retry, NULL);
	uv_timer_stop(&s->stall);
	uv_close((uv_handle_t *)&s->stall, NULL);
	uv_timer_stop(&s->resume_timer);
	uv_close((uv_handle_t *)&s->resume_timer, NULL);
	uv_timer_stop(&s->beat);
	uv_close((uv_handle_t *)&s->beat, NULL);
	/* An activated socket is systemd's: it stays, for the next start. */
	if (!d->activated)
		unlink(s->path);
	close(s->fd);
	s->fd = -1;
}

void server_fini(struct kilnd *d)
{
	struct server *s = d->server;
	if (s == NULL)
		return;
	server_stop_listening(d);
	while (s->resume != NULL) {
		struct conn *c = s->resume;
		s->resume = c->resume_next;
		c->resume_queued = false;
		conn_unref(c);
	}
	while (s->conns != NULL) {
		struct conn *c = s->conns;
		/* One last attempt to deliver queued replies (e.g. to shutdown). */
		if (c->out_head != NULL) {
			int fl = fcntl(c->fd, F_GETFL);
			fcntl(c->fd, F_SETFL, fl & ~O_NONBLOCK);
			/* A client that stopped reading may not hold up the exit. */
			struct timeval tv = { .tv_sec = 1 };
			setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
			c->closing = true;
			conn_flush(c);
			if (c->dead)
				continue;
		}
		conn_kill(c);
	}
}

void server_free(struct kilnd *d)
{
	if (d->server == NULL)
		return;
	free(d->server->path);
	free(d->server);
	d->server = NULL;
}
