/*
 * The packer of protocol requests (msg.h), which libkiln and the CLI use to
 * write what msg.c parses on the daemon's side.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include "util.h"

/* Packing. Every helper returns false on ENOMEM. */

static bool add_str(cJSON *obj, const char *name, const char *s)
{
	return !s || cJSON_AddStringToObject(obj, name, s);
}

static bool add_num(cJSON *obj, const char *name, int64_t v)
{
	return v < 0 || msg_add_int(obj, name, v);
}

static bool pack_sources(cJSON *obj, const struct msg_request *req)
{
	cJSON *arr, *s, *text;
	char *copy;
	size_t i;

	arr = cJSON_AddArrayToObject(obj, "sources");
	if (!arr)
		return false;
	for (i = 0; i < req->nsources; i++) {
		const struct msg_source *src = &req->sources[i];

		s = cJSON_CreateObject();
		if (!s || !cJSON_AddItemToArray(arr, s)) {
			cJSON_Delete(s);
			return false;
		}
		if (!add_str(s, "name", src->name) || !add_str(s, "path", src->path))
			return false;
		if (src->has_digest) {
			char hex[65];

			util_hex(src->digest, sizeof(src->digest), hex);
			if (!cJSON_AddStringToObject(s, "sha256", hex))
				return false;
			continue;
		}
		if (!src->text)
			continue;
		/* text need not be NUL-terminated at len, so copy that many. */
		copy = malloc(src->len + 1);
		if (!copy)
			return false;
		memcpy(copy, src->text, src->len);
		copy[src->len] = '\0';
		text = cJSON_CreateString(copy);
		free(copy);
		if (!text || !cJSON_AddItemToObject(s, "text", text)) {
			cJSON_Delete(text);
			return false;
		}
	}
	return true;
}

static bool pack_put(cJSON *obj, const struct msg_request *req)
{
	char hex[65];
	cJSON *arr, *d;
	size_t i;

	util_hex(req->art_digest, sizeof(req->art_digest), hex);
	if (!add_str(obj, "key", req->key) || !cJSON_AddStringToObject(obj, "sha256", hex) ||
	    !add_num(obj, "size", req->art_size) || !add_num(obj, "build_ms", req->build_ms) ||
	    !add_str(obj, "log", req->log))
		return false;
	arr = cJSON_AddArrayToObject(obj, "deps");
	for (i = 0; arr && i < req->ndeps; i++) {
		d = cJSON_CreateObject();
		if (!d || !cJSON_AddItemToArray(arr, d)) {
			cJSON_Delete(d);
			return false;
		}
		const struct msg_dep *dep = &req->deps[i];
		util_hex(dep->digest, 32, hex);
		const struct dep_kind_info *k = dep_kind_info(dep->kind);
		if (k == NULL || !add_str(d, "path", dep->path) ||
		    !cJSON_AddStringToObject(d, "kind", k->name))
			return false;
		if (k->has_digest && !cJSON_AddStringToObject(d, "sha256", hex))
			return false;
		if (dep->kind == DEP_EXISTS && !cJSON_AddNumberToObject(d, "mode", dep->mode))
			return false;
		if (k->named && !cJSON_AddBoolToObject(d, k->flag, dep->mode != 0))
			return false;
	}
	return arr != NULL;
}

static bool pack_fields(cJSON *obj, const struct msg_request *req)
{
	cJSON *arr;

	switch (req->op) {
	case OP_HELLO:
		if (req->heartbeat && !cJSON_AddTrueToObject(obj, "heartbeat"))
			return false;
		if (req->job_nodes > 0 && !add_num(obj, "job_nodes", req->job_nodes))
			return false;
		return add_num(obj, "proto", req->proto) && add_str(obj, "client", req->client);
	case OP_PUT:
	case OP_GET:
		/* put names its program as a get does */
		if (req->op == OP_PUT && !pack_put(obj, req))
			return false;
		if (req->no_build && !cJSON_AddFalseToObject(obj, "build"))
			return false;
		if (!add_str(obj, "toolchain", req->toolchain) ||
		    !add_str(obj, "host_compiler", req->host_compiler) ||
		    !add_str(obj, "output", req->output))
			return false;
		if (req->nargs) {
			arr = cJSON_CreateStringArray((const char *const *)req->args,
						      (int)req->nargs);
			if (!arr || !cJSON_AddItemToObject(obj, "args", arr)) {
				cJSON_Delete(arr);
				return false;
			}
		}
		if (req->npch) {
			arr = cJSON_CreateStringArray((const char *const *)req->pch, (int)req->npch);
			if (!arr || !cJSON_AddItemToObject(obj, "pch", arr)) {
				cJSON_Delete(arr);
				return false;
			}
		}
		return pack_sources(obj, req) && add_str(obj, "alias", req->alias) &&
		       add_str(obj, "label", req->label);
	case OP_LOOKUP:
		return add_str(obj, "alias", req->alias) && add_str(obj, "key", req->key) &&
		       add_str(obj, "toolchain", req->toolchain) &&
		       add_str(obj, "host_compiler", req->host_compiler) &&
		       (!req->claim || (cJSON_AddTrueToObject(obj, "claim") != NULL &&
					add_num(obj, "wait_ms", req->wait_ms)));
	case OP_RELEASE:
		return add_str(obj, "alias", req->alias);
	case OP_SHOW:
	case OP_REMOVE:
	case OP_PIN:
	case OP_UNPIN:
		return add_str(obj, "ref", req->ref);
	case OP_GC:
		if (req->stale)
			return cJSON_AddTrueToObject(obj, "stale") != NULL;
		return add_num(obj, "max_size", req->max_size);
	case OP_CONFIG:
		return add_num(obj, "max_size", req->max_size);
	case OP_EXPORT:
	case OP_IMPORT:
		return add_str(obj, "dir", req->dir);
	default:
		return true;
	}
}

char *msg_request_pack(const struct msg_request *req, size_t *len)
{
	const char *op = msg_op_name(req->op);
	cJSON *obj;
	char *s = NULL;

	obj = cJSON_CreateObject();
	if (!obj)
		return NULL;
	if (!op || !cJSON_AddStringToObject(obj, "op", op) ||
	    !msg_add_int(obj, "id", (int64_t)req->id) ||
	    !pack_fields(obj, req))
		goto cleanup;
	s = cJSON_PrintUnformatted(obj);
	if (s && len)
		*len = strlen(s);
cleanup:
	cJSON_Delete(obj);
	return s;
}
