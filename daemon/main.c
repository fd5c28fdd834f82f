/*
 * kilnd: the per-node compile-and-load daemon. main() is the start-up and
 * shut-down sequence; the work happens in the modules it initialises.
 */
#include <errno.h>
#include <limits.h>
#include <time.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "claims.h"
#include "flight.h"
#include "alias.h"
#include "prewarm.h"
#include "cache_conf.h"
#include "cachefs.h"
#include "cachedir.h"
#include "config.h"
#include "confine.h"
#include "digests.h"
#include "dispatch.h"
#include "fdcache.h"
#include "headers.h"
#include "instance.h"
#include "kilnd.h"
#include "stats.h"
#include "lifecycle.h"
#include "log.h"
#include "server.h"
#include "store.h"
#include "table.h"
#include "upstream.h"
#include "util.h"
#include "gpu.h"
#include "child.h"
#include "named.h"
#include "sdnotify.h"
#include "tcenv.h"
#include "upgrade.h"
#include "thread.h"
#include "verify.h"

static void on_signal(uv_signal_t *s, int signum)
{
	struct kilnd *d = s->data;
	if (signum == SIGHUP) {
		log_info("SIGHUP ignored; stop with SIGTERM or `kiln stop`");
		return;
	}
	log_info("%s received", strsignal(signum));
	kilnd_stop(d);
}

static void signals_start(struct kilnd *d)
{
	uv_signal_t *sigs[] = { &d->sig_term, &d->sig_int, &d->sig_hup };
	int nums[] = { SIGTERM, SIGINT, SIGHUP };
	for (size_t i = 0; i < 3; i++) {
		uv_signal_init(d->loop, sigs[i]);
		sigs[i]->data = d;
		uv_signal_start(sigs[i], on_signal, nums[i]);
	}
	signal(SIGPIPE, SIG_IGN);
}

/* Creates the directories the locks live in, and checks they are private. */
static int main_make_dirs(const struct config *cfg, char *err, size_t errlen)
{
	char *sockdir = strdup(cfg->socket_path);
	if (sockdir == NULL)
		return -ENOMEM;
	char *slash = strrchr(sockdir, '/');
	int rc = 0;
	if (slash != NULL && slash != sockdir) {
		*slash = '\0';
		/* Users let in by --allow-uid/--allow-group must reach the socket:
		 * they may enter the directory, not list or change it. */
		bool shared = cfg->nallow_uids + cfg->nallow_gids > 0;
		struct stat st;
		bool existed = stat(sockdir, &st) == 0;
		rc = util_mkdir_p(sockdir, 0700);
		if (rc == 0 && shared && !existed && chmod(sockdir, 0711) != 0)
			rc = -errno;
		if (rc != 0)
			snprintf(err, errlen, "cannot create %s: %s", sockdir, strerror(-rc));
		else
			rc = cachedir_check_private(sockdir, "socket directory", err, errlen);
		if (rc == 0 && shared && stat(sockdir, &st) == 0 && (st.st_mode & 0011) != 0011)
			log_warn("socket directory %s (mode %03o) is closed to other users: those "
				 "--allow-uid/--allow-group name cannot reach the socket; chmod go+x it",
				 sockdir, (unsigned)(st.st_mode & 0777));
	}
	free(sockdir);
	if (rc == 0 && (rc = util_mkdir_p(cfg->cache_dir, 0700)) != 0)
		snprintf(err, errlen, "cannot create %s: %s", cfg->cache_dir, strerror(-rc));
	else if (rc == 0)
		rc = cachedir_check_private(cfg->cache_dir, "cache directory", err, errlen);
	return rc;
}

/*
 * kiln-observe.so, which kiln-exec preloads into every compiler run: found
 * next to kiln-exec. Without it (or for a static toolchain driver) builds
 * are recorded from the compiler's dependency files, and kilnd says so.
 */
static void observe_init(struct kilnd *d)
{
	char lib[PATH_MAX + 32], real[PATH_MAX];
	snprintf(lib, sizeof(lib), "%s", d->cfg->exec_helper);
	char *slash = strrchr(lib, '/');
	if (slash != NULL)
		snprintf(slash, sizeof(lib) - (size_t)(slash - lib), "/kiln-observe.so");
	if (slash != NULL && realpath(lib, real) != NULL && access(real, R_OK) == 0)
		d->observe_lib = strdup(real);
	if (d->observe_lib == NULL)
		log_warn("%s not found: builds are recorded from the compiler's dependency files, "
			 "which miss absent headers and assembler, linker and positional inputs", lib);
	d->landlock_abi = d->cfg->no_landlock ? 0 : confine_abi(d->landlock_why, sizeof(d->landlock_why));
	if (d->cfg->no_landlock)
		snprintf(d->landlock_why, sizeof(d->landlock_why), "off by --no-landlock");
	if (d->landlock_abi > 0)
		log_info("compilers write only in their build directory (Landlock ABI %d)", d->landlock_abi);
	else
		log_warn("compilers are not confined to their build directory: %s; argument "
			 "validation is the only fence", d->landlock_why);
	const char *ignore = getenv("KILN_OBSERVE_IGNORE");
	if (ignore != NULL && ignore[0] != '\0')
		log_warn("KILN_OBSERVE_IGNORE=%s: builds do not record these paths and variables "
			 "(meant for a toolchain wrapper's own files)", ignore);
	for (size_t i = 0; i < d->ntoolchains; i++) {
		if (!d->toolchains[i].dynamic)
			log_warn("toolchain %s (%s) is not a dynamically linked program: its builds "
				 "are recorded from the compiler's dependency files", d->toolchains[i].name,
				 d->toolchains[i].real_path);
	}
}

/* The node's GPUs, and the architectures nvcc toolchains build for when a
 * request names none. Only asked when an nvcc toolchain is configured. */
static void gpus_init(struct kilnd *d)
{
	bool nvcc = false;
	for (size_t i = 0; i < d->ntoolchains; i++)
		nvcc = nvcc || d->toolchains[i].is_nvcc;
	d->gpus = calloc(1, sizeof(*d->gpus));
	if (!nvcc || d->gpus == NULL)
		return;
	gpu_detect(d->gpus);
	for (size_t i = 0; i < d->gpus->n; i++)
		log_info("GPU %d: %s, compute capability %d.%d", d->gpus->dev[i].index,
			 d->gpus->dev[i].name, d->gpus->dev[i].major, d->gpus->dev[i].minor);
	if (d->gpus->n == 0)
		log_info("no GPU: %s", d->gpus->note);
	char *arch = gpu_arch_list(d->gpus, d->cfg->cuda_arch);
	for (size_t i = 0; i < d->ntoolchains; i++) {
		if (!d->toolchains[i].is_nvcc)
			continue;
		d->toolchains[i].cuda_arch = arch != NULL ? strdup(arch) : NULL;
		if (arch != NULL)
			log_info("toolchain %s builds for %s unless a request names an architecture",
				 d->toolchains[i].name, arch);
		else
			log_warn("toolchain %s: no GPU and no --cuda-arch; its requests must name "
				 "an architecture (-arch=sm_XY)", d->toolchains[i].name);
	}
	free(arch);
}

/* A compiler that others may replace runs their code as this user: said at
 * start (not refused: a site's group-writable software tree is the
 * administrator's choice). */
static void warn_swappable(const struct toolchain *tc)
{
	char dir[PATH_MAX];
	unsigned mode = 0;
	struct stat st;
	/* kilnd runs the configured name (a symlink farm such as ccache's keys
	 * on it): the directory that holds that name counts, then the file. */
	char link_dir[PATH_MAX];
	snprintf(link_dir, sizeof(link_dir), "%s", tc->path);
	char *slash = strrchr(link_dir, '/');
	if (slash != NULL)
		*(slash == link_dir ? slash + 1 : slash) = '\0';
	const char *const names[] = { link_dir, tc->real_path };
	for (size_t i = 0; i < 2; i++) {
		if (stat(names[i], &st) == 0 && (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 &&
		    (i == 1 || (st.st_mode & S_ISVTX) == 0)) {
			log_warn("toolchain %s: %s is writable by group or others (mode %04o): they "
				 "can replace the compiler kilnd runs for you", tc->name,
				 i == 0 ? link_dir : tc->real_path, (unsigned)(st.st_mode & 07777));
			return;
		}
		if (util_swappable_ancestor(names[i], dir, sizeof(dir), &mode) == 1) {
			log_warn("toolchain %s: %s lies in %s, which group or others may write "
				 "without the sticky bit (mode %04o): they can replace the compiler "
				 "kilnd runs for you", tc->name, tc->path, dir, mode);
			return;
		}
	}
}

extern char **environ;

/* The environment of toolchain runs (tcenv.h): made once, before any. */
static struct tcenv toolchain_env;

static int toolchains_init(struct kilnd *d, char *err, size_t errlen)
{
	if (tcenv_make(&toolchain_env, environ, d->cfg->toolchain_env, d->cfg->ntoolchain_env) != 0) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	tcenv_set(&toolchain_env);
	for (size_t i = 0; i < d->cfg->ntoolchains; i++) {
		const struct config_toolchain *ct = &d->cfg->toolchains[i];
		struct toolchain *tc = &d->toolchains[d->ntoolchains];
		int rc = key_toolchain_init(tc, ct->name, ct->path, NULL, err, errlen);
		if (rc != 0 && ct->is_default) {
			log_warn("%s; requests for it will be refused", err);
			continue;
		}
		if (rc != 0)
			return rc;
		log_info("toolchain %s: %s (%s)", tc->name, tc->real_path, tc->version);
		warn_swappable(tc);
		d->ntoolchains++;
	}
	gpus_init(d);
	observe_init(d);
	if (d->ntoolchains == 0) {
		snprintf(err, errlen, "no usable toolchain; name one with --toolchain NAME=PATH");
		return -ENOENT;
	}
	return 0;
}

/*
 * libuv's pool has 4 threads unless told otherwise, before its first use.
 * Every build publishes on it and a slow filesystem can hold a thread, so
 * size it to the builds that may run plus room for requests' reads.
 */
static void threadpool_size(const struct config *cfg)
{
	char n[16];
	unsigned threads = cfg->jobs + 4 < 1024 ? cfg->jobs + 4 : 1024;
	snprintf(n, sizeof(n), "%u", threads);
	setenv("UV_THREADPOOL_SIZE", n, 0);
}

/*
 * A damaged index is moved aside (index.db.damaged-TIME) and a new one is
 * built from the objects and their metadata files, which hold everything a
 * row does: entries are kept, only use counts since the last metadata write
 * are lost. Returns 0 when it moved the files.
 */
static int set_index_aside(const char *cache_dir, const char *why)
{
	static const char *const suffixes[] = { "", "-wal", "-shm" };
	char from[4200], to[4300];
	long now = (long)time(NULL);
	log_error("the cache index %s/index.db is damaged (%s); moving it to "
		  "index.db.damaged-%ld and rebuilding it from the objects", cache_dir, why, now);
	for (size_t i = 0; i < 3; i++) {
		snprintf(from, sizeof(from), "%s/index.db%s", cache_dir, suffixes[i]);
		snprintf(to, sizeof(to), "%s/index.db.damaged-%ld%s", cache_dir, now, suffixes[i]);
		if (rename(from, to) != 0 && errno != ENOENT)
			return -errno;
	}
	snprintf(from, sizeof(from), "%s/clean-stop", cache_dir);
	unlink(from);
	return 0;
}

/*
 * Whether the machine restarted since the last kilnd on this cache began
 * (its boot id, kept in <cache>/kilnd.boot, differs from this boot's): only
 * then can an unclean stop have damaged the index. A process that dies
 * (kill -9, a crash) cannot: SQLite's WAL is written through the kernel,
 * which keeps what was written. Records this boot's id for the next start.
 */
static bool rebooted_since_last_start(const char *cache_dir)
{
	char path[4200], *now = NULL, *last = NULL;
	size_t nlen = 0, llen = 0;
	snprintf(path, sizeof(path), "%s/kilnd.boot", cache_dir);
	if (util_read_file("/proc/sys/kernel/random/boot_id", 64, &now, &nlen) != 0)
		return true;   /* unknown: assume the worst */
	bool same = util_read_file(path, 64, &last, &llen) == 0 && llen == nlen &&
		    memcmp(now, last, nlen) == 0;
	if (!same) {
		int dfd = open(cache_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd >= 0) {
			util_replace_file_at(dfd, "kilnd.boot", now, nlen, true);
			close(dfd);
		}
	}
	free(now);
	free(last);
	return !same;
}

static int store_open_checked(struct kilnd *d, char *err, size_t errlen)
{
	char mark[4200];
	/* After an unclean stop across a reboot the index gets SQLite's
	 * quick_check (a scan of every page: 0.8 s at a million entries);
	 * after a clean stop, or when only kilnd died, opening it is check
	 * enough. */
	snprintf(mark, sizeof(mark), "%s/clean-stop", d->cfg->cache_dir);
	bool crashed = access(mark, F_OK) != 0;
	if (rebooted_since_last_start(d->cfg->cache_dir) == false && crashed)
		crashed = false;
	struct store *s = NULL;
	int rc = store_open(d->cfg->cache_dir, 0, &s, err, errlen);
	if (rc == 0 && crashed && store_quick_check(s) == -EBADMSG) {
		store_close(s);
		s = NULL;
		rc = -EBADMSG;
		snprintf(err, errlen, "quick_check failed");
	}
	d->store = s;
	if (rc != -EBADMSG)
		return rc;
	if (set_index_aside(d->cfg->cache_dir, err) != 0) {
		snprintf(err, errlen, "the cache index in %s is damaged and cannot be moved aside: %s; "
			 "move index.db away by hand and start kilnd again", d->cfg->cache_dir,
			 strerror(errno));
		return -EBADMSG;
	}
	err[0] = '\0';
	rc = store_open(d->cfg->cache_dir, 0, &s, err, errlen);
	d->store = s;
	return rc;
}

static int store_init(struct kilnd *d, char *err, size_t errlen)
{
	int rc = store_open_checked(d, err, errlen);
	if (rc != 0)
		return rc;
	struct store_reconcile_stats st = { 0 };
	bool clean = store_take_clean_mark(d->store);
	/* After a crash the rest of the check runs in the background while
	 * kilnd serves (kilnd_sweep_start): start-up stays fast at any size,
	 * and an object is checked anyway before it is first served. */
	rc = store_reconcile_tmp(d->store, &st);
	d->sweep_pending = !clean;
	if (rc != 0) {
		snprintf(err, errlen, "cannot reconcile the cache in %s: %s", d->cfg->cache_dir, strerror(-rc));
		return rc;
	}
	if (st.tmp_removed + st.rows_dropped + st.objects_adopted + st.objects_removed > 0)
		log_info("reconciled the cache: %llu leftovers removed, %llu rows without object dropped, "
			 "%llu objects adopted, %llu stray objects removed",
			 (unsigned long long)st.tmp_removed, (unsigned long long)st.rows_dropped,
			 (unsigned long long)st.objects_adopted, (unsigned long long)st.objects_removed);
	upgrade_adopt_store(d);
	rc = store_footprint(d->store, &d->disk);
	d->overhead_ns = util_now_ns();
	d->entries = d->disk.entries;
	d->bytes = d->disk.bytes;
	return rc;
}

static int open_log(const struct config *cfg)
{
	char path[4200];
	const char *file = cfg->log_file;
	if (file == NULL && cfg->daemonize) {
		snprintf(path, sizeof(path), "%s/kilnd.log", cfg->cache_dir);
		file = path;
	}
	return log_open(cfg->log_level, file);
}

/* Set while the services start, with the locks held: a failure is reported
 * to a waiting --daemonize parent only once the cleanup is done (a cache
 * directory this start made is removed first), so that a start right
 * after the parent returns never meets that removal. */
static bool defer_failure;
static char deferred[1024];

static void fail_start(const struct config *cfg, const char *err)
{
	log_error("%s", err);
	/* The log goes to stderr unless a file takes it: say it there once.
	 * With --daemonize the parent waiting for us prints it. */
	if ((cfg->log_file != NULL || cfg->daemonize) && !instance_parent_waits())
		fprintf(stderr, "kilnd: %s\n", err);
	if (defer_failure)
		snprintf(deferred, sizeof(deferred), "%s", err);
	else
		instance_ready(1, 0, err);
}

/* The server reaches the op table and the header batches only through these. */
static const struct server_hooks server_hooks = {
	.frame = dispatch_frame,
	.batch = headers_requests_read,
	.closed = flight_cancel_abandoned,
};

/* The descriptor table kilnd reserves: its descriptor cache, connections
 * and builds' pipes, at most INSTANCE_NOFILE. */
static unsigned fd_room(const struct config *cfg)
{
	unsigned long n = FDCACHE_MAX + (unsigned long)cfg->max_connections + 64 + 8ul * cfg->jobs;
	return n < INSTANCE_NOFILE ? (unsigned)n : INSTANCE_NOFILE;
}

/* Says so when the descriptor limit, raised as far as the hard limit
 * allows (instance_reserve_fds), leaves the descriptor cache (cache objects
 * at most, fdcache_capacity) or the connections short. */
static void warn_low_nofile(const struct config *cfg, size_t cache)
{
	struct rlimit rl;
	rlim_t all = FDCACHE_MAX + (rlim_t)cfg->max_connections + 64, full = 4 * (rlim_t)FDCACHE_MAX;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
	    (cache >= FDCACHE_MAX && rl.rlim_cur >= all))
		return;
	log_warn("descriptor limit %llu (the hard limit): the descriptor cache keeps at most "
		 "%zu of %d objects open, beside %u connections (--max-connections); raise the "
		 "hard limit (ulimit -Hn, LimitNOFILE=) to %llu",
		 (unsigned long long)rl.rlim_cur, cache, FDCACHE_MAX, cfg->max_connections,
		 (unsigned long long)(full > all ? full : all));
}

/*
 * The process: detached (--daemonize), the socket systemd passed, the
 * directories and the log, the instance lock. 0: go on; 1: another kilnd
 * serves (exit 0); 2: another kilnd serves the cache on another socket
 * (exit 3); -1: failed, said why.
 */
static int start_process(struct kilnd *d, struct config *cfg, char *err, size_t errlen)
{
	long other = 0;

	if (cfg->daemonize && instance_daemonize() != 0)
		return -1;
	/* Before any thread (a fork's child gets a table sized by its open
	 * descriptors, so after --daemonize): room for the descriptor cache,
	 * the connections and the builds' pipes (docs/design.md, "Threads in
	 * kilnd"). Before the descriptor cache, which takes a quarter of the
	 * soft limit at most, and the soft limit is raised first. */
	instance_reserve_fds(fd_room(cfg));
	/* Socket activation: the socket systemd passed decides the path. */
	char *apath = NULL;
	d->activated_fd = sd_activation_socket(&apath, err, errlen);
	if (d->activated_fd == -2) {
		fail_start(cfg, err);
		return -1;
	}
	if (d->activated_fd >= 0) {
		d->activated = true;
		free(cfg->socket_path);
		cfg->socket_path = apath;
	}
	/* Before anything is made there: a cache on NFS, Lustre, ... is refused. */
	const char *netfs = NULL;
	if (cachefs_check(cfg->cache_dir, cfg->allow_network_cache, &netfs, err, errlen) != 0 ||
	    main_make_dirs(cfg, err, errlen) != 0 || open_log(cfg) != 0) {
		fail_start(cfg, err[0] != '\0' ? err : "cannot open the log file");
		return -1;
	}
	if (netfs != NULL)
		log_warn("the cache directory %s is on %s, a network filesystem (allowed by "
			 "--allow-network-cache): its index's locking may fail there, and hits "
			 "cross the network", cfg->cache_dir, netfs);
	int rc = instance_lock(cfg, &other, err, errlen);
	if (rc == INSTANCE_CACHE_IN_USE) {
		log_error("%s", err);
		if (!instance_parent_waits())
			fprintf(stderr, "kilnd: %s\n", err);
		instance_ready(KILND_EXIT_CACHE_IN_USE, other, err);
		return 2;
	}
	if (rc == 1) {
		/* With --daemonize the waiting parent prints it, once. */
		if (!cfg->daemonize)
			fprintf(stderr, "kilnd: %s\n", err);
		instance_ready(0, other, err);
		return 1;
	}
	if (rc != 0)
		fail_start(cfg, err);
	return rc == 0 ? 0 : -1;
}

/* The services, then the loop's: 0, or -1 after saying why (*loop: the
 * loop was made, so fini_loop must run). */
static int start_services(struct kilnd *d, char *err, size_t errlen, bool *loop)
{
	d->stop = lifecycle_stop;
	struct cache_conf cc;
	if (cache_conf_read(d->cfg->cache_dir, &cc, err, errlen) != 0)
		log_warn("%s; its settings are ignored", err);
	err[0] = '\0';
	d->max_size_source = config_apply_cache_conf(d->cfg, &cc);
	if (store_init(d, err, errlen) != 0 || cachedir_open(d, err, errlen) != 0 ||
	    toolchains_init(d, err, errlen) != 0) {
		fail_start(d->cfg, err);
		return -1;
	}
	stats_load(d);
	/* What an earlier kilnd of this boot hashed (toolchains, headers):
	 * not hashed again (digests.h). */
	long loaded = digests_load(d->cache_fd, DIGESTS_FILE);
	if (loaded > 0)
		log_info("%ld file digests kept from the last kilnd", loaded);
	else if (loaded == -ESTALE)
		log_info("file digests of another boot in %s/%s: not used", d->cfg->cache_dir,
			 DIGESTS_FILE);
	key_cpu_id(d->cpu_id);
	threadpool_size(d->cfg);
	d->loop = uv_default_loop();
	*loop = true;
	thread_set_loop();
	/* Before the socket listens: a SIGTERM once it answers (a stop right
	 * after the start) is a clean stop, not the default death. Its handler
	 * runs only when the loop does (serve). */
	signals_start(d);
	d->touches = table_new();
	d->fds = fdcache_new(FDCACHE_MAX);
	if (d->fds != NULL)
		warn_low_nofile(d->cfg, fdcache_capacity(d->fds));
	d->children = child_watch_new(d->loop);
	if (d->touches == NULL || d->fds == NULL || d->children == NULL || headers_init(d) != 0 ||
	    claims_init(d) != 0 || flight_init(d) != 0 || upstream_init(d, err, errlen) != 0 ||
	    server_init(d, &server_hooks, err, errlen) != 0) {
		fail_start(d->cfg, err[0] != '\0' ? err : "out of memory");
		return -1;
	}
	return 0;
}

/* Serves until the stop; then writes what is batched and marks the cache
 * cleanly stopped. */
static void serve(struct kilnd *d)
{
	const struct config *cfg = d->cfg;
	char status[4200];

	kilnd_timers_start(d);
	stats_timer_start(d);
	if (d->sweep_pending) {
		/* A new index has no mark either: a new cache, or one whose
		 * index was lost, whose objects it adopts. */
		if (store_index_is_new(d->store))
			log_info("a new index in %s: adopting any objects already there in the "
				 "background while serving", cfg->cache_dir);
		else
			log_info("no clean-stop mark (kilnd was killed or crashed): checking the "
				 "cache in the background while serving");
		kilnd_sweep_start(d);
	}
	lifecycle_start(d);
	prewarm_start(d);
	kilnd_activity(d);
	const char *xdg = cfg->socket_default ? util_runtime_dir_ignored() : NULL;
	if (xdg != NULL)
		log_warn("XDG_RUNTIME_DIR=%s is no directory of this user (inherited from another "
			 "session?); the socket is %s instead", xdg, d->cfg->socket_path);
	char max_size[32];
	log_info("kilnd %s ready: pid %d, socket %s, cache %s, %u jobs, max size %s (%s)",
		 upgrade_version, (int)getpid(), cfg->socket_path, cfg->cache_dir, cfg->jobs,
		 util_format_size(cfg->max_size, max_size, sizeof(max_size)), d->max_size_source);
	instance_ready(0, (long)getpid(), NULL);
	snprintf(status, sizeof(status), "serving %s", cfg->socket_path);
	sd_ready(status);
	/* Two kiln-execs waiting for a build's compile step and its load check
	 * (child.h); after the ready word, which they need not delay. */
	child_standby(d->children, cfg->exec_helper, tcenv()->vars, 2);
	uv_run(d->loop, UV_RUN_DEFAULT);
	kilnd_flush_touches(d);
	stats_flush(d);
	alias_flush_all(d);
	int drc = d->cache_fd >= 0 && d->store != NULL
		  ? digests_save(d->cache_fd, DIGESTS_FILE, store_tmp_fd(d->store)) : -EBADF;
	/* No boot id, or a cache kilnd may not write: nothing kept, said once
	 * at debug level; anything else is news. */
	if (drc == -ENOENT || drc == -EROFS || drc == -EACCES)
		log_debug("file digests not kept: %s", strerror(-drc));
	else if (drc != 0)
		log_warn("cannot keep the file digests for the next kilnd: %s", strerror(-drc));
	if (!d->sweep_pending && store_mark_clean(d->store) == -ESTALE)
		log_warn("an artifact's index row could not be written; the next start checks "
			 "the cache and adopts it");
	d->exit_code = 0;
	log_info("stopped");
}

/* The loop's parts, in reverse. */
static void fini_loop(struct kilnd *d)
{
	if (!d->stopping) {
		/* A failed start: no signal may stop what was never served. */
		uv_close((uv_handle_t *)&d->sig_term, NULL);
		uv_close((uv_handle_t *)&d->sig_int, NULL);
		uv_close((uv_handle_t *)&d->sig_hup, NULL);
		upstream_stop(d);
		headers_fini(d);
		claims_fini(d);
		uv_run(d->loop, UV_RUN_NOWAIT);
	}
	server_free(d);
	flight_fini(d);
	upstream_fini(d);
	fdcache_free(d->fds);
	/* Stopping closed it once the builds were over (lifecycle.c). */
	child_watch_close(d->children);
	d->children = NULL;
	uv_run(d->loop, UV_RUN_NOWAIT);
	verify_fini(d);
	stats_fini(d);
	table_free(d->touches, free);
	uv_loop_close(d->loop);
}

/*
 * A start that failed leaves no cache behind where there was none: what it
 * made there goes while its lock is still held (a kilnd starting meanwhile
 * waits for the lock), and the directory itself after, unless another
 * kilnd has put something in it since.
 */
static void remove_new_cache(const struct config *cfg, bool files)
{
	static const char *const made[] = { "objects", "logs", "tmp", "index.db", "index.db-wal",
					    "index.db-shm", "kilnd.boot", "kilnd.log" };
	char path[4200];
	for (size_t i = 0; files && i < sizeof(made) / sizeof(made[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", cfg->cache_dir, made[i]);
		store_rm_tree(path);
	}
	if (!files && rmdir(cfg->cache_dir) == 0)
		log_info("removed the cache directory %s this failed start had made", cfg->cache_dir);
}

/* The services and the process's parts, in reverse. */
static void fini_process(struct kilnd *d)
{
	if (d->activated && d->activated_fd >= 0)
		close(d->activated_fd);   /* it never reached the server */
	free(d->gpus);
	free(d->observe_lib);
	free(d->hello_tail);
	digests_fini();
	for (size_t i = 0; i < d->ntoolchains; i++)
		key_toolchain_fini(&d->toolchains[i]);
	named_fini(d);
	cachedir_close(d);
	store_close(d->store);
	if (d->remove_new_cache)
		remove_new_cache(d->cfg, true);
	instance_unlock();
	if (d->remove_new_cache)
		remove_new_cache(d->cfg, false);
	log_close();
}

/* Inits, run, finis in reverse. */
int main(int argc, char **argv)
{
	struct config cfg;
	struct kilnd d = { 0 };
	char err[1024] = "";
	bool loop = false;

	/* Everything kilnd creates (cache, logs, socket) is private to its user. */
	umask(077);
	/* What kilnd was started with stays with kilnd, never its compilers. */
	child_seal_inherited();
	int rc = config_parse(&cfg, argc, argv);
	if (rc != 0)
		return rc > 0 ? 0 : 2;
	d.cfg = &cfg;
	d.exit_code = 1;
	d.start_ns = util_now_ns();
	d.activated_fd = -1;
	d.cache_fd = -1;   /* nothing to close before cachedir_open */
	struct stat cache_st;
	bool cache_new = lstat(cfg.cache_dir, &cache_st) != 0 && errno == ENOENT;
	rc = start_process(&d, &cfg, err, sizeof(err));
	if (rc == 1)
		d.exit_code = 0;
	else if (rc == 2)
		d.exit_code = KILND_EXIT_CACHE_IN_USE;
	else if (rc == 0) {
		defer_failure = true;
		if (start_services(&d, err, sizeof(err), &loop) == 0)
			serve(&d);
		else
			d.remove_new_cache = cache_new;
	}
	if (loop)
		fini_loop(&d);
	fini_process(&d);
	if (deferred[0] != '\0')
		instance_ready(1, 0, deferred);
	config_fini(&cfg);
	return d.exit_code;
}
