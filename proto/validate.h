/*
 * Validation of names and arguments that come from clients. Shared by the
 * daemon (which enforces) and libkiln/CLI (which fail early with the same text).
 * Each function returns 0 when the value is allowed, or -1 and writes a
 * sentence saying why into why (whylen bytes, may be 0).
 */
#ifndef KILN_PROTO_VALIDATE_H
#define KILN_PROTO_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>

/* Source names: a file name (1..255 of [A-Za-z0-9._+-], not starting with
 * '.' or '-'), or a relative path of file and folder names
 * ("src/cpu/prog.cpp"), at most VALIDATE_SOURCE_MAX characters and
 * VALIDATE_SOURCE_DEPTH names. */
#define VALIDATE_SOURCE_MAX 255
#define VALIDATE_SOURCE_DEPTH 16
int validate_source_name(const char *name, char *why, size_t whylen);
/* The names of one request together: none twice, and none inside a name
 * that is a file ("a" and "a/b"). names[i] is at (char *)names + i * stride,
 * so that it can walk the name member of an array of structs. */
/* Whether name is a header by its extension (.h .hh .hpp .hxx .h++ .inc .inl
 * .ipp .tcc .cuh): placed beside the sources, not compiled. */
bool validate_is_header(const char *name);
/* The language of a source by its extension: 'c' (.c), 'x' (C++: .cc .cpp
 * .cxx .c++ .C .cp .CPP), 'u' (CUDA: .cu), or 0 (another). */
char validate_source_lang(const char *name);
/*
 * The toolchain a request that names none gets, by the language of its
 * first compiled source (names: n strings, stride bytes apart): "c++" for
 * .cc .cpp .cxx .c++ .C .cp, "nvcc" for .cu, else "cc". The same rule for
 * libkiln, the CLI and Python.
 */
const char *validate_default_toolchain(const char *const *names, size_t n, size_t stride);
int validate_source_set(const char *const *names, size_t n, size_t stride, char *why,
			size_t whylen);
/* Toolchain names: 1..64 of [A-Za-z0-9._+-], not starting with '-'; or a
 * compiler named by its path (validate_compiler_path). */
int validate_toolchain_name(const char *name, char *why, size_t whylen);
/* A compiler named by path (a toolchain, nvcc's host compiler): absolute,
 * at most VALIDATE_COMPILER_PATH_MAX bytes, no control characters. what
 * names it in why. */
#define VALIDATE_COMPILER_PATH_MAX 1024
int validate_compiler_path(const char *what, const char *path, char *why, size_t whylen);
/* Alias: 1..256 printable ASCII characters (0x21..0x7e). */
int validate_alias(const char *alias, char *why, size_t whylen);
/* Whether t[0..n) is padded base64 (RFC 4648, section 4): groups of four of
 * its alphabet, '=' only as the last one or two (an alias's data). */
bool validate_base64(const char *t, size_t n);
/* Label: 1..256 bytes, valid UTF-8, no control characters. */
int validate_label(const char *label, char *why, size_t whylen);
/* A key: exactly 64 lower-case hex digits. */
int validate_key(const char *key);
/* A key prefix for references: 4..64 lower-case hex digits. */
int validate_key_prefix(const char *s);
/* Longest part of a refused value that is quoted back in a message. */
#define VALIDATE_QUOTE_MAX 64
/*
 * Copies s into out for quoting in a message: control bytes and non-ASCII
 * bytes become '?' so that a hostile value cannot forge lines in a log, and
 * a long value is cut with "..." so that the sentence around it survives.
 */
const char *validate_quote(const char *s, char out[VALIDATE_QUOTE_MAX + 4]);

/* Compiler arguments: args.h. */

#endif
