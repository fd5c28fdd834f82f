/* The artifact reply (msg_artifact.h). */
#include <stdio.h>
#include <string.h>

#include "msg_artifact.h"
#include "util.h"
#include "validate.h"

const char *const msg_artifact_members[] = {
	"id", "ok", "fd", "key", "rkey", "path", "output", "size", "cached", "joined",
	"build_ms", "dev", "ino", "uncacheable", "log", "alias_data", NULL,
};

/* A writer that counts what it would write past the end. */
struct out {
	char *buf;
	size_t cap, len;
};

static void put(struct out *o, const char *s, size_t n)
{
	if (o->len < o->cap) {
		size_t room = o->cap - o->len;
		memcpy(o->buf + o->len, s, n < room ? n : room);
	}
	o->len += n;
}

static void put_text(struct out *o, const char *s)
{
	put(o, s, strlen(s));
}

static void put_u64(struct out *o, uint64_t v)
{
	char num[24];
	put(o, num, util_u64_text(v, num));
}

static void put_cb(void *ctx, const char *s, size_t n)
{
	put(ctx, s, n);
}

/* s as a JSON string. */
static void put_str(struct out *o, const char *s)
{
	util_json_string(s, strlen(s), put_cb, o);
}

static void member(struct out *o, const char *name)
{
	put(o, ",\"", 2);
	put_text(o, name);
	put(o, "\":", 2);
}

size_t msg_artifact_print(const struct msg_artifact *a, char *buf, size_t cap)
{
	struct out o = { .buf = buf, .cap = cap };
	put_text(&o, "{\"id\":");
	put_u64(&o, a->id);
	put_text(&o, ",\"ok\":true");
	member(&o, "fd");
	put_text(&o, a->fd ? "true" : "false");
	member(&o, "key");
	put_str(&o, a->key != NULL ? a->key : "");
	if (a->rkey != NULL) {
		member(&o, "rkey");
		put_str(&o, a->rkey);
	}
	member(&o, "path");
	put_str(&o, a->path != NULL ? a->path : "");
	member(&o, "output");
	put_str(&o, a->output != NULL ? a->output : "shared");
	member(&o, "size");
	put_u64(&o, a->size);
	member(&o, "cached");
	put_text(&o, a->cached ? "true" : "false");
	member(&o, "joined");
	put_text(&o, a->joined ? "true" : "false");
	member(&o, "build_ms");
	put_u64(&o, a->build_ms);
	/* Only what JSON carries exactly (below 2^53), else unsaid. */
	if (a->file.ino != 0 && a->file.ino >> 53 == 0 && a->file.dev >> 53 == 0) {
		member(&o, "dev");
		put_u64(&o, a->file.dev);
		member(&o, "ino");
		put_u64(&o, a->file.ino);
	}
	if (a->uncacheable != NULL) {
		member(&o, "uncacheable");
		put_str(&o, a->uncacheable);
	}
	if (a->log != NULL) {
		member(&o, "log");
		put_str(&o, a->log);
	}
	if (a->alias_data != NULL) {
		member(&o, "alias_data");
		put_str(&o, a->alias_data);
	}
	put(&o, "}", 1);
	if (o.len < cap)
		buf[o.len] = '\0';
	else if (cap > 0)
		buf[cap - 1] = '\0';
	return o.len;
}

static const cJSON *get(const cJSON *r, const char *name)
{
	return cJSON_GetObjectItemCaseSensitive(r, name);
}

/* An optional string member: NULL when absent; false when of another type. */
static bool opt_str(const cJSON *r, const char *name, const char **out)
{
	const cJSON *v = get(r, name);
	*out = cJSON_IsString(v) ? v->valuestring : NULL;
	return v == NULL || cJSON_IsNull(v) || cJSON_IsString(v);
}

/* Counts JSON carries exactly: 0 ... 2^53 (a double beyond 2^64 would not
 * even convert). */
#define EXACT_MAX 9007199254740992.0

static bool opt_u64(const cJSON *r, const char *name, uint64_t *out)
{
	const cJSON *v = get(r, name);
	bool ok = v == NULL || (cJSON_IsNumber(v) && v->valuedouble >= 0 &&
				v->valuedouble <= EXACT_MAX);
	*out = ok && v != NULL ? (uint64_t)v->valuedouble : 0;
	return ok;
}

/* A device or inode number: an integer below 2^53 (what kilnd sends), or
 * absent; a fraction or a value JSON may have rounded is refused. */
static bool opt_file_num(const cJSON *r, const char *name, uint64_t *out)
{
	const cJSON *v = get(r, name);
	bool ok = v == NULL || (cJSON_IsNumber(v) && v->valuedouble >= 0 &&
				v->valuedouble < EXACT_MAX &&
				v->valuedouble == (double)(uint64_t)v->valuedouble);
	*out = ok && v != NULL ? (uint64_t)v->valuedouble : 0;
	return ok;
}

static bool opt_bool(const cJSON *r, const char *name, bool *out)
{
	const cJSON *v = get(r, name);
	*out = cJSON_IsTrue(v);
	return v == NULL || cJSON_IsBool(v);
}

int msg_artifact_parse(const cJSON *reply, struct msg_artifact *a, const char **why)
{
	memset(a, 0, sizeof(*a));
	if (!opt_u64(reply, "id", &a->id)) {
		*why = "kilnd sent a reply with a malformed id";
		return -1;
	}
	if (!opt_str(reply, "key", &a->key) || a->key == NULL || validate_key(a->key) < 0) {
		*why = "kilnd sent a reply without a valid key";
		return -1;
	}
	if (!opt_str(reply, "rkey", &a->rkey) || (a->rkey != NULL && validate_key(a->rkey) < 0)) {
		*why = "kilnd sent a reply with a malformed rkey";
		return -1;
	}
	if (!opt_str(reply, "path", &a->path) || a->path == NULL || a->path[0] != '/') {
		*why = "kilnd sent a reply without an absolute path";
		return -1;
	}
	if (!opt_str(reply, "output", &a->output) || !opt_str(reply, "uncacheable", &a->uncacheable) ||
	    !opt_str(reply, "log", &a->log) || !opt_str(reply, "alias_data", &a->alias_data) ||
	    !opt_u64(reply, "size", &a->size) ||
	    !opt_u64(reply, "build_ms", &a->build_ms) || !opt_bool(reply, "fd", &a->fd) ||
	    !opt_bool(reply, "cached", &a->cached) || !opt_bool(reply, "joined", &a->joined)) {
		*why = "kilnd sent a reply with a member of the wrong type";
		return -1;
	}
	/* Both or neither, and JSON's exact integers: a device number past
	 * 2^53 is left unsaid by kilnd (the client then asks fstat). */
	if (!opt_file_num(reply, "dev", &a->file.dev) || !opt_file_num(reply, "ino", &a->file.ino) ||
	    (get(reply, "dev") == NULL) != (get(reply, "ino") == NULL)) {
		*why = "kilnd sent a reply with a malformed dev or ino";
		return -1;
	}
	if (a->output == NULL)
		a->output = "shared";
	return 0;
}
