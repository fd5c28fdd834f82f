/*
 * kiln build: sends files by path to kilnd and reports the artifact. Names
 * and arguments are checked here with the daemon's own rules (proto/
 * validate.h) so that a mistake is reported before anything is sent.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "args.h"
#include "msg_artifact.h"
#include "validate.h"

enum { OPT_TOOLCHAIN = 1, OPT_ALIAS, OPT_LABEL, OPT_OUTPUT, OPT_COMPILER, OPT_HOST };

static const struct cli_optdef build_opts[] = {
	{ "toolchain", 't', true, OPT_TOOLCHAIN },
	{ "alias", 0, true, OPT_ALIAS },
	{ "label", 0, true, OPT_LABEL },
	{ "output", 0, true, OPT_OUTPUT },
	{ "compiler", 0, true, OPT_COMPILER },
	{ "host-compiler", 0, true, OPT_HOST },
	{ NULL, 0, false, 0 },
};

/* The command line of one build; files and args point into argv. */
struct build_args {
	const char *toolchain;
	const char *alias;
	const char *label;
	const char *output;
	const char *host;
	const char **files;
	size_t nfiles;
	const char **args;
	size_t nargs;
};

/* Returns -1 to go on, or the exit status. */
static int build_parse(struct cli *cli, int argc, char **argv, struct build_args *b)
{
	struct cli_parse p;
	const char *val;
	int id;

	cli_parse_init(&p, cli, argc, argv);
	p.hint = "compiler arguments go after '--'";
	while ((id = cli_next(&p, build_opts, &val)) != CLI_END) {
		switch (id) {
		case CLI_STOP:
			return p.status;
		case CLI_POS:
			if (p.dashdash)
				b->args[b->nargs++] = val;
			else
				b->files[b->nfiles++] = val;
			break;
		case OPT_TOOLCHAIN:
			b->toolchain = val;
			break;
		case OPT_COMPILER:
			if (val[0] != '/') {
				cli_error("--compiler: \"%s\" is not an absolute path", val);
				return 2;
			}
			b->toolchain = val;
			break;
		case OPT_HOST:
			b->host = val;
			break;
		case OPT_ALIAS:
			b->alias = val;
			break;
		case OPT_OUTPUT:
			b->output = val;
			break;
		default:
			b->label = val;
			break;
		}
	}
	return -1;
}

/* Options whose value is a path the compiler reads: joined (-Iinc) or
 * separate (-I inc). */
static const char *const path_opts[] = { "-isystem", "-iquote", "-idirafter", "-include",
					  "-imacros", "-I", "-L", NULL };

/* The path of arg's value made absolute against base, or NULL when arg is not
 * a relative path option value. sep: arg is the value of a separate option. */
static char *absolute_value(const char *prefix, const char *value, const char *base)
{
	char *out = NULL;
	/* Absolute, sysroot-relative (=, $SYSROOT) or empty: as it is. */
	if (value[0] == '\0' || value[0] == '/' || value[0] == '=' || value[0] == '$')
		return NULL;
	if (asprintf(&out, "%s%s/%s", prefix, base, value) < 0)
		return NULL;
	return out;
}

int cli_absolute_args(char **args, size_t n, const char *base, char **owned)
{
	for (size_t i = 0; i < n; i++) {
		owned[i] = NULL;
		for (size_t k = 0; path_opts[k] != NULL; k++) {
			size_t len = strlen(path_opts[k]);
			if (strcmp(args[i], path_opts[k]) == 0 && i + 1 < n) {
				/* -I inc: the next argument is the path. */
				i++;
				owned[i] = absolute_value("", args[i], base);
				break;
			}
			/* -include and -imacros are only separate here. */
			if (k < 3 || k >= 5) {
				if (strncmp(args[i], path_opts[k], len) == 0 && args[i][len] != '\0') {
					owned[i] = absolute_value(path_opts[k], args[i] + len, base);
					break;
				}
			}
		}
		if (owned[i] != NULL)
			args[i] = owned[i];
	}
	return 0;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* Checks everything the daemon would refuse as invalid. Returns -1 to go on,
 * or the exit status. */
static int build_validate(struct cli *cli, struct build_args *b)
{
	char why[256];

	if (!b->nfiles)
		return cli_usage_error(cli, "build needs at least one FILE");
	if (b->nfiles > MSG_MAX_SOURCES)
		return cli_usage_error(cli, "too many files (%zu); a build takes at most %d",
				       b->nfiles, MSG_MAX_SOURCES);
	if (b->nargs > MSG_MAX_ARGS)
		return cli_usage_error(cli, "too many compiler arguments (%zu); at most %d",
				       b->nargs, MSG_MAX_ARGS);
	/* None given: by the first compiled file's language, as libkiln and
	 * Python choose (validate_default_toolchain). */
	if (b->toolchain == NULL)
		b->toolchain = validate_default_toolchain(b->files, b->nfiles, sizeof(*b->files));
	if (validate_toolchain_name(b->toolchain, why, sizeof(why)) < 0)
		return cli_usage_error(cli, "%s", why);
	if (b->alias && validate_alias(b->alias, why, sizeof(why)) < 0)
		return cli_usage_error(cli, "%s", why);
	if (b->label && validate_label(b->label, why, sizeof(why)) < 0)
		return cli_usage_error(cli, "%s", why);
	for (size_t i = 0; i < b->nfiles; i++) {
		const char *name = base_name(b->files[i]);

		if (validate_source_name(name, why, sizeof(why)) < 0)
			return cli_usage_error(cli, "%s: %s", b->files[i], why);
		/* The daemon compiles every source under its base name in one
		 * directory, so two files with one name cannot both be sent. */
		for (size_t j = 0; j < i; j++)
			if (!strcmp(name, base_name(b->files[j])))
				return cli_usage_error(cli, "%s and %s have the same name \"%s\"; "
						       "sources are compiled under their base "
						       "names, which must differ",
						       b->files[j], b->files[i], name);
	}
	for (size_t i = 0; i < b->nargs; i++) {
		if (strlen(b->args[i]) > MSG_MAX_ARG_LEN)
			return cli_usage_error(cli, "compiler argument %zu is longer than %d bytes",
					       i + 1, MSG_MAX_ARG_LEN);
	}
	if (validate_args((const char *const *)b->args, b->nargs, NULL, why, sizeof(why)) ==
	    ARGS_REFUSED)
		return cli_usage_error(cli, "%s", why);
	return -1;
}

/* Fills srcs with base names and absolute paths (malloc'd, freed by the
 * caller). Returns 0 or a negative errno after printing why. */
static int build_sources(const struct build_args *b, struct msg_source *srcs)
{
	for (size_t i = 0; i < b->nfiles; i++) {
		struct stat st;
		char *real = realpath(b->files[i], NULL);

		if (!real) {
			int rc = -errno;

			cli_error("cannot read %s: %s", b->files[i], strerror(-rc));
			return rc;
		}
		srcs[i].name = (char *)base_name(b->files[i]);
		srcs[i].path = real;
		if (stat(real, &st) < 0 || !S_ISREG(st.st_mode)) {
			cli_error("%s is not a regular file", b->files[i]);
			return -EINVAL;
		}
	}
	return 0;
}

/* Prints the failure of a build; the compiler output goes to stderr whole. */
static void build_failed(const cJSON *reply)
{
	const cJSON *err = cJSON_GetObjectItemCaseSensitive(reply, "error");
	const char *log = cli_json_str(err, "log");
	size_t len;

	const char *rkey = cli_json_str(err, "key");
	cli_reply_check(reply, NULL);
	if (!log || !*log)
		return;
	len = strlen(log);
	fwrite(log, 1, len, stderr);
	if (log[len - 1] != '\n')
		fputc('\n', stderr);
	if (rkey != NULL)
		fprintf(stderr, "kiln: this output is kept: kiln log %s\n", rkey);
}

static int build_print(const struct cli *cli, const cJSON *reply)
{
	struct msg_artifact a;
	const char *why;
	cJSON *out;
	int rc = 0;

	if (msg_artifact_parse(reply, &a, &why) != 0) {
		cli_error("bad reply from kilnd at %s: %s", cli->socket, why);
		return -EPROTO;
	}
	const char *log = a.log;
	if (log != NULL && *log != '\0' && !cli->json) {
		/* The compiler's warnings, whole, as a failure's output is. */
		size_t len = strlen(log);
		fflush(stdout);
		fputs("kiln: the compiler's messages:\n", stderr);
		fwrite(log, 1, len, stderr);
		if (log[len - 1] != '\n')
			fputc('\n', stderr);
	}
	if (!cli->json) {
		if (a.cached)
			printf("cached %s\n", a.key);
		else if (a.joined)
			printf("joined build of %s\n", a.key);
		else
			printf("built %s in %llu ms\n", a.key, (unsigned long long)a.build_ms);
		printf("path: %s\n", a.path);
		return 0;
	}
	out = cJSON_CreateObject();
	if (!out || !cJSON_AddStringToObject(out, "key", a.key) ||
	    !cJSON_AddStringToObject(out, "path", a.path) ||
	    !cJSON_AddBoolToObject(out, "cached", a.cached) ||
	    !cJSON_AddBoolToObject(out, "joined", a.joined) ||
	    !cJSON_AddNumberToObject(out, "build_ms", (double)a.build_ms) ||
	    (log != NULL && *log != '\0' && !cJSON_AddStringToObject(out, "log", log))) {
		cli_error("out of memory");
		rc = -ENOMEM;
	} else {
		rc = cli_print_json(out);
	}
	cJSON_Delete(out);
	return rc;
}

int cmd_build(struct cli *cli, int argc, char **argv)
{
	struct build_args b = { 0 };
	char **owned = NULL, *cwd = NULL;
	struct msg_source *srcs = NULL;
	struct msg_request req;
	struct cli_conn c = { .wc.fd = -1 };
	cJSON *reply = NULL;
	int status = CLI_EXIT_ERROR;

	b.files = calloc((size_t)argc + 1, sizeof(*b.files));
	b.args = calloc((size_t)argc + 1, sizeof(*b.args));
	srcs = calloc((size_t)argc + 1, sizeof(*srcs));
	if (!b.files || !b.args || !srcs) {
		cli_error("out of memory");
		goto cleanup;
	}
	status = build_parse(cli, argc, argv, &b);
	if (status < 0)
		status = build_validate(cli, &b);
	if (status >= 0)
		goto cleanup;
	status = CLI_EXIT_ERROR;
	if (build_sources(&b, srcs) < 0)
		goto cleanup;
	/* Relative include and library directories are the caller's, not the
	 * daemon's build directory's: made absolute against the working
	 * directory, as the source files are. */
	owned = calloc(b.nargs + 1, sizeof(*owned));
	cwd = getcwd(NULL, 0);
	if (owned == NULL || cwd == NULL) {
		cli_error("cannot resolve relative arguments: %s", strerror(errno));
		goto cleanup;
	}
	cli_absolute_args((char **)b.args, b.nargs, cwd, owned);

	if (cli_conn_require(cli, &c) < 0)
		goto cleanup;
	cli_request_init(&req, OP_GET);
	req.toolchain = (char *)b.toolchain;
	req.alias = (char *)b.alias;
	req.label = (char *)b.label;
	req.output = (char *)b.output;
	req.host_compiler = (char *)b.host;
	req.args = (char **)b.args;
	req.nargs = b.nargs;
	req.sources = srcs;
	req.nsources = b.nfiles;
	if (cli_call(cli, &c, &req, &reply) < 0)
		goto cleanup;
	if (!cli_json_true(reply, "ok")) {
		build_failed(reply);
		goto cleanup;
	}
	if (build_print(cli, reply) < 0)
		goto cleanup;
	status = cli_finish_stdout(CLI_EXIT_OK);

cleanup:
	cJSON_Delete(reply);
	cli_conn_close(&c);
	for (size_t i = 0; srcs && i < b.nfiles; i++)
		free(srcs[i].path);
	free(srcs);
	for (size_t i = 0; owned != NULL && i < b.nargs; i++)
		free(owned[i]);
	free(owned);
	free(cwd);
	free(b.files);
	free(b.args);
	return status;
}
