/*
 * Request dispatch (server layer): a frame's payload parsed and validated
 * (proto/msg_parse.c), the policy of its op's row in proto/ops.def applied
 * once (admit), and the op's handler run (daemon/server/op_<family>.c).
 * Loop thread.
 */
#include <unistd.h>

#include "args.h"
#include "cachedir.h"
#include "dispatch.h"
#include "kilnd.h"
#include "log.h"
#include "msg.h"
#include "ops.h"
#include "server.h"
#include "thread.h"

/* The operations: one row each (proto/ops.def), the policy read in admit. */
static const struct {
	void (*run)(struct conn *c, struct msg_request *req);
	unsigned flags;
} op_table[OP__COUNT] = {
#define KILN_OP(id, name, parse, pack, run, family, flags) [OP_##id] = { run, flags },
#include "ops.def"
};

/* The policy: 0 when req may run, else answers it and returns -1. */
static int admit(struct conn *c, const struct msg_request *req, unsigned flags)
{
	struct kilnd *d = c->d;
	if (!c->hello && !(flags & OPF_BEFORE_HELLO)) {
		conn_reply_error(c, req->id, ERR_BAD_REQUEST, "op", "send hello first");
	} else if (c->status_only && !(flags & OPF_READ)) {
		conn_reply_error(c, req->id, ERR_DENIED, "op", "kilnd serves uid %d; root may read its "
				 "status, and do nothing else", (int)geteuid());
	} else if (d->stopping && !(flags & OPF_STOPPING)) {
		conn_reply_error(c, req->id, ERR_SHUTTING_DOWN, NULL, "kilnd is shutting down");
	} else if ((flags & OPF_CACHE) && d->cache_why[0] != '\0' && cachedir_check(d) != 0) {
		conn_reply_error(c, req->id, ERR_IO, NULL, "%s", d->cache_why);
	} else if ((flags & OPF_ARGS) && req->code_arg != 0 && !d->cfg->allow_toolchain_code) {
		char why[256];
		validate_args((const char *const *)req->args, req->nargs, NULL, why, sizeof(why));
		conn_reply_error(c, req->id, ERR_BAD_ARG, "args", "%s", why);
	} else if ((flags & OPF_FD) && c->nrx == 0) {
		conn_reply_error(c, req->id, ERR_BAD_REQUEST, "fd",
				 "%s carries its artifact as a descriptor (SCM_RIGHTS) with its frame; "
				 "none came", msg_op_name(req->op));
	} else if ((flags & OPF_PENDING) && server_pending(d) > d->cfg->max_pending) {
		d->c.busy++;
		conn_reply_error(c, req->id, ERR_BUSY, NULL,
				 "%u requests are in progress (--max-pending); try again later",
				 server_pending(d) - 1);
	} else {
		return 0;
	}
	return -1;
}

void dispatch_frame(struct conn *c, const char *payload, size_t len)
{
	ASSERT_LOOP();
	struct msg_request req;
	struct msg_error err;
	c->d->c.requests++;
	if (msg_request_parse_memo(payload, len, &req, &err, &c->d->args_memo) != 0) {
		conn_reply_error(c, req.id, err.code, err.field[0] != '\0' ? err.field : NULL, "%s",
				 err.message);
		if (err.code == ERR_BAD_JSON) {
			/* Not even an object: the peer does not speak this protocol. */
			conn_close_after_reply(c);
		}
		return;
	}
	if (req.op < 0 || req.op >= OP__COUNT || op_table[req.op].run == NULL) {
		conn_reply_error(c, req.id, ERR_UNKNOWN_OP, "op", "unknown operation");
	} else if (admit(c, &req, op_table[req.op].flags) == 0) {
		log_debug("pid %d: %s id %llu", (int)c->pid, msg_op_name(req.op),
			  (unsigned long long)req.id);
		op_table[req.op].run(c, &req);
	}
	msg_request_free(&req);
}
