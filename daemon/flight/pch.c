/*
 * Precompiled headers managed by kilnd; see pch.h and docs/pch.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "flight.h"
#include "headers.h"
#include "hit.h"
#include "kilnd.h"
#include "log.h"
#include "pch.h"
#include "store.h"
#include "thread.h"
#include "util.h"
#include "validate.h"
#include "verify.h"

/* The generated header, as a source of the precompile and in the build
 * directory of the requests that use it. */
#define PCH_NAME_CXX "kiln_pch.hxx"
#define PCH_NAME_C "kiln_pch.h"

/* The language of a compiled source, for the header: 'c', 'x' (C++), or 0
 * (another: no precompiled header). */
static char source_lang(const char *name)
{
	char lang = validate_source_lang(name);
	return lang == 'c' || lang == 'x' ? lang : 0;
}

/* The language of in's first compiled source. */
static char input_lang(const struct build_input *in)
{
	for (size_t i = 0; i < in->nsrc; i++)
		if (!step_is_header(in->src[i].name))
			return source_lang(in->src[i].name);
	return 0;
}

const char *pch_include(const struct build_input *in)
{
	if (in->pch_rkey[0] == '\0')
		return NULL;
	return input_lang(in) == 'c' ? PCH_DIR "/" PCH_NAME_C : PCH_DIR "/" PCH_NAME_CXX;
}

bool pch_applies(const struct build_input *in, const char *name)
{
	return in->pch_rkey[0] != '\0' && source_lang(name) == input_lang(in);
}

bool pch_by_host(const struct build_input *in)
{
	return in->nsrc == 1 && strcmp(in->src[0].name, PCH_NAME_CXX) == 0 &&
	       step_host_direct(in, NULL);
}

/* Whether in's sources can use a .gch: its toolchain is gcc's, or it is
 * nvcc whose GCC host compiles in's C++ sources itself (step_host_direct);
 * clang and nvcc just include the text. */
static bool makes_gch(const struct build_input *in)
{
	if (in->tc->is_gcc)
		return true;
	return in->tc->host_cc_gcc && input_lang(in) == 'x' && step_host_direct(in, NULL);
}

/* "#include <h>" for each header named, in order. */
static char *pch_text(const struct msg_request *req, size_t *len)
{
	size_t cap = 1;
	for (size_t i = 0; i < req->npch; i++)
		cap += strlen(req->pch[i]) + 12;
	char *t = malloc(cap), *p = t;
	if (t == NULL)
		return NULL;
	for (size_t i = 0; i < req->npch; i++)
		p += sprintf(p, "#include <%s>\n", req->pch[i]);
	*len = (size_t)(p - t);
	return t;
}

/* The arguments of the precompile: the request's, less its libraries
 * (linker inputs; nothing else of a link reaches a header's compile). */
static int pch_args(const struct msg_request *req, struct msg_request *p)
{
	bool *lib = calloc(req->nargs + 1, sizeof(bool));
	p->args = calloc(req->nargs + 1, sizeof(char *));
	if (lib == NULL || p->args == NULL) {
		free(lib);
		return -ENOMEM;
	}
	validate_args_for((const char *const *)req->args, req->nargs, 0, lib, NULL, NULL, 0);
	for (size_t i = 0; i < req->nargs; i++) {
		if (lib[i])
			continue;
		if ((p->args[p->nargs] = strdup(req->args[i])) == NULL) {
			free(lib);
			return -ENOMEM;
		}
		p->nargs++;
	}
	free(lib);
	return 0;
}

/* The build input of in's precompiled header, keyed; NULL when out of
 * memory. */
static struct build_input *pch_input(const struct kilnd *d, const struct build_input *in, char lang)
{
	struct build_input *p = calloc(1, sizeof(*p));
	struct msg_request *r = p != NULL ? &p->req : NULL;
	char label[MSG_MAX_LABEL + 1];
	if (p == NULL)
		return NULL;
	r->op = OP_GET;
	r->proto = -1;
	r->max_size = -1;
	snprintf(label, sizeof(label), "precompiled %s%s", in->req.pch[0], in->req.npch > 1 ? ", ..." : "");
	r->toolchain = strdup(in->req.toolchain);
	r->output = strdup("pch");
	r->label = strdup(label);
	r->sources = calloc(1, sizeof(*r->sources));
	p->src = calloc(1, sizeof(*p->src));
	p->bufs = calloc(1, sizeof(*p->bufs));
	if (r->toolchain == NULL || r->output == NULL || r->label == NULL || r->sources == NULL ||
	    p->src == NULL || p->bufs == NULL || pch_args(&in->req, r) != 0)
		goto oom;
	r->nsources = p->nsrc = 1;
	r->sources[0].name = strdup(lang == 'c' ? PCH_NAME_C : PCH_NAME_CXX);
	r->sources[0].text = pch_text(&in->req, &r->sources[0].len);
	if (r->sources[0].name == NULL || r->sources[0].text == NULL)
		goto oom;
	p->src[0] = (struct key_source){ .name = r->sources[0].name, .text = r->sources[0].text,
					 .len = r->sources[0].len };
	p->tc = in->tc;
	key_request(p->tc, r->output, r->args, r->nargs, p->src, 1, d->cpu_id, p->rkey);
	return p;
oom:
	build_input_free(p);
	free(p);
	return NULL;
}

static int dep_copy(struct store_dep *to, const struct store_dep *from)
{
	*to = *from;
	to->path = strdup(from->path);
	return to->path != NULL ? 0 : -ENOMEM;
}

void pch_drop(struct build_input *in)
{
	for (size_t i = 0; i < in->npch_deps; i++)
		free(in->pch_deps[i].path);
	free(in->pch_deps);
	in->pch_deps = NULL;
	in->npch_deps = 0;
	in->pch_key[0] = '\0';
}

/* in uses the .gch entry e: its key and dependencies (the pool cannot read
 * the index). False when out of memory: then in uses none. */
static bool pch_take(struct build_input *in, const struct store_entry *e)
{
	in->pch_deps = calloc(e->ndeps + 1, sizeof(*in->pch_deps));
	for (size_t i = 0; in->pch_deps != NULL && i < e->ndeps; i++) {
		if (dep_copy(&in->pch_deps[i], &e->deps[i]) != 0)
			break;
		in->npch_deps++;
	}
	if (in->pch_deps == NULL || in->npch_deps != e->ndeps) {
		pch_drop(in);
		return false;
	}
	memcpy(in->pch_key, e->key, sizeof(in->pch_key));
	return true;
}

/* A valid .gch entry of rkey whose object is intact (hit.h; pch_settle
 * cannot wait for a hash), taken by in. */
static bool pch_lookup(struct kilnd *d, const char *rkey, struct build_input *in)
{
	struct hit h;
	const struct hit_query q = { .rkey = rkey, .may_wait = false };
	bool found = hit_find(d, &q, &h) == HIT_VALID && pch_take(in, &h.entry);
	/* A build that compiles with it is a use (kiln ls's USES, and
	 * eviction by last use). */
	if (found)
		kilnd_touch(d, h.entry.key);
	hit_free(&h);
	return found;
}

/* The first waiter of a .gch flight nobody waits for. */
static bool bg_gone(void *ctx)
{
	(void)ctx;
	return false;
}

static bool bg_done(void *ctx, uint64_t id, bool joined, const struct build_result *r)
{
	(void)ctx;
	(void)id;
	(void)joined;
	if (r->err_code != ERR_NONE)
		log_info("precompiled header %.16s failed: %s", r->rkey,
			 r->err_msg != NULL ? r->err_msg : "no reason");
	return false;
}

static void bg_release(void *ctx)
{
	(void)ctx;
}

static const struct waiter_ops bg_waiter = {
	.gone = bg_gone,
	.done = bg_done,
	.release = bg_release,
};

/* A backlog that a .gch would shorten: builds wait for slots already. */
static bool backlog(const struct kilnd *d)
{
	struct flight_counts fc;
	flight_counts(d, &fc);
	return fc.queued >= 2 * d->cfg->jobs;
}

void pch_settle(struct kilnd *d, struct build_input *in)
{
	ASSERT_LOOP();
	char lang = input_lang(in);
	in->pch_rkey[0] = in->pch_key[0] = '\0';
	if (in->req.npch == 0 || lang == 0 || strcmp(in->req.output, "shared") != 0)
		return;
	/* The headers are included whatever happens (pch_include); the
	 * .gch is for gcc only (makes_gch). */
	struct build_input *p = pch_input(d, in, lang);
	if (p == NULL) {
		log_error("out of memory for a precompiled header; building without it");
		return;
	}
	memcpy(in->pch_rkey, p->rkey, sizeof(in->pch_rkey));
	if (!makes_gch(in) || pch_lookup(d, p->rkey, in)) {
		build_input_free(p);
		free(p);
		return;
	}
	/* Never waited for: it runs when kilnd is otherwise idle, or first
	 * when builds queue up, and builds that start after it use it
	 * (pch_bind). */
	struct flight *b = flight_find(d, p->rkey);
	if (b != NULL) {
		if (backlog(d))
			flight_promote(b);
		build_input_free(p);
	} else {
		p->background = !backlog(d);
		(void)flight_start(d, p, &bg_waiter, NULL, 0);
	}
	free(p);
}

void pch_bind(struct kilnd *d, struct build_input *in, const char *dir)
{
	ASSERT_LOOP();
	if (in->pch_rkey[0] == '\0' || !makes_gch(in) || in->pch_refused)
		return;
	if (in->pch_key[0] == '\0' && !pch_lookup(d, in->pch_rkey, in))
		return;
	char path[4200];
	char *obj = store_object_path(d->store, in->pch_key, "pch");
	snprintf(path, sizeof(path), "%s/%s.gch", dir, pch_include(in));
	if (obj == NULL || symlink(obj, path) != 0) {
		log_error("cannot link the precompiled header into %s: %s; building without it",
			  dir, obj == NULL ? "out of memory" : strerror(errno));
		pch_drop(in);
	}
	free(obj);
}

int pch_place(struct store *s, const char *dir, const struct build_input *in)
{
	const char *inc = pch_include(in);
	char rel[4200];
	int tmp = store_tmp_fd(s);
	if (inc == NULL)
		return 0;
	snprintf(rel, sizeof(rel), "%s/" PCH_DIR, dir);
	if (mkdirat(tmp, rel, 0700) != 0)
		return -errno;
	size_t len = 0;
	char *text = pch_text(&in->req, &len);
	snprintf(rel, sizeof(rel), "%s/%s", dir, inc);
	int rc = text != NULL ? util_replace_file_at(tmp, rel, text, len, false) : -ENOMEM;
	free(text);
	return rc;
}

/* Whether two records of one dependency agree. */
static bool dep_same(const struct store_dep *a, const struct store_dep *b)
{
	if (a->kind == STORE_DEP_FILE || a->kind == STORE_DEP_ENV || a->kind == STORE_DEP_LISTING ||
	    a->kind == STORE_DEP_SEARCH)
		return a->mode == b->mode && memcmp(a->digest, b->digest, 32) == 0;
	if (a->kind == STORE_DEP_EXISTS)
		return a->mode == b->mode;
	return true;
}


int pch_merge_deps(const struct build_input *in, struct store_entry *e, char *why, size_t cap)
{
	if (in->pch_key[0] == '\0' || in->npch_deps == 0)
		return 0;
	struct store_dep *all = realloc(e->deps, (e->ndeps + in->npch_deps + 1) * sizeof(*all));
	if (all == NULL)
		return -ENOMEM;
	e->deps = all;
	size_t own = e->ndeps;
	for (size_t i = 0; i < in->npch_deps; i++) {
		const struct store_dep *pd = &in->pch_deps[i];
		size_t j = 0;
		while (j < own && !(e->deps[j].kind == pd->kind && strcmp(e->deps[j].path, pd->path) == 0))
			j++;
		if (j < own && !dep_same(&e->deps[j], pd)) {
			snprintf(why, cap, "%s changed after the precompiled header that holds it was built",
				 pd->path);
			return -EAGAIN;
		}
		if (j == own) {
			if (dep_copy(&e->deps[e->ndeps], pd) != 0)
				return -ENOMEM;
			e->ndeps++;
		}
	}
	return 0;
}
