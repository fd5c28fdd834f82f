/*
 * put: importing an artifact built elsewhere (another node's kilnd, sent by
 * libkiln-mpi) into this cache, after checking that it is exactly what this
 * node would build for the request.
 */
#ifndef KILN_DAEMON_IMPORT_H
#define KILN_DAEMON_IMPORT_H

struct conn;
struct msg_request;

/* Handles a put request on the loop thread; its artifact is the oldest
 * descriptor received on c. */
void op_put(struct conn *c, struct msg_request *req);

#endif
