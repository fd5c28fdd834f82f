/*
 * The fake kilnd of libkiln's unit tests; see fake_kilnd.h.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "kiln/kiln.h"
#include "frame.h"
#include "msg.h"
#include "util.h"
#include "wire.h"
#include "unit.h"

#include "fake_kilnd.h"

extern char **environ;

struct fake *F;

/* Sends one frame, with fd (when >= 0) attached to its first byte. */
static void fake_send(int cfd, cJSON *obj, int fd)
{
	char *payload = cJSON_PrintUnformatted(obj);
	size_t len, off = 0;
	char *frame;
	long n;

	ck_assert_ptr_nonnull(payload);
	frame = frame_encode(payload, strlen(payload), &len);
	ck_assert_ptr_nonnull(frame);
	while (off < len) {
		n = wire_sendmsg(cfd, frame + off, len - off, off == 0 ? fd : -1);
		if (n < 0)
			break;   /* the client went away; the test will tell */
		off += (size_t)n;
	}
	free(frame);
	free(payload);
}

static struct fake_entry *fake_find(struct fake *f, const char *match)
{
	size_t i;

	for (i = 0; match && i < f->nentries; i++)
		if (strcmp(f->entries[i].match, match) == 0)
			return &f->entries[i];
	return NULL;
}

static void fake_reply_error(int cfd, uint64_t id, const char *code, const char *message,
			     const char *log)
{
	cJSON *r = cJSON_CreateObject();
	cJSON *e = cJSON_AddObjectToObject(r, "error");

	cJSON_AddNumberToObject(r, "id", (double)id);
	cJSON_AddBoolToObject(r, "ok", 0);
	cJSON_AddStringToObject(e, "code", code);
	cJSON_AddStringToObject(e, "message", message);
	if (log)
		cJSON_AddStringToObject(e, "log", log);
	fake_send(cfd, r, -1);
	cJSON_Delete(r);
}

static void fake_reply_entry(int cfd, uint64_t id, const char *what, struct fake_entry *e)
{
	char msg[256];
	cJSON *r;
	int fd;

	if (!e) {
		snprintf(msg, sizeof(msg), "no entry for %s", what);
		fake_reply_error(cfd, id, "not_found", msg, NULL);
		return;
	}
	if (e->error_code) {
		fake_reply_error(cfd, id, e->error_code, "the fake says no", e->error_log);
		return;
	}
	fd = open(e->fd_path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	r = cJSON_CreateObject();
	cJSON_AddNumberToObject(r, "id", (double)id);
	cJSON_AddBoolToObject(r, "ok", 1);
	cJSON_AddBoolToObject(r, "fd", 1);
	cJSON_AddStringToObject(r, "key", e->key);
	cJSON_AddStringToObject(r, "path", e->path);
	cJSON_AddStringToObject(r, "output", "shared");
	cJSON_AddBoolToObject(r, "cached", 1);
	if (e->say_file) {
		struct stat st;
		ck_assert_int_eq(e->say_file == FAKE_FILE_FD ? fstat(fd, &st) : stat(e->path, &st), 0);
		cJSON_AddNumberToObject(r, "dev", (double)st.st_dev);
		cJSON_AddNumberToObject(r, "ino", (double)st.st_ino);
	}
	fake_send(cfd, r, fd);
	close(fd);
	cJSON_Delete(r);
}

/* Serves one connection until the client closes it or the script drops it. */
static void fake_serve(struct fake *f, int cfd)
{
	struct fake_deferred deferred[FAKE_MAX_DEFER];
	struct wire_conn wc;
	struct msg_request req;
	struct msg_error err;
	struct fake_entry *e;
	const char *match;
	int ndeferred = 0;
	size_t len;
	char *buf;
	cJSON *r;

	wire_conn_init(&wc, cfd, FRAME_MAX_DEFAULT);
	while (wire_recv_frame(&wc, &buf, &len) == 0) {
		atomic_fetch_add(&f->frames, 1);
		if (msg_request_parse(buf, len, &req, &err) < 0) {
			atomic_fetch_add(&f->bad, 1);
			free(buf);
			r = msg_error_reply(req.id, &err);
			fake_send(cfd, r, -1);
			cJSON_Delete(r);
			continue;
		}
		free(buf);
		if (req.op == OP_HELLO && req.proto != f->hello_proto) {
			r = cJSON_Parse("{\"ok\":false,\"error\":{\"code\":\"proto_mismatch\","
					"\"message\":\"protocol version mismatch\"}}");
			cJSON_AddNumberToObject(r, "id", (double)req.id);
			cJSON_AddNumberToObject(cJSON_GetObjectItem(r, "error"), "proto",
						f->hello_proto);
			fake_send(cfd, r, -1);
			cJSON_Delete(r);
		} else if (req.op == OP_HELLO) {
			r = cJSON_CreateObject();
			cJSON_AddNumberToObject(r, "id", (double)req.id);
			cJSON_AddBoolToObject(r, "ok", 1);
			cJSON_AddNumberToObject(r, "proto", KILN_PROTO_VERSION);
			fake_send(cfd, r, -1);
			cJSON_Delete(r);
		} else if (req.op == OP_GET || req.op == OP_LOOKUP) {
			if (req.op == OP_GET) {
				snprintf(f->last_toolchain, sizeof(f->last_toolchain), "%s",
					 req.toolchain ? req.toolchain : "(null)");
				snprintf(f->last_output, sizeof(f->last_output), "%s",
					 req.output ? req.output : "(null)");
			}
			if (req.op == OP_GET && atomic_exchange(&f->drop_on_get, 0)) {
				msg_request_free(&req);
				atomic_fetch_add(&f->closed, 1);
				break;
			}
			if (req.op == OP_GET && atomic_load(&f->ask_text) && req.sources[0].has_digest) {
				memcpy(f->digest, req.sources[0].digest, 32);
				atomic_fetch_add(&f->asked, 1);
				fake_reply_error(cfd, req.id, "need_sources", "send the text", NULL);
				msg_request_free(&req);
				continue;
			}
			if (req.op == OP_GET && atomic_load(&f->ask_text) && req.sources[0].text) {
				uint8_t d[32];

				util_sha256(req.sources[0].text, req.sources[0].len, d);
				if (memcmp(d, f->digest, 32) == 0)
					atomic_fetch_add(&f->texts, 1);
			}
			match = req.alias ? req.alias : req.op == OP_GET ? req.sources[0].name : NULL;
			e = fake_find(f, match);
			if (req.op == OP_GET && f->defer > 0) {
				deferred[ndeferred].id = req.id;
				deferred[ndeferred].e = e;
				if (++ndeferred == f->defer) {
					/* Answer in reverse order of arrival. */
					while (ndeferred > 0) {
						ndeferred--;
						fake_reply_entry(cfd, deferred[ndeferred].id, "alias",
								 deferred[ndeferred].e);
					}
				}
			} else {
				fake_reply_entry(cfd, req.id, match ? match : "key", e);
			}
		} else {
			fake_reply_error(cfd, req.id, "unknown_op", "the fake knows no such op", NULL);
		}
		if (req.op != OP_HELLO && atomic_exchange(&f->close_after_first, 0)) {
			msg_request_free(&req);
			atomic_fetch_add(&f->closed, 1);
			break;
		}
		msg_request_free(&req);
	}
	wire_conn_fini(&wc);
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	int cfd;

	for (;;) {
		cfd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (cfd < 0) {
			if (errno == EINTR)
				continue;
			break;   /* shut down by fake_stop */
		}
		atomic_fetch_add(&f->conns, 1);
		fake_serve(f, cfd);
	}
	return NULL;
}

static void fake_listen(struct fake *f)
{
	struct sockaddr_un sa;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	ck_assert_uint_lt(strlen(f->sock), sizeof(sa.sun_path));
	strcpy(sa.sun_path, f->sock);
	f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(f->lfd, 0);
	ck_assert_int_eq(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(f->lfd, 64), 0);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

void fake_setup(void)
{
	F = calloc(1, sizeof(*F));
	ck_assert_ptr_nonnull(F);
	snprintf(F->dir, sizeof(F->dir), "/tmp/kiln-test-client-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(F->dir));
	snprintf(F->sock, sizeof(F->sock), "%s/kilnd.sock", F->dir);
	F->hello_proto = KILN_PROTO_VERSION;
	F->lfd = -1;
	unsetenv("KILN_AUTOSPAWN");
	unsetenv("KILN_KILND");
}

/* Starts the fake; tests first script it through F. */
void fake_start(void)
{
	fake_listen(F);
	ck_assert_int_eq(pthread_create(&F->thread, NULL, fake_main, F), 0);
}

void fake_teardown(void)
{
	if (F->lfd >= 0) {
		shutdown(F->lfd, SHUT_RDWR);
		pthread_join(F->thread, NULL);
		close(F->lfd);
	}
	nftw(F->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(F);
	F = NULL;
}

/* Runs argv (no shell) and returns its exit status. */
static int run(const char *const *argv)
{
	pid_t pid;
	int status;

	ck_assert_int_eq(posix_spawnp(&pid, argv[0], NULL, NULL, (char *const *)argv, environ), 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Compiles a shared object whose value() returns value into F->dir/name. */
void build_so(const char *name, int value)
{
	char src[PATH_MAX], out[PATH_MAX];
	const char *argv[] = { "cc", "-shared", "-fPIC", "-o", out, src, NULL };
	FILE *fp;

	snprintf(src, sizeof(src), "%s/%s.c", F->dir, name);
	snprintf(out, sizeof(out), "%s/%s", F->dir, name);
	fp = fopen(src, "w");
	ck_assert_ptr_nonnull(fp);
	fprintf(fp, "int value(void) { return %d; }\n", value);
	fclose(fp);
	ck_assert_int_eq(run(argv), 0);
}

/* Adds an entry that hands out F->dir/so_name under the name match. */
struct fake_entry *add_entry(const char *match, const char *so_name, unsigned key)
{
	struct fake_entry *e;
	char path[PATH_MAX];

	ck_assert_uint_lt(F->nentries, FAKE_MAX_ENTRIES);
	e = &F->entries[F->nentries++];
	snprintf(e->match, sizeof(e->match), "%s", match);
	snprintf(e->key, sizeof(e->key), "%064x", key);
	if (so_name) {
		snprintf(path, sizeof(path), "%s/%s", F->dir, so_name);
		memcpy(e->path, path, sizeof(path));
		memcpy(e->fd_path, path, sizeof(path));
	}
	return e;
}

struct kiln *open_fake(void)
{
	struct kiln *k = NULL;

	ck_assert_msg(kiln_open(F->sock, &k) == KILN_OK, "kiln_open: %s", kiln_errmsg(NULL));
	ck_assert_ptr_nonnull(k);
	return k;
}

int call_value(const struct kiln_program *p)
{
	int (*fn)(void);
	void *sym = kiln_sym(p, "value");

	ck_assert_ptr_nonnull(sym);
	*(void **)&fn = sym;
	return fn();
}

/* A one-source request with alias (may be NULL). */
struct kiln_request one_source(struct kiln_source *src, const char *alias)
{
	struct kiln_request req;

	memset(&req, 0, sizeof(req));
	memset(src, 0, sizeof(*src));
	src->name = "prog.c";
	src->text = "int value(void) { return 0; }\n";
	req.sources = src;
	req.nsources = 1;
	req.alias = alias;
	return req;
}

/*
 * Counts this process's descriptors open on shared objects in F->dir. The
 * fake closes its copy just after sending, so the count is polled for a
 * while until it reaches want.
 */
int so_fds(int want)
{
	struct timespec ms = { 0, 1000 * 1000 };
	char target[PATH_MAX];
	struct dirent *de;
	int n = -1, tries;
	ssize_t len;
	DIR *d;

	for (tries = 0; tries < 1000 && n != want; tries++) {
		if (tries)
			nanosleep(&ms, NULL);
		n = 0;
		d = opendir("/proc/self/fd");
		ck_assert_ptr_nonnull(d);
		while ((de = readdir(d))) {
			len = readlinkat(dirfd(d), de->d_name, target, sizeof(target) - 1);
			if (len <= 0)
				continue;
			target[len] = '\0';
			if (strncmp(target, F->dir, strlen(F->dir)) == 0 && len > 3 &&
			    strcmp(target + len - 3, ".so") == 0)
				n++;
		}
		closedir(d);
	}
	return n;
}

