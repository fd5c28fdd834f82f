/*
 * The private interface for kiln's own libraries (kiln_x.h): request
 * skeletons, probes that build nothing, and moving artifacts between daemons
 * (export on the node that has an artifact, put on the node that needs it).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "depkind.h"
#include "kiln_x.h"
#include "lib_internal.h"
#include "msg_artifact.h"
#include "sha256.h"
#include "table.h"
#include "validate.h"
#include "wire.h"

int kiln_x_fail(int code, const char *fmt, ...)
{
	char buf[8192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return lib_err_set(code, "%s", buf);
}

char *kiln_x_skeleton(const struct kiln_request *req)
{
	struct msg_request m;
	char *s = NULL;

	if (lib_request_build(req, &m) == 0) {
		m.alias = NULL;
		m.label = NULL;
		s = msg_request_pack(&m, NULL);
		if (!s)
			lib_err_set(KILN_ENOMEM, "out of memory packing a request");
	}
	free(m.sources);
	return s;
}

/* Parses a skeleton into m (owned: msg_request_free). */
static int skeleton_parse(const char *skel, struct msg_request *m)
{
	struct msg_error err;

	if (msg_request_parse(skel, strlen(skel), m, &err) != 0)
		return lib_err_set(KILN_EINVAL, "invalid request skeleton: %s", err.message);
	if (m->op != OP_GET) {
		msg_request_free(m);
		return lib_err_set(KILN_EINVAL, "a request skeleton must be a get");
	}
	return 0;
}

struct probe {
	char (*keys)[65];
	char (*rkeys)[65];
	int *status;
};

static void probe_reply(void *arg, size_t i, int rc, cJSON *reply, int fd)
{
	struct probe *p = arg;
	struct msg_artifact a;
	const char *why;
	/* A miss's error reply carries the request key too. */
	const char *rkey = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(reply, "rkey"));

	if (fd >= 0)
		close(fd);
	if (rc == 0 && msg_artifact_parse(reply, &a, &why) != 0)
		rc = lib_err_set(KILN_EPROTO, "kilnd answered a probe: %s", why);
	/* The request key, from a hit and from a miss (a kilnd before it
	 * sends none: ""). */
	p->rkeys[i][0] = '\0';
	if (rkey != NULL && validate_key(rkey) == 0)
		memcpy(p->rkeys[i], rkey, 65);
	if (rc == 0)
		memcpy(p->keys[i], a.key, 65);
	p->status[i] = rc;
	cJSON_Delete(reply);
}

int kiln_x_probe_many(struct kiln *k, const char *const *skels, size_t n, char (*keys)[65],
		      char (*rkeys)[65], int *status)
{
	struct msg_request *msgs = calloc(n ? n : 1, sizeof(*msgs));
	struct msg_request **batch = calloc(n ? n : 1, sizeof(*batch));
	struct probe p = { .keys = keys, .rkeys = rkeys, .status = status };
	size_t i, nb = 0;
	size_t *index = calloc(n ? n : 1, sizeof(*index));
	int rc = 0;

	if (!k) {
		rc = lib_err_set(KILN_EINVAL, "kiln_x_probe_many: k is NULL");
		goto out;
	}
	if (!msgs || !batch || !index) {
		rc = lib_err_set(KILN_ENOMEM, "out of memory for %zu probes", n);
		goto out;
	}
	for (i = 0; i < n; i++) {
		status[i] = skeleton_parse(skels[i], &msgs[i]);
		if (status[i] != 0)
			continue;
		msgs[i].no_build = true;
		index[nb] = i;
		batch[nb++] = &msgs[i];
	}
	/* The replies come by batch position: map them back through keys and
	 * status arrays of the batch's own order. */
	{
		char (*bkeys)[65] = calloc(nb ? nb : 1, sizeof(*bkeys));
		char (*brkeys)[65] = calloc(nb ? nb : 1, sizeof(*brkeys));
		int *bstatus = calloc(nb ? nb : 1, sizeof(*bstatus));
		struct probe bp = { .keys = bkeys, .rkeys = brkeys, .status = bstatus };

		if (!bkeys || !brkeys || !bstatus) {
			rc = lib_err_set(KILN_ENOMEM, "out of memory for %zu probes", n);
		} else if (nb > 0) {
			rc = lib_conn_call_many(k, batch, nb, probe_reply, &bp);
			for (i = 0; rc == 0 && i < nb; i++) {
				p.status[index[i]] = bstatus[i];
				memcpy(p.keys[index[i]], bkeys[i], 65);
				if (p.rkeys != NULL)
					memcpy(p.rkeys[index[i]], brkeys[i], 65);
			}
		}
		free(brkeys);
		free(bkeys);
		free(bstatus);
	}
out:
	for (i = 0; msgs && i < n; i++)
		msg_request_free(&msgs[i]);
	free(msgs);
	free(batch);
	free(index);
	return rc;
}

static void alias_reply(void *arg, size_t i, int rc, cJSON *reply, int fd)
{
	int *status = arg;

	if (fd >= 0)
		close(fd);
	cJSON_Delete(reply);
	status[i] = rc;
}

int kiln_x_alias_many(struct kiln *k, const struct kiln_request *reqs, size_t n)
{
	struct msg_request *msgs = calloc(n + 1, sizeof(*msgs));
	struct msg_request **batch = calloc(n + 1, sizeof(*batch));
	int *status = calloc(n + 1, sizeof(*status));
	size_t nb = 0, i;
	int rc = 0;

	if (!k || !msgs || !batch || !status) {
		rc = lib_err_set(k ? KILN_ENOMEM : KILN_EINVAL, "kiln_x_alias_many: %s",
				 k ? "out of memory" : "k is NULL");
		goto out;
	}
	const struct kiln_request *prev = NULL;
	for (i = 0; i < n; i++) {
		if (!reqs[i].alias || lib_request_check(&reqs[i], &msgs[i], prev) != 0)
			continue;
		prev = &reqs[i];
		msgs[i].no_build = true;
		batch[nb++] = &msgs[i];
	}
	lib_request_digests(batch, nb);
	if (nb > 0)
		rc = lib_conn_call_many(k, batch, nb, alias_reply, status);
	for (i = 0; rc == 0 && i < nb; i++)
		if (status[i] != 0)
			rc = status[i];
out:
	for (i = 0; msgs && i < n; i++)
		free(msgs[i].sources);
	free(msgs);
	free(batch);
	free(status);
	return rc;
}

static const cJSON *x_member(const cJSON *obj, const char *name)
{
	return cJSON_GetObjectItemCaseSensitive(obj, name);
}

int kiln_x_export(struct kiln *k, const char *key, const void *data, size_t size, char **meta)
{
	struct msg_request m = { .op = OP_SHOW, .proto = -1, .max_size = -1 };
	cJSON *reply = NULL, *out = NULL, *deps;
	const cJSON *e, *paths, *digests, *kinds, *modes, *v;
	uint8_t digest[32];
	char hex[65], *log = NULL;
	size_t loglen;
	int fd = -1, rc, i, nd;

	*meta = NULL;
	if (!k || !key || (size && !data))
		return lib_err_set(KILN_EINVAL, "kiln_x_export: k, key and data must not be NULL");
	sha256_buf(data, size, digest);
	m.ref = (char *)key;
	rc = lib_conn_call(k, &m, &reply, &fd);
	if (rc < 0)
		return rc;
	if (fd >= 0)
		close(fd);
	e = x_member(reply, "entry");
	paths = x_member(e, "deps");
	digests = x_member(e, "dep_sha256");
	kinds = x_member(e, "dep_kinds");
	modes = x_member(e, "dep_modes");
	nd = cJSON_GetArraySize(paths);
	if (!cJSON_IsArray(paths) || !cJSON_IsArray(digests) || cJSON_GetArraySize(digests) != nd) {
		cJSON_Delete(reply);
		return lib_err_set(KILN_EPROTO, "kilnd's entry %.16s lacks its dependencies' digests",
				   key);
	}
	out = cJSON_CreateObject();
	util_hex(digest, 32, hex);
	cJSON_AddStringToObject(out, "key", key);
	cJSON_AddStringToObject(out, "sha256", hex);
	msg_add_int(out, "size", (int64_t)size);
	v = x_member(e, "build_ms");
	if (cJSON_IsNumber(v))
		msg_add_int(out, "build_ms", (int64_t)v->valuedouble);
	v = x_member(e, "label");
	if (cJSON_IsString(v))
		cJSON_AddStringToObject(out, "label", v->valuestring);
	/* The compiler's warnings travel too, for `kiln log` on every node. */
	v = x_member(e, "log");
	if (cJSON_IsString(v) && util_read_file(v->valuestring, MSG_MAX_LOG, &log, &loglen) == 0 &&
	    strlen(log) == loglen)
		cJSON_AddStringToObject(out, "log", log);
	free(log);
	deps = cJSON_AddArrayToObject(out, "deps");
	for (i = 0; deps && i < nd; i++) {
		cJSON *d = cJSON_CreateObject();

		cJSON_AddItemToArray(deps, d);
		cJSON_AddStringToObject(d, "path", cJSON_GetStringValue(cJSON_GetArrayItem(paths, i)));
		const char *kind = cJSON_GetStringValue(cJSON_GetArrayItem(kinds, i));
		const cJSON *mode = cJSON_GetArrayItem(modes, i);
		/* Entries recorded before kinds were are files. */
		const struct dep_kind_info *ki = dep_kind_info(kind != NULL ? dep_kind_parse(kind)
									    : DEP_FILE);
		if (kind != NULL)
			cJSON_AddStringToObject(d, "kind", kind);
		if (ki != NULL && ki->has_digest)
			cJSON_AddStringToObject(d, "sha256",
						cJSON_GetStringValue(cJSON_GetArrayItem(digests, i)));
		if (ki == &dep_kinds[DEP_EXISTS] && cJSON_IsNumber(mode))
			cJSON_AddNumberToObject(d, "mode", mode->valuedouble);
		if (ki != NULL && ki->named)
			cJSON_AddBoolToObject(d, ki->flag, cJSON_IsNumber(mode) && mode->valuedouble != 0);
	}
	*meta = cJSON_PrintUnformatted(out);
	cJSON_Delete(out);
	cJSON_Delete(reply);
	return *meta ? 0 : lib_err_set(KILN_ENOMEM, "out of memory");
}

/* Merges skeleton and meta into one put request's JSON (malloc'd). */
static char *put_json(const char *skel, const char *meta, uint64_t id)
{
	cJSON *s = cJSON_Parse(skel), *m = cJSON_Parse(meta), *v;
	char *out = NULL;

	if (!cJSON_IsObject(s) || !cJSON_IsObject(m))
		goto done;
	cJSON_ReplaceItemInObjectCaseSensitive(s, "op", cJSON_CreateString("put"));
	cJSON_DeleteItemFromObjectCaseSensitive(s, "id");
	msg_add_int(s, "id", (int64_t)id);
	while ((v = m->child) != NULL) {
		cJSON_DetachItemViaPointer(m, v);
		if (!v->string || cJSON_GetObjectItemCaseSensitive(s, v->string)) {
			cJSON_Delete(v);
			continue;
		}
		cJSON_AddItemToObject(s, v->string, v);
	}
	out = cJSON_PrintUnformatted(s);
done:
	cJSON_Delete(s);
	cJSON_Delete(m);
	return out;
}

/* The hello and put frames of a put (encoded), checked by the daemon's own
 * rules first, so that a bad meta costs no connection. */
static int put_frames(const char *skeleton, const char *meta, char *enc[2], size_t elens[2])
{
	struct msg_request hello = {
		.op = OP_HELLO, .id = 1, .proto = KILN_PROTO_VERSION,
		.client = (char *)"libkiln-put/" KILN_VERSION, .max_size = -1,
		/* A put waits for kilnd's checks (its own toolchain run against
		 * the artifact's inputs), which a loaded node can make long:
		 * heartbeats tell that from a kilnd that stopped. */
		.heartbeat = true,
	};
	struct msg_request check;
	struct msg_error err;
	char *frames[2];
	size_t lens[2];
	int rc = 0;

	frames[0] = msg_request_pack(&hello, &lens[0]);
	frames[1] = put_json(skeleton, meta, 2);
	if (!frames[0] || !frames[1]) {
		rc = lib_err_set(KILN_EINVAL, "cannot make a put request of this skeleton and meta");
	} else {
		lens[1] = strlen(frames[1]);
		if (msg_request_parse(frames[1], lens[1], &check, &err) != 0)
			rc = lib_err_set(KILN_EINVAL, "invalid put: %s", err.message);
		else
			msg_request_free(&check);
	}
	for (int i = 0; i < 2; i++) {
		enc[i] = rc == 0 ? frame_encode(frames[i], lens[i], &elens[i]) : NULL;
		free(frames[i]);
	}
	if (rc == 0 && (!enc[0] || !enc[1]))
		rc = lib_err_set(KILN_ENOMEM, "out of memory");
	return rc;
}

/* Sends both frames, the artifact's descriptor with the first byte (the
 * daemon keeps it for the put that follows hello). 0 or a negative errno. */
static int send_with_fd(int sock, char *enc[2], const size_t elens[2], int fd)
{
	size_t done = 0, total = elens[0] + elens[1];
	struct iovec iov[2];

	while (done < total) {
		size_t skip = done, k0 = 0;

		for (int i = 0; i < 2; i++) {
			if (skip >= elens[i]) {
				skip -= elens[i];
				continue;
			}
			iov[k0].iov_base = enc[i] + skip;
			iov[k0++].iov_len = elens[i] - skip;
			skip = 0;
		}
		long n = wire_sendmsgv(sock, iov, k0, &fd, done == 0 ? 1 : 0);
		if (n == -EINTR || n == -EAGAIN)
			continue;
		if (n < 0)
			return (int)n;
		done += (size_t)n;
	}
	return 0;
}

/* The replies to hello and put: 0 when both are ok, else the error. Each
 * reply may come after heartbeats ({"heartbeat": true}, no id), which say
 * kilnd still works on it; KILN_TIMEOUT is the silence allowed between
 * frames. */
static int put_replies(struct wire_conn *w)
{
	char *reply = NULL;
	size_t rlen;
	cJSON *r = NULL;
	int rc = 0;

	for (int i = 0; rc == 0 && i < 2; i++) {
		free(reply);
		reply = NULL;
		cJSON_Delete(r);
		r = NULL;
		rc = wire_recv_frame(w, &reply, &rlen);
		if (rc >= 0 && (r = cJSON_ParseWithLength(reply, rlen)) != NULL &&
		    cJSON_IsTrue(x_member(r, "heartbeat")) && x_member(r, "id") == NULL) {
			i--;   /* not a reply: read on */
			continue;
		}
		if (rc == -ETIMEDOUT) {
			rc = lib_err_set(KILN_EIO, "kilnd answered no put for %.0f s: it is stopped, "
					 "wedged or gone (KILN_TIMEOUT)", w->recv_timeout_ms / 1000.0);
			break;
		}
		if (rc < 0) {
			rc = lib_err_set(KILN_EIO, "kilnd closed the connection during put: %s",
					 strerror(-rc));
			break;
		}
		if (!cJSON_IsTrue(x_member(r, "ok")))
			rc = r ? lib_err_from_reply(r) : lib_err_set(KILN_EPROTO, "kilnd's reply is not JSON");
	}
	cJSON_Delete(r);
	free(reply);
	return rc;
}

int kiln_x_put(struct kiln *k, const char *skeleton, const char *meta, int fd)
{
	char *enc[2] = { NULL, NULL };
	size_t elens[2] = { 0, 0 };
	struct wire_conn w;

	if (!k || !skeleton || !meta)
		return lib_err_set(KILN_EINVAL, "kiln_x_put: k, skeleton and meta must not be NULL");
	int rc = put_frames(skeleton, meta, enc, elens);
	int sock = rc == 0 ? wire_connect(k->socket_path) : -1;
	if (rc == 0 && sock < 0)
		rc = lib_err_set(KILN_ECONNECT, "cannot connect to kilnd at %s: %s", k->socket_path,
				 strerror(-sock));
	if (rc == 0) {
		wire_conn_init(&w, sock, FRAME_MAX_DEFAULT);
		/* Heartbeats come every 5 s while kilnd works on the put: a
		 * silence of KILN_TIMEOUT is a stopped kilnd. */
		w.recv_timeout_ms = atomic_load(&k->timeout_ms);
		int ms = w.recv_timeout_ms;
		struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
		if (ms > 0)
			setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		rc = send_with_fd(sock, enc, elens, fd);
		if (rc < 0)
			rc = lib_err_set(KILN_EIO, "cannot send the put request: %s", strerror(-rc));
		else
			rc = put_replies(&w);
		wire_conn_fini(&w);
	}
	free(enc[0]);
	free(enc[1]);
	return rc;
}

int kiln_x_lookup_key(struct kiln *k, const char *key, const char *alias,
		      struct kiln_program **out)
{
	struct msg_request m = { .op = OP_LOOKUP, .proto = -1, .max_size = -1 };
	struct kiln_program *p;
	cJSON *reply = NULL;
	int fd = -1, rc;

	*out = NULL;
	if (!k)
		return lib_err_set(KILN_EINVAL, "kiln_x_lookup_key: k is NULL");
	if (!key || validate_key(key) < 0)
		return lib_err_set(KILN_EINVAL, "not a key: %s", key ? key : "(null)");
	pthread_mutex_lock(&k->load_lock);
	p = table_get(k->by_key, key);
	if (p && alias)
		(void)alias_map_put(&k->by_alias, alias, p);
	pthread_mutex_unlock(&k->load_lock);
	if (p) {
		atomic_fetch_add_explicit(&k->local_hits, 1, memory_order_relaxed);
		*out = p;
		return 0;
	}
	m.key = (char *)key;
	rc = lib_conn_call(k, &m, &reply, &fd);
	if (rc < 0)
		return rc;
	rc = lib_prog_from_reply(k, reply, fd, alias, true, out);
	cJSON_Delete(reply);
	return rc;
}
