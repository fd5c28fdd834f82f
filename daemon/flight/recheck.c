/*
 * Peers are checked like compilers. An artifact built on another node (a
 * put, an upstream entry) comes with the dependency list its builder
 * recorded; that list is a hint. Before taking the artifact, this node
 * runs the toolchain itself under observation, on the thread pool, in a
 * private directory under tmp/:
 *
 *   - the request's arguments compiling and linking stand-ins of its
 *     sources (same names, so same languages; a declaration each), which
 *     reads what every build of the request reads here: the toolchain's
 *     programs and libraries, the default headers, crt files, the
 *     libraries found by -l search and the places looked in for them;
 *   - where the request carries its sources' text, the preprocessor over
 *     the real sources, which reads every header they include and records
 *     every place looked in and found empty.
 *
 * Everything observed must be in the sent list with the same kind (the
 * list itself was checked against this node's files already), and the
 * artifact, a shared library, must load (kiln-exec check) like a local
 * build's. What only compiling the real sources reads (an assembler's
 * .incbin) cannot be re-derived without compiling; docs/design.md says so.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "args.h"
#include "flight.h"
#include "flight_int.h"
#include "config.h"
#include "deps.h"
#include "tracedir.h"
#include "kilnd.h"
#include "log.h"
#include "named.h"
#include "recheck.h"
#include "recheck_memo.h"
#include "validate.h"
#include "runner.h"
#include "table.h"
#include "tcenv.h"
#include "trace.h"
#include "util.h"

#define ARGV_MAX (MSG_MAX_ARGS + 64)
#define STAND_IN "typedef int kiln_recheck_stand_in;\n"




struct argv_list {
	char *v[ARGV_MAX];
	size_t n;
	char *owned[ARGV_MAX];
	size_t nowned;
};

static void add(struct argv_list *a, const char *s)
{
	if (a->n + 1 < ARGV_MAX)
		a->v[a->n++] = (char *)s;
	a->v[a->n] = NULL;
}

static void add_owned(struct argv_list *a, char *s)
{
	if (s != NULL && a->nowned < ARGV_MAX)
		a->owned[a->nowned++] = s;
	add(a, s != NULL ? s : "");
}

static void recheck_argv_free(struct argv_list *a)
{
	for (size_t i = 0; i < a->nowned; i++)
		free(a->owned[i]);
}

/* kiln-exec run PID --trace DIR/out/trace -- CC [arch] ARGS (libraries last). */
static void add_compiler(struct argv_list *a, const struct kilnd *d, const struct build_input *in,
			 const char *dir)
{
	char *s;
	add(a, d->cfg->exec_helper);
	add(a, "run");
	add_owned(a, asprintf(&s, "%d", (int)getpid()) > 0 ? s : NULL);
	add(a, "--trace");
	add_owned(a, asprintf(&s, "%s/trace", dir) > 0 ? s : NULL);
	if (d->landlock_abi > 0) {
		add(a, "--confine");
		add(a, dir);
		for (size_t i = 0; i < d->cfg->nallow_write; i++) {
			add(a, "--allow");
			add(a, d->cfg->allow_write[i]);
		}
	}
	add(a, "--");
	add(a, in->tc->path);
	if (in->tc->host != NULL) {
		add(a, "-ccbin");
		add(a, in->tc->host);
	}
	if (in->tc->is_nvcc && in->tc->cuda_arch != NULL && strchr(in->tc->cuda_arch, ',') == NULL &&
	    !key_args_name_arch(in->req.args, in->req.nargs))
		add_owned(a, asprintf(&s, "-arch=%s", in->tc->cuda_arch) > 0 ? s : NULL);
	bool *lib = calloc(in->req.nargs + 1, sizeof(bool));
	if (lib == NULL) {
		/* An argument no compiler accepts: the check fails, nothing is taken. */
		add(a, "-fkiln-out-of-memory");
		return;
	}
	validate_args_for((const char *const *)in->req.args, in->req.nargs, 0, lib, NULL, NULL, 0);
	for (size_t i = 0; i < in->req.nargs; i++) {
		if (!lib[i])
			add(a, in->req.args[i]);
	}
	free(lib);
}

/* Runs one observed step in dir; 0, or -1 with why. */
static int run_step(const struct kilnd *d, struct argv_list *a, const char *dir, const char *token,
		    const char *what, char *why, size_t cap)
{
	int status = 0;
	char **env = step_env(dir, token);
	char *out = env != NULL ? spawn_capture_env(a->v, env, dir, (int)(d->cfg->build_timeout_s * 1000.0),
						     &status) : NULL;
	step_env_free(env);
	if (out == NULL || status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(why, cap, "cannot check it here: the %s failed%s%.300s", what,
			 out != NULL && out[0] != '\0' ? ": " : "", out != NULL ? out : "");
		why[strcspn(why, "\n")] = '\0';
		free(out);
		return -1;
	}
	free(out);
	return 0;
}

/* Writes the stand-ins, under src/; *texts says whether every source
 * came with its text. */
static int write_stand_ins(const struct build_input *in, const char *dir, bool *texts)
{
	char path[PATH_MAX + 64];
	*texts = true;
	for (size_t i = 0; i < in->nsrc; i++) {
		*texts = *texts && in->src[i].text != NULL;
		snprintf(path, sizeof(path), "%s/src", dir);
		if (util_mkdir_parents_at(AT_FDCWD, path, in->src[i].name, 0700) != 0)
			return -1;
		snprintf(path, sizeof(path), "%s/src/%s", dir, in->src[i].name);
		if (util_write_new_file(path, STAND_IN, strlen(STAND_IN)) != 0)
			return -1;
	}
	return 0;
}

/* Writes the real sources under real/, for the preprocessor: only once the
 * stand-ins' runs are over, which must not read them (memo_key). */
static int write_texts(const struct build_input *in, const char *dir)
{
	char path[PATH_MAX + 64];
	for (size_t i = 0; i < in->nsrc; i++) {
		snprintf(path, sizeof(path), "%s/real", dir);
		if (util_mkdir_parents_at(AT_FDCWD, path, in->src[i].name, 0700) != 0)
			return -1;
		snprintf(path, sizeof(path), "%s/real/%s", dir, in->src[i].name);
		if (util_write_new_file(path, in->src[i].text, in->src[i].len) != 0)
			return -1;
	}
	return 0;
}

static int recheck_make_dirs(const char *dir)
{
	static const char *const subs[] = { "src", "out", "tmp", "real", "trace", NULL };
	char path[PATH_MAX + 16];
	for (size_t i = 0; subs[i] != NULL; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, subs[i]);
		if (mkdir(path, 0700) != 0)
			return -1;
	}
	return 0;
}

/* Runs argv (NULL-terminated) in dir; 0, or -1 with why. */
static int run_argv(const struct kilnd *d, char **argv, const char *dir, const char *token,
		    const char *what, char *why, size_t cap)
{
	struct argv_list a = { .n = 0 };
	for (size_t i = 0; argv[i] != NULL; i++)
		add(&a, argv[i]);
	return run_step(d, &a, dir, token, what, why, cap);
}

struct recheck_times {
	uint64_t start, stand_ins, preprocessed, traced, loaded;
	unsigned runs, preprocessor_runs;
	bool reused;
};

/* What one check has: where, its trace's token, the sent list by path. */
struct check {
	const struct kilnd *d;
	const struct build_input *in;
	const char *dir;
	const char *token;
	struct table *sent_index;       /* recheck_sent_index(sent) */
	bool cpu_in_key;
	struct recheck_times t;
	char *why;
	size_t cap;
};

/* Every observed dependency must be in the sent list with its kind. */
static int compare(struct check *c, const struct trace_result *r)
{
	char key[PATH_MAX + 8];
	for (size_t i = 0; i < r->ndeps; i++) {
		recheck_dep_key(r->deps[i].kind, r->deps[i].path, key, sizeof(key));
		if (table_get(c->sent_index, key) == NULL) {
			snprintf(c->why, c->cap, "its dependency list lacks %s (%s), which this node's "
				 "toolchain reads for the request", r->deps[i].path,
				 store_dep_kind_name(r->deps[i].kind));
			return -1;
		}
	}
	return 0;
}

/* Reads the runs' trace into r: complete, undamaged, trusted, and every
 * dependency in the sent list. 0, or -1 with why (r freed). */
static int observed(struct check *c, struct trace_result *r)
{
	bool have;
	int rc = deps_read_trace(c->dir, c->token, c->d->cfg->exec_helper, c->cpu_in_key, r, &have);
	if (rc != 0 || !have) {
		snprintf(c->why, c->cap, "cannot check it here: the toolchain left no trace%s%s",
			 rc != 0 ? ": " : "", rc != 0 ? strerror(-rc) : "");
		rc = -1;
	} else if (r->damaged[0] != '\0' || r->changed[0] != '\0') {
		snprintf(c->why, c->cap, "cannot check it here: %s",
			 r->damaged[0] != '\0' ? r->damaged : r->changed);
		rc = -1;
	} else if (!r->complete) {
		snprintf(c->why, c->cap, "cannot check it here: %s", r->incomplete);
		rc = -1;
	} else if (r->untrusted[0] != '\0') {
		snprintf(c->why, c->cap, "such a build is not cached here: %s", r->untrusted);
		rc = -1;
	} else {
		rc = compare(c, r);
	}
	if (rc != 0)
		trace_result_free(r);
	return rc;
}

/* The trace directory emptied for the next runs. */
static int trace_reset(struct check *c)
{
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/trace", c->dir);
	store_rm_tree(path);
	if (mkdir(path, 0700) != 0) {
		snprintf(c->why, c->cap, "cannot check it here: cannot write %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

static void key_add_u64(EVP_MD_CTX *md, uint64_t v)
{
	uint8_t b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	EVP_DigestUpdate(md, b, sizeof(b));
}

/* One field into md, length first: s with every occurrence of the check's
 * directory as "\x01D" and every byte \x01 as "\x01\x01", so that the same
 * steps in another directory give the same key and no two fields give the
 * same bytes. -1 when out of memory. */
static int key_add_field(EVP_MD_CTX *md, const char *s, const char *dir)
{
	size_t dl = strlen(dir), n = strlen(s), len = 0;
	char *out = malloc(2 * n + 1);
	if (out == NULL)
		return -1;
	for (size_t i = 0; i < n;) {
		if (dl > 0 && strncmp(s + i, dir, dl) == 0) {
			out[len++] = '\x01';
			out[len++] = 'D';
			i += dl;
			continue;
		}
		if (s[i] == '\x01')
			out[len++] = '\x01';
		out[len++] = s[i++];
	}
	key_add_u64(md, len);
	EVP_DigestUpdate(md, out, len);
	free(out);
	return 0;
}

/* The digest of what decides the stand-in runs: their commands, the names
 * of all sources (the stand-ins in src/, headers too: a command may name
 * one), the toolchain's environment, the trace's reading of the CPU. The
 * real texts are written only after these runs (observe_request), so
 * nothing else in the check's directory is there for them to read.
 * 0 or -1. */
static int memo_key(const struct check *c, char ***steps, size_t n, uint8_t key[32])
{
	const struct tcenv *te = tcenv();
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned len = 0;
	int rc = md != NULL && EVP_DigestInit_ex(md, util_sha256_md(), NULL) == 1 ? 0 : -1;
	if (rc == 0)
		rc = key_add_field(md, "kiln recheck stand-ins 2", "");
	if (rc == 0)
		rc = key_add_field(md, c->cpu_in_key ? "native" : "generic", "");
	key_add_u64(md, n);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		size_t argc = 0;
		while (steps[i][argc] != NULL)
			argc++;
		key_add_u64(md, argc);
		for (size_t j = 0; rc == 0 && j < argc; j++)
			rc = key_add_field(md, steps[i][j], c->dir);
	}
	key_add_u64(md, c->in->nsrc);
	for (size_t i = 0; rc == 0 && i < c->in->nsrc; i++)
		rc = key_add_field(md, c->in->src[i].name, c->dir);
	key_add_u64(md, te->nvars);
	for (size_t i = 0; rc == 0 && i < te->nvars; i++)
		rc = key_add_field(md, te->vars[i], c->dir);
	if (rc == 0)
		rc = EVP_DigestFinal_ex(md, key, &len) == 1 && len == 32 ? 0 : -1;
	EVP_MD_CTX_free(md);
	return rc;
}

/* What the stand-in runs read is still what the sent list says, checked
 * once more after the runs (a file changed meanwhile is not remembered);
 * then remembered as the memo's record of key. */
static void memo_remember(struct check *c, const uint8_t key[32], const struct trace_result *r)
{
	const struct store_dep **deps = calloc(r->ndeps + 1, sizeof(*deps));
	char k[PATH_MAX + 8], why[512];
	bool ok = deps != NULL;
	for (size_t i = 0; ok && i < r->ndeps; i++) {
		recheck_dep_key(r->deps[i].kind, r->deps[i].path, k, sizeof(k));
		deps[i] = table_get(c->sent_index, k);   /* compare() found every one */
		struct store_dep now = deps[i] != NULL ? *deps[i] : (struct store_dep){ 0 };
		ok = deps[i] != NULL && deps_check_here(&now, why, sizeof(why)) == 0;
	}
	if (ok)
		recheck_memo_put(c->d->fl->memo, key, deps, r->ndeps);
	free(deps);
}

/* The build's own compiler steps (step.c) on stand-ins of the sources,
 * observed, unless the memo holds what the same steps read here. */
static int stand_ins(struct check *c)
{
	char ***steps = NULL;
	size_t n = 0;
	bool is_check = false, oom = false;
	int rc = 0;
	struct flight fake;
	memset(&fake, 0, sizeof(fake));
	fake.d = (struct kilnd *)c->d;
	fake.in = *c->in;
	fake.dir = (char *)c->dir;
	for (fake.step = 0;; fake.step++) {
		char **argv = step_command(&fake, &is_check, &oom);
		char ***more = argv != NULL && !is_check ? realloc(steps, (n + 1) * sizeof(*steps)) : NULL;
		if (more == NULL) {
			/* out of memory making the step or keeping it: never a
			 * check of fewer steps than the build's */
			oom = oom || (argv != NULL && !is_check);
			step_command_free(argv);
			break;
		}
		steps = more;
		steps[n++] = argv;
	}
	if (oom || n == 0) {
		snprintf(c->why, c->cap, oom ? "out of memory" : "cannot check it here: no compiler step");
		rc = -1;
	}
	uint8_t key[32];
	bool keyed = rc == 0 && memo_key(c, steps, n, key) == 0;
	int memo = keyed ? recheck_memo_enter(c->d->fl->memo, key, c->sent_index) : RECHECK_MEMO_RUN;
	c->t.reused = memo == RECHECK_MEMO_HOLDS;
	for (size_t i = 0; rc == 0 && !c->t.reused && i < n; i++) {
		rc = run_argv(c->d, steps[i], c->dir, c->token, "toolchain on stand-ins of the sources",
			      c->why, c->cap);
		c->t.runs++;
	}
	for (size_t i = 0; i < n; i++)
		step_command_free(steps[i]);
	free(steps);
	struct trace_result r;
	if (rc == 0 && !c->t.reused && (rc = observed(c, &r)) == 0) {
		if (keyed)
			memo_remember(c, key, &r);
		trace_result_free(&r);
		rc = trace_reset(c);
	}
	if (memo == RECHECK_MEMO_OWN)
		recheck_memo_leave(c->d->fl->memo, key);
	c->t.stand_ins = util_now_ns();
	return rc;
}

/* The real sources preprocessed, observed. */
static int preprocess(struct check *c, bool texts)
{
	int rc = 0;
	for (size_t i = 0; rc == 0 && texts && i < c->in->nsrc; i++) {
		char *s;
		if (step_is_header(c->in->src[i].name))
			continue;
		struct argv_list p = { .n = 0 };
		add_compiler(&p, c->d, c->in, c->dir);
		add(&p, "-E");
		add(&p, "-MD");
		add(&p, "-MF");
		add_owned(&p, asprintf(&s, "out/pre%zu.d", i) > 0 ? s : NULL);
		add(&p, "-o");
		add(&p, "/dev/null");
		add_owned(&p, asprintf(&s, "real/%s", c->in->src[i].name) > 0 ? s : NULL);
		rc = run_step(c->d, &p, c->dir, c->token, "preprocessor", c->why, c->cap);
		recheck_argv_free(&p);
		c->t.preprocessor_runs++;
	}
	c->t.preprocessed = util_now_ns();
	struct trace_result r;
	if (rc == 0 && c->t.preprocessor_runs > 0 && (rc = observed(c, &r)) == 0)
		trace_result_free(&r);
	return rc;
}

/* The observed runs: the stand-ins', then the real sources preprocessed. */
static int observe_request(struct check *c)
{
	bool texts;
	if (recheck_make_dirs(c->dir) != 0 || write_stand_ins(c->in, c->dir, &texts) != 0) {
		snprintf(c->why, c->cap, "cannot check it here: cannot write %s: %s", c->dir,
			 strerror(errno));
		return -1;
	}
	int rc = stand_ins(c);
	if (rc == 0 && texts && write_texts(c->in, c->dir) != 0) {
		snprintf(c->why, c->cap, "cannot check it here: cannot write %s: %s", c->dir,
			 strerror(errno));
		return -1;
	}
	return rc == 0 ? preprocess(c, texts) : rc;
}

/* The artifact loads here (shared libraries only). */
static int load_check(const struct kilnd *d, const char *dir, const char *artifact,
		      const char *output, char *why, size_t cap)
{
	char pid[24];
	int status = 0;
	if (strcmp(output, "shared") != 0)
		return 0;
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	/* Its constructors run in kiln-exec: confined like a build's check. */
	char *argv[] = { d->cfg->exec_helper, (char *)"check", pid, (char *)"--confine", (char *)dir,
			 (char *)artifact, NULL };
	if (d->landlock_abi <= 0) {
		argv[3] = (char *)artifact;
		argv[4] = NULL;
	}
	char *out = spawn_capture(argv, NULL, (int)(d->cfg->build_timeout_s * 1000.0), &status);
	if (out == NULL || status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(why, cap, "the artifact does not load here: %.400s",
			 out != NULL && out[0] != '\0' ? out : "the load check failed");
		why[strcspn(why, "\n")] = '\0';
		free(out);
		return -1;
	}
	free(out);
	return 0;
}

int recheck_peer(const struct kilnd *d, const struct build_input *in, const struct store_dep *sent,
		 size_t nsent, const char *artifact, char *why, size_t cap)
{
	char *tmp = store_tmp_dir(d->store);
	char dir[PATH_MAX];
	if (tmp == NULL) {
		snprintf(why, cap, "out of memory");
		return -1;
	}
	snprintf(dir, sizeof(dir), "%s/v-%.16s-XXXXXX", tmp, in->rkey);
	free(tmp);
	if (mkdtemp(dir) == NULL) {
		snprintf(why, cap, "cannot check it here: cannot create a directory in the cache: %s",
			 strerror(errno));
		return -1;
	}
	char token[33];
	tracedir_token(token);
	struct check c = {
		.d = d, .in = in, .dir = dir, .token = token,
		.sent_index = recheck_sent_index(sent, nsent),
		.cpu_in_key = key_args_native(in->req.args, in->req.nargs),
		.t = { .start = util_now_ns() }, .why = why, .cap = cap,
	};
	int rc = c.sent_index != NULL ? observe_request(&c) : -1;
	if (c.sent_index == NULL)
		snprintf(why, cap, "out of memory");
	c.t.traced = util_now_ns();
	if (rc == 0)
		rc = load_check(d, dir, artifact, in->req.output, why, cap);
	c.t.loaded = util_now_ns();
	store_rm_tree(dir);
	table_free(c.sent_index, NULL);
	recheck_memo_count(d->fl->memo, rc == 0 && c.t.reused);
	char runs[32];
	if (c.t.reused)
		snprintf(runs, sizeof(runs), "as remembered");
	else
		snprintf(runs, sizeof(runs), "%u runs", c.t.runs);
	if (rc == 0)
		log_debug("recheck %.16s: stand-ins %.1f ms (%s), preprocessor %.1f ms (%u runs), "
			  "load check %.1f ms", in->rkey, (double)(c.t.stand_ins - c.t.start) / 1e6, runs,
			  (double)(c.t.traced - c.t.stand_ins) / 1e6, c.t.preprocessor_runs,
			  (double)(c.t.loaded - c.t.traced) / 1e6);
	return rc;
}

void recheck_input_free(struct build_input *in)
{
	if (in == NULL)
		return;
	free(in->req.output);
	for (size_t i = 0; in->req.args != NULL && i < in->req.nargs; i++)
		free(in->req.args[i]);
	free(in->req.args);
	for (size_t i = 0; in->src != NULL && i < in->nsrc; i++) {
		free((char *)in->src[i].name);
		free((char *)in->src[i].text);
	}
	free(in->src);
	if (in->own_tc != NULL)
		key_toolchain_fini(in->own_tc);
	free(in->own_tc);
	free(in);
}

struct build_input *recheck_input_copy(const struct build_input *in)
{
	struct build_input *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return NULL;
	c->tc = in->tc;
	memcpy(c->rkey, in->rkey, sizeof(c->rkey));
	c->req.nargs = in->req.nargs;
	c->nsrc = in->nsrc;
	bool ok = (c->req.output = strdup(in->req.output)) != NULL &&
		  (c->req.args = calloc(in->req.nargs + 1, sizeof(char *))) != NULL &&
		  (c->src = calloc(in->nsrc + 1, sizeof(*c->src))) != NULL;
	for (size_t i = 0; ok && i < in->req.nargs; i++)
		ok = (c->req.args[i] = strdup(in->req.args[i])) != NULL;
	for (size_t i = 0; ok && i < in->nsrc; i++) {
		c->src[i].name = strdup(in->src[i].name);
		c->src[i].len = in->src[i].len;
		ok = c->src[i].name != NULL;
		if (ok && in->src[i].text != NULL) {
			char *t = malloc(in->src[i].len + 1);
			if ((ok = t != NULL)) {
				memcpy(t, in->src[i].text, in->src[i].len);
				t[in->src[i].len] = '\0';
			}
			c->src[i].text = t;
		}
	}
	if (!ok) {
		recheck_input_free(c);
		return NULL;
	}
	return c;
}

/* The strings of a JSON array of strings (NULL-terminated, malloc'd), or
 * NULL when json is not one. */
static char **strings_of(const char *json, size_t *n)
{
	cJSON *a = json != NULL ? cJSON_Parse(json) : NULL;
	size_t count = cJSON_IsArray(a) ? (size_t)cJSON_GetArraySize(a) : 0;
	char **v = cJSON_IsArray(a) ? calloc(count + 1, sizeof(char *)) : NULL;
	const cJSON *it;
	size_t i = 0;
	bool ok = v != NULL;
	cJSON_ArrayForEach(it, a) {
		if (!ok)
			break;
		ok = cJSON_IsString(it) && (v[i] = strdup(it->valuestring)) != NULL;
		i++;
	}
	cJSON_Delete(a);
	if (!ok) {
		for (size_t j = 0; v != NULL && j < count; j++)
			free(v[j]);
		free(v);
		return NULL;
	}
	*n = count;
	return v;
}

/*
 * The metadata of an entry from elsewhere (an import, another node) is the
 * client's request of someone else: its arguments and source names pass the
 * same rules as a request's before anything compiles with them.
 */
static int entry_input_allowed(const struct kilnd *d, const struct build_input *c, char *why,
			       size_t cap)
{
	char reason[256];
	enum args_verdict v = validate_args_for((const char *const *)c->req.args, c->req.nargs,
						c->tc->is_nvcc ? ARGS_SHELL : 0, NULL, NULL, reason,
						sizeof(reason));
	if (v == ARGS_REFUSED || (v == ARGS_CODE && !d->cfg->allow_toolchain_code)) {
		snprintf(why, cap, "its arguments are not accepted here: %s", reason);
		return -1;
	}
	for (size_t i = 0; i < c->nsrc; i++) {
		if (validate_source_name(c->src[i].name, reason, sizeof(reason)) != 0) {
			snprintf(why, cap, "its sources are not accepted here: %s", reason);
			return -1;
		}
	}
	return 0;
}

struct build_input *recheck_input_of_entry(const struct kilnd *d, const struct store_entry *e,
					   char *why, size_t cap)
{
	const struct toolchain *tc = NULL;
	struct toolchain *owned = NULL;
	size_t nargs = 0, nsrc = 0;
	if (named_of_entry(d, e->toolchain != NULL ? e->toolchain : "?", &tc, &owned, why, cap) != 0)
		return NULL;
	struct build_input *c = calloc(1, sizeof(*c));
	if (c != NULL)
		c->own_tc = owned;
	else if (owned != NULL) {
		key_toolchain_fini(owned);
		free(owned);
	}
	char **names = strings_of(e->sources_json, &nsrc);
	if (c == NULL || names == NULL || (c->req.args = strings_of(e->args_json, &nargs)) == NULL ||
	    (c->req.output = strdup(e->output)) == NULL ||
	    (c->src = calloc(nsrc + 1, sizeof(*c->src))) == NULL) {
		snprintf(why, cap, "its metadata does not name its arguments and sources");
		for (size_t i = 0; names != NULL && i < nsrc; i++)
			free(names[i]);
		free(names);
		recheck_input_free(c);
		return NULL;
	}
	c->tc = owned != NULL ? owned : tc;
	memcpy(c->rkey, e->rkey, sizeof(c->rkey));
	c->req.nargs = nargs;
	c->nsrc = nsrc;
	for (size_t i = 0; i < nsrc; i++)
		c->src[i].name = names[i];
	free(names);
	if (entry_input_allowed(d, c, why, cap) != 0) {
		recheck_input_free(c);
		return NULL;
	}
	return c;
}
