/*
 * bench/load: a bounded load test of kilnd. The parent pre-builds a set of
 * programs, then forks client processes that speak the raw protocol with a
 * deterministic mix of requests and record each request's latency and
 * outcome in shared memory; the parent then checks the replies, the daemon's
 * counters, its RSS and that it is still alive, and prints the figures.
 */
#ifndef KILN_BENCH_LOAD_H
#define KILN_BENCH_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#define LOAD_MAX_BURSTS 64
#define LOAD_MAX_PROGRAMS 256
#define LOAD_NFAIL 4        /* distinct failing programs, used in turn */
#define LOAD_NERR 4         /* problems kept per client for the report */
#define LOAD_KEY_LEN 65     /* 64 hex digits and a NUL */

/* What a request is meant to exercise. */
enum load_kind {
	LK_HIT_TEXT,     /* get of a pre-built program, source sent as text */
	LK_HIT_DIGEST,   /* the same, source named by its SHA-256 only */
	LK_MISS,         /* get of a program new to the daemon, all clients at once */
	LK_FAIL,         /* get of a program with a compile error, all clients at once */
	LK_BAD,          /* malformed frame or request on a short-lived connection */
	LK_SLOW,         /* get of a pre-built program, sent in pieces, read late */
	LK__COUNT
};

enum load_outcome {
	LO_OK,      /* the reply the protocol promises */
	LO_BUSY,    /* a clear busy error: back-pressure, not a loss */
	LO_LOST,    /* no reply: the connection died, timed out, or was never made */
	LO_WRONG,   /* a reply, but not the right one */
	LO__COUNT
};

/* One request: its latency from the first byte sent to the whole reply
 * (negative when there was no reply). */
struct load_rec {
	float ms;
	uint8_t kind;
	uint8_t outcome;
};

/* A generated program and what the pre-build learned about it. */
struct load_prog {
	char name[48];
	char *text;
	char *body;           /* get members after "id": `"toolchain":...}` */
	size_t body_len;
	char *dbody;          /* the same with the source named by digest */
	size_t dbody_len;
	char marker[64];      /* failing programs: the name the compiler complains about */
	char key[LOAD_KEY_LEN];
	uint64_t size;
	uint8_t sha[32];      /* SHA-256 of the artifact's bytes */
};

struct load_opts {
	const char *socket;
	int clients;
	int requests;         /* per client */
	int bursts;           /* herd moments: one new and one failing program each */
	int programs;         /* pre-built programs that hits pick from */
	double bad_pct;
	double slow_pct;
	uint64_t seed;
	int verify_every;     /* compare the bytes of every Nth artifact of a client */
	double timeout_s;     /* longest wait for one reply */
	double deadline_s;    /* longest run of the whole fleet */
	double rss_limit;     /* RSS after / before allowed */
	const char *json;
	pid_t pid;
	bool quiet;
};

/* A futex barrier in shared memory for all clients of the run. */
struct load_barrier {
	uint32_t count;
	uint32_t gen;
	uint32_t n;
};

/* Shared between the parent and every client. */
struct load_shm {
	uint32_t ready;       /* clients connected and waiting for go */
	uint32_t go;          /* futex word: 1 once the parent released them */
	uint32_t broken;      /* a client gave up: barriers stop waiting */
	struct load_barrier bar;
	uint8_t miss_ok[LOAD_MAX_BURSTS];   /* some client got burst k's new program */
	uint8_t fail_seen[LOAD_MAX_BURSTS]; /* some client got burst k's build_failed */
};

/* Per-client tallies, written by that client only. */
struct load_child {
	int done;
	uint64_t fds;         /* descriptors received */
	uint64_t verified;    /* artifacts whose bytes were compared */
	uint64_t starters;    /* miss replies with cached and joined false */
	uint64_t joined;      /* miss replies that joined a build */
	uint64_t cached;      /* miss replies served from the cache */
	uint64_t reconnects;  /* main connections made again after a loss */
	uint64_t retries;     /* connection attempts that were refused */
	uint64_t stray_fds;   /* descriptors left over that no reply claimed */
	int nerr;
	char err[LOAD_NERR][240];
};

/* Everything a client process needs; the mappings are shared. */
struct load_ctx {
	const struct load_opts *o;
	struct load_prog *hits;                  /* o->programs */
	struct load_prog *news;                  /* o->bursts */
	struct load_prog *fails;                 /* LOAD_NFAIL */
	struct load_shm *shm;
	struct load_child *children;             /* o->clients */
	struct load_rec *recs;                   /* o->clients * o->requests */
	char (*keys)[LOAD_KEY_LEN];              /* o->clients * o->bursts: keys of the new programs */
	int parent_fd;                           /* closed in the clients */
};

/* bench/load_client.c */

/* Burst k's first request index for client requests, or -1 when i starts no
 * burst. A burst takes two indexes: the new program, then the failing one. */
int load_burst_at(const struct load_opts *o, int i);
/* The kind of request i of client ci (the same in parent and client). */
enum load_kind load_plan(const struct load_opts *o, int ci, int i);
/* A deterministic 64-bit mix of seed, client and index. */
uint64_t load_rand(uint64_t seed, uint64_t a, uint64_t b);
/* Runs client ci of the main run; never returns. */
void load_client_run(const struct load_ctx *x, int ci) __attribute__((noreturn));
/* Warm-up client: gets each pre-built program once by text and once by
 * digest. Never returns; exits 0 when every reply was right. */
void load_client_warm(const struct load_ctx *x, int ci) __attribute__((noreturn));

/* bench/load_wire.c: raw protocol I/O for the parent and the clients. */
struct wire_conn;

/* Connects without hello, with timeout_s on every send and receive; the
 * wire_conn owns the socket on success. 0 or a negative errno. */
int load_raw_connect(struct wire_conn *c, const char *socket, double timeout_s);
/* load_raw_connect() and hello; 0 or a negative errno (-EBUSY when hello
 * was answered busy), with *why naming the step that failed. */
int load_connect(struct wire_conn *c, const char *socket, double timeout_s, const char **why);
/*
 * {"op":op,"id":id, then "build":false when probe, then body (an object's
 * members after its '{', or "}"): malloc'd, owned by the caller, *len its
 * length. NULL on ENOMEM.
 */
char *load_payload(const char *op, uint64_t id, bool probe, const char *body,
		   size_t body_len, size_t *len);
/* load_payload() sent as one frame. 0 or a negative errno. */
int load_send_body(struct wire_conn *c, const char *op, uint64_t id, bool probe,
		   const char *body, size_t body_len);
/* Receives one reply: *out gets it parsed (owned by the caller), *fd its
 * descriptor when it says "fd": true (else -1; the caller closes it). 0, or
 * a negative errno when the connection failed (-EBADMSG: not a JSON object). */
int load_recv(struct wire_conn *c, cJSON **out, int *fd);
/* A reply's "ok" is true. */
bool load_reply_ok(const cJSON *r);
/* A reply's "id", or -1. */
int64_t load_reply_id(const cJSON *r);
/* "code" of a failed reply's error object, or NULL; "message", or "". */
const char *load_err_code(const cJSON *r);
const char *load_err_message(const cJSON *r);

/* bench/load_report.c */

struct load_daemon {
	cJSON *st_before, *st_after;    /* status replies (owned) */
	long rss_before_kb, rss_after_kb, hwm_after_kb;
	int fds_before, fds_after;
	double cpu_before_s, cpu_after_s;   /* user + system time of kilnd */
	bool alive;
	bool status_after_ok;
};

struct load_result {
	double wall_s;
	int key_mismatch;     /* clients whose key of a new program differed */
	int warm_failed;
	struct load_daemon d;
	int nproblems;
	char problems[16][240];
};

/* Adds a failure of the run as a whole (printf-style). */
void load_problem(struct load_result *res, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Prints the table, writes the JSON file when asked, and returns the exit
 * status: 0 when nothing was lost or wrong and the daemon held up. */
int load_report(const struct load_ctx *x, struct load_result *res);

#endif
