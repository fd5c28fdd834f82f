/*
 * The status operation (status_op.c).
 */
#ifndef KILN_DAEMON_STATUS_OP_H
#define KILN_DAEMON_STATUS_OP_H

struct conn;
struct msg_request;

/* status: replies with kilnd's state and counters (docs/protocol.md). */
void op_status(struct conn *c, struct msg_request *req);

#endif
