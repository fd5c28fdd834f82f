/*
 * kiln config: the cache's own settings, kept in <cache>/kiln.conf
 * (store/cache_conf.h), so that they hold for every kilnd serving the cache
 * (a kilnd --max-size given on its command line wins while it runs). kilnd
 * writes the file and applies it at once when it runs; otherwise the CLI
 * writes it and the next kilnd reads it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache_conf.h"
#include "cli.h"
#include "util.h"

enum { OPT_UNSET = 1 };

static const struct cli_optdef config_opts[] = {
	{ "unset", 0, false, OPT_UNSET },
	{ NULL, 0, false, 0 },
};

/* Without kilnd: reads, and with set writes, kiln.conf; the reply as kilnd
 * would give it (without the size kilnd would use). 0 or -1 after saying why. */
static int offline(const struct cli *cli, bool set, uint64_t size, cJSON **out)
{
	struct cache_conf cc;
	char err[700], path[4200];
	snprintf(path, sizeof(path), "%s/%s", cli->cache_dir, CACHE_CONF_NAME);
	memset(&cc, 0, sizeof(cc));
	bool exists = access(cli->cache_dir, F_OK) == 0;
	if (!exists && (cli->cache_dir_given || cli->cache_dir_named)) {
		/* A typo must not read as "nothing set", nor make a directory. */
		cli_error("%s does not exist; give the --cache-dir kilnd uses (kiln status shows it)",
			  cli->cache_dir);
		return -1;
	}
	int rc = !exists && set ? util_mkdir_p(cli->cache_dir, 0700) : 0;
	if (rc != 0) {
		cli_error("cannot make %s: %s", cli->cache_dir, strerror(-rc));
		return -1;
	}
	bool replaced = false;
	if ((exists || set) && cache_conf_update(cli->cache_dir, set ? (int64_t)size : -1, &cc,
						 &replaced, err, sizeof(err)) != 0) {
		cli_error("%s", err);
		return -1;
	}
	if (replaced)
		fprintf(stderr, "kiln: %s; written anew\n", err);
	cJSON *r = cJSON_CreateObject();
	if (cc.has_max_size)
		cJSON_AddNumberToObject(r, "saved_max_size", (double)cc.max_size);
	else
		cJSON_AddNullToObject(r, "saved_max_size");
	cJSON_AddStringToObject(r, "file", path);
	*out = r;
	return 0;
}

static void print(const cJSON *r, bool running)
{
	char a[64], b[64];
	uint64_t saved = 0, used = 0;
	bool has = cli_json_u64(r, "saved_max_size", &saved);
	const char *source = cli_json_str(r, "max_size_source");
	printf("max-size = %s", has ? util_format_size(saved, a, sizeof(a)) : "(not set)");
	if (running && cli_json_u64(r, "max_size", &used) && source != NULL) {
		if (strcmp(source, "command line") == 0)
			printf("   (kilnd runs with --max-size %s, which wins until it restarts "
			       "without it)", util_format_size(used, b, sizeof(b)));
		else if (!has)
			printf("   (kilnd uses its default, %s)", util_format_size(used, b, sizeof(b)));
	} else if (!running && !has) {
		printf("   (kilnd's default, 10 GiB, unless it is given --max-size)");
	}
	printf("\n");
}

int cmd_config(struct cli *cli, int argc, char **argv)
{
	struct cli_parse p;
	const char *val, *pos[3] = { NULL };
	int npos = 0, id;
	bool unset = false;

	cli_parse_init(&p, cli, argc, argv);
	while ((id = cli_next(&p, config_opts, &val)) != CLI_END) {
		if (id == CLI_STOP)
			return p.status;
		if (id == OPT_UNSET)
			unset = true;
		else if (npos < 3)
			pos[npos++] = val;
		else
			return cli_usage_error(cli, "config takes at most a KEY and a VALUE");
	}
	if (npos > 2 || (unset && npos != 1))
		return cli_usage_error(cli, npos > 2 ? "config takes at most a KEY and a VALUE"
						     : "--unset takes one KEY");
	char err[300];
	struct cache_conf cc = { 0 };
	if (npos >= 1 && cache_conf_set(&cc, pos[0], npos == 2 ? pos[1] : NULL, err, sizeof(err)) != 0)
		return cli_usage_error(cli, "%s", err);
	bool set = npos == 2 || unset;
	uint64_t size = set ? cc.max_size : 0;

	struct cli_conn c;
	cJSON *r = NULL;
	int rc = cli_conn_open(cli, &c), status = CLI_EXIT_ERROR;
	bool running = rc == 0;
	if (running) {
		struct msg_request req;
		cli_request_init(&req, OP_CONFIG);
		req.max_size = set ? (int64_t)size : -1;
		rc = cli_call(cli, &c, &req, &r) < 0 ? -1 : 0;
		cli_conn_close(&c);
		if (rc == 0 && cli_reply_check(r, NULL) != ERR_NONE)
			rc = -1;
	} else if (rc == -ECONNREFUSED) {
		rc = offline(cli, set, size, &r);
	}
	if (rc == 0) {
		if (cli->json)
			cli_print_json(r);
		else
			print(r, running);
		status = cli_finish_stdout(CLI_EXIT_OK);
	}
	cJSON_Delete(r);
	return status;
}
