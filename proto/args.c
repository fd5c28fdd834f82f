/*
 * The allow-list of compiler arguments (args.h). Each program that sees a
 * client's argument has a table of the options kiln accepts for it: the
 * compiler driver (gcc, g++, gfortran, clang, nvcc and nvcc's host
 * compiler), the linker, the assembler, the preprocessor, clang's front end
 * and nvcc's device tools. An argument is allowed when one table entry
 * matches it exactly (or as the entry's joined form), plus three open
 * families of the driver whose members neither write files nor load code:
 * -f<feature> without a value, -W<warning>, -m<machine>. Options whose value
 * goes to another program (-Wl,..., -Xlinker, -Xcompiler, ...) are checked by
 * that program's table. Everything else is refused, with a sentence naming
 * the argument.
 *
 * Tables are walked in order: the first entry that matches decides, so
 * longer names come before shorter ones that share their start ("-gencode"
 * before "-g").
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "validate.h"

/* How an entry's name meets its value. */
enum form {
	F_EXACT,          /* "-shared" */
	F_JOINED,         /* "-O2": the rest is the value (may be empty) */
	F_EQ,             /* "-std=c++17": name, '=', value */
	F_SEP,            /* "-Xlinker X": the next argument is the value */
	F_JOINED_OR_SEP,  /* "-Idir" or "-I dir" */
	F_EQ_OR_SEP,      /* "--opt=v" or "--opt v" */
	F_LIST,           /* "-Wl,a,b": the rest, split at commas, goes to a tool */
};

/* What the value may be, or which tool it is passed to. */
enum value {
	V_NONE,
	V_ANY,     /* any text: a macro, a symbol, a path that is only recorded */
	V_WORD,    /* a keyword or number: no '/', no control character */
	V_PATH,    /* a file or directory the tool reads (observed, keyed) */
	V_LINKER, V_ASM, V_CPP, V_CC1, V_HOST, V_PTXAS, V_NVLINK, V_FATBIN, V_CUDAFE,
};

/* Entry flags. */
#define CODE 1u   /* loads code into the toolchain */
#define SPLIT 2u  /* nvcc's: the value is a comma-separated list */
#define DENY 4u   /* listed only to refuse it before a family admits it */

struct opt {
	const char *name;
	unsigned char form, value, flags;
};

/* One program's table. */
struct tool {
	const char *what;         /* for messages: "the linker" */
	const struct opt *opts;
	size_t nopts;
	const struct opt *extra;  /* consulted first (clang's front end) */
	size_t nextra;
	bool consumes;            /* separate values are read with their option */
	bool positionals;         /* elements that are not options are inputs */
	bool families;            /* the driver's -f, -W families */
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* The driver: gcc, g++, gfortran, clang, nvcc and nvcc's host compiler. */
static const struct opt driver_opts[] = {
	/* Code into the toolchain (refused unless kilnd allows it). */
	{ "-fplugin-arg-", F_JOINED, V_ANY, CODE },
	{ "-fplugin", F_EQ, V_PATH, CODE },
	{ "-fpass-plugin", F_EQ, V_PATH, CODE },
	{ "-specs", F_EQ_OR_SEP, V_PATH, CODE },
	{ "--specs", F_EQ_OR_SEP, V_PATH, CODE },
	{ "-B", F_JOINED_OR_SEP, V_PATH, CODE },
	{ "--prefix", F_EQ_OR_SEP, V_PATH, CODE },
	{ "-wrapper", F_SEP, V_ANY, CODE },
	{ "--sysroot", F_EQ_OR_SEP, V_PATH, CODE },
	{ "-isysroot", F_JOINED_OR_SEP, V_PATH, CODE },
	{ "-iplugindir", F_EQ, V_PATH, CODE },
	{ "--gcc-toolchain", F_EQ_OR_SEP, V_PATH, CODE },
	{ "-gcc-toolchain", F_EQ_OR_SEP, V_PATH, CODE },
	{ "--gcc-install-dir", F_EQ, V_PATH, CODE },
	{ "--cuda-path", F_EQ, V_PATH, CODE },
	{ "-resource-dir", F_EQ_OR_SEP, V_PATH, CODE },
	{ "--ld-path", F_EQ, V_PATH, CODE },
	{ "-ccbin", F_EQ_OR_SEP, V_PATH, CODE },
	{ "--compiler-bindir", F_EQ_OR_SEP, V_PATH, CODE },
	{ "-mllvm", F_JOINED, V_ANY, DENY },     /* also clang 15's -mllvm=@file */
	{ "-module", F_JOINED, V_ANY, DENY },    /* clang: -module-dependency-dir DIR */
	{ "-gen-", F_JOINED, V_ANY, DENY },      /* clang: -gen-cdb-fragment-path DIR */
	{ "-gnat", F_JOINED, V_ANY, DENY },      /* Ada: -gnatO FILE */
	{ "-fdevice-time-trace", F_JOINED, V_ANY, DENY },  /* nvcc: a file of its own */
	{ "-fixit", F_JOINED, V_ANY, DENY },     /* clang: rewrites the sources it reads */
	{ "-ltoir", F_EXACT, V_NONE, DENY },     /* nvcc's output kinds */
	{ "--ltoir", F_EXACT, V_NONE, DENY },
	{ "-fmodules", F_EXACT, V_NONE, DENY },  /* clang: a module cache outside */
	/* nvcc's output kinds that look like -l<lib> and -f<feature>. */
	{ "-lib", F_EXACT, V_NONE, DENY },
	{ "-fatbin", F_EXACT, V_NONE, DENY },
	/* Values passed on to another program. */
	{ "-Wl,", F_LIST, V_LINKER, 0 },
	{ "-Wa,", F_LIST, V_ASM, 0 },
	{ "-Wp,", F_LIST, V_CPP, 0 },
	{ "-Xlinker", F_SEP, V_LINKER, 0 },
	{ "--linker-options", F_EQ_OR_SEP, V_LINKER, SPLIT },
	{ "-Xassembler", F_SEP, V_ASM, 0 },
	{ "-Xpreprocessor", F_SEP, V_CPP, 0 },
	{ "-Xclang", F_SEP, V_CC1, 0 },
	{ "-Xcompiler", F_EQ_OR_SEP, V_HOST, SPLIT },
	{ "--compiler-options", F_EQ_OR_SEP, V_HOST, SPLIT },
	{ "-Xptxas", F_EQ_OR_SEP, V_PTXAS, SPLIT },
	{ "--ptxas-options", F_EQ_OR_SEP, V_PTXAS, SPLIT },
	{ "-Xnvlink", F_EQ_OR_SEP, V_NVLINK, SPLIT },
	{ "--nvlink-options", F_EQ_OR_SEP, V_NVLINK, SPLIT },
	{ "-Xfatbin", F_EQ_OR_SEP, V_FATBIN, SPLIT },
	{ "--fatbin-options", F_EQ_OR_SEP, V_FATBIN, SPLIT },
	{ "-Xcudafe", F_EQ_OR_SEP, V_CUDAFE, SPLIT },
	/* Preprocessor. */
	{ "-D", F_JOINED_OR_SEP, V_ANY, 0 },
	{ "-U", F_JOINED_OR_SEP, V_ANY, 0 },
	{ "-I", F_JOINED_OR_SEP, V_PATH, 0 },
	{ "-isystem", F_JOINED_OR_SEP, V_PATH, 0 },
	{ "-iquote", F_JOINED_OR_SEP, V_PATH, 0 },
	{ "-idirafter", F_JOINED_OR_SEP, V_PATH, 0 },
	{ "-include", F_JOINED_OR_SEP, V_PATH, 0 },
	{ "-imacros", F_JOINED_OR_SEP, V_PATH, 0 },
	{ "-undef", F_EXACT, V_NONE, 0 },
	{ "-nostdinc", F_EXACT, V_NONE, 0 },
	{ "-nostdinc++", F_EXACT, V_NONE, 0 },
	{ "-H", F_EXACT, V_NONE, 0 },
	{ "-cpp", F_EXACT, V_NONE, 0 },
	{ "-nocpp", F_EXACT, V_NONE, 0 },
	/* Language and dialect. */
	{ "-x", F_JOINED_OR_SEP, V_WORD, 0 },
	{ "-std", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--std", F_EQ_OR_SEP, V_WORD, 0 },
	{ "-stdlib", F_EQ, V_WORD, 0 },
	{ "-ansi", F_EXACT, V_NONE, 0 },
	{ "-pedantic", F_EXACT, V_NONE, 0 },
	{ "-pedantic-errors", F_EXACT, V_NONE, 0 },
	{ "-w", F_EXACT, V_NONE, 0 },
	{ "-v", F_EXACT, V_NONE, 0 },
	{ "--verbose", F_EXACT, V_NONE, 0 },
	{ "-pipe", F_EXACT, V_NONE, 0 },
	/* nvcc (before the families that share their first letters). */
	{ "-gencode", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--generate-code", F_EQ_OR_SEP, V_WORD, 0 },
	{ "-arch", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--gpu-architecture", F_EQ_OR_SEP, V_WORD, 0 },
	{ "-code", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--gpu-code", F_EQ_OR_SEP, V_WORD, 0 },
	{ "-rdc", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--relocatable-device-code", F_EQ_OR_SEP, V_WORD, 0 },
	{ "-G", F_EXACT, V_NONE, 0 },
	{ "--device-debug", F_EXACT, V_NONE, 0 },
	{ "-lineinfo", F_EXACT, V_NONE, 0 },
	{ "--generate-line-info", F_EXACT, V_NONE, 0 },
	{ "-use_fast_math", F_EXACT, V_NONE, 0 },
	{ "--use_fast_math", F_EXACT, V_NONE, 0 },
	{ "-ftz", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--ftz", F_EQ_OR_SEP, V_WORD, 0 },
	{ "-prec-div", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--prec-div", F_EQ_OR_SEP, V_WORD, 0 },
	{ "-prec-sqrt", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--prec-sqrt", F_EQ_OR_SEP, V_WORD, 0 },
	{ "-fmad", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--fmad", F_EQ_OR_SEP, V_WORD, 0 },
	{ "-maxrregcount", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--maxrregcount", F_EQ_OR_SEP, V_WORD, 0 },
	{ "-expt-relaxed-constexpr", F_EXACT, V_NONE, 0 },
	{ "--expt-relaxed-constexpr", F_EXACT, V_NONE, 0 },
	{ "-expt-extended-lambda", F_EXACT, V_NONE, 0 },
	{ "--expt-extended-lambda", F_EXACT, V_NONE, 0 },
	{ "-extended-lambda", F_EXACT, V_NONE, 0 },
	{ "--extended-lambda", F_EXACT, V_NONE, 0 },
	{ "-default-stream", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--default-stream", F_EQ_OR_SEP, V_WORD, 0 },
	{ "-cudart", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--cudart", F_EQ_OR_SEP, V_WORD, 0 },
	{ "-t", F_SEP, V_WORD, 0 },
	{ "--threads", F_EQ_OR_SEP, V_WORD, 0 },
	{ "-split-compile", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--split-compile", F_EQ_OR_SEP, V_WORD, 0 },
	{ "-allow-unsupported-compiler", F_EXACT, V_NONE, 0 },
	{ "--allow-unsupported-compiler", F_EXACT, V_NONE, 0 },
	{ "-res-usage", F_EXACT, V_NONE, 0 },
	{ "--resource-usage", F_EXACT, V_NONE, 0 },
	{ "-diag-suppress", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--diag-suppress", F_EQ_OR_SEP, V_WORD, 0 },
	{ "-diag-warn", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--diag-warn", F_EQ_OR_SEP, V_WORD, 0 },
	{ "-diag-error", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--diag-error", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--Werror", F_EQ_OR_SEP, V_WORD, 0 },
	{ "-restrict", F_EXACT, V_NONE, 0 },
	{ "--restrict", F_EXACT, V_NONE, 0 },
	{ "-extra-device-vectorization", F_EXACT, V_NONE, 0 },
	{ "--extra-device-vectorization", F_EXACT, V_NONE, 0 },
	{ "-dlto", F_EXACT, V_NONE, 0 },
	{ "--dlink-time-opt", F_EXACT, V_NONE, 0 },
	{ "-src-in-ptx", F_EXACT, V_NONE, 0 },
	{ "--source-in-ptx", F_EXACT, V_NONE, 0 },
	{ "-keep-device-functions", F_EXACT, V_NONE, 0 },
	{ "--keep-device-functions", F_EXACT, V_NONE, 0 },
	{ "-forward-unknown-to-host-compiler", F_EXACT, V_NONE, 0 },
	{ "--forward-unknown-to-host-compiler", F_EXACT, V_NONE, 0 },
	{ "-m64", F_EXACT, V_NONE, 0 },
	{ "-static-global-template-stub", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--static-global-template-stub", F_EQ_OR_SEP, V_WORD, 0 },
	{ "-dopt", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--dopt", F_EQ_OR_SEP, V_WORD, 0 },
	/* clang's. */
	{ "--target", F_EQ, V_WORD, 0 },
	{ "-target", F_SEP, V_WORD, 0 },
	{ "--cuda-gpu-arch", F_EQ, V_WORD, 0 },
	{ "--offload-arch", F_EQ, V_WORD, 0 },
	{ "-rtlib", F_EQ, V_WORD, 0 },
	{ "--rtlib", F_EQ, V_WORD, 0 },
	{ "-unwindlib", F_EQ, V_WORD, 0 },
	{ "-Rpass", F_JOINED, V_WORD, 0 },
	/* Optimisation, debugging, machine. */
	{ "-O", F_JOINED, V_WORD, 0 },
	{ "-g", F_JOINED, V_WORD, 0 },
	{ "-m", F_JOINED, V_WORD, 0 },
	{ "--param", F_EQ_OR_SEP, V_ANY, 0 },
	{ "--coverage", F_EXACT, V_NONE, 0 },
	{ "-pg", F_EXACT, V_NONE, 0 },
	/* Linking. */
	{ "-L", F_JOINED_OR_SEP, V_PATH, 0 },
	{ "-l", F_JOINED_OR_SEP, V_WORD, 0 },
	{ "-u", F_JOINED_OR_SEP, V_ANY, 0 },
	{ "-z", F_JOINED_OR_SEP, V_WORD, 0 },
	{ "-shared", F_EXACT, V_NONE, 0 },
	{ "-shared-libgcc", F_EXACT, V_NONE, 0 },
	{ "-static-libgcc", F_EXACT, V_NONE, 0 },
	{ "-static-libstdc++", F_EXACT, V_NONE, 0 },
	{ "-static-libgfortran", F_EXACT, V_NONE, 0 },
	{ "-static-libquadmath", F_EXACT, V_NONE, 0 },
	{ "-static-libasan", F_EXACT, V_NONE, 0 },
	{ "-static-libubsan", F_EXACT, V_NONE, 0 },
	{ "-static-libtsan", F_EXACT, V_NONE, 0 },
	{ "-rdynamic", F_EXACT, V_NONE, 0 },
	{ "-pthread", F_EXACT, V_NONE, 0 },
	{ "-nostdlib", F_EXACT, V_NONE, 0 },
	{ "-nostdlib++", F_EXACT, V_NONE, 0 },
	{ "-nodefaultlibs", F_EXACT, V_NONE, 0 },
	{ "-nolibc", F_EXACT, V_NONE, 0 },
	{ "-nostartfiles", F_EXACT, V_NONE, 0 },
	{ "-no-pie", F_EXACT, V_NONE, 0 },
	{ "-s", F_EXACT, V_NONE, 0 },
};

/* -f<name>=<value>: the names that may take a value (without "no-"). */
static const struct opt f_value_opts[] = {
	{ "visibility", 0, V_WORD, 0 }, { "fp-contract", 0, V_WORD, 0 },
	{ "excess-precision", 0, V_WORD, 0 }, { "permitted-flt-eval-methods", 0, V_WORD, 0 },
	{ "tls-model", 0, V_WORD, 0 }, { "sanitize", 0, V_WORD, 0 },
	{ "sanitize-recover", 0, V_WORD, 0 }, { "sanitize-trap", 0, V_WORD, 0 },
	{ "sanitize-coverage", 0, V_WORD, 0 }, { "cf-protection", 0, V_WORD, 0 },
	{ "lto-partition", 0, V_WORD, 0 },
	{ "lto-compression-level", 0, V_WORD, 0 }, { "simd-cost-model", 0, V_WORD, 0 },
	{ "vect-cost-model", 0, V_WORD, 0 }, { "inline-limit", 0, V_WORD, 0 },
	{ "abi-version", 0, V_WORD, 0 }, { "align-functions", 0, V_WORD, 0 },
	{ "align-loops", 0, V_WORD, 0 }, { "align-jumps", 0, V_WORD, 0 },
	{ "align-labels", 0, V_WORD, 0 }, { "openacc-dim", 0, V_WORD, 0 },
	{ "template-depth", 0, V_WORD, 0 }, { "template-backtrace-limit", 0, V_WORD, 0 },
	{ "constexpr-depth", 0, V_WORD, 0 }, { "constexpr-loop-limit", 0, V_WORD, 0 },
	{ "constexpr-ops-limit", 0, V_WORD, 0 }, { "constexpr-steps", 0, V_WORD, 0 },
	{ "constexpr-cache-depth", 0, V_WORD, 0 }, { "max-errors", 0, V_WORD, 0 },
	{ "error-limit", 0, V_WORD, 0 }, { "message-length", 0, V_WORD, 0 },
	{ "diagnostics-color", 0, V_WORD, 0 }, { "diagnostics-format", 0, V_WORD, 0 },
	{ "diagnostics-show-location", 0, V_WORD, 0 }, { "diagnostics-urls", 0, V_WORD, 0 },
	{ "diagnostics-column-unit", 0, V_WORD, 0 }, { "diagnostics-column-origin", 0, V_WORD, 0 },
	{ "diagnostics-path-format", 0, V_WORD, 0 }, { "diagnostics-escape-format", 0, V_WORD, 0 },
	{ "diagnostics-minimum-margin-width", 0, V_WORD, 0 },
	{ "input-charset", 0, V_WORD, 0 }, { "exec-charset", 0, V_WORD, 0 },
	{ "wide-exec-charset", 0, V_WORD, 0 }, { "profile-update", 0, V_WORD, 0 },
	{ "random-seed", 0, V_WORD, 0 }, { "stack-check", 0, V_WORD, 0 },
	{ "stack-reuse", 0, V_WORD, 0 }, { "ira-algorithm", 0, V_WORD, 0 },
	{ "ira-region", 0, V_WORD, 0 }, { "zero-call-used-regs", 0, V_WORD, 0 },
	{ "trivial-auto-var-init", 0, V_WORD, 0 }, { "strong-eval-order", 0, V_WORD, 0 },
	{ "live-patching", 0, V_WORD, 0 }, { "patchable-function-entry", 0, V_WORD, 0 },
	{ "pack-struct", 0, V_WORD, 0 }, { "macro-backtrace-limit", 0, V_WORD, 0 },
	{ "tabstop", 0, V_WORD, 0 }, { "openmp", 0, V_WORD, 0 },
	{ "openmp-version", 0, V_WORD, 0 }, { "openmp-targets", 0, V_WORD, 0 },
	{ "offload", 0, V_WORD, 0 }, { "fp-model", 0, V_WORD, 0 },
	{ "denormal-fp-math", 0, V_WORD, 0 }, { "denormal-fp-math-f32", 0, V_WORD, 0 },
	{ "complex-method", 0, V_WORD, 0 }, { "tree-parallelize-loops", 0, V_WORD, 0 },
	{ "emit-struct-debug-detailed", 0, V_WORD, 0 }, { "sso-struct", 0, V_WORD, 0 },
	{ "callgraph-info", 0, V_WORD, 0 }, { "save-optimization-record", 0, V_WORD, 0 },
	{ "time-trace-granularity", 0, V_WORD, 0 }, { "embed-bitcode", 0, V_WORD, 0 },
	{ "check", 0, V_WORD, 0 }, { "convert", 0, V_WORD, 0 },
	{ "coarray", 0, V_WORD, 0 }, { "init-real", 0, V_WORD, 0 },
	{ "init-integer", 0, V_WORD, 0 }, { "init-character", 0, V_WORD, 0 },
	{ "init-logical", 0, V_WORD, 0 }, { "max-stack-var-size", 0, V_WORD, 0 },
	{ "max-array-constructor", 0, V_WORD, 0 }, { "blas-matmul-limit", 0, V_WORD, 0 },
	{ "inline-matmul-limit", 0, V_WORD, 0 }, { "max-identifier-length", 0, V_WORD, 0 },
	{ "debug-prefix-map", 0, V_ANY, 0 }, { "macro-prefix-map", 0, V_ANY, 0 },
	{ "file-prefix-map", 0, V_ANY, 0 }, { "profile-prefix-map", 0, V_ANY, 0 },
	{ "instrument-functions-exclude-file-list", 0, V_ANY, 0 },
	{ "instrument-functions-exclude-function-list", 0, V_ANY, 0 },
	{ "profile-use", 0, V_PATH, 0 }, { "auto-profile", 0, V_PATH, 0 },
	{ "profile-instr-use", 0, V_PATH, 0 }, { "profile-sample-use", 0, V_PATH, 0 },
	{ "sanitize-blacklist", 0, V_PATH, 0 }, { "sanitize-ignorelist", 0, V_PATH, 0 },
	{ "intrinsic-modules-path", 0, V_PATH, 0 },
	{ "use-ld", 0, V_WORD, 0 },  /* a path instead of a name: CODE (f_value) */
};

/* GNU ld, gold, lld (after -Wl, or -Xlinker). Values come as the next
 * element, which is checked on its own (an input file or a value). */
static const struct opt linker_opts[] = {
	{ "-plugin", F_EQ_OR_SEP, V_PATH, CODE },
	{ "--plugin", F_EQ_OR_SEP, V_PATH, CODE },
	{ "-plugin-opt", F_EQ_OR_SEP, V_ANY, CODE },
	{ "--plugin-opt", F_EQ_OR_SEP, V_ANY, CODE },
	{ "--as-needed", F_EXACT, V_NONE, 0 }, { "--no-as-needed", F_EXACT, V_NONE, 0 },
	{ "--whole-archive", F_EXACT, V_NONE, 0 }, { "--no-whole-archive", F_EXACT, V_NONE, 0 },
	{ "--start-group", F_EXACT, V_NONE, 0 }, { "--end-group", F_EXACT, V_NONE, 0 },
	{ "-(", F_EXACT, V_NONE, 0 }, { "-)", F_EXACT, V_NONE, 0 },
	{ "--push-state", F_EXACT, V_NONE, 0 }, { "--pop-state", F_EXACT, V_NONE, 0 },
	{ "--gc-sections", F_EXACT, V_NONE, 0 }, { "--no-gc-sections", F_EXACT, V_NONE, 0 },
	{ "--no-undefined", F_EXACT, V_NONE, 0 }, { "-z", F_JOINED_OR_SEP, V_WORD, 0 },
	{ "-rpath-link", F_EQ_OR_SEP, V_ANY, 0 }, { "--rpath-link", F_EQ_OR_SEP, V_ANY, 0 },
	{ "-rpath", F_EQ_OR_SEP, V_ANY, 0 }, { "--rpath", F_EQ_OR_SEP, V_ANY, 0 },
	{ "--enable-new-dtags", F_EXACT, V_NONE, 0 }, { "--disable-new-dtags", F_EXACT, V_NONE, 0 },
	{ "-soname", F_EQ_OR_SEP, V_ANY, 0 }, { "--soname", F_EQ_OR_SEP, V_ANY, 0 },
	{ "-h", F_JOINED_OR_SEP, V_ANY, 0 },
	{ "-Bsymbolic", F_EXACT, V_NONE, 0 }, { "-Bsymbolic-functions", F_EXACT, V_NONE, 0 },
	{ "-Bno-symbolic", F_EXACT, V_NONE, 0 }, { "-Bstatic", F_EXACT, V_NONE, 0 },
	{ "-Bdynamic", F_EXACT, V_NONE, 0 },
	{ "-E", F_EXACT, V_NONE, 0 }, { "--export-dynamic", F_EXACT, V_NONE, 0 },
	{ "-export-dynamic", F_EXACT, V_NONE, 0 }, { "--no-export-dynamic", F_EXACT, V_NONE, 0 },
	{ "--exclude-libs", F_EQ_OR_SEP, V_ANY, 0 }, { "--build-id", F_EQ_OR_SEP, V_WORD, 0 },
	{ "-s", F_EXACT, V_NONE, 0 }, { "--strip-all", F_EXACT, V_NONE, 0 },
	{ "-S", F_EXACT, V_NONE, 0 }, { "--strip-debug", F_EXACT, V_NONE, 0 },
	{ "-x", F_EXACT, V_NONE, 0 }, { "--discard-all", F_EXACT, V_NONE, 0 },
	{ "-X", F_EXACT, V_NONE, 0 }, { "--discard-locals", F_EXACT, V_NONE, 0 },
	{ "--version-script", F_EQ_OR_SEP, V_PATH, 0 },
	{ "--dynamic-list", F_EQ_OR_SEP, V_PATH, 0 },
	{ "-u", F_JOINED_OR_SEP, V_ANY, 0 }, { "--undefined", F_EQ_OR_SEP, V_ANY, 0 },
	{ "--defsym", F_EQ_OR_SEP, V_ANY, 0 }, { "--wrap", F_EQ_OR_SEP, V_ANY, 0 },
	{ "--allow-shlib-undefined", F_EXACT, V_NONE, 0 },
	{ "--no-allow-shlib-undefined", F_EXACT, V_NONE, 0 },
	{ "--eh-frame-hdr", F_EXACT, V_NONE, 0 },
	{ "--fatal-warnings", F_EXACT, V_NONE, 0 }, { "--no-fatal-warnings", F_EXACT, V_NONE, 0 },
	{ "--warn-common", F_EXACT, V_NONE, 0 }, { "--sort-common", F_EXACT, V_NONE, 0 },
	{ "--no-undefined-version", F_EXACT, V_NONE, 0 },
	{ "--copy-dt-needed-entries", F_EXACT, V_NONE, 0 },
	{ "--no-copy-dt-needed-entries", F_EXACT, V_NONE, 0 },
	{ "--relax", F_EXACT, V_NONE, 0 }, { "--no-relax", F_EXACT, V_NONE, 0 },
	{ "--warn-unresolved-symbols", F_EXACT, V_NONE, 0 },
	{ "--error-unresolved-symbols", F_EXACT, V_NONE, 0 },
	{ "--unresolved-symbols", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--demangle", F_EXACT, V_NONE, 0 }, { "--no-demangle", F_EXACT, V_NONE, 0 },
	{ "--gdb-index", F_EXACT, V_NONE, 0 }, { "--no-warn-rwx-segments", F_EXACT, V_NONE, 0 },
	{ "--no-warn-execstack", F_EXACT, V_NONE, 0 }, { "--no-warn-mismatch", F_EXACT, V_NONE, 0 },
	{ "--compress-debug-sections", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--hash-style", F_EQ_OR_SEP, V_WORD, 0 }, { "--icf", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--sort-section", F_EQ_OR_SEP, V_WORD, 0 }, { "--oformat", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--threads", F_EQ_OR_SEP, V_WORD, 0 }, { "--no-threads", F_EXACT, V_NONE, 0 },
	{ "--no-keep-memory", F_EXACT, V_NONE, 0 },
	{ "--reduce-memory-overheads", F_EXACT, V_NONE, 0 },
	{ "-O", F_JOINED, V_WORD, 0 },
	{ "-L", F_JOINED_OR_SEP, V_PATH, 0 }, { "-l", F_JOINED_OR_SEP, V_ANY, 0 },
};

/* GNU as (after -Wa, or -Xassembler). */
static const struct opt asm_opts[] = {
	{ "--noexecstack", F_EXACT, V_NONE, 0 }, { "--execstack", F_EXACT, V_NONE, 0 },
	{ "-g", F_EXACT, V_NONE, 0 }, { "--gen-debug", F_EXACT, V_NONE, 0 },
	{ "--gdwarf", F_JOINED, V_WORD, 0 }, { "--64", F_EXACT, V_NONE, 0 },
	{ "--32", F_EXACT, V_NONE, 0 }, { "-m", F_JOINED, V_WORD, 0 },
	{ "--compress-debug-sections", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--nocompress-debug-sections", F_EXACT, V_NONE, 0 },
	{ "-W", F_EXACT, V_NONE, 0 }, { "--no-warn", F_EXACT, V_NONE, 0 },
	{ "--warn", F_EXACT, V_NONE, 0 }, { "--fatal-warnings", F_EXACT, V_NONE, 0 },
	{ "-I", F_JOINED_OR_SEP, V_PATH, 0 }, { "--defsym", F_EQ_OR_SEP, V_ANY, 0 },
	{ "--generate-missing-build-notes", F_EQ, V_WORD, 0 },
	{ "--size-check", F_EQ, V_WORD, 0 },
};

/* The preprocessor (after -Wp, or -Xpreprocessor): its lone words would
 * be input or output files, so only options and their values pass. */
static const struct opt cpp_opts[] = {
	{ "-D", F_JOINED_OR_SEP, V_ANY, 0 }, { "-U", F_JOINED_OR_SEP, V_ANY, 0 },
	{ "-I", F_JOINED_OR_SEP, V_PATH, 0 }, { "-isystem", F_JOINED_OR_SEP, V_PATH, 0 },
	{ "-iquote", F_JOINED_OR_SEP, V_PATH, 0 }, { "-idirafter", F_JOINED_OR_SEP, V_PATH, 0 },
	{ "-include", F_JOINED_OR_SEP, V_PATH, 0 }, { "-imacros", F_JOINED_OR_SEP, V_PATH, 0 },
	{ "-undef", F_EXACT, V_NONE, 0 }, { "-nostdinc", F_EXACT, V_NONE, 0 },
	{ "-nostdinc++", F_EXACT, V_NONE, 0 }, { "-P", F_EXACT, V_NONE, 0 },
	{ "-C", F_EXACT, V_NONE, 0 }, { "-CC", F_EXACT, V_NONE, 0 }, { "-H", F_EXACT, V_NONE, 0 },
	{ "-std", F_EQ, V_WORD, 0 },
};

/* clang's front end (after -Xclang): its plugin options, then the driver's. */
static const struct opt cc1_opts[] = {
	{ "-fixit", F_JOINED, V_ANY, DENY },
	{ "-load", F_SEP, V_PATH, CODE }, { "-plugin", F_SEP, V_ANY, CODE },
	{ "-add-plugin", F_SEP, V_ANY, CODE }, { "-plugin-arg-", F_JOINED, V_ANY, CODE },
};

/* nvcc's device tools. */
static const struct opt ptxas_opts[] = {
	{ "-v", F_EXACT, V_NONE, 0 }, { "--verbose", F_EXACT, V_NONE, 0 },
	{ "-O", F_JOINED, V_WORD, 0 }, { "--opt-level", F_EQ_OR_SEP, V_WORD, 0 },
	{ "-maxrregcount", F_EQ_OR_SEP, V_WORD, 0 }, { "--maxrregcount", F_EQ_OR_SEP, V_WORD, 0 },
	{ "-dlcm", F_EQ, V_WORD, 0 }, { "-dscm", F_EQ, V_WORD, 0 },
	{ "--def-load-cache", F_EQ_OR_SEP, V_WORD, 0 }, { "--def-store-cache", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--warn-on-spills", F_EXACT, V_NONE, 0 }, { "-warn-spills", F_EXACT, V_NONE, 0 },
	{ "--warn-on-local-memory-usage", F_EXACT, V_NONE, 0 },
	{ "-warn-lmem-usage", F_EXACT, V_NONE, 0 },
	{ "--warn-on-double-precision-use", F_EXACT, V_NONE, 0 },
	{ "-warn-double-usage", F_EXACT, V_NONE, 0 },
	{ "--allow-expensive-optimizations", F_EQ_OR_SEP, V_WORD, 0 },
	{ "-allow-expensive-optimizations", F_EQ_OR_SEP, V_WORD, 0 },
	{ "-lineinfo", F_EXACT, V_NONE, 0 }, { "--generate-line-info", F_EXACT, V_NONE, 0 },
	{ "-g", F_EXACT, V_NONE, 0 }, { "--device-debug", F_EXACT, V_NONE, 0 },
	{ "--suppress-stack-size-warning", F_EXACT, V_NONE, 0 },
	{ "-suppress-stack-size-warning", F_EXACT, V_NONE, 0 },
	{ "--warning-as-error", F_EXACT, V_NONE, 0 }, { "-Werror", F_EXACT, V_NONE, 0 },
	{ "--disable-warnings", F_EXACT, V_NONE, 0 }, { "-w", F_EXACT, V_NONE, 0 },
	{ "-fmad", F_EQ_OR_SEP, V_WORD, 0 }, { "--fmad", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--preserve-relocs", F_EXACT, V_NONE, 0 }, { "-preserve-relocs", F_EXACT, V_NONE, 0 },
};

static const struct opt nvlink_opts[] = {
	{ "--suppress-stack-size-warning", F_EXACT, V_NONE, 0 },
	{ "-suppress-stack-size-warning", F_EXACT, V_NONE, 0 },
	{ "-v", F_EXACT, V_NONE, 0 }, { "--verbose", F_EXACT, V_NONE, 0 },
	{ "-w", F_EXACT, V_NONE, 0 }, { "--disable-warnings", F_EXACT, V_NONE, 0 },
	{ "--warning-as-error", F_EXACT, V_NONE, 0 },
};

static const struct opt fatbin_opts[] = {
	{ "-compress-all", F_EXACT, V_NONE, 0 }, { "--compress-all", F_EXACT, V_NONE, 0 },
	{ "-compress", F_EQ_OR_SEP, V_WORD, 0 }, { "--compress", F_EQ_OR_SEP, V_WORD, 0 },
	{ "-compress-mode", F_EQ, V_WORD, 0 }, { "--compress-mode", F_EQ, V_WORD, 0 },
};

static const struct opt cudafe_opts[] = {
	{ "--diag_suppress", F_EQ_OR_SEP, V_WORD, 0 }, { "--diag-suppress", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--diag_warning", F_EQ_OR_SEP, V_WORD, 0 }, { "--diag_error", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--diag_remark", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--display_error_number", F_EXACT, V_NONE, 0 },
	{ "--no_display_error_number", F_EXACT, V_NONE, 0 },
};

static const struct tool tools[] = {
	[V_NONE] = { "the compiler", driver_opts, N(driver_opts), NULL, 0, true, true, true },
	[V_HOST] = { "the host compiler", driver_opts, N(driver_opts), NULL, 0, true, true, true },
	[V_CC1] = { "clang's front end", driver_opts, N(driver_opts), cc1_opts, N(cc1_opts),
		    true, true, true },
	[V_LINKER] = { "the linker", linker_opts, N(linker_opts), NULL, 0, false, true, false },
	[V_ASM] = { "the assembler", asm_opts, N(asm_opts), NULL, 0, false, true, false },
	[V_CPP] = { "the preprocessor", cpp_opts, N(cpp_opts), NULL, 0, true, false, false },
	[V_PTXAS] = { "ptxas", ptxas_opts, N(ptxas_opts), NULL, 0, false, true, false },
	[V_NVLINK] = { "nvlink", nvlink_opts, N(nvlink_opts), NULL, 0, false, true, false },
	[V_FATBIN] = { "fatbinary", fatbin_opts, N(fatbin_opts), NULL, 0, false, true, false },
	[V_CUDAFE] = { "cudafe", cudafe_opts, N(cudafe_opts), NULL, 0, true, false, false },
};

/* Why a refused driver option is refused, where the reason is known. */
static const char why_output[] = "the daemon chooses the output file";
static const char why_deps[] = "the daemon writes and reads the dependency file itself";
static const char why_kind[] = "it changes the kind of output the daemon builds";
static const char why_writes[] = "it writes files where its value says, outside the build";
static const struct {
	const char *text;
	bool prefix;
	const char *why;
} reasons[] = {
	{ "-o", true, why_output }, { "--out", true, why_output },
	{ "-M", true, why_deps }, { "--dep", true, why_deps }, { "--write-", true, why_deps },
	{ "--user-dep", true, why_deps }, { "--print-missing", true, why_deps },
	{ "--generate-dependencies", true, why_deps },
	{ "--generate-nonsystem-dependencies", true, why_deps },
	{ "-c", false, why_kind }, { "-S", false, why_kind }, { "-E", false, why_kind },
	{ "--comp", true, why_kind }, { "--assem", true, why_kind }, { "--prep", true, why_kind },
	{ "-dc", false, why_kind }, { "-dlink", false, why_kind }, { "-ptx", false, why_kind },
	{ "-cubin", false, why_kind }, { "-fatbin", false, why_kind }, { "-lib", false, why_kind },
	{ "--device-c", false, why_kind }, { "--device-link", false, why_kind },
	{ "-save-temps", true, why_writes }, { "--save-temps", true, why_writes },
	{ "-dump", true, why_writes }, { "--dump", true, why_writes },
	{ "-aux-info", true, why_writes }, { "-fdump-", true, why_writes },
	{ "-fopt-info", true, why_writes }, { "-fprofile-", true, why_writes },
	{ "-fcallgraph-info", true, why_writes }, { "-J", true, why_writes },
	{ "-keep", true, why_writes }, { "--keep", true, why_writes }, { "-odir", true, why_writes },
	{ "-fmodule-", true, why_writes }, { "-fcrash", true, why_writes },
	{ "-foptimization-record", true, why_writes }, { "-ftime-trace=", true, why_writes },
	{ "-flto=", true, "with a value, gcc's lto-wrapper runs make and a shell over the "
			  "options' text; use -flto" },
	{ "-optf", true, "options files would read options the request does not show" },
	{ "--options-file", true, "options files would read options the request does not show" },
	{ "-run", false, "it runs the program it builds" }, { "--run", true, "it runs the program it builds" },
	{ "-fmodules", false, "clang then keeps a module cache outside the build" },
};

#define QUOTE_MAX VALIDATE_QUOTE_MAX
/* Most elements in one comma-separated list. */
#define LIST_MAX 256
/* Longest list (the protocol's longest argument). */
#define LIST_LEN 4096

/* The walk over one request's arguments. */
struct walk {
	const char *arg;   /* the client's argument being checked */
	size_t at;         /* its index */
	bool refused;
	char *why;
	size_t whylen;
	bool *libs;        /* when not NULL: marks the top level's libraries */
	unsigned char *join; /* when not NULL: marks the top level's options
	                      * given apart from their value that read the same
	                      * joined (enum args_join) */
	bool code;         /* an argument loads code into the toolchain */
	size_t code_at;
	char code_why[256];
};

/* Refuses the current argument: "argument "<arg>" is not allowed: <why>". */
__attribute__((format(printf, 2, 3)))
static int args_refuse(struct walk *w, const char *fmt, ...)
{
	char q[QUOTE_MAX + 4], reason[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	if (!w->refused && w->why != NULL && w->whylen > 0)
		snprintf(w->why, w->whylen, "argument \"%s\" is not allowed: %s",
			 validate_quote(w->arg, q), reason);
	w->refused = true;
	return -1;
}

/* Notes that the current argument loads code into the toolchain. */
static void note_code(struct walk *w, const char *tool)
{
	char q[QUOTE_MAX + 4];
	if (w->code)
		return;
	w->code = true;
	w->code_at = w->at;
	snprintf(w->code_why, sizeof(w->code_why),
		 "argument \"%s\" loads code into %s, which kilnd allows only when started "
		 "with --allow-toolchain-code", validate_quote(w->arg, q), tool);
}

static bool starts_with(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

static bool is_word(const char *v)
{
	if (*v == '\0')
		return false;
	for (; *v; v++)
		if (*v == '/' || (unsigned char)*v < 0x20 || *v == 0x7f)
			return false;
	return true;
}

/* The reason a driver option is refused, or NULL when none is known. */
static const char *known_reason(const char *a)
{
	for (size_t i = 0; i < N(reasons); i++)
		if (reasons[i].prefix ? starts_with(a, reasons[i].text) : !strcmp(a, reasons[i].text))
			return reasons[i].why;
	return NULL;
}

static int refuse_unknown(struct walk *w, const struct tool *t, const char *el)
{
	char q[QUOTE_MAX + 4];
	const char *r = t == &tools[V_NONE] || t == &tools[V_HOST] ? known_reason(el) : NULL;
	if (r != NULL)
		return el == w->arg ? args_refuse(w, "%s", r) : args_refuse(w, "\"%s\": %s", validate_quote(el, q), r);
	if (el == w->arg)
		return args_refuse(w, "it is not one of the options kiln accepts "
			      "(docs/protocol.md, \"Compiler arguments\")");
	return args_refuse(w, "\"%s\" is not one of the options kiln passes to %s "
		      "(docs/protocol.md, \"Compiler arguments\")", validate_quote(el, q), t->what);
}

/*
 * Matches el against one entry: true with *val at its joined value (NULL
 * when the value is the next element, *sep set).
 */
static bool match(const struct opt *o, const char *el, const char **val, bool *sep)
{
	*val = NULL;
	*sep = false;
	/* Every form needs el to begin with the name: its first two characters
	 * reject nearly every entry of a table without a strlen or strncmp (the
	 * walk runs for every argument of every request). */
	if (o->name[0] != '\0' &&
	    (o->name[0] != el[0] || (o->name[1] != '\0' && o->name[1] != el[1])))
		return false;
	size_t n = strlen(o->name);
	switch (o->form) {
	case F_EXACT:
		return strcmp(el, o->name) == 0;
	case F_JOINED:
	case F_LIST:
		if (!starts_with(el, o->name))
			return false;
		*val = el + n;
		return true;
	case F_EQ:
		if (!starts_with(el, o->name) || el[n] != '=')
			return false;
		*val = el + n + 1;
		return true;
	case F_SEP:
		return (*sep = strcmp(el, o->name) == 0);
	case F_JOINED_OR_SEP:
		if (!starts_with(el, o->name))
			return false;
		*sep = el[n] == '\0';
		*val = *sep ? NULL : el + n;
		return true;
	default: /* F_EQ_OR_SEP */
		if (!starts_with(el, o->name) || (el[n] != '\0' && el[n] != '='))
			return false;
		*sep = el[n] == '\0';
		*val = *sep ? NULL : el + n + 1;
		return true;
	}
}

static const struct opt *lookup(const struct opt *opts, size_t n, const char *el,
				const char **val, bool *sep)
{
	for (size_t i = 0; i < n; i++)
		if (match(&opts[i], el, val, sep))
			return &opts[i];
	return NULL;
}

static int check_list(struct walk *w, const struct tool *t, const char *list);
static int check_elems(struct walk *w, const struct tool *t, const char *const *el, size_t n);

/* Checks a value that goes to another program (kind is its tool). */
static int check_passed(struct walk *w, const struct opt *o, const char *val)
{
	const struct tool *t = &tools[o->value];
	if (o->form == F_LIST || (o->flags & SPLIT))
		return check_list(w, t, val);
	/* One element, given as it is; nvcc would split it at commas, so
	 * its parts must pass too. */
	if (check_elems(w, t, &val, 1) < 0)
		return -1;
	return strchr(val, ',') != NULL ? check_list(w, t, val) : 0;
}

/* Checks the value of a matched entry. */
static int check_value(struct walk *w, const struct tool *t, const struct opt *o, const char *val)
{
	char q[QUOTE_MAX + 4];
	if (o->flags & CODE)
		note_code(w, t == &tools[V_NONE] ? "the toolchain" : t->what);
	if (val == NULL)
		return 0;
	switch (o->value) {
	case V_NONE:
	case V_ANY:
	case V_PATH:
		return 0;
	case V_WORD:
		return is_word(val) || (val[0] == '\0' && o->form == F_JOINED) ? 0 : args_refuse(w, "the value \"%s\" of %s must be a word "
						 "without '/'", validate_quote(val, q), o->name);
	default:
		return check_passed(w, o, val);
	}
}

/* The driver's open families: -f<feature>[=value], -W<warning>. */
static int check_family(struct walk *w, const struct tool *t, const char *el)
{
	char q[QUOTE_MAX + 4], name[80];
	if (el[1] == 'W' && (el[2] == '\0' || is_word(el + 2)) && strchr(el, ',') == NULL)
		return 0;
	if (el[1] != 'f' || el[2] == '\0')
		return refuse_unknown(w, t, el);
	const char *f = starts_with(el + 2, "no-") ? el + 5 : el + 2;
	const char *eq = strchr(f, '=');
	if (eq == NULL) {
		/* Features without a value write, if anything, next to the
		 * output, in the build directory. */
		for (const char *p = f; *p; p++)
			if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			      (*p >= '0' && *p <= '9') || strchr("_+-.", *p) != NULL))
				return args_refuse(w, "\"%s\" is not a compiler feature name",
					      validate_quote(el, q));
		return 0;
	}
	snprintf(name, sizeof(name), "%.*s", (int)(eq - f), f);
	for (size_t i = 0; i < N(f_value_opts); i++) {
		if (strcmp(name, f_value_opts[i].name) != 0)
			continue;
		if (!strcmp(name, "use-ld") && strchr(eq + 1, '/') != NULL) {
			note_code(w, "the toolchain");
			return 0;
		}
		return check_value(w, t, &f_value_opts[i], eq + 1);
	}
	if (known_reason(el) != NULL)
		return refuse_unknown(w, t, el);
	return args_refuse(w, "-f options with a value are allowed only from kiln's list "
		      "(docs/protocol.md, \"Compiler arguments\"), and \"-f%s=\" is not on it", name);
}

int args_join_text(const char *opt, const char *val, enum args_join how, char *out, size_t len)
{
	int n = snprintf(out, len, "%s%s%s", opt, how == ARGS_JOIN_EQ ? "=" : "", val);
	return n >= 0 && (size_t)n < len ? 0 : -1;
}

/* How option o (given apart) with val reads the same joined: o joins
 * (-Idir, --opt=v), and the joined text is read back as o with val, not as
 * another option that happens to begin the same way. */
static enum args_join joins_same(const struct tool *t, const struct opt *o, const char *val)
{
	char buf[LIST_LEN + 64];
	const char *v2;
	bool sep;
	enum args_join how = o->form == F_JOINED_OR_SEP ? ARGS_JOIN_DIRECT
			     : o->form == F_EQ_OR_SEP ? ARGS_JOIN_EQ : ARGS_JOIN_NONE;

	if (how == ARGS_JOIN_NONE || val[0] == '\0' ||
	    args_join_text(o->name, val, how, buf, sizeof(buf)) != 0)
		return ARGS_JOIN_NONE;
	const struct opt *again = lookup(t->extra, t->nextra, buf, &v2, &sep);
	if (again == NULL)
		again = lookup(t->opts, t->nopts, buf, &v2, &sep);
	return again == o && !sep && v2 != NULL && strcmp(v2, val) == 0 ? how : ARGS_JOIN_NONE;
}

/* Checks element *i of el (and the value after it, moving *i past it). */
static int check_elem(struct walk *w, const struct tool *t, const char *const *el, size_t n,
		      size_t *i)
{
	char q[QUOTE_MAX + 4];
	const char *a = el[*i], *val;
	const struct opt *o;
	bool sep;

	if (a[0] == '\0')
		return a == w->arg ? args_refuse(w, "it is empty")
				   : args_refuse(w, "it passes an empty element to %s", t->what);
	if (a[0] == '@')
		return args_refuse(w, "response files would read options the request does not show");
	if (a[0] != '-' || a[1] == '\0')
		return t->positionals ? 0 : args_refuse(w, "\"%s\" is not an option of %s; "
						      "only options and their values may be passed to it",
						      validate_quote(a, q), t->what);
	o = lookup(t->extra, t->nextra, a, &val, &sep);
	if (o == NULL)
		o = lookup(t->opts, t->nopts, a, &val, &sep);
	if (o == NULL)
		return t->families ? check_family(w, t, a) : refuse_unknown(w, t, a);
	if (o->flags & DENY)
		return refuse_unknown(w, t, a);
	bool lib = w->libs != NULL && a == w->arg && o->name[0] == '-' && o->name[1] == 'l' &&
		   o->name[2] == '\0';
	if (lib)
		w->libs[*i] = true;
	if (sep && t->consumes) {
		/* Within a passed-on element, a program that takes lone words
		 * as inputs gets the value in a later argument, checked then. */
		if (*i + 1 >= n && t->positionals && a != w->arg)
			return check_value(w, t, o, NULL);
		if (*i + 1 >= n)
			return args_refuse(w, "%s needs a value%s", o->name,
				      a == w->arg ? "" : " in the same argument");
		val = el[++*i];
		if (lib)
			w->libs[*i] = true;
		if (w->join != NULL && a == w->arg && t == &tools[V_NONE])
			w->join[*i - 1] = (unsigned char)joins_same(t, o, val);
		if (val[0] == '-' && o->value < V_LINKER)
			return args_refuse(w, "the value of %s may not start with '-'", o->name);
	}
	return check_value(w, t, o, val);
}

static int check_elems(struct walk *w, const struct tool *t, const char *const *el, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (check_elem(w, t, el, n, &i) < 0)
			return -1;
	return 0;
}

/* Splits list at commas and checks its elements with t. */
static int check_list(struct walk *w, const struct tool *t, const char *list)
{
	char buf[LIST_LEN + 1];
	const char *el[LIST_MAX];
	size_t n = 0, len = strlen(list);

	if (len > LIST_LEN)
		return args_refuse(w, "its list is longer than %d bytes", LIST_LEN);
	memcpy(buf, list, len + 1);
	for (char *p = buf;;) {
		if (n == LIST_MAX)
			return args_refuse(w, "its list has more than %d elements", LIST_MAX);
		el[n++] = p;
		p = strchr(p, ',');
		if (p == NULL)
			break;
		*p++ = '\0';
	}
	return check_elems(w, t, el, n);
}

/* Characters a shell or make would read as more than text. */
static const char shell_chars[] = " \t\n\r\v\f$`'\"\\;|&<>()*?{}#";

static void refuse_shell(struct walk *w)
{
	char c = w->arg[strcspn(w->arg, shell_chars)], what[16];
	snprintf(what, sizeof(what), c == ' ' ? "a space" : isspace((unsigned char)c)
		 ? "white space" : "'%c'", c);
	args_refuse(w, "nvcc runs its steps through a shell, which would read %s in it; kiln "
	       "refuses white space, quotes and $`\\;|&<>()*?{}# in arguments for nvcc", what);
}

enum args_verdict validate_args_for(const char *const *args, size_t n, unsigned flags, bool *libs,
				    size_t *at, char *why, size_t whylen)
{
	struct walk w = { .why = why, .whylen = whylen, .libs = libs };
	const struct tool *t = &tools[V_NONE];

	if (why != NULL && whylen > 0)
		why[0] = '\0';
	for (size_t i = 0; libs != NULL && i < n; i++)
		libs[i] = false;
	/* Every argument, also those read as values by the walk below. */
	for (size_t i = 0; (flags & ARGS_SHELL) && i < n; i++) {
		if (args[i] == NULL || args[i][strcspn(args[i], shell_chars)] == '\0')
			continue;
		w.arg = args[i];
		w.at = i;
		refuse_shell(&w);
		if (at != NULL)
			*at = i;
		return ARGS_REFUSED;
	}
	for (size_t i = 0; i < n; i++) {
		w.arg = args[i] != NULL ? args[i] : "";
		w.at = i;
		if (args[i] == NULL) {
			args_refuse(&w, "it is missing");
		} else if (check_elem(&w, t, args, n, &i) == 0) {
			continue;
		}
		if (at != NULL)
			*at = w.at;
		return ARGS_REFUSED;
	}
	if (!w.code)
		return ARGS_OK;
	if (at != NULL)
		*at = w.code_at;
	if (why != NULL && whylen > 0)
		snprintf(why, whylen, "%s", w.code_why);
	return ARGS_CODE;
}

enum args_verdict args_joinable(const char *const *args, size_t n, unsigned char *join)
{
	struct walk w = { .join = join };
	const struct tool *t = &tools[V_NONE];

	for (size_t i = 0; i < n; i++)
		join[i] = ARGS_JOIN_NONE;
	for (size_t i = 0; i < n; i++) {
		w.arg = args[i] != NULL ? args[i] : "";
		w.at = i;
		if (args[i] == NULL || check_elem(&w, t, args, n, &i) != 0) {
			for (size_t k = 0; k < n; k++)
				join[k] = ARGS_JOIN_NONE;
			return ARGS_REFUSED;
		}
	}
	return w.code ? ARGS_CODE : ARGS_OK;
}

enum args_verdict validate_args(const char *const *args, size_t n, size_t *at, char *why,
				size_t whylen)
{
	return validate_args_for(args, n, 0, NULL, at, why, whylen);
}
