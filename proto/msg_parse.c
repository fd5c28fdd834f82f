/*
 * The request parser: validates every field of a request before the
 * daemon acts on it (msg.h). Names, errors and the request's life are in
 * msg.c; the packer that libkiln and the CLI use is msg_pack.c.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "jobsize.h"
#include "msg.h"
#include "util.h"
#include "validate.h"

#define MSG_MAX_REF 256
#define MSG_MAX_CLIENT 256
#define MSG_MAX_PATH 4096

/* Copies at most 64 bytes of a client's string for a message, with control
 * and non-ASCII bytes as '?' so that it cannot forge lines in a log. */
static const char *printable(const char *s, char out[68])
{
	size_t i;

	for (i = 0; s[i] && i < 64; i++)
		out[i] = (unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f ? '?' : s[i];
	if (s[i]) {
		memcpy(out + i, "...", 3);
		i += 3;
	}
	out[i] = '\0';
	return out;
}

/*
 * Parsing. Each helper returns 0, or -1 with err filled; the caller frees
 * what was already stored in req. Strings are taken or copied out of the
 * cJSON tree (take) so that the request outlives it.
 */

/* Returns the member or NULL when absent; JSON null counts as absent, so
 * that a client may write every optional field. */
static const cJSON *member(const cJSON *obj, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);

	return cJSON_IsNull(v) ? NULL : v;
}

/* Whether this thread's parse takes strings out of the tree (set at the
 * start of each parse; see take). */
static _Thread_local bool parse_takes;

/*
 * The string of a string member, or NULL when memory ran out. A parse with
 * a memo (kilnd's) takes it out of the tree instead of copying it: the tree
 * is deleted when the parse ends, and kilnd sets no cJSON allocation hooks,
 * so cJSON's allocation is malloc's and free releases it. Other parses
 * (libkiln's, in a host process where another library may have set cJSON's
 * hooks) copy it. Each member is read once.
 */
static char *take(const cJSON *v)
{
	if (!parse_takes)
		return strdup(v->valuestring);
	cJSON *m = (cJSON *)v;
	char *s = m->valuestring;
	m->valuestring = NULL;
	return s;
}

static int oom(struct msg_error *err)
{
	return msg_error_set(err, ERR_INTERNAL, NULL, "out of memory while reading the request");
}

/* Reads an integer from 0 to max; JSON has no integer type, so a number with
 * a fraction, or one too large for a double to hold exactly, is refused. */
static int get_uint(const cJSON *obj, const char *name, bool required, double max,
		    int64_t *out, struct msg_error *err)
{
	const cJSON *v = member(obj, name);
	double d;

	if (!v) {
		if (required)
			return msg_error_set(err, ERR_BAD_REQUEST, name,
					     "the request has no \"%s\"", name);
		return 0;
	}
	if (!cJSON_IsNumber(v))
		return msg_error_set(err, ERR_BAD_REQUEST, name,
				     "\"%s\" must be a number", name);
	d = v->valuedouble;
	/* The range check comes first so that the cast is defined; it also
	 * refuses NaN and infinities, which compare false. */
	if (!(d >= 0 && d <= max) || d != (double)(int64_t)d)
		return msg_error_set(err, ERR_BAD_REQUEST, name,
				     "\"%s\" must be an integer from 0 to %.0f", name, max);
	*out = (int64_t)d;
	return 0;
}

/* Copies a string member, checking its type and, unless max is 0, that it
 * has at most max bytes. */
static int get_str(const cJSON *obj, const char *name, bool required, size_t max,
		   char **out, struct msg_error *err)
{
	const cJSON *v = member(obj, name);
	size_t len;

	if (!v) {
		if (required)
			return msg_error_set(err, ERR_BAD_REQUEST, name,
					     "the request has no \"%s\"", name);
		return 0;
	}
	if (!cJSON_IsString(v) || !v->valuestring)
		return msg_error_set(err, ERR_BAD_REQUEST, name,
				     "\"%s\" must be a string", name);
	len = strlen(v->valuestring);
	if (max && len > max)
		return msg_error_set(err, ERR_BAD_REQUEST, name,
				     "\"%s\" is longer than %zu bytes", name, max);
	*out = take(v);
	return *out ? 0 : oom(err);
}

static int parse_hello(const cJSON *obj, struct msg_request *req, struct msg_error *err,
		           struct msg_args_memo *memo)
{
	(void)memo;
	if (get_uint(obj, "proto", true, MSG_MAX_ID, &req->proto, err) < 0 ||
	    get_str(obj, "client", false, MSG_MAX_CLIENT, &req->client, err) < 0 ||
	    get_uint(obj, "job_nodes", false, JOBSIZE_MAX, &req->job_nodes, err) < 0)
		return -1;
	const cJSON *hb = member(obj, "heartbeat");
	if (hb != NULL && !cJSON_IsBool(hb))
		return msg_error_set(err, ERR_BAD_REQUEST, "heartbeat", "\"heartbeat\" must be true or false");
	req->heartbeat = cJSON_IsTrue(hb);
	/* The daemon logs the client's name, so it follows the label rules. */
	if (req->client && validate_label(req->client, NULL, 0) < 0)
		return msg_error_set(err, ERR_BAD_REQUEST, "client",
				     "\"client\" must be 1 to %d bytes of UTF-8 text without control characters",
				     MSG_MAX_CLIENT);
	return 0;
}

/* True when memo holds req's argument list, byte for byte. */
static bool memo_holds(const struct msg_args_memo *memo, const struct msg_request *req)
{
	size_t at = 0;

	if (memo == NULL || memo->len == 0 || memo->nargs != req->nargs)
		return false;
	for (size_t i = 0; i < req->nargs; i++) {
		size_t n = strlen(req->args[i]) + 1;
		if (n > memo->len - at || memcmp(memo->text + at, req->args[i], n) != 0)
			return false;
		at += n;
	}
	return at == memo->len;
}

/* Keeps req's list and its verdict in memo, when it fits. */
static void memo_keep(struct msg_args_memo *memo, const struct msg_request *req)
{
	size_t at = 0;

	if (memo == NULL)
		return;
	memo->len = 0;
	for (size_t i = 0; i < req->nargs; i++) {
		size_t n = strlen(req->args[i]) + 1;
		if (n > sizeof(memo->text) - at)
			return;
		memcpy(memo->text + at, req->args[i], n);
		at += n;
	}
	memo->nargs = req->nargs;
	memo->code_arg = req->code_arg;
	memo->len = at;
}

static int parse_args(const cJSON *obj, struct msg_request *req, struct msg_error *err,
		      struct msg_args_memo *memo)
{
	const cJSON *arr = member(obj, "args"), *v;
	char why[256];
	size_t n, i = 0;

	if (!arr)
		return 0;
	if (!cJSON_IsArray(arr))
		return msg_error_set(err, ERR_BAD_REQUEST, "args",
				     "\"args\" must be an array of strings");
	n = (size_t)cJSON_GetArraySize(arr);
	if (n > MSG_MAX_ARGS)
		return msg_error_set(err, ERR_TOO_LARGE, "args",
				     "the request has %zu arguments; at most %d are allowed",
				     n, MSG_MAX_ARGS);
	if (n == 0)
		return 0;
	req->args = calloc(n, sizeof(*req->args));
	if (!req->args)
		return oom(err);
	cJSON_ArrayForEach(v, arr) {
		if (!cJSON_IsString(v) || !v->valuestring)
			return msg_error_set(err, ERR_BAD_REQUEST, "args",
					     "argument %zu must be a string", i + 1);
		if (strlen(v->valuestring) > MSG_MAX_ARG_LEN)
			return msg_error_set(err, ERR_TOO_LARGE, "args",
					     "argument %zu is longer than %d bytes",
					     i + 1, MSG_MAX_ARG_LEN);
		req->args[i] = take(v);
		if (!req->args[i])
			return oom(err);
		req->nargs = ++i;
	}
	if (memo_holds(memo, req)) {
		req->code_arg = memo->code_arg;
		return 0;
	}
	size_t at = 0;
	enum args_verdict verdict = validate_args((const char *const *)req->args, req->nargs, &at,
						  why, sizeof(why));
	if (verdict == ARGS_REFUSED)
		return msg_error_set(err, ERR_BAD_ARG, "args", "%s", why);
	if (verdict == ARGS_CODE)
		req->code_arg = at + 1;
	memo_keep(memo, req);
	return 0;
}

/* "pch": the headers kilnd precompiles for the request, named as an
 * #include <...> names them; each is a relative name like a source's. */
static int parse_pch(const cJSON *obj, struct msg_request *req, struct msg_error *err)
{
	const cJSON *arr = member(obj, "pch"), *v;
	char why[256];
	size_t n, i = 0;

	if (!arr)
		return 0;
	if (!cJSON_IsArray(arr))
		return msg_error_set(err, ERR_BAD_REQUEST, "pch",
				     "\"pch\" must be an array of header names");
	n = (size_t)cJSON_GetArraySize(arr);
	if (n > MSG_MAX_PCH)
		return msg_error_set(err, ERR_TOO_LARGE, "pch",
				     "the request names %zu headers to precompile; at most %d are allowed",
				     n, MSG_MAX_PCH);
	if (n == 0)
		return 0;
	req->pch = calloc(n, sizeof(*req->pch));
	if (!req->pch)
		return oom(err);
	cJSON_ArrayForEach(v, arr) {
		if (!cJSON_IsString(v) || !v->valuestring)
			return msg_error_set(err, ERR_BAD_REQUEST, "pch",
					     "header %zu of \"pch\" must be a string", i + 1);
		if (validate_source_name(v->valuestring, why, sizeof(why)) < 0)
			return msg_error_set(err, ERR_BAD_NAME, "pch", "header %zu of \"pch\": %s",
					     i + 1, why);
		req->pch[i] = take(v);
		if (!req->pch[i])
			return oom(err);
		req->npch = ++i;
	}
	return 0;
}

/* Parses sources[i] into src; i is 0-based, messages count from 1. */
static int parse_source(const cJSON *v, size_t i, struct msg_source *src,
			struct msg_error *err)
{
	const cJSON *name, *text, *path, *digest;
	char why[200];

	if (!cJSON_IsObject(v))
		return msg_error_set(err, ERR_BAD_REQUEST, "sources",
				     "source %zu must be an object with \"name\" and \"text\", "
				     "\"path\" or \"sha256\"", i + 1);
	name = member(v, "name");
	text = member(v, "text");
	path = member(v, "path");
	digest = member(v, "sha256");
	if (!cJSON_IsString(name) || !name->valuestring)
		return msg_error_set(err, ERR_BAD_REQUEST, "sources",
				     "source %zu has no \"name\" string", i + 1);
	if (validate_source_name(name->valuestring, why, sizeof(why)) < 0)
		return msg_error_set(err, ERR_BAD_NAME, "sources", "%s", why);
	if ((text != NULL) + (path != NULL) + (digest != NULL) != 1)
		return msg_error_set(err, ERR_BAD_REQUEST, "sources",
				     "source \"%s\" must have exactly one of \"text\", \"path\" "
				     "and \"sha256\"", name->valuestring);
	if (text && (!cJSON_IsString(text) || !text->valuestring))
		return msg_error_set(err, ERR_BAD_REQUEST, "sources",
				     "\"text\" of source \"%s\" must be a string",
				     name->valuestring);
	if (digest && (!cJSON_IsString(digest) || !digest->valuestring ||
		       !util_unhex32(digest->valuestring, src->digest)))
		return msg_error_set(err, ERR_BAD_REQUEST, "sources",
				     "\"sha256\" of source \"%s\" must be 64 lower-case hex digits",
				     name->valuestring);
	if (path) {
		if (!cJSON_IsString(path) || !path->valuestring)
			return msg_error_set(err, ERR_BAD_REQUEST, "sources",
					     "\"path\" of source \"%s\" must be a string",
					     name->valuestring);
		if (path->valuestring[0] != '/')
			return msg_error_set(err, ERR_BAD_REQUEST, "sources",
					     "\"path\" of source \"%s\" must be absolute",
					     name->valuestring);
		if (strlen(path->valuestring) > MSG_MAX_PATH)
			return msg_error_set(err, ERR_BAD_REQUEST, "sources",
					     "\"path\" of source \"%s\" is longer than %d bytes",
					     name->valuestring, MSG_MAX_PATH);
	}
	src->name = take(name);
	if (!src->name)
		return oom(err);
	if (text) {
		src->len = strlen(text->valuestring);
		src->text = take(text);
		if (!src->text)
			return oom(err);
	} else if (path) {
		src->path = take(path);
		if (!src->path)
			return oom(err);
	} else {
		src->has_digest = true;
	}
	return 0;
}

static int parse_sources(const cJSON *obj, struct msg_request *req, struct msg_error *err)
{
	const cJSON *arr = member(obj, "sources"), *v;
	size_t n, i = 0;
	char why[300];

	if (!arr)
		return msg_error_set(err, ERR_BAD_REQUEST, "sources",
				     "the request has no \"sources\"");
	if (!cJSON_IsArray(arr))
		return msg_error_set(err, ERR_BAD_REQUEST, "sources",
				     "\"sources\" must be an array of objects");
	n = (size_t)cJSON_GetArraySize(arr);
	if (n == 0)
		return msg_error_set(err, ERR_BAD_REQUEST, "sources",
				     "\"sources\" is empty; a request needs at least one source");
	if (n > MSG_MAX_SOURCES)
		return msg_error_set(err, ERR_TOO_LARGE, "sources",
				     "the request has %zu sources; at most %d are allowed",
				     n, MSG_MAX_SOURCES);
	req->sources = calloc(n, sizeof(*req->sources));
	if (!req->sources)
		return oom(err);
	cJSON_ArrayForEach(v, arr) {
		/* Count the source before parsing it so that msg_request_free
		 * releases whatever a failed parse already copied. */
		req->nsources = i + 1;
		if (parse_source(v, i, &req->sources[i], err) < 0)
			return -1;
		i++;
	}
	/* At most 256 names: a quadratic check costs microseconds. */
	if (validate_source_set((const char *const *)&req->sources[0].name, n,
				sizeof(*req->sources), why, sizeof(why)) != 0)
		return msg_error_set(err, ERR_BAD_NAME, "sources", "%s", why);
	return 0;
}

/* Copies an optional alias or label and applies its rules. */
static int parse_name(const cJSON *obj, const char *field,
		      int (*check)(const char *, char *, size_t), char **out,
		      struct msg_error *err)
{
	char why[200];

	if (get_str(obj, field, false, 0, out, err) < 0)
		return -1;
	if (*out && check(*out, why, sizeof(why)) < 0)
		return msg_error_set(err, ERR_BAD_NAME, field, "%s", why);
	return 0;
}

/* "alias_data": base64 text stored with the alias, so only beside one. */
static int parse_alias_data(const cJSON *obj, struct msg_request *req, struct msg_error *err)
{
	if (get_str(obj, "alias_data", false, MSG_ALIAS_DATA_MAX, &req->alias_data, err) < 0)
		return -1;
	if (req->alias_data == NULL)
		return 0;
	if (req->alias == NULL)
		return msg_error_set(err, ERR_BAD_REQUEST, "alias_data",
				     "\"alias_data\" is stored with an alias: the request has none");
	if (!validate_base64(req->alias_data, strlen(req->alias_data)))
		return msg_error_set(err, ERR_BAD_REQUEST, "alias_data",
				     "\"alias_data\" must be padded base64 text (RFC 4648)");
	return 0;
}

/* "host_compiler": nvcc's, by absolute path (kilnd checks it is nvcc's). */
static int parse_host(const cJSON *obj, struct msg_request *req, struct msg_error *err)
{
	char why[200];
	if (get_str(obj, "host_compiler", false, 0, &req->host_compiler, err) < 0)
		return -1;
	if (req->host_compiler &&
	    validate_compiler_path("host compiler", req->host_compiler, why, sizeof(why)) < 0)
		return msg_error_set(err, ERR_BAD_TOOLCHAIN, "host_compiler", "%s", why);
	return 0;
}

static int parse_get(const cJSON *obj, struct msg_request *req, struct msg_error *err,
		     struct msg_args_memo *memo)
{
	char why[200], q[68];
	const cJSON *build;

	if (get_str(obj, "toolchain", false, 0, &req->toolchain, err) < 0)
		return -1;
	if (req->toolchain &&
	    validate_toolchain_name(req->toolchain, why, sizeof(why)) < 0)
		return msg_error_set(err, ERR_BAD_TOOLCHAIN, "toolchain", "%s", why);
	if (parse_host(obj, req, err) < 0)
		return -1;
	if (get_str(obj, "output", false, 0, &req->output, err) < 0)
		return -1;
	if (req->output && strcmp(req->output, "shared") != 0 && strcmp(req->output, "cubin") != 0 &&
	    strcmp(req->output, "fatbin") != 0 && strcmp(req->output, "ptx") != 0)
		return msg_error_set(err, ERR_BAD_REQUEST, "output",
				     "output kind \"%s\" is not supported; use \"shared\", or with "
				     "nvcc \"cubin\", \"fatbin\" or \"ptx\"",
				     printable(req->output, q));
	if (parse_args(obj, req, err, memo) < 0 || parse_sources(obj, req, err) < 0 ||
	    parse_pch(obj, req, err) < 0 || parse_name(obj, "alias", validate_alias, &req->alias, err) < 0 ||
	    parse_name(obj, "label", validate_label, &req->label, err) < 0 ||
	    parse_alias_data(obj, req, err) < 0)
		return -1;
	build = member(obj, "build");
	if (build && !cJSON_IsBool(build))
		return msg_error_set(err, ERR_BAD_REQUEST, "build", "\"build\" must be true or false");
	req->no_build = cJSON_IsFalse(build);
	if (!req->toolchain && !(req->toolchain = strdup("cc")))
		return oom(err);
	if (!req->output && !(req->output = strdup("shared")))
		return oom(err);
	return 0;
}

static int parse_dep(const cJSON *v, size_t i, struct msg_dep *dep, struct msg_error *err)
{
	const cJSON *path = member(v, "path"), *digest = member(v, "sha256");
	const cJSON *kind = member(v, "kind"), *mode = member(v, "mode");

	if (!cJSON_IsObject(v) || !cJSON_IsString(path) || !path->valuestring)
		return msg_error_set(err, ERR_BAD_REQUEST, "deps",
				     "dependency %zu must be an object with a \"path\" string", i + 1);
	dep->kind = kind == NULL ? DEP_FILE : dep_kind_parse(cJSON_GetStringValue(kind));
	if (dep->kind < 0)
		return msg_error_set(err, ERR_BAD_REQUEST, "deps",
				     "\"kind\" of dependency %zu must be file, exists, absent, env, "
				     "listing or search", i + 1);
	const struct dep_kind_info *k = &dep_kinds[dep->kind];
	const cJSON *set = k->named ? member(v, k->flag) : NULL;
	if ((!k->named && path->valuestring[0] != '/') ||
	    (k->bare && strchr(path->valuestring, '/') != NULL) ||
	    path->valuestring[0] == '\0' ||
	    strlen(path->valuestring) > MSG_MAX_PATH)
		return msg_error_set(err, ERR_BAD_REQUEST, "deps",
				     "\"path\" of dependency %zu must be absolute and at most %d bytes",
				     i + 1, MSG_MAX_PATH);
	if (k->has_digest &&
	    (!cJSON_IsString(digest) || !util_unhex32(digest->valuestring, dep->digest)))
		return msg_error_set(err, ERR_BAD_REQUEST, "deps",
				     "\"sha256\" of dependency %zu must be 64 lower-case hex digits", i + 1);
	if (k->has_mode && (!cJSON_IsNumber(mode) || mode->valuedouble < 0 ||
			    mode->valuedouble > 07777777))
		return msg_error_set(err, ERR_BAD_REQUEST, "deps",
				     "\"mode\" of dependency %zu must be a file mode", i + 1);
	if (k->named && !cJSON_IsBool(set))
		return msg_error_set(err, ERR_BAD_REQUEST, "deps",
				     "\"%s\" of dependency %zu must be true or false", k->flag, i + 1);
	dep->mode = k->has_mode ? (uint32_t)mode->valuedouble
		    : k->named		    ? (uint32_t)cJSON_IsTrue(set)
					    : 0u;
	dep->path = take(path);
	return dep->path ? 0 : oom(err);
}

/* put: a get's fields naming the program, plus the artifact's key, digest,
 * size and dependencies; the artifact itself comes as a descriptor. */
static int parse_put(const cJSON *obj, struct msg_request *req, struct msg_error *err,
		     struct msg_args_memo *memo)
{
	const cJSON *arr, *v, *digest;
	size_t n, i = 0;

	if (parse_get(obj, req, err, memo) < 0 || get_str(obj, "key", true, 0, &req->key, err) < 0 ||
	    get_uint(obj, "size", true, MSG_MAX_ID, &req->art_size, err) < 0 ||
	    get_uint(obj, "build_ms", false, MSG_MAX_ID, &req->build_ms, err) < 0 ||
	    get_str(obj, "log", false, MSG_MAX_LOG, &req->log, err) < 0)
		return -1;
	if (validate_key(req->key) < 0)
		return msg_error_set(err, ERR_BAD_REQUEST, "key",
				     "\"key\" must be 64 lower-case hex digits");
	digest = member(obj, "sha256");
	if (!cJSON_IsString(digest) || !digest->valuestring ||
	    !util_unhex32(digest->valuestring, req->art_digest))
		return msg_error_set(err, ERR_BAD_REQUEST, "sha256",
				     "\"sha256\" must be the artifact's SHA-256 as 64 lower-case hex digits");
	arr = member(obj, "deps");
	if (!arr)
		return 0;
	if (!cJSON_IsArray(arr))
		return msg_error_set(err, ERR_BAD_REQUEST, "deps", "\"deps\" must be an array");
	n = (size_t)cJSON_GetArraySize(arr);
	if (n > MSG_MAX_DEPS)
		return msg_error_set(err, ERR_TOO_LARGE, "deps",
				     "%zu dependencies; at most %d are allowed", n, MSG_MAX_DEPS);
	if (n && !(req->deps = calloc(n, sizeof(*req->deps))))
		return oom(err);
	cJSON_ArrayForEach(v, arr) {
		req->ndeps = i + 1;
		if (parse_dep(v, i, &req->deps[i], err) < 0)
			return -1;
		i++;
	}
	return 0;
}

static int parse_claim(const cJSON *obj, struct msg_request *req, struct msg_error *err);

static int parse_lookup(const cJSON *obj, struct msg_request *req, struct msg_error *err,
		            struct msg_args_memo *memo)
{
	(void)memo;
	char why[200];
	if (parse_name(obj, "alias", validate_alias, &req->alias, err) < 0 ||
	    get_str(obj, "key", false, 0, &req->key, err) < 0 ||
	    get_str(obj, "toolchain", false, 0, &req->toolchain, err) < 0)
		return -1;
	/* "toolchain": only an entry that toolchain, as kilnd has it now, built. */
	if (req->toolchain && validate_toolchain_name(req->toolchain, why, sizeof(why)) < 0)
		return msg_error_set(err, ERR_BAD_TOOLCHAIN, "toolchain", "%s", why);
	if (parse_host(obj, req, err) < 0)
		return -1;
	if (!req->alias == !req->key)
		return msg_error_set(err, ERR_BAD_REQUEST, req->key ? "key" : "alias",
				     "lookup needs exactly one of \"alias\" or \"key\"");
	if (req->key && validate_key(req->key) < 0)
		return msg_error_set(err, ERR_BAD_REQUEST, "key",
				     "\"key\" must be 64 lower-case hex digits");
	return parse_claim(obj, req, err);
}

/* gc's "max_size" or "stale". */
static int parse_gc(const cJSON *obj, struct msg_request *req, struct msg_error *err,
		        struct msg_args_memo *memo)
{
	(void)memo;
	const cJSON *stale = member(obj, "stale");
	if (stale != NULL && !cJSON_IsBool(stale))
		return msg_error_set(err, ERR_BAD_REQUEST, "stale", "\"stale\" must be true or false");
	req->stale = cJSON_IsTrue(stale);
	if (get_uint(obj, "max_size", false, MSG_MAX_ID, &req->max_size, err) < 0)
		return -1;
	if (req->stale && req->max_size >= 0)
		return msg_error_set(err, ERR_BAD_REQUEST, "stale",
				     "\"stale\" and \"max_size\" do not go together");
	return 0;
}

/* lookup's "claim" and "wait_ms" (daemon/claims.h: CLAIM_WAIT_MAX_MS). */
static int parse_claim(const cJSON *obj, struct msg_request *req, struct msg_error *err)
{
	const cJSON *claim = member(obj, "claim");
	if (claim != NULL && !cJSON_IsBool(claim))
		return msg_error_set(err, ERR_BAD_REQUEST, "claim", "\"claim\" must be true or false");
	req->claim = cJSON_IsTrue(claim);
	int64_t wait_ms = 0;
	if (get_uint(obj, "wait_ms", false, MSG_MAX_WAIT_MS, &wait_ms, err) < 0)
		return -1;
	req->wait_ms = (uint64_t)wait_ms;
	if (req->claim && req->alias == NULL)
		return msg_error_set(err, ERR_BAD_REQUEST, "claim", "only an alias can be claimed");
	if (member(obj, "wait_ms") != NULL && !req->claim)
		return msg_error_set(err, ERR_BAD_REQUEST, "wait_ms",
				     "\"wait_ms\" goes with \"claim\": true");
	return 0;
}

static int parse_ref(const cJSON *obj, struct msg_request *req, struct msg_error *err,
		         struct msg_args_memo *memo)
{
	(void)memo;
	if (get_str(obj, "ref", true, MSG_MAX_REF, &req->ref, err) < 0)
		return -1;
	/* A reference is a key, a key prefix, an alias (printable ASCII without
	 * spaces) or a label (UTF-8 without control characters). */
	if (validate_alias(req->ref, NULL, 0) < 0 && validate_label(req->ref, NULL, 0) < 0) {
		char q[VALIDATE_QUOTE_MAX + 4];
		return msg_error_set(err, ERR_BAD_REQUEST, "ref",
				     "%s is not a key, a key prefix, an alias or a label (1 to %d "
				     "characters, no control characters)",
				     validate_quote(req->ref, q), MSG_MAX_REF);
	}
	return 0;
}

/* export and import: an absolute directory without NUL or newline. */
static int parse_dir(const cJSON *obj, struct msg_request *req, struct msg_error *err,
		         struct msg_args_memo *memo)
{
	(void)memo;
	if (get_str(obj, "dir", true, 4095, &req->dir, err) < 0)
		return -1;
	if (req->dir[0] != '/' || strchr(req->dir, '\n') != NULL)
		return msg_error_set(err, ERR_BAD_REQUEST, "dir", "\"dir\" must be an absolute path");
	return 0;
}

static int parse_release(const cJSON *obj, struct msg_request *req, struct msg_error *err,
			 struct msg_args_memo *memo)
{
	(void)memo;
	if (parse_name(obj, "alias", validate_alias, &req->alias, err) < 0)
		return -1;
	if (req->alias == NULL)
		return msg_error_set(err, ERR_BAD_REQUEST, "alias", "release needs an \"alias\"");
	return 0;
}

/* config: the size to keep in kiln.conf (0 removes it). */
static int parse_config(const cJSON *obj, struct msg_request *req, struct msg_error *err,
			struct msg_args_memo *memo)
{
	(void)memo;
	return get_uint(obj, "max_size", false, MSG_MAX_ID, &req->max_size, err);
}

/* An op without fields of its own. */
static int parse_none(const cJSON *obj, struct msg_request *req, struct msg_error *err,
		      struct msg_args_memo *memo)
{
	(void)obj, (void)req, (void)err, (void)memo;
	return 0;
}

/* Each op's parser, from its row in ops.def. */
typedef int parse_fn(const cJSON *obj, struct msg_request *req, struct msg_error *err,
		     struct msg_args_memo *memo);
static parse_fn *const parsers[OP__COUNT] = {
#define KILN_OP(id, name, parse, pack, run, family, flags) [OP_##id] = parse,
#include "ops.def"
};

/* True when only JSON whitespace follows the parsed value. */
static bool only_space(const char *p, const char *end)
{
	for (; p < end; p++) {
		if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
			return false;
	}
	return true;
}

/*
 * One pass over the payload: the deepest nesting of objects and arrays
 * outside strings (so that the parser never recurses deeper than
 * MSG_MAX_DEPTH), and whether a string holds a \u0000 escape (decoded, it
 * would end the C string early and silently cut a source short). Strings
 * end and escape as JSON's do, so on a payload that parses these are its
 * strings' escapes (an escaped backslash followed by "u0000" is not one).
 */
struct scan {
	int depth;
	bool nul_escape;
};

static struct scan json_scan(const char *json, size_t len)
{
	struct scan s = { 0, false };
	int depth = 0;
	bool in_str = false;
	for (size_t i = 0; i < len; i++) {
		char ch = json[i];
		if (in_str) {
			if (ch == '\\') {
				if (len - i >= 6 && memcmp(json + i + 1, "u0000", 5) == 0)
					s.nul_escape = true;
				i++;
			} else if (ch == '"') {
				in_str = false;
			}
		} else if (ch == '"') {
			in_str = true;
		} else if (ch == '{' || ch == '[') {
			if (++depth > s.depth)
				s.depth = depth;
		} else if (ch == '}' || ch == ']') {
			depth--;
		}
	}
	return s;
}

int msg_request_parse(const char *json, size_t len, struct msg_request *req,
		      struct msg_error *err)
{
	return msg_request_parse_memo(json, len, req, err, NULL);
}

int msg_request_parse_memo(const char *json, size_t len, struct msg_request *req,
			   struct msg_error *err, struct msg_args_memo *memo)
{
	const char *end = NULL;
	struct scan scan = { 0, false };
	char q[68];
	const cJSON *op;
	cJSON *root = NULL;
	int64_t id = -1;
	int rc = -1;

	msg_request_init(req);
	parse_takes = memo != NULL;
	err->code = ERR_NONE;
	err->field[0] = '\0';
	err->message[0] = '\0';

	/* A NUL byte inside the payload would cut strings short unseen. */
	if (!json || len == 0 || memchr(json, '\0', len)) {
		msg_error_set(err, ERR_BAD_JSON, NULL, "the request is not a JSON object");
		goto cleanup;
	}
	scan = json_scan(json, len);
	if (scan.depth > MSG_MAX_DEPTH) {
		msg_error_set(err, ERR_BAD_REQUEST, NULL,
			      "the request nests objects and arrays deeper than %d levels",
			      MSG_MAX_DEPTH);
		goto cleanup;
	}
	root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
	if (!cJSON_IsObject(root) || !end || !only_space(end, json + len)) {
		msg_error_set(err, ERR_BAD_JSON, NULL, "the request is not a JSON object");
		goto cleanup;
	}
	if (get_uint(root, "id", true, MSG_MAX_ID, &id, err) < 0)
		goto cleanup;
	req->id = (uint64_t)id;
	if (scan.nul_escape) {
		msg_error_set(err, ERR_BAD_REQUEST, NULL,
			      "strings may not contain NUL characters (\\u0000)");
		goto cleanup;
	}

	op = cJSON_GetObjectItemCaseSensitive(root, "op");
	if (!op || cJSON_IsNull(op)) {
		msg_error_set(err, ERR_BAD_REQUEST, "op", "the request has no \"op\"");
		goto cleanup;
	}
	if (!cJSON_IsString(op) || !op->valuestring) {
		msg_error_set(err, ERR_BAD_REQUEST, "op", "\"op\" must be a string");
		goto cleanup;
	}
	req->op = msg_op_parse(op->valuestring);
	if (req->op == OP_UNKNOWN) {
		msg_error_set(err, ERR_UNKNOWN_OP, "op", "unknown operation \"%s\"",
			      printable(op->valuestring, q));
		goto cleanup;
	}
	rc = parsers[req->op](root, req, err, memo);
cleanup:
	cJSON_Delete(root);
	if (rc < 0) {
		msg_request_free(req);
		req->id = id >= 0 ? (uint64_t)id : 0;
	}
	return rc;
}
