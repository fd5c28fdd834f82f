/*
 * The control socket: listening, accepting with a peer-credential check, and
 * the connections' non-blocking framed I/O, including descriptor passing.
 * Requests are handed to dispatch.c; replies come back through conn_reply.
 */
#ifndef KILN_DAEMON_SERVER_H
#define KILN_DAEMON_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include <cjson/cJSON.h>

#include "claims.h"
#include "frame.h"
#include "kilnd.h"

struct kilnd;
struct outbuf;

/* Descriptors a connection may have received and not yet used: a put sends
 * one with its frame; more is a broken or hostile peer, and they are closed. */
#define CONN_RX_FDS 4
/* Bytes of replies queued for a connection beyond which it is not read. */
#define CONN_OUT_MAX ((size_t)4 << 20)

struct conn {
	struct kilnd *d;
	int fd;
	uv_poll_t poll;
	int events;                 /* libuv events currently polled for */
	struct frame_decoder dec;
	struct outbuf *out_head, *out_tail;
	int refs;                   /* the server's plus one per pending reply */
	bool closing;               /* no more reads; close once written */
	bool dead;                  /* socket closed; replies are dropped */
	bool hello;                 /* hello succeeded */
	bool heartbeat;             /* hello asked for heartbeats while it waits */
	bool batching;              /* in a read: replies wait for its end */
	uid_t uid;
	pid_t pid;
	bool status_only;           /* root, not kilnd's user: hello and status only */
	unsigned pending;           /* requests read and not yet answered */
	unsigned nout;              /* replies queued and not yet fully written */
	size_t out_bytes;           /* their size (whole frames, written part too) */
	uint64_t rx_ns;             /* when the last byte arrived (--frame-timeout) */
	char *held;                 /* bytes read while full, not yet fed */
	size_t held_len;
	bool resume_queued;         /* on the server's resume list */
	struct conn *resume_next;
	int rx_fds[CONN_RX_FDS];    /* descriptors received, oldest first (put) */
	unsigned nrx;
	bool rx_whole;              /* the write they came with is read to its end */
	struct claim_owner claims;  /* its claims and claim waits (daemon/claims.h) */
	struct conn *prev, *next;
};

/* What the server hands up, set by the wiring (main.c): the layer above
 * (the op table, dispatch.c) is reached only through these. */
struct server_hooks {
	/* One complete frame read on c (payload borrowed for the call). */
	void (*frame)(struct conn *c, const char *payload, size_t len);
	/* Bytes were read on some connection: a new batch of requests. */
	void (*batch)(struct kilnd *d);
	/* A connection went (hung up, or closed by kilnd): its requests'
	 * builds may have no one left to answer. */
	void (*closed)(struct kilnd *d);
};

/* How often a client that asked for them gets a heartbeat frame,
 * {"heartbeat": true} without an id, while it has requests in progress: a
 * client can then tell a kilnd that is stopped or wedged (silent) from a
 * long build (docs/protocol.md, hello). */
#define SERVER_HEARTBEAT_MS 5000

/* Binds and listens on d->cfg->socket_path: directory 0700 (created when
 * missing), socket 0600. Returns 0 or a negative errno with a sentence in err. */
int server_init(struct kilnd *d, const struct server_hooks *hooks, char *err, size_t errlen);
/* Stops accepting and removes the socket file. */
void server_stop_listening(struct kilnd *d);
/* Closes every connection (after flushing what can be written). */
void server_fini(struct kilnd *d);
/* Frees the server after server_fini and the last loop run. */
void server_free(struct kilnd *d);
unsigned server_connections(const struct kilnd *d);
/* get and put requests read and not yet answered, on every live connection. */
unsigned server_pending(const struct kilnd *d);

/*
 * Queues reply (consumed: freed here) on c, with fd attached when fd >= 0
 * (ownership of fd passes to the connection, which closes it once sent).
 * Drops the reply when the connection is gone.
 */
void conn_reply(struct conn *c, cJSON *reply, int fd);
/* The same for a reply already printed: json (len bytes, a JSON object that
 * says "fd":true when fd >= 0) is copied; fd is owned and sent with it. */
void conn_reply_text(struct conn *c, const char *json, size_t len, int fd);
/* The same with a borrowed descriptor: ref's reference passes to the reply,
 * which lets go of it once written or dropped (fdcache.h). */
struct fdref;
void conn_reply_text_ref(struct conn *c, const char *json, size_t len, struct fdref *ref);
/* Queues an error reply. */
void conn_reply_error(struct conn *c, uint64_t id, int code, const char *field,
		      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Stops reading from c and closes it once queued replies are written. */
void conn_close_after_reply(struct conn *c);
/* The oldest descriptor received on c and not yet taken (owned by the
 * caller), or -1. */
int conn_take_fd(struct conn *c);
/*
 * Runs a request's job on the pool (kilnd_work) with c kept alive until its
 * completion, which must conn_unref(c). 0, or -1 when the job cannot be
 * queued: then request id was answered with an internal error, c's
 * reference was dropped, and the caller still owns arg.
 */
int conn_queue_work(struct conn *c, uint64_t id, enum pool_job kind, void (*fn)(void *arg),
		    void (*done)(void *arg, int status), void *arg);
/* Keeps c's memory alive across asynchronous work; conn_unref releases it. */
void conn_ref(struct conn *c);
void conn_unref(struct conn *c);

#endif
