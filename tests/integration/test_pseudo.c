/*
 * Integration tests of inputs however they are spelled and wherever they
 * live: a header reached through /proc/self/root, /proc/self/cwd or
 * "/dev/..", in a tmpfs under /dev (DaCe's node cache is in /dev/shm), is
 * an input like any other (changed, it is a miss); a pseudo-file whose
 * content decides the build (a procfs or sysfs file, a FIFO) makes the
 * build served but not cached; /dev/null is no input at all.
 */
#include "observe_util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A program that includes name and returns H_VALUE. */
static void oreq_including(struct oreq *r, const char *name)
{
	char *text;

	ck_assert(asprintf(&text, "#include \"%s\"\n\nint kiln_test_value(void)\n{\n"
			   "\treturn H_VALUE;\n}\n", name) > 0);
	oreq_init(r, text);
	free(text);
}

/* #include "<prefix><h.h>": a header named by a spelling of its absolute
 * path; changed, it is a miss. */
static void spelled_header_counts(const char *prefix)
{
	char inc[HARNESS_PATH], hdr[HARNESS_PATH], name[HARNESS_PATH + 32];
	struct oreq r;

	make_dir(inc, "inc");
	write_header(harness_path(hdr, "inc/h.h"), 1);
	snprintf(name, sizeof(name), "%s%s", prefix, hdr);
	oreq_including(&r, name);
	start_and_build(&r);
	header_change_counts(&r, hdr);
}

/* #include "/proc/self/root/<h.h>": the compiler's root, named through
 * its own process. */
START_TEST(header_through_proc_self_root)
{
	spelled_header_counts("/proc/self/root");
}
END_TEST

/* -I/proc/self/root/<inc>, and the header included by its plain name. */
START_TEST(include_dir_through_proc_self_root)
{
	char inc[HARNESS_PATH], hdr[HARNESS_PATH];
	struct oreq r;

	make_dir(inc, "inc");
	write_header(harness_path(hdr, "inc/h.h"), 1);
	oreq_init(&r, program_text);
	oreq_arg(&r, "-I/proc/self/root%s", inc);
	start_and_build(&r);
	header_change_counts(&r, hdr);
}
END_TEST

/* -I/proc/self/cwd/../../..<inc>: the compiler's working directory (the
 * build directory, different for every build) and up to the root. */
START_TEST(include_dir_through_proc_self_cwd)
{
	char inc[HARNESS_PATH], hdr[HARNESS_PATH], up[3 * UP_LEVELS + 1] = "";
	struct oreq r;

	for (int i = 0; i < UP_LEVELS; i++)
		strcat(up, "../");
	make_dir(inc, "inc");
	write_header(harness_path(hdr, "inc/h.h"), 1);
	oreq_init(&r, program_text);
	oreq_arg(&r, "-I/proc/self/cwd/%s%s", up, inc + 1);
	start_and_build(&r);
	header_change_counts(&r, hdr);
}
END_TEST

/* #include "/dev/../<h.h>": out of /dev by "..". */
START_TEST(header_through_dev_dotdot)
{
	spelled_header_counts("/dev/..");
}
END_TEST

/* #include "/proc/thread-self/root/<h.h>": the same through the thread. */
START_TEST(header_through_proc_thread_self_root)
{
	spelled_header_counts("/proc/thread-self/root");
}
END_TEST

/* Each request builds (nothing is cached), serves the value, and counts
 * in status.uncacheable. */
static void served_not_cached(struct oreq *r, int value, const char *what)
{
	expect(r, value, 1, what);
	expect(r, value, 2, what);
	cJSON *st = harness_status();
	ck_assert_int_eq(harness_num(st, "uncacheable"), 2);
	ck_assert_int_eq(harness_num(st, "entries"), 0);
	cJSON_Delete(st);
}

/* "/sys/fs/cgroup/../../..<h.h>": an allowed pseudo-file's name with ".."
 * after it names an ordinary file, which is an input. */
START_TEST(header_through_sys_dotdot)
{
	spelled_header_counts("/sys/fs/cgroup/../../..");
}
END_TEST

/* "//proc/self/task/../../..<h.h>": a doubled slash in front of /proc. */
START_TEST(header_through_double_slash_proc)
{
	spelled_header_counts("//proc/self/task/../../..");
}
END_TEST

/* A child that sits in dir until killed. */
static pid_t sit_in(const char *dir)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (chdir(dir) != 0)
			_exit(1);
		alarm(120);
		pause();
		_exit(0);
	}
	return pid;
}

/* -I/proc/<another process>/cwd (without Landlock, which refuses it): that
 * process may go elsewhere, so what the link named during the build is
 * no record of it: served, not cached. */
START_TEST(another_process_cwd_is_served_not_cached)
{
	char inc[HARNESS_PATH], hdr[HARNESS_PATH];
	struct oreq r;

	make_dir(inc, "inc");
	write_header(harness_path(hdr, "inc/h.h"), 1);
	pid_t sitter = sit_in(inc);
	oreq_init(&r, program_text);
	oreq_arg(&r, "-I/proc/%d/cwd", (int)sitter);
	harness_start("--no-landlock", NULL);
	served_not_cached(&r, 1, "a header through another process's cwd");
	kill(sitter, SIGKILL);
	waitpid(sitter, NULL, 0);
	oreq_free(&r);
	harness_stop();
}
END_TEST

static char shm_dir[64];

/* /dev/shm/<the test directory's name>: known to the test and, for the
 * teardown, to the parent that made that directory. */
static void shm_name(void)
{
	const char *base = strrchr(harness.dir, '/');
	snprintf(shm_dir, sizeof(shm_dir), "/dev/shm/%s", base != NULL ? base + 1 : "kiln-it");
}

static void shm_teardown(void)
{
	char cmd[128];

	shm_name();
	if (shm_dir[0] != '\0') {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", shm_dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", shm_dir);
	}
}

/* -I/dev/shm/<dir>: a plain tmpfs under /dev, and a symlink there to it
 * flipped to another directory. */
START_TEST(header_in_a_tmpfs_under_dev)
{
	char hdr[128], other[128], link[128];
	struct oreq r;

	shm_name();
	ck_assert_msg(mkdir(shm_dir, 0700) == 0, "mkdir %s: %s", shm_dir, strerror(errno));
	snprintf(hdr, sizeof(hdr), "%s/a", shm_dir);
	ck_assert_int_eq(mkdir(hdr, 0700), 0);
	snprintf(other, sizeof(other), "%s/b", shm_dir);
	ck_assert_int_eq(mkdir(other, 0700), 0);
	snprintf(link, sizeof(link), "%s/current", shm_dir);
	ck_assert_int_eq(symlink("a", link), 0);
	snprintf(hdr, sizeof(hdr), "%s/a/h.h", shm_dir);
	write_header(hdr, 1);
	snprintf(other, sizeof(other), "%s/b/h.h", shm_dir);
	write_header(other, 5);
	oreq_program(&r, link);
	start_and_build(&r);
	write_header(hdr, 2);
	expect_twice(&r, 2, 2, "after changing h.h in /dev/shm");
	ck_assert_int_eq(unlink(link), 0);
	ck_assert_int_eq(symlink("b", link), 0);
	expect_twice(&r, 5, 3, "after flipping the symlink in /dev/shm");
	oreq_free(&r);
	harness_stop();
}
END_TEST

/* A procfs file is read by the program's build (gcc takes its size, 0,
 * and reads nothing; "Linux" is defined away for a reader that reads on):
 * it is built and served on every request, never cached. */
START_TEST(procfs_file_input_is_served_not_cached)
{
	struct oreq r;

	oreq_init(&r, "int kiln_test_value(void)\n{\n\treturn 7\n"
		      "#include \"/proc/sys/kernel/ostype\"\n;\n}\n");
	oreq_arg(&r, "-DLinux=");
	harness_start(NULL);
	served_not_cached(&r, 7, "a program that includes /proc/sys/kernel/ostype");
	char *log = harness_read_file(harness.log);
	ck_assert_msg(harness_contains(log, "served and not cached: the toolchain read "
				       "/proc/sys/kernel/ostype"), "no reason in the log");
	free(log);
	oreq_free(&r);
	harness_stop();
}
END_TEST

/*
 * A procfs mounted elsewhere than /proc: no rule of names knows its files,
 * which are regular files to stat; the filesystem's type decides, asked
 * once per device in a publish (deps.c's classify). Two of its files: the
 * first asks the type (statfs), the second takes it from what the first
 * found; each must be no input, and the build served and not cached.
 */
START_TEST(procfs_mounted_elsewhere_is_served_not_cached)
{
	char dir[HARNESS_PATH], *text, *a, *b;
	struct oreq r;

	make_dir(dir, "procfs");
	ck_assert_msg(mount("proc", dir, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0,
		      "mount a procfs at %s: %s", dir, strerror(errno));
	ck_assert(asprintf(&a, "%s/sys/kernel/ostype", dir) > 0);
	ck_assert(asprintf(&b, "%s/sys/kernel/pid_max", dir) > 0);
	/* procfs says its files are empty (size 0): the preprocessor takes
	 * them as such, and the program compiles. */
	ck_assert(asprintf(&text, "int kiln_test_value(void)\n{\n\treturn 7\n#include \"%s\"\n"
			   "#include \"%s\"\n;\n}\n", a, b) > 0);
	oreq_init(&r, text);
	harness_start(NULL);
	served_not_cached(&r, 7, "a program that includes two files of a procfs mounted elsewhere");
	char *log = harness_read_file(harness.log), want[HARNESS_PATH + 64];
	snprintf(want, sizeof(want), "served and not cached: the toolchain read %s", a);
	ck_assert_msg(harness_contains(log, want), "no reason naming %s in the log", a);
	snprintf(want, sizeof(want), "%s is no input: it is on a filesystem whose files the kernel", b);
	ck_assert_msg(harness_contains(log, want), "%s not taken for a file of the procfs", b);
	free(log);
	free(text);
	free(a);
	free(b);
	oreq_free(&r);
	harness_stop();
	ck_assert_int_eq(umount2(dir, MNT_DETACH), 0);
}
END_TEST

/* A sysfs file through an include directory. */
START_TEST(sysfs_file_through_include_dir_is_served_not_cached)
{
	struct oreq r;

	oreq_init(&r, "int kiln_test_value(void)\n{\n\treturn 3 +\n#include \"profiling\"\n;\n}\n");
	oreq_arg(&r, "-I/sys/kernel");
	harness_start(NULL);
	served_not_cached(&r, 3, "a program that includes /sys/kernel/profiling");
	oreq_free(&r);
	harness_stop();
}
END_TEST

/* A child that writes text into the FIFO at path once, when a reader
 * opens it. */
static pid_t feed_fifo(const char *path, const char *text)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		alarm(120);
		int fd = open(path, O_WRONLY);
		if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
			_exit(1);
		_exit(0);
	}
	return pid;
}

/* A header that is a FIFO: what the compiler read came from another
 * process. Served, not cached. */
START_TEST(fifo_header_is_served_not_cached)
{
	char inc[HARNESS_PATH], fifo[HARNESS_PATH];
	struct oreq r;

	make_dir(inc, "inc");
	ck_assert_int_eq(mkfifo(harness_path(fifo, "inc/h.h"), 0600), 0);
	oreq_program(&r, inc);
	harness_start(NULL);
	pid_t feeder = feed_fifo(fifo, "#define H_VALUE 4\n");
	expect(&r, 4, 1, "a header read from a FIFO");
	waitpid(feeder, NULL, 0);
	feeder = feed_fifo(fifo, "#define H_VALUE 6\n");
	expect(&r, 6, 2, "the FIFO's next text");
	waitpid(feeder, NULL, 0);
	ck_assert_int_eq(harness_status_num_at(harness.socket, "uncacheable"), 2);
	oreq_free(&r);
	harness_stop();
}
END_TEST

/* /dev/null (and the toolchain's own housekeeping under /proc and /sys)
 * decides nothing: such a program is cached like any other. */
START_TEST(dev_null_is_no_input)
{
	struct oreq r;

	oreq_init(&r, "#include \"/dev/null\"\nint kiln_test_value(void) { return 8; }\n");
	harness_start(NULL);
	expect_twice(&r, 8, 1, "a program that includes /dev/null");
	ck_assert_int_eq(harness_status_num_at(harness.socket, "uncacheable"), 0);
	oreq_free(&r);
	harness_stop();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pseudo");

	harness_add(s, "proc_self_root", header_through_proc_self_root, 90);
	harness_add(s, "proc_self_root_dir", include_dir_through_proc_self_root, 90);
	harness_add(s, "proc_self_cwd_dir", include_dir_through_proc_self_cwd, 90);
	harness_add(s, "dev_dotdot", header_through_dev_dotdot, 90);
	harness_add(s, "thread_self_root", header_through_proc_thread_self_root, 90);
	harness_add(s, "sys_dotdot", header_through_sys_dotdot, 90);
	harness_add(s, "double_slash_proc", header_through_double_slash_proc, 90);
	harness_add(s, "other_cwd", another_process_cwd_is_served_not_cached, 90);
	tcase_add_unchecked_fixture(harness_add(s, "dev_shm", header_in_a_tmpfs_under_dev, 90), NULL,
				    shm_teardown);
	harness_add(s, "procfs_input", procfs_file_input_is_served_not_cached, 90);
	harness_add(s, "sysfs_input", sysfs_file_through_include_dir_is_served_not_cached, 90);
	harness_add(s, "fifo_input", fifo_header_is_served_not_cached, 90);
	harness_add(s, "dev_null", dev_null_is_no_input, 90);
	/* Mounting takes root; without it the case is not run, and says so. */
	if (geteuid() == 0)
		harness_add(s, "procfs_elsewhere", procfs_mounted_elsewhere_is_served_not_cached, 90);
	else
		printf("pseudo: procfs_elsewhere not run: mounting a procfs needs root\n");
	return harness_main(s);
}
