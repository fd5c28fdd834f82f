/*
 * scale: the index-scale benchmark's two tools.
 *
 *   scale fill CACHE_DIR N [--dep PATH]... [--object-size BYTES]
 *       Fills a (new or existing, daemon stopped) cache directory with N
 *       synthetic entries, in one transaction through the store's own
 *       writer (store_insert_row, so the rows follow the store's schema):
 *       entry i has key sha256("kiln-bench-scale:i"), alias "scale:i", a
 *       label, args, sources, the given deps (real files: their size, mtime
 *       and digest are recorded, so lookups re-validate them as for a real
 *       entry), a small object file objects/ab/<key>.so (not a loadable
 *       library: the daemon hands out descriptors, it does not load them)
 *       and its .meta, written as store_publish writes them but without the
 *       fsyncs. Prints one JSON line with the time taken.
 *
 *   scale probe SOCKET N COUNT [--seed S] [--by-key]
 *       Speaks the wire protocol directly (no libkiln, so nothing is
 *       dlopen'ed): hello, then COUNT sequential lookups of random aliases
 *       "scale:i" (i < N; --by-key: by key), each timed from send to reply;
 *       the descriptor of each hit is closed at once. Prints one JSON line
 *       with the latency distribution.
 *
 *   scale pingpong [COUNT]
 *       COUNT 200-byte round trips on a Unix socket pair to a forked echo
 *       process: the machine's floor for one request to a daemon.
 */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "msg.h"
#include "store.h"
#include "store_int.h"
#include "util.h"
#include "wire.h"

#define MAX_DEPS 128

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void key_of(long i, char out[KILN_KEY_HEX + 1], const char *salt)
{
	char buf[96];
	uint8_t d[32];
	int n = snprintf(buf, sizeof(buf), "kiln-bench-scale%s:%ld", salt, i);
	util_sha256(buf, (size_t)n, d);
	util_hex(d, 32, out);
}

struct item {
	char key[KILN_KEY_HEX + 1];
	long i;
};

static int cmp_item(const void *a, const void *b)
{
	return strcmp(((const struct item *)a)->key, ((const struct item *)b)->key);
}

static int write_file(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
	if (fd < 0)
		return -errno;
	int rc = util_write_all(fd, data, len);
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	return rc;
}

/*
 * The meta of an entry, with the fields store_write.c's meta_text() writes
 * (kiln_meta version 1; reconcile reads them back to adopt an object). The
 * deps are the same for every synthetic entry, so their JSON is built once
 * (deps_json) and the rest is formatted directly: cJSON per entry made the
 * files the slowest part of a 1M fill.
 */
static char *deps_json_text(const struct store_dep *deps, size_t ndeps)
{
	cJSON *a = cJSON_CreateArray();
	for (size_t i = 0; i < ndeps; i++) {
		cJSON *d = cJSON_CreateObject();
		char hex[65], num[24];
		util_hex(deps[i].digest, 32, hex);
		snprintf(num, sizeof(num), "%lld", (long long)deps[i].mtime_ns);
		cJSON_AddStringToObject(d, "path", deps[i].path);
		cJSON_AddNumberToObject(d, "size", (double)deps[i].size);
		cJSON_AddStringToObject(d, "mtime_ns", num);
		cJSON_AddStringToObject(d, "sha256", hex);
		cJSON_AddItemToArray(a, d);
	}
	char *t = cJSON_PrintUnformatted(a);
	cJSON_Delete(a);
	return t;
}

static char *meta_text(const struct store_entry *e, const char *deps_json)
{
	char *t = NULL;
	/* alias and label are plain ASCII here ("scale:N", "scale N"). */
	if (asprintf(&t, "{\"kiln_meta\":1,\"key\":\"%s\",\"rkey\":\"%s\",\"label\":\"%s\","
		     "\"alias\":\"%s\",\"toolchain\":\"%s\",\"output\":\"%s\",\"size\":%llu,"
		     "\"created\":%lld,\"last_used\":%lld,\"uses\":%llu,\"build_ms\":%llu,"
		     "\"pinned\":%s,\"args\":%s,\"sources\":%s,\"deps\":%s}\n",
		     e->key, e->rkey, e->label, e->alias, e->toolchain, e->output,
		     (unsigned long long)e->size, (long long)e->created, (long long)e->last_used,
		     (unsigned long long)e->uses, (unsigned long long)e->build_ms,
		     e->pinned ? "true" : "false", e->args_json, e->sources_json, deps_json) < 0)
		return NULL;
	return t;
}

struct fill_ctx {
	const char *dir;
	const struct item *items;
	long n;
	const char *salt;
	struct store_dep *deps;
	size_t ndeps;
	const char *obj;
	size_t objsize;
	int64_t now;
	char *deps_json;
	int rc;          /* of the files thread */
	double seconds;  /* the files thread's time */
};

/* Entry k (in key order) with its strings in fe. */
struct fill_entry {
	struct store_entry e;
	char alias[64], label[64];
};

static void entry_of(const struct fill_ctx *fc, long k, struct fill_entry *fe)
{
	long i = fc->items[k].i;
	char rkey_in[64];
	uint8_t d[32];
	struct store_entry *e = &fe->e;
	memset(fe, 0, sizeof(*fe));
	memcpy(e->key, fc->items[k].key, sizeof(e->key));
	int m = snprintf(rkey_in, sizeof(rkey_in), "rkey%s:%ld", fc->salt, i);
	util_sha256(rkey_in, (size_t)m, d);
	util_hex(d, 32, e->rkey);
	snprintf(fe->alias, sizeof(fe->alias), "scale%s:%ld", fc->salt, i);
	snprintf(fe->label, sizeof(fe->label), "scale %ld", i);
	e->alias = fe->alias;
	e->label = fe->label;
	e->toolchain = "c++";
	e->output = "shared";
	e->size = fc->objsize;
	e->created = fc->now - 86400 + (i % 86400);
	e->last_used = e->created;
	e->uses = 1;
	e->build_ms = 500 + (uint64_t)(i % 1000);
	e->args_json = "[\"-O2\"]";
	e->sources_json = "[\"program.cpp\"]";
	e->deps = fc->deps;
	e->ndeps = fc->ndeps;
}

/* The object and meta files of every entry (a thread of its own, in
 * parallel with the rows). */
static void *fill_files(void *arg)
{
	struct fill_ctx *fc = arg;
	char path[4096];
	double t0 = now_s();
	for (long k = 0; fc->rc == 0 && k < fc->n; k++) {
		struct fill_entry fe;
		entry_of(fc, k, &fe);
		snprintf(path, sizeof(path), "%s/objects/%.2s/%s.so", fc->dir, fe.e.key, fe.e.key);
		fc->rc = write_file(path, fc->obj, fc->objsize);
		char *meta = fc->rc == 0 ? meta_text(&fe.e, fc->deps_json) : NULL;
		if (meta != NULL) {
			snprintf(path, sizeof(path), "%s/objects/%.2s/%s.meta", fc->dir, fe.e.key, fe.e.key);
			fc->rc = write_file(path, meta, strlen(meta));
			free(meta);
		} else if (fc->rc == 0) {
			fc->rc = -ENOMEM;
		}
	}
	fc->seconds = now_s() - t0;
	return NULL;
}

static int fill(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: scale fill CACHE_DIR N [--dep PATH]... [--object-size B]\n");
		return 2;
	}
	const char *dir = argv[2];
	long n = atol(argv[3]);
	struct store_dep deps[MAX_DEPS];
	size_t ndeps = 0, objsize = 64;
	const char *salt = "";
	for (int i = 4; i < argc; i++) {
		if (strcmp(argv[i], "--dep") == 0 && i + 1 < argc && ndeps < MAX_DEPS) {
			struct stat sb;
			const char *p = argv[++i];
			if (stat(p, &sb) != 0 || util_sha256_file(p, deps[ndeps].digest) != 0) {
				fprintf(stderr, "scale: cannot read %s\n", p);
				return 1;
			}
			deps[ndeps].path = (char *)p;
			deps[ndeps].size = (uint64_t)sb.st_size;
			deps[ndeps].mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
			ndeps++;
		} else if (strcmp(argv[i], "--object-size") == 0 && i + 1 < argc) {
			objsize = (size_t)atol(argv[++i]);
		} else if (strcmp(argv[i], "--salt") == 0 && i + 1 < argc) {
			salt = argv[++i];
		} else {
			fprintf(stderr, "scale: unknown argument %s\n", argv[i]);
			return 2;
		}
	}
	double t0 = now_s();
	struct store *s;
	char err[512];
	int rc = store_open(dir, 0, &s, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "scale: %s\n", err);
		return 1;
	}
	/* Sorted by key: the B-tree of the primary key grows at its end. */
	struct item *items = malloc((size_t)n * sizeof(*items));
	for (long i = 0; i < n; i++) {
		key_of(i, items[i].key, salt);
		items[i].i = i;
	}
	qsort(items, (size_t)n, sizeof(*items), cmp_item);
	char *obj = malloc(objsize + 1);
	memset(obj, 0, objsize + 1);
	memcpy(obj, "kiln-bench synthetic object\n", objsize < 28 ? objsize : 28);
	char path[4096];
	for (int b = 0; b < 256; b++) {
		snprintf(path, sizeof(path), "%s/objects/%02x", dir, b);
		if (mkdir(path, 0700) != 0 && errno != EEXIST) {
			fprintf(stderr, "scale: mkdir %s: %s\n", path, strerror(errno));
			return 1;
		}
	}
	struct fill_ctx fc = { .dir = dir, .items = items, .n = n, .salt = salt, .deps = deps,
			       .ndeps = ndeps, .obj = obj, .objsize = objsize,
			       .now = (int64_t)time(NULL), .deps_json = deps_json_text(deps, ndeps) };
	pthread_t files_thread;
	int files_started = pthread_create(&files_thread, NULL, fill_files, &fc) == 0;
	if (!files_started)
		fill_files(&fc);
	pthread_mutex_lock(&s->wlock);
	store_exec(s->wr, "PRAGMA cache_size = -1048576");
	rc = store_exec(s->wr, "BEGIN IMMEDIATE");
	double t_rows = now_s();
	const char *how = "prepared statements";
	if (rc == 0) {
		/* Own prepared statements when the schema still has these columns
		 * (fast); else the store's own writer, one row at a time. */
		sqlite3_stmt *ins = NULL, *ali = NULL;
		int prc = sqlite3_prepare_v2(s->wr, "INSERT INTO entries (key, rkey, label,"
			" toolchain, output, size, created, last_used, uses, build_ms, pinned, args,"
			" sources, deps) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12,"
			" ?13, ?14)", -1, &ins, NULL);
		if (prc == SQLITE_OK)
			prc = sqlite3_prepare_v2(s->wr, "INSERT INTO aliases (alias, key) VALUES (?1, ?2)",
						 -1, &ali, NULL);
		uint8_t *blob = NULL;
		size_t blen = 0;
		if (prc == SQLITE_OK && store_deps_encode(deps, ndeps, STORE_DEPS_OBSERVED, &blob, &blen) != 0)
			prc = SQLITE_NOMEM;
		for (long k = 0; prc == SQLITE_OK && rc == 0 && k < n; k++) {
			struct fill_entry fe;
			entry_of(&fc, k, &fe);
			struct store_entry *e = &fe.e;
			sqlite3_bind_text(ins, 1, e->key, -1, SQLITE_STATIC);
			sqlite3_bind_text(ins, 2, e->rkey, -1, SQLITE_STATIC);
			sqlite3_bind_text(ins, 3, e->label, -1, SQLITE_STATIC);
			sqlite3_bind_text(ins, 4, e->toolchain, -1, SQLITE_STATIC);
			sqlite3_bind_text(ins, 5, e->output, -1, SQLITE_STATIC);
			sqlite3_bind_int64(ins, 6, (sqlite3_int64)e->size);
			sqlite3_bind_int64(ins, 7, e->created);
			sqlite3_bind_int64(ins, 8, e->last_used);
			sqlite3_bind_int64(ins, 9, (sqlite3_int64)e->uses);
			sqlite3_bind_int64(ins, 10, (sqlite3_int64)e->build_ms);
			sqlite3_bind_int(ins, 11, e->pinned);
			sqlite3_bind_text(ins, 12, e->args_json, -1, SQLITE_STATIC);
			sqlite3_bind_text(ins, 13, e->sources_json, -1, SQLITE_STATIC);
			if (blob)
				sqlite3_bind_blob(ins, 14, blob, (int)blen, SQLITE_STATIC);
			else
				sqlite3_bind_null(ins, 14);
			int r1 = sqlite3_step(ins);
			sqlite3_reset(ins);
			sqlite3_bind_text(ali, 1, e->alias, -1, SQLITE_STATIC);
			sqlite3_bind_text(ali, 2, e->key, -1, SQLITE_STATIC);
			int r2 = sqlite3_step(ali);
			sqlite3_reset(ali);
			if (r1 != SQLITE_DONE || r2 != SQLITE_DONE) {
				fprintf(stderr, "scale: insert: %s\n", sqlite3_errmsg(s->wr));
				rc = -EIO;
			}
		}
		free(blob);
		sqlite3_finalize(ins);
		sqlite3_finalize(ali);
		if (prc != SQLITE_OK) {
			how = "store_insert_row";
			for (long k = 0; rc == 0 && k < n; k++) {
				struct fill_entry fe;
				entry_of(&fc, k, &fe);
				rc = store_insert_row(s, &fe.e, true);
			}
		}
	}
	t_rows = now_s() - t_rows;
	if (files_started)
		pthread_join(files_thread, NULL);
	if (rc == 0 && fc.rc != 0)
		rc = fc.rc;
	double t_commit = now_s();
	rc = store_txn_end(s, rc);
	t_commit = now_s() - t_commit;
	pthread_mutex_unlock(&s->wlock);
	store_close(s);
	free(items);
	free(obj);
	free(fc.deps_json);
	if (rc != 0) {
		fprintf(stderr, "scale: filling %s failed: %s\n", dir, strerror(-rc));
		return 1;
	}
	printf("{\"entries\":%ld,\"seconds\":%.3f,\"rows_s\":%.3f,\"files_s\":%.3f,"
	       "\"commit_s\":%.3f,\"rows_by\":\"%s\"}\n", n, now_s() - t0, t_rows, fc.seconds,
	       t_commit, how);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int request(struct wire_conn *c, const char *req, int *ok)
{
	char *reply = NULL;
	size_t len;
	int rc = wire_send_frame(c, req, strlen(req));
	if (rc == 0)
		rc = wire_recv_frame(c, &reply, &len);
	if (rc != 0)
		return rc;
	cJSON *r = cJSON_ParseWithLength(reply, len);
	*ok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok"));
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "fd"))) {
		int fd = wire_take_fd(c);
		if (fd >= 0)
			close(fd);
	}
	cJSON_Delete(r);
	free(reply);
	return 0;
}

static int probe(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: scale probe SOCKET N COUNT [--seed S] [--by-key]\n");
		return 2;
	}
	const char *sock = argv[2];
	long n = atol(argv[3]), count = atol(argv[4]);
	unsigned long seed = 1;
	int by_key = 0;
	const char *salt = "";
	for (int i = 5; i < argc; i++) {
		if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
			seed = strtoul(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--by-key") == 0)
			by_key = 1;
		else if (strcmp(argv[i], "--salt") == 0 && i + 1 < argc)
			salt = argv[++i];
	}
	int fd = wire_connect(sock);
	if (fd < 0) {
		fprintf(stderr, "scale: cannot connect to %s: %s\n", sock, strerror(-fd));
		return 1;
	}
	struct wire_conn c;
	wire_conn_init(&c, fd, FRAME_MAX_DEFAULT);
	char req[256];
	int ok = 0;
	snprintf(req, sizeof(req), "{\"op\":\"hello\",\"id\":1,\"proto\":%d,\"client\":\"kiln-bench-scale\"}",
		 KILN_PROTO_VERSION);
	double t_hello = now_s();
	if (request(&c, req, &ok) != 0 || !ok) {
		fprintf(stderr, "scale: hello failed\n");
		return 1;
	}
	t_hello = now_s() - t_hello;
	double *lat = malloc((size_t)count * sizeof(*lat));
	long bad = 0;
	uint64_t x = 0x2545F4914F6CDD1DULL ^ seed;
	double t0 = now_s();
	for (long k = 0; k < count; k++) {
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		long i = (long)((x * 2685821657736338717ULL) % (uint64_t)n);
		if (by_key) {
			char key[KILN_KEY_HEX + 1];
			key_of(i, key, salt);
			snprintf(req, sizeof(req), "{\"op\":\"lookup\",\"id\":%ld,\"key\":\"%s\"}", k + 2, key);
		} else {
			snprintf(req, sizeof(req), "{\"op\":\"lookup\",\"id\":%ld,\"alias\":\"scale%s:%ld\"}",
				 k + 2, salt, i);
		}
		double a = now_s();
		int rc = request(&c, req, &ok);
		lat[k] = now_s() - a;
		if (rc != 0) {
			fprintf(stderr, "scale: connection failed: %s\n", strerror(-rc));
			return 1;
		}
		if (!ok && bad++ < 3)
			fprintf(stderr, "scale: lookup of entry %ld failed\n", i);
	}
	double wall = now_s() - t0;
	wire_conn_fini(&c);
	qsort(lat, (size_t)count, sizeof(*lat), cmp_double);
	double sum = 0;
	for (long k = 0; k < count; k++)
		sum += lat[k];
	printf("{\"count\":%ld,\"errors\":%ld,\"hello_us\":%.1f,\"wall_s\":%.6f,\"mean_us\":%.2f,"
	       "\"p50_us\":%.2f,\"p90_us\":%.2f,\"p99_us\":%.2f,\"max_us\":%.2f,\"min_us\":%.2f}\n",
	       count, bad, t_hello * 1e6, wall, sum / (double)count * 1e6,
	       lat[count / 2] * 1e6, lat[(size_t)((double)count * 0.90)] * 1e6,
	       lat[(size_t)((double)count * 0.99)] * 1e6, lat[count - 1] * 1e6, lat[0] * 1e6);
	free(lat);
	return bad ? 1 : 0;
}

/* One 200-byte round trip on a Unix socket pair to a forked echo process,
 * COUNT times: the machine's floor for any request to a daemon. */
static int pingpong(int argc, char **argv)
{
	long count = argc > 2 ? atol(argv[2]) : 20000;
	int sv[2];
	char buf[200] = { 0 };
	if (count < 1 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		return 1;
	pid_t pid = fork();
	if (pid == 0) {
		close(sv[0]);
		for (;;) {
			ssize_t r = read(sv[1], buf, sizeof(buf));
			if (r <= 0 || write(sv[1], buf, (size_t)r) != r)
				_exit(0);
		}
	}
	close(sv[1]);
	double *lat = malloc((size_t)count * sizeof(*lat));
	for (long k = 0; k < count; k++) {
		double a = now_s();
		if (write(sv[0], buf, sizeof(buf)) != sizeof(buf))
			return 1;
		size_t got = 0;
		while (got < sizeof(buf)) {
			ssize_t r = read(sv[0], buf + got, sizeof(buf) - got);
			if (r <= 0)
				return 1;
			got += (size_t)r;
		}
		lat[k] = now_s() - a;
	}
	close(sv[0]);
	waitpid(pid, NULL, 0);
	qsort(lat, (size_t)count, sizeof(*lat), cmp_double);
	printf("{\"count\":%ld,\"p50_us\":%.2f,\"p99_us\":%.2f,\"min_us\":%.2f}\n", count,
	       lat[count / 2] * 1e6, lat[(size_t)((double)count * 0.99)] * 1e6, lat[0] * 1e6);
	free(lat);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "pingpong") == 0)
		return pingpong(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "fill") == 0)
		return fill(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "probe") == 0)
		return probe(argc, argv);
	fprintf(stderr, "usage: scale fill CACHE_DIR N [--dep PATH]... | scale probe SOCKET N COUNT\n");
	return 2;
}
