/*
 * The operations' handlers and the policy their rows in proto/ops.def ask
 * of dispatch.c (server layer). Each handler lives in op_<family>.c, the
 * family of its row; the table that calls them is dispatch.c's.
 */
#ifndef KILN_DAEMON_OPS_H
#define KILN_DAEMON_OPS_H

struct conn;
struct msg_request;

/* What admit() (dispatch.c) checks before an operation runs. */
enum {
	OPF_BEFORE_HELLO = 1 << 0,  /* allowed before hello */
	OPF_STOPPING = 1 << 1,      /* allowed while kilnd stops */
	OPF_CACHE = 1 << 2,         /* needs the cache: refused with the reason while unusable */
	OPF_ARGS = 1 << 3,          /* carries compiler arguments (code into the toolchain) */
	OPF_PENDING = 1 << 4,       /* counts against --max-pending */
	OPF_FD = 1 << 5,            /* takes a descriptor sent with its frame (refused
	                             * without one); any op without it that reaches
	                             * kilnd with a descriptor has it closed */
	OPF_READ = 1 << 6,          /* allowed to a status-only peer (root) */
};

/* One handler per row (several rows may share one: remove, pin, unpin and
 * gc are op_write). The request is borrowed for the call. */
#define KILN_OP(id, name, parse, pack, run, family, flags) \
	void run(struct conn *c, struct msg_request *req);
#include "ops.def"

#endif
