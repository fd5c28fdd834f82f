/*
 * The CLI's connection to kilnd: blocking frame I/O from proto/wire.h, one
 * request at a time, hello first, and every failure turned into a sentence
 * that names the socket.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <spawn.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jobsize.h"
#include "cli.h"

extern char **environ;
#include "util.h"

void cli_not_running(const struct cli *cli)
{
	char msg[9000];
	struct stat st;
	if (stat(cli->socket, &st) == 0 && S_ISDIR(st.st_mode)) {
		/* KILN_SOCKET=/run/kiln/alice instead of .../kilnd.sock */
		cli_error_code("not_running");
		cli_error("%s is a directory, not kilnd's socket; name the socket file itself%s, "
			  "e.g. %s/kilnd.sock", cli->socket, cli->socket_given ? "" : " in KILN_SOCKET",
			  cli->socket);
		return;
	}
	int n = snprintf(msg, sizeof(msg), "kilnd is not running at %s (KILN_AUTOSPAWN=1 starts "
			 "one); start it with: kilnd --daemonize", cli->socket);
	/* Only options the user chose are repeated; the defaults are kilnd's too. */
	if (cli->socket_given && n > 0 && (size_t)n < sizeof(msg))
		n += snprintf(msg + n, sizeof(msg) - (size_t)n, " --socket %s", cli->socket);
	if (cli->cache_dir_given && n > 0 && (size_t)n < sizeof(msg))
		snprintf(msg + n, sizeof(msg) - (size_t)n, " --cache-dir %s", cli->cache_dir);
	const char *xdg = util_runtime_dir_ignored();
	n = (int)strlen(msg);
	if (xdg != NULL && !cli->socket_given && (size_t)n < sizeof(msg))
		snprintf(msg + n, sizeof(msg) - (size_t)n, " (XDG_RUNTIME_DIR=%s is no directory of "
			 "this user, so the default socket is in /tmp)", xdg);
	cli_error_code("not_running");
	cli_error("%s", msg);
}

static void report_io(const struct cli *cli, int rc)
{
	switch (rc) {
	case -ECONNRESET:
	case -EPIPE:
		cli_error("kilnd at %s closed the connection", cli->socket);
		break;
	case -EMSGSIZE:
	case -EBADMSG:
	case -EPROTO:
		cli_error("bad reply from kilnd at %s: %s", cli->socket, strerror(-rc));
		break;
	default:
		cli_error("cannot talk to kilnd at %s: %s", cli->socket, strerror(-rc));
		break;
	}
}

int cli_call(const struct cli *cli, struct cli_conn *c, struct msg_request *req,
	     cJSON **reply)
{
	char *payload = NULL;
	char *buf = NULL;
	cJSON *obj = NULL;
	size_t len;
	int rc, send_rc;

	*reply = NULL;
	req->id = c->next_id++;
	payload = msg_request_pack(req, &len);
	if (!payload) {
		cli_error("out of memory");
		rc = -ENOMEM;
		goto cleanup;
	}
	/* A daemon that closes on us may have said why first (denied, busy):
	 * read that before reporting the broken pipe. */
	send_rc = wire_send_frame(&c->wc, payload, len);
	if (send_rc < 0 && send_rc != -EPIPE && send_rc != -ECONNRESET) {
		rc = send_rc;
		report_io(cli, rc);
		goto cleanup;
	}
	/* Requests go one at a time, so the next reply should be ours; anything
	 * else is skipped rather than trusted. A framing error reply has id 0. */
	for (;;) {
		size_t blen;
		double id;

		rc = wire_recv_frame(&c->wc, &buf, &blen);
		if (rc < 0) {
			rc = send_rc < 0 ? send_rc : rc;
			report_io(cli, rc);
			goto cleanup;
		}
		obj = cJSON_ParseWithLength(buf, blen);
		free(buf);
		buf = NULL;
		if (!cJSON_IsObject(obj)) {
			cli_error("bad reply from kilnd at %s: not a JSON object", cli->socket);
			rc = -EPROTO;
			goto cleanup;
		}
		/* Every descriptor is claimed by the reply that names it, to keep
		 * the queue in step; the CLI has no use for artifacts' descriptors. */
		if (cli_json_true(obj, "fd")) {
			int fd = wire_take_fd(&c->wc);

			if (fd >= 0)
				close(fd);
		}
		id = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(obj, "id"));
		if (id == (double)req->id || (id == 0 && !cli_json_true(obj, "ok")))
			break;
		cJSON_Delete(obj);
		obj = NULL;
	}
	*reply = obj;
	obj = NULL;
	rc = 0;

cleanup:
	cJSON_Delete(obj);
	free(payload);
	return rc;
}

void cli_request_init(struct msg_request *req, enum msg_op op)
{
	memset(req, 0, sizeof(*req));
	req->op = op;
	req->proto = -1;
	req->max_size = -1;
}

void cli_ref_error(enum msg_err code, const char *ref)
{
	cli_error_code(code == ERR_AMBIGUOUS ? "ambiguous" : "not_found");
	size_t n = strlen(ref);
	if (code == ERR_AMBIGUOUS)
		cli_error("\"%s\" matches several entries; give more digits", ref);
	else if (n > 0 && n < 4 && strspn(ref, "0123456789abcdefABCDEF") == n)
		cli_error("no entry matches \"%s\" (a key prefix needs at least 4 hex digits)", ref);
	else if (strstr(ref, CLI_ALIAS_CUT) != NULL)
		cli_error("no entry matches \"%s\"; an alias that kiln ls shortened is no REF: "
			  "give the entry's KEY, or the whole alias (kiln ls --wide)", ref);
	else
		cli_error("no entry matches \"%s\"", ref);
}

enum msg_err cli_reply_check(const cJSON *reply, const char *ref)
{
	const cJSON *err = cJSON_GetObjectItemCaseSensitive(reply, "error");
	const char *code = cli_json_str(err, "code");
	const char *message = cli_json_str(err, "message");
	enum msg_err e;

	if (cli_json_true(reply, "ok"))
		return ERR_NONE;
	/* Unknown codes count as internal errors, as the protocol asks. */
	e = code ? msg_err_parse(code) : ERR_INTERNAL;
	if (ref && (e == ERR_NOT_FOUND || (e == ERR_AMBIGUOUS && !(message && *message)))) {
		cli_ref_error(e, ref);
		return e;
	}
	cli_error_code(code ? code : "internal");
	cli_error_log(cli_json_str(err, "log"));
	if (message && *message)
		cli_error("%s", message);
	else
		cli_error("kilnd refused the request (%s)", code ? code : "no error code");
	return e;
}

/* Says when the daemon works on another cache than --cache-dir names: the
 * option only matters offline, and a user who gave it may think otherwise. */
static void check_cache_dir(const struct cli *cli, const cJSON *hello)
{
	const char *theirs = cli_json_str(hello, "cache_dir");
	char a[PATH_MAX], b[PATH_MAX];

	if (!cli->cache_dir_given || !theirs)
		return;
	if (realpath(cli->cache_dir, a) && realpath(theirs, b) && !strcmp(a, b))
		return;
	cli_error("note: kilnd at %s uses the cache %s; --cache-dir %s is only read when "
		  "kilnd is not running", cli->socket, theirs, cli->cache_dir);
}

static int say_hello(const struct cli *cli, struct cli_conn *c)
{
	struct msg_request req;
	char client[] = "kiln/" KILN_VERSION_STR;
	cJSON *reply = NULL;
	const cJSON *err;
	int64_t proto;
	int rc;

	cli_request_init(&req, OP_HELLO);
	req.proto = KILN_PROTO_VERSION;
	req.client = client;
	req.job_nodes = jobsize_here();   /* paces kilnd's upstream polling */
	rc = cli_call(cli, c, &req, &reply);
	if (rc < 0)
		goto cleanup;
	err = cJSON_GetObjectItemCaseSensitive(reply, "error");
	if (!cli_json_true(reply, "ok") && cli_json_i64(err, "proto", &proto)) {
		cli_error("kilnd at %s speaks protocol %lld, this kiln speaks %d; use a kiln "
			  "and kilnd of the same version", cli->socket, (long long)proto,
			  KILN_PROTO_VERSION);
		rc = -EPROTO;
		goto cleanup;
	}
	if (cli_reply_check(reply, NULL) != ERR_NONE) {
		rc = -EPROTO;
		goto cleanup;
	}
	if (!cli_json_i64(reply, "proto", &proto) || proto != KILN_PROTO_VERSION) {
		cli_error("kilnd at %s answered hello with protocol %lld, this kiln speaks %d",
			  cli->socket, cli_json_i64(reply, "proto", &proto) ? (long long)proto : -1LL,
			  KILN_PROTO_VERSION);
		rc = -EPROTO;
		goto cleanup;
	}
	if (!cli_json_i64(reply, "pid", &c->pid))
		c->pid = -1;
	check_cache_dir(cli, reply);
	rc = 0;

cleanup:
	cJSON_Delete(reply);
	return rc;
}

int cli_conn_open(const struct cli *cli, struct cli_conn *c)
{
	int fd, rc;

	memset(c, 0, sizeof(*c));
	c->wc.fd = -1;
	c->next_id = 1;
	c->pid = -1;
	fd = wire_connect(cli->socket);
	if (fd == -ENOENT || fd == -ECONNREFUSED)
		return -ECONNREFUSED;
	if (fd == -ENAMETOOLONG) {
		cli_error("socket path %s is too long for a Unix socket", cli->socket);
		return fd;
	}
	if (fd == -EPERM) {
		cli_error("the socket %s is served by another user's process; refusing it "
			  "(set KILN_DAEMON_UID to trust another user's kilnd)", cli->socket);
		return fd;
	}
	if (fd < 0) {
		cli_error("cannot connect to kilnd at %s: %s", cli->socket, strerror(-fd));
		return fd;
	}
	wire_conn_init(&c->wc, fd, FRAME_MAX_DEFAULT);
	rc = say_hello(cli, c);
	if (rc < 0)
		cli_conn_close(c);
	return rc;
}

/*
 * KILN_AUTOSPAWN=1, as for libkiln: starts kilnd --daemonize for the socket
 * (and a --cache-dir given), which returns once it accepts. 0, or -1 after
 * saying why (naming KILN_KILND when kilnd cannot be found).
 */
static int autospawn(const struct cli *cli)
{
	const char *kilnd = getenv("KILN_KILND");
	if (kilnd == NULL || *kilnd == '\0')
		kilnd = KILN_BINDIR "/kilnd";
	if (access(kilnd, X_OK) != 0) {
		cli_error_code("not_running");
		cli_error("kilnd is not running at %s, and KILN_AUTOSPAWN=1 cannot start %s (%s); "
			  "set KILN_KILND to kilnd's path", cli->socket, kilnd, strerror(errno));
		return -1;
	}
	const char *argv[9] = { kilnd, "--daemonize", "--socket", cli->socket };
	size_t n = 4;
	if (cli->cache_dir_given) {
		argv[n++] = "--cache-dir";
		argv[n++] = cli->cache_dir;
	}
	argv[n] = NULL;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
	pid_t pid;
	int status = 0, rc = posix_spawn(&pid, kilnd, &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc == 0)
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
	if (rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		cli_error_code("not_running");
		cli_error("KILN_AUTOSPAWN=1: %s --daemonize --socket %s failed (%s)", kilnd, cli->socket,
			  rc != 0 ? strerror(rc) : "see its message above");
		return -1;
	}
	return 0;
}

int cli_conn_require(const struct cli *cli, struct cli_conn *c)
{
	int rc = cli_conn_open(cli, c);

	if (rc == -ECONNREFUSED) {
		const char *as = getenv("KILN_AUTOSPAWN");
		/* Never a daemon started only to be stopped. */
		bool stop = cli->cmd != NULL && strcmp(cli->cmd, "stop") == 0;
		if (as != NULL && strcmp(as, "1") == 0 && !stop) {
			if (autospawn(cli) != 0)
				return rc;
			return cli_conn_open(cli, c) == 0 ? 0 : (cli_not_running(cli), rc);
		}
		cli_not_running(cli);
	}
	return rc;
}

void cli_conn_close(struct cli_conn *c)
{
	if (c->wc.fd >= 0)
		wire_conn_fini(&c->wc);
	c->wc.fd = -1;
}
