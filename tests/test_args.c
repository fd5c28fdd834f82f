/*
 * Unit tests of the allow-list of compiler arguments (proto/args.c): what
 * real builds pass (DaCe, GT4Py, nvcc, Fortran), every option family that
 * writes files or changes the output, the options that load code into the
 * toolchain, values read with their option, and the sentences.
 */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "args_table.h"
#include "unit.h"

/* Splits a space-separated command line into at most 32 arguments. */
static size_t split(const char *line, char buf[1024], const char *argv[32])
{
	size_t n = 0;
	snprintf(buf, 1024, "%s", line);
	for (char *p = strtok(buf, " "); p != NULL && n < 32; p = strtok(NULL, " "))
		argv[n++] = p;
	return n;
}

static enum args_verdict check_line(const char *line, size_t *at, char why[256])
{
	char buf[1024];
	const char *argv[32];
	size_t n = split(line, buf, argv);
	return validate_args(argv, n, at, why, 256);
}

/* Command lines that real generated-code builds use. */
START_TEST(real_command_lines_are_allowed)
{
	static const char *const ok[] = {
		/* DaCe's CPU defaults */
		"-std=c++14 -fPIC -Wall -Wextra -O3 -march=native -ffast-math -Wno-unused-parameter "
		"-Wno-unused-label -fopenmp -DDACE_BINARY_DIR=\"/x/y\" -I/opt/dace/runtime/include",
		/* DaCe's CUDA defaults */
		"-Xcompiler -march=native --use_fast_math -Xcompiler -Wno-unused-parameter -arch=sm_80",
		"-gencode arch=compute_80,code=sm_80 -lineinfo --expt-relaxed-constexpr -rdc=true",
		"-Xptxas -v,-O3 -Xptxas --warn-on-spills -maxrregcount=64 -std=c++17",
		/* GT4Py */
		"-std=c++17 -ftemplate-depth=1024 -fvisibility=hidden -isystem /opt/boost/include -O3",
		"-fno-strict-aliasing -fvisibility-inlines-hidden -DNDEBUG -DBOOST_PP_VARIADICS",
		/* linking */
		"-lm -L/usr/lib -Wl,-rpath,/x -Wl,--as-needed -Wl,-z,now -Xlinker -rpath -Xlinker /x",
		"-Wl,-soname,libx.so -Wl,--version-script=/x/v.map -Wl,-O1 -Wl,--gc-sections -ldl",
		"-fuse-ld=lld -pthread -shared -static-libgcc -rdynamic -Wl,--no-undefined",
		/* assorted */
		"-I /abs/include -D X=1 -DNAME=\"-o\" -U X -x c++ -include /abs/pre.h --std=c++20",
		"-g -g3 -gdwarf-5 -O -Os -Ofast -v -w -H -pipe --param=max-inline-insns-single=500",
		"--param max-inline-insns-single=500 -fdiagnostics-color=never -fno-exceptions",
		"-fsanitize=address,undefined -fno-sanitize=vptr -fopenmp-simd -fdump-tree-all",
		"-fopt-info-vec-missed -fstack-usage -fprofile-arcs --coverage -flto",
		"-Wa,--noexecstack -Wa,-mrelax-relocations=no -Wp,-DX=1 -Wp,-D,Y -Xpreprocessor -DZ",
		"-Xclang -fopenmp -fdebug-prefix-map=/a=/b -fprofile-use=/abs/prof.gcda",
		/* Fortran */
		"-ffree-form -ffree-line-length-none -fdefault-real-8 -fcheck=bounds -cpp",
		"-fimplicit-none -fbackslash -fintrinsic-modules-path /abs/mods",
		/* a positional input file, stdin */
		"/abs/libextra.a -",
		"-flto -static-global-template-stub=true -Xptxas --preserve-relocs --dopt=on",
	};
	char why[256];
	size_t at = 0;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		ck_assert_msg(check_line(ok[i], &at, why) == ARGS_OK, "%s\nrefused: %s", ok[i], why);
}
END_TEST

/* Every option the issue named, and others of their families: each is
 * refused, and the sentence names it. */
START_TEST(options_that_write_elsewhere_are_refused)
{
	static const char *const bad[] = {
		/* the issue's list */
		"-fdump-tree-original=/tmp/x", "-fopt-info-all=/tmp/x", "-aux-info",
		"-fdump-final-insns=/tmp/x", "-Wl,-Map=/tmp/x", "-Wl,--dependency-file=/tmp/x",
		"-Wa,-adhln=/tmp/x", "-Wa,--MD,/tmp/x", "-fprofile-note=/tmp/x",
		/* outputs, dependency files, output kinds */
		"-o", "-ofile.so", "-o/tmp/x", "--output", "--output=/tmp/x", "--out=/tmp/x",
		"-M", "-MD", "-MMD", "-MF", "-MFdeps.d", "-MT", "-MQ", "-MP", "-MJ",
		"--write-dependencies", "--dependencies", "-c", "-S", "-E", "--compile",
		"--preprocess", "--assemble", "-dc", "-ptx", "-cubin", "-dlink", "-lib",
		/* temporaries, dumps, profiles, listings, maps */
		"-save-temps", "-save-temps=obj", "--save-temps", "-dumpdir", "-dumpbase",
		"-dumpbase-ext", "-fdump-rtl-all=/tmp/x", "-fdump-ipa-all=/x",
		"-fopt-info-vec=/x", "-fprofile-generate=/x", "-fprofile-dir=/x",
		"-fprofile-instr-generate=/x", "-fcallgraph-info=/x", "-foptimization-record-file=/x",
		"-ftime-trace=/x", "-fmodule-mapper=|sh", "-fmodules-cache-path=/x",
		"-fcrash-diagnostics-dir=/x", "-fmodules", "-J/x", "-keep", "-keep-dir=/x",
		"-odir=/x", "-time=/x",
		"-Wl,-o,/tmp/x", "-Wl,-o/tmp/x", "-Wl,--output=/tmp/x", "-Wl,-rpath,/x,-o,/y",
		"-Wl,--out=/x", "-Wl,-M", "-Wl,--print-map", "-Wl,--out-implib=/x",
		"-Wl,--cref", "-Wl,-T,/x.ld", "-Wl,--trace", "-Wl,-Map,/x",
		"-Wa,-o,/tmp/x.o", "-Wa,-a=/x", "-Wa,-al", "-Wa,--MD=/x",
		"-Wp,-MD,/tmp/d", "-Wp,-o,/x", "-Wp,/tmp/out", "-Wp,-M",
		"-Xptxas -o", "-Xnvlink -o", "-Xfatbin --create=/x", "-Xcudafe /x",
		"-Xcompiler -o,/x", "-Xcompiler -Wl,-Map,/x", "--compiler-options=-save-temps",
		"-mllvm -info-output-file=/x", "-Xclang -dependency-file",
		/* response and options files, reading options the request does not show */
		"@args.txt", "@/etc/passwd", "-Wl,@/tmp/ld.args", "-optf=/x", "--options-file",
		"-Xlinker @/x", "-Xcompiler @/x",
		/* odd ways around */
		"--for-linker=-o", "--for-assembler=-a=/x", "-Xlinker -Map=/x", "-Xlinker -o",
		"-Xlinker -ofoo", "-Xassembler -a=/x", "-Xpreprocessor -MD", "-run",
		"-Xlinker -rpath,-Map=/x", "-fvisibility=/x", "-I -o", "-D", "-x",
		"-fxyz=1", "-fdiagnostics-color=never,/x",
		/* found by review: a make, a module cache, dumps and fix-its elsewhere */
		"-flto=auto", "-flto=4", "-flto=jobserver", "-gen-cdb-fragment-path /x",
		"-Xclang -fixit", "-Xclang -fixit=x", "-fdevice-time-trace /x", "-gnatO /x",
		"-module-dependency-dir /x", "-mllvm=@x", "-mllvm", "-ltoir",
	};
	char why[256];
	size_t at = 99;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		ck_assert_msg(check_line(bad[i], &at, why) == ARGS_REFUSED, "%s allowed", bad[i]);
		ck_assert_msg(strstr(why, "is not allowed") != NULL, "%s: \"%s\"", bad[i], why);
		ck_assert_int_eq(at, 0);
	}
}
END_TEST

/* Code into the toolchain: a verdict of its own (kilnd allows it only when
 * told), naming the argument. */
START_TEST(options_that_load_code_are_told_apart)
{
	static const char *const code[] = {
		"-fplugin=/tmp/evil.so", "-fplugin-arg-evil-x=1", "-fpass-plugin=/x.so",
		"-specs=/tmp/s", "--specs=/tmp/s", "-specs /tmp/s", "-wrapper gdb,--args",
		"-B/tmp/evil", "-B /tmp/evil", "--prefix=/tmp", "--sysroot=/home/me/root",
		"--sysroot /x", "-isysroot /x", "-iplugindir=/tmp", "--gcc-toolchain=/x",
		"-gcc-toolchain /x", "-resource-dir=/x", "--ld-path=/tmp/ld", "-fuse-ld=/tmp/ld",
		"-ccbin /x/gcc", "-ccbin=/x/gcc", "--compiler-bindir=/x", "-Wl,-plugin,/x.so",
		"-Wl,--plugin=/x.so", "-Wl,-plugin-opt=x", "-Xlinker -plugin -Xlinker /x.so",
		"-Xclang -load -Xclang /x.so", "-Xclang -add-plugin -Xclang x",
		"-Xcompiler -fplugin=/x.so",
	};
	char why[256];
	size_t at = 99;

	for (size_t i = 0; i < sizeof(code) / sizeof(code[0]); i++) {
		why[0] = '\0';
		ck_assert_msg(check_line(code[i], &at, why) == ARGS_CODE, "%s: %s", code[i], why);
		ck_assert_msg(strstr(why, "loads code into") != NULL &&
			      strstr(why, "--allow-toolchain-code") != NULL, "%s: \"%s\"", code[i], why);
		ck_assert_int_eq(at, 0);
	}
	/* A refused argument anywhere wins over code, and at points at it. */
	ck_assert_int_eq(check_line("-fplugin=/x.so -O2 -Wl,-Map=/x", &at, why), ARGS_REFUSED);
	ck_assert_int_eq(at, 2);
	ck_assert_ptr_nonnull(strstr(why, "-Map"));
	ck_assert_int_eq(check_line("-O2 -I /x -fplugin=/x.so", &at, why), ARGS_CODE);
	ck_assert_int_eq(at, 3);
}
END_TEST

/* Values are read with their option: the same words as values or as
 * arguments of their own. */
START_TEST(values_are_read_with_their_option)
{
	char why[256];
	size_t at;

	/* "-o" as the value of -D is a macro name, not an output. */
	ck_assert_int_eq(check_line("-D -o", &at, why), ARGS_REFUSED);
	ck_assert_ptr_nonnull(strstr(why, "may not start with '-'"));
	/* Values starting with '-' go to the program named. */
	ck_assert_int_eq(check_line("-Xlinker --as-needed -Xlinker -rpath -Xlinker /x", &at, why),
			 ARGS_OK);
	/* -I's value is consumed, so "-I -I" cannot smuggle the next one. */
	ck_assert_int_eq(check_line("-x c -I /i -o", &at, why), ARGS_REFUSED);
	ck_assert_int_eq(at, 4);
	/* A trailing option that needs a value. */
	ck_assert_int_eq(check_line("-O2 -I", &at, why), ARGS_REFUSED);
	ck_assert_ptr_nonnull(strstr(why, "needs a value"));
	/* The preprocessor takes lone words as files: a value must be joined. */
	ck_assert_int_eq(check_line("-Xpreprocessor -D -Xpreprocessor X", &at, why), ARGS_REFUSED);
	ck_assert_ptr_nonnull(strstr(why, "in the same argument"));
	/* nvcc splits -Xlinker at commas; gcc does not: both readings pass. */
	ck_assert_int_eq(check_line("-Xlinker -rpath,/x", &at, why), ARGS_REFUSED);
	ck_assert_int_eq(check_line("-Xlinker --as-needed,--gc-sections", &at, why), ARGS_REFUSED);
	ck_assert_int_eq(check_line("-Xlinker /abs/lib.so", &at, why), ARGS_OK);
	/* Empty elements. */
	ck_assert_int_eq(check_line("-Wl,", &at, why), ARGS_REFUSED);
	ck_assert_int_eq(check_line("-Wl,--as-needed,,x", &at, why), ARGS_REFUSED);
	const char *empty[] = { "" }, *null[] = { NULL };
	ck_assert_int_eq(validate_args(empty, 1, &at, why, sizeof(why)), ARGS_REFUSED);
	ck_assert_int_eq(validate_args(null, 1, &at, why, sizeof(why)), ARGS_REFUSED);
	ck_assert_int_eq(validate_args(NULL, 0, &at, why, sizeof(why)), ARGS_OK);
}
END_TEST

/* nvcc runs its steps through sh -c: no shell characters for it. */
START_TEST(shell_characters_are_refused_for_nvcc)
{
	static const char *const bad[] = {
		"-DB=$(touch${IFS}/tmp/x)", "-UU`touch${IFS}/tmp/x`", "-Xcompiler -DA=`id`",
		"-Xlinker -soname=S`id`", "-DX=\"s\"", "-DX='s'", "-DX=a;b", "-DX=a|b",
		"{-o,/tmp/x}", "-DX=a\\b", "-DX=*", "-DX=#", "-DX=a&b", "-DX=a>b",
	};
	const char *tab[] = { "-DX=a\tb" };
	char why[256], buf[1024];
	const char *argv[32];
	size_t at;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t n = split(bad[i], buf, argv);
		ck_assert_msg(validate_args_for(argv, n, ARGS_SHELL, NULL, &at, why, sizeof(why)) ==
			      ARGS_REFUSED, "%s allowed for nvcc", bad[i]);
		ck_assert_msg(strstr(why, "through a shell") != NULL, "%s: %s", bad[i], why);
	}
	ck_assert_int_eq(validate_args_for(tab, 1, ARGS_SHELL, NULL, &at, why, sizeof(why)),
			 ARGS_REFUSED);
	ck_assert_ptr_nonnull(strstr(why, "white space"));
	/* What nvcc users pass. */
	size_t n = split("-gencode arch=compute_80,code=[sm_80,compute_80] -Xcompiler -fPIC,-O3 "
			 "-DN=64 -I/opt/x -lcublas -Xlinker -rpath -Xlinker /opt/lib", buf, argv);
	ck_assert_int_eq(validate_args_for(argv, n, ARGS_SHELL, NULL, &at, why, sizeof(why)), ARGS_OK);
	/* Without the flag (gcc, no shell) quotes in a macro are fine. */
	ck_assert_int_eq(check_line("-DX=\"s\"", &at, why), ARGS_OK);
}
END_TEST

/* The daemon moves library arguments after the inputs: only real ones,
 * never a value that belongs to the option before it. */
START_TEST(only_real_libraries_are_marked)
{
	char buf[1024];
	const char *argv[32];
	bool lib[32];
	size_t n = split("-lm -O2 -l pthread -Xlinker -lfoo -Xcompiler -lbar -lineinfo -L/x", buf,
			 argv);
	ck_assert_int_eq(validate_args_for(argv, n, 0, lib, NULL, NULL, 0), ARGS_OK);
	const bool want[] = { 1, 0, 1, 1, 0, 0, 0, 0, 0, 0 };
	ck_assert_int_eq(n, sizeof(want) / sizeof(want[0]));
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(lib[i] == want[i], "%s: %d", argv[i], lib[i]);
}
END_TEST

START_TEST(sentences_name_the_argument_and_the_reason)
{
	char why[256];
	size_t at;

	ck_assert_int_eq(check_line("-o", &at, why), ARGS_REFUSED);
	ck_assert_str_eq(why, "argument \"-o\" is not allowed: the daemon chooses the output file");
	ck_assert_int_eq(check_line("-c", &at, why), ARGS_REFUSED);
	ck_assert_ptr_nonnull(strstr(why, "kind of output"));
	ck_assert_int_eq(check_line("-fdump-tree-all=/tmp/x", &at, why), ARGS_REFUSED);
	ck_assert_str_eq(why, "argument \"-fdump-tree-all=/tmp/x\" is not allowed: it writes files "
			      "where its value says, outside the build");
	ck_assert_int_eq(check_line("-Wl,-Map=/tmp/x", &at, why), ARGS_REFUSED);
	ck_assert_str_eq(why, "argument \"-Wl,-Map=/tmp/x\" is not allowed: \"-Map=/tmp/x\" is not one "
			      "of the options kiln passes to the linker (docs/protocol.md, "
			      "\"Compiler arguments\")");
	ck_assert_int_eq(check_line("--frobnicate", &at, why), ARGS_REFUSED);
	ck_assert_ptr_nonnull(strstr(why, "\"Compiler arguments\""));
	ck_assert_int_eq(check_line("-fplugin=/x.so", &at, why), ARGS_CODE);
	ck_assert_str_eq(why, "argument \"-fplugin=/x.so\" loads code into the toolchain, which kilnd "
			      "allows only when started with --allow-toolchain-code");
	/* A hostile argument cannot forge lines in the sentence. */
	ck_assert_int_eq(check_line("-Wl,-Map=\n/x", &at, why), ARGS_REFUSED);
	ck_assert_ptr_null(strchr(why, '\n'));
}
END_TEST

/* Options given apart from a value that read the same joined are marked
 * (how to join them); values of other options and refused lists are not. */
START_TEST(joinable_options)
{
	const char *a[] = { "-I", "inc", "--param", "max-inline-insns-single=10", "-Xlinker",
			    "-rpath", "-Xlinker", "/x", "-O2" };
	unsigned char j[9];
	char buf[64];
	ck_assert_int_eq(args_joinable(a, 9, ARGS_FAMILY_GCC, j), ARGS_OK);
	const unsigned char want[9] = { ARGS_JOIN_DIRECT, 0, ARGS_JOIN_EQ, 0, 0, 0, 0, 0, 0 };
	ck_assert_mem_eq(j, want, 9);
	ck_assert_int_eq(args_join_text(a[0], a[1], ARGS_JOIN_DIRECT, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "-Iinc");
	ck_assert_int_eq(args_join_text(a[2], a[3], ARGS_JOIN_EQ, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "--param=max-inline-insns-single=10");
	ck_assert_int_eq(args_join_text(a[2], a[3], ARGS_JOIN_EQ, buf, 8), -1);
	const char *bad[] = { "-I", "inc", "-fplugin-arg-x", "--nonsense" };
	ck_assert_int_eq(args_joinable(bad, 4, ARGS_FAMILY_GCC, j), ARGS_REFUSED);
	ck_assert_int_eq(j[0], ARGS_JOIN_NONE);
}
END_TEST

/* The join an option given apart with val gets from family. */
static int join_of(enum args_family family, const char *opt, const char *val)
{
	const char *a[] = { opt, val };
	unsigned char j[2];
	ck_assert_int_ne(args_joinable(a, 2, family, j), ARGS_REFUSED);
	return j[0];
}

/*
 * Each family joins an option given apart only where its own tool reads
 * the joined text the same (args_table.c's args_join_rules, tried on GCC,
 * clang and nvcc): gcc refuses "-std" "c11", clang "-znow", nvcc "-xcu";
 * nvcc reads "-x=cu", "-isystem=d", "-std=c++17". A value that begins
 * with '=' is never joined (nvcc reads "-I=inc" as "inc"), nor anything for
 * a compiler whose rules kiln does not know. Every row of the table is an
 * option the driver's table takes apart, joined as the row says.
 */
START_TEST(apart_form_joins_by_the_tool_family_s_rules)
{
	ck_assert_int_eq(join_of(ARGS_FAMILY_GCC, "-std", "c11"), ARGS_JOIN_NONE);
	ck_assert_int_eq(join_of(ARGS_FAMILY_GCC, "--std", "c11"), ARGS_JOIN_EQ);
	ck_assert_int_eq(join_of(ARGS_FAMILY_GCC, "-z", "now"), ARGS_JOIN_DIRECT);
	ck_assert_int_eq(join_of(ARGS_FAMILY_GCC, "-arch", "sm_80"), ARGS_JOIN_NONE);
	ck_assert_int_eq(join_of(ARGS_FAMILY_GCC, "-I", "=inc"), ARGS_JOIN_NONE);
	ck_assert_int_eq(join_of(ARGS_FAMILY_CLANG, "-z", "now"), ARGS_JOIN_NONE);
	ck_assert_int_eq(join_of(ARGS_FAMILY_CLANG, "-specs", "/x.specs"), ARGS_JOIN_NONE);
	ck_assert_int_eq(join_of(ARGS_FAMILY_CLANG, "-I", "inc"), ARGS_JOIN_DIRECT);
	ck_assert_int_eq(join_of(ARGS_FAMILY_NVCC, "-std", "c++17"), ARGS_JOIN_EQ);
	ck_assert_int_eq(join_of(ARGS_FAMILY_NVCC, "-x", "cu"), ARGS_JOIN_EQ);
	ck_assert_int_eq(join_of(ARGS_FAMILY_NVCC, "-isystem", "/opt/x"), ARGS_JOIN_EQ);
	ck_assert_int_eq(join_of(ARGS_FAMILY_NVCC, "-I", "inc"), ARGS_JOIN_DIRECT);
	ck_assert_int_eq(join_of(ARGS_FAMILY_NVCC, "-I", "=inc"), ARGS_JOIN_NONE);
	ck_assert_int_eq(join_of(ARGS_FAMILY_NVCC, "-Xcompiler", "-O2"), ARGS_JOIN_EQ);
	ck_assert_int_eq(join_of(ARGS_FAMILY_NVCC, "-iquote", "inc"), ARGS_JOIN_NONE);
	/* nvcc's -lineinfo and -lib are not "-l" joined with "ineinfo" or "ib". */
	ck_assert_int_eq(join_of(ARGS_FAMILY_NVCC, "-l", "ineinfo"), ARGS_JOIN_NONE);
	ck_assert_int_eq(join_of(ARGS_FAMILY_OTHER, "-I", "inc"), ARGS_JOIN_NONE);

	static const enum args_family families[] = { ARGS_FAMILY_GCC, ARGS_FAMILY_CLANG,
						     ARGS_FAMILY_NVCC };
	for (size_t i = 0; i < args_njoin_rules; i++) {
		const struct args_join_rule *r = &args_join_rules[i];
		const unsigned char how[] = { r->gcc, r->clang, r->nvcc };
		/* cudafe takes no lone words: one of its options as the value */
		const char *val = strcmp(r->name, "-Xcudafe") == 0 ? "--display_error_number" : "v1";
		for (size_t f = 0; f < 3; f++) {
			int want = how[f] == J_DIRECT ? ARGS_JOIN_DIRECT
				   : how[f] == J_EQ ? ARGS_JOIN_EQ : ARGS_JOIN_NONE;
			ck_assert_msg(join_of(families[f], r->name, val) == want,
				      "%s for family %d is not joined as the table says", r->name,
				      (int)families[f]);
		}
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("args");
	TCase *tc = tcase_create("args");

	tcase_add_test(tc, real_command_lines_are_allowed);
	tcase_add_test(tc, options_that_write_elsewhere_are_refused);
	tcase_add_test(tc, options_that_load_code_are_told_apart);
	tcase_add_test(tc, values_are_read_with_their_option);
	tcase_add_test(tc, shell_characters_are_refused_for_nvcc);
	tcase_add_test(tc, only_real_libraries_are_marked);
	tcase_add_test(tc, sentences_name_the_argument_and_the_reason);
	tcase_add_test(tc, joinable_options);
	tcase_add_test(tc, apart_form_joins_by_the_tool_family_s_rules);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
