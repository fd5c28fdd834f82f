/*
 * The inside of a build, shared by flight.c (table, queue, replies), step.c
 * (compiler processes) and publish.c (thread-pool work: preparing the build
 * directory, publishing the artifact, cleaning up).
 */
#ifndef KILN_DAEMON_BUILD_INT_H
#define KILN_DAEMON_BUILD_INT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "flight.h"
#include "publish.h"
#include "store.h"

struct tier_flight;
struct step_proc;

/*
 * The flight layer's own state, one per kilnd (d->fl): the table of flights,
 * the --jobs queue and slots, and publish's alias re-points. Only this
 * folder reads it; the layers above ask flight.h.
 */
struct flights {
	struct table *table;         /* rkey -> struct flight, builds not yet finished */
	struct flight *queue_head, *queue_tail;
	struct flight *bg_head, *bg_tail;  /* background builds: run when queue_head is empty */
	struct flight *running;       /* builds holding a slot, for shutdown */
	unsigned in_flight;          /* builds holding a --jobs slot */
	unsigned lent;               /* more slots lent to builds' compile steps (step.c) */
	unsigned queued;             /* builds waiting for a slot */
	bool pumping, pump_again;    /* sched_pump()'s guard against re-entry */
	struct recheck_memo *memo;   /* peers' stand-in runs remembered (recheck_memo.h) */
};

struct waiter {
	struct waiter *next;
	const struct waiter_ops *ops;
	void *ctx;
	uint64_t id;
	char *alias;
	char *alias_data;   /* stored with alias (alias_point), or NULL */
	bool joined;
};

struct flight {
	struct kilnd *d;
	enum flight_state state;     /* moved by flight.c (flight_enter) only */
	struct build_input in;
	struct waiter *waiters;
	int refs;                    /* 1 for the build, 1 per open libuv handle */
	struct flight *qnext;         /* queue link */
	struct flight *rprev, *rnext; /* running list (holding a slot) */
	bool has_slot;
	bool in_pool;                /* a thread-pool job of this layer owns the build now */

	char *dir;                   /* private build directory under tmp/ */
	char trace_token[33];        /* signs the trace's records (observe.c) */
	struct prehash *prehash;     /* inputs hashed while it compiles (prehash.c), or NULL */
	uint64_t start_ns;
	int64_t start_wall_ns;

	/* The steps' processes: one at a time, except a multi-source build's
	 * compile steps, which run side by side in free --jobs slots (step.c). */
	int step;                    /* next step to run; see step.c */
	struct step_proc *procs;     /* the running steps' processes (step.c) */
	int nprocs;                  /* ... of which this many are running */
	int next_compile;            /* compile phase: the next compile step to start */
	int ncompile;                /* ... of this many (0 outside the phase) */
	int nprocs_cap;              /* the length of procs */
	uv_timer_t timer;
	bool timer_init;
	bool timed_out;

	char *log;                   /* compiler output, capped at --max-output */
	size_t loglen, logcap, dropped;

	int err_code;                /* enum msg_err; ERR_NONE while all is well */
	char *err_msg;

	struct store_entry entry;    /* filled by publish */
	char *obj_path;
	int fd;                      /* the published object, open, or -1 */
	char *uncacheable;           /* why it was served and not cached, or NULL */
	bool unobserved;             /* uncacheable: a program ran unobserved */

	struct tier_flight *up;      /* the tier's state for the flight (build_tier), or NULL */
	bool from_upstream;          /* fetched from --upstream: no compiler ran */
	bool retried;                /* built again once after an input changed */
	bool cancelled;              /* every waiter left: stopped (flight_cancel_abandoned) */
	uint64_t queued_ns;          /* when the flight started (status: age in the queue) */
};

/* Appends n bytes of data to *text (*len bytes long, *cap allocated, kept
 * NUL-terminated), up to max bytes in all; what does not fit, or cannot be
 * allocated, is counted in *dropped. */
void flight_text_append(char **text, size_t *len, size_t *cap, size_t *dropped, size_t max,
		       const char *data, size_t n);
/* flight_text_append to b's log, up to --max-output. */
void flight_log_append(struct flight *b, const char *data, size_t len);
/* Records the first failure of b (later ones are ignored); returns -1. */
int flight_fail(struct flight *b, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Puts b in the queue for a --jobs slot (after the upstream tier missed). */
void flight_enqueue(struct flight *b);
/* Starts the compiler work of b, which holds a --jobs slot. */
void flight_begin(struct flight *b);
/* b got a --jobs slot (sched_pump): it claims its key in the tier first,
 * or begins. */
void flight_slot_granted(struct flight *b);

/* flight_sched.c: the --jobs slots and the two FIFOs waiting for them. */
void sched_push(struct kilnd *d, struct flight *b);     /* b joins its FIFO */
/* The next flight to get a slot (background ones only while nothing else
 * runs, or at the stop), taken out of its FIFO; NULL when none may. */
struct flight *sched_pop(struct kilnd *d);
/* Takes b out of whichever FIFO holds it; false when none does. */
bool sched_remove(struct kilnd *d, struct flight *b);
/* b no longer holds its slot (nothing when it holds none). */
void sched_leave_slot(struct kilnd *d, struct flight *b);
/* Grants free slots to waiting flights, in order. */
void sched_pump(struct kilnd *d);
/* Gives the --jobs slot back once the compiler steps are over (or when the
 * key turned out to be claimed by another node). */
void flight_release_slot(struct flight *b);
/* The stages report to flight.c, which alone moves b (flight_enter) and
 * decides what follows: step.c says that it begins a compiler step or,
 * with check, the load check, and that the steps are over (b->err_code
 * says how; flight.c then publishes or ends b); publish.c that the
 * publish is over (flight.c ends b, or builds it again). */
void flight_step_begins(struct flight *b, bool check);
void flight_steps_done(struct flight *b);
void flight_published(struct flight *b);

/* step.c: runs the next compiler step or the load check; reports
 * flight_steps_done at the end. */
void step_next(struct flight *b);
/* Kills the process groups of b's running steps (timeout, cancel, shutdown):
 * their exit handlers go on with b. */
void step_kill(struct flight *b);
/* A --jobs slot lent to a build for one more of its compile steps, when one
 * is free and no build waits for it (flight.c); step_slot_return gives it back. */
bool step_slot_borrow(struct kilnd *d);
void step_slot_return(struct kilnd *d);
/* The argv of step b->step (kiln-exec and all), malloc'd, or NULL when no
 * step is left or memory ran out (*oom); *is_check tells the load check.
 * For recheck.c, which runs the same commands on a build that exists only
 * on its stack. */
char **step_command(struct flight *b, bool *is_check, bool *oom);
void step_command_free(char **argv);
/* kilnd's environment for a step in dir: TMPDIR=dir/tmp and the trace's
 * token added (malloc'd; step_env_free). */
char **step_env(const char *dir, const char *token);
void step_env_free(char **env);

/* A build starting: notes its program's variants (variants.c). */
void variants_note(struct kilnd *d, const struct build_input *in);
void variants_fini(struct kilnd *d);

/* publish.c: thread-pool work and its follow-ups. */
void prepare_work(void *arg);
/* Queues b's publish on the pool; reports flight_published. */
void publish_start(struct flight *b);
void publish_cleanup(struct kilnd *d, struct flight *b);

#endif
