/*
 * Shared harness of the integration tests: a temporary directory per test,
 * the real kilnd started and stopped in it, the real CLI run with its output
 * captured, fleets of client processes using the real libkiln, generated C
 * programs, a recording toolchain wrapper and raw protocol I/O.
 *
 * Every test case runs one test in a forked child (Check's CK_FORK). The
 * unchecked fixture creates the temporary directory in the parent before the
 * child starts and, after the child ended however it ended, kills every
 * process that still mentions the directory (daemons, compilers, clients) and
 * removes the directory. So nothing outlives a test, even a failed one.
 * A failed test prints the tail of the daemon's output and log. Set
 * KILN_TEST_KEEP=1 to keep the directories for inspection.
 */
#ifndef KILN_TESTS_HARNESS_H
#define KILN_TESTS_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <check.h>
#include <cjson/cJSON.h>

#include <kiln/kiln.h>

#define HARNESS_PATH 512

/* The test's temporary directory and the default paths inside it. */
struct harness {
	char dir[HARNESS_PATH];     /* from mkdtemp */
	char socket[HARNESS_PATH];  /* <dir>/kilnd.sock */
	char cache[HARNESS_PATH];   /* <dir>/cache */
	char log[HARNESS_PATH];     /* <dir>/kilnd.log, the daemon's --log-file */
	char out[HARNESS_PATH];     /* <dir>/kilnd.out, the daemon's stdout and stderr */
	pid_t pid;                  /* the foreground kilnd started by harness_start, or 0 */
};

/* The current test's harness; filled by the fixture before each test. */
extern struct harness harness;

/* Paths of the programs under test, from the environment meson sets. */
const char *harness_kilnd(void);
const char *harness_cli_path(void);
const char *harness_kiln_exec(void);
const char *harness_data(void);

/*
 * Builds a suite runner around test cases made by harness_tcase() and runs
 * them; returns the process exit status for main(). Takes ownership of s.
 */
int harness_main(Suite *s);
/* A test case holding one test, with the fixtures and a timeout in seconds
 * (scaled by $CK_TIMEOUT_MULTIPLIER as Check does). */
TCase *harness_tcase(const char *name, const TTest *test, double timeout_s);
/* harness_tcase, added to s; returns the test case (for more fixtures). */
TCase *harness_add(Suite *s, const char *name, const TTest *test, double timeout_s);

/* <dir>/opt/gcc/bin/g++: the system's g++ behind a script, as a module
 * system's compiler outside /usr/bin; version (a comment) makes another
 * program. Into path (HARNESS_PATH bytes), which it returns. */
const char *harness_module_compiler(char *path, int version);
/* "<dir>/<rel>" into buf (HARNESS_PATH bytes); returns buf. */
char *harness_path(char *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Writes text to path (replacing it), failing the test on error. */
void harness_write_file(const char *path, const char *text);
/* The file's content, malloc'd and NUL-terminated (caller frees); NULL when
 * it cannot be read. */
char *harness_read_file(const char *path);
/* Entries of a directory other than "." and ".."; -1 when it cannot be read. */
int harness_count_dir(const char *dir);
/* True when path exists (lstat). */
bool harness_exists(const char *path);

/*
 * Starts kilnd in the foreground with --socket, --cache-dir, --log-file and
 * --log-level debug for the harness paths, then the NULL-terminated extra
 * arguments, and waits until the socket accepts connections. Fails the test
 * with the daemon's output when it exits or does not answer. Returns its pid,
 * also kept in harness.pid.
 */
pid_t harness_start(const char *arg, ...);
/* As harness_start() with the extra arguments as a NULL-terminated array. */
pid_t harness_startv(const char *const *extra);
/* As harness_startv(), with env_add (as for harness_spawn) in its environment. */
pid_t harness_start_env(const char *const *extra, const char *const *env_add);
/*
 * Starts another kilnd in the test directory, as if on another node: socket
 * <dir>/<name>.sock (copied to sock), cache <dir>/<name>.cache, log
 * <dir>/<name>.log, output <dir>/<name>.out, then the NULL-terminated extra
 * arguments (may be NULL); env_add (may be NULL) as for harness_spawn. Waits
 * until it answers. The fixture kills it after the test.
 */
pid_t harness_start_named(const char *name, const char *const *extra,
			  const char *const *env_add, char sock[HARNESS_PATH]);
/* The status reply of the kilnd at sock, from a raw connection. */
cJSON *harness_status_at(const char *sock);
/* One number of the status of the daemon at sock. */
int64_t harness_status_num_at(const char *sock, const char *field);

/* What a put of one artifact carries (test_put.c, test_put_forged.c): its
 * skeleton, its export metadata, its bytes and its key. */
struct harness_export {
	char *skel;
	char *meta;
	char *bytes;
	size_t size;
	char key[72];
};
/* Sends SIGTERM to harness.pid and waits; fails the test unless kilnd exits
 * with status 0 and removes its socket. */
void harness_stop(void);
/* SIGKILL to harness.pid and reaps it. */
void harness_kill9(void);

/*
 * Starts argv (argv[0] a path) with stdout appended to out_path (NULL:
 * /dev/null), stderr to err_path (NULL: with stdout) and stdin from
 * /dev/null. env_add (NULL-terminated "NAME=value" strings, may be NULL) is
 * added to the environment.
 */
pid_t harness_spawn(const char *const *argv, const char *const *env_add, const char *out_path,
		    const char *err_path);
/* harness_spawn() and harness_wait(); a process still running after
 * timeout_s is killed and -1 returned. */
int harness_run(const char *const *argv, const char *out_path, const char *err_path,
		double timeout_s);
/* Waits up to timeout_s for pid; returns its wait status, or -1 on timeout
 * (the process is then left running). */
int harness_wait(pid_t pid, double timeout_s);
/* True while pid exists and is not a zombie. */
bool harness_alive(pid_t pid);
/* Waits up to timeout_s until pid is gone; returns true when it is. */
bool harness_wait_gone(pid_t pid, double timeout_s);
/* The size of pid's descriptor table (FDSize in /proc/PID/status); fails
 * the test when it cannot be read. */
unsigned harness_fd_table_size(pid_t pid);
/* The descriptors kilnd may have its table sized for: n, at most this
 * process's hard RLIMIT_NOFILE (which kilnd inherits, and raises its soft
 * limit towards). */
unsigned harness_fd_room(unsigned n);
/* pid's soft RLIMIT_NOFILE ("Max open files" in /proc/PID/limits; UINT_MAX
 * when unlimited); fails the test when it cannot be read. */
unsigned harness_nofile_soft(pid_t pid);
/* True when a connection to the Unix socket at path is accepted. */
bool harness_socket_answers(const char *path);
/* CLOCK_MONOTONIC in seconds. */
double harness_now_s(void);
/* Sleeps ms milliseconds. */
void harness_sleep_ms(int ms);

/*
 * Runs the CLI as "kiln --socket S --cache-dir C ARGS..." for the harness
 * paths (args NULL-terminated) and returns its exit status (-1 when killed
 * or timed out). *out and *err (each may be NULL) get its stdout and stderr,
 * malloc'd, owned by the caller.
 */
int harness_cli(char **out, char **err, const char *arg, ...);
/* As harness_cli() with the arguments as a NULL-terminated array. */
int harness_cliv(char **out, char **err, const char *const *args);
/* Runs "kiln --json ARGS...", requires exit status 0 and one JSON value on
 * stdout, and returns it parsed (caller frees with cJSON_Delete). */
cJSON *harness_cli_json(const char *arg, ...);
/* harness_cli_json("status", NULL). */
cJSON *harness_status(void);
/* The entry of a "kiln --json ls" array whose string member equals value,
 * or NULL. */
const cJSON *harness_find_entry(const cJSON *ls, const char *member, const char *value);
/* Polls "kiln --json status" until its field is at least value; fails the
 * test with the last status after timeout_s. */
void harness_wait_status(const char *field, int64_t value, double timeout_s);
/* Waits until kilnd's check of the cache after an unclean stop, which runs
 * in the background while it serves, has finished (status checking_cache). */
void harness_wait_cache_checked(double timeout_s);
/* The number field name of obj as an integer; fails the test when absent. */
int64_t harness_num(const cJSON *obj, const char *name);
/* The string field name of obj; fails the test when absent. */
const char *harness_str(const cJSON *obj, const char *name);

/*
 * Generated programs. The source defines "int kiln_test_value(void)"
 * returning value and "const char *kiln_test_name(void)" returning name.
 * malloc'd, caller frees.
 */
char *harness_program(const char *name, int value);

/* The SHA-256 of text as 64 lower-case hex digits plus NUL, as a source by
 * digest names it on the wire. */
void harness_sha256_hex(const char *text, char out[65]);

/* A request for one inline source; src and req are filled, text is kept. */
void harness_request(struct kiln_request *req, struct kiln_source *src,
		     const char *source_name, const char *text);

/* n requests, each one program "<prefix>_<i>" answering first + i from a
 * source named source_name; texts[i] (malloc'd, the caller frees) holds
 * its text, which reqs[i] borrows through srcs[i]. */
void harness_requests(int n, const char *prefix, int first, const char *source_name,
		      struct kiln_request *reqs, struct kiln_source *srcs, char **texts);

/*
 * One kiln_get_many of n programs from a fresh connection (so no local
 * hits): every request succeeds, and program i answers first + i and comes
 * with its descriptor. what names the call in failure messages.
 */
void harness_get_many_values(const struct kiln_request *reqs, int n, int first, const char *what);

/*
 * Gets harness_program(name, value) as "prog.c" with alias (may be NULL) and
 * label name through k (NULL: a fresh connection to harness.socket), requires
 * that its kiln_test_value() returns value, and copies its key to key.
 */
void harness_get_program(struct kiln *k, const char *name, int value, const char *alias,
			 char key[72]);

/*
 * Writes an executable toolchain wrapper to path. For compiler runs that
 * write an output (an argument "-o"), it appends "start <pid> <ns>" to log,
 * waits until the file gate exists (when gate is not NULL), sleeps sleep_s
 * seconds, runs /usr/bin/cc with its arguments, and appends
 * "end <pid> <ns>". Other runs (version probes, and kilnd's own checks of
 * artifacts from other nodes in tmp/v-* directories) go straight to
 * /usr/bin/cc, unlogged.
 */
void harness_write_wrapper(const char *path, const char *log, const char *gate, double sleep_s);

/* Polls a wrapper log until it holds at least n "start" lines. */
void harness_wait_wrapper_starts(const char *log, int n, double timeout_s);

/* What a wrapper log holds. */
struct harness_wrapper_log {
	int starts;          /* "start" lines */
	int ends;            /* "end" lines */
	int max_overlap;     /* most compiler runs in progress at one instant */
	pid_t pids[256];     /* pids of the started runs, in log order */
	int npids;
};
/* Reads a wrapper log; a missing log counts as empty. */
void harness_wrapper_log_read(const char *log, struct harness_wrapper_log *out);

/* Outcome of one client process of a fleet. */
struct harness_result {
	int done;            /* 1 once the child wrote its result */
	int rc;              /* KILN_OK or the failing call's code */
	char stage[16];      /* "open", "get", "lookup", "sym" or "ok" */
	int value;           /* kiln_test_value() of the loaded program */
	char key[72];
	char path[HARNESS_PATH];
	char msg[8192];      /* kiln_errmsg() after a failure */
	struct kiln_stats stats;
};

/* What the client processes of a fleet do. */
struct harness_fleet_opts {
	const char *socket;                /* NULL: kiln_open(NULL), the environment decides */
	const struct kiln_request *reqs;   /* child i sends reqs[i % nreqs] with kiln_get */
	size_t nreqs;
	const char *lookup;                /* when set, kiln_lookup(lookup) instead of kiln_get */
	bool open_after_barrier;           /* connect after the barrier rather than before */
};

/*
 * A fleet of n client processes. Each connects (before or after the
 * barrier), waits until all are ready, then makes its one request, loads the
 * program, calls kiln_test_value() and reports into results[i] (shared
 * memory). harness_fleet_start returns once all children were released.
 */
struct harness_fleet {
	int n;
	pid_t *pids;
	struct harness_result *results;   /* shared mapping of n results */
};
struct harness_fleet *harness_fleet_start(int n, const struct harness_fleet_opts *opts);
/* Waits up to timeout_s for every child (failing the test on timeout). */
void harness_fleet_wait(struct harness_fleet *f, double timeout_s);
void harness_fleet_free(struct harness_fleet *f);

/* One client process: kiln_get(req), or kiln_lookup(lookup) when req is
 * NULL, on harness.socket; returns its result. */
struct harness_result harness_in_child(const struct kiln_request *req, const char *lookup);

/* Raw protocol I/O for malformed-input tests. */
int harness_raw_connect(const char *socket);
/* A raw connection to socket that said hello (protocol 3, no heartbeats). */
int harness_raw_hello(const char *socket);
/* Sends one frame holding text (its length as the 4-byte header). */
void harness_raw_send(int fd, const char *text);
void harness_raw_send_bytes(int fd, const void *buf, size_t len);
/* Receives one frame as JSON; NULL when the peer closed the connection.
 * Fails the test on a timeout or a payload that is not JSON. */
cJSON *harness_raw_recv(int fd);
/* The "code" of a failed reply's error object; fails the test when the reply
 * is not a failure with that shape. */
const char *harness_error_code(const cJSON *reply);

/* Pids of running processes whose executable is exe and whose command line
 * or environment mentions the test directory. Returns how many (<= max). */
int harness_find_procs(const char *exe, pid_t *pids, int max);

/* The content of a file of tests/integration/data/ (malloc'd, NUL-terminated;
 * caller frees); fails the test when it cannot be read. */
char *harness_data_file(const char *name);

/* Contains s the text needle? NULL-safe. */
bool harness_contains(const char *s, const char *needle);

#endif
