/*
 * Integration tests of inputs that change while a build runs (the rest of
 * what a build observed: test_observe.c): a header replaced after the
 * compiler read it and before the publish, by a file with an old mtime or by
 * a symlink to /dev/null, or changed on every compile; the artifact built
 * from what is gone is never served for what is there.
 */
#include "harness.h"
#include "observe_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The start of the wrappers below: runs the compiler, and goes on only
 * after a run that writes an output (not a version probe). */
#define WRAPPER_RUN_CC                                              \
	"/usr/bin/cc \"$@\" || exit $?\n"                           \
	"build=0\n"                                                   \
	"for a in \"$@\"; do\n"                                       \
	"\tcase \"$a\" in -o|-o?*) build=1 ;; esac\n"                 \
	"done\n"                                                      \
	"[ $build = 1 ] || exit 0\n"

/*
 * A toolchain wrapper that runs the compiler and then, after its first run
 * that writes an output, creates compiled and waits (at most about 60 s)
 * until gate exists: the compiler has read its inputs, the build has not
 * finished. Later runs and version probes go straight through.
 */
static void write_pausing_wrapper(const char *path, const char *first, const char *compiled,
				  const char *gate)
{
	char *text = NULL;

	ck_assert(asprintf(&text,
		"#!/bin/sh\n"
		"# Written by it_observe: pauses the first build after its compiler ran.\n"
		WRAPPER_RUN_CC
		"[ -e '%s' ] && exit 0\n"
		": > '%s'\n"
		": > '%s'\n"
		"# The gate is the test's, not an input: kiln-observe.so leaves it out\n"
		"# of the record of the shell that waits for it.\n"
		"KILN_OBSERVE_IGNORE='%s' sh -c 'i=0; while [ ! -e \"$1\" ] && [ $i -lt 1200 ]; do "
		"sleep 0.05; i=$((i + 1)); done' sh '%s'\n"
		"exit 0\n",
		first, first, compiled, gate, gate) > 0);
	write_script(path, text);
	free(text);
}

/* Replaces the header at path with one for value whose mtime is an hour in
 * the past (older than the build), renamed over it. */
static void replace_with_old_mtime(const char *path, int value)
{
	char tmp[HARNESS_PATH + 8];
	char *text = header_text(value, 0);
	struct timespec ts[2];

	snprintf(tmp, sizeof(tmp), "%s.new", path);
	harness_write_file(tmp, text);
	free(text);
	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= 3600;
	ts[1] = ts[0];
	ck_assert_msg(utimensat(AT_FDCWD, tmp, ts, 0) == 0, "utimensat %s: %s", tmp,
		      strerror(errno));
	ck_assert_msg(rename(tmp, path) == 0, "rename %s: %s", tmp, strerror(errno));
}

/* inc/h.h (value 1) and the pausing wrapper, with the paths it uses: the
 * first build is held after its compile until gate exists. */
static void hold_first_build(char *inc, char *hdr, char *wrapper, char *first, char *compiled,
			     char *gate)
{
	make_dir(inc, "inc");
	write_header(harness_path(hdr, "inc/h.h"), 1);
	write_pausing_wrapper(harness_path(wrapper, "cc-wrapper"), harness_path(first, "first-run"),
			      harness_path(compiled, "compiled"), harness_path(gate, "gate"));
}

/* h.h is replaced after the compiler read it and before the build ended, by
 * a file whose mtime is older than the build: the artifact holds the old
 * value, so it must not be served for the new header. */
START_TEST(input_replaced_during_build)
{
	char inc[HARNESS_PATH], hdr[HARNESS_PATH], wrapper[HARNESS_PATH], tc[HARNESS_PATH + 8];
	char first[HARNESS_PATH], compiled[HARNESS_PATH], gate[HARNESS_PATH];
	struct harness_fleet *f;
	struct oreq r;

	hold_first_build(inc, hdr, wrapper, first, compiled, gate);
	oreq_program(&r, inc);
	start_with_wrapper(wrapper, tc, sizeof(tc));

	/* The client waits in the background while the build is held. */
	f = harness_fleet_start(1, &(struct harness_fleet_opts){
		.socket = harness.socket, .reqs = &r.req, .nreqs = 1 });
	wait_for_file(compiled, 60, "the first compile");
	replace_with_old_mtime(hdr, 2);
	harness_write_file(gate, "");
	harness_fleet_wait(f, 120);
	check_result(&f->results[0], 2, "the request whose build saw h.h replaced");
	harness_fleet_free(f);

	expect(&r, 2, 2, "a second request in a fresh connection");
	oreq_free(&r);
	harness_stop();
}
END_TEST

/*
 * A toolchain wrapper that, after each run that writes an output, replaces
 * hdr with the next value (a new file renamed over it), counting in counter,
 * until stop exists.
 */
static void write_changing_wrapper(const char *path, const char *hdr, const char *counter,
				   const char *stop)
{
	char *text = NULL;

	ck_assert(asprintf(&text,
		"#!/bin/sh\n"
		"# Written by it_observe: changes h.h after every compile.\n"
		WRAPPER_RUN_CC
		"[ -e '%s' ] && exit 0\n"
		"n=$(($(cat '%s') + 1))\n"
		"echo $n > '%s'\n"
		"printf '#define H_VALUE %%d\\n' $n > '%s.new'\n"
		"mv -f '%s.new' '%s'\n",
		stop, counter, counter, hdr, hdr, hdr) > 0);
	write_script(path, text);
	free(text);
}

/*
 * h.h, a regular file when the compiler read it, is a symlink to /dev/null
 * by the publish (the test swaps it while the wrapper holds the build): the
 * build saw an input that is gone, and must not be kept as if h.h were
 * merely there. It is built again, then with h.h as /dev/null, harmless to
 * read but not h.h's own name: what h.h names is recorded, so h.h made a
 * file again is a miss, not the /dev/null build's artifact.
 */
START_TEST(input_replaced_by_a_device_link)
{
	char inc[HARNESS_PATH], hdr[HARNESS_PATH], wrapper[HARNESS_PATH], tc[HARNESS_PATH + 8];
	char first[HARNESS_PATH], compiled[HARNESS_PATH], gate[HARNESS_PATH], tmp[HARNESS_PATH + 8];
	char *text;
	struct harness_fleet *f;
	struct oreq r;

	hold_first_build(inc, hdr, wrapper, first, compiled, gate);
	ck_assert(asprintf(&text, "#include \"h.h\"\n#ifndef H_VALUE\n#define H_VALUE 9\n#endif\n"
			   "int kiln_test_value(void)\n{\n\treturn H_VALUE;\n}\n") > 0);
	oreq_init(&r, text);
	free(text);
	oreq_arg(&r, "-I%s", inc);
	start_with_wrapper(wrapper, tc, sizeof(tc));

	f = harness_fleet_start(1, &(struct harness_fleet_opts){
		.socket = harness.socket, .reqs = &r.req, .nreqs = 1 });
	wait_for_file(compiled, 60, "the first compile");
	snprintf(tmp, sizeof(tmp), "%s.new", hdr);
	ck_assert_int_eq(symlink("/dev/null", tmp), 0);
	ck_assert_int_eq(rename(tmp, hdr), 0);
	harness_write_file(gate, "");
	harness_fleet_wait(f, 120);
	check_result(&f->results[0], 9, "the request whose build saw h.h become /dev/null");
	harness_fleet_free(f);

	expect_value(&r, 9, "again, h.h still /dev/null");
	ck_assert_int_eq(unlink(hdr), 0);
	write_header(hdr, 3);
	expect_value(&r, 3, "h.h a file again");
	oreq_free(&r);
	harness_stop();
}
END_TEST

/* Every compile changes h.h: no build ever saw one consistent input, so the
 * get fails saying so, and once the changes stop the current header counts. */
START_TEST(input_changing_on_every_build_is_an_error)
{
	char inc[HARNESS_PATH], hdr[HARNESS_PATH], wrapper[HARNESS_PATH], tc[HARNESS_PATH + 8];
	char counter[HARNESS_PATH], stop[HARNESS_PATH];
	struct harness_result res;
	struct oreq r;
	int now;

	make_dir(inc, "inc");
	write_header(harness_path(hdr, "inc/h.h"), 1);
	harness_write_file(harness_path(counter, "counter"), "1\n");
	write_changing_wrapper(harness_path(wrapper, "cc-wrapper"), hdr, counter,
			       harness_path(stop, "stop"));
	oreq_program(&r, inc);
	start_with_wrapper(wrapper, tc, sizeof(tc));

	res = harness_in_child(&r.req, NULL);
	ck_assert_msg(res.rc != KILN_OK, "the get succeeded with value %d although h.h (now %d) "
		      "changed during every build", res.value, header_value(hdr));
	ck_assert_msg(harness_contains(res.msg, "changed"),
		      "the error does not say that the inputs changed: %s", res.msg);

	/* The changes stop: whatever was built before must not be served. */
	harness_write_file(stop, "");
	now = header_value(hdr);
	expect_value(&r, now, "after the changes stopped");
	expect_value(&r, now, "again after the changes stopped");
	oreq_free(&r);
	harness_stop();
}
END_TEST


int main(void)
{
	Suite *s = suite_create("observe_during");

	harness_add(s, "replaced_during_build", input_replaced_during_build, 180);
	harness_add(s, "changing_every_build", input_changing_on_every_build_is_an_error, 120);
	harness_add(s, "replaced_by_device_link", input_replaced_by_a_device_link, 120);
	return harness_main(s);
}
