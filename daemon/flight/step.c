/*
 * Compiler steps of a build. One source compiles and links in one step;
 * several compile in steps of their own (each with its own dependency file,
 * since a single driver call writes the dependencies of its last source
 * only), side by side in free --jobs slots, and then link. A load check
 * follows. Every step runs through kiln-exec in a new session, with its
 * output captured through a pipe of its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "flight.h"
#include "args.h"
#include "flight_int.h"
#include "child.h"
#include "prehash.h"
#include "kilnd.h"
#include "diag.h"
#include "hostcc.h"
#include "log.h"
#include "pch.h"
#include "standby_msg.h"
#include "tcenv.h"
#include "thread.h"
#include "validate.h"

#define ARTIFACT "out/artifact"

bool step_is_header(const char *name)
{
	return validate_is_header(name);
}

bool step_host_direct(const struct build_input *in, const char *name)
{
	const struct toolchain *tc = in->tc;
	if (!tc->is_nvcc || tc->host_cc == NULL || tc->host_incs == NULL)
		return false;
	if (name != NULL && validate_source_lang(name) != 'x')
		return false;
	return hostcc_understood((const char *const *)in->req.args, in->req.nargs);
}

/* Indices of the sources that are compiled (headers are only placed). */
static size_t compiled_sources(const struct flight *b, size_t *idx)
{
	size_t n = 0;
	for (size_t i = 0; i < b->in.nsrc; i++) {
		if (!step_is_header(b->in.src[i].name))
			idx[n++] = i;
	}
	return n;
}

struct argv_buf {
	char **v;
	size_t n, cap;
	bool oom;
};

static void push(struct argv_buf *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void push(struct argv_buf *a, const char *fmt, ...)
{
	if (a->oom)
		return;
	if (a->n + 2 > a->cap) {
		size_t ncap = a->cap == 0 ? 32 : a->cap * 2;
		char **nv = realloc(a->v, ncap * sizeof(*nv));
		if (nv == NULL) {
			a->oom = true;
			return;
		}
		a->v = nv;
		a->cap = ncap;
	}
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&a->v[a->n], fmt, ap) < 0)
		a->oom = true;
	else
		a->v[++a->n] = NULL;
	va_end(ap);
}

static void step_argv_free(struct argv_buf *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a->v);
}

/* Client arguments go before the inputs, except libraries, which a linker
 * with --as-needed only honours after the objects that use them. */
static void push_args(struct argv_buf *a, const struct flight *b, bool libs)
{
	size_t n = b->in.req.nargs;
	bool *lib = calloc(n + 1, sizeof(bool));
	if (lib == NULL) {
		a->oom = true;
		return;
	}
	/* Only real library arguments move: "-lm" as the value of -Xlinker
	 * stays with its option (proto/args.h). */
	validate_args_for((const char *const *)b->in.req.args, n, 0, lib, NULL, NULL, 0);
	for (size_t i = 0; i < n; i++)
		if (lib[i] == libs)
			push(a, "%s", b->in.req.args[i]);
	free(lib);
}

/* The toolchain's default linker lists its inputs; -fuse-ld may pick one
 * that does not (gold), and then the option would break the link. */
static bool linker_lists_inputs(const struct flight *b)
{
	for (size_t i = 0; i < b->in.req.nargs; i++) {
		const char *s = b->in.req.args[i];
		if (strncmp(s, "-fuse-ld=", 9) == 0 && strcmp(s + 9, "bfd") != 0 &&
		    strcmp(s + 9, "lld") != 0 && strcmp(s + 9, "mold") != 0)
			return false;
	}
	return true;
}

/*
 * nvcc's architecture arguments when the request names none: one
 * architecture as -arch=sm_XY (its code and its PTX), several as one
 * -gencode each, plus the newest one's PTX for GPUs to come.
 */
static void push_cuda_arch(struct argv_buf *a, const struct flight *b)
{
	const char *list = b->in.tc->cuda_arch;
	if (!b->in.tc->is_nvcc || list == NULL || key_args_name_arch(b->in.req.args, b->in.req.nargs))
		return;
	if (strchr(list, ',') == NULL) {
		push(a, "-arch=%s", list);
		return;
	}
	const char *p = list, *last = list;
	while (*p != '\0') {
		size_t n = strcspn(p, ",");
		push(a, "-gencode");
		push(a, "arch=compute_%.*s,code=sm_%.*s", (int)(n - 3), p + 3, (int)(n - 3), p + 3);
		last = p;
		p += n;
		if (*p == ',')
			p++;
	}
	size_t n = strcspn(last, ",");
	push(a, "-gencode");
	push(a, "arch=compute_%.*s,code=compute_%.*s", (int)(n - 3), last + 3, (int)(n - 3), last + 3);
}

/* Position-independent code: nvcc passes it on to its host compiler. */
static void push_pic(struct argv_buf *a, const struct flight *b, bool host)
{
	if (b->in.tc->is_nvcc && !host) {
		push(a, "-Xcompiler");
		push(a, "-fPIC");
	} else {
		push(a, "-fPIC");
	}
}

/* Landlock: the step writes only in the build directory (confine.c). */
static void push_confine(struct argv_buf *a, const struct flight *b)
{
	if (b->d->landlock_abi > 0) {
		push(a, "--confine");
		push(a, "%s", b->dir);
		for (size_t i = 0; i < b->d->cfg->nallow_write; i++) {
			push(a, "--allow");
			push(a, "%s", b->d->cfg->allow_write[i]);
		}
	}
}

/*
 * nvcc's host compiler for a C++ source of its build (step_host_direct):
 * the precompiled header, the host's share of the arguments and the
 * toolkit's include directories, in the order nvcc gives them.
 */
static void push_host(struct argv_buf *a, const struct flight *b, const char *src)
{
	char **v = hostcc_args((const char *const *)b->in.req.args, b->in.req.nargs, NULL);
	if (v == NULL) {
		a->oom = true;
		return;
	}
	push(a, "%s", b->in.tc->host_cc);
	if (src != NULL && pch_applies(&b->in, src)) {
		push(a, "-include");
		push(a, "%s", pch_include(&b->in));
	}
	for (size_t i = 0; v[i] != NULL; i++)
		push(a, "%s", v[i]);
	for (size_t i = 0; b->in.tc->host_incs[i] != NULL; i++)
		push(a, "%s", b->in.tc->host_incs[i]);
	hostcc_free(v);
}

/* kiln-exec running the toolchain (or, with host, nvcc's host compiler),
 * with the architecture, the precompiled header when src (a source's name,
 * or NULL) gets it, and the request's arguments (libraries last, by the
 * caller): the start of every compile. */
static void push_compiler(struct argv_buf *a, const struct flight *b, const char *src, bool host)
{
	push(a, "%s", b->d->cfg->exec_helper);
	push(a, "run");
	push(a, "%d", (int)getpid());
	/* Every process of the toolchain records what it reads (observe.c). */
	push(a, "--trace");
	push(a, "%s/trace", b->dir);
	push_confine(a, b);
	push(a, "--");
	if (host) {
		push_host(a, b, src);
		return;
	}
	push(a, "%s", b->in.tc->path);
	if (b->in.tc->host != NULL) {
		push(a, "-ccbin");
		push(a, "%s", b->in.tc->host);
	}
	push_cuda_arch(a, b);
	/* First of all includes, as gcc wants a precompiled header (pch.c). */
	if (src != NULL && pch_applies(&b->in, src)) {
		push(a, "-include");
		push(a, "%s", pch_include(&b->in));
	}
	push_args(a, b, false);
}

/* A precompiled header (pch.c): one compile of the generated header. */
static bool pch_step_argv(struct flight *b, int step, struct argv_buf *a)
{
	const char *name = b->in.src[0].name;
	bool host = pch_by_host(&b->in);
	if (step > 0)
		return false;
	push_compiler(a, b, NULL, host);
	push_pic(a, b, host);
	push(a, "-x");
	push(a, "%s", step_is_header(name) && strcmp(strrchr(name, '.'), ".h") == 0 ? "c-header"
										    : "c++-header");
	push(a, "-MD");
	push(a, "-MF");
	push(a, "out/dep0.d");
	push(a, "-o");
	push(a, ARTIFACT ".%s", store_output_ext(b->in.req.output));
	push(a, "src/%s", name);
	return true;
}

/* A GPU output (cubin, fatbin, ptx): one nvcc run, no load check. */
static bool gpu_step_argv(struct flight *b, int step, struct argv_buf *a, size_t src)
{
	const char *out = b->in.req.output;
	if (step > 0)
		return false;
	push_compiler(a, b, NULL, false);
	push(a, "-%s", out);
	push(a, "-MD");
	push(a, "-MF");
	push(a, "out/dep0.d");
	push(a, "-o");
	push(a, ARTIFACT ".%s", store_output_ext(out));
	push(a, "src/%s", b->in.src[src].name);
	return true;
}

/* The compile steps of b: one per compiled source when there are several
 * (then a link step), none when one source compiles and links in one step. */
static size_t compile_steps(const struct flight *b, size_t *idx)
{
	size_t ncomp = compiled_sources(b, idx);
	return ncomp == 1 ? 0 : ncomp;
}

/*
 * Builds the argv of step `step`: compile steps (only with several
 * sources), the link step, then the load check. Returns false when there
 * is no step left.
 */
static bool step_argv(struct flight *b, int step, struct argv_buf *a, bool *is_check)
{
	struct kilnd *d = b->d;
	size_t idx[MSG_MAX_SOURCES];
	size_t ncompile_steps = compile_steps(b, idx);
	size_t s = (size_t)step;
	*is_check = false;
	if (build_input_is_gch(&b->in))
		return pch_step_argv(b, step, a);
	if (strcmp(b->in.req.output, "shared") != 0)
		return gpu_step_argv(b, step, a, idx[0]);
	if (s > ncompile_steps + 1)
		return false;
	if (s == ncompile_steps + 1) {
		*is_check = true;
		push(a, "%s", d->cfg->exec_helper);
		push(a, "check");
		push(a, "%d", (int)getpid());
		push_confine(a, b);
		push(a, ARTIFACT ".%s", store_output_ext(b->in.req.output));
		return true;
	}
	const char *src = s < ncompile_steps ? b->in.src[idx[s]].name
			  : ncompile_steps == 0 ? b->in.src[idx[0]].name : NULL;
	/* Only a compile step of its own goes to the host compiler; the link,
	 * and a single source's compile-and-link, stay with nvcc. */
	bool host = s < ncompile_steps && step_host_direct(&b->in, src);
	push_compiler(a, b, src, host);
	push_pic(a, b, host);
	if (s < ncompile_steps) {
		push(a, "-c");
		push(a, "-MD");
		push(a, "-MF");
		push(a, "out/dep%zu.d", s);
		push(a, "-o");
		push(a, "out/obj%zu.o", s);
		push(a, "src/%s", b->in.src[idx[s]].name);
		return true;
	}
	push(a, "-shared");
	if (b->in.tc->link_depfile && linker_lists_inputs(b))
		push(a, "-Wl,--dependency-file=out/link.d");
	if (ncompile_steps == 0) {
		push(a, "-MD");
		push(a, "-MF");
		push(a, "out/dep0.d");
	}
	push(a, "-o");
	push(a, ARTIFACT ".%s", store_output_ext(b->in.req.output));
	if (ncompile_steps == 0)
		push(a, "src/%s", b->in.src[idx[0]].name);
	for (size_t i = 0; i < ncompile_steps; i++)
		push(a, "out/obj%zu.o", i);
	push_args(a, b, true);
	return true;
}

char **step_command(struct flight *b, bool *is_check, bool *oom)
{
	struct argv_buf a = { 0 };
	bool more = step_argv(b, b->step, &a, is_check);
	*oom = a.oom;
	if (!more || a.oom) {
		step_argv_free(&a);
		return NULL;
	}
	return a.v;
}

void step_command_free(char **argv)
{
	for (size_t i = 0; argv != NULL && argv[i] != NULL; i++)
		free(argv[i]);
	free(argv);
}

/*
 * One running step: its kiln-exec process, the pipe of its output and the
 * output itself, kept apart from the other steps' until the step ends (the
 * compile steps of one build run side by side).
 */
struct step_proc {
	struct flight *b;
	bool is_check;               /* the load check */
	bool active;                 /* spawned, and its handles not all closed */
	bool borrowed;               /* runs in a lent --jobs slot */
	pid_t pgid;                  /* its process group, until kiln-exec exited */
	struct child child;          /* kiln-exec */
	uv_pipe_t out;
	int pending;                 /* exit and end of output still to come */
	int64_t exit_status;
	int term_signal;
	uint64_t started;            /* uv_hrtime at its start, for the debug log */
	char what[96];               /* its program and last argument, for the same */
	char *log;                   /* its output, capped at --max-output */
	size_t loglen, logcap, dropped;
};

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	static char scratch[65536];
	(void)h;
	(void)suggested;
	/* The loop thread is the only reader; one static buffer serves all pipes. */
	buf->base = scratch;
	buf->len = sizeof(scratch);
}

static void proc_log(struct step_proc *p, const char *data, size_t len)
{
	flight_text_append(&p->log, &p->loglen, &p->logcap, &p->dropped,
			  (size_t)p->b->d->cfg->max_output, data, len);
}

static void proc_done(struct step_proc *p);

/* One of p's two parts (its process, its output) is over. */
static void part_done(struct step_proc *p)
{
	p->b->refs--;
	if (--p->pending == 0)
		proc_done(p);
}

static void on_part_closed(uv_handle_t *h)
{
	part_done(h->data);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct step_proc *p = s->data;
	if (n > 0) {
		proc_log(p, buf->base, (size_t)n);
		return;
	}
	if (n < 0) {
		uv_read_stop(s);
		uv_close((uv_handle_t *)s, on_part_closed);
	}
}

static void on_step_exit(struct child *c, int64_t status, int sig)
{
	struct step_proc *p = c->data;
	p->exit_status = status;
	p->term_signal = sig;
	/* kiln-exec is gone; anything left in its group (a wrapper's background
	 * job) would hold the output pipe open and the build with it. The group
	 * is then empty and its number free for reuse: no later step_kill
	 * (another step failing while this one's output drains) may send to it. */
	if (p->pgid > 0)
		kill(-p->pgid, SIGKILL);
	p->pgid = 0;
	part_done(p);
}

void step_kill(struct flight *b)
{
	ASSERT_LOOP();
	for (int i = 0; b->procs != NULL && i < b->nprocs_cap; i++) {
		/* kiln-exec leads its group; one reaped already (its exit
		 * callback still to come in this batch, child.c) has a pid of 0,
		 * and its group number may be free for reuse. */
		if (b->procs[i].child.pid > 0)
			kill(-b->procs[i].child.pid, SIGKILL);
	}
}

/* The variables step_env makes (the others point into tcenv's): last. */
#define STEP_ENV_OWN 3

/*
 * The toolchain's environment (tcenv.h: a list of kilnd's variables, not
 * all of them), with TMPDIR in the build directory: the compiler driver's
 * temporary objects then stay private to the build, go away with it, and
 * are told apart from real inputs in the linker's list; PWD the build
 * directory, the toolchain's working directory (libiberty's getpwd stats
 * $PWD: kilnd's own start directory would become an input of every entry,
 * and die with the job's directory); and the secret the trace's records
 * are signed with (observe.c).
 */
char **step_env(const char *dir, const char *token)
{
	const struct tcenv *te = tcenv();
	size_t n = te->nvars, j = 0;
	char **env = calloc(n + STEP_ENV_OWN + 1, sizeof(*env));
	if (env == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++)
		env[j++] = te->vars[i];
	if (asprintf(&env[j], "KILN_TRACE_TOKEN=%s", token) < 0)
		env[j] = NULL;
	else if (asprintf(&env[j + 1], "TMPDIR=%s/tmp", dir) < 0)
		env[j + 1] = NULL;
	else if (asprintf(&env[j + 2], "PWD=%s", dir) < 0)
		env[j + 2] = NULL;
	if (env[j] == NULL || env[j + 1] == NULL || env[j + 2] == NULL) {
		free(env[j]);
		free(env[j + 1]);
		free(env);
		return NULL;
	}
	return env;
}

void step_env_free(char **env)
{
	size_t n = 0;
	if (env == NULL)
		return;
	while (env[n] != NULL)
		n++;
	/* Only the last STEP_ENV_OWN were allocated. */
	for (size_t i = n - STEP_ENV_OWN; i < n; i++)
		free(env[i]);
	free(env);
}

static void user_paths(struct flight *b);

/* Starts p's kiln-exec: its output into p->out. 0 or a negative errno. */
static int proc_start(struct flight *b, struct step_proc *p, char **argv, char **env)
{
	int fds[2];
	if (env == NULL)
		return -ENOMEM;
	if (pipe2(fds, O_CLOEXEC) != 0)
		return -errno;
	int rc = uv_pipe_open(&p->out, fds[0]);
	if (rc != 0) {
		close(fds[0]);
		close(fds[1]);
		return rc;
	}
	struct child_start o = {
		.file = argv[0], .argv = argv, .env = env, .cwd = b->dir, .stdout_fd = fds[1],
	};
	p->child.data = p;
	rc = child_spawn(b->d->children, &p->child, &o, on_step_exit);
	close(fds[1]);
	return rc;
}

/* "g++ src/x.cpp": the program a step runs (after kiln-exec's "--") and
 * its last argument, for the debug log's line at its start and end. */
static void step_label(struct step_proc *p, char **argv)
{
	const char *tool = NULL, *last = NULL;
	for (size_t i = 0; argv[i] != NULL; i++) {
		if (tool == NULL && i > 0 && strcmp(argv[i - 1], "--") == 0)
			tool = argv[i];
		last = argv[i];
	}
	const char *slash = tool != NULL ? strrchr(tool, '/') : NULL;
	p->started = uv_hrtime();
	if (p->is_check || tool == NULL)
		snprintf(p->what, sizeof(p->what), "load check");
	else
		snprintf(p->what, sizeof(p->what), "%s %s", slash != NULL ? slash + 1 : tool, last);
}

/* Starts p for `step` (argv: kiln-exec and all); its parts' ends (the
 * process's exit, the output's close) lead to proc_done, whether or not
 * the start worked. */
static void proc_spawn(struct flight *b, struct step_proc *p, int step, bool is_check,
		       bool borrowed, char **argv)
{
	struct kilnd *d = b->d;
	char **env = step_env(b->dir, b->trace_token);
	memset(p, 0, sizeof(*p));
	p->b = b;
	p->is_check = is_check;
	p->borrowed = borrowed;
	p->active = true;
	step_label(p, argv);
	b->nprocs++;
	uv_pipe_init(d->loop, &p->out, 0);
	p->out.data = p;
	b->refs++;
	int rc = proc_start(b, p, argv, env);
	step_env_free(env);
	if (rc != 0) {
		if (rc == -ENOMEM)
			flight_fail(b, ERR_INTERNAL, "out of memory");
		else
			flight_fail(b, ERR_INTERNAL, "cannot start %s: %s", argv[0], strerror(-rc));
		p->pending = 1;
		uv_close((uv_handle_t *)&p->out, on_part_closed);
		return;
	}
	b->refs++;
	p->pgid = p->child.pid; /* a new session: it leads its own group */
	p->pending = 2;
	uv_read_start((uv_stream_t *)&p->out, on_alloc, on_read);
	log_debug("build %.16s step %d: %s", b->in.rkey, step, p->what);
}

static bool procs_alloc(struct flight *b, int n)
{
	b->procs = calloc((size_t)n, sizeof(*b->procs));
	b->nprocs_cap = b->procs != NULL ? n : 0;
	if (b->procs == NULL)
		flight_fail(b, ERR_INTERNAL, "out of memory");
	return b->procs != NULL;
}

static void procs_free(struct flight *b)
{
	free(b->procs);
	b->procs = NULL;
	b->nprocs_cap = 0;
}

/*
 * The compile steps of a build with several sources run side by side, as
 * make -j runs a build's objects: one in the build's own --jobs slot, and
 * one more in each slot that is free while no other build waits for it
 * (step_slot_borrow). A program's sources are its .cpp and .cu for DaCe's
 * GPU code: one after the other they took 20-25 s on a GPU node where the
 * framework's own build took less. Each step starts as a slot frees, in
 * source order; the first failure stops the others (their groups killed)
 * and is the build's error; the link step follows when all are done.
 */
static void compile_more(struct flight *b)
{
	bool own_busy = false;
	for (int i = 0; i < b->nprocs_cap; i++)
		own_busy |= b->procs[i].active && !b->procs[i].borrowed;
	while (b->err_code == ERR_NONE && !b->timed_out && b->next_compile < b->ncompile) {
		bool borrowed = own_busy;
		if (borrowed && !step_slot_borrow(b->d))
			return;
		struct argv_buf a = { 0 };
		bool is_check;
		int s = b->next_compile++;
		if (!step_argv(b, s, &a, &is_check) || a.oom || is_check) {
			step_argv_free(&a);
			if (borrowed)
				step_slot_return(b->d);
			flight_fail(b, ERR_INTERNAL, "out of memory");
			return;
		}
		proc_spawn(b, &b->procs[s], s, false, borrowed, a.v);
		step_argv_free(&a);
		own_busy = true;
	}
}

void step_next(struct flight *b)
{
	ASSERT_LOOP();
	struct argv_buf a = { 0 };
	size_t idx[MSG_MAX_SOURCES];
	bool is_check;
	if (b->err_code != ERR_NONE) {
		flight_steps_done(b);
		return;
	}
	if (b->step == 0 && !build_input_is_gch(&b->in))
		pch_bind(b->d, &b->in, b->dir);
	size_t ncompile = build_input_is_gch(&b->in) || strcmp(b->in.req.output, "shared") != 0
				  ? 0 : compile_steps(b, idx);
	if (b->step == 0 && ncompile >= 2) {
		if (!procs_alloc(b, (int)ncompile)) {
			flight_steps_done(b);
			return;
		}
		b->ncompile = (int)ncompile;
		b->next_compile = 0;
		if (b->prehash == NULL)
			b->prehash = prehash_start(b);
		flight_step_begins(b, false);
		compile_more(b);
		if (b->nprocs == 0) {
			/* Nothing started (out of memory): nothing will call back. */
			procs_free(b);
			b->ncompile = 0;
			flight_steps_done(b);
		}
		return;
	}
	if (!step_argv(b, b->step, &a, &is_check)) {
		step_argv_free(&a);
		user_paths(b);
		flight_steps_done(b);
		return;
	}
	if (a.oom || !procs_alloc(b, 1)) {
		step_argv_free(&a);
		flight_fail(b, ERR_INTERNAL, "out of memory");
		flight_steps_done(b);
		return;
	}
	if (!is_check && b->prehash == NULL)
		b->prehash = prehash_start(b);
	flight_step_begins(b, is_check);
	proc_spawn(b, &b->procs[0], b->step, is_check, false, a.v);
	step_argv_free(&a);
}

/* The loader's text of a failed check, as one line for the error message. */
static void check_message(struct step_proc *p)
{
	char line[900];
	snprintf(line, sizeof(line), "%s", p->log != NULL ? p->log : "");
	line[strcspn(line, "\n")] = '\0';
	flight_fail(p->b, ERR_BUILD_FAILED, "the artifact does not load: %s", line);
}

/*
 * A step that failed because the build directory's filesystem is full
 * (whichever program hit it: cc1, as, ld): the filesystem has no room left
 * now, or the step's output says so.
 */
static bool disk_full(const struct step_proc *p)
{
	struct statvfs vfs;
	const struct flight *b = p->b;
	if (b->dir != NULL && statvfs(b->dir, &vfs) == 0 && vfs.f_bavail == 0)
		return true;
	return p->log != NULL && strstr(p->log, "No space left on device") != NULL;
}

/* The compiler's messages name src/NAME: the user's NAME, or the path the
 * source was sent by, instead (diag.c). */
static void user_paths(struct flight *b)
{
	size_t n = b->in.nsrc, outlen = 0;
	if (b->log == NULL || b->loglen == 0 || n == 0)
		return;
	const char **from = calloc(n, sizeof(*from)), **to = calloc(n, sizeof(*to));
	char **made = calloc(n, sizeof(*made));
	for (size_t i = 0; from != NULL && to != NULL && made != NULL && i < n; i++) {
		const char *path = b->in.req.sources[i].path;
		if (asprintf(&made[i], "src/%s", b->in.src[i].name) < 0) {
			made[i] = NULL;
			break;
		}
		from[i] = made[i];
		to[i] = path != NULL ? path : b->in.src[i].name;
	}
	char *out = NULL;
	if (from != NULL && to != NULL && made != NULL && made[n - 1] != NULL)
		out = diag_user_paths(b->log, b->loglen, from, to, n, &outlen);
	if (out != NULL) {
		free(b->log);
		b->log = out;
		b->loglen = outlen;
		b->logcap = outlen + 1;
	}
	for (size_t i = 0; made != NULL && i < n; i++)
		free(made[i]);
	free(made);
	free(from);
	free(to);
}

/* Records why p's step failed, unless the build failed already. */
static void proc_evaluate(struct step_proc *p)
{
	struct flight *b = p->b;
	const char *what = p->is_check ? "load check" : "compiler";
	if (b->err_code != ERR_NONE)
		return;
	if (b->timed_out) {
		flight_fail(b, ERR_BUILD_TIMEOUT, "the build ran past the %g s timeout; its processes were killed",
			   b->d->cfg->build_timeout_s);
	} else if ((p->term_signal != 0 || p->exit_status != 0) && disk_full(p)) {
		flight_fail(b, ERR_IO, "the disk is full: the %s could not write in %s (No space left "
			   "on device)", what, b->dir);
	} else if (p->child.handed && p->term_signal == STANDBY_REFUSED_SIGNAL) {
		/* kilnd's failure, not the build's: no start to run came whole. */
		flight_fail(b, ERR_INTERNAL, "kiln-exec could not take the %s's start%s%.*s", what,
			    p->loglen > 0 ? ": " : "", (int)strcspn(p->log != NULL ? p->log : "", "\n"),
			    p->log != NULL ? p->log : "");
	} else if (p->term_signal != 0) {
		flight_fail(b, ERR_BUILD_FAILED, "the %s was killed by signal %d", what, p->term_signal);
	} else if (p->exit_status != 0 && p->is_check) {
		check_message(p);
	} else if (p->exit_status != 0) {
		flight_fail(b, ERR_BUILD_FAILED, "the compiler exited with status %lld",
			   (long long)p->exit_status);
	}
}

/* Moves p's output to the build's log, noting what the cap dropped. */
static void proc_log_move(struct step_proc *p)
{
	struct flight *b = p->b;
	if (p->loglen > 0)
		flight_log_append(b, p->log, p->loglen);
	if (p->dropped > 0) {
		char note[96];
		int n = snprintf(note, sizeof(note), "\n[kiln: %zu more bytes of output dropped]\n",
				 p->dropped);
		flight_log_append(b, note, (size_t)n);
	}
	free(p->log);
	p->log = NULL;
	p->loglen = p->logcap = p->dropped = 0;
}

/* A step's process and output are both gone: judge it, and go on. */
static void proc_done(struct step_proc *p)
{
	ASSERT_LOOP();
	struct flight *b = p->b;
	p->pgid = 0;
	p->active = false;
	b->nprocs--;
	log_debug("build %.16s step %s: %.3f s", b->in.rkey, p->what,
		  (double)(uv_hrtime() - p->started) / 1e9);
	if (p->borrowed)
		step_slot_return(b->d);
	proc_evaluate(p);
	proc_log_move(p);
	if (b->ncompile > 0) {
		if (b->err_code != ERR_NONE || b->timed_out)
			step_kill(b);
		else
			compile_more(b);
		if (b->nprocs > 0)
			return;
		/* The compile phase is over. */
		b->step = b->ncompile;
		b->ncompile = 0;
	} else {
		b->step++;
	}
	procs_free(b);
	if (b->err_code != ERR_NONE) {
		user_paths(b);
		flight_steps_done(b);
		return;
	}
	step_next(b);
}
