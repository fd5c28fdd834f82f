/*
 * export and import of cache entries through a directory in the upstream
 * tier's layout (transfer.c).
 */
#ifndef KILN_DAEMON_TRANSFER_H
#define KILN_DAEMON_TRANSFER_H

struct conn;
struct msg_request;

/* Runs an export or import request on the thread pool and answers it. */
void op_transfer(struct conn *c, struct msg_request *req);

#endif
