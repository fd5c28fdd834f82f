/*
 * The lookup and release operations (lookup_op.c).
 */
#ifndef KILN_DAEMON_LOOKUP_OP_H
#define KILN_DAEMON_LOOKUP_OP_H

struct conn;
struct msg_request;

/* lookup: the entry an alias or key names, never built; with "claim", the
 * alias claimed on a miss or another client's claim waited for. */
void op_lookup(struct conn *c, struct msg_request *req);
/* release: gives up the connection's claim on an alias. */
void op_release(struct conn *c, struct msg_request *req);

#endif
