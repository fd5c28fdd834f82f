/*
 * The client processes of bench/load. Each holds one main connection to
 * kilnd and walks its deterministic plan, checking every reply and recording
 * its latency in shared memory. Malformed input goes over short-lived
 * connections of its own, so that the main connection is never at risk.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "load.h"
#include "msg.h"
#include "util.h"
#include "wire.h"

#define CONNECT_TRIES 40
#define BARRIER_TIMEOUT_S 300.0

/* One client process. */
struct client {
	const struct load_ctx *x;
	const struct load_opts *o;
	int ci;
	struct load_child *me;
	struct load_rec *recs;
	struct wire_conn c;
	bool up;
	uint64_t next_id;
	uint64_t nart;        /* artifacts of pre-built programs received */
};

static double now_ms(void)
{
	return (double)util_now_ns() / 1e6;
}

static void sleep_ms(double ms)
{
	struct timespec ts = { .tv_sec = (time_t)(ms / 1e3),
			       .tv_nsec = (long)((ms - 1e3 * (double)(time_t)(ms / 1e3)) * 1e6) };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

uint64_t load_rand(uint64_t seed, uint64_t a, uint64_t b)
{
	/* splitmix64's finaliser over the three inputs. */
	uint64_t z = seed ^ (a * 0x9e3779b97f4a7c15ull) ^ (b * 0xc2b2ae3d27d4eb4full);

	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

int load_burst_at(const struct load_opts *o, int i)
{
	long k, at;

	if (o->bursts <= 0 || i < 0 || i >= o->requests)
		return -1;
	/* Burst k sits in the middle of the k-th of `bursts` equal stretches;
	 * the options make every stretch at least 4 requests long. */
	k = (long)i * o->bursts / o->requests;
	at = (2 * k + 1) * (long)o->requests / (2L * o->bursts);
	return i == at ? (int)k : -1;
}

enum load_kind load_plan(const struct load_opts *o, int ci, int i)
{
	uint64_t r;
	double pct;

	if (load_burst_at(o, i) >= 0)
		return LK_MISS;
	if (load_burst_at(o, i - 1) >= 0)
		return LK_FAIL;
	r = load_rand(o->seed, (uint64_t)ci, (uint64_t)i);
	pct = (double)(r >> 11) / 9007199254740992.0 * 100.0;
	if (pct < o->bad_pct)
		return LK_BAD;
	if (pct < o->bad_pct + o->slow_pct)
		return LK_SLOW;
	return (r & 1) ? LK_HIT_DIGEST : LK_HIT_TEXT;
}

/* Bookkeeping. */

static void note(struct client *cl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note(struct client *cl, const char *fmt, ...)
{
	struct load_child *me = cl->me;
	va_list ap;
	int n;

	if (me->nerr < LOAD_NERR) {
		n = snprintf(me->err[me->nerr], sizeof(me->err[0]), "client %d: ", cl->ci);
		va_start(ap, fmt);
		vsnprintf(me->err[me->nerr] + n, sizeof(me->err[0]) - (size_t)n, fmt, ap);
		va_end(ap);
	}
	me->nerr++;
}

static void put_rec(struct client *cl, int i, double ms, enum load_outcome out)
{
	struct load_rec *r = &cl->recs[i];

	r->ms = out == LO_LOST ? -1.0f : (float)ms;
	r->outcome = (uint8_t)out;
}

static const char *errno_text(int rc)
{
	if (rc == -EAGAIN || rc == -EWOULDBLOCK)
		return "no reply within the timeout";
	if (rc == -ECONNRESET)
		return "the daemon closed the connection";
	return strerror(-rc);
}

/* Drops the main connection after a loss or a reply that broke the pairing
 * of requests and replies; the next request connects again. */
static void drop(struct client *cl)
{
	if (!cl->up)
		return;
	wire_conn_fini(&cl->c);
	cl->up = false;
}

/* (Re)connects the main connection, retrying refusals for a few seconds. */
static int ensure_up(struct client *cl, bool first)
{
	const char *why = "";
	int rc = 0;

	if (cl->up)
		return 0;
	for (int t = 0; t < CONNECT_TRIES; t++) {
		rc = load_connect(&cl->c, cl->o->socket, cl->o->timeout_s, &why);
		if (rc == 0)
			break;
		cl->me->retries++;
		sleep_ms(10.0 * (t < 10 ? t + 1 : 10) + (double)(load_rand(cl->o->seed, cl->ci, t) % 10));
	}
	if (rc < 0) {
		note(cl, "%s failed %d times: %s", why, CONNECT_TRIES, strerror(-rc));
		return rc;
	}
	cl->up = true;
	cl->next_id = 2;
	if (!first)
		cl->me->reconnects++;
	return 0;
}

/* The barrier of all clients, as a futex in shared memory. A client that
 * waits past the timeout marks it broken, and then nobody waits any more. */
static long futex(uint32_t *word, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, word, op, val, ts, NULL, 0);
}

static int barrier_wait(struct load_shm *shm)
{
	struct load_barrier *b = &shm->bar;
	uint32_t gen = __atomic_load_n(&b->gen, __ATOMIC_ACQUIRE);
	double end = now_ms() + BARRIER_TIMEOUT_S * 1e3;

	if (__atomic_load_n(&shm->broken, __ATOMIC_ACQUIRE))
		return -EPIPE;
	if (__atomic_add_fetch(&b->count, 1, __ATOMIC_ACQ_REL) == b->n) {
		__atomic_store_n(&b->count, 0, __ATOMIC_RELAXED);
		__atomic_add_fetch(&b->gen, 1, __ATOMIC_RELEASE);
		futex(&b->gen, FUTEX_WAKE, INT_MAX, NULL);
		return 0;
	}
	while (__atomic_load_n(&b->gen, __ATOMIC_ACQUIRE) == gen) {
		struct timespec ts = { .tv_sec = 0, .tv_nsec = 200 * 1000 * 1000 };

		if (__atomic_load_n(&shm->broken, __ATOMIC_ACQUIRE))
			return -EPIPE;
		if (now_ms() > end) {
			__atomic_store_n(&shm->broken, 1, __ATOMIC_RELEASE);
			return -ETIMEDOUT;
		}
		futex(&b->gen, FUTEX_WAIT, gen, &ts);
	}
	return 0;
}

/* Checking replies. */

/*
 * Checks a get reply that should carry an artifact: of want (a pre-built
 * program) or of any program when want is NULL; key (may be NULL) gets the
 * reply's key. Sets *why when the reply is wrong.
 */
static enum load_outcome check_artifact(struct client *cl, const cJSON *r, int fd,
					const struct load_prog *want, char *key,
					char *why, size_t wlen)
{
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(r, "key");
	const cJSON *size = cJSON_GetObjectItemCaseSensitive(r, "size");
	const char *code = load_err_code(r);
	struct stat st;
	uint8_t sha[32];
	uint64_t n;

	if (!load_reply_ok(r)) {
		if (code && strcmp(code, "busy") == 0)
			return LO_BUSY;
		snprintf(why, wlen, "error %s: %.120s", code ? code : "(no code)", load_err_message(r));
		return LO_WRONG;
	}
	if (fd < 0) {
		snprintf(why, wlen, "ok reply without a descriptor");
		return LO_WRONG;
	}
	if (!cJSON_IsString(k) || strlen(k->valuestring) != 64 || !cJSON_IsNumber(size)) {
		snprintf(why, wlen, "ok reply without key or size");
		return LO_WRONG;
	}
	if (key)
		snprintf(key, LOAD_KEY_LEN, "%s", k->valuestring);
	if (want && strcmp(k->valuestring, want->key) != 0) {
		snprintf(why, wlen, "%s: key %.16s, pre-built %.16s", want->name, k->valuestring,
			 want->key);
		return LO_WRONG;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (double)st.st_size != size->valuedouble) {
		snprintf(why, wlen, "descriptor is not a file of the reply's size %.0f",
			 size->valuedouble);
		return LO_WRONG;
	}
	if (!want || cl->o->verify_every <= 0 || ++cl->nart % (uint64_t)cl->o->verify_every != 0)
		return LO_OK;
	cl->me->verified++;
	if (util_copy_sha256(fd, -1, &n, sha) != 0 || n != want->size ||
	    memcmp(sha, want->sha, 32) != 0) {
		snprintf(why, wlen, "%s: the artifact's bytes differ from the pre-built ones", want->name);
		return LO_WRONG;
	}
	return LO_OK;
}

/* A hit must also say that no compiler ran. */
static enum load_outcome check_hit(struct client *cl, const cJSON *r, int fd,
				   const struct load_prog *want, char *why, size_t wlen)
{
	enum load_outcome out = check_artifact(cl, r, fd, want, NULL, why, wlen);

	if (out == LO_OK && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "cached"))) {
		snprintf(why, wlen, "%s: a hit that says cached: false", want->name);
		return LO_WRONG;
	}
	return out;
}

/* A failing build: build_failed with the compiler's complaint in the log. */
static enum load_outcome check_fail(const cJSON *r, const struct load_prog *p, char *why,
				    size_t wlen)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
	const cJSON *log = cJSON_GetObjectItemCaseSensitive(e, "log");
	const char *code = load_err_code(r);

	if (load_reply_ok(r)) {
		snprintf(why, wlen, "%s: a program with a compile error built", p->name);
		return LO_WRONG;
	}
	if (code && strcmp(code, "busy") == 0)
		return LO_BUSY;
	if (!code || strcmp(code, "build_failed") != 0) {
		snprintf(why, wlen, "%s: error %s, expected build_failed: %.100s", p->name,
			 code ? code : "(no code)", load_err_message(r));
		return LO_WRONG;
	}
	if (!cJSON_IsString(log) || !strstr(log->valuestring, p->marker)) {
		snprintf(why, wlen, "%s: build_failed without the compiler's message about %s",
			 p->name, p->marker);
		return LO_WRONG;
	}
	return LO_OK;
}

/* Receives the reply to request id on the main connection. A reply with
 * another id breaks the pairing: it is wrong, and the connection dropped. */
/*
 * Receives the next reply on the main connection. An error with id 0 that
 * answers none of our ids is the daemon ending the connection (bad_frame
 * after --frame-timeout, busy, shutting_down): the requests in progress
 * are lost, and why says what the daemon said.
 */
static int recv_main(struct client *cl, cJSON **r, int *fd, char *why, size_t wlen)
{
	int rc = load_recv(&cl->c, r, fd);

	if (rc < 0) {
		snprintf(why, wlen, "%s", errno_text(rc));
		return rc;
	}
	if (*fd >= 0)
		cl->me->fds++;
	if (load_reply_id(*r) == 0 && !load_reply_ok(*r)) {
		snprintf(why, wlen, "the daemon ended the connection: %s: %.120s",
			 load_err_code(*r) ? load_err_code(*r) : "(no code)", load_err_message(*r));
		return -ECONNABORTED;
	}
	return 0;
}

/* Receives the reply to request id on the main connection. A reply with
 * another id breaks the pairing: it is wrong, and the connection dropped. */
static int recv_for(struct client *cl, uint64_t id, cJSON **r, int *fd, char *why, size_t wlen)
{
	int rc = recv_main(cl, r, fd, why, wlen);

	if (rc == 0 && load_reply_id(*r) != (int64_t)id) {
		snprintf(why, wlen, "reply with id %lld to request %llu", (long long)load_reply_id(*r),
			 (unsigned long long)id);
		rc = -EPROTO;
	}
	return rc;
}

/* Records a request whose outcome is known, noting why when it is not ok. */
static void record(struct client *cl, int i, double ms, enum load_outcome out, const char *why)
{
	static const char *const names[LK__COUNT] = {
		"hit", "hit by digest", "miss", "compile error", "malformed", "slow",
	};

	if (out == LO_WRONG || out == LO_LOST)
		note(cl, "request %d (%s): %s%s", i, names[cl->recs[i].kind],
		     out == LO_LOST ? "lost: " : "", why);
	put_rec(cl, i, ms, out);
}

/* Records a request on the main connection: a failed exchange (rc < 0)
 * drops the connection, and is a loss unless a wrong reply caused it. */
static void finish(struct client *cl, int i, double t0, int rc, enum load_outcome out,
		   const char *why)
{
	if (rc == -EPROTO || rc == -EBADMSG) {
		out = LO_WRONG;
		drop(cl);
	} else if (rc < 0) {
		out = LO_LOST;
		drop(cl);
	}
	record(cl, i, now_ms() - t0, out, why);
}

static const struct load_prog *pick_hit(const struct client *cl, int i)
{
	uint64_t r = load_rand(cl->o->seed ^ 0x5bd1e995u, (uint64_t)cl->ci, (uint64_t)i);

	return &cl->x->hits[r % (uint64_t)cl->o->programs];
}

/* The reply to a get of program p sent as request id (rc: the send's
 * result), checked and counted. */
static void hit_reply(struct client *cl, int i, double t0, int rc, uint64_t id,
		      const struct load_prog *p)
{
	enum load_outcome out = LO_WRONG;
	char why[200] = "";
	cJSON *r = NULL;
	int fd = -1;

	if (rc < 0)
		snprintf(why, sizeof(why), "send: %s", strerror(-rc));
	else
		rc = recv_for(cl, id, &r, &fd, why, sizeof(why));
	if (rc == 0)
		out = check_hit(cl, r, fd, p, why, sizeof(why));
	if (fd >= 0)
		close(fd);
	cJSON_Delete(r);
	finish(cl, i, t0, rc, out, why);
}

/* A get of a pre-built program, by text or by digest. */
static void do_hit(struct client *cl, int i, bool digest)
{
	const struct load_prog *p = pick_hit(cl, i);
	uint64_t id = cl->next_id++;
	double t0 = now_ms();
	int rc = load_send_body(&cl->c, "get", id, false, digest ? p->dbody : p->body,
				digest ? p->dbody_len : p->body_len);

	hit_reply(cl, i, t0, rc, id, p);
}

static int send_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * A slow client: the frame goes out in 4 to 8 pieces (the first splits the
 * length) with 1-5 ms between them, and half the time the reply is read
 * only 0-19 ms later. Far below the daemon's stall timeout.
 */
static int send_slowly(struct client *cl, const char *frame, size_t flen, uint64_t rnd)
{
	int pieces = 4 + (int)(rnd % 5);
	size_t off = 0;
	int rc = 0;

	for (int k = 0; k < pieces && rc == 0; k++) {
		size_t end = k == 0 ? 2 : 2 + (flen - 2) * (size_t)k / (size_t)(pieces - 1);

		rc = send_all(cl->c.fd, frame + off, end - off);
		off = end;
		if (k + 1 < pieces)
			sleep_ms(1.0 + (double)((rnd >> (8 + 3 * k)) % 5));
	}
	if (rc == 0 && ((rnd >> 40) & 1))
		sleep_ms((double)((rnd >> 41) % 20));
	return rc;
}

static void do_slow(struct client *cl, int i)
{
	const struct load_prog *p = pick_hit(cl, i);
	uint64_t rnd = load_rand(cl->o->seed ^ 0x51077u, (uint64_t)cl->ci, (uint64_t)i);
	uint64_t id = cl->next_id++;
	size_t plen = 0, flen = 0;
	char *pl = load_payload("get", id, false, p->body, p->body_len, &plen);
	char *frame = pl ? frame_encode(pl, plen, &flen) : NULL;
	double t0 = now_ms();
	int rc = frame ? send_slowly(cl, frame, flen, rnd) : -ENOMEM;

	free(frame);
	free(pl);
	hit_reply(cl, i, t0, rc, id, p);
}

/* A new program's reply: any artifact, the same key for every client (the
 * parent compares them), and which of starter, joiner or hit it was. */
static enum load_outcome check_miss(struct client *cl, const cJSON *r, int fd, int k,
				    char *why, size_t wlen)
{
	char key[LOAD_KEY_LEN];
	enum load_outcome out = check_artifact(cl, r, fd, NULL, key, why, wlen);

	if (out != LO_OK)
		return out;
	snprintf(cl->x->keys[(size_t)cl->ci * (size_t)cl->o->bursts + (size_t)k], LOAD_KEY_LEN,
		 "%s", key);
	__atomic_store_n(&cl->x->shm->miss_ok[k], 1, __ATOMIC_RELAXED);
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "cached")))
		cl->me->cached++;
	else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "joined")))
		cl->me->joined++;
	else
		cl->me->starters++;
	return out;
}

/* Handles one reply of a burst; returns 0, or -EPROTO for an unknown id. */
static int burst_reply(struct client *cl, int i, int k, double t0, const uint64_t ids[2],
		       bool done[2], cJSON *r, int fd)
{
	const struct load_prog *fp = &cl->x->fails[k % LOAD_NFAIL];
	enum load_outcome out;
	int64_t id = load_reply_id(r);
	char why[200] = "";

	if (id == (int64_t)ids[0] && !done[0]) {
		out = check_miss(cl, r, fd, k, why, sizeof(why));
		record(cl, i, now_ms() - t0, out, why);
		done[0] = true;
	} else if (id == (int64_t)ids[1] && !done[1]) {
		out = check_fail(r, fp, why, sizeof(why));
		if (out == LO_OK)
			__atomic_store_n(&cl->x->shm->fail_seen[k], 1, __ATOMIC_RELAXED);
		record(cl, i + 1, now_ms() - t0, out, why);
		done[1] = true;
	} else {
		return -EPROTO;
	}
	return 0;
}

/*
 * Burst k: right after the barrier every client asks for new program k and
 * for a failing program, pipelined on its main connection, so that the whole
 * herd asks for both at the same moment.
 */
static void do_burst(struct client *cl, int i, int k)
{
	const struct load_prog *np = &cl->x->news[k], *fp = &cl->x->fails[k % LOAD_NFAIL];
	uint64_t ids[2] = { cl->next_id, cl->next_id + 1 };
	bool done[2] = { false, false };
	char why[200] = "out of memory";
	const char *pls[2];
	size_t lens[2];
	char *pa, *pb;
	double t0;
	int rc = -ENOMEM;

	cl->next_id += 2;
	pa = load_payload("get", ids[0], false, np->body, np->body_len, &lens[0]);
	pb = load_payload("get", ids[1], false, fp->body, fp->body_len, &lens[1]);
	pls[0] = pa;
	pls[1] = pb;
	t0 = now_ms();
	if (pa && pb)
		rc = wire_send_frames(&cl->c, pls, lens, 2);
	while (rc == 0 && !(done[0] && done[1])) {
		cJSON *r = NULL;
		int fd = -1;

		rc = recv_main(cl, &r, &fd, why, sizeof(why));
		if (rc == 0 && (rc = burst_reply(cl, i, k, t0, ids, done, r, fd)) < 0)
			snprintf(why, sizeof(why), "reply with id %lld in a burst",
				 (long long)load_reply_id(r));
		if (fd >= 0)
			close(fd);
		cJSON_Delete(r);
	}
	free(pa);
	free(pb);
	for (int j = 0; j < 2; j++)
		if (!done[j])
			finish(cl, i + j, t0, rc, LO_LOST, why);
}

/* Malformed input, each on a connection of its own. */
struct bad_case {
	const char *name;
	const char *payload;  /* sent as one frame, or NULL */
	const char *raw;      /* else these 4 header bytes alone */
	bool hello;           /* say hello first */
	const char *code;     /* the error expected */
	int64_t id;           /* with this id */
	bool closes;          /* and then a close */
};

static const struct bad_case bad_cases[] = {
	{ "truncated JSON", "{\"op\":\"get\",\"id\":3,", NULL, false, "bad_json", 0, true },
	{ "JSON that is not an object", "[1,2,3]", NULL, true, "bad_json", 0, true },
	{ "zero length", NULL, "\0\0\0\0", false, "bad_frame", 0, true },
	{ "length above --max-frame", NULL, "\xff\xff\xff\xf0", true, "bad_frame", 0, true },
	{ "unknown op", "{\"op\":\"frobnicate\",\"id\":7}", NULL, true, "unknown_op", 7, false },
	{ "get without sources", "{\"op\":\"get\",\"id\":8,\"toolchain\":\"cc\"}", NULL, true,
	  "bad_request", 8, false },
};

#define NBAD (sizeof(bad_cases) / sizeof(bad_cases[0]))

/* After the error: the close, or a connection that still answers. */
static enum load_outcome bad_after(struct wire_conn *b, const struct bad_case *bc, char *why,
				   size_t wlen)
{
	static const char probe[] = "{\"op\":\"lookup\",\"id\":9,\"alias\":\"kiln-load:absent\"}";
	const char *code;
	cJSON *r = NULL;
	int fd = -1;
	int rc;

	if (bc->closes) {
		rc = load_recv(b, &r, &fd);
		cJSON_Delete(r);
		if (fd >= 0)
			close(fd);
		if (rc == 0 || rc == -EAGAIN || rc == -EWOULDBLOCK) {
			snprintf(why, wlen, "%s: %s after %s", bc->name,
				 rc == 0 ? "another reply" : "no close", bc->code);
			return LO_WRONG;
		}
		return LO_OK;
	}
	rc = wire_send_frame(b, probe, sizeof(probe) - 1);
	if (rc == 0)
		rc = load_recv(b, &r, &fd);
	code = rc == 0 ? load_err_code(r) : NULL;
	if (rc < 0 || !code || strcmp(code, "not_found") != 0 || load_reply_id(r) != 9) {
		snprintf(why, wlen, "%s: the connection is not usable after %s (%s)", bc->name,
			 bc->code, rc < 0 ? errno_text(rc) : code ? code : "ok");
		rc = -1;
	}
	if (fd >= 0)
		close(fd);
	cJSON_Delete(r);
	return rc < 0 ? LO_WRONG : LO_OK;
}

/* Sends the bad input and checks the error reply; *ms gets its latency.
 * Returns a negative errno when no reply came at all. */
static int bad_exchange(struct wire_conn *b, const struct bad_case *bc, double *ms,
			enum load_outcome *out, char *why, size_t wlen)
{
	double t0 = now_ms();
	const char *code;
	cJSON *r = NULL;
	int fd = -1;
	int rc = bc->payload ? wire_send_frame(b, bc->payload, strlen(bc->payload))
			     : send_all(b->fd, bc->raw, 4);

	if (rc == 0)
		rc = load_recv(b, &r, &fd);
	*ms = now_ms() - t0;
	if (fd >= 0)
		close(fd);
	if (rc < 0) {
		snprintf(why, wlen, "%s: %s", bc->name, errno_text(rc));
		return rc;
	}
	code = load_err_code(r);
	if (load_reply_ok(r) || !code || strcmp(code, bc->code) != 0 || load_reply_id(r) != bc->id) {
		snprintf(why, wlen, "%s: got %s with id %lld, expected %s with id %lld", bc->name,
			 code ? code : "ok", (long long)load_reply_id(r), bc->code, (long long)bc->id);
		*out = code && strcmp(code, "busy") == 0 ? LO_BUSY : LO_WRONG;
	} else {
		*out = bad_after(b, bc, why, wlen);
	}
	cJSON_Delete(r);
	return 0;
}

static void do_bad(struct client *cl, int i)
{
	uint64_t rnd = load_rand(cl->o->seed ^ 0xbadu, (uint64_t)cl->ci, (uint64_t)i);
	const struct bad_case *bc = &bad_cases[rnd % NBAD];
	enum load_outcome out = LO_LOST;
	const char *stage = "";
	struct wire_conn b;
	char why[200] = "";
	double ms = 0;
	int rc = -ECONNREFUSED;

	for (int t = 0; t < CONNECT_TRIES && rc < 0; t++) {
		rc = bc->hello ? load_connect(&b, cl->o->socket, cl->o->timeout_s, &stage)
			       : load_raw_connect(&b, cl->o->socket, cl->o->timeout_s);
		if (rc < 0) {
			cl->me->retries++;
			sleep_ms(10.0 * (t < 10 ? t + 1 : 10));
		}
	}
	if (rc < 0) {
		snprintf(why, sizeof(why), "%s: cannot connect: %s", bc->name, strerror(-rc));
	} else {
		rc = bad_exchange(&b, bc, &ms, &out, why, sizeof(why));
		wire_conn_fini(&b);
		if (rc < 0)
			out = LO_LOST;
	}
	record(cl, i, ms, out, why);
}

/* The client's run. */

static void wait_go(struct load_shm *shm)
{
	double end = now_ms() + 600e3;

	while (!__atomic_load_n(&shm->go, __ATOMIC_ACQUIRE) && now_ms() < end) {
		struct timespec ts = { .tv_sec = 0, .tv_nsec = 200 * 1000 * 1000 };

		futex(&shm->go, FUTEX_WAIT, 0, &ts);
	}
}

/* No connection can be made: the rest stays recorded as lost, and nobody
 * waits for this client at a barrier any more. */
static void give_up(struct client *cl, int i)
{
	note(cl, "gave up at request %d of %d: no connection", i, cl->o->requests);
	__atomic_store_n(&cl->x->shm->broken, 1, __ATOMIC_RELEASE);
	futex(&cl->x->shm->bar.gen, FUTEX_WAKE, INT_MAX, NULL);
}

static void client_init(struct client *cl, const struct load_ctx *x, int ci)
{
	memset(cl, 0, sizeof(*cl));
	cl->x = x;
	cl->o = x->o;
	cl->ci = ci;
	cl->me = &x->children[ci];
	cl->recs = &x->recs[(size_t)ci * (size_t)x->o->requests];
	if (x->parent_fd >= 0)
		close(x->parent_fd);
}

static void client_end(struct client *cl)
{
	if (cl->up && cl->c.nfds > 0) {
		cl->me->stray_fds += cl->c.nfds;
		note(cl, "%zu descriptors that no reply claimed", cl->c.nfds);
	}
	drop(cl);
	__atomic_store_n(&cl->me->done, 1, __ATOMIC_RELEASE);
}

void load_client_run(const struct load_ctx *x, int ci)
{
	struct client cl;
	int rc;

	client_init(&cl, x, ci);
	rc = ensure_up(&cl, true);
	__atomic_add_fetch(&x->shm->ready, 1, __ATOMIC_ACQ_REL);
	wait_go(x->shm);
	for (int i = 0; i < x->o->requests; i++) {
		enum load_kind kind = (enum load_kind)cl.recs[i].kind;

		if (kind == LK_FAIL)
			continue; /* sent with its burst */
		if (rc < 0 || (!cl.up && (rc = ensure_up(&cl, false)) < 0)) {
			give_up(&cl, i);
			break;
		}
		if (kind == LK_MISS) {
			barrier_wait(x->shm);
			do_burst(&cl, i, load_burst_at(x->o, i));
		} else if (kind == LK_BAD) {
			do_bad(&cl, i);
		} else if (kind == LK_SLOW) {
			do_slow(&cl, i);
		} else {
			do_hit(&cl, i, kind == LK_HIT_DIGEST);
		}
	}
	client_end(&cl);
	_exit(0);
}

void load_client_warm(const struct load_ctx *x, int ci)
{
	struct client cl;
	int bad = 0;

	client_init(&cl, x, ci);
	if (ensure_up(&cl, true) < 0)
		_exit(1);
	for (int j = 0; j < 2 * x->o->programs && !bad; j++) {
		const struct load_prog *p = &x->hits[j / 2];
		enum load_outcome out = LO_WRONG;
		uint64_t id = cl.next_id++;
		char why[200] = "";
		cJSON *r = NULL;
		int fd = -1;
		int rc = load_send_body(&cl.c, "get", id, false, j % 2 ? p->dbody : p->body,
					j % 2 ? p->dbody_len : p->body_len);

		if (rc == 0)
			rc = recv_for(&cl, id, &r, &fd, why, sizeof(why));
		if (rc == 0)
			out = check_hit(&cl, r, fd, p, why, sizeof(why));
		if (rc < 0 || out != LO_OK) {
			note(&cl, "warm-up get of %s: %s", p->name, rc < 0 && !*why ? strerror(-rc) : why);
			bad = 1;
		}
		if (fd >= 0)
			close(fd);
		cJSON_Delete(r);
	}
	client_end(&cl);
	_exit(bad);
}
