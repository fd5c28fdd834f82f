/*
 * The hello operation (docs/protocol.md, "hello"): the protocol a client
 * speaks checked, its heartbeats and job size noted, and kilnd's identity
 * answered. Every connection's first request; loop thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "kilnd.h"
#include "log.h"
#include "msg.h"
#include "ops.h"
#include "server.h"
#include "upstream.h"

#define STR_(x) #x
#define STR(x) STR_(x)

/* hello's reply after its id, ok and heartbeat members: the daemon's
 * protocol, version, pid, socket and cache, closing the object. */
static char *hello_tail_print(const struct kilnd *d)
{
	cJSON *r = cJSON_CreateObject();
	char *text = NULL;
	if (r != NULL && msg_add_int(r, "proto", KILN_PROTO_VERSION) &&
	    cJSON_AddStringToObject(r, "version", KILN_VERSION_STR) &&
	    msg_add_int(r, "pid", (int64_t)getpid()) &&
	    cJSON_AddStringToObject(r, "socket", d->cfg->socket_path) &&
	    cJSON_AddStringToObject(r, "cache_dir", d->cfg->cache_dir))
		text = cJSON_PrintUnformatted(r);
	cJSON_Delete(r);
	/* Without its opening brace: the caller writes the members before it. */
	if (text != NULL)
		memmove(text, text + 1, strlen(text));
	return text;
}

void op_hello(struct conn *c, struct msg_request *req)
{
	struct kilnd *d = c->d;
	if (req->proto != KILN_PROTO_VERSION) {
		struct msg_error err = { .code = ERR_PROTO_MISMATCH };
		snprintf(err.message, sizeof(err.message),
			 "client speaks protocol %lld, kilnd %s speaks protocol %d",
			 (long long)req->proto, KILN_VERSION_STR, KILN_PROTO_VERSION);
		cJSON *r = msg_error_reply(req->id, &err);
		if (r != NULL)
			cJSON_AddNumberToObject(cJSON_GetObjectItem(r, "error"), "proto", KILN_PROTO_VERSION);
		conn_reply(c, r, -1);
		return;
	}
	c->hello = true;
	c->heartbeat = req->heartbeat;
	if (req->job_nodes > 0)
		upstream_job_hint(d, (long)req->job_nodes);
	/* Every fresh process's first reply: what never changes is printed
	 * once (cJSON would print each number with sprintf, check it with
	 * sscanf, and ask for the pid each time), the id and heartbeat here. */
	if (d->hello_tail == NULL && (d->hello_tail = hello_tail_print(d)) == NULL) {
		conn_reply_error(c, req->id, ERR_INTERNAL, NULL, "out of memory");
		return;
	}
	char *text = NULL;
	int len = asprintf(&text, "{\"id\":%llu,\"ok\":true,%s%s", (unsigned long long)req->id,
			   req->heartbeat ? "\"heartbeat_ms\":" STR(SERVER_HEARTBEAT_MS) "," : "",
			   d->hello_tail);
	if (len < 0) {
		conn_reply_error(c, req->id, ERR_INTERNAL, NULL, "out of memory");
		return;
	}
	conn_reply_text(c, text, (size_t)len, -1);
	free(text);
}
