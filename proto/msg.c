/*
 * Protocol messages: names of operations and error codes, error replies,
 * and a request's life (reset, free). The parser that validates every field
 * of a request is msg_parse.c; the packer that libkiln and the CLI use to
 * write requests is msg_pack.c.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include "util.h"

static const char *const op_names[OP__COUNT] = {
#define KILN_OP(id, name, parse, pack, run, family, flags) [OP_##id] = name,
#include "ops.def"
};

static const char *const err_names[ERR__COUNT] = {
	[ERR_NONE] = "none",
	[ERR_BAD_FRAME] = "bad_frame",
	[ERR_BAD_JSON] = "bad_json",
	[ERR_BAD_REQUEST] = "bad_request",
	[ERR_UNKNOWN_OP] = "unknown_op",
	[ERR_PROTO_MISMATCH] = "proto_mismatch",
	[ERR_NOT_FOUND] = "not_found",
	[ERR_AMBIGUOUS] = "ambiguous",
	[ERR_BAD_TOOLCHAIN] = "bad_toolchain",
	[ERR_BAD_NAME] = "bad_name",
	[ERR_BAD_ARG] = "bad_arg",
	[ERR_TOO_LARGE] = "too_large",
	[ERR_BUILD_FAILED] = "build_failed",
	[ERR_BUILD_TIMEOUT] = "build_timeout",
	[ERR_IO] = "io",
	[ERR_BUSY] = "busy",
	[ERR_SHUTTING_DOWN] = "shutting_down",
	[ERR_DENIED] = "denied",
	[ERR_INTERNAL] = "internal",
	[ERR_NEED_SOURCES] = "need_sources",
	[ERR_MISMATCH] = "mismatch",
	[ERR_INPUTS_CHANGED] = "inputs_changed",
	[ERR_CLAIMED] = "claimed",
};

const char *msg_op_name(enum msg_op op)
{
	if (op < 0 || op >= OP__COUNT)
		return NULL;
	return op_names[op];
}

enum msg_op msg_op_parse(const char *name)
{
	int i;

	if (!name)
		return OP_UNKNOWN;
	for (i = 0; i < OP__COUNT; i++) {
		if (strcmp(name, op_names[i]) == 0)
			return (enum msg_op)i;
	}
	return OP_UNKNOWN;
}

const char *msg_err_name(enum msg_err err)
{
	if (err < 0 || err >= ERR__COUNT)
		return err_names[ERR_INTERNAL];
	return err_names[err];
}

enum msg_err msg_err_parse(const char *code)
{
	int i;

	/* "none" is not a code a peer may send, so it is not recognised. */
	if (!code)
		return ERR_INTERNAL;
	for (i = ERR_NONE + 1; i < ERR__COUNT; i++) {
		if (strcmp(code, err_names[i]) == 0)
			return (enum msg_err)i;
	}
	return ERR_INTERNAL;
}

int msg_error_set(struct msg_error *err, enum msg_err code, const char *field,
		  const char *fmt, ...)
{
	va_list ap;

	err->code = code;
	snprintf(err->field, sizeof(err->field), "%s", field ? field : "");
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	return -1;
}

cJSON *msg_add_int(cJSON *obj, const char *name, int64_t v)
{
	char buf[24];

	/* cJSON prints doubles with 15 significant digits whenever that reads
	 * back within a relative epsilon, which turns 2^53-1 into 2^53-2; an
	 * integer written as raw text stays exact. Not with snprintf: a fresh
	 * process's first printf costs 6-8 µs here (its code paged in), and
	 * this is the first a rank's libkiln would make. */
	util_i64_text(v, buf);
	return cJSON_AddRawToObject(obj, name, buf);
}

cJSON *msg_ok_reply(uint64_t id)
{
	cJSON *r = cJSON_CreateObject();
	if (r != NULL && (!msg_add_int(r, "id", (int64_t)id) || !cJSON_AddTrueToObject(r, "ok"))) {
		cJSON_Delete(r);
		r = NULL;
	}
	return r;
}

cJSON *msg_error_reply(uint64_t id, const struct msg_error *err)
{
	cJSON *reply, *e;

	reply = cJSON_CreateObject();
	if (!reply)
		return NULL;
	if (!msg_add_int(reply, "id", (int64_t)id) ||
	    !cJSON_AddFalseToObject(reply, "ok"))
		goto cleanup;
	e = cJSON_AddObjectToObject(reply, "error");
	if (!e || !cJSON_AddStringToObject(e, "code", msg_err_name(err->code)) ||
	    !cJSON_AddStringToObject(e, "message", err->message))
		goto cleanup;
	if (err->field[0] && !cJSON_AddStringToObject(e, "field", err->field))
		goto cleanup;
	return reply;
cleanup:
	cJSON_Delete(reply);
	return NULL;
}

void msg_request_init(struct msg_request *req)
{
	memset(req, 0, sizeof(*req));
	req->op = OP_UNKNOWN;
	req->proto = -1;
	req->max_size = -1;
	req->art_size = -1;
	req->build_ms = -1;
}

void msg_request_free(struct msg_request *req)
{
	size_t i;

	if (!req)
		return;
	free(req->client);
	free(req->toolchain);
	free(req->host_compiler);
	free(req->output);
	for (i = 0; i < req->nargs; i++)
		free(req->args[i]);
	free(req->args);
	for (i = 0; i < req->nsources; i++) {
		free(req->sources[i].name);
		free(req->sources[i].text);
		free(req->sources[i].path);
	}
	free(req->sources);
	for (i = 0; i < req->npch; i++)
		free(req->pch[i]);
	free(req->pch);
	free(req->alias);
	free(req->alias_data);
	free(req->label);
	free(req->key);
	free(req->ref);
	free(req->dir);
	for (i = 0; i < req->ndeps; i++)
		free(req->deps[i].path);
	free(req->deps);
	free(req->log);
	msg_request_init(req);
}
