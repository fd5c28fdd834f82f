/*
 * kiln stats: the daemon's counters, as text, JSON, or in Prometheus'
 * text exposition format for a node exporter's textfile collector.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "util.h"

enum metric_kind { COUNTER, GAUGE };

static const struct {
	const char *field;     /* in the status reply */
	const char *name;      /* metric name, without the kiln_ prefix */
	enum metric_kind kind;
	const char *help;
} metrics[] = {
	{ "requests", "requests_total", COUNTER, "Requests kilnd received." },
	{ "hits", "hits_total", COUNTER, "get and lookup requests served from the cache." },
	{ "misses", "misses_total", COUNTER, "get and lookup requests that were not in the cache." },
	{ "builds_started", "builds_started_total", COUNTER, "Builds started (compiler runs)." },
	{ "builds_ok", "builds_ok_total", COUNTER, "Builds that produced an artifact." },
	{ "builds_failed", "builds_failed_total", COUNTER, "Builds that failed." },
	{ "joined", "joined_total", COUNTER, "Requests that joined a build already running." },
	{ "need_sources", "need_sources_total", COUNTER, "Gets by digest asked for their text." },
	{ "source_texts", "source_texts_total", COUNTER, "Requests that carried source text." },
	{ "imports", "imports_total", COUNTER, "Artifacts imported with put." },
	{ "busy", "busy_total", COUNTER, "Requests and connections answered busy." },
	{ "denied", "denied_total", COUNTER, "Connections refused for their user." },
	{ "stalled", "stalled_total", COUNTER, "Connections closed by --frame-timeout." },
	{ "damaged", "damaged_total", COUNTER, "Damaged objects found (serving, verify)." },
	{ "inputs_changed", "inputs_changed_total", COUNTER, "Builds whose inputs changed while they ran." },
	{ "cancelled", "cancelled_total", COUNTER, "Builds stopped because every client that asked for them had gone." },
	{ "evicted", "evicted_total", COUNTER, "Entries evicted (--max-size or kiln gc)." },
	{ "evicted_bytes", "evicted_bytes_total", COUNTER, "Bytes of objects evicted." },
	{ "depfile_fallbacks", "depfile_fallbacks_total", COUNTER, "Builds recorded from dependency files only." },
	{ "upstream_hits", "upstream_hits_total", COUNTER, "Local misses served from --upstream." },
	{ "upstream_publishes", "upstream_publishes_total", COUNTER, "Entries written to --upstream." },
	{ "upstream_errors", "upstream_errors_total", COUNTER, "Damaged upstream entries and failed upstream I/O." },
	{ "entries", "cache_entries", GAUGE, "Entries in the cache." },
	{ "bytes", "cache_bytes", GAUGE, "Bytes of objects in the cache." },
	{ "max_size", "cache_max_bytes", GAUGE, "The cache's size limit (--max-size)." },
	{ "in_flight", "builds_running", GAUGE, "Compilers running now." },
	{ "queued", "builds_queued", GAUGE, "Builds waiting for a compiler slot." },
	{ "connections", "connections", GAUGE, "Open client connections." },
	{ "pending", "requests_pending", GAUGE, "Requests read and not yet answered." },
	{ "uptime_s", "uptime_seconds", GAUGE, "Seconds since kilnd started." },
};

/* One counter for people: sizes in binary units, the uptime as a duration,
 * counts as integers (JSON keeps the raw numbers). */
static void print_human(const cJSON *v)
{
	char buf[64];
	const char *name = v->string;
	size_t n = strlen(name);
	double x = v->valuedouble;
	if (strcmp(name, "bytes") == 0 || strcmp(name, "max_size") == 0 ||
	    (n > 6 && strcmp(name + n - 6, "_bytes") == 0))
		printf("%-20s %s\n", name, util_format_size(x > 0 ? (uint64_t)x : 0, buf, sizeof(buf)));
	else if (strcmp(name, "uptime_s") == 0)
		printf("%-20s %s\n", "uptime", util_format_age((int64_t)x, buf, sizeof(buf)));
	else
		printf("%-20s %.0f\n", name, x);
}

/* A label value with \, " and newline escaped, as the format asks. */
static void print_label(FILE *fp, const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(fp, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", fp);
		else
			fputc(*s, fp);
	}
}

static void print_prometheus(FILE *fp, const cJSON *st)
{
	const char *sock = cli_json_str(st, "socket");
	for (size_t i = 0; i < sizeof(metrics) / sizeof(metrics[0]); i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(st, metrics[i].field);
		if (!cJSON_IsNumber(v))
			continue;   /* e.g. the upstream counters without --upstream */
		fprintf(fp, "# HELP kiln_%s %s\n# TYPE kiln_%s %s\nkiln_%s{socket=\"", metrics[i].name,
			metrics[i].help, metrics[i].name, metrics[i].kind == COUNTER ? "counter" : "gauge",
			metrics[i].name);
		print_label(fp, sock != NULL ? sock : "");
		fprintf(fp, "\"} %.17g\n", v->valuedouble);
	}
	fprintf(fp, "# HELP kiln_up Whether kilnd answered.\n# TYPE kiln_up gauge\nkiln_up{socket=\"");
	print_label(fp, sock != NULL ? sock : "");
	fprintf(fp, "\"} 1\n");
}

/* Writes the metrics to path through a temporary file and a rename, so that
 * the textfile collector never reads half a file. */
static int write_atomically(const char *path, const cJSON *st)
{
	char *text = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&text, &len);
	int rc = fp != NULL ? 0 : -errno;

	if (fp != NULL) {
		print_prometheus(fp, st);
		rc = fclose(fp) == 0 ? 0 : -errno;
	}
	if (rc == 0)
		rc = util_replace_file_at(AT_FDCWD, path, text, len, true);
	free(text);
	if (rc != 0) {
		cli_error("cannot write %s: %s", path, strerror(-rc));
		return -1;
	}
	return 0;
}

enum { OPT_PROMETHEUS = 1, OPT_OUTPUT };

static const struct cli_optdef stats_opts[] = {
	{ "prometheus", 0, false, OPT_PROMETHEUS },
	{ "output", 'o', true, OPT_OUTPUT },
	{ NULL, 0, false, 0 },
};

int cmd_stats(struct cli *cli, int argc, char **argv)
{
	struct cli_parse p;
	struct cli_conn c;
	struct msg_request req;
	cJSON *st = NULL, *counters = NULL;
	const char *val, *output = NULL;
	bool prometheus = false;
	int id, status = CLI_EXIT_ERROR;

	cli_parse_init(&p, cli, argc, argv);
	while ((id = cli_next(&p, stats_opts, &val)) != CLI_END) {
		if (id == CLI_STOP)
			return p.status;
		if (id == CLI_POS)
			return cli_usage_error(cli, "stats takes no arguments");
		if (id == OPT_PROMETHEUS)
			prometheus = true;
		else
			output = val;
	}
	if (output != NULL && !prometheus)
		return cli_usage_error(cli, "--output goes with --prometheus");
	if (cli_conn_require(cli, &c) < 0)
		return status;
	cli_request_init(&req, OP_STATUS);
	if (cli_call(cli, &c, &req, &st) < 0 || cli_reply_check(st, NULL) != ERR_NONE)
		goto cleanup;
	if (prometheus) {
		if (output != NULL ? write_atomically(output, st) != 0 : (print_prometheus(stdout, st), 0))
			goto cleanup;
		status = cli_finish_stdout(CLI_EXIT_OK);
		goto cleanup;
	}
	counters = cJSON_CreateObject();
	for (size_t i = 0; counters != NULL && i < sizeof(metrics) / sizeof(metrics[0]); i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(st, metrics[i].field);
		if (cJSON_IsNumber(v))
			cJSON_AddNumberToObject(counters, metrics[i].field, v->valuedouble);
	}
	if (counters == NULL) {
		cli_error("out of memory");
		goto cleanup;
	}
	if (cli->json) {
		cli_print_json(counters);
	} else {
		const cJSON *v;
		cJSON_ArrayForEach(v, counters)
			print_human(v);
	}
	status = cli_finish_stdout(CLI_EXIT_OK);
cleanup:
	cJSON_Delete(counters);
	cJSON_Delete(st);
	cli_conn_close(&c);
	return status;
}
