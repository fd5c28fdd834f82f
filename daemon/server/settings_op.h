/*
 * The config and zero operations (settings_op.c): the cache's settings in
 * kiln.conf, and the statistics reset.
 */
#ifndef KILN_DAEMON_SETTINGS_OP_H
#define KILN_DAEMON_SETTINGS_OP_H

struct conn;
struct msg_request;

/* config: with max_size, saves it in <cache>/kiln.conf (0 removes it) on
 * the pool and applies it unless --max-size overrides it (evicting when
 * over); replies {max_size, max_size_source, saved_max_size, file}. */
void op_config(struct conn *c, struct msg_request *req);
/* zero: every counter reset; replies {stats_since}. */
void op_zero(struct conn *c, struct msg_request *req);

#endif
