/*
 * kiln-exec: the supervisor kilnd starts for every compiler run and load
 * check. kilnd spawns it as the leader of a new session, so the compiler and
 * everything it starts share one process group. It asks the kernel for
 * SIGTERM when kilnd dies and answers it by killing that whole group, so a
 * killed daemon leaves no compiler burning CPU or writing into the cache.
 *
 *   kiln-exec run PARENT_PID [--trace DIR] [--confine DIR] -- PROGRAM [ARG]...
 *                                                  run a compiler
 *   kiln-exec check PARENT_PID [--confine DIR] FILE  dlopen(FILE, RTLD_NOW)
 *   kiln-exec standby PARENT_PID     started ahead of need, waits on stdin
 *                                    for one of the above (exec_standby.c)
 *
 * With --confine, the compiler (or the loaded artifact's constructors) can
 * write only below DIR and to /dev/null, by Landlock (confine.c); a run that
 * cannot be confined does not run.
 *
 * With --trace, the compiler runs with kiln-observe.so (found next to
 * kiln-exec) preloaded and KILN_TRACE_DIR naming DIR, so that every process
 * of the toolchain records what it reads there (daemon/observe.c), each
 * record signed with the KILN_TRACE_TOKEN kilnd put in the environment.
 * The first record, the program about to run, is written here; when the
 * library is missing, a record says so and kilnd falls back to the
 * compiler's dependency files.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

#include "confine.h"
#include "exec_standby.h"
#include "standby_msg.h"
#include "exec_watch.h"
#include "observe_image.h"
#include "trace_rec.h"

static void kill_group(int sig)
{
	(void)sig;
	/* SIGKILL to our own group takes this process down with the rest. */
	kill(0, SIGKILL);
	_exit(137);
}

/* Dies with the parent: the kernel sends SIGTERM when kilnd exits, and the
 * parent check closes the race of kilnd dying before prctl ran. */
static int watch_parent(const char *ppid_arg)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = kill_group;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGHUP, &sa, NULL) != 0)
		return -1;
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0)
		return -1;
	pid_t want = (pid_t)strtol(ppid_arg, NULL, 10);
	if (getppid() != want)
		kill_group(SIGTERM);
	return 0;
}

/* Appends one NUL-terminated record to the trace. */
static void trace_record(int fd, const char *head, const char *path)
{
	char rec[PATH_MAX * 2 + 256];
	const char *token = getenv("KILN_TRACE_TOKEN");
	int n = snprintf(rec, sizeof(rec), "%s %s\t%s", token != NULL ? token : "", head, path);
	if (fd >= 0 && n > 0 && (size_t)n < sizeof(rec))
		(void)!write(fd, rec, (size_t)n + 1);
}

/* The program is a script: the interpreters the kernel starts for it,
 * which must answer the exec (observe.c writes the same for the
 * toolchain's own execs). prog is absolute: kilnd runs nothing else. */
static void note_interpreters(int fd, const char *prog)
{
	char cur[PATH_MAX], interp[PATH_MAX], head[256];
	struct stat st;
	snprintf(cur, sizeof(cur), "%s", prog);
	for (int depth = 0; depth < IMAGE_MAX_DEPTH; depth++) {
		if (!image_interpreter(cur, false, interp, sizeof(interp)))
			return;
		if (interp[0] != '/' || stat(interp, &st) != 0)
			return; /* relative to kilnd's build directory, or missing: the run fails */
		image_ident_head(head, sizeof(head), REC_INTERP, (long)getpid(), "", &st);
		trace_record(fd, head, interp);
		snprintf(cur, sizeof(cur), "%s", interp);
	}
}

/*
 * Prepares the child's environment for observation: LD_PRELOAD gets
 * kiln-observe.so (after what it holds), KILN_TRACE_DIR names the trace
 * directory. Writes the record of the program about to run, in a file of
 * its own. Runs in the forked child, before execv.
 */
static void trace_setup(const char *trace, const char *prog)
{
	char self[PATH_MAX], lib[PATH_MAX + 32], head[256], file[PATH_MAX + 32];
	snprintf(file, sizeof(file), "%s/exec-%d", trace, (int)getpid());
	int fd = open(file, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	struct stat st;
	self[n > 0 ? n : 0] = '\0';
	char *slash = strrchr(self, '/');
	if (slash != NULL)
		*slash = '\0';
	snprintf(lib, sizeof(lib), "%s/kiln-observe.so", self);
	if (n <= 0 || access(lib, R_OK) != 0) {
		char none[8];
		snprintf(none, sizeof(none), "%c 0", REC_INCOMPLETE);
		trace_record(fd, none, "kiln-observe.so not found next to kiln-exec");
	} else {
		const char *old = getenv("LD_PRELOAD");
		char *pre = NULL;
		/* After what is there already: a sanitizer's runtime must come first,
		 * and the interposer still precedes libc. */
		if (asprintf(&pre, "%s%s%s", old != NULL ? old : "", old != NULL ? " " : "", lib) > 0)
			setenv("LD_PRELOAD", pre, 1);
		setenv("KILN_TRACE_DIR", trace, 1);
		free(pre);
	}
	if (stat(prog, &st) == 0) {
		image_ident_head(head, sizeof(head), REC_EXEC, (long)getpid(), "", &st);
		trace_record(fd, head, prog);
		note_interpreters(fd, prog);
	}
	if (fd >= 0)
		close(fd);
}

static int confine(const char *dir);

/* The child waits for the watch to be in place before it runs anything:
 * a byte on go (EOF: kiln-exec is gone, run nothing). */
static void wait_for_go(int go)
{
	char c;
	ssize_t n;
	while ((n = read(go, &c, 1)) < 0 && errno == EINTR)
		;
	close(go);
	if (n != 1)
		_exit(127);
}

/* The file kiln-exec's own records of a traced run go to. */
static int watch_file(const char *trace, pid_t child)
{
	char file[PATH_MAX + 32];
	snprintf(file, sizeof(file), "%s/watch-%d", trace, (int)child);
	return open(file, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
}

static int exec_run(char **argv, const char *trace, const char *confine_dir)
{
	int go[2] = { -1, -1 }, status;
	/* One stream: diagnostics from stdout and stderr stay in order. */
	if (dup2(STDOUT_FILENO, STDERR_FILENO) < 0)
		return 127;
	if (trace != NULL && pipe2(go, O_CLOEXEC) != 0) {
		fprintf(stderr, "kiln-exec: pipe: %s\n", strerror(errno));
		return 127;
	}
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "kiln-exec: fork: %s\n", strerror(errno));
		return 127;
	}
	if (pid == 0) {
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		if (trace != NULL) {
			close(go[1]);
			wait_for_go(go[0]);
			trace_setup(trace, argv[0]);
		}
		if (confine(confine_dir) != 0)
			_exit(126);
		execv(argv[0], argv);
		fprintf(stderr, "kiln-exec: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	if (trace != NULL) {
		close(go[0]);
		int fd = watch_file(trace, pid);
		const char *token = getenv("KILN_TRACE_TOKEN");
		status = exec_watch_run(pid, go[1], fd, token != NULL ? token : "");
		if (fd >= 0)
			close(fd);
		if (status == -1)
			return 127;
	} else {
		while (waitpid(pid, &status, 0) < 0) {
			if (errno != EINTR)
				return 127;
		}
	}
	if (WIFSIGNALED(status)) {
		fprintf(stderr, "kiln-exec: %s was killed by signal %d (%s)\n", argv[0],
			WTERMSIG(status), strsignal(WTERMSIG(status)));
		return 128 + WTERMSIG(status);
	}
	return WEXITSTATUS(status);
}

static int exec_check(const char *file)
{
	if (dup2(STDOUT_FILENO, STDERR_FILENO) < 0)
		return 127;
	void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		printf("%s\n", e != NULL ? e : "dlopen failed");
		return 1;
	}
	return 0;
}

/* Options between the parent's pid and "--" (run) or the file (check). */
#define ALLOW_MAX 8

struct opts {
	const char *trace;    /* --trace DIR */
	const char *confine;  /* --confine DIR */
	const char *allow[ALLOW_MAX]; /* --allow DIR: writable too (with --confine) */
	size_t nallow;
	int next;             /* index of the first argument after them */
};

/* The options of this run (confine() reads the writable directories). */
static struct opts opts;

static bool exec_parse_opts(int argc, char **argv, int from, struct opts *o)
{
	memset(o, 0, sizeof(*o));
	int i = from;
	for (; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--trace") == 0 && argv[i + 1][0] == '/')
			o->trace = argv[i + 1];
		else if (strcmp(argv[i], "--confine") == 0 && argv[i + 1][0] == '/')
			o->confine = argv[i + 1];
		else if (strcmp(argv[i], "--allow") == 0 && argv[i + 1][0] == '/' && o->nallow < ALLOW_MAX)
			o->allow[o->nallow++] = argv[i + 1];
		else
			break;
	}
	o->next = i;
	return true;
}

/* Landlock: from here on, this process and its children write only in dir. */
static int confine(const char *dir)
{
	char why[512];
	if (dir == NULL || confine_writes(dir, opts.allow, opts.nallow, why, sizeof(why)) == 0)
		return 0;
	fprintf(stderr, "kiln-exec: cannot confine the compiler to %s: %s\n", dir, why);
	return -1;
}

int main(int argc, char **argv)
{
	struct opts *o = &opts;
	/* Started ahead of need: its run comes on stdin (exec_standby.c). */
	if (argc == 3 && strcmp(argv[1], "standby") == 0) {
		if (watch_parent(argv[2]) != 0)
			return 127;
		int rc = exec_standby_wait(&argc, &argv);
		if (rc > 0)
			return 0;   /* kilnd closed the socket: nothing to run */
		if (rc < 0) {
			fflush(stdout);
			signal(STANDBY_REFUSED_SIGNAL, SIG_DFL);
			raise(STANDBY_REFUSED_SIGNAL);
			return 127;
		}
	}
	if (argc >= 5 && strcmp(argv[1], "run") == 0 && exec_parse_opts(argc, argv, 3, o) &&
	    o->next + 1 < argc && strcmp(argv[o->next], "--") == 0) {
		if (watch_parent(argv[2]) != 0)
			return 127;
		return exec_run(argv + o->next + 1, o->trace, o->confine);
	}
	if (argc >= 4 && strcmp(argv[1], "check") == 0 && exec_parse_opts(argc, argv, 3, o) &&
	    o->next + 1 == argc) {
		if (watch_parent(argv[2]) != 0)
			return 127;
		/* The artifact's constructors run here: the same fence. */
		if (dup2(STDOUT_FILENO, STDERR_FILENO) < 0 || confine(o->confine) != 0)
			return 127;
		return exec_check(argv[o->next]);
	}
	fprintf(stderr,
		"usage: kiln-exec run PARENT_PID [--trace DIR] [--confine DIR [--allow DIR]...] -- PROGRAM [ARG]...\n"
		"       kiln-exec check PARENT_PID [--confine DIR [--allow DIR]...] FILE\n"
		"       kiln-exec standby PARENT_PID   (one of the above comes on stdin)\n"
		"kiln-exec is started by kilnd; it is not meant to be run by hand.\n");
	return 2;
}
