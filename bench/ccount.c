/*
 * ccount: the compiler wrapper of the benchmarks. It runs the real
 * compiler, $KILN_BENCH_REAL_CXX (default /usr/bin/c++), with its own
 * arguments, waits for it, and then (when $KILN_BENCH_CC_LOG is set)
 * appends one line to that log:
 *
 *   <pid> \t <start> \t <end> \t <exit status> \t <arg1> \t <arg2> ...
 *
 * with start and end in CLOCK_MONOTONIC seconds, written with one write()
 * on an O_APPEND descriptor so that concurrent runs do not interleave.
 * bench/run copies it to <work>/bin/c++ and gives it to every mode alike
 * (kilnd's toolchain, xargs, session, flock, ccache), so compiler runs are
 * counted, and their overlap measured, the same way everywhere. Its cost,
 * one fork and exec per compiler run (about a millisecond), is paid by every
 * mode alike.
 *
 * kilnd passes no KILN_* variable to its compilers but KILN_OBSERVE_IGNORE
 * (docs/design.md, "The build environment"), the list of a wrapper's own
 * files that builds do not record. So without $KILN_BENCH_CC_LOG the log is
 * the entry of $KILN_OBSERVE_IGNORE that ends in "/cc.log", where bench/run
 * names it for kilnd (its directory writable: kilnd --allow-write).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The entry of KILN_OBSERVE_IGNORE (':'-separated) that is an absolute
 * path ending in "/cc.log", or NULL. */
static const char *log_in_ignore(void)
{
	static char path[4096];
	const char *list = getenv("KILN_OBSERVE_IGNORE");
	const char *tail = "/cc.log";
	size_t nt = strlen(tail);
	while (list != NULL && *list != '\0') {
		size_t n = strcspn(list, ":");
		if (list[0] == '/' && n > nt && n < sizeof(path) &&
		    strncmp(list + n - nt, tail, nt) == 0) {
			memcpy(path, list, n);
			path[n] = '\0';
			return path;
		}
		list += n + (list[n] == ':');
	}
	return NULL;
}

int main(int argc, char **argv)
{
	const char *real = getenv("KILN_BENCH_REAL_CXX");
	const char *log = getenv("KILN_BENCH_CC_LOG");
	if (log == NULL || log[0] == '\0')
		log = log_in_ignore();
	if (real == NULL || real[0] == '\0')
		real = "/usr/bin/c++";
	argv[0] = (char *)real;
	if (log == NULL || log[0] == '\0') {
		execv(real, argv);
		fprintf(stderr, "ccount: cannot run %s\n", real);
		return 127;
	}
	double start = now_s();
	pid_t pid = fork();
	if (pid < 0) {
		perror("ccount: fork");
		return 127;
	}
	if (pid == 0) {
		execv(real, argv);
		fprintf(stderr, "ccount: cannot run %s\n", real);
		_exit(127);
	}
	int status = 0;
	while (waitpid(pid, &status, 0) < 0)
		;
	double end = now_s();
	int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);

	char line[16384];
	size_t n = (size_t)snprintf(line, sizeof(line), "%ld\t%.6f\t%.6f\t%d", (long)getpid(),
				    start, end, code);
	for (int i = 1; i < argc && n < sizeof(line) - 2; i++) {
		int w = snprintf(line + n, sizeof(line) - n - 1, "\t%s", argv[i]);
		if (w < 0)
			break;
		n += (size_t)w;
		if (n > sizeof(line) - 2)
			n = sizeof(line) - 2;
	}
	line[n++] = '\n';
	int fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0) {
		if (write(fd, line, n) < 0)
			perror("ccount: log");
		close(fd);
	}
	return code;
}
