/*
 * Request dispatch: validates a decoded frame and runs its operation.
 */
#ifndef KILN_DAEMON_DISPATCH_H
#define KILN_DAEMON_DISPATCH_H

#include <stddef.h>

struct conn;
struct build_input;
struct msg_request;

/* Handles one frame's payload from c (loop thread). */
void dispatch_frame(struct conn *c, const char *payload, size_t len);

/* What runs once a request's key is known; owns in (and fd, when >= 0). */
typedef void (*dispatch_next_fn)(struct conn *c, struct build_input *in, int fd);
/*
 * Turns a get-like request (get, put) into a build input and its request
 * key: inline when small, else on the pool (sources given by path are read
 * there). Takes req's contents and fd; answers c itself when the request is
 * unusable, else calls next on the loop thread.
 */
void dispatch_key_request(struct conn *c, struct msg_request *req, int fd, dispatch_next_fn next);

#endif
