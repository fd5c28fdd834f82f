/*
 * Helpers of the upstream tier's integration tests (upstream_util.c):
 * several daemons, each with its own socket and cache as on separate
 * nodes, sharing one upstream directory.
 */
#ifndef KILN_TESTS_UPSTREAM_UTIL_H
#define KILN_TESTS_UPSTREAM_UTIL_H

#include <stdint.h>

#include "harness.h"

/* One daemon as if on its own node: socket and cache of its own. All log
 * into the harness's one log and output file (each line names its pid), so
 * that a failed test shows them. */
struct node {
	char socket[HARNESS_PATH];
	char cache[HARNESS_PATH];
	char log[HARNESS_PATH];
	char out[HARNESS_PATH];
	pid_t pid;
};

/* What the client process of one node saw. */
struct node_result {
	int done;
	int failures;
	char msg[1024];
};

/* The extra kilnd arguments every node of a test gets. */
struct node_args {
	char upstream[HARNESS_PATH];
	char toolchain[HARNESS_PATH + 8];
	const char *argv[10];
};

/*
 * Two daemons on one tier: a claims a program and compiles it behind a gate
 * (the toolchain wrapper waits for it); b's client asks for the same program
 * and b waits for a's claim.
 */
struct claim_race {
	char wrapper[HARNESS_PATH], log[HARNESS_PATH], gate[HARNESS_PATH];
	char claims[HARNESS_PATH];
	char *text;
	struct kiln_request req;
	struct kiln_source src;
	struct harness_fleet *fa, *fb;
	struct node a, b;
	struct node_args args;
};

/* Makes <dir>/name and names the node's socket and cache there. */
void node_init(struct node *n, const char *name);
/* Points the harness (CLI, start, stop, failure output) at node n. */
void node_use(const struct node *n);
void node_start(struct node *n, const char *const *extra);
void node_stop(struct node *n);
cJSON *node_status(const struct node *n);
/* The sum of a status counter over nodes. */
int64_t sum_status(const struct node *nodes, int n, const char *field);
/* --upstream <dir>/upstream, and --toolchain cc=wrapper, --upstream-stale
 * and --job-nodes unless NULL. */
void node_args_init(struct node_args *a, const char *wrapper, const char *stale,
		    const char *job_nodes);
/* Files under dir whose names end in suffix (recursively). */
int count_files(const char *dir, const char *suffix);
/* The one file under dir ending in suffix; fails the test otherwise. */
const char *find_one(const char *dir, const char *suffix);
/* Node a builds name behind a gate, node b waits on a's claim (every node
 * with --job-nodes job_nodes unless NULL); claim_race_start without. */
void claim_race_start_with(struct claim_race *c, const char *name, int value,
			   const char *stale, const char *job_nodes);
void claim_race_start(struct claim_race *c, const char *name, int value, const char *stale);
/* The end of a race: no claim left, one entry published. */
void claim_race_end(struct claim_race *c);
/* Gets req through node n and checks that the program returns value. */
void get_value(const struct node *n, const struct kiln_request *req, int value);
/* A request of text with -I<dir>/include, where kiln_up_value.h (its path
 * in header) defines KILN_UP_VALUE as 11; argv holds the one argument. */
void value_request(struct kiln_request *req, struct kiln_source *src, const char *text,
		   char *inc, char *header, char *incarg, const char **argv);
/* kiln build --compiler cxx src through node n. */
void build_on(const struct node *n, const char *cxx, const char *src);

#endif
