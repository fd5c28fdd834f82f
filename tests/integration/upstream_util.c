/*
 * Helpers of the upstream tier's integration tests (test_upstream*.c):
 * daemons as if on nodes of their own, their arguments, a request of a
 * program that reads a header, and a race for one claim between two of
 * them.
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "upstream_util.h"

void node_init(struct node *n, const char *name)
{
	char dir[HARNESS_PATH];

	harness_path(dir, "%s", name);
	ck_assert_msg(mkdir(dir, 0700) == 0, "mkdir %s: %s", dir, strerror(errno));
	harness_path(n->socket, "%s/kilnd.sock", name);
	harness_path(n->cache, "%s/cache", name);
	harness_path(n->log, "kilnd.log");
	harness_path(n->out, "kilnd.out");
	n->pid = 0;
}

/* Points the harness (CLI, start, stop, failure output) at node n. */
void node_use(const struct node *n)
{
	snprintf(harness.socket, sizeof(harness.socket), "%s", n->socket);
	snprintf(harness.cache, sizeof(harness.cache), "%s", n->cache);
	snprintf(harness.log, sizeof(harness.log), "%s", n->log);
	snprintf(harness.out, sizeof(harness.out), "%s", n->out);
	harness.pid = n->pid;
}

void node_start(struct node *n, const char *const *extra)
{
	node_use(n);
	n->pid = harness_startv(extra);
	harness.pid = 0;
}

void node_stop(struct node *n)
{
	node_use(n);
	harness_stop();
	n->pid = 0;
}

cJSON *node_status(const struct node *n)
{
	node_use(n);
	harness.pid = 0;
	return harness_status();
}

/* The sum of a status counter over nodes. */
int64_t sum_status(const struct node *nodes, int n, const char *field)
{
	int64_t sum = 0;

	for (int i = 0; i < n; i++) {
		cJSON *st = node_status(&nodes[i]);

		sum += harness_num(st, field);
		cJSON_Delete(st);
	}
	return sum;
}


/* job_nodes: --job-nodes for every node, or NULL. */
void node_args_init(struct node_args *a, const char *wrapper, const char *stale,
			   const char *job_nodes)
{
	size_t n = 0;

	harness_path(a->upstream, "upstream");
	a->argv[n++] = "--upstream";
	a->argv[n++] = a->upstream;
	if (wrapper) {
		snprintf(a->toolchain, sizeof(a->toolchain), "cc=%s", wrapper);
		a->argv[n++] = "--toolchain";
		a->argv[n++] = a->toolchain;
	}
	if (stale) {
		a->argv[n++] = "--upstream-stale";
		a->argv[n++] = stale;
	}
	if (job_nodes) {
		a->argv[n++] = "--job-nodes";
		a->argv[n++] = job_nodes;
	}
	a->argv[n] = NULL;
}

/* Files under dir whose names end in suffix (recursively): how many, and
 * the last one found. */
static const char *count_suffix;
static int count_found;
static char found_path[HARNESS_PATH];

static int count_visit(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	size_t len = strlen(path), sl = strlen(count_suffix);

	(void)st;
	(void)ftw;
	if (flag == FTW_F && len >= sl && strcmp(path + len - sl, count_suffix) == 0) {
		count_found++;
		snprintf(found_path, sizeof(found_path), "%s", path);
	}
	return 0;
}

int count_files(const char *dir, const char *suffix)
{
	count_suffix = suffix;
	count_found = 0;
	found_path[0] = '\0';
	nftw(dir, count_visit, 16, FTW_PHYS);
	return count_found;
}

/* The one file under dir ending in suffix; fails the test otherwise. */
const char *find_one(const char *dir, const char *suffix)
{
	ck_assert_int_eq(count_files(dir, suffix), 1);
	return found_path;
}


/* Node a builds name behind a gate, node b waits on a's claim; every node
 * with --job-nodes job_nodes unless NULL. */
void claim_race_start_with(struct claim_race *c, const char *name, int value,
				  const char *stale, const char *job_nodes)
{
	c->text = harness_program(name, value);
	harness_write_wrapper(harness_path(c->wrapper, "cc-wrapper"),
			      harness_path(c->log, "wrapper.log"), harness_path(c->gate, "gate"), 0);
	harness_path(c->claims, "upstream/claims");
	node_args_init(&c->args, c->wrapper, stale, job_nodes);
	harness_request(&c->req, &c->src, "prog.c", c->text);
	node_init(&c->a, "a");
	node_init(&c->b, "b");
	node_start(&c->a, c->args.argv);
	node_start(&c->b, c->args.argv);
	c->fa = harness_fleet_start(1, &(struct harness_fleet_opts){
		.socket = c->a.socket, .reqs = &c->req, .nreqs = 1 });
	harness_wait_wrapper_starts(c->log, 1, 60);
	ck_assert_int_eq(harness_count_dir(c->claims), 1);
	c->fb = harness_fleet_start(1, &(struct harness_fleet_opts){
		.socket = c->b.socket, .reqs = &c->req, .nreqs = 1 });
	node_use(&c->b);
	harness.pid = 0;
	harness_wait_status("upstream_waits", 1, 60);
}

void claim_race_start(struct claim_race *c, const char *name, int value, const char *stale)
{
	claim_race_start_with(c, name, value, stale, NULL);
}

/* The end of a race: no claim left, one entry published. */
void claim_race_end(struct claim_race *c)
{
	ck_assert_int_eq(harness_count_dir(c->claims), 0);
	ck_assert_int_eq(count_files(c->args.upstream, ".json"), 1);
	harness_fleet_free(c->fa);
	harness_fleet_free(c->fb);
	free(c->text);
}

void get_value(const struct node *n, const struct kiln_request *req, int value)
{
	struct kiln_program *p = NULL;
	struct kiln *k = NULL;
	int (*fn)(void);
	int rc;

	ck_assert_int_eq(kiln_open(n->socket, &k), KILN_OK);
	rc = kiln_get(k, req, &p);
	ck_assert_msg(rc == KILN_OK, "kiln_get through %s: %s: %s", n->socket, kiln_strerror(rc),
		      kiln_errmsg(k));
	*(void **)&fn = kiln_sym(p, "kiln_test_value");
	ck_assert_ptr_nonnull(fn);
	ck_assert_int_eq(fn(), value);
	kiln_close(k);
}

void value_request(struct kiln_request *req, struct kiln_source *src, const char *text,
			  char *inc, char *header, char *incarg, const char **argv)
{
	harness_path(inc, "include");
	ck_assert_int_eq(mkdir(inc, 0700), 0);
	snprintf(header, HARNESS_PATH + 32, "%s/kiln_up_value.h", inc);
	harness_write_file(header, "#define KILN_UP_VALUE 11\n");
	snprintf(incarg, HARNESS_PATH + 8, "-I%s", inc);
	argv[0] = incarg;
	harness_request(req, src, "prog.c", text);
	req->args = argv;
	req->nargs = 1;
}

void build_on(const struct node *n, const char *cxx, const char *src)
{
	char *out = NULL, *err = NULL;
	node_use(n);
	ck_assert_msg(harness_cli(&out, &err, "build", "--compiler", cxx, src, NULL) == 0,
		      "build on %s failed: %s", n->socket, err);
	free(out);
	free(err);
}
