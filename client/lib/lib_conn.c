/*
 * The connection of a struct kiln to kilnd: connecting (with autospawn and the
 * hello handshake), reconnecting after a loss, and pipelined calls that many
 * threads make at once on the one socket.
 *
 * Why pipelining: a get that builds can take minutes, and a rank's other
 * threads must not queue behind it for a lookup the daemon answers at once.
 * How it works, all under k->lock unless said otherwise:
 *
 * - A caller registers a reply slot keyed by a fresh id in conn->slots, then
 *   writes its frame under conn->send_lock (so frames never interleave).
 * - The "reader baton" (conn->reading) lets exactly one waiting thread read
 *   the socket at a time. The holder drops k->lock, reads one frame with
 *   wire_recv_frame (taking its descriptor with wire_take_fd when the reply
 *   says "fd": true), retakes the lock, hands the reply to the slot with that
 *   id, puts the baton down and broadcasts k->cond. Every waiter then checks
 *   its slot; one whose reply has not come picks the baton up. The holder
 *   leaves as soon as its own slot is filled, so no thread ever reads for
 *   longer than its own request needs.
 * - A read or write error "breaks" the connection: it is shut down (the
 *   descriptor stays valid until the last user is gone), every pending slot
 *   is failed with the same text, and the next call connects afresh.
 * - Connections are reference-counted: k->conn holds one reference and every
 *   call in flight holds one, so a broken connection is freed only after the
 *   last thread that used it has left.
 *
 * - hello is not waited for: kiln_open connects, and hello goes out in one
 *   write together with the first call's frame, so the daemon reads both at
 *   once and a fresh process pays one round trip, not two. hello's reply
 *   comes first on the stream and lands in the connection's own slot; every
 *   call checks it once its own reply is in, and a refused hello (protocol
 *   mismatch) fails the call and breaks the connection with hello's message.
 *
 * Lock order: k->connect_lock, then k->lock, then conn->send_lock (the latter
 * two are never held together).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "jobsize.h"
#include "json_read.h"
#include "lib_internal.h"
#include "util.h"
#include "wire.h"

/* One request waiting for its reply; lives on the caller's stack. */
struct lib_slot {
	uint64_t id;
	bool done;
	cJSON *reply;   /* NULL when done because the connection broke */
	int fd;
	struct lib_slot *next;
};

struct lib_conn {
	struct wire_conn wire;      /* fd fixed; receive state owned by the baton holder */
	pthread_mutex_t send_lock;  /* one frame written at a time */
	/* Guarded by k->lock. */
	unsigned refs;
	bool reading;               /* a thread holds the reader baton */
	bool broken;
	int err;                    /* status for waiters once broken */
	char errmsg[512];
	struct lib_slot *slots;     /* pending requests */
	struct lib_slot hello;      /* hello's reply, once read */
	char *hello_frame;          /* packed hello, until it goes out (send_lock) */
	size_t hello_len;
	bool hello_checked;
	bool hello_failed;          /* then err and errmsg are hello's */
	/* Owned by the baton holder: kilnd said it sends heartbeats, so a
	 * silence of k->timeout_ms means it is stopped or wedged. */
	bool beats;
	int beat_ms;
};

/* How long to keep trying to connect after kilnd --daemonize returned. */
#define CONN_SPAWN_WAIT_NS (5ull * 1000 * 1000 * 1000)

static struct lib_conn *conn_new(int fd)
{
	struct lib_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	if (pthread_mutex_init(&c->send_lock, NULL) != 0) {
		free(c);
		return NULL;
	}
	wire_conn_init(&c->wire, fd, FRAME_MAX_DEFAULT);
	c->hello.fd = -1;
	return c;
}

static void conn_free(struct lib_conn *c)
{
	if (!c)
		return;
	cJSON_Delete(c->hello.reply);
	if (c->hello.fd >= 0)
		close(c->hello.fd);
	free(c->hello_frame);
	wire_conn_fini(&c->wire);
	pthread_mutex_destroy(&c->send_lock);
	free(c);
}

/* Drops one reference; the caller holds k->lock. Returns the connection when
 * it must be freed (after the lock is released), else NULL. */
static struct lib_conn *conn_unref_locked(struct lib_conn *c)
{
	if (!c || --c->refs > 0)
		return NULL;
	return c;
}

static void conn_unref(struct kiln *k, struct lib_conn *c)
{
	pthread_mutex_lock(&k->lock);
	c = conn_unref_locked(c);
	pthread_mutex_unlock(&k->lock);
	conn_free(c);
}

/*
 * Marks c broken with the status and text that every pending and later
 * waiter gets, fails the pending slots and wakes their threads. shutdown()
 * rather than close() makes a blocked reader return at once while the
 * descriptor number cannot be reused under it. The first reason wins.
 */
static void conn_break_locked(struct kiln *k, struct lib_conn *c, int err, const char *msg)
{
	struct lib_slot *s;

	if (c->broken)
		return;
	c->broken = true;
	c->err = err;
	snprintf(c->errmsg, sizeof(c->errmsg), "%s", msg);
	shutdown(c->wire.fd, SHUT_RDWR);
	for (s = c->slots; s; s = s->next)
		s->done = true;
	c->slots = NULL;
	pthread_cond_broadcast(&k->cond);
}

static void conn_remove_slot_locked(struct lib_conn *c, struct lib_slot *slot)
{
	struct lib_slot **pp;

	for (pp = &c->slots; *pp; pp = &(*pp)->next) {
		if (*pp == slot) {
			*pp = slot->next;
			return;
		}
	}
}

/* Text for a failed read or write on the connection. */
static void conn_loss_text(const struct kiln *k, int rc, char *buf, size_t len)
{
	if (rc == -ECONNRESET || rc == -EPIPE)
		snprintf(buf, len,
			 "lost the connection to kilnd at %s: kilnd closed it "
			 "(it stopped, restarted or was killed); the next call reconnects",
			 k->socket_path);
	else
		snprintf(buf, len, "lost the connection to kilnd at %s: %s; the next call reconnects",
			 k->socket_path, strerror(-rc));
}

/*
 * Reads one reply frame (the caller holds the baton, not k->lock). On success
 * *reply gets the parsed object, *id its id and *fd its descriptor or -1.
 * On failure returns a status code and writes the text into msg.
 */
static int conn_read_one(const struct kiln *k, struct lib_conn *c, cJSON **reply, uint64_t *id,
			 int *fd, char *msg, size_t msglen)
{
	const cJSON *jid, *jfd;
	char *buf = NULL;
	size_t len = 0;
	cJSON *obj = NULL;
	int rc;

	*reply = NULL;
	*fd = -1;
	int timeout = atomic_load(&k->timeout_ms);
again:
	/* At least two heartbeats long, so that a late one trips nothing. */
	if (c->beats && timeout > 0 && timeout < 2 * c->beat_ms)
		timeout = 2 * c->beat_ms;
	c->wire.recv_timeout_ms = c->beats ? timeout : 0;
	rc = wire_recv_frame(&c->wire, &buf, &len);
	if (rc == -ETIMEDOUT) {
		snprintf(msg, msglen,
			 "kilnd at %s sent nothing for %.0f s while a request waited (it sends a "
			 "heartbeat every 5 s): it is stopped, wedged or gone; the next call "
			 "reconnects (KILN_TIMEOUT, kiln_set_timeout set this deadline)",
			 k->socket_path, timeout / 1000.0);
		return KILN_EIO;
	}
	if (rc == -EMSGSIZE || rc == -EBADMSG || rc == -EPROTO) {
		snprintf(msg, msglen, "kilnd at %s sent a malformed frame (%s); the next call reconnects",
			 k->socket_path, strerror(-rc));
		return KILN_EPROTO;
	}
	if (rc < 0) {
		conn_loss_text(k, rc, msg, msglen);
		return KILN_EIO;
	}
	/* Not cJSON's parser: its strtod per number is the dearest first use
	 * of a fresh process's get (json_read.h). */
	obj = json_read(buf, len);
	free(buf);
	jid = cJSON_GetObjectItemCaseSensitive(obj, "id");
	if (jid == NULL && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj, "heartbeat"))) {
		cJSON_Delete(obj);   /* kilnd is alive; the reply is still to come */
		buf = NULL;
		goto again;
	}
	/* hello's reply says whether heartbeats come (a kilnd before them
	 * sends none, and then silence proves nothing). */
	const cJSON *beat = cJSON_GetObjectItemCaseSensitive(obj, "heartbeat_ms");
	if (cJSON_IsNumber(jid) && (uint64_t)jid->valuedouble == c->hello.id &&
	    cJSON_IsNumber(beat) && beat->valuedouble >= 1 && beat->valuedouble <= 3600000) {
		c->beats = true;
		c->beat_ms = (int)beat->valuedouble;
	}
	if (!cJSON_IsObject(obj) || !cJSON_IsNumber(jid) || jid->valuedouble < 0 ||
	    jid->valuedouble > MSG_MAX_ID) {
		snprintf(msg, msglen, "kilnd at %s sent a reply that is not a JSON object with an id",
			 k->socket_path);
		cJSON_Delete(obj);
		return KILN_EPROTO;
	}
	jfd = cJSON_GetObjectItemCaseSensitive(obj, "fd");
	if (cJSON_IsTrue(jfd)) {
		*fd = wire_take_fd(&c->wire);
		if (*fd < 0) {
			snprintf(msg, msglen,
				 "kilnd at %s sent a reply with \"fd\": true but no descriptor",
				 k->socket_path);
			cJSON_Delete(obj);
			return KILN_EPROTO;
		}
	}
	*id = (uint64_t)jid->valuedouble;
	*reply = obj;
	return 0;
}

/* Hands a reply to its slot; the caller holds k->lock. */
static void conn_deliver_locked(struct kiln *k, struct lib_conn *c, uint64_t id, cJSON *reply,
				int fd)
{
	const char *text;
	struct lib_slot **pp, *s;
	char msg[sizeof(c->errmsg)];

	for (pp = &c->slots; *pp; pp = &(*pp)->next) {
		s = *pp;
		if (s->id != id)
			continue;
		*pp = s->next;
		s->reply = reply;
		s->fd = fd;
		s->done = true;
		return;
	}
	/* Id 0 is never ours: the daemon uses it for a framing error after
	 * which it closes the connection. */
	if (id == 0) {
		text = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(reply, "error"), "message"));
		snprintf(msg, sizeof(msg), "kilnd at %s refused the connection's data: %s",
			 k->socket_path, text ? text : "(no message)");
		conn_break_locked(k, c, KILN_EPROTO, msg);
	}
	/* A reply nobody waits for is dropped, descriptor included. */
	cJSON_Delete(reply);
	if (fd >= 0)
		close(fd);
}

/*
 * One turn of waiting, with k->lock held: reads and delivers one reply when
 * the reader baton is free, else sleeps until a reply arrives or the baton is
 * put down.
 */
static void conn_wait_turn_locked(struct kiln *k, struct lib_conn *c)
{
	char msg[sizeof(c->errmsg)];
	cJSON *reply;
	uint64_t id;
	int fd, rc;

	if (c->reading) {
		pthread_cond_wait(&k->cond, &k->lock);
		return;
	}
	c->reading = true;
	pthread_mutex_unlock(&k->lock);
	rc = conn_read_one(k, c, &reply, &id, &fd, msg, sizeof(msg));
	pthread_mutex_lock(&k->lock);
	c->reading = false;
	if (rc < 0)
		conn_break_locked(k, c, rc, msg);
	else
		conn_deliver_locked(k, c, id, reply, fd);
	pthread_cond_broadcast(&k->cond);
}

/* Waits until slot is done, taking the reader baton when it is free. */
static void conn_wait_locked(struct kiln *k, struct lib_conn *c, struct lib_slot *slot)
{
	while (!slot->done)
		conn_wait_turn_locked(k, c);
}

/* Prepares hello on a connection nobody else sees yet: it goes out with the
 * first call's frame, and its reply is read with that call's (see the top
 * of this file). */
static int conn_hello_prepare(struct kiln *k, struct lib_conn *c)
{
	struct msg_request req = {
		.op = OP_HELLO, .proto = KILN_PROTO_VERSION,
		.client = (char *)"libkiln/" KILN_VERSION, .max_size = -1, .heartbeat = true,
		/* The job's size paces kilnd's upstream polling (jobsize.h). */
		.job_nodes = jobsize_here(),
	};

	req.id = atomic_fetch_add(&k->next_id, 1);
	c->hello_frame = msg_request_pack(&req, &c->hello_len);
	if (!c->hello_frame)
		return lib_err_set(KILN_ENOMEM, "out of memory packing the hello request");
	c->hello.id = req.id;
	c->hello.next = c->slots;
	c->slots = &c->hello;
	return 0;
}

/* Writes a call's frame, behind hello when hello has not gone out yet. The
 * caller holds c->send_lock. */
static int conn_send_locked(struct kiln *k, struct lib_conn *c, const char *payload, size_t len)
{
	const char *frames[2] = { c->hello_frame, payload };
	size_t lens[2] = { c->hello_len, len };
	int rc;

	if (!c->hello_frame)
		return wire_send_frame(&c->wire, payload, len);
	rc = wire_send_frames(&c->wire, frames, lens, 2);
	free(c->hello_frame);
	c->hello_frame = NULL;
	if (rc == 0)
		atomic_fetch_add(&k->requests, 1);
	return rc;
}

/* What hello's reply says: 0, or a status code with the error text set. */
static int conn_hello_result(const struct kiln *k, const cJSON *reply)
{
	const cJSON *error, *jproto;

	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "ok")))
		return 0;
	error = cJSON_GetObjectItemCaseSensitive(reply, "error");
	jproto = cJSON_GetObjectItemCaseSensitive(error, "proto");
	if (msg_err_parse(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(error, "code"))) ==
		    ERR_PROTO_MISMATCH &&
	    cJSON_IsNumber(jproto))
		return lib_err_set(KILN_EPROTO,
				   "protocol version mismatch: kilnd at %s speaks version %d, "
				   "libkiln %s speaks version %d; use kilnd and libkiln of "
				   "the same kiln release",
				   k->socket_path, jproto->valueint, KILN_VERSION, KILN_PROTO_VERSION);
	return lib_err_from_reply(reply);
}

/*
 * Once a call's own reply is in, hello's is too (it came first): a refused
 * hello fails the connection for everyone, with hello's text. The caller
 * holds k->lock. Returns 0 when hello was accepted.
 */
static int conn_hello_check_locked(struct kiln *k, struct lib_conn *c)
{
	char msg[sizeof(c->errmsg)];
	int rc;

	if (!c->hello_checked && c->hello.done && c->hello.reply) {
		c->hello_checked = true;
		rc = conn_hello_result(k, c->hello.reply);
		if (rc < 0) {
			snprintf(msg, sizeof(msg), "%s", kiln_errmsg(k));
			/* Another failure may have broken it first; hello's says more. */
			c->broken = false;
			conn_break_locked(k, c, rc, msg);
			c->hello_failed = true;
		}
	}
	return c->hello_failed ? c->err : 0;
}

static bool conn_nobody_home(int rc)
{
	return rc == -ENOENT || rc == -ECONNREFUSED;
}

/* Connects, starting kilnd first when allowed and needed. Returns the socket
 * or a status code with the error text set. */
static int conn_connect(struct kiln *k)
{
	struct timespec pause = { .tv_sec = 0, .tv_nsec = 5 * 1000 * 1000 };
	uint64_t deadline;
	int fd, rc;

	fd = wire_connect(k->socket_path);
	if (fd >= 0)
		return fd;
	if (!conn_nobody_home(fd) || !k->autospawn) {
		if (fd == -ENAMETOOLONG)
			return lib_err_set(KILN_ECONNECT, "socket path too long: %s",
					   k->socket_path);
		if (fd == -EPERM)
			return lib_err_set(KILN_EDENIED,
					   "the socket %s is served by another user's process; "
					   "refusing to load code from it (set KILN_DAEMON_UID to trust "
					   "another user's kilnd)", k->socket_path);
		const char *xdg = util_runtime_dir_ignored();
		return lib_err_set(KILN_ECONNECT, "could not connect to kilnd at %s: %s%s%s%s%s",
				   k->socket_path, strerror(-fd),
				   conn_nobody_home(fd) && !k->autospawn
					   ? " (is kilnd running? KILN_AUTOSPAWN=1 starts one)"
					   : "",
				   xdg ? "; XDG_RUNTIME_DIR=" : "", xdg ? xdg : "",
				   xdg ? " is no directory of this user, so the default socket is "
					 "in /tmp" : "");
	}
	rc = lib_spawn_kilnd(k);
	if (rc < 0)
		return rc;
	/*
	 * kilnd --daemonize returns once the socket accepts, so the first try
	 * normally succeeds; the retries cover a winner of a start-up race that
	 * is still binding, with short sleeps growing to 100 ms.
	 */
	deadline = util_now_ns() + CONN_SPAWN_WAIT_NS;
	for (;;) {
		fd = wire_connect(k->socket_path);
		if (fd >= 0 || !conn_nobody_home(fd) || util_now_ns() >= deadline)
			break;
		nanosleep(&pause, NULL);
		pause.tv_nsec = pause.tv_nsec * 2 < 100 * 1000 * 1000 ? pause.tv_nsec * 2
								       : 100 * 1000 * 1000;
	}
	if (fd < 0)
		return lib_err_set(KILN_ECONNECT,
				   "started %s, but could not connect to it at %s: %s",
				   k->kilnd_path, k->socket_path, strerror(-fd));
	return fd;
}

/* Makes a new connection that has passed hello. */
static int conn_open(struct kiln *k, struct lib_conn **out)
{
	struct lib_conn *c;
	int fd, rc;

	*out = NULL;
	fd = conn_connect(k);
	if (fd < 0)
		return fd;
	c = conn_new(fd);
	if (!c) {
		close(fd);
		return lib_err_set(KILN_ENOMEM, "out of memory");
	}
	/* A write to a stopped kilnd whose socket buffer is full would block
	 * for ever: bounded by the deadline too. */
	int ms = atomic_load(&k->timeout_ms);
	if (ms > 0) {
		struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	}
	rc = conn_hello_prepare(k, c);
	if (rc < 0) {
		conn_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

/*
 * Returns a working connection with a reference for the caller: the current
 * one, else a new one (*fresh set), which replaces a broken one.
 */
static int conn_acquire(struct kiln *k, struct lib_conn **out, bool *fresh)
{
	struct lib_conn *c, *old = NULL;
	int rc = 0;

	*fresh = false;
	pthread_mutex_lock(&k->lock);
	c = k->conn;
	if (c && !c->broken) {
		c->refs++;
		pthread_mutex_unlock(&k->lock);
		*out = c;
		return 0;
	}
	pthread_mutex_unlock(&k->lock);

	/* Connecting blocks (autospawn may take seconds); it happens without
	 * k->lock so that threads still leaving the old connection can. */
	pthread_mutex_lock(&k->connect_lock);
	pthread_mutex_lock(&k->lock);
	c = k->conn;
	if (c && !c->broken) {
		c->refs++;
		pthread_mutex_unlock(&k->lock);
		goto out;
	}
	k->conn = NULL;
	old = conn_unref_locked(c);
	pthread_mutex_unlock(&k->lock);
	conn_free(old);

	rc = conn_open(k, &c);
	if (rc < 0)
		goto out;
	c->refs = 2;   /* k->conn and the caller */
	pthread_mutex_lock(&k->lock);
	k->conn = c;
	pthread_mutex_unlock(&k->lock);
	*fresh = true;
out:
	pthread_mutex_unlock(&k->connect_lock);
	*out = rc < 0 ? NULL : c;
	return rc;
}

int lib_conn_start(struct kiln *k)
{
	struct lib_conn *c;
	bool fresh;
	int rc;

	rc = conn_acquire(k, &c, &fresh);
	if (rc < 0)
		return rc;
	conn_unref(k, c);
	return 0;
}

void lib_conn_stop(struct kiln *k)
{
	struct lib_conn *c;

	pthread_mutex_lock(&k->lock);
	c = conn_unref_locked(k->conn);
	k->conn = NULL;
	pthread_mutex_unlock(&k->lock);
	conn_free(c);
}

/*
 * Registers n reply slots on c, in order, before their requests are written.
 * A broken connection refuses them: then *unsent is set (nothing was written)
 * and the status code returned, with the error text set.
 */
static int conn_register(struct kiln *k, struct lib_conn *c, struct lib_slot *slots, size_t n,
			 bool *unsent)
{
	int rc = 0;

	*unsent = false;
	pthread_mutex_lock(&k->lock);
	if (c->broken) {
		*unsent = true;
		rc = lib_err_set(c->err, "%s", c->errmsg);
	} else {
		for (size_t i = n; i-- > 0;) {
			slots[i].next = c->slots;
			c->slots = &slots[i];
		}
	}
	pthread_mutex_unlock(&k->lock);
	return rc;
}

/*
 * One attempt of a call on one connection. Returns 0 with slot->reply set, or
 * a status code. *unsent is set when the request provably did not reach a
 * live daemon (the write failed), which makes a retry on a new connection safe.
 */
static int conn_call_once(struct kiln *k, struct lib_conn *c, const char *payload, size_t len,
			  struct lib_slot *slot, bool *unsent)
{
	char msg[sizeof(c->errmsg)];
	int rc;

	rc = conn_register(k, c, slot, 1, unsent);
	if (rc < 0)
		return rc;

	pthread_mutex_lock(&c->send_lock);
	rc = conn_send_locked(k, c, payload, len);
	pthread_mutex_unlock(&c->send_lock);

	pthread_mutex_lock(&k->lock);
	if (rc < 0) {
		conn_remove_slot_locked(c, slot);
		conn_loss_text(k, rc, msg, sizeof(msg));
		conn_break_locked(k, c, KILN_EIO, msg);
		*unsent = rc == -EPIPE || rc == -ECONNRESET || rc == -ENOTCONN;
	} else {
		atomic_fetch_add(&k->requests, 1);
		conn_wait_locked(k, c, slot);
		if (conn_hello_check_locked(k, c) < 0) {
			/* The daemon refused the call for want of a hello: say why. */
			cJSON_Delete(slot->reply);
			slot->reply = NULL;
			if (slot->fd >= 0)
				close(slot->fd);
			slot->fd = -1;
		}
	}
	if (!slot->reply)
		rc = lib_err_set(c->err, "%s", c->errmsg);
	else
		rc = 0;
	pthread_mutex_unlock(&k->lock);
	return rc;
}

/*
 * Batches (kiln_get_many): all frames go out in a few large writes, and the
 * replies are handed to the caller's function in the order they arrive, so
 * that a program that is ready is loaded while others still build. One
 * thread does it all; the daemon sees the requests together, as before.
 */

/* Frames per write and bytes per write, so that one write's copy stays small. */
#define BATCH_FRAMES_MAX 256
#define BATCH_BYTES_MAX ((size_t)1 << 20)

/* Writes frames [0, n) of a batch, behind hello when it has not gone out.
 * The caller holds c->send_lock. *sent_any tells whether a write succeeded. */
static int conn_send_batch_locked(struct kiln *k, struct lib_conn *c, char **payloads,
				  const size_t *lens, size_t n, bool *sent_any)
{
	const char *frames[BATCH_FRAMES_MAX + 1];
	size_t flens[BATCH_FRAMES_MAX + 1];
	size_t i = 0;
	int rc = 0;

	*sent_any = false;
	while (i < n) {
		size_t nf = 0, bytes = 0;
		if (c->hello_frame) {
			frames[nf] = c->hello_frame;
			flens[nf++] = c->hello_len;
		}
		while (i < n && nf < BATCH_FRAMES_MAX && (bytes == 0 || bytes + lens[i] <= BATCH_BYTES_MAX)) {
			frames[nf] = payloads[i];
			flens[nf++] = lens[i];
			bytes += lens[i];
			i++;
		}
		rc = wire_send_frames(&c->wire, frames, flens, nf);
		if (rc < 0)
			break;
		*sent_any = true;
		if (c->hello_frame) {
			free(c->hello_frame);
			c->hello_frame = NULL;
			atomic_fetch_add(&k->requests, 1);
		}
	}
	return rc;
}

/*
 * One attempt of a batch on one connection: registers the slots, writes the
 * frames, and delivers every reply through fn as it arrives. Returns 0 once
 * every slot is handled, or a status code when the write failed (then no
 * slot was handled; *unsent tells whether nothing reached a live daemon).
 */
static int conn_batch_once(struct kiln *k, struct lib_conn *c, char **payloads,
			   const size_t *lens, struct lib_slot *slots, size_t n,
			   lib_reply_fn fn, void *arg, bool *unsent)
{
	char msg[sizeof(c->errmsg)];
	size_t i, handled = 0, scan = 0;
	bool sent_any;
	int rc;

	rc = conn_register(k, c, slots, n, unsent);
	if (rc < 0)
		return rc;

	pthread_mutex_lock(&c->send_lock);
	rc = conn_send_batch_locked(k, c, payloads, lens, n, &sent_any);
	pthread_mutex_unlock(&c->send_lock);

	pthread_mutex_lock(&k->lock);
	if (rc < 0) {
		for (i = 0; i < n; i++)
			conn_remove_slot_locked(c, &slots[i]);
		conn_loss_text(k, rc, msg, sizeof(msg));
		conn_break_locked(k, c, KILN_EIO, msg);
		*unsent = !sent_any && (rc == -EPIPE || rc == -ECONNRESET || rc == -ENOTCONN);
		rc = lib_err_set(c->err, "%s", c->errmsg);
		pthread_mutex_unlock(&k->lock);
		return rc;
	}
	atomic_fetch_add(&k->requests, n);
	while (handled < n) {
		struct lib_slot *s = NULL;
		for (i = 0; i < n; i++) {
			size_t j = (scan + i) % n;
			if (slots[j].done && slots[j].id != 0) {
				s = &slots[j];
				scan = j;
				break;
			}
		}
		if (!s) {
			conn_wait_turn_locked(k, c);
			continue;
		}
		/* A slot's id turns 0 once handled. */
		s->id = 0;
		handled++;
		cJSON *reply = s->reply;
		int fd = s->fd;
		s->reply = NULL;
		s->fd = -1;
		if (conn_hello_check_locked(k, c) < 0 && reply) {
			cJSON_Delete(reply);
			reply = NULL;
			if (fd >= 0)
				close(fd);
			fd = -1;
		}
		if (!reply)
			rc = lib_err_set(c->err, "%s", c->errmsg);
		else if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "ok")))
			rc = lib_err_from_reply(reply);
		else
			rc = 0;
		pthread_mutex_unlock(&k->lock);
		if (rc < 0) {
			/* The failed reply too (NULL when the connection broke):
			 * it may say more (a probe's request key). */
			if (fd >= 0)
				close(fd);
			fn(arg, (size_t)(s - slots), rc, reply, -1);
		} else {
			fn(arg, (size_t)(s - slots), 0, reply, fd);
		}
		pthread_mutex_lock(&k->lock);
	}
	pthread_mutex_unlock(&k->lock);
	return 0;
}

int lib_conn_call_many(struct kiln *k, struct msg_request *const *reqs, size_t n,
		       lib_reply_fn fn, void *arg)
{
	struct lib_slot *slots = NULL;
	struct lib_conn *c;
	char **payloads = NULL;
	size_t *lens = NULL, i;
	bool fresh, unsent;
	int attempt, rc = 0;

	if (n == 0)
		return 0;
	slots = calloc(n, sizeof(*slots));
	payloads = calloc(n, sizeof(*payloads));
	lens = calloc(n, sizeof(*lens));
	if (!slots || !payloads || !lens) {
		rc = lib_err_set(KILN_ENOMEM, "out of memory for a batch of %zu requests", n);
		goto out;
	}
	for (i = 0; i < n; i++) {
		reqs[i]->id = atomic_fetch_add(&k->next_id, 1);
		payloads[i] = msg_request_pack(reqs[i], &lens[i]);
		if (!payloads[i]) {
			rc = lib_err_set(KILN_ENOMEM, "out of memory packing the %s request",
					 msg_op_name(reqs[i]->op));
			goto out;
		}
		if (lens[i] > UINT32_MAX) {
			char sz[32];
			rc = lib_err_set(KILN_EINVAL, "request %zu is %s, over the 4 GiB frame limit",
					 i, util_format_size(lens[i], sz, sizeof(sz)));
			goto out;
		}
	}
	for (attempt = 0;; attempt++) {
		rc = conn_acquire(k, &c, &fresh);
		if (rc < 0)
			break;
		for (i = 0; i < n; i++) {
			memset(&slots[i], 0, sizeof(slots[i]));
			slots[i].id = reqs[i]->id;
			slots[i].fd = -1;
		}
		rc = conn_batch_once(k, c, payloads, lens, slots, n, fn, arg, &unsent);
		conn_unref(k, c);
		/* As in lib_conn_call: one retry when nothing reached a daemon. */
		if (rc < 0 && unsent && !fresh && attempt == 0)
			continue;
		break;
	}
out:
	if (payloads)
		for (i = 0; i < n; i++)
			free(payloads[i]);
	free(payloads);
	free(lens);
	free(slots);
	return rc;
}

int lib_conn_call(struct kiln *k, struct msg_request *req, cJSON **reply, int *fd)
{
	struct lib_slot slot;
	struct lib_conn *c;
	char *payload;
	size_t len;
	bool fresh, unsent;
	int attempt, rc;

	*reply = NULL;
	*fd = -1;
	/* Ids are unique for the handle's life, so a retry on a new
	 * connection can reuse the packed request as is. */
	req->id = atomic_fetch_add(&k->next_id, 1);
	payload = msg_request_pack(req, &len);
	if (!payload)
		return lib_err_set(KILN_ENOMEM, "out of memory packing the %s request",
				   msg_op_name(req->op));
	/* Refused here, not by the write, so that the shared connection
	 * does not break for everyone. */
	if (len > UINT32_MAX) {
		char sz[32];
		free(payload);
		return lib_err_set(KILN_EINVAL, "the %s request is %s, over the 4 GiB frame limit",
				   msg_op_name(req->op), util_format_size(len, sz, sizeof(sz)));
	}
	for (attempt = 0;; attempt++) {
		rc = conn_acquire(k, &c, &fresh);
		if (rc < 0)
			break;
		memset(&slot, 0, sizeof(slot));
		slot.id = req->id;
		slot.fd = -1;
		rc = conn_call_once(k, c, payload, len, &slot, &unsent);
		conn_unref(k, c);
		/*
		 * A connection that died while idle (kilnd restarted between
		 * two calls) is found only by the write; nothing reached a
		 * daemon, so one retry on a new connection is safe and spares
		 * the caller a spurious failure.
		 */
		if (rc < 0 && unsent && !fresh && attempt == 0)
			continue;
		break;
	}
	free(payload);
	if (rc < 0)
		return rc;
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(slot.reply, "ok"))) {
		rc = lib_err_from_reply(slot.reply);
		cJSON_Delete(slot.reply);
		if (slot.fd >= 0)
			close(slot.fd);
		return rc;
	}
	*reply = slot.reply;
	*fd = slot.fd;
	return 0;
}
