/*
 * Integration tests of the upstream tier (kilnd --upstream DIR): several
 * daemons, each with its own socket and cache as on separate nodes, share
 * one upstream directory. Every program is compiled once among them, a new
 * set of daemons gets everything from upstream, a daemon killed while it
 * holds a claim is taken over, and nothing broken or foreign is served.
 */
#include "harness.h"
#include "upstream_util.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NODES 4
#define PROGRAMS 10

/* Child of run_clients: all programs in one batch through one node. */
static void node_client(const struct node *n, const struct kiln_request *reqs, const int *values,
			int nreqs, struct node_result *r, int go_fd)
{
	struct kiln_program *out[PROGRAMS];
	int status[PROGRAMS];
	struct kiln *k = NULL;
	char buf[16];
	int rc = kiln_open(n->socket, &k);

	/* The barrier: the parent closes its end once every child exists. */
	while (read(go_fd, buf, sizeof(buf)) > 0)
		;
	if (rc != KILN_OK) {
		r->failures = nreqs;
		snprintf(r->msg, sizeof(r->msg), "kiln_open: %s", kiln_errmsg(NULL));
		goto out;
	}
	rc = kiln_get_many(k, reqs, (size_t)nreqs, out, status);
	if (rc != KILN_OK)
		snprintf(r->msg, sizeof(r->msg), "kiln_get_many: %s", kiln_errmsg(k));
	for (int i = 0; i < nreqs; i++) {
		int (*fn)(void) = NULL;

		if (status[i] == KILN_OK)
			*(void **)&fn = kiln_sym(out[i], "kiln_test_value");
		if (!fn || fn() != values[i]) {
			r->failures++;
			if (!r->msg[0])
				snprintf(r->msg, sizeof(r->msg), "program %d: status %s, value %d", i,
					 kiln_strerror(status[i]), fn ? fn() : -1);
		}
	}
out:
	kiln_close(k);
	__atomic_store_n(&r->done, 1, __ATOMIC_SEQ_CST);
	_exit(0);
}

/* One client process per node, released together, each asking its node
 * for every program at once; requires that all of them load and return
 * the right values. */
static void run_clients(const struct node *nodes, int n, const struct kiln_request *reqs,
			const int *values, int nreqs)
{
	struct node_result *res = mmap(NULL, (size_t)n * sizeof(*res), PROT_READ | PROT_WRITE,
				       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t pids[NODES];
	int go[2];

	ck_assert(res != MAP_FAILED && n <= NODES);
	ck_assert_int_eq(pipe2(go, O_CLOEXEC), 0);
	for (int i = 0; i < n; i++) {
		pids[i] = fork();
		ck_assert_msg(pids[i] >= 0, "fork: %s", strerror(errno));
		if (pids[i] == 0) {
			close(go[1]);
			node_client(&nodes[i], reqs, values, nreqs, &res[i], go[0]);
		}
	}
	close(go[0]);
	close(go[1]);
	for (int i = 0; i < n; i++) {
		int status = harness_wait(pids[i], 240);

		if (status == -1)
			kill(pids[i], SIGKILL);
		ck_assert_msg(status != -1, "the client of node %d did not finish", i);
		ck_assert_msg(WIFEXITED(status) && res[i].done, "the client of node %d died (0x%x)", i,
			      status);
		ck_assert_msg(res[i].failures == 0, "node %d: %d programs failed: %s", i,
			      res[i].failures, res[i].msg);
	}
	munmap(res, (size_t)n * sizeof(*res));
}

/*
 * Four nodes ask for the same ten programs at once: ten compiler runs in
 * all. Then four fresh nodes (a new job, empty caches) get all ten from
 * upstream without a compiler and without sending any source text.
 */
START_TEST(nodes_share_one_build_per_program)
{
	char wrapper[HARNESS_PATH], log[HARNESS_PATH], claims[HARNESS_PATH];
	struct kiln_request reqs[PROGRAMS];
	struct kiln_source srcs[PROGRAMS];
	char *texts[PROGRAMS];
	int values[PROGRAMS];
	struct node job1[NODES], job2[NODES];
	struct harness_wrapper_log wl;
	struct node_args args;

	/* One wrapper for all: the toolchain's identity is in the key. */
	harness_write_wrapper(harness_path(wrapper, "cc-wrapper"), harness_path(log, "wrapper.log"),
			      NULL, 0.2);
	node_args_init(&args, wrapper, NULL, NULL);
	for (int i = 0; i < PROGRAMS; i++) {
		char name[32];

		snprintf(name, sizeof(name), "shared_%d", i);
		values[i] = 100 + i;
		texts[i] = harness_program(name, values[i]);
		harness_request(&reqs[i], &srcs[i], "prog.c", texts[i]);
	}
	for (int i = 0; i < NODES; i++) {
		char name[16];

		snprintf(name, sizeof(name), "a%d", i);
		node_init(&job1[i], name);
		node_start(&job1[i], args.argv);
	}
	run_clients(job1, NODES, reqs, values, PROGRAMS);

	harness_wrapper_log_read(log, &wl);
	ck_assert_msg(wl.starts == PROGRAMS, "%d compiler runs for %d programs", wl.starts, PROGRAMS);
	ck_assert_int_eq(sum_status(job1, NODES, "builds_started"), PROGRAMS);
	ck_assert_int_eq(sum_status(job1, NODES, "builds_failed"), 0);
	ck_assert_int_eq(sum_status(job1, NODES, "upstream_hits"), (NODES - 1) * PROGRAMS);
	ck_assert_int_eq(sum_status(job1, NODES, "upstream_takeovers"), 0);
	ck_assert_int_eq(sum_status(job1, NODES, "upstream_errors"), 0);
	for (int i = 0; i < NODES; i++)
		node_stop(&job1[i]);
	/* Publishing ends after the replies; a stop waits for it. */
	ck_assert_int_eq(count_files(args.upstream, ".json"), PROGRAMS);
	ck_assert_int_eq(count_files(args.upstream, ".so"), PROGRAMS);
	ck_assert_int_eq(harness_count_dir(harness_path(claims, "upstream/claims")), 0);

	/* A new job: fresh nodes, empty local caches. */
	for (int i = 0; i < NODES; i++) {
		char name[16];

		snprintf(name, sizeof(name), "b%d", i);
		node_init(&job2[i], name);
		node_start(&job2[i], args.argv);
	}
	run_clients(job2, NODES, reqs, values, PROGRAMS);
	harness_wrapper_log_read(log, &wl);
	ck_assert_msg(wl.starts == PROGRAMS, "the new job ran the compiler %d times",
		      wl.starts - PROGRAMS);
	ck_assert_int_eq(sum_status(job2, NODES, "builds_started"), 0);
	ck_assert_int_eq(sum_status(job2, NODES, "upstream_hits"), NODES * PROGRAMS);
	/* By digest first, and upstream had it: no source text was needed. */
	ck_assert_int_eq(sum_status(job2, NODES, "need_sources"), 0);
	ck_assert_int_eq(sum_status(job2, NODES, "source_texts"), 0);
	ck_assert_int_eq(sum_status(job2, NODES, "upstream_publishes"), 0);
	for (int i = 0; i < NODES; i++)
		node_stop(&job2[i]);
	for (int i = 0; i < PROGRAMS; i++)
		free(texts[i]);
}
END_TEST

/*
 * A daemon killed while it holds a claim: another daemon waits (holding no
 * --jobs slot) while the claim is fresh, takes it over once it went stale,
 * and builds.
 */
START_TEST(killed_claim_holder_is_taken_over)
{
	struct claim_race c;
	struct harness_wrapper_log wl;
	cJSON *st;

	claim_race_start(&c, "orphaned", 77, "2");
	st = node_status(&c.b);
	ck_assert_int_eq(harness_num(st, "in_flight"), 0);
	ck_assert_int_eq(harness_num(st, "queued"), 0);
	ck_assert_int_eq(harness_num(st, "builds_started"), 0);
	cJSON_Delete(st);

	node_use(&c.a);
	harness_kill9();
	c.a.pid = 0;
	harness_fleet_wait(c.fa, 60);
	ck_assert_msg(c.fa->results[0].rc != KILN_OK,
		      "a's client got a program from a killed daemon");
	harness_write_file(c.gate, "");

	harness_fleet_wait(c.fb, 120);
	ck_assert_msg(c.fb->results[0].rc == KILN_OK, "b's client failed in %s: %s: %s",
		      c.fb->results[0].stage, kiln_strerror(c.fb->results[0].rc),
		      c.fb->results[0].msg);
	ck_assert_int_eq(c.fb->results[0].value, 77);
	st = node_status(&c.b);
	ck_assert_int_eq(harness_num(st, "upstream_takeovers"), 1);
	ck_assert_int_eq(harness_num(st, "builds_started"), 1);
	ck_assert_int_eq(harness_num(st, "builds_ok"), 1);
	cJSON_Delete(st);
	harness_wrapper_log_read(c.log, &wl);
	ck_assert_int_eq(wl.starts, 2);
	node_stop(&c.b);
	claim_race_end(&c);
}
END_TEST

/* A daemon stopped while it waits on another node's claim answers its
 * client and exits cleanly; the claim holder goes on and publishes. */
START_TEST(stop_while_waiting_on_a_claim)
{
	struct claim_race c;

	claim_race_start(&c, "patient", 5, NULL);
	node_stop(&c.b);
	harness_fleet_wait(c.fb, 60);
	ck_assert_msg(c.fb->results[0].rc == KILN_EBUSY,
		      "b's client got %s, expected KILN_EBUSY: %s",
		      kiln_strerror(c.fb->results[0].rc), c.fb->results[0].msg);

	harness_write_file(c.gate, "");
	harness_fleet_wait(c.fa, 60);
	ck_assert_msg(c.fa->results[0].rc == KILN_OK, "a's client: %s", c.fa->results[0].msg);
	ck_assert_int_eq(c.fa->results[0].value, 5);
	node_stop(&c.a);
	claim_race_end(&c);
}
END_TEST

/* An upstream object whose bytes do not match its metadata is not served:
 * the next node rebuilds and repairs it, and the one after that fetches. */
START_TEST(corrupt_upstream_object_is_rebuilt)
{
	char objects[HARNESS_PATH], obj[HARNESS_PATH];
	char *text = harness_program("damaged", 31);
	struct kiln_request req;
	struct kiln_source src;
	struct node a, b, c;
	struct node_args args;
	struct stat sb;
	cJSON *st;
	int fd;

	node_args_init(&args, NULL, NULL, NULL);
	harness_request(&req, &src, "prog.c", text);
	node_init(&a, "a");
	node_start(&a, args.argv);
	get_value(&a, &req, 31);
	node_stop(&a);

	/* Flip one byte in the middle, keeping the size. */
	snprintf(obj, sizeof(obj), "%s", find_one(harness_path(objects, "upstream/objects"), ".so"));
	ck_assert_int_eq(chmod(obj, 0600), 0);
	fd = open(obj, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &sb), 0);
	{
		unsigned char byte;
		off_t mid = sb.st_size / 2;

		ck_assert_int_eq(pread(fd, &byte, 1, mid), 1);
		byte ^= 0xff;
		ck_assert_int_eq(pwrite(fd, &byte, 1, mid), 1);
	}
	close(fd);
	ck_assert_int_eq(chmod(obj, 0444), 0);

	node_init(&b, "b");
	node_start(&b, args.argv);
	get_value(&b, &req, 31);
	st = node_status(&b);
	ck_assert_int_eq(harness_num(st, "upstream_hits"), 0);
	ck_assert_int_ge(harness_num(st, "upstream_errors"), 1);
	ck_assert_int_eq(harness_num(st, "builds_started"), 1);
	cJSON_Delete(st);
	/* The rebuild replaces what was damaged, after its reply. */
	node_use(&b);
	harness.pid = 0;
	harness_wait_status("upstream_publishes", 1, 60);
	node_stop(&b);
	{
		char *log = harness_read_file(b.log);

		ck_assert_msg(harness_contains(log, "does not match its metadata"),
			      "the log does not say why the upstream entry was refused:\n%s", log);
		free(log);
	}

	node_init(&c, "c");
	node_start(&c, args.argv);
	get_value(&c, &req, 31);
	st = node_status(&c);
	ck_assert_int_eq(harness_num(st, "upstream_hits"), 1);
	ck_assert_int_eq(harness_num(st, "upstream_errors"), 0);
	ck_assert_int_eq(harness_num(st, "builds_started"), 0);
	cJSON_Delete(st);
	node_stop(&c);
	free(text);
}
END_TEST

/*
 * An entry built against a header that differs on this node is no hit: the
 * node builds its own, upstream then holds both, and a node with the first
 * header again fetches the first.
 */
START_TEST(changed_header_is_not_an_upstream_hit)
{
	static const char text[] =
		"#include <kiln_up_value.h>\n"
		"int kiln_test_value(void) { return KILN_UP_VALUE; }\n";
	char inc[HARNESS_PATH], header[HARNESS_PATH + 32], incarg[HARNESS_PATH + 8];
	char rkeydir[HARNESS_PATH * 2];
	const char *argv[1];
	struct kiln_request req;
	struct kiln_source src;
	struct node a, b, c;
	struct node_args args;
	cJSON *st, *ls;

	value_request(&req, &src, text, inc, header, incarg, argv);
	node_args_init(&args, NULL, NULL, NULL);

	node_init(&a, "a");
	node_start(&a, args.argv);
	get_value(&a, &req, 11);
	node_stop(&a);

	/* This node's copy of the header differs. */
	harness_write_file(header, "#define KILN_UP_VALUE 22\n");
	node_init(&b, "b");
	node_start(&b, args.argv);
	get_value(&b, &req, 22);
	st = node_status(&b);
	ck_assert_int_eq(harness_num(st, "upstream_hits"), 0);
	ck_assert_int_eq(harness_num(st, "upstream_errors"), 0);
	ck_assert_int_eq(harness_num(st, "builds_started"), 1);
	cJSON_Delete(st);
	node_use(&b);
	ls = harness_cli_json("ls", NULL);
	ck_assert_int_eq(cJSON_GetArraySize(ls), 1);
	snprintf(rkeydir, sizeof(rkeydir), "%s/entries/%.2s/%s", args.upstream,
		 harness_str(cJSON_GetArrayItem(ls, 0), "rkey"),
		 harness_str(cJSON_GetArrayItem(ls, 0), "rkey"));
	cJSON_Delete(ls);
	node_stop(&b);
	ck_assert_int_eq(harness_count_dir(rkeydir), 2);

	harness_write_file(header, "#define KILN_UP_VALUE 11\n");
	node_init(&c, "c");
	node_start(&c, args.argv);
	get_value(&c, &req, 11);
	st = node_status(&c);
	ck_assert_int_eq(harness_num(st, "upstream_hits"), 1);
	ck_assert_int_eq(harness_num(st, "builds_started"), 0);
	cJSON_Delete(st);
	node_stop(&c);
}
END_TEST

/*
 * A get by digest and the same get with the text, in one write: the text
 * joins the digest-only flight while it looks upstream, so neither is
 * answered need_sources, and the program is built once.
 */
START_TEST(text_joins_a_digest_only_flight)
{
	char *text = harness_program("joiner", 9);
	char digest[65];
	struct node a;
	struct node_args args;
	cJSON *req, *src, *srcs, *r, *st;
	char *by_digest, *with_text, *both;
	size_t l1, l2;
	int fd;

	node_args_init(&args, NULL, NULL, NULL);
	node_init(&a, "a");
	node_start(&a, args.argv);
	harness_sha256_hex(text, digest);

	req = cJSON_CreateObject();
	cJSON_AddStringToObject(req, "op", "get");
	cJSON_AddNumberToObject(req, "id", 2);
	srcs = cJSON_AddArrayToObject(req, "sources");
	src = cJSON_CreateObject();
	cJSON_AddStringToObject(src, "name", "prog.c");
	cJSON_AddStringToObject(src, "sha256", digest);
	cJSON_AddItemToArray(srcs, src);
	by_digest = cJSON_PrintUnformatted(req);
	cJSON_ReplaceItemInObject(req, "id", cJSON_CreateNumber(3));
	cJSON_DeleteItemFromObject(src, "sha256");
	cJSON_AddStringToObject(src, "text", text);
	with_text = cJSON_PrintUnformatted(req);
	cJSON_Delete(req);

	/* Both frames in one write, so the daemon reads them together. */
	l1 = strlen(by_digest);
	l2 = strlen(with_text);
	both = malloc(8 + l1 + l2);
	ck_assert_ptr_nonnull(both);
	for (int i = 0; i < 4; i++) {
		both[i] = (char)(l1 >> (24 - 8 * i));
		both[4 + l1 + i] = (char)(l2 >> (24 - 8 * i));
	}
	memcpy(both + 4, by_digest, l1);
	memcpy(both + 8 + l1, with_text, l2);

	fd = harness_raw_connect(a.socket);
	harness_raw_send(fd, "{\"op\":\"hello\",\"id\":1,\"proto\":3}");
	r = harness_raw_recv(fd);
	ck_assert(r && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok")));
	cJSON_Delete(r);
	harness_raw_send_bytes(fd, both, 8 + l1 + l2);
	for (int i = 0; i < 2; i++) {
		char *s;

		r = harness_raw_recv(fd);
		ck_assert_msg(r != NULL, "the daemon closed the connection");
		s = cJSON_PrintUnformatted(r);
		ck_assert_msg(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok")),
			      "a get failed: %s", s);
		free(s);
		cJSON_Delete(r);
	}
	close(fd);
	st = node_status(&a);
	ck_assert_int_eq(harness_num(st, "need_sources"), 0);
	ck_assert_int_eq(harness_num(st, "builds_started"), 1);
	ck_assert_int_eq(harness_num(st, "joined"), 1);
	cJSON_Delete(st);
	node_stop(&a);
	free(both);
	free(by_digest);
	free(with_text);
	free(text);
}
END_TEST

/* Runs kilnd with --upstream dir; requires exit status 1 and msg. */
static void expect_refused(const char *dir, const char *msg)
{
	char sock[HARNESS_PATH], cache[HARNESS_PATH], out[HARNESS_PATH];
	const char *argv[] = { harness_kilnd(), "--socket", harness_path(sock, "refused.sock"),
			       "--cache-dir", harness_path(cache, "refused-cache"), "--upstream", dir,
			       NULL };
	char *text;
	int status;

	harness_path(out, "refused.out");
	unlink(out);
	status = harness_run(argv, out, NULL, 30);
	text = harness_read_file(out);
	ck_assert_msg(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 1,
		      "kilnd --upstream %s: status 0x%x, expected exit 1:\n%s", dir, status, text);
	ck_assert_msg(harness_contains(text, msg), "kilnd --upstream %s said:\n%s\nexpected \"%s\"",
		      dir, text, msg);
	ck_assert_msg(harness_contains(text, dir), "the message does not name %s:\n%s", dir, text);
	free(text);
}

/* An upstream directory that cannot be used stops the start with a reason;
 * one whose parent exists is created. */
/*
 * kilnd holds the tier open from start: a directory put in its place later
 * (by whoever could rename it) is never used. Here the owner renames it
 * away and makes an empty one under the name: the next build still goes to
 * the tier kilnd checked at start.
 */
START_TEST(the_tier_is_used_through_the_directory_opened_at_start)
{
	char moved[HARNESS_PATH];
	struct kiln_request req1, req2, req3;
	struct kiln_source src1, src2, src3;
	struct node a;
	struct node_args args;

	node_args_init(&args, NULL, NULL, NULL);
	harness_request(&req1, &src1, "first.c", "int kiln_test_value(void) { return 31; }\n");
	harness_request(&req2, &src2, "second.c", "int kiln_test_value(void) { return 32; }\n");
	harness_request(&req3, &src3, "third.c", "int kiln_test_value(void) { return 33; }\n");
	node_init(&a, "a");
	node_start(&a, args.argv);
	get_value(&a, &req1, 31);
	ck_assert_int_eq(rename(args.upstream, harness_path(moved, "upstream.moved")), 0);
	ck_assert_int_eq(mkdir(args.upstream, 0700), 0);
	get_value(&a, &req2, 32);
	/* The publish follows the reply: wait for it, then check where it went. */
	for (int i = 0; i < 600 && count_files(moved, ".json") < 2; i++)
		harness_sleep_ms(50);
	ck_assert_int_eq(count_files(moved, ".json"), 2);
	ck_assert_int_eq(count_files(args.upstream, ".json"), 0);
	/* Its subdirectories removed by hand: made again; a missing claims/
	 * is not a claim held by someone (before: the get waited forever). */
	char cmd[HARNESS_PATH * 5];
	snprintf(cmd, sizeof(cmd), "d='%s'; rm -rf \"$d/claims\" \"$d/entries\" \"$d/objects\" "
		 "\"$d/tmp\" || rm -rf \"$d/claims\" \"$d/entries\" \"$d/objects\" \"$d/tmp\"",
		 moved);
	ck_assert_int_eq(system(cmd), 0);
	get_value(&a, &req3, 33);
	node_stop(&a);
	ck_assert_int_eq(count_files(moved, ".json"), 1);
	ck_assert_int_eq(count_files(args.upstream, ".json"), 0);
	ck_assert_int_eq(harness_count_dir(args.upstream), 0);
}
END_TEST

START_TEST(unusable_upstream_dir_is_refused)
{
	char dir[HARNESS_PATH], file[HARNESS_PATH];
	struct node a;
	struct node_args args;

	expect_refused(harness_path(dir, "no/such/upstream"), "does not exist");
	harness_write_file(harness_path(file, "plain-file"), "");
	expect_refused(file, "is not a directory");
	ck_assert_int_eq(mkdir(harness_path(dir, "open-upstream"), 0700), 0);
	ck_assert_int_eq(chmod(dir, 0777), 0);
	expect_refused(dir, "writable by group or others");
	/* A private directory inside a group-writable one (a project's scratch
	 * directory): a member could swap it; with the sticky bit, not. */
	ck_assert_int_eq(mkdir(harness_path(dir, "project"), 0700), 0);
	ck_assert_int_eq(chmod(dir, 0775), 0);
	ck_assert_int_eq(mkdir(harness_path(dir, "project/mine"), 0700), 0);
	expect_refused(dir, "without the sticky bit");
	ck_assert_int_eq(chmod(harness_path(file, "project"), 01775), 0);
	{
		char sock[HARNESS_PATH], cache[HARNESS_PATH];
		const char *argv[] = { harness_kilnd(), "--socket", harness_path(sock, "sticky.sock"),
				       "--cache-dir", harness_path(cache, "sticky-cache"), "--upstream",
				       dir, "--daemonize", NULL };
		ck_assert_int_eq(harness_run(argv, NULL, NULL, 30), 0);
		const char *stop[] = { harness_cli_path(), "--socket", sock, "stop", NULL };
		ck_assert_int_eq(harness_run(stop, NULL, NULL, 30), 0);
	}
	/* Writing fails (here because tmp/ is a file; root can write anywhere). */
	ck_assert_int_eq(mkdir(harness_path(dir, "odd-upstream"), 0700), 0);
	harness_write_file(harness_path(file, "odd-upstream/tmp"), "");
	expect_refused(dir, "not writable");
	if (geteuid() != 0) {
		/* A read-only directory stops only an ordinary user. */
		ck_assert_int_eq(mkdir(harness_path(dir, "ro-upstream"), 0700), 0);
		ck_assert_int_eq(chmod(dir, 0500), 0);
		expect_refused(dir, "not writable");
	}

	node_args_init(&args, NULL, NULL, NULL);
	node_init(&a, "a");
	node_start(&a, args.argv);
	ck_assert_msg(harness_exists(args.upstream), "kilnd did not create %s", args.upstream);
	{
		cJSON *st = node_status(&a);

		ck_assert_str_eq(harness_str(st, "upstream"), args.upstream);
		ck_assert_int_eq(harness_num(st, "upstream_hits"), 0);
		cJSON_Delete(st);
	}
	node_stop(&a);
}
END_TEST

/*
 * Nodes with the same compiler named by path share its entries through the
 * tier (the identity, not the name, is in the key); once the compiler
 * differs (upgraded before node c started), c builds.
 */
START_TEST(named_compiler_is_matched_by_identity_across_nodes)
{
	char cxx[HARNESS_PATH], src[HARNESS_PATH];
	struct node a, b, c;
	struct node_args args;

	harness_module_compiler(cxx, 1);
	harness_write_file(harness_path(src, "p.cpp"), "extern \"C\" int f(void) { return 5; }\n");
	node_args_init(&args, NULL, NULL, NULL);
	node_init(&a, "a");
	node_init(&b, "b");
	node_init(&c, "c");
	node_start(&a, args.argv);
	node_start(&b, args.argv);
	build_on(&a, cxx, src);
	node_stop(&a);   /* its publish is done once it has stopped */
	build_on(&b, cxx, src);
	cJSON *st = node_status(&b);
	ck_assert_int_eq(harness_num(st, "builds_started"), 0);
	ck_assert_int_eq(harness_num(st, "upstream_hits"), 1);
	cJSON_Delete(st);
	node_stop(&b);

	harness_module_compiler(cxx, 2);
	node_start(&c, args.argv);
	build_on(&c, cxx, src);
	st = node_status(&c);
	ck_assert_int_eq(harness_num(st, "builds_started"), 1);
	ck_assert_int_eq(harness_num(st, "upstream_hits"), 0);
	cJSON_Delete(st);
	node_stop(&c);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("upstream");

	suite_add_tcase(s, harness_tcase("shared", nodes_share_one_build_per_program, 240));
	suite_add_tcase(s, harness_tcase("held", the_tier_is_used_through_the_directory_opened_at_start, 120));
	suite_add_tcase(s, harness_tcase("takeover", killed_claim_holder_is_taken_over, 120));
	suite_add_tcase(s, harness_tcase("stop_waiting", stop_while_waiting_on_a_claim, 120));
	suite_add_tcase(s, harness_tcase("corrupt", corrupt_upstream_object_is_rebuilt, 120));
	suite_add_tcase(s, harness_tcase("header", changed_header_is_not_an_upstream_hit, 120));
	suite_add_tcase(s, harness_tcase("join", text_joins_a_digest_only_flight, 60));
	suite_add_tcase(s, harness_tcase("refused", unusable_upstream_dir_is_refused, 60));
	suite_add_tcase(s, harness_tcase("named_compiler", named_compiler_is_matched_by_identity_across_nodes, 120));
	return harness_main(s);
}
