/*
 * Publishing (publish.c), as the top of kilnd sees it.
 */
#ifndef KILN_DAEMON_PUBLISH_H
#define KILN_DAEMON_PUBLISH_H

struct kilnd;

/* Writes the alias re-points not yet written and frees their table
 * (blocking: at the stop, after the loop ended). */
void publish_flush_aliases(struct kilnd *d);

#endif
