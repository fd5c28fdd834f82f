/*
 * The compiler arguments kiln accepts from clients: an allow-list of option
 * families (docs/protocol.md, "Compiler arguments"), shared by the daemon,
 * which enforces it, and by libkiln and the CLI, which fail early with the
 * same sentence. An option that no family lists is refused, so a compiler
 * option kiln has never heard of cannot write a file or load code.
 *
 * Pure: no I/O, no allocation, no state between calls.
 */
#ifndef KILN_PROTO_ARGS_H
#define KILN_PROTO_ARGS_H

#include <stdbool.h>
#include <stddef.h>

/* What validate_args found. */
enum args_verdict {
	ARGS_OK = 0,
	ARGS_REFUSED = -1,  /* never allowed: bad_arg */
	ARGS_CODE = 1,      /* loads code into the toolchain: only with kilnd's
			     * --allow-toolchain-code */
};

/*
 * Checks the whole argument list (options that take the next argument are
 * read with it). Returns ARGS_OK, ARGS_REFUSED (a refused argument anywhere
 * wins), or ARGS_CODE when every argument is allowed but some load code into
 * the toolchain (-fplugin=, -specs=, -B, --sysroot, -Wl,-plugin, ...). why
 * (whylen bytes, may be 0) gets a sentence naming the first offending
 * argument, and *at (may be NULL) its 0-based index.
 */
enum args_verdict validate_args(const char *const *args, size_t n, size_t *at, char *why,
				size_t whylen);

/* validate_args_for's flags: the toolchain runs its steps through a shell
 * (nvcc), so arguments may not hold characters a shell reads. */
#define ARGS_SHELL 1u

/*
 * As validate_args, with flags, and with libs (n entries, may be NULL) set
 * true for the arguments that name libraries for the linker at the top
 * level ("-lm", or "-l" and its value): those the daemon moves after the
 * inputs. An argument that only looks like one ("-lm" as the value of
 * -Xlinker) is not marked, so moving them keeps every value with its option.
 */
enum args_verdict validate_args_for(const char *const *args, size_t n, unsigned flags, bool *libs,
				    size_t *at, char *why, size_t whylen);

/* How an option given apart from its value reads the same joined. */
enum args_join {
	ARGS_JOIN_NONE = 0,
	ARGS_JOIN_DIRECT,   /* "-I" "inc" as "-Iinc" */
	ARGS_JOIN_EQ,       /* "--param" "x" as "--param=x" */
};

/* Which tool reads the arguments: each has its own rules for an option
 * given apart from its value (gcc refuses "-std" "c11", nvcc reads it as
 * "-std=c11"). */
enum args_family {
	ARGS_FAMILY_OTHER = 0,  /* rules kiln does not know: nothing is joined */
	ARGS_FAMILY_GCC,        /* GCC's drivers: gcc, g++, gfortran */
	ARGS_FAMILY_CLANG,      /* clang and the drivers built on it */
	ARGS_FAMILY_NVCC,       /* NVIDIA's nvcc */
};

/*
 * For keys: join[i] (n entries) set where args[i] is an option given apart
 * from its value, args[i + 1], that family's tool reads the same joined
 * (its option table in args_table.c says so for that option), and whose
 * joined text (args_join_text) kiln's table reads back as the same option
 * with the same value. Nothing is marked in a list validate_args refuses,
 * nor for ARGS_FAMILY_OTHER. Returns its verdict.
 */
enum args_verdict args_joinable(const char *const *args, size_t n, enum args_family family,
				unsigned char *join);
/* The joined form of opt and val into out. 0, or -1 when it does not fit. */
int args_join_text(const char *opt, const char *val, enum args_join how, char *out, size_t len);

#endif
