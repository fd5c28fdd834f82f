/*
 * kiln: the command-line tool for kilnd. This file holds main(), the global
 * options, the argument parser that every command shares and the messages;
 * the commands live in cli_*.c by concern.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "util.h"

/* Ids of the global options; far above any command's own ids. */
enum {
	OPT_G_SOCKET = 1000,
	OPT_G_CACHE_DIR,
	OPT_G_JSON,
	OPT_G_HELP,
	OPT_G_VERSION,
};

static const struct cli_optdef global_defs[] = {
	{ "socket", 0, true, OPT_G_SOCKET },
	{ "cache-dir", 0, true, OPT_G_CACHE_DIR },
	{ "json", 0, false, OPT_G_JSON },
	{ "help", 'h', false, OPT_G_HELP },
	{ "version", 'V', false, OPT_G_VERSION },
	{ NULL, 0, false, 0 },
};

/* The run's first failure, for --json: printed as one JSON object on stdout
 * at the end when the command printed no JSON of its own (cli_json_failure). */
static struct {
	char code[32];
	char message[1024];
	char *log;
	bool have;
	bool json_printed;
	const char *next_code;  /* the code of the next message, or NULL: "error" */
} failure;

/* Prints "kiln: " and the message as one line on stderr, after what is
 * already on stdout so that the two streams keep their order on a terminal. */
static void report(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

static void report(const char *fmt, va_list ap)
{
	va_list copy;
	va_copy(copy, ap);
	if (!failure.have) {
		vsnprintf(failure.message, sizeof(failure.message), fmt, copy);
		snprintf(failure.code, sizeof(failure.code), "%s",
			 failure.next_code ? failure.next_code : "error");
		failure.have = true;
	}
	va_end(copy);
	failure.next_code = NULL;
	fflush(stdout);
	fputs("kiln: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void cli_error_code(const char *code)
{
	failure.next_code = code;
}

void cli_error_log(const char *log)
{
	if (failure.log == NULL && log != NULL)
		failure.log = strdup(log);
}

void cli_json_printed(void)
{
	failure.json_printed = true;
}

/* Under --json, a failed run whose command printed no JSON says so on stdout:
 * {"ok": false, "error": {"code", "message"[, "log"]}}. */
static void cli_json_failure(const struct cli *cli, int status)
{
	if (!cli->json || status == CLI_EXIT_OK || failure.json_printed)
		return;
	cJSON *o = cJSON_CreateObject(), *e = cJSON_CreateObject();
	if (o != NULL && e != NULL) {
		cJSON_AddBoolToObject(o, "ok", false);
		cJSON_AddStringToObject(e, "code", failure.have ? failure.code : "error");
		cJSON_AddStringToObject(e, "message", failure.have ? failure.message : "failed");
		if (failure.log != NULL)
			cJSON_AddStringToObject(e, "log", failure.log);
		cJSON_AddNumberToObject(e, "exit", status);
		cJSON_AddItemToObject(o, "error", e);
		e = NULL;
		cli_print_json(o);
	}
	cJSON_Delete(o);
	cJSON_Delete(e);
	fflush(stdout);
}

void cli_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	report(fmt, ap);
	va_end(ap);
}

int cli_usage_error(const struct cli *cli, const char *fmt, ...)
{
	va_list ap;

	cli_error_code("usage");
	va_start(ap, fmt);
	report(fmt, ap);
	va_end(ap);
	if (cli->cmd)
		fprintf(stderr, "Try 'kiln help %s' for more information.\n", cli->cmd);
	else
		fputs("Try 'kiln --help' for more information.\n", stderr);
	return CLI_EXIT_USAGE;
}

int cli_finish_stdout(int status)
{
	/* A full disk or a closed pipe must not look like success to a script
	 * that captures the output. */
	if (fflush(stdout) != 0 || ferror(stdout)) {
		cli_error("cannot write to standard output: %s", strerror(errno));
		return CLI_EXIT_ERROR;
	}
	return status;
}

void cli_parse_init(struct cli_parse *p, struct cli *cli, int argc, char **argv)
{
	memset(p, 0, sizeof(*p));
	p->cli = cli;
	p->argc = argc;
	p->argv = argv;
}

static const struct cli_optdef *find_long(const struct cli_optdef *defs, const char *name,
					  size_t len)
{
	for (; defs && defs->id; defs++)
		if (defs->lng && strlen(defs->lng) == len && !strncmp(defs->lng, name, len))
			return defs;
	return NULL;
}

static const struct cli_optdef *find_short(const struct cli_optdef *defs, char c)
{
	for (; defs && defs->id; defs++)
		if (defs->shrt && defs->shrt == c)
			return defs;
	return NULL;
}

static int set_path_option(struct cli_parse *p, char **slot, bool *given,
			   const char *opt, const char *val)
{
	char *copy;

	if (!*val) {
		p->status = cli_usage_error(p->cli, "option '--%s' needs a non-empty value", opt);
		return CLI_STOP;
	}
	copy = strdup(val);
	if (!copy) {
		cli_error("out of memory");
		p->status = CLI_EXIT_ERROR;
		return CLI_STOP;
	}
	free(*slot);
	*slot = copy;
	*given = true;
	return 0;
}

/* Applies a global option. Returns 0 to go on parsing, or CLI_STOP. */
static int apply_global(struct cli_parse *p, int id, const char *val)
{
	struct cli *cli = p->cli;

	switch (id) {
	case OPT_G_SOCKET:
		return set_path_option(p, &cli->socket, &cli->socket_given, "socket", val);
	case OPT_G_CACHE_DIR:
		return set_path_option(p, &cli->cache_dir, &cli->cache_dir_given,
				       "cache-dir", val);
	case OPT_G_JSON:
		cli->json = true;
		return 0;
	case OPT_G_HELP:
		if (cli->cmd)
			cli_help_command(cli->cmd, stdout);
		else
			cli_help_global(stdout);
		p->status = cli_finish_stdout(CLI_EXIT_OK);
		return CLI_STOP;
	default:
		cli_print_version();
		p->status = cli_finish_stdout(CLI_EXIT_OK);
		return CLI_STOP;
	}
}

/* ccache's habits (kiln -s, -z, -M 5G): where kiln keeps each, for an
 * "unknown option" message; NULL for other options. */
static const char *ccache_habit(const char *arg)
{
	static const struct {
		const char *opt;
		const char *say;
	} habits[] = {
		{ "-s", "statistics: kiln stats" },
		{ "--show-stats", "statistics: kiln stats" },
		{ "--print-stats", "statistics: kiln stats" },
		{ "-z", "to zero the statistics: kiln stats --zero" },
		{ "--zero-stats", "to zero the statistics: kiln stats --zero" },
		{ "-M", "the cache's size limit: kiln config max-size SIZE" },
		{ "--max-size", "the cache's size limit: kiln config max-size SIZE" },
	};
	for (size_t i = 0; i < sizeof(habits) / sizeof(habits[0]); i++) {
		size_t n = strlen(habits[i].opt);
		if (strncmp(arg, habits[i].opt, n) == 0 &&
		    (arg[n] == '\0' || arg[n] == '=' || (n == 2 && arg[1] == 'M')))
			return habits[i].say;
	}
	return NULL;
}

/*
 * Decodes one option of arg: "--name", "--name=value", "--name value", "-x",
 * "-xvalue", "-x value". On success sets *def and *val and advances p->i past
 * what was consumed.
 */
static int decode_option(struct cli_parse *p, const struct cli_optdef *defs,
			 const struct cli_optdef **def, const char **val)
{
	const char *arg = p->argv[p->i];
	const char *eq = NULL;
	const char *inline_val = NULL;
	const char *hint = p->hint != NULL ? p->hint : ccache_habit(arg);

	if (arg[1] == '-') {
		const char *name = arg + 2;
		size_t len;

		eq = strchr(name, '=');
		len = eq ? (size_t)(eq - name) : strlen(name);
		*def = find_long(defs, name, len);
		if (!*def)
			*def = find_long(global_defs, name, len);
		if (!*def) {
			p->status = cli_usage_error(p->cli, "unknown option '--%.*s'%s%s", (int)len,
						    name, hint ? "; " : "", hint ? hint : "");
			return CLI_STOP;
		}
		if (eq && !(*def)->has_arg) {
			p->status = cli_usage_error(p->cli, "option '--%s' takes no value",
						    (*def)->lng);
			return CLI_STOP;
		}
		if (eq)
			inline_val = eq + 1;
	} else {
		*def = find_short(defs, arg[1]);
		if (!*def)
			*def = find_short(global_defs, arg[1]);
		/* Short flags cannot be grouped: "-hx" is refused, not guessed at. */
		if (!*def || (!(*def)->has_arg && arg[2])) {
			p->status = cli_usage_error(p->cli, "unknown option '%s'%s%s", arg,
						    hint ? "; " : "", hint ? hint : "");
			return CLI_STOP;
		}
		if (arg[2])
			inline_val = arg + 2;
	}
	p->i++;
	*val = NULL;
	if (!(*def)->has_arg)
		return 0;
	if (inline_val) {
		*val = inline_val;
		return 0;
	}
	if (p->i >= p->argc) {
		if ((*def)->lng)
			p->status = cli_usage_error(p->cli, "option '--%s' needs a value",
						    (*def)->lng);
		else
			p->status = cli_usage_error(p->cli, "option '-%c' needs a value",
						    (*def)->shrt);
		return CLI_STOP;
	}
	*val = p->argv[p->i++];
	return 0;
}

int cli_next(struct cli_parse *p, const struct cli_optdef *defs, const char **val)
{
	while (p->i < p->argc) {
		const char *arg = p->argv[p->i];
		const struct cli_optdef *def;
		int rc;

		if (!p->dashdash && !strcmp(arg, "--")) {
			p->dashdash = true;
			p->i++;
			continue;
		}
		/* A lone "-" is an operand by convention, never an option. */
		if (p->dashdash || arg[0] != '-' || !arg[1]) {
			*val = arg;
			p->i++;
			return CLI_POS;
		}
		rc = decode_option(p, defs, &def, val);
		if (rc < 0)
			return rc;
		if (def->id < OPT_G_SOCKET)
			return def->id;
		rc = apply_global(p, def->id, *val);
		if (rc < 0)
			return rc;
	}
	return CLI_END;
}

int cli_parse_flag_refs(struct cli *cli, int argc, char **argv, const struct cli_optdef *defs,
			bool *flag, const char **refs, int max, int *nrefs)
{
	struct cli_parse p;
	const char *val;
	int id;

	*nrefs = 0;
	if (flag != NULL)
		*flag = false;
	cli_parse_init(&p, cli, argc, argv);
	while ((id = cli_next(&p, defs, &val)) != CLI_END) {
		if (id == CLI_STOP)
			return p.status;
		if (defs != NULL && id == defs[0].id) {
			*flag = true;
			continue;
		}
		if (*nrefs == max)
			return cli_usage_error(cli, max ? "%s takes one REF" : "%s takes no arguments",
					       cli->cmd);
		if (!*val)
			return cli_usage_error(cli, "REF must not be empty");
		refs[(*nrefs)++] = val;
	}
	return -1;
}

int cli_parse_refs(struct cli *cli, int argc, char **argv, const char **refs, int max,
		   int *nrefs)
{
	return cli_parse_flag_refs(cli, argc, argv, NULL, NULL, refs, max, nrefs);
}

static int unknown_command(struct cli *cli, const char *name);

/* kiln help [COMMAND] */
static int cmd_help(struct cli *cli, int argc, char **argv)
{
	struct cli_parse p;
	const char *val;
	const char *topic = NULL;
	int id;

	cli_parse_init(&p, cli, argc, argv);
	while ((id = cli_next(&p, NULL, &val)) != CLI_END) {
		if (id == CLI_STOP)
			return p.status;
		if (topic)
			return cli_usage_error(cli, "help takes at most one command");
		topic = val;
	}
	if (!topic) {
		cli_help_global(stdout);
		return cli_finish_stdout(CLI_EXIT_OK);
	}
	if (cli_help_command(topic, stdout) < 0) {
		cli->cmd = NULL;
		return unknown_command(cli, topic);
	}
	return cli_finish_stdout(CLI_EXIT_OK);
}

static const struct {
	const char *name;
	int (*run)(struct cli *cli, int argc, char **argv);
} commands[] = {
	{ "status", cmd_status },
	{ "top", cmd_top },
	{ "ls", cmd_ls },
	{ "show", cmd_show },
	{ "log", cmd_log },
	{ "build", cmd_build },
	{ "rm", cmd_rm },
	{ "pin", cmd_pin },
	{ "unpin", cmd_unpin },
	{ "gc", cmd_gc },
	{ "verify", cmd_verify },
	{ "stats", cmd_stats },
	{ "config", cmd_config },
	{ "warm", cmd_warm },
	{ "export", cmd_export },
	{ "import", cmd_import },
	{ "stop", cmd_stop },
	{ "help", cmd_help },
};

/* "unknown command 'statsu'; did you mean 'stats'?": the nearest command,
 * when it is near enough to be what was meant (at most two edits, fewer
 * than the command has letters: "lss" is "ls", "xyz" is nothing). */
static int unknown_command(struct cli *cli, const char *name)
{
	const char *best = NULL;
	size_t dist = SIZE_MAX;
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		size_t d = util_edit_distance(name, commands[i].name);
		if (d < dist) {
			dist = d;
			best = commands[i].name;
		}
	}
	if (best != NULL && dist <= 2 && dist < strlen(best))
		return cli_usage_error(cli, "unknown command '%s'; did you mean '%s'?", name, best);
	return cli_usage_error(cli, "unknown command '%s'", name);
}

int main(int argc, char **argv)
{
	struct cli cli = { 0 };
	struct cli_parse p;
	const char *name = NULL;
	int status = CLI_EXIT_ERROR;
	int id;

	/* The defaults come first so that a later --socket or --cache-dir,
	 * before or after the command, replaces them. */
	cli.socket = util_default_socket();
	cli.cache_dir = util_default_cache_dir();
	cli.cache_dir_named = getenv("KILN_CACHE_DIR") != NULL && getenv("KILN_CACHE_DIR")[0] != '\0';
	if (!cli.socket || !cli.cache_dir) {
		cli_error("cannot determine the default socket or cache directory: %s",
			  strerror(errno ? errno : ENOMEM));
		goto cleanup;
	}

	cli_parse_init(&p, &cli, argc - 1, argv + 1);
	id = cli_next(&p, NULL, &name);
	if (id == CLI_STOP) {
		status = p.status;
		goto cleanup;
	}
	if (id == CLI_END) {
		cli_help_global(stderr);
		status = CLI_EXIT_USAGE;
		goto cleanup;
	}

	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (!strcmp(commands[i].name, name)) {
			cli.cmd = commands[i].name;
			status = commands[i].run(&cli, argc - 1 - p.i, argv + 1 + p.i);
			goto cleanup;
		}
	}
	status = unknown_command(&cli, name);

cleanup:
	cli_json_failure(&cli, status);
	free(failure.log);
	free(cli.socket);
	free(cli.cache_dir);
	return status;
}
