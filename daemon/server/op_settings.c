/*
 * The settings' operations (server layer): `kiln config` reads and writes
 * the cache's kiln.conf, `kiln stats --zero` resets the counters, `kiln
 * shutdown` stops kilnd.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache_conf.h"
#include "kilnd.h"
#include "log.h"
#include "msg.h"
#include "server.h"
#include "ops.h"
#include "stats.h"
#include "thread.h"
#include "util.h"

struct config_job {
	struct conn *c;
	uint64_t id;
	int64_t max_size;       /* to save; 0 removes; -1 only reads */
	struct cache_conf cc;   /* what kiln.conf says after the job */
	char err[600];
	int rc;
};

static void config_work(void *arg)
{
	ASSERT_POOL();
	struct config_job *j = arg;
	bool replaced;
	j->rc = cache_conf_update(j->c->d->cfg->cache_dir, j->max_size, &j->cc, &replaced, j->err,
				  sizeof(j->err));
	if (j->rc == 0 && replaced)
		log_warn("%s; written anew", j->err);
}

static void config_done(void *arg, int status)
{
	struct config_job *j = arg;
	struct conn *c = j->c;
	struct kilnd *d = c->d;
	if (status != 0) {
		j->rc = status;
		snprintf(j->err, sizeof(j->err), "kiln.conf was not read or written: %s",
			 uv_strerror(status));
	}
	if (j->rc != 0) {
		conn_reply_error(c, j->id, ERR_IO, NULL, "%s", j->err);
	} else {
		uint64_t before = d->cfg->max_size;
		const char *source = config_apply_cache_conf(d->cfg, &j->cc);
		d->max_size_source = source;
		char sz[32];
		if (d->cfg->max_size != before)
			log_info("max size %s (%s)", util_format_size(d->cfg->max_size, sz, sizeof(sz)),
				 source);
		kilnd_refresh_totals(d);   /* evicts when now over */
		cJSON *r = msg_ok_reply(j->id);
		if (r != NULL) {
			cJSON_AddNumberToObject(r, "max_size", (double)d->cfg->max_size);
			cJSON_AddStringToObject(r, "max_size_source", source);
			if (j->cc.has_max_size)
				cJSON_AddNumberToObject(r, "saved_max_size", (double)j->cc.max_size);
			else
				cJSON_AddNullToObject(r, "saved_max_size");
			char path[4200];
			snprintf(path, sizeof(path), "%s/%s", d->cfg->cache_dir, CACHE_CONF_NAME);
			cJSON_AddStringToObject(r, "file", path);
			conn_reply(c, r, -1);
		} else {
			conn_reply_error(c, j->id, ERR_INTERNAL, NULL, "out of memory");
		}
	}
	conn_unref(c);
	free(j);
}

void op_config(struct conn *c, struct msg_request *req)
{
	struct config_job *j = calloc(1, sizeof(*j));
	if (j == NULL) {
		conn_reply_error(c, req->id, ERR_INTERNAL, NULL, "out of memory");
		return;
	}
	j->c = c;
	j->id = req->id;
	j->max_size = req->max_size;
	if (conn_queue_work(c, req->id, POOL_CONFIG, config_work, config_done, j) != 0)
		free(j);
}

void op_zero(struct conn *c, struct msg_request *req)
{
	struct kilnd *d = c->d;
	stats_zero(d);
	log_info("statistics zeroed by pid %d", (int)c->pid);
	cJSON *r = msg_ok_reply(req->id);
	if (r == NULL) {
		conn_reply_error(c, req->id, ERR_INTERNAL, NULL, "out of memory");
		return;
	}
	cJSON_AddNumberToObject(r, "stats_since", (double)d->stats.since);
	conn_reply(c, r, -1);
}

void op_shutdown(struct conn *c, struct msg_request *req)
{
	log_info("shutdown requested by pid %d", (int)c->pid);
	conn_reply(c, msg_ok_reply(req->id), -1);
	kilnd_stop(c->d);
}
