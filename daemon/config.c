/*
 * kilnd's options. Every option has a default that needs no configuration,
 * following DESIGN.md ("Where it runs"), so that a Slurm prologue can start
 * the daemon with no arguments at all.
 */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <limits.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache_conf.h"
#include "config.h"
#include "key.h"
#include "kiln_build.h"
#include "frame.h"
#include "gpu.h"
#include "jobsize.h"
#include "msg.h"
#include "tcenv.h"
#include "util.h"
#include "validate.h"

#define DEFAULT_MAX_SIZE ((uint64_t)10 << 30)
#define DEFAULT_BUILD_TIMEOUT 600.0
#define DEFAULT_MAX_OUTPUT ((uint64_t)1 << 20)
/* Well above NFS's default attribute cache (acregmax 60 s), so that a claim
 * refreshed every 30 s never looks unchanged for that long to another node. */
#define DEFAULT_UPSTREAM_STALE 120.0
#define DEFAULT_MAX_CONNECTIONS 1024
#define DEFAULT_MAX_REQUESTS 256
#define DEFAULT_MAX_PENDING 16384
#define DEFAULT_MAX_QUEUE 4096
#define DEFAULT_FRAME_TIMEOUT 10.0

static void config_usage(FILE *fp)
{
	fprintf(fp,
		"Usage: kilnd [OPTION]...\n"
		"Per-node daemon that compiles generated C/C++ code once and hands the\n"
		"artifacts to every process of a job over a Unix socket.\n"
		"\n"
		"  --socket PATH           socket to listen on (default: $KILN_SOCKET, else\n"
		"                          $XDG_RUNTIME_DIR/kiln/kilnd.sock, else /tmp/kiln-UID/kilnd.sock)\n"
		"  --cache-dir DIR         build cache (default: $KILN_CACHE_DIR, else\n"
		"                          $XDG_CACHE_HOME/kiln, else ~/.cache/kiln); relative\n"
		"                          paths here, in --socket and in --log-file are taken\n"
		"                          from the directory kilnd starts in; a cache on a\n"
		"                          network filesystem (NFS, Lustre, GPFS, BeeGFS,\n"
		"                          CephFS, SMB, ...) is refused: keep it node-local\n"
		"                          and share builds with --upstream\n"
		"  --allow-network-cache   start on a cache directory on a network filesystem\n"
		"                          anyway (with a warning in the log)\n"
		"  --jobs N                compilers running at once (default: online CPUs)\n"
		"  --max-size SIZE         evict entries (stale ones first, then least recently\n"
		"                          used) while the cache takes more than SIZE on disk\n"
		"                          (e.g. 500M, 10G; default: the cache's kiln.conf,\n"
		"                          set by 'kiln config max-size', else 10G)\n"
		"  --toolchain NAME=PATH   compiler that requests may name by NAME, by absolute\n"
		"                          path (repeatable; requests may also name a compiler\n"
		"                          by its path: see --toolchain-dir);\n"
		"                          defaults: cc=$CC or /usr/bin/cc, c++=$CXX or /usr/bin/c++,\n"
		"                          nvcc=$NVCC, else nvcc on $PATH, else\n"
		"                          /usr/local/cuda/bin/nvcc (each skipped when missing)\n"
		"  --build-timeout SECONDS kill a build running longer (default 600)\n"
		"  --max-frame SIZE        largest request accepted (default 64M)\n"
		"  --max-output SIZE       compiler output kept per build (default 1M)\n"
		"  --upstream DIR          shared tier on a filesystem all nodes see (Lustre,\n"
		"                          GPFS, NFS): a local miss is looked up there before\n"
		"                          building, and every build is published there; DIR\n"
		"                          must be yours and not writable by others (it is\n"
		"                          created when its parent exists)\n"
		"  --upstream-stale SECONDS\n"
		"                          take over another node's claim on a build once it\n"
		"                          has not been refreshed for SECONDS (default 120)\n"
		"  --upstream-looks N      upstream looks per second that all the nodes of\n"
		"                          the job make in all while they wait for each\n"
		"                          other's builds (default 1000); each kilnd makes\n"
		"                          N / nodes, from 0.1 to 20\n"
		"  --job-nodes N           nodes in the job, for that pace (default:\n"
		"                          $KILN_JOB_NODES, $SLURM_JOB_NUM_NODES, $SLURM_NNODES,\n"
		"                          else the hosts of $SLURM_JOB_NODELIST; clients say\n"
		"                          theirs too, and the largest recent one counts)\n"
		"  --allow-uid USER        also serve USER (name or uid; repeatable); the\n"
		"                          socket becomes 0666 in a directory others may\n"
		"                          enter, and each peer's uid is checked on connect\n"
		"  --allow-group GROUP     also serve processes whose group or supplementary\n"
		"                          groups include GROUP (name or gid; repeatable)\n"
		"  --max-connections N     connections at once; more get \"busy\" (default 1024)\n"
		"  --max-requests N        requests in progress per connection; more wait\n"
		"                          unread in the socket (default 256), as they do\n"
		"                          while 4 MiB of replies wait for the client to read\n"
		"  --max-pending N         get and put requests in progress in all; more get\n"
		"                          \"busy\" (default 16384)\n"
		"  --max-queue N           builds waiting for a compiler slot; a request for\n"
		"                          one more gets \"busy\" (default 4096)\n"
		"  --frame-timeout SECONDS close a connection whose request stops arriving\n"
		"                          halfway for SECONDS (default 10; 0: never)\n"
		"  --claim-expiry SECONDS  end a lookup's claim of an alias whose producer\n"
		"                          showed no progress (asked again, sent its build)\n"
		"                          for SECONDS; a waiter takes it over (default 600;\n"
		"                          0: never)\n"
		"  --daemonize             run in the background; return once the socket\n"
		"                          accepts connections and print the daemon's pid\n"
		"  --idle-exit SECONDS     exit after SECONDS with no connection and no build\n"
		"                          (default 0: never)\n"
		"  --cuda-arch LIST        GPU architectures for nvcc requests that name none,\n"
		"                          e.g. sm_80 or sm_80,sm_90 (default: the node's GPUs,\n"
		"                          found through the CUDA driver)\n"
		"  --no-prewarm            do not check the most recently used entries before\n"
		"                          the first request (by default kilnd checks up to\n"
		"                          4096 of them, at most 3 s of its time, as their\n"
		"                          first hits would, while it waits for clients, and\n"
		"                          hashes its toolchains' programs for the first build)\n"
		"  --no-landlock           run compilers without Landlock (by default each\n"
		"                          compiler may write only in its build directory\n"
		"                          where the kernel has Landlock)\n"
		"  --allow-write DIR       a directory compilers may write in too (a toolchain\n"
		"                          wrapper's log or cache; repeatable, at most 8)\n"
		"  --toolchain-dir DIR     users admitted with --allow-uid/--allow-group may\n"
		"                          name compilers under DIR (e.g. /opt, /user-environment;\n"
		"                          repeatable, at most 16); you may name any that only\n"
		"                          you or root can change\n"
		"  --toolchain-env NAME    pass variable NAME (or NAME* for a prefix) to\n"
		"                          compilers too, its value part of their identity\n"
		"                          (repeatable, at most 32; docs/design.md lists those\n"
		"                          always passed)\n"
		"  --allow-toolchain-code  accept arguments that load code into the toolchain\n"
		"                          (-fplugin=, -specs=, -B, --sysroot, -wrapper,\n"
		"                          -Wl,-plugin, ...; refused by default)\n"
		"  --log-level LEVEL       error, warn, info (default) or debug\n"
		"  --log-file PATH         log to PATH (default: stderr; with --daemonize\n"
		"                          CACHE_DIR/kilnd.log)\n"
		"  -h, --help              show this help and exit\n"
		"  -V, --version           show the version and exit\n"
		"\n"
		"A second kilnd on the same socket and cache directory reports the running\n"
		"one and exits 0. Exit status: 0 after a clean stop or when yielding so; 1\n"
		"when it cannot start (the reason is printed), also when another kilnd\n"
		"serves the socket with another cache; 2 for a usage error; 3 when another\n"
		"kilnd serves the cache directory on another socket (another job of this\n"
		"user on this node: use another --cache-dir). SIGTERM, SIGINT or `kiln\n"
		"stop` stop the daemon cleanly.\n");
}

/* --allow-write DIR, --toolchain-dir DIR: an existing directory, kept by
 * its real path. */
static int add_dir(char **dirs, size_t *n, size_t max, const char *opt, const char *arg)
{
	char real[PATH_MAX];
	struct stat st;
	if (*n == max) {
		fprintf(stderr, "kilnd: %s: at most %zu directories\n", opt, max);
		return -1;
	}
	if (arg[0] != '/' || realpath(arg, real) == NULL || stat(real, &st) != 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "kilnd: %s: \"%s\" is not an existing directory named by an "
			"absolute path\n", opt, arg);
		return -1;
	}
	if ((dirs[*n] = strdup(real)) == NULL)
		return -1;
	(*n)++;
	return 0;
}

static int parse_seconds(const char *opt, const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	/* Written so that NaN fails too. */
	if (errno != 0 || end == s || *end != '\0' || !(v >= 0 && v <= 1e9)) {
		fprintf(stderr, "kilnd: %s: \"%s\" is not a number of seconds\n", opt, s);
		return -1;
	}
	*out = v;
	return 0;
}

static int parse_size_opt(const char *opt, const char *s, uint64_t *out)
{
	if (util_parse_size(s, out) != 0 || *out == 0) {
		fprintf(stderr, "kilnd: %s: \"%s\" is not a size (like 512M or 10G)\n", opt, s);
		return -1;
	}
	return 0;
}

/* Adds or replaces one NAME=PATH toolchain; PATH must be an absolute file. */
static int add_toolchain(struct config *cfg, const char *spec)
{
	char why[128];
	const char *eq = strchr(spec, '=');
	if (eq == NULL || eq == spec || eq[1] == '\0') {
		fprintf(stderr, "kilnd: --toolchain: expected NAME=PATH, got \"%s\"\n", spec);
		return -1;
	}
	if (eq[1] != '/') {
		fprintf(stderr, "kilnd: --toolchain: the path in \"%s\" is not absolute (like "
			"cc=/usr/bin/gcc)\n", spec);
		return -1;
	}
	char *name = strndup(spec, (size_t)(eq - spec));
	if (name == NULL)
		return -1;
	if (validate_toolchain_name(name, why, sizeof(why)) != 0) {
		fprintf(stderr, "kilnd: --toolchain: %s\n", why);
		free(name);
		return -1;
	}
	for (size_t i = 0; i < cfg->ntoolchains; i++) {
		if (strcmp(cfg->toolchains[i].name, name) == 0) {
			free(name);
			free(cfg->toolchains[i].path);
			cfg->toolchains[i].path = strdup(eq + 1);
			return cfg->toolchains[i].path != NULL ? 0 : -1;
		}
	}
	if (cfg->ntoolchains == CONFIG_MAX_TOOLCHAINS) {
		fprintf(stderr, "kilnd: --toolchain: at most %d toolchains\n", CONFIG_MAX_TOOLCHAINS);
		free(name);
		return -1;
	}
	cfg->toolchains[cfg->ntoolchains].name = name;
	cfg->toolchains[cfg->ntoolchains].path = strdup(eq + 1);
	if (cfg->toolchains[cfg->ntoolchains].path == NULL)
		return -1;
	cfg->ntoolchains++;
	return 0;
}

/* nvcc on $PATH, else the toolkit's standard place. */
static const char *default_nvcc(char *buf, size_t len)
{
	const char *path = getenv("PATH");
	while (path != NULL && *path != '\0') {
		size_t n = strcspn(path, ":");
		if (n > 0 && path[0] == '/' && (size_t)snprintf(buf, len, "%.*s/nvcc", (int)n, path) < len &&
		    access(buf, X_OK) == 0)
			return buf;
		path += n;
		if (*path == ':')
			path++;
	}
	return "/usr/local/cuda/bin/nvcc";
}

/* The default toolchains, unless the command line named them already. */
static int add_default_toolchains(struct config *cfg)
{
	char nvcc[PATH_MAX];
	const char *defs[][3] = { { "cc", "CC", "/usr/bin/cc" }, { "c++", "CXX", "/usr/bin/c++" },
				  { "nvcc", "NVCC", default_nvcc(nvcc, sizeof(nvcc)) } };
	for (size_t i = 0; i < 3; i++) {
		bool have = false;
		for (size_t j = 0; j < cfg->ntoolchains; j++)
			have = have || strcmp(cfg->toolchains[j].name, defs[i][0]) == 0;
		if (have)
			continue;
		const char *env = getenv(defs[i][1]);
		/* $CC may be "gcc" or "ccache gcc": only an absolute path is taken. */
		const char *path = env != NULL && env[0] == '/' && strchr(env, ' ') == NULL ? env
											      : defs[i][2];
		char spec[PATH_MAX + 16];
		snprintf(spec, sizeof(spec), "%s=%s", defs[i][0], path);
		if (add_toolchain(cfg, spec) != 0)
			return -1;
		cfg->toolchains[cfg->ntoolchains - 1].is_default = true;
	}
	return 0;
}

/* kiln-exec lives next to kilnd in a build tree, in libexecdir when
 * installed: found relative to kilnd first (../libexec), so that an
 * installation moved or staged elsewhere (DESTDIR) works as is. */
static char *find_exec_helper(void)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');
		if (slash != NULL) {
			*slash = '\0';
			char cand[PATH_MAX + 32];
			snprintf(cand, sizeof(cand), "%s/kiln-exec", self);
			if (access(cand, X_OK) == 0)
				return strdup(cand);
			snprintf(cand, sizeof(cand), "%s/../libexec/kiln-exec", self);
			if (access(cand, X_OK) == 0)
				return strdup(cand);
		}
	}
	return strdup(KILN_LIBEXECDIR "/kiln-exec");
}

enum {
	OPT_SOCKET = 256, OPT_CACHE_DIR, OPT_JOBS, OPT_MAX_SIZE, OPT_TOOLCHAIN,
	OPT_BUILD_TIMEOUT, OPT_DAEMONIZE, OPT_IDLE_EXIT, OPT_LOG_LEVEL, OPT_LOG_FILE,
	OPT_MAX_FRAME, OPT_MAX_OUTPUT, OPT_UPSTREAM, OPT_UPSTREAM_STALE, OPT_UPSTREAM_LOOKS,
	OPT_JOB_NODES,
	OPT_ALLOW_UID, OPT_ALLOW_GROUP, OPT_MAX_CONNECTIONS, OPT_MAX_REQUESTS, OPT_MAX_PENDING,
	OPT_MAX_QUEUE, OPT_FRAME_TIMEOUT, OPT_CLAIM_EXPIRY, OPT_CUDA_ARCH, OPT_NO_LANDLOCK, OPT_NO_PREWARM, OPT_ALLOW_WRITE, OPT_ALLOW_TOOLCHAIN_CODE,
	OPT_TOOLCHAIN_DIR, OPT_TOOLCHAIN_ENV, OPT_ALLOW_NETWORK_CACHE,
};

static const struct option long_opts[] = {
	{ "socket", required_argument, NULL, OPT_SOCKET },
	{ "cache-dir", required_argument, NULL, OPT_CACHE_DIR },
	{ "jobs", required_argument, NULL, OPT_JOBS },
	{ "max-size", required_argument, NULL, OPT_MAX_SIZE },
	{ "toolchain", required_argument, NULL, OPT_TOOLCHAIN },
	{ "build-timeout", required_argument, NULL, OPT_BUILD_TIMEOUT },
	{ "daemonize", no_argument, NULL, OPT_DAEMONIZE },
	{ "idle-exit", required_argument, NULL, OPT_IDLE_EXIT },
	{ "log-level", required_argument, NULL, OPT_LOG_LEVEL },
	{ "log-file", required_argument, NULL, OPT_LOG_FILE },
	{ "max-frame", required_argument, NULL, OPT_MAX_FRAME },
	{ "max-output", required_argument, NULL, OPT_MAX_OUTPUT },
	{ "upstream", required_argument, NULL, OPT_UPSTREAM },
	{ "upstream-stale", required_argument, NULL, OPT_UPSTREAM_STALE },
	{ "upstream-looks", required_argument, NULL, OPT_UPSTREAM_LOOKS },
	{ "job-nodes", required_argument, NULL, OPT_JOB_NODES },
	{ "allow-uid", required_argument, NULL, OPT_ALLOW_UID },
	{ "allow-group", required_argument, NULL, OPT_ALLOW_GROUP },
	{ "max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS },
	{ "max-requests", required_argument, NULL, OPT_MAX_REQUESTS },
	{ "max-pending", required_argument, NULL, OPT_MAX_PENDING },
	{ "max-queue", required_argument, NULL, OPT_MAX_QUEUE },
	{ "frame-timeout", required_argument, NULL, OPT_FRAME_TIMEOUT },
	{ "claim-expiry", required_argument, NULL, OPT_CLAIM_EXPIRY },
	{ "cuda-arch", required_argument, NULL, OPT_CUDA_ARCH },
	{ "no-landlock", no_argument, NULL, OPT_NO_LANDLOCK },
	{ "no-prewarm", no_argument, NULL, OPT_NO_PREWARM },
	{ "allow-write", required_argument, NULL, OPT_ALLOW_WRITE },
	{ "allow-toolchain-code", no_argument, NULL, OPT_ALLOW_TOOLCHAIN_CODE },
	{ "allow-network-cache", no_argument, NULL, OPT_ALLOW_NETWORK_CACHE },
	{ "toolchain-dir", required_argument, NULL, OPT_TOOLCHAIN_DIR },
	{ "toolchain-env", required_argument, NULL, OPT_TOOLCHAIN_ENV },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

static int replace_str(char **dst, const char *src)
{
	free(*dst);
	*dst = strdup(src);
	return *dst != NULL ? 0 : -1;
}

/*
 * A path made absolute against the working directory at start: --daemonize
 * changes to "/", compilers run in their build directories, and the path
 * may not exist yet, so realpath() cannot do it. what names it in errors.
 */
static int set_path(char **dst, const char *what, const char *arg)
{
	char cwd[PATH_MAX];
	if (arg[0] == '\0') {
		fprintf(stderr, "kilnd: %s: the path is empty\n", what);
		return -1;
	}
	if (arg[0] == '/')
		return replace_str(dst, arg);
	if (getcwd(cwd, sizeof(cwd)) == NULL) {
		fprintf(stderr, "kilnd: %s %s: cannot resolve a relative path: %s\n", what, arg,
			strerror(errno));
		return -1;
	}
	char *abs = NULL;
	if (asprintf(&abs, "%s/%s", cwd, arg) < 0)
		return -1;
	free(*dst);
	*dst = abs;
	return 0;
}

static int set_upstream(struct config *cfg, const char *arg)
{
	return set_path(&cfg->upstream_dir, "--upstream", arg);
}

static int parse_count(const char *opt, const char *s, unsigned max, unsigned *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < 1 || v > (long)max) {
		fprintf(stderr, "kilnd: %s: \"%s\" is not a number from 1 to %u\n", opt, s, max);
		return -1;
	}
	*out = (unsigned)v;
	return 0;
}

/* A user or group given by name or number. Names are looked up once, here;
 * connections are checked against the numbers. */
static int parse_id(const char *opt, const char *s, bool group, unsigned *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (*s != '\0' && *s != '-' && errno == 0 && *end == '\0' && v < (unsigned long)(uid_t)-1) {
		*out = (unsigned)v;
		return 0;
	}
	if (group) {
		struct group *gr = getgrnam(s);
		if (gr != NULL) {
			*out = (unsigned)gr->gr_gid;
			return 0;
		}
	} else {
		struct passwd *pw = getpwnam(s);
		if (pw != NULL) {
			*out = (unsigned)pw->pw_uid;
			return 0;
		}
	}
	fprintf(stderr, "kilnd: %s: no %s \"%s\"\n", opt, group ? "group" : "user", s);
	return -1;
}

static int add_allowed(struct config *cfg, const char *opt, const char *arg, bool group)
{
	size_t *n = group ? &cfg->nallow_gids : &cfg->nallow_uids;
	unsigned id;
	if (*n == CONFIG_MAX_ALLOW) {
		fprintf(stderr, "kilnd: %s: at most %d\n", opt, CONFIG_MAX_ALLOW);
		return -1;
	}
	if (parse_id(opt, arg, group, &id) != 0)
		return -1;
	if (group)
		cfg->allow_gids[(*n)++] = (gid_t)id;
	else
		cfg->allow_uids[(*n)++] = (uid_t)id;
	return 0;
}

/* The upstream tier's options. */
static int parse_upstream(struct config *cfg, int c, const char *arg)
{
	unsigned looks;
	switch (c) {
	case OPT_UPSTREAM:
		return set_upstream(cfg, arg);
	case OPT_UPSTREAM_STALE:
		if (parse_seconds("--upstream-stale", arg, &cfg->upstream_stale_s) != 0)
			return -1;
		if (cfg->upstream_stale_s < 1) {
			fprintf(stderr, "kilnd: --upstream-stale must be at least 1 second\n");
			return -1;
		}
		return 0;
	case OPT_UPSTREAM_LOOKS:
		if (parse_count("--upstream-looks", arg, 1000000, &looks) != 0)
			return -1;
		cfg->upstream_looks = looks;
		return 0;
	default:   /* OPT_JOB_NODES */
		cfg->job_nodes = jobsize_parse(arg);
		cfg->job_nodes_source = "--job-nodes";
		if (cfg->job_nodes == 0) {
			fprintf(stderr, "kilnd: --job-nodes: \"%s\" is not a number from 1 to %ld\n",
				arg, JOBSIZE_MAX);
			return -1;
		}
		return 0;
	}
}

static int parse_one(struct config *cfg, int c, const char *arg)
{
	char *end;
	switch (c) {
	case OPT_ALLOW_UID:
		return add_allowed(cfg, "--allow-uid", arg, false);
	case OPT_ALLOW_GROUP:
		return add_allowed(cfg, "--allow-group", arg, true);
	case OPT_MAX_CONNECTIONS:
		return parse_count("--max-connections", arg, 1u << 20, &cfg->max_connections);
	case OPT_MAX_REQUESTS:
		return parse_count("--max-requests", arg, 1u << 20, &cfg->max_requests);
	case OPT_MAX_PENDING:
		return parse_count("--max-pending", arg, 1u << 24, &cfg->max_pending);
	case OPT_MAX_QUEUE:
		return parse_count("--max-queue", arg, 1u << 24, &cfg->max_queue);
	case OPT_FRAME_TIMEOUT:
		return parse_seconds("--frame-timeout", arg, &cfg->frame_timeout_s);
	case OPT_CLAIM_EXPIRY:
		return parse_seconds("--claim-expiry", arg, &cfg->claim_expiry_s);
	case OPT_NO_LANDLOCK:
		cfg->no_landlock = true;
		return 0;
	case OPT_NO_PREWARM:
		cfg->no_prewarm = true;
		return 0;
	case OPT_ALLOW_WRITE:
		return add_dir(cfg->allow_write, &cfg->nallow_write, CONFIG_MAX_ALLOW_WRITE,
			       "--allow-write", arg);
	case OPT_ALLOW_TOOLCHAIN_CODE:
		cfg->allow_toolchain_code = true;
		return 0;
	case OPT_ALLOW_NETWORK_CACHE:
		cfg->allow_network_cache = true;
		return 0;
	case OPT_TOOLCHAIN_DIR:
		return add_dir(cfg->toolchain_dirs, &cfg->ntoolchain_dirs, CONFIG_MAX_TOOLCHAIN_DIRS,
			       "--toolchain-dir", arg);
	case OPT_TOOLCHAIN_ENV:
		if (cfg->ntoolchain_env == CONFIG_MAX_TOOLCHAIN_ENV || !tcenv_name_ok(arg)) {
			fprintf(stderr, "kilnd: --toolchain-env: \"%s\" is not a variable name (letters, "
				"digits, '_', a '*' at the end for a prefix; at most %d)\n", arg,
				CONFIG_MAX_TOOLCHAIN_ENV);
			return -1;
		}
		return (cfg->toolchain_env[cfg->ntoolchain_env++] = strdup(arg)) != NULL ? 0 : -1;
	case OPT_CUDA_ARCH:
		free(cfg->cuda_arch);
		if (gpu_arch_parse(arg, &cfg->cuda_arch) != 0) {
			fprintf(stderr, "kilnd: --cuda-arch: \"%s\" is not a list like sm_80 or "
				"sm_80,sm_90\n", arg);
			return -1;
		}
		return 0;
	case OPT_SOCKET:
		return set_path(&cfg->socket_path, "--socket", arg);
	case OPT_CACHE_DIR:
		return set_path(&cfg->cache_dir, "--cache-dir", arg);
	case OPT_JOBS: {
		errno = 0;
		long v = strtol(arg, &end, 10);
		if (errno != 0 || *end != '\0' || v < 1 || v > 4096) {
			fprintf(stderr, "kilnd: --jobs: \"%s\" is not a number from 1 to 4096\n", arg);
			return -1;
		}
		cfg->jobs = (unsigned)v;
		return 0;
	}
	case OPT_MAX_SIZE:
		cfg->max_size_given = true;
		return parse_size_opt("--max-size", arg, &cfg->max_size);
	case OPT_TOOLCHAIN:
		return add_toolchain(cfg, arg);
	case OPT_BUILD_TIMEOUT:
		if (parse_seconds("--build-timeout", arg, &cfg->build_timeout_s) != 0)
			return -1;
		if (cfg->build_timeout_s <= 0) {
			fprintf(stderr, "kilnd: --build-timeout must be positive\n");
			return -1;
		}
		return 0;
	case OPT_DAEMONIZE:
		cfg->daemonize = true;
		return 0;
	case OPT_IDLE_EXIT:
		return parse_seconds("--idle-exit", arg, &cfg->idle_exit_s);
	case OPT_LOG_LEVEL:
		if (log_level_parse(arg, &cfg->log_level) != 0) {
			fprintf(stderr, "kilnd: --log-level: \"%s\" is not error, warn, info or debug\n", arg);
			return -1;
		}
		return 0;
	case OPT_LOG_FILE:
		return set_path(&cfg->log_file, "--log-file", arg);
	case OPT_MAX_FRAME:
		return parse_size_opt("--max-frame", arg, &cfg->max_frame);
	case OPT_MAX_OUTPUT:
		return parse_size_opt("--max-output", arg, &cfg->max_output);
	case OPT_UPSTREAM:
	case OPT_UPSTREAM_STALE:
	case OPT_UPSTREAM_LOOKS:
	case OPT_JOB_NODES:
		return parse_upstream(cfg, c, arg);
	default:
		fprintf(stderr, "Try 'kilnd --help' for more information.\n");
		return -1;
	}
}

int config_parse(struct config *cfg, int argc, char **argv)
{
	memset(cfg, 0, sizeof(*cfg));
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	cfg->jobs = ncpu > 0 ? (unsigned)ncpu : 1;
	cfg->max_size = DEFAULT_MAX_SIZE;
	cfg->build_timeout_s = DEFAULT_BUILD_TIMEOUT;
	cfg->log_level = LOG_INFO;
	cfg->max_frame = FRAME_MAX_DEFAULT;
	cfg->max_output = DEFAULT_MAX_OUTPUT;
	cfg->upstream_stale_s = DEFAULT_UPSTREAM_STALE;
	cfg->upstream_looks = JOBSIZE_JOB_LOOKS_PER_S;
	cfg->max_connections = DEFAULT_MAX_CONNECTIONS;
	cfg->max_requests = DEFAULT_MAX_REQUESTS;
	cfg->max_pending = DEFAULT_MAX_PENDING;
	cfg->max_queue = DEFAULT_MAX_QUEUE;
	cfg->frame_timeout_s = DEFAULT_FRAME_TIMEOUT;
	cfg->claim_expiry_s = CLAIM_EXPIRY_DEFAULT_S;

	int c;
	opterr = 1;
	while ((c = getopt_long(argc, argv, "hV", long_opts, NULL)) != -1) {
		if (c == 'h') {
			config_usage(stdout);
			return 1;
		}
		if (c == 'V') {
			printf("kilnd %s (build %s, protocol %d, key format %d)\n", KILN_VERSION_STR,
			       KILN_BUILD_STR, KILN_PROTO_VERSION, KEY_FORMAT_VERSION);
			return 1;
		}
		if (parse_one(cfg, c, optarg) != 0)
			return -1;
	}
	if (optind < argc) {
		fprintf(stderr, "kilnd: unexpected argument \"%s\"\nTry 'kilnd --help' for more information.\n",
			argv[optind]);
		return -1;
	}
	if (cfg->socket_path == NULL) {
		cfg->socket_default = true;
		if ((cfg->socket_path = util_default_socket()) == NULL)
			return -1;
	}
	if (cfg->cache_dir == NULL && (cfg->cache_dir = util_default_cache_dir()) == NULL) {
		fprintf(stderr, "kilnd: no cache directory: set --cache-dir or $KILN_CACHE_DIR\n");
		return -1;
	}
	/* From the environment ($KILN_SOCKET, $KILN_CACHE_DIR): absolute too. */
	if ((cfg->socket_path[0] != '/' &&
	     set_path(&cfg->socket_path, "$KILN_SOCKET", cfg->socket_path) != 0) ||
	    (cfg->cache_dir[0] != '/' &&
	     set_path(&cfg->cache_dir, "$KILN_CACHE_DIR", cfg->cache_dir) != 0))
		return -1;
	if (cfg->job_nodes == 0 && (cfg->job_nodes = jobsize_here()) > 0)
		cfg->job_nodes_source = "environment";
	if (add_default_toolchains(cfg) != 0)
		return -1;
	cfg->exec_helper = find_exec_helper();
	return cfg->exec_helper != NULL ? 0 : -1;
}

const char *config_apply_cache_conf(struct config *cfg, const struct cache_conf *cc)
{
	if (cfg->max_size_given)
		return "command line";
	if (cc->has_max_size) {
		cfg->max_size = cc->max_size;
		return CACHE_CONF_NAME;
	}
	cfg->max_size = DEFAULT_MAX_SIZE;
	return "default";
}

void config_fini(struct config *cfg)
{
	for (size_t i = 0; i < cfg->nallow_write; i++)
		free(cfg->allow_write[i]);
	for (size_t i = 0; i < cfg->ntoolchain_dirs; i++)
		free(cfg->toolchain_dirs[i]);
	for (size_t i = 0; i < cfg->ntoolchain_env; i++)
		free(cfg->toolchain_env[i]);
	free(cfg->cuda_arch);
	free(cfg->socket_path);
	free(cfg->cache_dir);
	free(cfg->log_file);
	free(cfg->exec_helper);
	free(cfg->upstream_dir);
	for (size_t i = 0; i < cfg->ntoolchains; i++) {
		free(cfg->toolchains[i].name);
		free(cfg->toolchains[i].path);
	}
	memset(cfg, 0, sizeof(*cfg));
}
