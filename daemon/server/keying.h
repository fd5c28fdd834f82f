/*
 * From a get-like request to a build input and its request key (keying.c).
 */
#ifndef KILN_DAEMON_KEYING_H
#define KILN_DAEMON_KEYING_H

struct conn;
struct build_input;
struct msg_request;

/* What runs once a request's key is known; owns in (and fd, when >= 0). */
typedef void (*keying_next_fn)(struct conn *c, struct build_input *in, int fd);
/*
 * Turns a get-like request (get, put) into a build input and its request
 * key: inline when small, else on the pool (sources given by path are read
 * there). Takes req's contents and fd; answers c itself when the request is
 * unusable, else calls next on the loop thread.
 */
void keying_request(struct conn *c, struct msg_request *req, int fd, keying_next_fn next);

#endif
