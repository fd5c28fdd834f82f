/*
 * From a get-like request (get, put) to a build input and its request key:
 * inline when the sources are small, else on the thread pool (sources given
 * by path are read there), then the caller's next step on the loop thread.
 * Used by gets (op_get.c) and puts (op_put.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "flight.h"
#include "gpu.h"
#include "keying.h"
#include "kilnd.h"
#include "log.h"
#include "named.h"
#include "msg.h"
#include "server.h"
#include "util.h"

/* Requests with more inline source text than this are keyed on the pool. */
#define INLINE_KEY_MAX ((size_t)256 << 10)

struct keying_job {
	struct conn *c;
	struct build_input *in;
	struct msg_error err;
	int fd;
	keying_next_fn next;
};

/* The request key of in; the headers to precompile, when named, are in it. */
static void key_input(const struct kilnd *d, struct build_input *in)
{
	key_request(in->tc, in->req.output, in->req.args, in->req.nargs, in->src, in->nsrc,
		    d->cpu_id, in->rkey);
	if (in->req.npch > 0)
		key_request_pch(in->req.pch, in->req.npch, in->rkey);
}

/* Thread pool: reads sources given by path and computes the request key. */
static void keying_work(void *arg)
{
	struct keying_job *j = arg;
	struct build_input *in = j->in;
	struct kilnd *d = j->c->d;
	/* Sources by path may add up to no more than a frame of text could. */
	uint64_t total = 0;
	for (size_t i = 0; i < in->nsrc; i++)
		total += in->req.sources[i].path == NULL ? in->req.sources[i].len : 0;
	for (size_t i = 0; i < in->nsrc; i++) {
		const struct msg_source *s = &in->req.sources[i];
		if (s->path == NULL)
			continue;
		size_t len;
		struct stat st;
		/* A FIFO or a device would block a pool thread, or never end. */
		if (stat(s->path, &st) == 0 && !S_ISREG(st.st_mode)) {
			msg_error_set(&j->err, ERR_BAD_REQUEST, "sources",
				      "source %s is not a regular file", s->path);
			return;
		}
		int rc = util_read_file(s->path, d->cfg->max_frame, &in->bufs[i], &len);
		if (rc == -EFBIG) {
			char lim[32];
			msg_error_set(&j->err, ERR_TOO_LARGE, "sources",
				      "source %s is larger than %s, kilnd's limit for a source "
				      "(kilnd --max-frame raises it)", s->path,
				      util_format_size(d->cfg->max_frame, lim, sizeof(lim)));
			return;
		}
		if (rc != 0) {
			msg_error_set(&j->err, rc == -EFBIG ? ERR_TOO_LARGE : ERR_IO, "sources",
				      "cannot read source %s: %s", s->path, strerror(-rc));
			return;
		}
		in->src[i].text = in->bufs[i];
		in->src[i].len = len;
		total += len;
		if (total > d->cfg->max_frame) {
			char lim[32];
			msg_error_set(&j->err, ERR_TOO_LARGE, "sources",
				      "the sources add up to more than %s (--max-frame)",
				      util_format_size(d->cfg->max_frame, lim, sizeof(lim)));
			return;
		}
	}
	key_input(d, in);
}

static void keying_done(void *arg, int status)
{
	struct keying_job *j = arg;
	struct conn *c = j->c;
	if (status != 0)
		msg_error_set(&j->err, ERR_INTERNAL, NULL, "the request's keying did not run: %s",
			      uv_strerror(status));
	if (c->dead) {
		build_input_free(j->in);
		free(j->in);
	} else if (c->d->stopping) {
		conn_reply_error(c, j->in->req.id, ERR_SHUTTING_DOWN, NULL, "kilnd is shutting down");
		build_input_free(j->in);
		free(j->in);
	} else if (j->err.code != ERR_NONE) {
		conn_reply_error(c, j->in->req.id, j->err.code, j->err.field, "%s", j->err.message);
		build_input_free(j->in);
		free(j->in);
	} else {
		j->next(c, j->in, j->fd);
		j->fd = -1;
	}
	if (j->fd >= 0)
		close(j->fd);
	conn_unref(c);
	free(j);
}

/* nvcc runs its steps through a shell: no shell characters in its
 * arguments. GPU outputs need nvcc and one compiled source; nvcc needs an
 * architecture (from the request, --cuda-arch or the node's GPUs). Answers
 * and returns true when req cannot be built. */
static bool gpu_request_refused(struct conn *c, const struct msg_request *req,
				const struct toolchain *tc)
{
	bool gpu_output = strcmp(req->output, "shared") != 0;
	size_t compiled = 0;
	char why[256];
	if (tc->is_nvcc && validate_args_for((const char *const *)req->args, req->nargs, ARGS_SHELL,
					     NULL, NULL, why, sizeof(why)) == ARGS_REFUSED) {
		conn_reply_error(c, req->id, ERR_BAD_ARG, "args", "%s", why);
		return true;
	}
	for (size_t i = 0; i < req->nsources; i++)
		compiled += !step_is_header(req->sources[i].name);
	if (gpu_output && !tc->is_nvcc) {
		conn_reply_error(c, req->id, ERR_BAD_REQUEST, "output",
				 "output \"%s\" needs an nvcc toolchain; \"%s\" is %s", req->output,
				 tc->name, tc->real_path);
		return true;
	}
	if (gpu_output && compiled != 1) {
		conn_reply_error(c, req->id, ERR_BAD_REQUEST, "sources",
				 "output \"%s\" is built from one .cu source (and headers); got %zu",
				 req->output, compiled);
		return true;
	}
	if (tc->is_nvcc && tc->cuda_arch != NULL && strchr(tc->cuda_arch, ',') != NULL &&
	    (strcmp(req->output, "cubin") == 0 || strcmp(req->output, "ptx") == 0) &&
	    !key_args_name_arch(req->args, req->nargs)) {
		conn_reply_error(c, req->id, ERR_BAD_REQUEST, "args",
				 "a %s holds one architecture and kilnd targets %s; name one with "
				 "-arch=sm_XY, or ask for a fatbin", req->output, tc->cuda_arch);
		return true;
	}
	if (tc->is_nvcc && tc->cuda_arch == NULL && !key_args_name_arch(req->args, req->nargs)) {
		const struct gpus *g = c->d->gpus;
		conn_reply_error(c, req->id, ERR_BAD_REQUEST, "args",
				 "no GPU architecture for this request: this node has no GPU (%s) and "
				 "kilnd has no --cuda-arch; add -arch=sm_XY to the arguments",
				 g != NULL && g->note[0] != '\0' ? g->note : "none found");
		return true;
	}
	return false;
}

/* Refuses what cannot be keyed (an unknown toolchain, nothing to compile,
 * a GPU request without an architecture): true after answering. */
static bool keying_refused(struct conn *c, const struct msg_request *req,
			   const struct toolchain *tc)
{
	bool any_compiled = false;

	for (size_t i = 0; i < req->nsources; i++)
		any_compiled = any_compiled || !step_is_header(req->sources[i].name);
	if (!any_compiled) {
		conn_reply_error(c, req->id, ERR_BAD_REQUEST, "sources",
				 "every source is a header; nothing to compile");
		return true;
	}
	if (req->npch > 0 && strcmp(req->output, "shared") != 0) {
		conn_reply_error(c, req->id, ERR_BAD_REQUEST, "pch",
				 "precompiled headers (\"pch\") apply to output \"shared\", not \"%s\"",
				 req->output);
		return true;
	}
	return gpu_request_refused(c, req, tc);
}

/* The build input of req, which it takes over (req is zeroed); NULL when
 * out of memory (req untouched). */
static struct build_input *input_of(struct msg_request *req, const struct toolchain *tc)
{
	struct build_input *in = calloc(1, sizeof(*in));
	if (in == NULL || (in->src = calloc(req->nsources, sizeof(*in->src))) == NULL ||
	    (in->bufs = calloc(req->nsources, sizeof(*in->bufs))) == NULL) {
		if (in != NULL)
			free(in->src);
		free(in);
		return NULL;
	}
	in->req = *req;
	memset(req, 0, sizeof(*req));
	in->tc = tc;
	in->nsrc = in->req.nsources;
	for (size_t i = 0; i < in->nsrc; i++) {
		in->src[i].name = in->req.sources[i].name;
		in->src[i].text = in->req.sources[i].text;
		in->src[i].len = in->req.sources[i].len;
		if (in->req.sources[i].has_digest) {
			in->src[i].digest = in->req.sources[i].digest;
			in->by_digest = true;
		}
	}
	return in;
}

/* True when the key can be computed inline: small texts, nothing to read. */
static bool key_inline(const struct build_input *in)
{
	size_t inline_len = 0;

	for (size_t i = 0; i < in->req.nsources; i++) {
		if (in->req.sources[i].path != NULL)
			return false;
		inline_len += in->req.sources[i].len;
	}
	return inline_len <= INLINE_KEY_MAX;
}

/* A request whose toolchain, named by path, is being identified (named.h):
 * what it asked, taken over, until that is over. */
struct parked_keying {
	struct conn *c;
	struct msg_request req;
	int fd;
	keying_next_fn next;
};

static void unpark_keying(void *arg)
{
	struct parked_keying *p = arg;
	if (!p->c->dead)
		keying_request(p->c, &p->req, p->fd, p->next);
	else if (p->fd >= 0)
		close(p->fd);
	msg_request_free(&p->req);
	conn_unref(p->c);
	free(p);
}

/* The toolchain req names, or NULL when it was answered or parked (then
 * req and fd were taken over: *parked). */
static const struct toolchain *toolchain_of(struct conn *c, struct msg_request *req, int fd,
					    keying_next_fn next, bool *parked)
{
	char why[1024];
	const struct toolchain *tc = NULL;
	*parked = false;
	/* A configured name: nothing to wait for, nothing to allocate. */
	if (req->toolchain[0] != '/' && req->host_compiler == NULL) {
		if ((tc = kilnd_toolchain(c->d, req->toolchain)) == NULL) {
			/* the names it has, or a compiler by path, are what to give */
			char names[512] = "";
			for (size_t i = 0; i < c->d->ntoolchains; i++)
				snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
					 i ? ", " : "", c->d->toolchains[i].name);
			conn_reply_error(c, req->id, ERR_BAD_TOOLCHAIN, "toolchain",
					 "toolchain \"%s\" is not configured; kilnd has %s (kilnd "
					 "--toolchain NAME=PATH adds one), or name a compiler by its "
					 "absolute path", req->toolchain, names[0] ? names : "none");
		}
		return tc;
	}
	struct parked_keying *p = calloc(1, sizeof(*p));
	if (p == NULL) {
		conn_reply_error(c, req->id, ERR_INTERNAL, NULL, "out of memory");
		return NULL;
	}
	switch (named_find(c->d, req->toolchain, req->host_compiler, c->uid, &tc, unpark_keying, p,
			   why, sizeof(why))) {
	case NAMED_READY:
		free(p);
		if (req->host_compiler != NULL && !tc->is_nvcc) {
			conn_reply_error(c, req->id, ERR_BAD_TOOLCHAIN, "host_compiler",
					 "a host compiler is for nvcc, and %s is not nvcc", req->toolchain);
			return NULL;
		}
		return tc;
	case NAMED_PENDING:
		*p = (struct parked_keying){ .c = c, .req = *req, .fd = fd, .next = next };
		memset(req, 0, sizeof(*req));
		conn_ref(c);
		*parked = true;
		return NULL;
	default:
		free(p);
		conn_reply_error(c, req->id, ERR_BAD_TOOLCHAIN,
				 req->host_compiler != NULL ? "host_compiler" : "toolchain", "%s", why);
		return NULL;
	}
}

void keying_request(struct conn *c, struct msg_request *req, int fd, keying_next_fn next)
{
	struct kilnd *d = c->d;
	bool parked;
	const struct toolchain *tc = toolchain_of(c, req, fd, next, &parked);
	struct build_input *in = NULL;
	struct keying_job *j = NULL;

	if (parked)
		return;
	if (tc == NULL || keying_refused(c, req, tc))
		goto drop;
	if ((in = input_of(req, tc)) == NULL) {
		conn_reply_error(c, req->id, ERR_INTERNAL, NULL, "out of memory");
		goto drop;
	}
	if (key_inline(in)) {
		key_input(d, in);
		next(c, in, fd);
		return;
	}
	if ((j = calloc(1, sizeof(*j))) == NULL) {
		conn_reply_error(c, in->req.id, ERR_INTERNAL, NULL, "out of memory");
		goto drop;
	}
	*j = (struct keying_job){ .c = c, .in = in, .fd = fd, .next = next };
	if (conn_queue_work(c, in->req.id, POOL_KEYING, keying_work, keying_done, j) == 0)
		return;
	free(j);
drop:
	if (in != NULL) {
		build_input_free(in);
		free(in);
	}
	if (fd >= 0)
		close(fd);
}

