/*
 * The option tables of the compiler-argument allow-list (args.h), apart
 * from the matcher that walks them (args.c): what each program that sees
 * a client's argument accepts, why some driver options are refused, and
 * how each tool family reads a driver option given apart from its value.
 * Internal to proto/: the data, in args_table.c; no code.
 */
#ifndef KILN_PROTO_ARGS_TABLE_H
#define KILN_PROTO_ARGS_TABLE_H

#include <stdbool.h>
#include <stddef.h>

/* How an entry's name meets its value. */
enum args_form {
	F_EXACT,          /* "-shared" */
	F_JOINED,         /* "-O2": the rest is the value (may be empty) */
	F_EQ,             /* "-std=c++17": name, '=', value */
	F_SEP,            /* "-Xlinker X": the next argument is the value */
	F_JOINED_OR_SEP,  /* "-Idir" or "-I dir" */
	F_EQ_OR_SEP,      /* "--opt=v" or "--opt v" */
	F_LIST,           /* "-Wl,a,b": the rest, split at commas, goes to a tool */
};

/* What the value may be, or which tool it is passed to. */
enum args_value {
	V_NONE,
	V_ANY,     /* any text: a macro, a symbol, a path that is only recorded */
	V_WORD,    /* a keyword or number: no '/', no control character */
	V_PATH,    /* a file or directory the tool reads (observed, keyed) */
	V_LINKER, V_ASM, V_CPP, V_CC1, V_HOST, V_PTXAS, V_NVLINK, V_FATBIN, V_CUDAFE,
	V_NTOOLS,  /* entries of args_tools, indexed by the values above */
};

/* Entry flags. */
#define OPT_CODE 1u   /* loads code into the toolchain */
#define OPT_SPLIT 2u  /* nvcc's: the value is a comma-separated list */
#define OPT_DENY 4u   /* listed only to refuse it before a family admits it */

struct args_opt {
	const char *name;
	unsigned char form, value, flags;
};

/* One program's table. */
struct args_tool {
	const char *what;         /* for messages: "the linker" */
	const struct args_opt *opts;
	size_t nopts;
	const struct args_opt *extra;  /* consulted first (clang's front end) */
	size_t nextra;
	bool consumes;            /* separate values are read with their option */
	bool positionals;         /* elements that are not options are inputs */
	bool families;            /* the driver's -f, -W families */
};

/* The tables, by the value that passes an argument to their program:
 * [V_NONE] the driver, [V_HOST] nvcc's host compiler, [V_LINKER] ... */
extern const struct args_tool args_tools[V_NTOOLS];

/* -f<name>=<value>: the names that may take a value (without "no-"). */
extern const struct args_opt args_f_value_opts[];
extern const size_t args_nf_value_opts;

/* Why a refused driver option is refused, where the reason is known: text
 * is the option, or with prefix set the start of every such option. */
struct args_reason {
	const char *text;
	bool prefix;
	const char *why;
};
extern const struct args_reason args_reasons[];
extern const size_t args_nreasons;

/* How a tool family joins a driver option given apart from its value
 * (enum args_join: none, "-Iinc", "--opt=v"), where the joined text means
 * the same to it. */
#define J_NO 0
#define J_DIRECT 1
#define J_EQ 2
struct args_join_rule {
	const char *name;   /* a driver option (driver_opts) whose form takes its value apart */
	unsigned char gcc, clang, nvcc;
};
extern const struct args_join_rule args_join_rules[];
extern const size_t args_njoin_rules;

#endif
