/*
 * Unit tests of a build's commands (daemon/flight/step.c, step_command):
 * the steps a build runs, in order, and each one's argv, for a flight that
 * exists only on the test's stack (as recheck.c builds one), no process
 * started: one source compiled and linked in one step, several compiled
 * side by side then linked, headers placed and never compiled, the
 * libraries after the objects, the load check last, nvcc's architectures
 * and -Xcompiler, a GPU output's one step, the linker's dependency file
 * only where the linker writes one, confinement.
 */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "flight.h"
#include "flight_int.h"
#include "key.h"
#include "kilnd.h"
#include "unit.h"

static struct kilnd d;
static struct config cfg;
static struct toolchain tc;
static struct flight b;
static struct key_source src[4];
static char *args[8];

/* A flight of the toolchain path, output out, the sources named (NULL
 * ends) and the arguments (NULL ends, after the sources' NULL). */
static void flight_of(const char *path, const char *out, ...)
{
	memset(&d, 0, sizeof(d));
	memset(&cfg, 0, sizeof(cfg));
	memset(&tc, 0, sizeof(tc));
	memset(&b, 0, sizeof(b));
	cfg.exec_helper = (char *)"/usr/lib/kiln/kiln-exec";
	d.cfg = &cfg;
	tc.path = (char *)path;
	tc.name = (char *)"c++";
	b.d = &d;
	b.dir = (char *)"/cache/tmp/b-1";
	b.in.tc = &tc;
	b.in.req.output = (char *)out;
	va_list ap;
	va_start(ap, out);
	const char *s;
	while ((s = va_arg(ap, const char *)) != NULL)
		src[b.in.nsrc++].name = s;
	size_t n = 0;
	while ((s = va_arg(ap, const char *)) != NULL)
		args[n++] = (char *)s;
	va_end(ap);
	b.in.src = src;
	b.in.req.args = args;
	b.in.req.nargs = n;
}

/* The argv of step `step` as one string, words separated by spaces, the
 * pid kiln-exec is given as PID; NULL when there is no such step. *check
 * tells the load check. */
static char *command(int step, bool *check)
{
	b.step = step;
	bool oom = false;
	char **v = step_command(&b, check, &oom);
	ck_assert(!oom);
	if (v == NULL)
		return NULL;
	char pid[24], *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	for (size_t i = 0; v[i] != NULL; i++)
		fprintf(f, "%s%s", i > 0 ? " " : "", strcmp(v[i], pid) == 0 ? "PID" : v[i]);
	fclose(f);
	step_command_free(v);
	return out;
}

static void expect_step(int step, const char *want, bool want_check)
{
	bool check = !want_check;
	char *got = command(step, &check);
	ck_assert_msg(got != NULL, "step %d: none", step);
	ck_assert_msg(strcmp(got, want) == 0, "step %d:\n got %s\nwant %s", step, got, want);
	ck_assert_int_eq(check, want_check);
	free(got);
}

static void expect_no_step(int step)
{
	bool check;
	char *got = command(step, &check);
	ck_assert_msg(got == NULL, "step %d: %s", step, got);
}

#define RUN "/usr/lib/kiln/kiln-exec run PID --trace /cache/tmp/b-1/trace -- "
#define CHECK "/usr/lib/kiln/kiln-exec check PID out/artifact.so"

START_TEST(one_source_compiles_and_links_in_one_step)
{
	flight_of("/opt/gcc/bin/g++", "shared", "prog.cpp", NULL, "-O2", "-lm", NULL);
	expect_step(0, RUN "/opt/gcc/bin/g++ -O2 -fPIC -shared -MD -MF out/dep0.d -o out/artifact.so "
		    "src/prog.cpp -lm", false);
	expect_step(1, CHECK, true);
	expect_no_step(2);
}
END_TEST

START_TEST(several_sources_compile_then_link)
{
	flight_of("/usr/bin/g++", "shared", "a.cpp", "b.cpp", NULL, "-O3", "-lstdc++", NULL);
	expect_step(0, RUN "/usr/bin/g++ -O3 -fPIC -c -MD -MF out/dep0.d -o out/obj0.o src/a.cpp", false);
	expect_step(1, RUN "/usr/bin/g++ -O3 -fPIC -c -MD -MF out/dep1.d -o out/obj1.o src/b.cpp", false);
	expect_step(2, RUN "/usr/bin/g++ -O3 -fPIC -shared -o out/artifact.so out/obj0.o out/obj1.o "
		    "-lstdc++", false);
	expect_step(3, CHECK, true);
	expect_no_step(4);
}
END_TEST

/* A header is placed beside the sources, never compiled: one compiled
 * source left, one step. */
START_TEST(headers_are_not_compiled)
{
	flight_of("/usr/bin/g++", "shared", "stencil.h", "prog.cpp", "util.hpp", NULL, NULL);
	expect_step(0, RUN "/usr/bin/g++ -fPIC -shared -MD -MF out/dep0.d -o out/artifact.so "
		    "src/prog.cpp", false);
	expect_step(1, CHECK, true);
}
END_TEST

/* Only real library arguments go after the objects: a -l that is the value
 * of -Xlinker stays with its option. */
START_TEST(libraries_after_the_objects)
{
	flight_of("/usr/bin/gcc", "shared", "a.c", "b.c", NULL, "-lm", "-Xlinker", "-lfoo",
		  "-L/opt/lib", "-ldace", NULL);
	expect_step(0, RUN "/usr/bin/gcc -Xlinker -lfoo -L/opt/lib -fPIC -c -MD -MF out/dep0.d -o "
		    "out/obj0.o src/a.c", false);
	expect_step(2, RUN "/usr/bin/gcc -Xlinker -lfoo -L/opt/lib -fPIC -shared -o out/artifact.so "
		    "out/obj0.o out/obj1.o -lm -ldace", false);
}
END_TEST

/* The linker's dependency file where the toolchain's linker writes one,
 * not with a -fuse-ld that may not (gold). */
START_TEST(linker_dependency_file_only_where_written)
{
	flight_of("/usr/bin/g++", "shared", "prog.cpp", NULL, NULL);
	tc.link_depfile = true;
	expect_step(0, RUN "/usr/bin/g++ -fPIC -shared -Wl,--dependency-file=out/link.d -MD -MF "
		    "out/dep0.d -o out/artifact.so src/prog.cpp", false);
	flight_of("/usr/bin/g++", "shared", "prog.cpp", NULL, "-fuse-ld=gold", NULL);
	tc.link_depfile = true;
	expect_step(0, RUN "/usr/bin/g++ -fuse-ld=gold -fPIC -shared -MD -MF out/dep0.d -o "
		    "out/artifact.so src/prog.cpp", false);
	flight_of("/usr/bin/g++", "shared", "prog.cpp", NULL, "-fuse-ld=mold", NULL);
	tc.link_depfile = true;
	expect_step(0, RUN "/usr/bin/g++ -fuse-ld=mold -fPIC -shared -Wl,--dependency-file=out/link.d "
		    "-MD -MF out/dep0.d -o out/artifact.so src/prog.cpp", false);
}
END_TEST

/* nvcc: the configured architectures when the request names none (one
 * -gencode each and the newest's PTX), none added when it names one; the
 * host compiler; -fPIC through -Xcompiler. */
START_TEST(nvcc_architectures_and_host)
{
	flight_of("/usr/local/cuda/bin/nvcc", "shared", "k.cu", NULL, "-O3", NULL);
	tc.is_nvcc = true;
	tc.cuda_arch = (char *)"sm_80,sm_90";
	tc.host = (char *)"/opt/gcc/bin/g++";
	expect_step(0, RUN "/usr/local/cuda/bin/nvcc -ccbin /opt/gcc/bin/g++ -gencode "
		    "arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode "
		    "arch=compute_90,code=compute_90 -O3 -Xcompiler -fPIC -shared -MD -MF out/dep0.d -o "
		    "out/artifact.so src/k.cu", false);
	flight_of("/usr/local/cuda/bin/nvcc", "shared", "k.cu", NULL, "-arch=sm_70", NULL);
	tc.is_nvcc = true;
	tc.cuda_arch = (char *)"sm_80,sm_90";
	expect_step(0, RUN "/usr/local/cuda/bin/nvcc -arch=sm_70 -Xcompiler -fPIC -shared -MD -MF "
		    "out/dep0.d -o out/artifact.so src/k.cu", false);
	flight_of("/usr/local/cuda/bin/nvcc", "shared", "k.cu", NULL, NULL);
	tc.is_nvcc = true;
	tc.cuda_arch = (char *)"sm_90";
	expect_step(0, RUN "/usr/local/cuda/bin/nvcc -arch=sm_90 -Xcompiler -fPIC -shared -MD -MF "
		    "out/dep0.d -o out/artifact.so src/k.cu", false);
}
END_TEST

/* A GPU output is one nvcc run and has no load check. */
START_TEST(gpu_output_is_one_step)
{
	flight_of("/usr/local/cuda/bin/nvcc", "cubin", "k.cu", NULL, "-arch=sm_90", NULL);
	tc.is_nvcc = true;
	expect_step(0, RUN "/usr/local/cuda/bin/nvcc -arch=sm_90 -cubin -MD -MF out/dep0.d -o "
		    "out/artifact.cubin src/k.cu", false);
	expect_no_step(1);
}
END_TEST

/* With Landlock every step, the load check too, is confined to the build
 * directory and the --allow-write directories. */
START_TEST(steps_are_confined)
{
	flight_of("/usr/bin/g++", "shared", "prog.cpp", NULL, NULL);
	d.landlock_abi = 4;
	cfg.allow_write[0] = (char *)"/scratch/job";
	cfg.nallow_write = 1;
	expect_step(0, "/usr/lib/kiln/kiln-exec run PID --trace /cache/tmp/b-1/trace --confine "
		    "/cache/tmp/b-1 --allow /scratch/job -- /usr/bin/g++ -fPIC -shared -MD -MF "
		    "out/dep0.d -o out/artifact.so src/prog.cpp", false);
	expect_step(1, "/usr/lib/kiln/kiln-exec check PID --confine /cache/tmp/b-1 --allow "
		    "/scratch/job out/artifact.so", true);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("step");
	TCase *tc_ = tcase_create("step_command");
	tcase_add_test(tc_, one_source_compiles_and_links_in_one_step);
	tcase_add_test(tc_, several_sources_compile_then_link);
	tcase_add_test(tc_, headers_are_not_compiled);
	tcase_add_test(tc_, libraries_after_the_objects);
	tcase_add_test(tc_, linker_dependency_file_only_where_written);
	tcase_add_test(tc_, nvcc_architectures_and_host);
	tcase_add_test(tc_, gpu_output_is_one_step);
	tcase_add_test(tc_, steps_are_confined);
	suite_add_tcase(s, tc_);
	return unit_run(s);
}
