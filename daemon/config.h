/*
 * kilnd's command-line configuration: parsing, defaults and --help.
 */
#ifndef KILN_DAEMON_CONFIG_H
#define KILN_DAEMON_CONFIG_H

#include <stdbool.h>

/* Directories a toolchain wrapper may write in besides the build directory. */
#define CONFIG_MAX_ALLOW_WRITE 8
#define CONFIG_MAX_TOOLCHAIN_DIRS 16
#define CONFIG_MAX_TOOLCHAIN_ENV 32
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "log.h"

#define CONFIG_MAX_TOOLCHAINS 32
#define CONFIG_MAX_ALLOW 64

struct config_toolchain {
	char *name;
	char *path;
	bool is_default;   /* not named on the command line: skipped if missing */
};

/* A claim without progress this long ends (--claim-expiry; claims.c). */
#define CLAIM_EXPIRY_DEFAULT_S 600

struct config {
	char *socket_path;
	bool socket_default;        /* socket_path is util_default_socket()'s */
	char *cache_dir;
	unsigned jobs;
	uint64_t max_size;
	bool max_size_given;         /* --max-size: it overrides the cache's kiln.conf */
	struct config_toolchain toolchains[CONFIG_MAX_TOOLCHAINS];
	size_t ntoolchains;
	double build_timeout_s;
	bool daemonize;
	double idle_exit_s;        /* 0: never */
	enum log_level log_level;
	char *log_file;
	uint64_t max_frame;
	uint64_t max_output;       /* cap on captured compiler output per build */
	char *exec_helper;         /* path of kiln-exec */
	char *upstream_dir;        /* --upstream: shared tier (absolute), or NULL */
	double upstream_stale_s;   /* a claim unchanged this long is taken over */
	long job_nodes;            /* --job-nodes, else from the environment; 0: unknown */
	const char *job_nodes_source; /* "--job-nodes", "environment" or NULL */
	double upstream_looks;     /* upstream looks per second of the whole job */

	/* Who else may connect (--allow-uid, --allow-group); the own uid always. */
	uid_t allow_uids[CONFIG_MAX_ALLOW];
	size_t nallow_uids;
	gid_t allow_gids[CONFIG_MAX_ALLOW];
	size_t nallow_gids;

	/* Resource limits (docs/security.md, "Limits"). */
	unsigned max_connections;  /* beyond: busy, then closed */
	unsigned max_requests;     /* per connection in progress; beyond: not read */
	unsigned max_pending;      /* get/put in progress in all; beyond: busy */
	unsigned max_queue;        /* builds waiting for a slot; beyond: busy */
	double frame_timeout_s;    /* a frame stalled this long closes its connection */
	double claim_expiry_s;     /* a claim without progress this long ends; 0: never */
	char *cuda_arch;           /* --cuda-arch, normalized ("sm_80,sm_90"), or NULL */
	bool no_landlock;          /* --no-landlock: compilers run unconfined */
	bool no_prewarm;           /* --no-prewarm: no checks before the first request */
	bool allow_toolchain_code; /* --allow-toolchain-code: -fplugin=, -B, ... */
	bool allow_network_cache;  /* --allow-network-cache: a cache on NFS, Lustre, ... */
	char *allow_write[CONFIG_MAX_ALLOW_WRITE]; /* --allow-write: absolute, real */
	size_t nallow_write;
	/* --toolchain-dir: where admitted users may name compilers (real paths) */
	char *toolchain_dirs[CONFIG_MAX_TOOLCHAIN_DIRS];
	size_t ntoolchain_dirs;
	char *toolchain_env[CONFIG_MAX_TOOLCHAIN_ENV]; /* --toolchain-env names */
	size_t ntoolchain_env;
};

/*
 * Parses argv into cfg, filling defaults. Returns 0 to run, 1 when the
 * program should exit 0 (--help, --version printed), or -1 after printing a
 * usage error to stderr. Free with config_fini().
 */
int config_parse(struct config *cfg, int argc, char **argv);
void config_fini(struct config *cfg);

struct cache_conf;
/* The cache's size limit: --max-size when given, else kiln.conf's
 * max-size (kiln config), else the default (10G). Sets cfg->max_size and
 * returns where it came from: "command line", "kiln.conf" or "default". */
const char *config_apply_cache_conf(struct config *cfg, const struct cache_conf *cc);

#endif
