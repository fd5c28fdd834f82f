/*
 * libkiln-mpi with real MPI processes (MPICH's mpiexec) and one real kilnd
 * per simulated node: KILN_MPI_NODE_SIZE makes every n ranks a node, and
 * KILN_SOCKET=<dir>/n%n.sock sends each node's ranks to its own daemon. The
 * ranks run tests/integration/mpi_worker.c, which checks what a rank sees;
 * this file counts what the daemons did. Skipped (77) without MPI.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define MAX_NODES 8

static pid_t daemons[MAX_NODES];
static int ndaemons;

static const char *worker(void)
{
	return getenv("KILN_TEST_MPI_WORKER");
}

/* Starts one kilnd per node, n<i>.sock with cache n<i>.cache; extra_env
 * (may be NULL) goes to the daemon of node odd_node only. */
static void start_daemons(int n, int odd_node, const char *extra_env)
{
	const char *extra[] = { "--jobs", "2", NULL };
	const char *env[] = { extra_env, NULL };
	char name[16], sock[HARNESS_PATH];

	ndaemons = n;
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		daemons[i] = harness_start_named(name, extra, i == odd_node ? env : NULL, sock);
	}
}

static cJSON *daemon_status(int i)
{
	char sock[HARNESS_PATH];

	return harness_status_at(harness_path(sock, "n%d.sock", i));
}

/* The sum of a status counter over all daemons. */
static int64_t sum_status(const char *field)
{
	int64_t sum = 0;

	for (int i = 0; i < ndaemons; i++) {
		cJSON *st = daemon_status(i);

		sum += harness_num(st, field);
		cJSON_Delete(st);
	}
	return sum;
}

static int64_t node_status(int i, const char *field)
{
	cJSON *st = daemon_status(i);
	int64_t v = harness_num(st, field);

	cJSON_Delete(st);
	return v;
}

/* A number from a rank's result file ("name value" lines); -1 when absent. */
static long long rank_value(int rank, const char *name)
{
	char path[HARNESS_PATH], *text, *p;
	long long v = -1;
	size_t nl = strlen(name);

	harness_path(path, "out/rank-%d.txt", rank);
	text = harness_read_file(path);
	for (p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p)) {
		if (strncmp(p, name, nl) == 0 && p[nl] == ' ') {
			v = atoll(p + nl + 1);
			break;
		}
	}
	free(text);
	return v;
}

/* Starts mpiexec -n ranks mpi_worker ARGS... <dir>/out with node_size ranks
 * per node (0: real shared-memory nodes), extra (may be NULL) in the ranks'
 * environment; returns its pid. */
static pid_t start_ranks(int ranks, int node_size, const char *const *args, const char *extra)
{
	char outdir[HARNESS_PATH], sockenv[HARNESS_PATH + 32], nsenv[64], nranks[16], asan[512];
	const char *argv[32];
	/* A bare MPICH "hello world" built with ASan reports leaks from
	 * MPICH's own modules, unloaded at MPI_Finalize (so not even
	 * suppressible by name); leak checking is off in the ranks only. The
	 * daemons keep it, and every other ASan and UBSan check stays on. */
	/* KILN_MPI_TRACE: each leader says where its time went (mpiexec.out,
	 * shown when a test fails) and how it imported. */
	const char *env[] = { asan, sockenv, "KILN_MPI_TRACE=1", node_size > 0 ? nsenv : extra,
			      node_size > 0 ? extra : NULL, NULL };
	size_t n = 0;

	snprintf(asan, sizeof(asan), "ASAN_OPTIONS=%s%sdetect_leaks=0",
		 getenv("ASAN_OPTIONS") ? getenv("ASAN_OPTIONS") : "",
		 getenv("ASAN_OPTIONS") ? ":" : "");
	harness_path(outdir, "out");
	mkdir(outdir, 0700);
	snprintf(sockenv, sizeof(sockenv), "KILN_SOCKET=%s/n%%n.sock", harness.dir);
	snprintf(nsenv, sizeof(nsenv), "KILN_MPI_NODE_SIZE=%d", node_size);
	snprintf(nranks, sizeof(nranks), "%d", ranks);
	argv[n++] = getenv("KILN_TEST_MPIEXEC");
	argv[n++] = "-n";
	argv[n++] = nranks;
	argv[n++] = worker();
	for (size_t i = 0; args[i]; i++)
		argv[n++] = args[i];
	argv[n++] = outdir;
	argv[n] = NULL;
	char log[HARNESS_PATH];
	harness_path(log, "mpiexec.out");
	return harness_spawn(argv, env, log, NULL);
}

/* Waits for start_ranks' mpiexec; fails with every rank's output unless it
 * and every rank's checks passed. */
static void finish_ranks(pid_t pid, int ranks)
{
	char log[HARNESS_PATH];
	harness_path(log, "mpiexec.out");
	int status = harness_wait(pid, 240);
	if (status != 0) {
		char msg[16384] = "";

		for (int r = 0; r < ranks; r++) {
			char path[HARNESS_PATH], *t;

			harness_path(path, "out/rank-%d.txt", r);
			t = harness_read_file(path);
			snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg), "rank %d:\n%.600s\n", r,
				 t ? t : "(no output)");
			free(t);
		}
		char *mo = harness_read_file(log);
		ck_abort_msg("mpiexec exited with status 0x%x\n%s\nmpiexec:\n%.2000s", status, msg,
			     mo ? mo : "");
	}
	for (int r = 0; r < ranks; r++)
		ck_assert_int_eq(rank_value(r, "failures"), 0);
}

static void run_ranks(int ranks, int node_size, const char *const *args)
{
	finish_ranks(start_ranks(ranks, node_size, args, NULL), ranks);
}

static long long sum_leaders(int ranks, int node_size, const char *name)
{
	long long sum = 0;

	for (int r = 0; r < ranks; r += node_size)
		sum += rank_value(r, name);
	return sum;
}

/* 8 ranks as 4 nodes, 20 programs on every rank: 20 compiler runs in all. */
START_TEST(same_programs_once_per_job)
{
	const char *args[] = { "same", "20", NULL };

	start_daemons(4, -1, NULL);
	run_ranks(8, 2, args);
	ck_assert_int_eq(sum_status("builds_started"), 20);
	ck_assert_int_eq(sum_status("builds_failed"), 0);
	/* Each program went to the 3 nodes that did not build it. */
	ck_assert_int_eq(sum_status("imports"), 60);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(node_status(i, "entries"), 20);
	ck_assert_int_eq(sum_leaders(8, 2, "warm_built_here"), 20);
	ck_assert_int_eq(sum_leaders(8, 2, "warm_received"), 60);
	/* Shared out: every node built 5. */
	for (int r = 0; r < 8; r += 2)
		ck_assert_int_eq(rank_value(r, "warm_built_here"), 5);
	/* Imports hash no dependency twice: the 15 imports of a node find
	 * libc, the compiler and the headers in kilnd's digest cache. */
	for (int i = 0; i < 4; i++) {
		cJSON *st = daemon_status(i);
		const cJSON *dg = cJSON_GetObjectItemCaseSensitive(st, "digests");
		int64_t hashed = harness_num(dg, "hashed"), cached = harness_num(dg, "cached");
		ck_assert_msg(cached >= 15 && hashed < cached, "node %d hashed %lld files, took %lld "
			      "from the cache", i, (long long)hashed, (long long)cached);
		cJSON_Delete(st);
	}

	/* The next job step: everything is cached on every node. */
	run_ranks(8, 2, args);
	ck_assert_int_eq(sum_status("builds_started"), 20);
	ck_assert_int_eq(sum_leaders(8, 2, "warm_cached"), 80);
	ck_assert_int_eq(sum_leaders(8, 2, "warm_built_here"), 0);
}
END_TEST

/* 10 shared programs plus 3 unique to each of 8 ranks: 34 distinct keys. */
START_TEST(mixed_requests_distinct_keys)
{
	const char *args[] = { "mixed", "10", "3", NULL };

	start_daemons(4, -1, NULL);
	run_ranks(8, 2, args);
	ck_assert_int_eq(sum_status("builds_started"), 10 + 8 * 3);
	/* A program only one node needs is built there and sent nowhere;
	 * each shared one goes to the 3 nodes that did not build it. */
	ck_assert_int_eq(sum_status("imports"), 30);
}
END_TEST

/* 16 ranks on one node, one program: one compiler run, one rank's text. */
START_TEST(herd_one_node)
{
	const char *args[] = { "herd", NULL };

	start_daemons(1, -1, NULL);
	run_ranks(16, 0, args);
	ck_assert_int_eq(node_status(0, "builds_started"), 1);
	ck_assert_int_eq(node_status(0, "source_texts"), 1);
	ck_assert_int_eq(node_status(0, "imports"), 0);
}
END_TEST

/* A compile error is reported on every rank, identically; it is built once
 * per collective call. */
START_TEST(failure_same_on_every_rank)
{
	const char *args[] = { "fail", NULL };

	start_daemons(4, -1, NULL);
	run_ranks(8, 2, args);
	/* 3 good programs once, the broken one once by kiln_mpi_warm and once
	 * more by kiln_mpi_get (failures are not cached). */
	ck_assert_int_eq(sum_status("builds_started"), 5);
	ck_assert_int_eq(sum_status("builds_failed"), 2);
	for (int r = 0; r < 8; r++) {
		ck_assert_int_eq(rank_value(r, "warm_rc"), KILN_EBUILD);
		ck_assert_int_eq(rank_value(r, "get_rc"), KILN_EBUILD);
	}
}
END_TEST

/* Bad arguments on one rank fail there and leave no other rank waiting. */
START_TEST(bad_arguments_do_not_hang)
{
	const char *args[] = { "badargs", NULL };

	start_daemons(2, -1, NULL);
	run_ranks(4, 2, args);
	ck_assert_int_eq(sum_status("builds_started"), 1);
	ck_assert_int_eq(rank_value(1, "get_rc"), KILN_EINVAL);
	ck_assert_int_eq(rank_value(0, "get_rc"), KILN_OK);
	ck_assert_int_eq(rank_value(1, "open_rc"), KILN_EINVAL);
	ck_assert_int_eq(rank_value(0, "open_rc"), KILN_OK);
	ck_assert_int_eq(rank_value(2, "warm_rc"), KILN_OK);
}
END_TEST

/* A node whose compiler environment differs refuses the others' artifacts
 * (put answers mismatch) and builds them itself; every rank still works. */
START_TEST(mismatched_node_builds_itself)
{
	const char *args[] = { "same", "8", NULL };

	start_daemons(4, 3, "SOURCE_DATE_EPOCH=1");
	run_ranks(8, 2, args);
	ck_assert_int_eq(node_status(3, "imports"), 0);
	ck_assert_int_eq(node_status(3, "builds_started"), 8);
	ck_assert_int_eq(node_status(3, "entries"), 8);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(node_status(i, "entries"), 8);
}
END_TEST

/* Nodes 2 and 3 have another compiler (a wrapper around cc: another
 * toolchain identity, so another request key): the two groups build each
 * program once each, and within a group it goes down a tree. (Before the
 * groups, nodes 2 and 3 each built on their own what nodes 0 and 1 had
 * built, and the other way round: 24 compiler runs for 16.) */
START_TEST(compiler_groups_build_once_each)
{
	const char *args[] = { "same", "8", NULL };
	const char *extra[] = { "--jobs", "2", NULL, NULL, NULL };
	char wrapper[HARNESS_PATH], log[HARNESS_PATH], tc[HARNESS_PATH + 8];
	char name[16], sock[HARNESS_PATH];

	harness_write_wrapper(harness_path(wrapper, "other-cc.sh"), harness_path(log, "other.log"),
			      NULL, 0);
	snprintf(tc, sizeof(tc), "cc=%s", wrapper);
	ndaemons = 4;
	for (int i = 0; i < 4; i++) {
		extra[2] = i >= 2 ? "--toolchain" : NULL;
		extra[3] = i >= 2 ? tc : NULL;
		snprintf(name, sizeof(name), "n%d", i);
		daemons[i] = harness_start_named(name, extra, NULL, sock);
	}
	run_ranks(8, 2, args);
	ck_assert_int_eq(sum_status("builds_started"), 16);
	ck_assert_int_eq(node_status(0, "builds_started") + node_status(1, "builds_started"), 8);
	ck_assert_int_eq(node_status(2, "builds_started") + node_status(3, "builds_started"), 8);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(node_status(i, "entries"), 8);
	/* Within each group, each node imported what the other one built. */
	ck_assert_int_eq(node_status(0, "imports") + node_status(1, "imports"), 8);
	ck_assert_int_eq(node_status(2, "imports") + node_status(3, "imports"), 8);
}
END_TEST

/* How many of the leaders' trace lines in mpiexec.out (every mpiexec of
 * the test) say what. */
static int trace_lines(const char *what)
{
	char log[HARNESS_PATH];
	char *text = harness_read_file(harness_path(log, "mpiexec.out"));
	int n = 0;
	for (char *p = text; p != NULL && (p = strstr(p, "libkiln-mpi: node ")) != NULL; p++) {
		char *nl = strchr(p, '\n');
		char *hit = strstr(p, what);
		n += hit != NULL && (nl == NULL || hit < nl);
	}
	free(text);
	return n;
}

/* Each program goes down a tree: with one program on 8 nodes, no node sends
 * it more than twice, and each of the 7 others gets it once (a fan-out
 * from the builder sent it 7 times). */
static void copies_bounded(const char *env)
{
	const char *one[] = { "same", "1", NULL }, *many[] = { "same", "16", NULL };

	start_daemons(8, -1, NULL);
	finish_ranks(start_ranks(8, 1, one, env), 8);
	ck_assert_int_eq(sum_status("builds_started"), 1);
	ck_assert_int_eq(sum_status("imports"), 7);
	long long headers = 0;
	for (int r = 0; r < 8; r++) {
		ck_assert_int_le(rank_value(r, "xfer_headers"), 2);
		headers += rank_value(r, "xfer_headers");
	}
	ck_assert_int_eq(headers, 7);
	/* 16 programs, the first cached everywhere already: at most two
	 * copies of each of the 15 others from any node, 7 in all each. */
	finish_ranks(start_ranks(8, 1, many, env), 8);
	ck_assert_int_eq(sum_status("builds_started"), 16);
	headers = 0;
	for (int r = 0; r < 8; r++) {
		ck_assert_int_le(rank_value(r, "xfer_headers"), 2 * 15);
		headers += rank_value(r, "xfer_headers");
	}
	ck_assert_int_eq(headers, 15 * 7);
	ck_assert_int_eq(sum_status("imports"), 16 * 7);
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(node_status(i, "entries"), 16);
}

START_TEST(copies_per_node_bounded)
{
	copies_bounded(NULL);
	/* MPI_Init: the imports ran as a batch (unless the whole suite runs
	 * with KILN_TEST_MPI_THREAD=funneled). */
	for (int r = 0; r < 8 && getenv("KILN_TEST_MPI_THREAD") == NULL; r++)
		ck_assert_int_eq(rank_value(r, "thread_level"), 0);
	/* mpiexec.out holds both jobs: 8 leaders each, one round each. */
	if (getenv("KILN_TEST_MPI_THREAD") == NULL)
		ck_assert_int_eq(trace_lines("batch 0)"), 16);
}
END_TEST

/* The same with the plan made by coordinators (as for large jobs): each
 * program's records go to one leader, which tells the nodes of its tree
 * their parts; nobody gathers every node's records. */
START_TEST(distributed_plan)
{
	copies_bounded("KILN_MPI_PLAN=distributed");
}
END_TEST

/* The same with MPI started at MPI_THREAD_FUNNELED, as codes with OpenMP
 * do: each leader imports on 4 threads of its own while its transfer loop
 * goes on (the others: after the loop, as one batch). */
START_TEST(imports_on_a_thread)
{
	copies_bounded("KILN_TEST_MPI_THREAD=funneled");
	for (int r = 0; r < 8; r++)   /* MPICH: SINGLE 0, FUNNELED 1 */
		ck_assert_int_ge(rank_value(r, "thread_level"), 1);
	/* The 8 leaders of both jobs, one round each. */
	ck_assert_int_eq(trace_lines("threads 4)"), 16);
	ck_assert_int_eq(trace_lines("batch 0)"), 0);
}
END_TEST

/* The serving node cannot export what it built (KILN_MPI_FAULT; as when its
 * kilnd dies right after the build): its header says so with no bytes
 * behind it, the others agree to build each of its programs on one node in
 * a second round, and every rank gets every program. (The old exchange
 * sent the bytes after a header that said 0: spurious protocol errors on
 * every healthy rank, or a hang.) */
START_TEST(export_failure_no_desync)
{
	const char *args[] = { "same", "8", NULL };

	start_daemons(4, -1, NULL);
	finish_ranks(start_ranks(8, 2, args, "KILN_MPI_FAULT=export:1"), 8);
	/* 8 once, and node 1's share once more, each on one other node. */
	int64_t node1 = node_status(1, "builds_started");
	ck_assert_int_gt(node1, 0);
	ck_assert_int_eq(sum_status("builds_started"), 8 + node1);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(node_status(i, "entries"), 8);
}
END_TEST

/*
 * Node 1's kilnd fails while it builds its share: killed (kill -9), or
 * stopped (SIGSTOP: its leader's calls meet libkiln's deadline). The other
 * nodes' ranks get every program, each of node 1's programs built once more
 * on one surviving node (not on each), and nobody hangs.
 */
static void kilnd_fails_midway(int sig)
{
	const char *args[] = { "fault", "8", "1", NULL };
	const char *extra[] = { "--jobs", "2", NULL, NULL, NULL };
	char wrapper[HARNESS_PATH], log[HARNESS_PATH], gate[HARNESS_PATH], tc[HARNESS_PATH + 8];
	char name[16], sock[HARNESS_PATH];

	harness_write_wrapper(harness_path(wrapper, "wrap.sh"), harness_path(log, "wrap.log"),
			      harness_path(gate, "gate"), 0);
	snprintf(tc, sizeof(tc), "cc=%s", wrapper);
	ndaemons = 4;
	for (int i = 0; i < 4; i++) {
		extra[2] = i == 1 ? "--toolchain" : NULL;
		extra[3] = i == 1 ? tc : NULL;
		snprintf(name, sizeof(name), "n%d", i);
		daemons[i] = harness_start_named(name, extra, NULL, sock);
	}
	pid_t ranks = start_ranks(8, 2, args, "KILN_TIMEOUT=10");
	harness_wait_wrapper_starts(log, 1, 120);
	ck_assert_int_eq(kill(daemons[1], sig), 0);
	harness_write_file(gate, "");
	finish_ranks(ranks, 8);
	if (sig == SIGSTOP)
		kill(daemons[1], SIGCONT);
	int64_t built = 0;
	for (int i = 0; i < 4; i++) {
		if (i == 1)
			continue;
		ck_assert_int_eq(node_status(i, "entries"), 8);
		built += node_status(i, "builds_started");
	}
	ck_assert_int_eq(built, 8);
	ck_assert_int_ne(rank_value(2, "warm_rc"), KILN_OK);
	ck_assert_int_eq(rank_value(0, "warm_rc"), KILN_OK);
}

/* Node 2 has no kilnd at all when the job starts: kiln_mpi_open fails on
 * its ranks only, they take part in kiln_mpi_warm with nothing, and the
 * other nodes' ranks get every program (each built once). */
START_TEST(kilnd_down_at_start)
{
	const char *args[] = { "fault", "8", "2", NULL };
	const char *extra[] = { "--jobs", "2", NULL };
	char name[16], sock[HARNESS_PATH];

	ndaemons = 0;
	for (int i = 0; i < 4; i++) {
		if (i == 2)
			continue;
		snprintf(name, sizeof(name), "n%d", i);
		daemons[ndaemons++] = harness_start_named(name, extra, NULL, sock);
	}
	finish_ranks(start_ranks(8, 2, args, NULL), 8);
	for (int r = 0; r < 8; r++) {
		bool dead = r / 2 == 2;
		ck_assert_int_eq(rank_value(r, "first_open_rc") == KILN_OK, !dead);
		ck_assert_int_eq(rank_value(r, "warm_rc") == KILN_OK, !dead);
	}
	int64_t built = 0;
	for (int i = 0; i < 4; i++) {
		if (i == 2)
			continue;
		char path[HARNESS_PATH];
		cJSON *st = harness_status_at(harness_path(path, "n%d.sock", i));
		ck_assert_int_eq(harness_num(st, "entries"), 8);
		built += harness_num(st, "builds_started");
		cJSON_Delete(st);
	}
	ck_assert_int_eq(built, 8);
}
END_TEST

START_TEST(kilnd_killed_midway)
{
	kilnd_fails_midway(SIGKILL);
}
END_TEST

START_TEST(kilnd_stopped_midway)
{
	kilnd_fails_midway(SIGSTOP);
}
END_TEST

int main(void)
{
	Suite *s;

	if (!worker() || !*worker()) {
		printf("SKIP: kiln was configured without MPI (libkiln-mpi not built)\n");
		return 77;
	}
	if (!getenv("KILN_TEST_MPIEXEC") || access(getenv("KILN_TEST_MPIEXEC"), X_OK) != 0) {
		printf("SKIP: mpiexec is not installed\n");
		return 77;
	}
	s = suite_create("mpi");
	suite_add_tcase(s, harness_tcase("same_programs_once_per_job", same_programs_once_per_job, 240));
	suite_add_tcase(s, harness_tcase("mixed_requests_distinct_keys", mixed_requests_distinct_keys, 240));
	suite_add_tcase(s, harness_tcase("herd_one_node", herd_one_node, 240));
	suite_add_tcase(s, harness_tcase("failure_same_on_every_rank", failure_same_on_every_rank, 240));
	suite_add_tcase(s, harness_tcase("bad_arguments_do_not_hang", bad_arguments_do_not_hang, 240));
	suite_add_tcase(s, harness_tcase("mismatched_node_builds_itself", mismatched_node_builds_itself, 240));
	suite_add_tcase(s, harness_tcase("copies_per_node_bounded", copies_per_node_bounded, 240));
	suite_add_tcase(s, harness_tcase("distributed_plan", distributed_plan, 240));
	suite_add_tcase(s, harness_tcase("imports_on_a_thread", imports_on_a_thread, 240));
	suite_add_tcase(s, harness_tcase("compiler_groups_build_once_each", compiler_groups_build_once_each, 240));
	suite_add_tcase(s, harness_tcase("export_failure_no_desync", export_failure_no_desync, 240));
	suite_add_tcase(s, harness_tcase("kilnd_down_at_start", kilnd_down_at_start, 240));
	suite_add_tcase(s, harness_tcase("kilnd_killed_midway", kilnd_killed_midway, 240));
	suite_add_tcase(s, harness_tcase("kilnd_stopped_midway", kilnd_stopped_midway, 240));
	return harness_main(s);
}
