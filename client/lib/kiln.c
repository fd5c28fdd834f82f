/*
 * libkiln's public entry points: opening and closing a handle, and get and
 * lookup, which check the request locally, try the process-local table and
 * otherwise ask kilnd. The connection lives in lib_conn.c, the program table
 * and loading in lib_prog.c, errors in lib_err.c, autospawn in lib_spawn.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib_internal.h"
#include "sha256.h"
#include "args.h"
#include "validate.h"

#ifndef KILN_BINDIR
#define KILN_BINDIR "/usr/local/bin"
#endif

static bool env_autospawn(void)
{
	const char *v = getenv("KILN_AUTOSPAWN");

	return v && strcmp(v, "1") == 0;
}

/* The deadline for a silent kilnd: $KILN_TIMEOUT seconds, else 60. */
static int env_timeout_ms(int *out)
{
	const char *v = getenv("KILN_TIMEOUT");
	char *end;
	*out = KILN_DEFAULT_TIMEOUT_S * 1000;
	if (v == NULL || *v == '\0')
		return 0;
	errno = 0;
	double s = strtod(v, &end);
	if (errno != 0 || *end != '\0' || !(s >= 0 && s <= 2e6))
		return lib_err_set(KILN_EINVAL, "KILN_TIMEOUT=\"%s\" is not a number of seconds "
				   "(0 for no deadline)", v);
	*out = (int)(s * 1000 + 0.5);
	if (s > 0 && *out == 0)
		*out = 1;
	return 0;
}

int kiln_set_timeout(struct kiln *k, double seconds)
{
	if (!k || !(seconds >= 0 && seconds <= 2e6))
		return lib_err_set(KILN_EINVAL, "kiln_set_timeout: seconds must be from 0 (no deadline) "
				   "to 2000000");
	int ms = (int)(seconds * 1000 + 0.5);
	atomic_store(&k->timeout_ms, seconds > 0 && ms == 0 ? 1 : ms);
	return KILN_OK;
}

/* Frees a handle that may be partly made; no call may be in flight. */
static void kiln_free(struct kiln *k)
{
	lib_conn_stop(k);
	lib_prog_fini(k);
	pthread_mutex_destroy(&k->load_lock);
	pthread_mutex_destroy(&k->connect_lock);
	pthread_cond_destroy(&k->cond);
	pthread_mutex_destroy(&k->lock);
	free(k->socket_path);
	free(k->kilnd_path);
	free(k->cache_dir);
	free(k);
}

/* Fills k's configuration from opts and the environment. */
static int kiln_configure(struct kiln *k, const struct kiln_options *opts)
{
	const char *kilnd = opts ? opts->kilnd_path : NULL;

	if (opts && opts->socket_path) {
		if (!*opts->socket_path)
			return lib_err_set(KILN_EINVAL, "the socket path is empty");
		k->socket_path = strdup(opts->socket_path);
	} else {
		k->socket_path = util_default_socket();
	}
	if (!kilnd || !*kilnd)
		kilnd = getenv("KILN_KILND");
	if (!kilnd || !*kilnd)
		kilnd = KILN_BINDIR "/kilnd";
	k->kilnd_path = strdup(kilnd);
	if (opts && opts->cache_dir && *opts->cache_dir)
		k->cache_dir = strdup(opts->cache_dir);
	if (!k->socket_path || !k->kilnd_path || (opts && opts->cache_dir && *opts->cache_dir &&
						  !k->cache_dir))
		return lib_err_set(KILN_ENOMEM, "out of memory");
	k->autospawn = (opts && opts->autospawn) || env_autospawn();
	int ms;
	if (env_timeout_ms(&ms) != 0)
		return KILN_EINVAL;
	atomic_init(&k->timeout_ms, ms);
	return 0;
}

int kiln_open_with(const struct kiln_options *opts, struct kiln **out)
{
	struct kiln *k;
	int rc;

	if (!out)
		return lib_err_set(KILN_EINVAL, "kiln_open: out is NULL");
	*out = NULL;
	k = calloc(1, sizeof(*k));
	if (!k)
		return lib_err_set(KILN_ENOMEM, "out of memory");
	/* Default attributes cannot fail to initialise on Linux. */
	pthread_mutex_init(&k->lock, NULL);
	pthread_cond_init(&k->cond, NULL);
	pthread_mutex_init(&k->connect_lock, NULL);
	pthread_mutex_init(&k->load_lock, NULL);
	atomic_init(&k->next_id, 1);
	atomic_init(&k->requests, 0);
	atomic_init(&k->local_hits, 0);
	atomic_init(&k->loads, 0);

	rc = kiln_configure(k, opts);
	if (rc < 0)
		goto fail;
	rc = lib_prog_init(k);
	if (rc < 0)
		goto fail;
	rc = lib_conn_start(k);
	if (rc < 0)
		goto fail;
	*out = k;
	return 0;
fail:
	kiln_free(k);
	return rc;
}

int kiln_open(const char *socket_path, struct kiln **out)
{
	struct kiln_options opts = { .socket_path = socket_path };

	return kiln_open_with(&opts, out);
}

void kiln_close(struct kiln *k)
{
	if (k)
		kiln_free(k);
}

/* Checks one source and fills its wire form; text is borrowed. */
static int request_source(const struct kiln_source *s, size_t i, struct msg_source *m)
{
	const char *nul;
	char why[256];

	if (!s->name)
		return lib_err_set(KILN_EINVAL, "source %zu has no name", i);
	m->name = (char *)s->name;
	if (validate_source_name(s->name, why, sizeof(why)) < 0)
		return lib_err_set(KILN_EINVAL, "source %zu (\"%s\"): %s", i, s->name, why);
	if (!s->text == !s->path)
		return lib_err_set(KILN_EINVAL, "source %s must have exactly one of text or path",
				   s->name);
	if (s->path) {
		if (s->path[0] != '/')
			return lib_err_set(KILN_EINVAL,
					   "source %s: path \"%s\" is not absolute (kilnd reads it "
					   "from its own working directory)",
					   s->name, s->path);
		m->path = (char *)s->path;
		return 0;
	}
	/* The daemon receives the text as a JSON string, which ends at a NUL. */
	nul = s->len ? memchr(s->text, '\0', s->len) : NULL;
	if (nul)
		return lib_err_set(KILN_EINVAL, "source %s: the text contains a NUL byte at offset %zu",
				   s->name, (size_t)(nul - s->text));
	m->text = (char *)s->text;
	m->len = s->len ? s->len : strlen(s->text);
	return 0;
}

void lib_request_digests(struct msg_request *const *ms, size_t n)
{
	struct msg_source *held = NULL;

	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < ms[i]->nsources; j++) {
			struct msg_source *s = &ms[i]->sources[j];

			if (s->text == NULL || s->has_digest)
				continue;
			s->has_digest = true;
			if (held == NULL) {
				held = s;
				continue;
			}
			sha256_buf2(held->text, held->len, held->digest, s->text, s->len, s->digest);
			held = NULL;
		}
	if (held != NULL)
		sha256_buf(held->text, held->len, held->digest);
}

void lib_request_with_text(struct msg_request *m)
{
	for (size_t i = 0; i < m->nsources; i++)
		m->sources[i].has_digest = false;
}

/* True when req's arguments are prev's (checked already), string for string. */
static bool same_args(const struct kiln_request *prev, const struct kiln_request *req)
{
	if (prev == NULL || prev->nargs != req->nargs || (req->nargs && !req->args))
		return false;
	for (size_t i = 0; i < req->nargs; i++)
		if (prev->args[i] != req->args[i] &&
		    (req->args[i] == NULL || strcmp(prev->args[i], req->args[i]) != 0))
			return false;
	return true;
}

/* Checks the request's arguments with the daemon's rules and text; a list
 * equal to prev's, which passed, passes (a batch's programs mostly share
 * one list: the allow-list's walk once per batch, not per program). */
static int request_args(const struct kiln_request *req, const struct kiln_request *prev)
{
	char why[256];
	size_t i;

	if (same_args(prev, req))
		return 0;
	if (req->nargs > MSG_MAX_ARGS)
		return lib_err_set(KILN_EINVAL, "too many compiler arguments: %zu (at most %d)",
				   req->nargs, MSG_MAX_ARGS);
	if (req->nargs && !req->args)
		return lib_err_set(KILN_EINVAL, "nargs is %zu but args is NULL", req->nargs);
	for (i = 0; i < req->nargs; i++) {
		if (!req->args[i])
			return lib_err_set(KILN_EINVAL, "compiler argument %zu is NULL", i);
		if (strlen(req->args[i]) > MSG_MAX_ARG_LEN)
			return lib_err_set(KILN_EINVAL, "compiler argument %zu is longer than %d bytes",
					   i, MSG_MAX_ARG_LEN);
	}
	/* Arguments that load code into the toolchain are the daemon's to
	 * allow (--allow-toolchain-code); the rest fail here already. */
	if (validate_args((const char *const *)req->args, req->nargs, NULL, why, sizeof(why)) ==
	    ARGS_REFUSED)
		return lib_err_set(KILN_EINVAL, "%s", why);
	return 0;
}

/*
 * Checks req with the rules the daemon enforces, so that a mistake costs no
 * round trip and reads the same, and fills m (whose strings are borrowed from
 * req: m must not be freed with msg_request_free; m->sources is malloc'd and
 * owned by the caller).
 */
int lib_request_check(const struct kiln_request *req, struct msg_request *m,
		      const struct kiln_request *prev)
{
	char why[256];
	size_t i;
	int rc;

	memset(m, 0, sizeof(*m));
	m->op = OP_GET;
	m->proto = -1;
	m->max_size = -1;
	m->toolchain = (char *)(req->toolchain ? req->toolchain
				: req->sources ? validate_default_toolchain(&req->sources[0].name,
									    req->nsources,
									    sizeof(*req->sources))
				: "cc");
	m->output = (char *)(req->output ? req->output : "shared");
	if (validate_toolchain_name(m->toolchain, why, sizeof(why)) < 0)
		return lib_err_set(KILN_EINVAL, "toolchain \"%s\": %s", m->toolchain, why);
	if (req->host_compiler &&
	    validate_compiler_path("host compiler", req->host_compiler, why, sizeof(why)) < 0)
		return lib_err_set(KILN_EINVAL, "%s", why);
	m->host_compiler = (char *)req->host_compiler;
	if (!*m->output)
		return lib_err_set(KILN_EINVAL, "the output kind is empty");
	if (req->alias && validate_alias(req->alias, why, sizeof(why)) < 0)
		return lib_err_set(KILN_EINVAL, "alias: %s", why);
	if (req->label && validate_label(req->label, why, sizeof(why)) < 0)
		return lib_err_set(KILN_EINVAL, "label: %s", why);
	rc = request_args(req, prev);
	if (rc < 0)
		return rc;
	if (!req->sources || req->nsources == 0)
		return lib_err_set(KILN_EINVAL, "the request has no sources");
	if (req->nsources > MSG_MAX_SOURCES)
		return lib_err_set(KILN_EINVAL, "too many sources: %zu (at most %d)", req->nsources,
				   MSG_MAX_SOURCES);
	m->sources = calloc(req->nsources, sizeof(*m->sources));
	if (!m->sources)
		return lib_err_set(KILN_ENOMEM, "out of memory");
	m->nsources = req->nsources;
	for (i = 0; i < req->nsources; i++) {
		rc = request_source(&req->sources[i], i, &m->sources[i]);
		if (rc < 0)
			return rc;
	}
	if (validate_source_set(&req->sources[0].name, req->nsources, sizeof(*req->sources), why,
				sizeof(why)) != 0)
		return lib_err_set(KILN_EINVAL, "%s", why);
	if (req->npch > MSG_MAX_PCH || (req->npch && !req->pch))
		return lib_err_set(KILN_EINVAL, "pch: %zu headers%s (at most %d)", req->npch,
				   req->pch ? "" : " but pch is NULL", MSG_MAX_PCH);
	for (i = 0; i < req->npch; i++) {
		if (!req->pch[i] || validate_source_name(req->pch[i], why, sizeof(why)) < 0)
			return lib_err_set(KILN_EINVAL, "pch header %zu: %s", i,
					   req->pch[i] ? why : "NULL");
	}
	m->pch = (char **)req->pch;
	m->npch = req->npch;
	m->args = (char **)req->args;
	m->nargs = req->nargs;
	m->alias = (char *)req->alias;
	m->label = (char *)req->label;
	return 0;
}

int lib_request_build(const struct kiln_request *req, struct msg_request *m)
{
	int rc = lib_request_check(req, m, NULL);
	struct msg_request *one = m;

	if (rc == 0)
		lib_request_digests(&one, 1);
	return rc;
}

/* Sends a get or lookup and loads what it names (when load); *data (when
 * data is not NULL) gets the reply's alias data (malloc'ed; NULL: none). */
static int kiln_fetch_data(struct kiln *k, struct msg_request *m, const char *alias, bool load,
			   struct kiln_program **out, char **data)
{
	cJSON *reply = NULL;
	int fd = -1, rc;

	rc = lib_conn_call(k, m, &reply, &fd);
	if (rc < 0)
		return rc;
	rc = lib_prog_from_reply(k, reply, fd, alias, load, out);
	if (rc == 0 && data != NULL) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(reply, "alias_data");
		if (cJSON_IsString(v) && (*data = strdup(v->valuestring)) == NULL)
			rc = lib_err_set(KILN_ENOMEM, "out of memory");
	}
	cJSON_Delete(reply);
	return rc;
}

static int kiln_fetch(struct kiln *k, struct msg_request *m, const char *alias, bool load,
		      struct kiln_program **out)
{
	return kiln_fetch_data(k, m, alias, load, out, NULL);
}

static int get_program(struct kiln *k, const struct kiln_request *req, const char *data,
		       bool load, struct kiln_program **out)
{
	struct msg_request m;
	struct kiln_program *p;
	int rc;

	if (!k || !req || !out)
		return lib_err_set(KILN_EINVAL, "%s: k, req and out must not be NULL",
				   load ? "kiln_get" : "kiln_get_file");
	*out = NULL;
	/* The fast path comes first: a loaded alias needs neither checks
	 * nor IPC (only valid aliases ever enter the table). A request that
	 * stores data with its alias always goes to kilnd. */
	if (req->alias && data == NULL) {
		p = lib_prog_by_alias(k, req->alias);
		if (p) {
			atomic_fetch_add_explicit(&k->local_hits, 1, memory_order_relaxed);
			*out = p;
			return 0;
		}
	}
	rc = lib_request_build(req, &m);
	m.alias_data = (char *)data;
	if (rc == 0)
		rc = kiln_fetch(k, &m, req->alias, load, out);
	if (rc == LIB_ENEEDSRC) {
		lib_request_with_text(&m);
		rc = kiln_fetch(k, &m, req->alias, load, out);
		if (rc == LIB_ENEEDSRC)
			rc = lib_err_set(KILN_EPROTO, "kilnd asked for the text of sources it was sent");
	}
	free(m.sources);
	return rc;
}

int kiln_get(struct kiln *k, const struct kiln_request *req, struct kiln_program **out)
{
	return get_program(k, req, NULL, true, out);
}

int kiln_get_file(struct kiln *k, const struct kiln_request *req, struct kiln_program **out)
{
	return get_program(k, req, NULL, false, out);
}

/* Padded base64 of at most MSG_ALIAS_DATA_MAX bytes, as kilnd requires. */
static bool alias_data_valid(const char *t)
{
	size_t n = strnlen(t, MSG_ALIAS_DATA_MAX + 1);
	return n <= MSG_ALIAS_DATA_MAX && validate_base64(t, n);
}

int kiln_get_file_data(struct kiln *k, const struct kiln_request *req, const char *alias_data,
		       struct kiln_program **out)
{
	if (req != NULL && alias_data != NULL && req->alias == NULL)
		return lib_err_set(KILN_EINVAL, "kiln_get_file_data: alias_data needs req->alias");
	if (alias_data != NULL && !alias_data_valid(alias_data)) {
		char lim[32];
		return lib_err_set(KILN_EINVAL, "kiln_get_file_data: alias_data must be padded "
				   "base64 of at most %s", util_format_size(MSG_ALIAS_DATA_MAX, lim,
									    sizeof(lim)));
	}
	return get_program(k, req, alias_data, false, out);
}

int kiln_lookup(struct kiln *k, const char *alias, struct kiln_program **out)
{
	struct msg_request m = { .op = OP_LOOKUP, .proto = -1, .max_size = -1 };
	struct kiln_program *p;
	char why[256];

	if (!k || !alias || !out)
		return lib_err_set(KILN_EINVAL, "kiln_lookup: k, alias and out must not be NULL");
	*out = NULL;
	p = lib_prog_by_alias(k, alias);
	if (p) {
		atomic_fetch_add_explicit(&k->local_hits, 1, memory_order_relaxed);
		*out = p;
		return 0;
	}
	if (validate_alias(alias, why, sizeof(why)) < 0)
		return lib_err_set(KILN_EINVAL, "alias: %s", why);
	m.alias = (char *)alias;
	return kiln_fetch(k, &m, alias, true, out);
}

int kiln_lookup_file(struct kiln *k, const char *alias, const char *toolchain,
		     struct kiln_program **out)
{
	return kiln_lookup_file_host(k, alias, toolchain, NULL, out);
}

/* A lookup of alias as a file, checked as kilnd checks it. */
static int lookup_file_request(struct msg_request *m, const char *alias, const char *toolchain,
			       const char *host_compiler)
{
	char why[256];

	*m = (struct msg_request){ .op = OP_LOOKUP, .proto = -1, .max_size = -1 };
	if (validate_alias(alias, why, sizeof(why)) < 0)
		return lib_err_set(KILN_EINVAL, "alias: %s", why);
	if (toolchain && validate_toolchain_name(toolchain, why, sizeof(why)) < 0)
		return lib_err_set(KILN_EINVAL, "toolchain \"%s\": %s", toolchain, why);
	if (host_compiler &&
	    validate_compiler_path("host compiler", host_compiler, why, sizeof(why)) < 0)
		return lib_err_set(KILN_EINVAL, "%s", why);
	m->alias = (char *)alias;
	m->toolchain = (char *)toolchain;
	m->host_compiler = (char *)host_compiler;
	return 0;
}

int kiln_lookup_file_host(struct kiln *k, const char *alias, const char *toolchain,
			  const char *host_compiler, struct kiln_program **out)
{
	struct msg_request m;

	if (!k || !alias || !out)
		return lib_err_set(KILN_EINVAL, "kiln_lookup_file: k, alias and out must not be NULL");
	*out = NULL;
	int rc = lookup_file_request(&m, alias, toolchain, host_compiler);
	/* Always asks kilnd: the fast path holds loaded programs only. */
	return rc < 0 ? rc : kiln_fetch(k, &m, NULL, false, out);
}

int kiln_lookup_claim(struct kiln *k, const char *alias, const char *toolchain,
		      const char *host_compiler, unsigned wait_ms, struct kiln_program **out)
{
	struct msg_request m;

	if (!k || !alias || !out)
		return lib_err_set(KILN_EINVAL, "kiln_lookup_claim: k, alias and out must not be NULL");
	*out = NULL;
	if (wait_ms > MSG_MAX_WAIT_MS)
		return lib_err_set(KILN_EINVAL, "wait_ms %u: at most %d", wait_ms, MSG_MAX_WAIT_MS);
	int rc = lookup_file_request(&m, alias, toolchain, host_compiler);
	if (rc < 0)
		return rc;
	m.claim = true;
	m.wait_ms = wait_ms;
	/* kilnd sends heartbeats while the lookup waits, so the call's
	 * deadline (kiln_set_timeout) only ends a silent kilnd's wait. */
	rc = kiln_fetch(k, &m, NULL, false, out);
	return rc == KILN_EHELD ? KILN_ENOTFOUND : rc;   /* as documented before it */
}

int kiln_lookup_data(struct kiln *k, const char *alias, const char *toolchain,
		     const char *host_compiler, int claim, unsigned wait_ms,
		     struct kiln_program **out, char **data)
{
	struct msg_request m;

	if (!k || !alias || !out || !data)
		return lib_err_set(KILN_EINVAL,
				   "kiln_lookup_data: k, alias, out and data must not be NULL");
	*out = NULL;
	*data = NULL;
	if (wait_ms > MSG_MAX_WAIT_MS)
		return lib_err_set(KILN_EINVAL, "wait_ms %u: at most %d", wait_ms, MSG_MAX_WAIT_MS);
	int rc = lookup_file_request(&m, alias, toolchain, host_compiler);
	if (rc < 0)
		return rc;
	m.claim = claim != 0;
	m.wait_ms = claim ? wait_ms : 0;
	return kiln_fetch_data(k, &m, NULL, false, out, data);
}

int kiln_release_claim(struct kiln *k, const char *alias)
{
	struct msg_request m = { .op = OP_RELEASE, .proto = -1, .max_size = -1 };
	cJSON *reply = NULL;
	char why[256];
	int fd = -1, rc;

	if (!k || !alias)
		return lib_err_set(KILN_EINVAL, "kiln_release_claim: k and alias must not be NULL");
	if (validate_alias(alias, why, sizeof(why)) < 0)
		return lib_err_set(KILN_EINVAL, "alias: %s", why);
	m.alias = (char *)alias;
	rc = lib_conn_call(k, &m, &reply, &fd);
	if (fd >= 0)
		close(fd);
	if (rc < 0)
		return rc;
	rc = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "released")) ? 1 : 0;
	cJSON_Delete(reply);
	return rc;
}

void kiln_get_stats(struct kiln *k, struct kiln_stats *out)
{
	if (!out)
		return;
	memset(out, 0, sizeof(*out));
	if (!k)
		return;
	out->requests = atomic_load(&k->requests);
	out->local_hits = atomic_load(&k->local_hits);
	out->loads = atomic_load(&k->loads);
}
