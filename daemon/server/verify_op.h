/*
 * The verify operation (verify_op.c).
 */
#ifndef KILN_DAEMON_VERIFY_OP_H
#define KILN_DAEMON_VERIFY_OP_H

struct conn;
struct msg_request;

/* Every entry checked on the pool, damaged ones removed; replies
 * {checked, ok, removed, unverified, damaged: [...]}. */
void op_verify(struct conn *c, struct msg_request *req);

#endif
