/*
 * Request dispatch: validates a decoded frame and runs its operation.
 */
#ifndef KILN_DAEMON_DISPATCH_H
#define KILN_DAEMON_DISPATCH_H

#include <stddef.h>

struct conn;

/* Handles one frame's payload from c (loop thread). */
void dispatch_frame(struct conn *c, const char *payload, size_t len);

#endif
