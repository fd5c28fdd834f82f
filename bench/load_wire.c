/*
 * Raw protocol I/O of bench/load, shared by the parent and the clients:
 * payloads built around a pre-printed body, frames over wire_conn, replies
 * parsed with their descriptors, and connections with hello.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "load.h"
#include "msg.h"
#include "wire.h"

const char *load_err_code(const cJSON *r)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
	const cJSON *code = cJSON_GetObjectItemCaseSensitive(e, "code");

	return cJSON_IsString(code) ? code->valuestring : NULL;
}

const char *load_err_message(const cJSON *r)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");

	return cJSON_IsString(m) ? m->valuestring : "";
}

bool load_reply_ok(const cJSON *r)
{
	return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok"));
}

int64_t load_reply_id(const cJSON *r)
{
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(r, "id");

	return cJSON_IsNumber(id) ? (int64_t)id->valuedouble : -1;
}

char *load_payload(const char *op, uint64_t id, bool probe, const char *body,
		   size_t body_len, size_t *len)
{
	char head[96];
	int n = snprintf(head, sizeof(head), "{\"op\":\"%s\",\"id\":%llu%s%s", op,
			 (unsigned long long)id, probe ? ",\"build\":false" : "",
			 body_len > 1 ? "," : "");
	char *p;

	if (n < 0 || (size_t)n >= sizeof(head))
		return NULL;
	p = malloc((size_t)n + body_len + 1);
	if (!p)
		return NULL;
	memcpy(p, head, (size_t)n);
	memcpy(p + n, body, body_len);
	p[(size_t)n + body_len] = '\0';
	*len = (size_t)n + body_len;
	return p;
}

int load_send_body(struct wire_conn *c, const char *op, uint64_t id, bool probe,
		   const char *body, size_t body_len)
{
	size_t len;
	char *p = load_payload(op, id, probe, body, body_len, &len);
	int rc;

	if (!p)
		return -ENOMEM;
	rc = wire_send_frame(c, p, len);
	free(p);
	return rc;
}

int load_recv(struct wire_conn *c, cJSON **out, int *fd)
{
	char *payload;
	size_t len;
	int rc;

	*out = NULL;
	*fd = -1;
	rc = wire_recv_frame(c, &payload, &len);
	if (rc < 0)
		return rc;
	*out = cJSON_ParseWithLength(payload, len);
	free(payload);
	if (!cJSON_IsObject(*out)) {
		cJSON_Delete(*out);
		*out = NULL;
		return -EBADMSG;
	}
	/* Descriptors go to the replies that say "fd": true, in order. */
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(*out, "fd")))
		*fd = wire_take_fd(c);
	return 0;
}

static void set_timeouts(int fd, double timeout_s)
{
	struct timeval tv = { .tv_sec = (time_t)timeout_s,
			      .tv_usec = (suseconds_t)((timeout_s - (double)(time_t)timeout_s) * 1e6) };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* Connects without hello; the wire_conn owns the socket on success. */
int load_raw_connect(struct wire_conn *c, const char *socket, double timeout_s)
{
	int fd = wire_connect(socket);

	if (fd < 0)
		return fd;
	set_timeouts(fd, timeout_s);
	wire_conn_init(c, fd, FRAME_MAX_DEFAULT);
	return 0;
}

int load_connect(struct wire_conn *c, const char *socket, double timeout_s, const char **why)
{
	char hello[128];
	cJSON *r = NULL;
	int n, fd, rc;

	rc = load_raw_connect(c, socket, timeout_s);
	if (rc < 0) {
		*why = "connect";
		return rc;
	}
	n = snprintf(hello, sizeof(hello),
		     "{\"op\":\"hello\",\"id\":1,\"proto\":%d,\"client\":\"kiln-load\"}",
		     KILN_PROTO_VERSION);
	rc = wire_send_frame(c, hello, (size_t)n);
	if (rc == 0)
		rc = load_recv(c, &r, &fd);
	if (rc == 0 && !load_reply_ok(r)) {
		const char *code = load_err_code(r);

		rc = code && strcmp(code, "busy") == 0 ? -EBUSY : -EPROTO;
	}
	cJSON_Delete(r);
	if (rc < 0) {
		*why = "hello";
		wire_conn_fini(c);
	}
	return rc;
}
