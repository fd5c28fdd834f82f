/*
 * The packer of protocol requests (msg.h), which libkiln and the CLI use to
 * write what msg_parse.c parses on the daemon's side. The JSON is written
 * directly, not through cJSON: a fresh process's first get would otherwise
 * page in and bind cJSON's builder and printer and make a node per member
 * (docs/performance.md). The text is what cJSON_PrintUnformatted printed:
 * the same members in the same order, strings escaped alike.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include "util.h"

/* A growing text; every write is a no-op once memory ran out. */
struct out {
	char *buf;
	size_t len, cap;
	bool oom;
};

static void put(struct out *o, const char *s, size_t n)
{
	if (o->oom)
		return;
	if (o->cap - o->len <= n) {
		size_t cap = o->cap ? o->cap : 256;
		while (cap - o->len <= n)
			cap *= 2;
		char *b = realloc(o->buf, cap);
		if (b == NULL) {
			o->oom = true;
			return;
		}
		o->buf = b;
		o->cap = cap;
	}
	memcpy(o->buf + o->len, s, n);
	o->len += n;
	o->buf[o->len] = '\0';
}

static void put_cb(void *ctx, const char *s, size_t n)
{
	put(ctx, s, n);
}

/* The JSON string of the n bytes at s, up to a NUL (as cJSON cut it). */
static void put_string(struct out *o, const char *s, size_t n)
{
	util_json_string(s, n, put_cb, o);
}

/* ,"name": (no comma after an opening brace or bracket). */
static void put_key(struct out *o, const char *name)
{
	if (o->len > 0 && o->buf[o->len - 1] != '{' && o->buf[o->len - 1] != '[')
		put(o, ",", 1);
	put_string(o, name, strlen(name));
	put(o, ":", 1);
}

static void add_str(struct out *o, const char *name, const char *s)
{
	if (s != NULL) {
		put_key(o, name);
		put_string(o, s, strlen(s));
	}
}

static void add_int(struct out *o, const char *name, int64_t v)
{
	char num[24];
	util_i64_text(v, num);
	put_key(o, name);
	put(o, num, strlen(num));
}

/* Negative numbers are "not given", left out. */
static void add_num(struct out *o, const char *name, int64_t v)
{
	if (v >= 0)
		add_int(o, name, v);
}

static void add_bool(struct out *o, const char *name, bool v)
{
	put_key(o, name);
	put(o, v ? "true" : "false", v ? 4 : 5);
}

/* False on a NULL element (the request is refused, as cJSON refused it). */
static bool add_strings(struct out *o, const char *name, char *const *v, size_t n)
{
	put_key(o, name);
	put(o, "[", 1);
	for (size_t i = 0; i < n; i++) {
		if (v[i] == NULL)
			return false;
		if (i > 0)
			put(o, ",", 1);
		put_string(o, v[i], strlen(v[i]));
	}
	put(o, "]", 1);
	return true;
}

static void add_hex(struct out *o, const char *name, const uint8_t digest[32])
{
	char hex[65];
	util_hex(digest, 32, hex);
	add_str(o, name, hex);
}

static void pack_sources(struct out *o, const struct msg_request *req)
{
	put_key(o, "sources");
	put(o, "[", 1);
	for (size_t i = 0; i < req->nsources; i++) {
		const struct msg_source *src = &req->sources[i];
		put(o, i > 0 ? ",{" : "{", i > 0 ? 2 : 1);
		add_str(o, "name", src->name);
		add_str(o, "path", src->path);
		if (src->has_digest) {
			add_hex(o, "sha256", src->digest);
		} else if (src->text != NULL) {
			/* text need not be NUL-terminated at len. */
			put_key(o, "text");
			put_string(o, src->text, src->len);
		}
		put(o, "}", 1);
	}
	put(o, "]", 1);
}

/* put: the artifact's key, digest, size and dependencies. */
static bool pack_artifact(struct out *o, const struct msg_request *req)
{
	add_str(o, "key", req->key);
	add_hex(o, "sha256", req->art_digest);
	add_num(o, "size", req->art_size);
	add_num(o, "build_ms", req->build_ms);
	add_str(o, "log", req->log);
	put_key(o, "deps");
	put(o, "[", 1);
	for (size_t i = 0; i < req->ndeps; i++) {
		const struct msg_dep *dep = &req->deps[i];
		const struct dep_kind_info *k = dep_kind_info(dep->kind);
		if (k == NULL)
			return false;
		put(o, i > 0 ? ",{" : "{", i > 0 ? 2 : 1);
		add_str(o, "path", dep->path);
		add_str(o, "kind", k->name);
		if (k->has_digest)
			add_hex(o, "sha256", dep->digest);
		if (k->has_mode)
			add_int(o, "mode", dep->mode);
		if (k->named)
			add_bool(o, k->flag, dep->mode != 0);
		put(o, "}", 1);
	}
	put(o, "]", 1);
	return true;
}

static bool pack_hello(struct out *o, const struct msg_request *req)
{
	if (req->heartbeat)
		add_bool(o, "heartbeat", true);
	if (req->job_nodes > 0)
		add_num(o, "job_nodes", req->job_nodes);
	add_num(o, "proto", req->proto);
	add_str(o, "client", req->client);
	return true;
}

static bool pack_get(struct out *o, const struct msg_request *req)
{
	if (req->no_build)
		add_bool(o, "build", false);
	add_str(o, "toolchain", req->toolchain);
	add_str(o, "host_compiler", req->host_compiler);
	add_str(o, "output", req->output);
	if (req->nargs && !add_strings(o, "args", req->args, req->nargs))
		return false;
	if (req->npch && !add_strings(o, "pch", req->pch, req->npch))
		return false;
	pack_sources(o, req);
	add_str(o, "alias", req->alias);
	add_str(o, "alias_data", req->alias_data);
	add_str(o, "label", req->label);
	return true;
}

/* put names its program as a get does. */
static bool pack_put(struct out *o, const struct msg_request *req)
{
	return pack_artifact(o, req) && pack_get(o, req);
}

static bool pack_lookup(struct out *o, const struct msg_request *req)
{
	add_str(o, "alias", req->alias);
	add_str(o, "key", req->key);
	add_str(o, "toolchain", req->toolchain);
	add_str(o, "host_compiler", req->host_compiler);
	if (req->claim) {
		add_bool(o, "claim", true);
		add_num(o, "wait_ms", (int64_t)req->wait_ms);
	}
	return true;
}

static bool pack_release(struct out *o, const struct msg_request *req)
{
	add_str(o, "alias", req->alias);
	return true;
}

/* show, remove, pin, unpin */
static bool pack_ref(struct out *o, const struct msg_request *req)
{
	add_str(o, "ref", req->ref);
	return true;
}

static bool pack_gc(struct out *o, const struct msg_request *req)
{
	if (req->stale)
		add_bool(o, "stale", true);
	else
		add_num(o, "max_size", req->max_size);
	return true;
}

static bool pack_config(struct out *o, const struct msg_request *req)
{
	add_num(o, "max_size", req->max_size);
	return true;
}

/* export, import */
static bool pack_dir(struct out *o, const struct msg_request *req)
{
	add_str(o, "dir", req->dir);
	return true;
}

/* An op without fields of its own. */
static bool pack_none(struct out *o, const struct msg_request *req)
{
	(void)o, (void)req;
	return true;
}

/* Each op's packer, from its row in ops.def. */
typedef bool pack_fn(struct out *o, const struct msg_request *req);
static pack_fn *const packers[OP__COUNT] = {
#define KILN_OP(id, name, parse, pack, run, family, flags) [OP_##id] = pack,
#include "ops.def"
};

char *msg_request_pack(const struct msg_request *req, size_t *len)
{
	const char *op = msg_op_name(req->op);
	struct out o = { 0 };
	if (op == NULL)
		return NULL;
	put(&o, "{", 1);
	add_str(&o, "op", op);
	add_int(&o, "id", (int64_t)req->id);
	bool ok = packers[req->op](&o, req);
	put(&o, "}", 1);
	if (!ok || o.oom) {
		free(o.buf);
		return NULL;
	}
	if (len != NULL)
		*len = o.len;
	return o.buf;
}
