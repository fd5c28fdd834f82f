/*
 * Commands of the kiln CLI that change or inspect the daemon itself:
 * status, rm, pin, unpin, gc and stop. All of them need a running kilnd,
 * because the daemon is the only writer of the cache.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "util.h"

#define STOP_WAIT_MS 10000

/* Parses a command that takes no arguments and connects to the daemon, which
 * it needs. Returns -1 to go on with c open, or the exit status. */
static int parse_and_connect(struct cli *cli, int argc, char **argv, struct cli_conn *c)
{
	int status, nrefs;

	status = cli_parse_refs(cli, argc, argv, NULL, 0, &nrefs);
	if (status >= 0)
		return status;
	return cli_conn_require(cli, c) < 0 ? CLI_EXIT_ERROR : -1;
}

/* Sends req and keeps the daemon's report in *reply (owned by the caller),
 * without the id and ok members that every reply carries; prints it when
 * --json asks for that. Returns 0, or a negative errno after printing why. */
static int call_report(struct cli *cli, struct cli_conn *c, struct msg_request *req,
		       cJSON **reply)
{
	int rc;

	rc = cli_call(cli, c, req, reply);
	if (rc < 0)
		return rc;
	if (cli_reply_check(*reply, NULL) != ERR_NONE)
		return -EPROTO;
	cJSON_DeleteItemFromObjectCaseSensitive(*reply, "id");
	cJSON_DeleteItemFromObjectCaseSensitive(*reply, "ok");
	return cli->json ? cli_print_json(*reply) : 0;
}

enum field_kind { F_INT, F_STR, F_SIZE, F_AGE, F_TIME, F_HITS, F_RATE, F_HOLDERS };

/* Which lines kiln status shows without -v: the daemon, the cache's size,
 * the traffic and the builds always; a counter of trouble (or of something
 * a user should look at) when it is not zero; the rest with -v only, as
 * ccache -s and -sv. */
enum field_show { SHOW_ALWAYS, SHOW_NONZERO, SHOW_VERBOSE };

/* In this order; each named by cli_counter_name, as kiln stats names it. */
static const struct {
	const char *field;
	enum field_kind kind;
	enum field_show show;
} status_fields[] = {
	{ "pid", F_INT, SHOW_ALWAYS },
	{ "version", F_STR, SHOW_ALWAYS },
	{ "build", F_STR, SHOW_ALWAYS },
	{ "proto", F_INT, SHOW_VERBOSE },
	{ "socket", F_STR, SHOW_ALWAYS },
	{ "cache_dir", F_STR, SHOW_ALWAYS },
	{ "jobs", F_INT, SHOW_VERBOSE },
	{ "entries", F_INT, SHOW_ALWAYS },
	{ "bytes", F_SIZE, SHOW_ALWAYS },
	{ "disk_bytes", F_SIZE, SHOW_VERBOSE },
	{ "max_size", F_SIZE, SHOW_ALWAYS },
	{ "stale_entries", F_INT, SHOW_NONZERO },
	{ "uptime_s", F_AGE, SHOW_ALWAYS },
	{ "connections", F_INT, SHOW_VERBOSE },
	{ "requests", F_INT, SHOW_ALWAYS },
	{ "hits", F_HITS, SHOW_ALWAYS },
	{ "misses", F_INT, SHOW_ALWAYS },
	{ "builds_started", F_INT, SHOW_ALWAYS },
	{ "builds_ok", F_INT, SHOW_VERBOSE },
	{ "builds_failed", F_INT, SHOW_ALWAYS },
	{ "joined", F_INT, SHOW_VERBOSE },
	{ "need_sources", F_INT, SHOW_VERBOSE },
	{ "text_waits", F_INT, SHOW_VERBOSE },
	{ "text_timeouts", F_INT, SHOW_NONZERO },
	{ "source_texts", F_INT, SHOW_VERBOSE },
	{ "imports", F_INT, SHOW_VERBOSE },
	{ "inputs_changed", F_INT, SHOW_VERBOSE },
	{ "cancelled", F_INT, SHOW_VERBOSE },
	{ "uncacheable", F_INT, SHOW_NONZERO },
	{ "unobserved", F_INT, SHOW_NONZERO },
	{ "variants", F_INT, SHOW_NONZERO },
	{ "claims", F_INT, SHOW_VERBOSE },
	{ "claims_held", F_INT, SHOW_NONZERO },
	{ "claim_waits", F_INT, SHOW_VERBOSE },
	{ "claim_takeovers", F_INT, SHOW_VERBOSE },
	{ "claim_timeouts", F_INT, SHOW_NONZERO },
	{ "claims_refused", F_INT, SHOW_NONZERO },
	{ "claims_displaced", F_INT, SHOW_VERBOSE },
	{ "claims_expired", F_INT, SHOW_VERBOSE },
	{ "claim_holders", F_HOLDERS, SHOW_VERBOSE },
	{ "cache_recreated", F_INT, SHOW_NONZERO },
	{ "denied", F_INT, SHOW_NONZERO },
	{ "stalled", F_INT, SHOW_NONZERO },
	{ "damaged", F_INT, SHOW_NONZERO },
	{ "busy", F_INT, SHOW_VERBOSE },
	{ "pending", F_INT, SHOW_VERBOSE },
	{ "slots_lent", F_INT, SHOW_VERBOSE },
	{ "evicted", F_INT, SHOW_VERBOSE },
	{ "evicted_bytes", F_SIZE, SHOW_VERBOSE },
	{ "variant_builds", F_INT, SHOW_VERBOSE },
	{ "stats_since", F_TIME, SHOW_VERBOSE },
	{ "cache_problem", F_STR, SHOW_ALWAYS },
	{ "in_flight", F_INT, SHOW_ALWAYS },
	{ "queued", F_INT, SHOW_ALWAYS },
	{ "upstream", F_STR, SHOW_ALWAYS },
	{ "upstream_hits", F_INT, SHOW_ALWAYS },
	{ "upstream_publishes", F_INT, SHOW_VERBOSE },
	{ "upstream_waits", F_INT, SHOW_VERBOSE },
	{ "upstream_takeovers", F_INT, SHOW_VERBOSE },
	{ "upstream_errors", F_INT, SHOW_NONZERO },
	{ "upstream_looks", F_INT, SHOW_VERBOSE },
	{ "upstream_alias_hits", F_INT, SHOW_VERBOSE },
	{ "upstream_alias_records", F_INT, SHOW_VERBOSE },
	{ "upstream_alias_claims", F_INT, SHOW_VERBOSE },
	{ "upstream_alias_claim_waits", F_INT, SHOW_VERBOSE },
	{ "upstream_alias_claim_takeovers", F_INT, SHOW_VERBOSE },
	{ "job_nodes", F_INT, SHOW_VERBOSE },
	{ "upstream_looks_per_s", F_RATE, SHOW_VERBOSE },
};

/* "claim holders:" one line per process that holds claims or waits (the
 * status reply's claim_holders, those holding the most first), aligned
 * under the other names, so that a client that fills the node's claims
 * is named. */
static void print_holders(const cJSON *st, int width)
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(st, "claim_holders"), *h;
	const cJSON *lim = cJSON_GetObjectItemCaseSensitive(st, "claim_limits");
	const char *label = cli_counter_name("claim_holders");
	uint64_t most = 0, more = 0;
	bool first = true;

	cli_json_u64(lim, "process", &most);
	cJSON_ArrayForEach(h, arr) {
		uint64_t pid = 0, conns = 0, claims = 0, turns = 0, waits = 0;
		const char *name = cli_json_str(h, "name");

		cli_json_u64(h, "pid", &pid);
		cli_json_u64(h, "connections", &conns);
		cli_json_u64(h, "claims", &claims);
		cli_json_u64(h, "text_turns", &turns);
		cli_json_u64(h, "waits", &waits);
		/* The first line as cli_field starts one; the others under it. */
		if (first)
			printf("%s:%*s", label, width - (int)strlen(label) + 1, "");
		else
			printf("%*s", width + 2, "");
		first = false;
		printf("pid %llu", (unsigned long long)pid);
		if (name != NULL)
			printf(" (%s)", name);
		printf(": %llu claim%s", (unsigned long long)claims, claims == 1 ? "" : "s");
		if (turns > 0)
			printf(", %llu text turn%s", (unsigned long long)turns, turns == 1 ? "" : "s");
		if (waits > 0)
			printf(", %llu wait%s", (unsigned long long)waits, waits == 1 ? "" : "s");
		printf(" on %llu connection%s", (unsigned long long)conns, conns == 1 ? "" : "s");
		if (most > 0 && claims + turns >= most)
			printf(", the most a process may hold");
		putchar('\n');
	}
	if (!first && cli_json_u64(st, "claim_holders_more", &more) && more > 0)
		printf("%*sand %llu more process%s\n", width + 2, "", (unsigned long long)more,
		       more == 1 ? "" : "es");
}

/* Whether the status line of field i is shown (without -v: see field_show;
 * a member the daemon did not send never is). */
static bool status_shown(const cJSON *st, size_t i, bool verbose)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(st, status_fields[i].field);

	if (m == NULL)
		return false;
	switch (status_fields[i].show) {
	case SHOW_ALWAYS:
		return true;
	case SHOW_NONZERO:
		return verbose || !cJSON_IsNumber(m) || cJSON_GetNumberValue(m) != 0;
	default:
		return verbose;
	}
}

static void print_field(const cJSON *st, size_t i, int width)
{
	const char *field = status_fields[i].field;
	const char *name = cli_counter_name(field);
	uint64_t v, misses;
	const char *s;
	char buf[64];

	switch (status_fields[i].kind) {
	case F_STR:
		if ((s = cli_json_str(st, field)))
			cli_field(width, name, "%s", s);
		return;
	case F_HOLDERS:
		print_holders(st, width);
		return;
	case F_RATE: {
		const cJSON *r = cJSON_GetObjectItemCaseSensitive(st, field);
		if (cJSON_IsNumber(r))
			cli_field(width, name, "%.3g looks/s", r->valuedouble);
		return;
	}
	default:
		break;
	}
	if (!cli_json_u64(st, field, &v))
		return;
	switch (status_fields[i].kind) {
	case F_SIZE:
		cli_field(width, name, "%s", util_format_size(v, buf, sizeof(buf)));
		break;
	case F_AGE:
		cli_field(width, name, "%s", util_format_age((int64_t)v, buf, sizeof(buf)));
		break;
	case F_TIME:
		cli_field(width, name, "%s", cli_format_time((int64_t)v, buf, sizeof(buf)));
		break;
	case F_HITS:
		if (!cli_json_u64(st, "misses", &misses))
			misses = 0;
		cli_field(width, name, "%s", cli_format_hits(v, misses, buf, sizeof(buf)));
		break;
	default:
		cli_field(width, name, "%llu", (unsigned long long)v);
		break;
	}
}

/* A number of the status reply that status_fields does not list (a
 * counter newer than this table): shown with -v, after the others. */
static bool unlisted_number(const cJSON *m)
{
	if (!cJSON_IsNumber(m) || m->string == NULL)
		return false;
	for (size_t i = 0; i < sizeof(status_fields) / sizeof(status_fields[0]); i++)
		if (strcmp(status_fields[i].field, m->string) == 0)
			return false;
	return true;
}

static void print_status(const cJSON *st, bool verbose)
{
	const size_t n = sizeof(status_fields) / sizeof(status_fields[0]);
	const cJSON *m;
	int width = 0;

	/* Aligned to the names shown. */
	for (size_t i = 0; i < n; i++)
		if (status_shown(st, i, verbose) &&
		    (int)strlen(cli_counter_name(status_fields[i].field)) > width)
			width = (int)strlen(cli_counter_name(status_fields[i].field));
	cJSON_ArrayForEach(m, st)
		if (verbose && unlisted_number(m) && (int)strlen(cli_counter_name(m->string)) > width)
			width = (int)strlen(cli_counter_name(m->string));
	/* Members the daemon did not send are left out rather than guessed. */
	for (size_t i = 0; i < n; i++)
		if (status_shown(st, i, verbose))
			print_field(st, i, width);
	cJSON_ArrayForEach(m, st)
		if (verbose && unlisted_number(m))
			cli_field(width, cli_counter_name(m->string), "%.15g", m->valuedouble);
}

/* What the cache takes on disk, its stale entries and its writers (kilnd's
 * status reply: disk, key_formats, writers). */
static void print_cache(const cJSON *st, bool verbose)
{
	const cJSON *disk = cJSON_GetObjectItemCaseSensitive(st, "disk");
	const cJSON *kf = cJSON_GetObjectItemCaseSensitive(st, "key_formats");
	const cJSON *w = cJSON_GetObjectItemCaseSensitive(st, "writers"), *it;
	uint64_t e = 0, i = 0, o = 0, n = 0, b = 0, p = 0;
	char x[32], y[32], z[32];

	if (verbose && cli_json_u64(disk, "entries", &e) && cli_json_u64(disk, "index", &i) &&
	    cli_json_u64(disk, "other", &o))
		printf("on disk:        entries %s, index %s, logs and other files %s\n",
		       util_format_size(e, x, sizeof(x)), util_format_size(i, y, sizeof(y)),
		       util_format_size(o, z, sizeof(z)));
	static const char *const groups[] = { "older", "unknown" };
	for (size_t g = 0; g < 2; g++) {
		const cJSON *grp = cJSON_GetObjectItemCaseSensitive(kf, groups[g]);
		if (!cli_json_u64(grp, "entries", &n) || n == 0)
			continue;
		cli_json_u64(grp, "disk", &b);
		cli_json_u64(grp, "pinned", &p);
		printf("stale:          %llu %s (%s, %llu pinned) %s; kiln gc --stale removes them\n",
		       (unsigned long long)n, cli_entries_word(n), util_format_size(b, x, sizeof(x)),
		       (unsigned long long)p, g == 0 ? "of an older key format, never hit again"
		       : "from before kiln recorded key formats, not hit since");
	}
	const cJSON *newer = cJSON_GetObjectItemCaseSensitive(kf, "newer");
	if (cli_json_u64(newer, "entries", &n) && n > 0)
		printf("newer:          %llu %s of a newer kilnd's key format, kept\n",
		       (unsigned long long)n, cli_entries_word(n));
	/* Without -v only when more than one kilnd version wrote the cache. */
	if (cJSON_GetArraySize(w) == 0 || (!verbose && cJSON_GetArraySize(w) < 2))
		return;
	printf("written by:    ");
	cJSON_ArrayForEach(it, w) {
		int64_t last = 0;
		cli_json_i64(it, "last_start", &last);
		printf(" kilnd %s (last started %s)%s", cli_json_str(it, "version") ?
		       cli_json_str(it, "version") : "?", cli_format_time(last, x, sizeof(x)),
		       it->next != NULL ? "," : "");
	}
	printf("\n");
}

/* "failed build:" the latest failed builds of this kilnd's run, newest
 * first, each with what kiln log takes (the Slurm epilogue reads these). */
static void print_failed(const cJSON *st)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(st, "failed_builds"), *f;
	cJSON_ArrayForEach(f, a) {
		const char *name = cli_json_str(f, "name"), *rkey = cli_json_str(f, "rkey");
		if (name != NULL && rkey != NULL)
			printf("failed build:   %s (kiln log %s)\n", name, rkey);
	}
}

/* The toolchains the daemon knows, when it says: "  NAME = PATH (VERSION)". */
static void print_toolchains(const cJSON *st)
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(st, "toolchains");
	const cJSON *t;

	if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) == 0)
		return;
	printf("toolchains:\n");
	cJSON_ArrayForEach(t, arr) {
		const char *name = cli_json_str(t, "name");
		const char *path = cli_json_str(t, "path");
		const char *version = cli_json_str(t, "version");

		const cJSON *arch = cJSON_GetObjectItemCaseSensitive(t, "cuda_arch");
		const char *observe = cli_json_str(t, "observe");

		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(t, "named")))
			printf("  %s (named by a request)", name ? name : "?");
		else
			printf("  %s = %s", name ? name : "?", path ? path : "?");
		if (version && *version)
			printf(" (%s)", version);
		if (cJSON_IsString(arch))
			printf(", builds for %s", arch->valuestring);
		else if (cJSON_IsNull(arch))
			printf(", no default GPU architecture");
		if (observe)
			printf(", %s", strcmp(observe, "preload") == 0
			       ? "inputs recorded by observation (kiln-observe.so)"
			       : "not observable: builds are served and not cached");
		putchar('\n');
	}
}

/* "flights:" the builds in flight by state (daemon/flight/build.h). */
static void print_flights(const cJSON *st)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(st, "flights"), *it;
	if (!cJSON_IsObject(f))
		return;
	printf("flights:       ");
	cJSON_ArrayForEach(it, f)
		printf(" %s %lld%s", it->string, (long long)cJSON_GetNumberValue(it),
		       it->next != NULL ? "," : "");
	printf("\n");
}

/* "confinement:" whether compilers may write only in their build directory. */
static void print_confinement(const cJSON *st)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(st, "confinement");
	int64_t abi;

	if (!cJSON_IsObject(c))
		return;
	if (cli_json_true(c, "landlock") && cli_json_i64(c, "abi", &abi))
		printf("confinement:    compilers write only in their build directory "
		       "(Landlock ABI %lld)\n", (long long)abi);
	else
		printf("confinement:    none (%s); argument checks only\n",
		       cli_json_str(c, "why") ? cli_json_str(c, "why") : "?");
	printf("toolchain code: %s\n", cli_json_true(c, "toolchain_code")
	       ? "client arguments may load code into the toolchain (--allow-toolchain-code)"
	       : "refused (-fplugin=, -specs=, -B, --sysroot, ...)");
}

/* "gpus:" with one line per GPU, or why there is none (only when the daemon
 * has an nvcc toolchain and so asked the driver). */
static void print_gpus(const cJSON *st)
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(st, "gpus");
	const char *note = cli_json_str(st, "gpu_note");
	const cJSON *g;
	uint64_t driver = 0;

	if (cJSON_GetArraySize(arr) == 0) {
		if (note)
			printf("gpus:           none (%s)\n", note);
		return;
	}
	cli_json_u64(st, "cuda_driver", &driver);
	printf("gpus:           driver %llu.%llu\n", (unsigned long long)driver / 1000,
	       (unsigned long long)(driver % 1000) / 10);
	cJSON_ArrayForEach(g, arr) {
		uint64_t index = 0;

		cli_json_u64(g, "index", &index);
		printf("  %llu: %s (%s)\n", (unsigned long long)index, cli_json_str(g, "name"),
		       cli_json_str(g, "arch"));
	}
}

static const struct cli_optdef status_opts[] = {
	{ "verbose", 'v', false, 1 },
	{ NULL, 0, false, 0 },
};

int cmd_status(struct cli *cli, int argc, char **argv)
{
	struct cli_conn c;
	struct msg_request req;
	cJSON *reply = NULL;
	bool verbose;
	int status, nrefs;

	status = cli_parse_flag_refs(cli, argc, argv, status_opts, &verbose, NULL, 0, &nrefs);
	if (status >= 0)
		return status;
	if (cli_conn_require(cli, &c) < 0)
		return CLI_EXIT_ERROR;
	status = CLI_EXIT_ERROR;
	cli_request_init(&req, OP_STATUS);
	if (call_report(cli, &c, &req, &reply) < 0)
		goto cleanup;
	if (!cli->json) {
		print_status(reply, verbose);
		print_cache(reply, verbose);
		print_failed(reply);
		if (verbose)
			print_flights(reply);
		print_toolchains(reply);
		print_confinement(reply);
		print_gpus(reply);
	}
	status = cli_finish_stdout(CLI_EXIT_OK);

cleanup:
	cJSON_Delete(reply);
	cli_conn_close(&c);
	return status;
}

/* Sends op for each ref on one connection; goes on after a failed one, as
 * rm(1) does, and reports failure in the exit status. */
static int ref_ops(struct cli *cli, enum msg_op op, const char *verb, const char **refs,
		   int nrefs)
{
	struct cli_conn c;
	cJSON *out = NULL;
	cJSON *reply = NULL;
	int status = CLI_EXIT_ERROR;
	int failed = 0;

	if (cli_conn_require(cli, &c) < 0)
		return status;
	out = cJSON_CreateArray();
	if (!out) {
		cli_error("out of memory");
		goto cleanup;
	}
	for (int i = 0; i < nrefs; i++) {
		struct msg_request req;
		const char *key;
		cJSON *item;

		cli_request_init(&req, op);
		req.ref = (char *)refs[i];
		if (cli_call(cli, &c, &req, &reply) < 0)
			goto cleanup;
		if (cli_reply_check(reply, refs[i]) != ERR_NONE) {
			failed++;
			cJSON_Delete(reply);
			reply = NULL;
			continue;
		}
		key = cli_json_str(reply, "key");
		if (!key)
			key = refs[i];
		if (!cli->json)
			printf("%s %s\n", verb, key);
		item = cJSON_CreateObject();
		if (!item || !cJSON_AddItemToArray(out, item) ||
		    !cJSON_AddStringToObject(item, "ref", refs[i]) ||
		    !cJSON_AddStringToObject(item, "key", key) ||
		    (op != OP_REMOVE && !cJSON_AddBoolToObject(item, "pinned", op == OP_PIN))) {
			cli_error("out of memory");
			goto cleanup;
		}
		cJSON_Delete(reply);
		reply = NULL;
	}
	/* pin and unpin take one REF and print one object; rm prints an array. */
	if (cli->json && cli_print_json(op == OP_REMOVE ? out : cJSON_GetArrayItem(out, 0)) < 0)
		goto cleanup;
	status = cli_finish_stdout(failed ? CLI_EXIT_ERROR : CLI_EXIT_OK);

cleanup:
	cJSON_Delete(reply);
	cJSON_Delete(out);
	cli_conn_close(&c);
	return status;
}

/* rm, pin and unpin: parses the REFs and runs op on them. rm takes any
 * number of REFs, pin and unpin exactly one; the count is checked only after
 * parsing, so that --help anywhere still prints the help. */
static int ref_command(struct cli *cli, int argc, char **argv, enum msg_op op,
		       const char *verb)
{
	const char **refs;
	int status, nrefs;

	refs = calloc((size_t)argc + 1, sizeof(*refs));
	if (!refs) {
		cli_error("out of memory");
		return CLI_EXIT_ERROR;
	}
	status = cli_parse_refs(cli, argc, argv, refs, -1, &nrefs);
	if (status < 0 && op == OP_REMOVE && nrefs == 0)
		status = cli_usage_error(cli, "rm needs at least one REF");
	else if (status < 0 && op != OP_REMOVE && nrefs != 1)
		status = cli_usage_error(cli, "%s needs exactly one REF", cli->cmd);
	if (status < 0)
		status = ref_ops(cli, op, verb, refs, nrefs);
	free(refs);
	return status;
}

int cmd_rm(struct cli *cli, int argc, char **argv)
{
	return ref_command(cli, argc, argv, OP_REMOVE, "removed");
}

int cmd_pin(struct cli *cli, int argc, char **argv)
{
	return ref_command(cli, argc, argv, OP_PIN, "pinned");
}

int cmd_unpin(struct cli *cli, int argc, char **argv)
{
	return ref_command(cli, argc, argv, OP_UNPIN, "unpinned");
}

enum { OPT_MAX_SIZE = 1, OPT_STALE };

static const struct cli_optdef gc_opts[] = {
	{ "max-size", 0, true, OPT_MAX_SIZE },
	{ "stale", 0, false, OPT_STALE },
	{ NULL, 0, false, 0 },
};

int cmd_gc(struct cli *cli, int argc, char **argv)
{
	struct cli_parse p;
	struct cli_conn c;
	struct msg_request req;
	cJSON *reply = NULL;
	const char *val;
	uint64_t max_size = 0, removed = 0, freed = 0, entries = 0, bytes = 0, pinned = 0;
	bool have_max = false, stale = false;
	char a[32], b[32];
	int status = CLI_EXIT_ERROR;
	int id;

	cli_parse_init(&p, cli, argc, argv);
	while ((id = cli_next(&p, gc_opts, &val)) != CLI_END) {
		if (id == CLI_STOP)
			return p.status;
		if (id == CLI_POS)
			return cli_usage_error(cli, "gc takes no arguments; did you mean "
					       "--max-size %s?", val);
		if (id == OPT_STALE) {
			stale = true;
			continue;
		}
		if (util_parse_size(val, &max_size) < 0 || max_size > (uint64_t)MSG_MAX_ID)
			return cli_usage_error(cli, "invalid size '%s' for --max-size "
					       "(examples: 512M, 1.5G, 4096)", val);
		have_max = true;
	}

	if (stale && have_max)
		return cli_usage_error(cli, "--stale and --max-size do not go together");
	if (cli_conn_require(cli, &c) < 0)
		return status;
	cli_request_init(&req, OP_GC);
	if (have_max)
		req.max_size = (int64_t)max_size;
	req.stale = stale;
	if (call_report(cli, &c, &req, &reply) < 0)
		goto cleanup;
	if (!cli->json) {
		cli_json_u64(reply, "removed", &removed);
		cli_json_u64(reply, "freed", &freed);
		cli_json_u64(reply, "entries", &entries);
		cli_json_u64(reply, "bytes", &bytes);
		if (cli_json_u64(reply, "pinned_removed", &pinned) && pinned > 0)
			fprintf(stderr, "kiln: warning: %llu of them were pinned: entries of an older "
				"or unknown key format are never hit, pinned or not\n",
				(unsigned long long)pinned);
		printf("removed %llu %s%s, freed %s on disk; cache now %llu %s, %s",
		       (unsigned long long)removed, stale ? "stale " : "",
		       cli_entries_word(removed), util_format_size(freed, a, sizeof(a)),
		       (unsigned long long)entries, cli_entries_word(entries),
		       util_format_size(bytes, b, sizeof(b)));
		uint64_t disk = 0;
		if (cli_json_u64(reply, "disk", &disk))
			printf(" (%s on disk)", util_format_size(disk, a, sizeof(a)));
		printf("\n");
		uint64_t logs = 0;
		if (cli_json_u64(reply, "failed_logs_removed", &logs) && logs > 0)
			printf("removed %llu old %s of failed builds\n", (unsigned long long)logs,
			       logs == 1 ? "log" : "logs");
	}
	status = cli_finish_stdout(CLI_EXIT_OK);

cleanup:
	cJSON_Delete(reply);
	cli_conn_close(&c);
	return status;
}

int cmd_verify(struct cli *cli, int argc, char **argv)
{
	struct cli_conn c;
	struct msg_request req;
	cJSON *reply = NULL;
	const cJSON *item;
	uint64_t checked = 0, ok = 0, removed = 0, unverified = 0, strays = 0;
	int status = CLI_EXIT_ERROR, nrefs;

	status = cli_parse_refs(cli, argc, argv, NULL, 0, &nrefs);
	if (status != -1)
		return status;
	status = CLI_EXIT_ERROR;
	if (cli_conn_require(cli, &c) < 0)
		return status;
	cli_request_init(&req, OP_VERIFY);
	if (call_report(cli, &c, &req, &reply) < 0)
		goto cleanup;
	cli_json_u64(reply, "checked", &checked);
	cli_json_u64(reply, "intact", &ok);
	cli_json_u64(reply, "removed", &removed);
	cli_json_u64(reply, "unverified", &unverified);
	cli_json_u64(reply, "strays_removed", &strays);
	if (!cli->json) {
		cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(reply, "damaged"))
			printf("damaged  %s  %s\n", cli_json_str(item, "key"), cli_json_str(item, "problem"));
		cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(reply, "strays"))
			printf("stray    objects/%s  (not written by kiln; removed)\n",
			       cJSON_GetStringValue(item));
		printf("checked %llu %s: %llu ok, %llu damaged and removed",
		       (unsigned long long)checked, cli_entries_word(checked), (unsigned long long)ok,
		       (unsigned long long)removed);
		if (unverified > 0)
			printf(" (%llu without a recorded SHA-256: size checked only)",
			       (unsigned long long)unverified);
		if (strays > 0)
			printf("; %llu stray %s removed", (unsigned long long)strays,
			       strays == 1 ? "file" : "files");
		printf("\n");
	}
	status = cli_finish_stdout(checked == ok ? CLI_EXIT_OK : CLI_EXIT_ERROR);

cleanup:
	cJSON_Delete(reply);
	cli_conn_close(&c);
	return status;
}

/* Waits until the daemon closed our connection, which it does last thing
 * before exiting. Returns 0, or -ETIMEDOUT at the deadline. */
static int wait_closed(struct cli_conn *c, uint64_t deadline)
{
	for (;;) {
		struct pollfd pfd = { .fd = c->wc.fd, .events = POLLIN };
		uint64_t now = util_now_ns();
		char *frame = NULL;
		size_t len;
		int rc;

		if (now >= deadline)
			return -ETIMEDOUT;
		/* Bytes already buffered would not wake poll. */
		if (c->wc.rlen <= c->wc.roff) {
			rc = poll(&pfd, 1, (int)((deadline - now) / 1000000 + 1));
			if (rc < 0 && errno != EINTR)
				return -errno;
			if (rc <= 0)
				continue;
		}
		rc = wire_recv_frame(&c->wc, &frame, &len);
		free(frame);
		if (rc < 0)
			return 0;
	}
}

/*
 * Waits until the daemon has let go of its socket's lock, the last thing it
 * does before exiting: only then may a new kilnd start at once. A shared
 * lock fails while kilnd holds its exclusive one. A process that exited but
 * was not reaped yet still answers kill(pid, 0), so that test only helps.
 */
static int wait_gone(const char *socket, int64_t pid, uint64_t deadline)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };
	char lock[PATH_MAX + 8];

	snprintf(lock, sizeof(lock), "%s.lock", socket);
	while (util_now_ns() < deadline) {
		int fd = open(lock, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return 0;
		int rc = flock(fd, LOCK_SH | LOCK_NB);
		close(fd);
		if (rc == 0)
			return 0;
		if (pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH)
			return 0;
		nanosleep(&ts, NULL);
	}
	return -ETIMEDOUT;
}

int cmd_stop(struct cli *cli, int argc, char **argv)
{
	struct cli_conn c;
	struct msg_request req;
	cJSON *reply = NULL;
	cJSON *out = NULL;
	const cJSON *err;
	uint64_t deadline;
	int status;

	status = parse_and_connect(cli, argc, argv, &c);
	if (status >= 0)
		return status;
	status = CLI_EXIT_ERROR;
	cli_request_init(&req, OP_SHUTDOWN);
	if (cli_call(cli, &c, &req, &reply) < 0)
		goto cleanup;
	/* A daemon that is already stopping is waited for like one we stopped. */
	err = cJSON_GetObjectItemCaseSensitive(reply, "error");
	if (!cli_json_true(reply, "ok") &&
	    msg_err_parse(cli_json_str(err, "code")) != ERR_SHUTTING_DOWN) {
		cli_reply_check(reply, NULL);
		goto cleanup;
	}
	deadline = util_now_ns() + (uint64_t)STOP_WAIT_MS * 1000000;
	if (wait_closed(&c, deadline) < 0 || wait_gone(cli->socket, c.pid, deadline) < 0) {
		cli_error("kilnd (pid %lld) did not stop within %d s", (long long)c.pid,
			  STOP_WAIT_MS / 1000);
		goto cleanup;
	}
	if (cli->json) {
		out = cJSON_CreateObject();
		if (!out || !cJSON_AddNumberToObject(out, "pid", (double)c.pid) ||
		    !cJSON_AddBoolToObject(out, "stopped", true) || cli_print_json(out) < 0)
			goto cleanup;
	} else if (c.pid > 0) {
		printf("kilnd (pid %lld) stopped\n", (long long)c.pid);
	} else {
		printf("kilnd stopped\n");
	}
	status = cli_finish_stdout(CLI_EXIT_OK);

cleanup:
	cJSON_Delete(out);
	cJSON_Delete(reply);
	cli_conn_close(&c);
	return status;
}
