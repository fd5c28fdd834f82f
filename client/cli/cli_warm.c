/*
 * kiln warm MANIFEST.json: builds (or finds) a list of programs through the
 * daemon, many requests in flight on one connection so that kilnd keeps all
 * its --jobs busy, with a live progress line on a terminal.
 *
 * The manifest is {"requests": [REQUEST, ...]} or a bare array. A REQUEST
 * has "sources" (required: each a path string, relative to the manifest's
 * directory, or {"name", "path"} or {"name", "text"}), and optionally
 * "toolchain" (default "cc"; a configured name or a compiler's absolute path),
 * "host_compiler" (nvcc's, by absolute path), "output", "args", "alias" and
 * "label".
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "validate.h"
#include "util.h"

/* Requests written ahead of their replies (see MANY_WINDOW in lib_many.c). */
#define WARM_WINDOW 64
#define WARM_MAX_REQUESTS 100000

struct warm_item {
	struct msg_request req;
	char *payload;
	size_t len;
	int rc;              /* 0 ok, 1 failed, -1 not answered yet */
	bool cached, joined;
	uint64_t build_ms;
	char key[65];
	char *error;         /* the daemon's message, malloc'd */
	char *log;           /* the compiler's output of a failed build, malloc'd */
};

struct warm {
	struct cli *cli;
	struct warm_item *items;
	size_t n, sent, done, failed, built, cached;
	double start;
	bool tty;
	char *dir;           /* the manifest's directory */
	/* What kilnd does (its status, at most twice a second, for the
	 * progress line): builds holding a slot and builds queued. */
	double status_at;
	long building, queued;
};

static double now_s(void)
{
	return (double)util_now_ns() / 1e9;
}

static char *str_dup_json(const cJSON *o, const char *name, bool *bad)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	if (v == NULL || cJSON_IsNull(v))
		return NULL;
	if (!cJSON_IsString(v)) {
		*bad = true;
		return NULL;
	}
	return strdup(v->valuestring);
}

/* A path from the manifest, relative to its directory, made absolute. */
static char *manifest_path(const struct warm *w, const char *p)
{
	char *joined = NULL, *real;
	if (p[0] != '/' && asprintf(&joined, "%s/%s", w->dir, p) < 0)
		return NULL;
	real = realpath(joined != NULL ? joined : p, NULL);
	free(joined);
	return real;
}

/* True when o has no member but those in known; else says which (a typo
 * such as "arg" for "args" must not be dropped in silence). */
static bool only_known(const cJSON *o, const char *const *known, const char *where)
{
	const cJSON *m;
	cJSON_ArrayForEach(m, o) {
		size_t i = 0;
		while (known[i] != NULL && strcmp(known[i], m->string) != 0)
			i++;
		if (known[i] == NULL) {
			char list[256] = "";
			for (i = 0; known[i] != NULL; i++)
				snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
					 i ? ", " : "", known[i]);
			cli_error("%s: unknown key \"%s\" (known: %s)", where, m->string, list);
			return false;
		}
	}
	return true;
}

/* Fills one source from a path string or a {"name", "path"|"text"} object. */
static int warm_parse_source(const struct warm *w, const cJSON *s, struct msg_source *src, size_t i,
			size_t r)
{
	const char *path = cJSON_IsString(s) ? s->valuestring :
			   cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s, "path"));
	const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s, "name"));
	const char *text = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s, "text"));
	static const char *const known[] = { "name", "path", "text", NULL };
	char where[64];

	snprintf(where, sizeof(where), "manifest request %zu: source %zu", r, i);
	if (cJSON_IsObject(s) && !only_known(s, known, where))
		return -1;
	if (path != NULL) {
		src->path = manifest_path(w, path);
		if (src->path == NULL) {
			cli_error("manifest request %zu: source %zu: cannot read %s: %s", r, i, path,
				  strerror(errno));
			return -1;
		}
		const char *slash = strrchr(path, '/');
		src->name = strdup(name != NULL ? name : slash != NULL ? slash + 1 : path);
	} else if (name != NULL && text != NULL) {
		src->name = strdup(name);
		src->text = strdup(text);
		src->len = strlen(text);
	} else {
		cli_error("manifest request %zu: source %zu is neither a path nor {\"name\", \"path\"} "
			  "or {\"name\", \"text\"}", r, i);
		return -1;
	}
	return src->name != NULL ? 0 : -1;
}

static int parse_request(struct warm *w, const cJSON *o, struct warm_item *it, size_t r)
{
	const cJSON *srcs = cJSON_GetObjectItemCaseSensitive(o, "sources");
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(o, "args");
	bool bad = false;
	size_t i = 0;
	const cJSON *s;

	static const char *const known[] = { "sources", "toolchain", "host_compiler", "output",
					     "args", "alias", "label", NULL };
	char where[48];

	cli_request_init(&it->req, OP_GET);
	snprintf(where, sizeof(where), "manifest request %zu", r);
	if (cJSON_IsObject(o) && !only_known(o, known, where))
		return -1;
	if (!cJSON_IsObject(o) || !cJSON_IsArray(srcs) || cJSON_GetArraySize(srcs) == 0 ||
	    cJSON_GetArraySize(srcs) > MSG_MAX_SOURCES) {
		cli_error("manifest request %zu: needs \"sources\", an array of 1 to %d sources", r,
			  MSG_MAX_SOURCES);
		return -1;
	}
	it->req.toolchain = str_dup_json(o, "toolchain", &bad);
	it->req.output = str_dup_json(o, "output", &bad);
	it->req.alias = str_dup_json(o, "alias", &bad);
	it->req.label = str_dup_json(o, "label", &bad);
	it->req.host_compiler = str_dup_json(o, "host_compiler", &bad);
	if (args != NULL && !cJSON_IsArray(args))
		bad = true;
	it->req.nargs = (size_t)cJSON_GetArraySize(args);
	it->req.args = calloc(it->req.nargs + 1, sizeof(char *));
	cJSON_ArrayForEach(s, args) {
		if (!cJSON_IsString(s) || it->req.args == NULL) {
			bad = true;
			break;
		}
		it->req.args[i++] = strdup(s->valuestring);
	}
	if (bad) {
		cli_error("manifest request %zu: toolchain, host_compiler, output, alias, label must be "
			  "strings and "
			  "args an array of strings", r);
		return -1;
	}
	/* Relative include and library directories, like the sources, are
	 * the manifest directory's. */
	char **owned = calloc(it->req.nargs + 1, sizeof(*owned));
	if (owned == NULL)
		return -1;
	char **before = calloc(it->req.nargs + 1, sizeof(*before));
	if (before == NULL) {
		free(owned);
		return -1;
	}
	memcpy(before, it->req.args, it->req.nargs * sizeof(*before));
	cli_absolute_args(it->req.args, it->req.nargs, w->dir, owned);
	for (size_t k = 0; k < it->req.nargs; k++)
		if (owned[k] != NULL)
			free(before[k]);  /* args[k] is owned[k] now */
	free(before);
	free(owned);
	it->req.nsources = (size_t)cJSON_GetArraySize(srcs);
	it->req.sources = calloc(it->req.nsources, sizeof(*it->req.sources));
	if (it->req.sources == NULL)
		return -1;
	i = 0;
	cJSON_ArrayForEach(s, srcs)
		if (warm_parse_source(w, s, &it->req.sources[i], i, r) != 0)
			return -1;
		else
			i++;
	/* None given: by the first compiled source's language (as kiln build). */
	if (it->req.toolchain == NULL &&
	    (it->req.toolchain = strdup(validate_default_toolchain(
		     (const char *const *)&it->req.sources[0].name, it->req.nsources,
		     sizeof(*it->req.sources)))) == NULL)
		return -1;
	it->rc = -1;
	return 0;
}

static int load_manifest(struct warm *w, const char *file)
{
	char *text = NULL, *real = realpath(file, NULL);
	size_t len;
	cJSON *root, *list;
	int rc = -1;

	if (real == NULL || util_read_file(real, 64u << 20, &text, &len) != 0) {
		cli_error("cannot read %s: %s", file, strerror(errno));
		free(real);
		return -1;
	}
	*strrchr(real, '/') = '\0';
	w->dir = real;
	const char *end = NULL;
	root = cJSON_ParseWithLengthOpts(text, len, &end, false);
	if (root == NULL) {
		/* where the JSON stops being JSON: a truncated or hand-edited file */
		size_t at = end != NULL && end >= text ? (size_t)(end - text) : 0, line = 1, col = 1;
		for (size_t i = 0; i < at && i < len; i++, col++)
			if (text[i] == '\n')
				line++, col = 0;
		cli_error("%s is not valid JSON from line %zu, column %zu (byte %zu of %zu): "
			  "truncated or mistyped there", file, line, col, at, len);
		free(text);
		goto out;
	}
	free(text);
	list = cJSON_IsArray(root) ? root : cJSON_GetObjectItemCaseSensitive(root, "requests");
	static const char *const known[] = { "requests", NULL };
	if (cJSON_IsObject(root) && !only_known(root, known, file))
		goto out;
	if (!cJSON_IsArray(list)) {
		cli_error("%s is not a manifest: expected {\"requests\": [...]} or a JSON array", file);
		goto out;
	}
	w->n = (size_t)cJSON_GetArraySize(list);
	if (w->n == 0 || w->n > WARM_MAX_REQUESTS) {
		cli_error("%s has %zu requests; a manifest has 1 to %d", file, w->n, WARM_MAX_REQUESTS);
		goto out;
	}
	w->items = calloc(w->n, sizeof(*w->items));
	if (w->items == NULL)
		goto out;
	size_t i = 0;
	const cJSON *o;
	cJSON_ArrayForEach(o, list) {
		if (parse_request(w, o, &w->items[i], i) != 0)
			goto out;
		i++;
	}
	rc = 0;
out:
	cJSON_Delete(root);
	return rc;
}

/* "[3/10] 1 failed, 4 in flight, 12 s elapsed, ETA 28 s", redrawn in place. */
/* kilnd's builds running and queued now, from its status (a second
 * connection; -1 each when it cannot be asked). */
static void kilnd_load(struct warm *w)
{
	struct cli_conn c;
	struct msg_request req;
	cJSON *reply = NULL;
	w->status_at = now_s();
	w->building = w->queued = -1;
	if (cli_conn_open(w->cli, &c) < 0)
		return;
	cli_request_init(&req, OP_STATUS);
	if (cli_call(w->cli, &c, &req, &reply) == 0 && cli_json_true(reply, "ok")) {
		uint64_t v;
		if (cli_json_u64(reply, "in_flight", &v))
			w->building = (long)v;
		if (cli_json_u64(reply, "queued", &v))
			w->queued = (long)v;
	}
	cJSON_Delete(reply);
	cli_conn_close(&c);
}

static void warm_progress(struct warm *w, bool final)
{
	double el = now_s() - w->start;
	if (!w->tty)
		return;
	if (!final && now_s() - w->status_at >= 0.5)
		kilnd_load(w);
	if (!final && w->building >= 0)
		fprintf(stderr, "\r\033[K[%zu/%zu] %zu failed; kilnd: %ld building, %ld queued; "
			"%.0f s elapsed", w->done, w->n, w->failed, w->building, w->queued, el);
	else
		fprintf(stderr, "\r\033[K[%zu/%zu] %zu failed, %zu waiting, %.0f s elapsed",
			w->done, w->n, w->failed, w->sent - w->done, el);
	if (w->done > 0 && w->done < w->n)
		fprintf(stderr, ", ETA %.0f s", el / (double)w->done * (double)(w->n - w->done));
	if (final)
		fputc('\n', stderr);
	fflush(stderr);
}

static const char *item_name(const struct warm_item *it, char *buf, size_t len, size_t i)
{
	if (it->req.alias != NULL)
		return it->req.alias;
	snprintf(buf, len, "#%zu (%s)", i, it->req.sources[0].name);
	return buf;
}

/* "failed NAME: message" on stdout, the compiler's output whole on stderr
 * (as kiln build prints it). */
static void print_failure(const struct warm_item *it, const char *name)
{
	printf("failed %s: %s\n", name, it->error != NULL ? it->error : "not answered");
	if (it->log == NULL)
		return;
	fflush(stdout);
	size_t len = strlen(it->log);
	fwrite(it->log, 1, len, stderr);
	if (len > 0 && it->log[len - 1] != '\n')
		fputc('\n', stderr);
}

static void warm_record(struct warm *w, const cJSON *reply)
{
	uint64_t id = 0;
	cli_json_u64(reply, "id", &id);
	if (id < 1 || id > w->n || w->items[id - 1].rc != -1)
		return;
	struct warm_item *it = &w->items[id - 1];
	char buf[300];
	w->done++;
	if (cli_json_true(reply, "ok")) {
		const char *key = cli_json_str(reply, "key");
		it->rc = 0;
		snprintf(it->key, sizeof(it->key), "%s", key != NULL ? key : "");
		it->cached = cli_json_true(reply, "cached");
		it->joined = cli_json_true(reply, "joined");
		cli_json_u64(reply, "build_ms", &it->build_ms);
		if (it->cached)
			w->cached++;
		else
			w->built++;
	} else {
		const cJSON *err = cJSON_GetObjectItemCaseSensitive(reply, "error");
		const char *msg = cli_json_str(err, "message");
		const char *log = cli_json_str(err, "log");
		it->rc = 1;
		it->error = strdup(msg != NULL ? msg : "failed");
		it->log = log != NULL && *log ? strdup(log) : NULL;
		w->failed++;
	}
	if (w->tty || w->cli->json)
		return;
	if (it->rc != 0) {
		print_failure(it, item_name(it, buf, sizeof(buf), id - 1));
		return;
	}
	printf("%s %s %s", it->cached ? "cached" : it->joined ? "joined" : "built ", it->key,
	       item_name(it, buf, sizeof(buf), id - 1));
	printf(!it->cached ? " (%llu ms)\n" : "\n", (unsigned long long)it->build_ms);
	fflush(stdout);
}

/* Keeps WARM_WINDOW requests in flight until every one is answered. */
/* Set by SIGINT or SIGTERM during warm: stop, say what was done, and hang
 * up (kilnd then cancels what nobody waits for). */
static volatile sig_atomic_t warm_stop;

static void on_stop_signal(int sig)
{
	warm_stop = sig;
}

static int warm_run(struct warm *w, struct cli_conn *c)
{
	while (w->done < w->n) {
		while (w->sent < w->n && w->sent - w->done < WARM_WINDOW) {
			struct warm_item *it = &w->items[w->sent];
			it->req.id = w->sent + 1;
			it->payload = msg_request_pack(&it->req, &it->len);
			int rc = it->payload != NULL ? wire_send_frame(&c->wc, it->payload, it->len) : -ENOMEM;
			free(it->payload);
			it->payload = NULL;
			if (rc < 0) {
				cli_error("cannot send request %zu to kilnd at %s: %s", w->sent,
					  w->cli->socket, strerror(-rc));
				return rc;
			}
			w->sent++;
		}
		/* Redraw at least twice a second while compilers run; a signal
		 * interrupts the wait. */
		if (c->wc.rlen <= c->wc.roff) {
			struct pollfd pfd = { .fd = c->wc.fd, .events = POLLIN };
			int ready = poll(&pfd, 1, 500);
			if (warm_stop)
				return -EINTR;
			if (ready <= 0) {
				if (w->tty)
					warm_progress(w, false);
				continue;
			}
		}
		char *buf;
		size_t blen;
		int rc = wire_recv_frame(&c->wc, &buf, &blen);
		if (rc < 0) {
			cli_error("lost kilnd at %s after %zu of %zu replies: %s", w->cli->socket, w->done,
				  w->n, strerror(-rc));
			return rc;
		}
		cJSON *reply = cJSON_ParseWithLength(buf, blen);
		free(buf);
		if (cli_json_true(reply, "fd")) {
			int fd = wire_take_fd(&c->wc);
			if (fd >= 0)
				close(fd);
		}
		warm_record(w, reply);
		cJSON_Delete(reply);
		warm_progress(w, false);
	}
	return 0;
}

static void print_json(const struct warm *w, double elapsed)
{
	cJSON *o = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(o, "results");
	cJSON_AddNumberToObject(o, "requests", (double)w->n);
	cJSON_AddNumberToObject(o, "built", (double)w->built);
	cJSON_AddNumberToObject(o, "cached", (double)w->cached);
	cJSON_AddNumberToObject(o, "failed", (double)w->failed);
	cJSON_AddNumberToObject(o, "elapsed_s", elapsed);
	cJSON_AddBoolToObject(o, "interrupted", warm_stop != 0);
	for (size_t i = 0; arr != NULL && i < w->n; i++) {
		const struct warm_item *it = &w->items[i];
		cJSON *r = cJSON_CreateObject();
		if (r == NULL || !cJSON_AddItemToArray(arr, r)) {
			cJSON_Delete(r);
			break;
		}
		cJSON_AddBoolToObject(r, "ok", it->rc == 0);
		if (it->req.alias != NULL)
			cJSON_AddStringToObject(r, "alias", it->req.alias);
		if (it->rc == 0) {
			cJSON_AddStringToObject(r, "key", it->key);
			cJSON_AddBoolToObject(r, "cached", it->cached);
			cJSON_AddNumberToObject(r, "build_ms", (double)it->build_ms);
		} else {
			cJSON_AddStringToObject(r, "error", it->error != NULL ? it->error : "not answered");
			if (it->log != NULL)
				cJSON_AddStringToObject(r, "log", it->log);
		}
	}
	cli_print_json(o);
	cJSON_Delete(o);
}

static void cli_warm_free(struct warm *w)
{
	for (size_t i = 0; w->items != NULL && i < w->n; i++) {
		/* Every string of a request is its own (msg_request_free's rule). */
		msg_request_free(&w->items[i].req);
		free(w->items[i].error);
		free(w->items[i].log);
	}
	free(w->items);
	free(w->dir);
}

int cmd_warm(struct cli *cli, int argc, char **argv)
{
	struct warm w = { .cli = cli };
	struct cli_conn c = { .wc.fd = -1 };
	const char *refs[2];
	int nrefs, status;

	status = cli_parse_refs(cli, argc, argv, refs, 1, &nrefs);
	if (status >= 0)
		return status;
	if (nrefs != 1)
		return cli_usage_error(cli, "warm needs a MANIFEST.json");
	status = CLI_EXIT_ERROR;
	if (load_manifest(&w, refs[0]) != 0 || cli_conn_require(cli, &c) < 0)
		goto out;
	w.tty = !cli->json && isatty(STDERR_FILENO) && isatty(STDOUT_FILENO);
	w.start = now_s();
	struct sigaction sa = { .sa_handler = on_stop_signal }, old_int, old_term;
	sigemptyset(&sa.sa_mask);
	warm_stop = 0;
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	int rc = warm_run(&w, &c);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	double elapsed = now_s() - w.start;
	warm_progress(&w, true);
	if (rc == -EINTR) {
		/* Hanging up first: kilnd cancels the builds only we waited for. */
		cli_conn_close(&c);
		cli_error_code("interrupted");
		cli_error("interrupted by signal %d after %zu of %zu answers; the builds nobody else "
			  "waits for are cancelled", (int)warm_stop, w.done, w.n);
	}
	if (cli->json)
		print_json(&w, elapsed);
	else {
		if (w.tty)
			for (size_t i = 0; i < w.n; i++)
				if (w.items[i].rc == 1) {
					char buf[300];
					print_failure(&w.items[i],
						      item_name(&w.items[i], buf, sizeof(buf), i));
				}
		printf("warmed %zu of %zu programs in %.1f s: %zu built, %zu cached, %zu failed\n",
		       w.done - w.failed, w.n, elapsed, w.built, w.cached, w.failed);
	}
	status = cli_finish_stdout(rc == 0 && w.failed == 0 ? CLI_EXIT_OK : CLI_EXIT_ERROR);
	if (rc == -EINTR)
		status = 128 + (int)warm_stop;
out:
	cli_conn_close(&c);
	cli_warm_free(&w);
	return status;
}
