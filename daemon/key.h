/*
 * Content keys. The request key (rkey) digests everything a client sends and
 * everything of the node that changes the artifact; the artifact key adds
 * the content of the headers the compiler read (known only after a build).
 * Both are SHA-256 over a versioned, canonical serialization: every field is
 * a one-byte tag, a 64-bit big-endian length and the bytes, so no two
 * different inputs serialize alike.
 */
#ifndef KILN_DAEMON_KEY_H
#define KILN_DAEMON_KEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "msg.h"
#include "store.h"

/* 2: a source enters the request key by the SHA-256 of its text, so that a
 * client can name it by digest alone. */
/* 3: dependencies carry their kind (file, exists, absent, env), and the
 * toolchain's identity covers the programs its driver runs. */
/* 4: a directory the toolchain listed is a "listing" dependency (its
 * names), and inputs reached through /proc and /dev are recorded: an
 * entry of format 3 may rest on a listing recorded as "exists" or on a
 * header that was never recorded, so it is not taken (rebuilt once). */
/* 5: an option given apart from its value that the toolchain reads the
 * same joined is keyed joined ("-I" "inc" as "-Iinc": args_joinable), so
 * both spellings are one key; entries of format 4 built with such an
 * option would never be hit again, so all of format 4 are stale (kilnd
 * says so at start; kiln gc --stale, and eviction takes them first). */
/* 6: an exec must be answered by the image it runs (a static launcher
 * left what it read unrecorded), a script's `#!` interpreter is an input,
 * a path read and written stays an input, builds kiln could not observe
 * completely are no longer cached from the compiler's dependency files,
 * and only options whose apart form the tool reads the same are joined
 * ("-std" "c11" is not "-std=c11"): an entry of format 5 may rest on any
 * of these, so all of format 5 are stale and rebuilt once. */
/* 7: the C++ sources of an nvcc build are compiled by its host compiler
 * itself (hostcc.h), without nvcc's macros (__NVCC__, __CUDACC_VER_*):
 * the same request now runs other commands, so entries of format 6 are
 * stale and rebuilt once. */
#define KEY_FORMAT_VERSION 7

#define KEY_MAX_PROGRAMS 32

/* A compiler, configured or named by a request, and its identity digest. */
struct toolchain {
	char *name;          /* as configured ("c++"), or the path a request named */
	char *path;          /* as configured or named: what runs (a symlink farm
	                      * such as ccache's keys on the name, clang++ on its
	                      * "++"; a named one is safe to run so: named.c) */
	char *real_path;     /* resolved */
	char *host;          /* nvcc's host compiler (-ccbin) a request named, or NULL */
	char *host_real;     /* resolved */
	bool named;          /* named by a request (named.h) */
	bool known;          /* --version names a compiler kiln knows */
	struct stat st, host_st;  /* the driver's and host's, for key_toolchain_current */
	uint8_t id[32];      /* digest of path, size, mtime, version output, env */
	char *version;       /* first line of --version output */
	bool link_depfile;   /* its linker writes -Wl,--dependency-file */
	bool is_nvcc;        /* NVIDIA's nvcc: GPU outputs, an architecture */
	bool is_gcc;         /* a GCC driver: precompiled headers as .gch */
	bool is_clang;       /* clang or a driver built on it (its option rules) */
	bool dynamic;        /* the driver is a dynamically linked ELF program (or a
	                      * script), so kiln-observe.so can be preloaded */
	/* nvcc: its host compiler as found (the named one, NVCC_CCBIN's or gcc
	 * on PATH), whether that is a GCC driver (.gch files), and the include
	 * arguments nvcc gives it (hostcc.h); host_incs NULL when the dry run
	 * named none: then nvcc compiles every source itself. */
	char *host_cc;
	bool host_cc_gcc;
	char **host_incs;
	char *cuda_arch;     /* nvcc: the architectures for requests that name
	                      * none ("sm_80" or "sm_80,sm_90"), or NULL */
	/* The driver and the programs it runs, resolved (those its identity
	 * covers): their digests are taken ahead of the first build. */
	char *programs[KEY_MAX_PROGRAMS];
	size_t nprograms;
};

/* Whether args choose a GPU architecture themselves (-arch, -gencode, ...). */
bool key_args_name_arch(char *const *args, size_t nargs);

/* Source contents for keying; text points into the request or a read buffer.
 * A source the client named by digest has text NULL and digest set. */
struct key_source {
	const char *name;
	const char *text;
	size_t len;
	const uint8_t *digest;  /* SHA-256 of the text, or NULL: computed here */
};

/* A gate's verdict on a program the identification of a named toolchain
 * is about to run (named.c decides, by the rules of whoever named it). */
enum key_gate_verdict {
	KEY_GATE_RUN = 0,   /* it passes: it may run */
	KEY_GATE_OUTSIDE,   /* not one this client may name: under no --toolchain-dir */
	KEY_GATE_REFUSED,   /* not absolute, or someone but root or the daemon's owner
	                     * could change it (or the way to it) */
};

/* What key_toolchain_identify asks before it runs a program other than
 * the driver (which the caller checked): check(arg, path, why, cap) with
 * path absolute; any thread (the identification runs on the pool). */
struct key_gate {
	enum key_gate_verdict (*check)(void *arg, const char *path, char *why, size_t cap);
	void *arg;
};

/*
 * Resolves and identifies a toolchain: realpath, stat, `PATH --version`
 * (run with posix_spawn, no shell), the programs it runs and the
 * variables its runs get (tcenv.h). host: nvcc's host compiler (run with
 * -ccbin), or NULL for NVCC_CCBIN or gcc on PATH. Blocking (seconds at
 * most): at start-up, or on the pool. Returns 0 or a negative errno with a
 * sentence in err.
 */
int key_toolchain_init(struct toolchain *tc, const char *name, const char *path, const char *host,
		       char *err, size_t errlen);
/*
 * As key_toolchain_init for a toolchain a request named (named.c), under
 * gate: a --version that names no compiler kiln knows refuses it before
 * anything else runs; every other program the identification would run
 * (the linker the driver prints for -print-prog-name=ld, nvcc's host
 * compiler when none is named) runs only by an absolute path, after the
 * gate: KEY_GATE_REFUSED refuses the toolchain, and so does
 * KEY_GATE_OUTSIDE for nvcc's host compiler, while a linker outside is
 * not asked (its --help only tells whether it writes dependency files).
 */
int key_toolchain_identify(struct toolchain *tc, const char *name, const char *path,
			   const char *host, const struct key_gate *gate, char *err, size_t errlen);
/* Whether the driver (and host compiler) are still the files identified:
 * same resolved path, device, inode, size and times. Three stats. */
bool key_toolchain_current(const struct toolchain *tc);
void key_toolchain_fini(struct toolchain *tc);

/* Digest of this node's CPU (model and flags from /proc/cpuinfo), used when
 * an argument asks for -march=native and the like. */
void key_cpu_id(uint8_t out[32]);
/* True when an argument makes the artifact depend on the build node's CPU. */
bool key_args_native(char *const *args, size_t nargs);

/* The request key of a get, as 64 hex digits plus NUL. */
void key_request(const struct toolchain *tc, const char *output, char *const *args, size_t nargs,
		 const struct key_source *src, size_t nsrc, const uint8_t cpu_id[32], char out[65]);
/* A request naming headers to precompile ("pch"): its rkey becomes the
 * digest of the rkey without them and the list, in order. */
void key_request_pch(char *const *pch, size_t npch, char rkey[65]);
/* The artifact key: rkey plus every dependency's path and digest. */
void key_artifact(const char *rkey, const struct store_dep *deps, size_t ndeps, char out[65]);

#endif
