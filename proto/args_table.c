/*
 * The tables of the allow-list of compiler arguments (args.h, args_table.h).
 * Each program that sees a client's argument has a table of the options
 * kiln accepts for it: the compiler driver (gcc, g++, gfortran, clang, nvcc
 * and nvcc's host compiler), the linker, the assembler, the preprocessor,
 * clang's front end and nvcc's device tools. The matcher (args.c) allows an
 * argument when one entry matches it exactly (or as the entry's joined
 * form), plus the driver's open families, and checks what an option passes
 * to another program with that program's table.
 *
 * Tables are walked in order: the first entry that matches decides, so
 * longer names come before shorter ones that share their start ("-gencode"
 * before "-g").
 */
#include <stdbool.h>
#include <stddef.h>

#include "args_table.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* The driver: gcc, g++, gfortran, clang, nvcc and nvcc's host compiler. */
static const struct args_opt driver_opts[] = {
	/* Code into the toolchain (refused unless kilnd allows it). */
	{ "-fplugin-arg-", F_JOINED, V_ANY, OPT_CODE },
	{ "-fplugin", F_EQ, V_PATH, OPT_CODE },
	{ "-fpass-plugin", F_EQ, V_PATH, OPT_CODE },
	{ "-specs", F_EQ_OR_SEP, V_PATH, OPT_CODE },
	{ "--specs", F_EQ_OR_SEP, V_PATH, OPT_CODE },
	{ "-B", F_JOINED_OR_SEP, V_PATH, OPT_CODE },
	{ "--prefix", F_EQ_OR_SEP, V_PATH, OPT_CODE },
	{ "-wrapper", F_SEP, V_ANY, OPT_CODE },
	{ "--sysroot", F_EQ_OR_SEP, V_PATH, OPT_CODE },
	{ "-isysroot", F_JOINED_OR_SEP, V_PATH, OPT_CODE },
	{ "-iplugindir", F_EQ, V_PATH, OPT_CODE },
	{ "--gcc-toolchain", F_EQ_OR_SEP, V_PATH, OPT_CODE },
	{ "-gcc-toolchain", F_EQ_OR_SEP, V_PATH, OPT_CODE },
	{ "--gcc-install-dir", F_EQ, V_PATH, OPT_CODE },
	{ "--cuda-path", F_EQ, V_PATH, OPT_CODE },
	{ "-resource-dir", F_EQ_OR_SEP, V_PATH, OPT_CODE },
	{ "--ld-path", F_EQ, V_PATH, OPT_CODE },
	{ "-ccbin", F_EQ_OR_SEP, V_PATH, OPT_CODE },
	{ "--compiler-bindir", F_EQ_OR_SEP, V_PATH, OPT_CODE },
	{ "-mllvm", F_JOINED, V_ANY, OPT_DENY },     /* also clang 15's -mllvm=@file */
	{ "-module", F_JOINED, V_ANY, OPT_DENY },    /* clang: -module-dependency-dir DIR */
	{ "-gen-", F_JOINED, V_ANY, OPT_DENY },      /* clang: -gen-cdb-fragment-path DIR */
	{ "-gnat", F_JOINED, V_ANY, OPT_DENY },      /* Ada: -gnatO FILE */
	{ "-fdevice-time-trace", F_JOINED, V_ANY, OPT_DENY },  /* nvcc: a file of its own */
	{ "-fixit", F_JOINED, V_ANY, OPT_DENY },     /* clang: rewrites the sources it reads */
	{ "-ltoir", F_EXACT, V_NONE, OPT_DENY },     /* nvcc's output kinds */
	{ "--ltoir", F_EXACT, V_NONE, OPT_DENY },
	{ "-fmodules", F_EXACT, V_NONE, OPT_DENY },  /* clang: a module cache outside */
	/* nvcc's output kinds that look like -l<lib> and -f<feature>. */
	{ "-lib", F_EXACT, V_NONE, OPT_DENY },
	{ "-fatbin", F_EXACT, V_NONE, OPT_DENY },
	/* Values passed on to another program. */
	{ "-Wl,", F_LIST, V_LINKER, 0 },
	{ "-Wa,", F_LIST, V_ASM, 0 },
	{ "-Wp,", F_LIST, V_CPP, 0 },
	{ "-Xlinker", F_SEP, V_LINKER, 0 },
	{ "--linker-options", F_EQ_OR_SEP, V_LINKER, OPT_SPLIT },
	{ "-Xassembler", F_SEP, V_ASM, 0 },
	{ "-Xpreprocessor", F_SEP, V_CPP, 0 },
	{ "-Xclang", F_SEP, V_CC1, 0 },
	{ "-Xcompiler", F_EQ_OR_SEP, V_HOST, OPT_SPLIT },
	{ "--compiler-options", F_EQ_OR_SEP, V_HOST, OPT_SPLIT },
	{ "-Xptxas", F_EQ_OR_SEP, V_PTXAS, OPT_SPLIT },
	{ "--ptxas-options", F_EQ_OR_SEP, V_PTXAS, OPT_SPLIT },
	{ "-Xnvlink", F_EQ_OR_SEP, V_NVLINK, OPT_SPLIT },
	{ "--nvlink-options", F_EQ_OR_SEP, V_NVLINK, OPT_SPLIT },
	{ "-Xfatbin", F_EQ_OR_SEP, V_FATBIN, OPT_SPLIT },
	{ "--fatbin-options", F_EQ_OR_SEP, V_FATBIN, OPT_SPLIT },
	{ "-Xcudafe", F_EQ_OR_SEP, V_CUDAFE, OPT_SPLIT },
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

const struct args_opt args_f_value_opts[] = {
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
	{ "use-ld", 0, V_WORD, 0 },  /* a path instead of a name: OPT_CODE (f_value) */
};

/* GNU ld, gold, lld (after -Wl, or -Xlinker). Values come as the next
 * element, which is checked on its own (an input file or a value). */
static const struct args_opt linker_opts[] = {
	{ "-plugin", F_EQ_OR_SEP, V_PATH, OPT_CODE },
	{ "--plugin", F_EQ_OR_SEP, V_PATH, OPT_CODE },
	{ "-plugin-opt", F_EQ_OR_SEP, V_ANY, OPT_CODE },
	{ "--plugin-opt", F_EQ_OR_SEP, V_ANY, OPT_CODE },
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
static const struct args_opt asm_opts[] = {
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
static const struct args_opt cpp_opts[] = {
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
static const struct args_opt cc1_opts[] = {
	{ "-fixit", F_JOINED, V_ANY, OPT_DENY },
	{ "-load", F_SEP, V_PATH, OPT_CODE }, { "-plugin", F_SEP, V_ANY, OPT_CODE },
	{ "-add-plugin", F_SEP, V_ANY, OPT_CODE }, { "-plugin-arg-", F_JOINED, V_ANY, OPT_CODE },
};

/* nvcc's device tools. */
static const struct args_opt ptxas_opts[] = {
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

static const struct args_opt nvlink_opts[] = {
	{ "--suppress-stack-size-warning", F_EXACT, V_NONE, 0 },
	{ "-suppress-stack-size-warning", F_EXACT, V_NONE, 0 },
	{ "-v", F_EXACT, V_NONE, 0 }, { "--verbose", F_EXACT, V_NONE, 0 },
	{ "-w", F_EXACT, V_NONE, 0 }, { "--disable-warnings", F_EXACT, V_NONE, 0 },
	{ "--warning-as-error", F_EXACT, V_NONE, 0 },
};

static const struct args_opt fatbin_opts[] = {
	{ "-compress-all", F_EXACT, V_NONE, 0 }, { "--compress-all", F_EXACT, V_NONE, 0 },
	{ "-compress", F_EQ_OR_SEP, V_WORD, 0 }, { "--compress", F_EQ_OR_SEP, V_WORD, 0 },
	{ "-compress-mode", F_EQ, V_WORD, 0 }, { "--compress-mode", F_EQ, V_WORD, 0 },
};

static const struct args_opt cudafe_opts[] = {
	{ "--diag_suppress", F_EQ_OR_SEP, V_WORD, 0 }, { "--diag-suppress", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--diag_warning", F_EQ_OR_SEP, V_WORD, 0 }, { "--diag_error", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--diag_remark", F_EQ_OR_SEP, V_WORD, 0 },
	{ "--display_error_number", F_EXACT, V_NONE, 0 },
	{ "--no_display_error_number", F_EXACT, V_NONE, 0 },
};

const struct args_tool args_tools[V_NTOOLS] = {
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
const struct args_reason args_reasons[] = {
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

const size_t args_nf_value_opts = N(args_f_value_opts);
const size_t args_nreasons = N(args_reasons);

/*
 * How each tool family reads a driver option given apart from its value:
 * J_DIRECT when "-I" "inc" means "-Iinc" to it, J_EQ when "--param" "x"
 * means "--param=x", J_NO when the apart form is an error to that tool or
 * means something else (gcc refuses "-std" "c11"; clang refuses "-znow" and
 * "-specs" "f" apart; nvcc refuses "-xcu" and "-isysteminc" but reads
 * "-x=cu"), or when the tool has no such option. An option not listed is
 * never joined, and neither is a value that begins with '=' (nvcc reads
 * "-I=inc" as "-I" "inc", but "-I" "=inc" as the directory "=inc").
 *
 * Each row was tried on the tools themselves (GCC 12.2, clang 14.0.6, nvcc
 * 13.0; scripts/args-join-evidence): a family joins an option only where
 * the driver accepts both spellings and plans the same commands for them
 * (gcc -###, clang -###, nvcc --dryrun, temporary names aside). Clang's
 * "--std" "c11" reaches its front end as "-std=c11" and "--std=c11" as
 * "--std=c11", and its "--param" is unused either way with a warning that
 * quotes the spelling: not joined, as the plans differ.
 */
const struct args_join_rule args_join_rules[] = {
	/* option                      gcc       clang     nvcc */
	{ "-specs",                    J_EQ,     J_NO,     J_NO },
	{ "--specs",                   J_EQ,     J_NO,     J_NO },
	{ "-B",                        J_DIRECT, J_DIRECT, J_NO },
	{ "--prefix",                  J_EQ,     J_EQ,     J_NO },
	{ "--sysroot",                 J_EQ,     J_EQ,     J_NO },
	{ "-isysroot",                 J_DIRECT, J_DIRECT, J_NO },
	{ "-resource-dir",             J_NO,     J_EQ,     J_NO },
	{ "-ccbin",                    J_NO,     J_NO,     J_EQ },
	{ "--compiler-bindir",         J_NO,     J_NO,     J_EQ },
	{ "--linker-options",          J_NO,     J_NO,     J_EQ },
	{ "-Xcompiler",                J_NO,     J_NO,     J_EQ },
	{ "--compiler-options",        J_NO,     J_NO,     J_EQ },
	{ "-Xptxas",                   J_NO,     J_NO,     J_EQ },
	{ "--ptxas-options",           J_NO,     J_NO,     J_EQ },
	{ "-Xnvlink",                  J_NO,     J_NO,     J_EQ },
	{ "--nvlink-options",          J_NO,     J_NO,     J_EQ },
	{ "-Xfatbin",                  J_NO,     J_NO,     J_EQ },
	{ "--fatbin-options",          J_NO,     J_NO,     J_EQ },
	{ "-Xcudafe",                  J_NO,     J_NO,     J_EQ },
	{ "-D",                        J_DIRECT, J_DIRECT, J_DIRECT },
	{ "-U",                        J_DIRECT, J_DIRECT, J_DIRECT },
	{ "-I",                        J_DIRECT, J_DIRECT, J_DIRECT },
	{ "-isystem",                  J_DIRECT, J_DIRECT, J_EQ },
	{ "-iquote",                   J_DIRECT, J_DIRECT, J_NO },
	{ "-idirafter",                J_DIRECT, J_DIRECT, J_NO },
	{ "-include",                  J_DIRECT, J_DIRECT, J_EQ },
	{ "-imacros",                  J_DIRECT, J_DIRECT, J_NO },
	{ "-x",                        J_DIRECT, J_DIRECT, J_EQ },
	{ "-std",                      J_NO,     J_NO,     J_EQ },
	{ "--std",                     J_EQ,     J_NO,     J_EQ },
	{ "-gencode",                  J_NO,     J_NO,     J_EQ },
	{ "--generate-code",           J_NO,     J_NO,     J_EQ },
	{ "-arch",                     J_NO,     J_NO,     J_EQ },
	{ "--gpu-architecture",        J_NO,     J_NO,     J_EQ },
	{ "-code",                     J_NO,     J_NO,     J_EQ },
	{ "--gpu-code",                J_NO,     J_NO,     J_EQ },
	{ "-rdc",                      J_NO,     J_NO,     J_EQ },
	{ "--relocatable-device-code", J_NO,     J_NO,     J_EQ },
	{ "-ftz",                      J_NO,     J_NO,     J_EQ },
	{ "--ftz",                     J_NO,     J_NO,     J_EQ },
	{ "-prec-div",                 J_NO,     J_NO,     J_EQ },
	{ "--prec-div",                J_NO,     J_NO,     J_EQ },
	{ "-prec-sqrt",                J_NO,     J_NO,     J_EQ },
	{ "--prec-sqrt",               J_NO,     J_NO,     J_EQ },
	{ "-fmad",                     J_NO,     J_NO,     J_EQ },
	{ "--fmad",                    J_NO,     J_NO,     J_EQ },
	{ "-maxrregcount",             J_NO,     J_NO,     J_EQ },
	{ "--maxrregcount",            J_NO,     J_NO,     J_EQ },
	{ "-default-stream",           J_NO,     J_NO,     J_EQ },
	{ "--default-stream",          J_NO,     J_NO,     J_EQ },
	{ "-cudart",                   J_NO,     J_NO,     J_EQ },
	{ "--cudart",                  J_NO,     J_NO,     J_EQ },
	{ "--threads",                 J_NO,     J_NO,     J_EQ },
	{ "-split-compile",            J_NO,     J_NO,     J_EQ },
	{ "--split-compile",           J_NO,     J_NO,     J_EQ },
	{ "-diag-suppress",            J_NO,     J_NO,     J_EQ },
	{ "--diag-suppress",           J_NO,     J_NO,     J_EQ },
	{ "-diag-warn",                J_NO,     J_NO,     J_EQ },
	{ "--diag-warn",               J_NO,     J_NO,     J_EQ },
	{ "-diag-error",               J_NO,     J_NO,     J_EQ },
	{ "--diag-error",              J_NO,     J_NO,     J_EQ },
	{ "--Werror",                  J_NO,     J_NO,     J_EQ },
	{ "-static-global-template-stub",  J_NO, J_NO,     J_EQ },
	{ "--static-global-template-stub", J_NO, J_NO,     J_EQ },
	{ "-dopt",                     J_NO,     J_NO,     J_EQ },
	{ "--dopt",                    J_NO,     J_NO,     J_EQ },
	{ "--param",                   J_EQ,     J_NO,     J_NO },
	{ "-L",                        J_DIRECT, J_DIRECT, J_DIRECT },
	{ "-l",                        J_DIRECT, J_DIRECT, J_DIRECT },
	{ "-u",                        J_DIRECT, J_DIRECT, J_NO },
	{ "-z",                        J_DIRECT, J_NO,     J_NO },
};

const size_t args_njoin_rules = N(args_join_rules);
