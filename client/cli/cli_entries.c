/*
 * Commands of the kiln CLI that read cache entries: ls, show and log. They
 * ask kilnd when it runs and otherwise open the store read-only, so that a
 * user can look into a cache after the job that used it has ended.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "depkind.h"
#include "entry_codec.h"
#include "store.h"
#include "util.h"

/* Largest log --json reads into memory; kilnd caps logs far below this. */
#define LOG_JSON_MAX ((size_t)64 << 20)

int cli_open_offline(const struct cli *cli, bool write, struct store **out)
{
	char err[256] = "";
	char *index = NULL;
	int rc;

	*out = NULL;
	fflush(stdout);
	fprintf(stderr, "kiln: kilnd is not running; %s %s%s\n", write ? "writing" : "reading",
		cli->cache_dir, write ? " directly" : " read-only");
	if (asprintf(&index, "%s/index.db", cli->cache_dir) < 0) {
		cli_error("out of memory");
		return -ENOMEM;
	}
	rc = access(index, F_OK) < 0 && errno == ENOENT ? 0 : 1;
	free(index);
	if (rc == 0 && (cli->cache_dir_given || cli->cache_dir_named)) {
		bool dir = access(cli->cache_dir, F_OK) == 0;
		cli_error("%s%s %s; give the --cache-dir kilnd uses (kiln status shows it)",
			  cli->cache_dir_given ? "" : "$KILN_CACHE_DIR ", cli->cache_dir,
			  dir ? "holds no kiln cache (no index.db)" : "does not exist");
		return -ENOENT;
	}
	if (rc == 0)
		return 0;
	rc = store_open(cli->cache_dir, write ? 0 : STORE_READONLY, out, err, sizeof(err));
	if (rc < 0)
		cli_error("cannot read the cache at %s: %s", cli->cache_dir,
			  *err ? err : strerror(-rc));
	return rc;
}

/* Sends req to kilnd on c, closes c and checks that the daemon said ok (an
 * error names ref, which may be NULL). Returns 0 with *reply owned by the
 * caller, or a negative errno after printing why; *reply may still need
 * freeing then. */
static int ask_kilnd(const struct cli *cli, struct cli_conn *c, struct msg_request *req,
		     const char *ref, cJSON **reply)
{
	int rc;

	rc = cli_call(cli, c, req, reply);
	cli_conn_close(c);
	if (rc < 0)
		return rc;
	return cli_reply_check(*reply, ref) == ERR_NONE ? 0 : -EPROTO;
}

/* Adds the store's entries to arr as protocol entry objects. */
static int offline_list(struct store *s, cJSON *arr)
{
	struct store_entry *list = NULL;
	size_t n = 0;
	int rc;

	rc = store_list(s, &list, &n);
	if (rc < 0) {
		cli_error("cannot list the cache at %s: %s", store_dir(s), strerror(-rc));
		return rc;
	}
	for (size_t i = 0; i < n; i++) {
		cJSON *item = store_entry_json(s, &list[i], false);

		if (!item || !cJSON_AddItemToArray(arr, item)) {
			cJSON_Delete(item);
			cli_error("out of memory");
			rc = -ENOMEM;
			break;
		}
	}
	store_entries_free(list, n);
	return rc;
}

/* The entries as a JSON array (owned by the caller), from kilnd when it runs,
 * else from the store. Returns 0 or a negative errno after printing why. */
static int fetch_list(const struct cli *cli, cJSON **out)
{
	struct cli_conn c;
	struct msg_request req;
	struct store *s = NULL;
	cJSON *reply = NULL;
	cJSON *arr = NULL;
	int rc;

	*out = NULL;
	rc = cli_conn_open(cli, &c);
	if (rc == 0) {
		cli_request_init(&req, OP_LIST);
		rc = ask_kilnd(cli, &c, &req, NULL, &reply);
		if (rc < 0)
			goto cleanup;
		rc = -EPROTO;
		arr = cJSON_DetachItemFromObjectCaseSensitive(reply, "entries");
		if (!cJSON_IsArray(arr)) {
			cli_error("bad reply from kilnd at %s: no entries array", cli->socket);
			goto cleanup;
		}
	} else if (rc == -ECONNREFUSED) {
		rc = cli_open_offline(cli, false, &s);
		if (rc < 0)
			goto cleanup;
		arr = cJSON_CreateArray();
		rc = -ENOMEM;
		if (!arr) {
			cli_error("out of memory");
			goto cleanup;
		}
		if (s && (rc = offline_list(s, arr)) < 0)
			goto cleanup;
	} else {
		goto cleanup;
	}
	*out = arr;
	arr = NULL;
	rc = 0;

cleanup:
	if (s)
		store_close(s);
	cJSON_Delete(arr);
	cJSON_Delete(reply);
	return rc;
}

static int offline_entry(const struct cli *cli, const char *ref, cJSON **out)
{
	struct store_entry e;
	struct store *s = NULL;
	int rc;

	memset(&e, 0, sizeof(e));
	rc = cli_open_offline(cli, false, &s);
	if (rc < 0)
		return rc;
	rc = s ? store_resolve(s, ref, &e) : -ENOENT;
	if (rc == -ENOTUNIQ) {
		char keys[8][65], list[8 * 14 + 16] = "";
		size_t n = 0;
		(void)store_keys_with_prefix(s, ref, keys, 8, &n);
		bool label = n == 0;
		if (label)
			(void)store_keys_with_label(s, ref, keys, 8, &n);
		for (size_t i = 0; i < n; i++)
			snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%.12s",
				 i ? ", " : "", keys[i]);
		cli_error_code("ambiguous");
		cli_error("\"%s\" %s several entries (%s%s); %s", ref,
			  label ? "labels" : "matches", list, n == 8 ? ", ..." : "",
			  label ? "name one by its key" : "give more digits");
		goto cleanup;
	}
	if (rc == -ENOENT) {
		cli_ref_error(ERR_NOT_FOUND, ref);
		goto cleanup;
	}
	if (rc < 0) {
		cli_error("cannot read the cache at %s: %s", cli->cache_dir, strerror(-rc));
		goto cleanup;
	}
	*out = store_entry_json(s, &e, true);
	if (!*out) {
		cli_error("out of memory");
		rc = -ENOMEM;
	}

cleanup:
	store_entry_free(&e);
	if (s)
		store_close(s);
	return rc;
}

/* One entry with its details (args, sources, deps, log), from kilnd when it
 * runs, else from the store. Returns 0 or a negative errno after printing. */
static int fetch_entry(const struct cli *cli, const char *ref, cJSON **out)
{
	struct cli_conn c;
	struct msg_request req;
	cJSON *reply = NULL;
	int rc;

	*out = NULL;
	rc = cli_conn_open(cli, &c);
	if (rc == -ECONNREFUSED)
		return offline_entry(cli, ref, out);
	if (rc < 0)
		return rc;
	cli_request_init(&req, OP_SHOW);
	req.ref = (char *)ref;
	rc = ask_kilnd(cli, &c, &req, ref, &reply);
	if (rc < 0)
		goto cleanup;
	*out = cJSON_DetachItemFromObjectCaseSensitive(reply, "entry");
	if (!cJSON_IsObject(*out)) {
		cli_error("bad reply from kilnd at %s: no entry object", cli->socket);
		cJSON_Delete(*out);
		*out = NULL;
		rc = -EPROTO;
	}

cleanup:
	cJSON_Delete(reply);
	return rc;
}

/* Parses "CMD REF" of show and log and fetches that entry into *e (owned by
 * the caller). Returns -1 to go on, or the exit status. */
static int parse_and_fetch(struct cli *cli, int argc, char **argv, cJSON **e)
{
	const char *ref = NULL;
	int status, nrefs;

	*e = NULL;
	status = cli_parse_refs(cli, argc, argv, &ref, 1, &nrefs);
	if (status < 0 && nrefs == 0)
		status = cli_usage_error(cli, "%s needs a REF (a key, a key prefix or an alias)",
					 cli->cmd);
	if (status >= 0)
		return status;
	return fetch_entry(cli, ref, e) < 0 ? CLI_EXIT_ERROR : -1;
}

/* The columns of ls, as strings, so that their widths can be measured. */
enum { C_KEY, C_SIZE, C_USES, C_LAST, C_BUILD, C_PIN, C_ALIAS, C_LABEL, C__COUNT };

static const char *const ls_header[C__COUNT] = {
	"KEY", "SIZE", "USES", "LAST USED", "BUILD", "PIN", "ALIAS", "LABEL",
};
/* Numbers read best aligned on the right. */
static const bool ls_right[C__COUNT] = { false, true, true, false, true, false, false, false };

struct ls_row {
	char key[13];
	char alias[MSG_MAX_ALIAS + 1];
	char size[32];
	char uses[24];
	char last[40];
	char build[32];
	const char *cell[C__COUNT];
};

static void ls_fill(struct ls_row *r, const cJSON *e, int64_t now, uint64_t *total, bool wide)
{
	const char *key = cli_json_str(e, "key");
	const char *alias = cli_json_str(e, "alias");
	const char *label = cli_json_str(e, "label");
	uint64_t v;
	int64_t t;

	snprintf(r->key, sizeof(r->key), "%.12s", key ? key : "-");
	strcpy(r->size, "-");
	strcpy(r->uses, "-");
	strcpy(r->last, "-");
	strcpy(r->build, "-");
	if (cli_json_u64(e, "size", &v)) {
		util_format_size(v, r->size, sizeof(r->size));
		*total += v;
	}
	if (cli_json_u64(e, "uses", &v))
		snprintf(r->uses, sizeof(r->uses), "%llu", (unsigned long long)v);
	if (cli_json_i64(e, "last_used", &t))
		cli_format_ago(t, now, r->last, sizeof(r->last));
	if (cli_json_u64(e, "build_ms", &v))
		cli_format_ms(v, r->build, sizeof(r->build));
	r->cell[C_KEY] = r->key;
	r->cell[C_SIZE] = r->size;
	r->cell[C_USES] = r->uses;
	r->cell[C_LAST] = r->last;
	r->cell[C_BUILD] = r->build;
	r->cell[C_PIN] = cli_json_true(e, "pinned") ? "*" : "";
	r->cell[C_ALIAS] = !alias || !*alias ? "-"
			   : wide ? alias : cli_short_alias(alias, r->alias, sizeof(r->alias));
	r->cell[C_LABEL] = label && *label ? label : "-";
}

static void ls_print_row(const char *const *cell, const int *width)
{
	for (int c = 0; c < C__COUNT; c++) {
		/* The last column is not padded, to leave no trailing blanks. */
		if (c == C__COUNT - 1)
			printf("%s\n", cell[c]);
		else if (ls_right[c])
			printf("%*s  ", width[c], cell[c]);
		else
			printf("%-*s  ", width[c], cell[c]);
	}
}

static int ls_print(const cJSON *arr, bool wide)
{
	int n = cJSON_GetArraySize(arr);
	struct ls_row *rows;
	int width[C__COUNT];
	int64_t now = util_wall_s();
	uint64_t total = 0;
	char buf[32];
	int i = 0;
	const cJSON *e;

	if (n == 0) {
		puts("no entries");
		return 0;
	}
	rows = calloc((size_t)n, sizeof(*rows));
	if (!rows) {
		cli_error("out of memory");
		return -ENOMEM;
	}
	for (int c = 0; c < C__COUNT; c++)
		width[c] = (int)strlen(ls_header[c]);
	cJSON_ArrayForEach(e, arr) {
		ls_fill(&rows[i], e, now, &total, wide);
		for (int c = 0; c < C__COUNT; c++)
			if ((int)strlen(rows[i].cell[c]) > width[c])
				width[c] = (int)strlen(rows[i].cell[c]);
		i++;
	}
	ls_print_row(ls_header, width);
	for (i = 0; i < n; i++)
		ls_print_row(rows[i].cell, width);
	printf("%d %s, %s total\n", n, cli_entries_word((uint64_t)n),
	       util_format_size(total, buf, sizeof(buf)));
	free(rows);
	return 0;
}

static const struct cli_optdef ls_opts[] = {
	{ "wide", 'w', false, 1 },
	{ NULL, 0, false, 0 },
};

int cmd_ls(struct cli *cli, int argc, char **argv)
{
	cJSON *arr = NULL;
	bool wide;
	int status, nrefs;

	status = cli_parse_flag_refs(cli, argc, argv, ls_opts, &wide, NULL, 0, &nrefs);
	if (status >= 0)
		return status;
	status = CLI_EXIT_ERROR;
	if (fetch_list(cli, &arr) < 0)
		goto cleanup;
	if ((cli->json ? cli_print_json(arr) : ls_print(arr, wide)) < 0)
		goto cleanup;
	status = cli_finish_stdout(CLI_EXIT_OK);

cleanup:
	cJSON_Delete(arr);
	return status;
}

/* Prints "name:" and a list member one item per line, indented; "-" when
 * it is empty or absent. Items may be strings or objects with a "path". */
static void show_list(int width, const char *name, const cJSON *list)
{
	const cJSON *item;

	if (cJSON_GetArraySize(list) == 0) {
		cli_field(width, name, "-");
		return;
	}
	printf("%s:\n", name);
	cJSON_ArrayForEach(item, list) {
		const char *s = cJSON_IsString(item) ? item->valuestring
						     : cli_json_str(item, "path");

		printf("  %s\n", s ? s : "?");
	}
}

/* The kinds of dependency the short form lists, in this order; "absent"
 * and "exists" (paths probed) it only counts. */
static const struct {
	enum dep_kind kind;
	const char *title;
	bool inline_names;   /* names on one wrapped line rather than one a line */
} dep_groups[] = {
	{ DEP_FILE, "files read", false },
	{ DEP_LISTING, "directories listed", false },
	{ DEP_ENV, "environment variables read", true },
	{ DEP_SEARCH, "programs looked up on PATH", true },
};

/* Dependency i's kind (-1: one this kiln does not know), and its name. */
static int dep_kind(const cJSON *kinds, int i, const char **name)
{
	const char *k = cJSON_GetStringValue(cJSON_GetArrayItem(kinds, i));

	if (k == NULL)
		k = dep_kind_name(DEP_FILE);   /* entries recorded before kinds were */
	if (name != NULL)
		*name = k;
	return dep_kind_parse(k);
}

/* One group of dependencies of kind: "  TITLE (N):" and its paths, one a
 * line, or its names wrapped on lines of at most 80 columns. */
static void show_dep_group(const cJSON *paths, const cJSON *kinds, int n, size_t g)
{
	int count = 0, col = 0;

	for (int i = 0; i < n; i++)
		count += dep_kind(kinds, i, NULL) == (int)dep_groups[g].kind;
	if (count == 0)
		return;
	col = printf("  %s (%d):", dep_groups[g].title, count);
	for (int i = 0; i < n; i++) {
		const char *p = cJSON_GetStringValue(cJSON_GetArrayItem(paths, i));

		if (dep_kind(kinds, i, NULL) != (int)dep_groups[g].kind)
			continue;
		if (!dep_groups[g].inline_names)
			printf("\n    %s", p ? p : "?");
		else if (col + 1 + (int)strlen(p ? p : "?") > 80 && col > 4)
			col = printf("\n    %s", p ? p : "?") - 1;
		else
			col += printf(" %s", p ? p : "?");
	}
	putchar('\n');
}

/* The short form: the dependencies grouped by kind, the paths that were
 * only probed (absent, or found without being read: a PATH search tries
 * every directory) counted; any kind this kiln does not know listed. */
static void show_deps_short(const cJSON *paths, const cJSON *kinds, int n)
{
	int absent = 0, exists = 0;

	for (size_t g = 0; g < sizeof(dep_groups) / sizeof(dep_groups[0]); g++)
		show_dep_group(paths, kinds, n, g);
	for (int i = 0; i < n; i++) {
		const char *k;
		int kind = dep_kind(kinds, i, &k);
		bool known = kind == DEP_ABSENT || kind == DEP_EXISTS;

		absent += kind == DEP_ABSENT;
		exists += kind == DEP_EXISTS;
		for (size_t g = 0; g < sizeof(dep_groups) / sizeof(dep_groups[0]); g++)
			known |= kind == (int)dep_groups[g].kind;
		const char *p = cJSON_GetStringValue(cJSON_GetArrayItem(paths, i));
		if (!known)
			printf("  %s (%s)\n", p ? p : "?", k);
	}
	if (absent + exists > 0)
		printf("  %d paths probed: %d absent, %d found without being read "
		       "(--deps lists them)\n", absent + exists, absent, exists);
}

/* "deps (N, observed: ...):", then the short form, or with all (--deps)
 * one line per dependency, its kind after all but files' paths ("absent":
 * looked for and not found). */
static void show_deps(int width, const cJSON *e, bool all)
{
	const cJSON *paths = cJSON_GetObjectItemCaseSensitive(e, "deps");
	const cJSON *kinds = cJSON_GetObjectItemCaseSensitive(e, "dep_kinds");
	const char *source = cli_json_str(e, "deps_source");
	int n = cJSON_GetArraySize(paths);

	if (n == 0) {
		cli_field(width, "deps", "- (%s)", source ? source : "?");
		return;
	}
	printf("deps (%d, %s):\n", n, source && strcmp(source, "observed") == 0
	       ? "observed: every file the toolchain read or looked for"
	       : "from the compiler's dependency files only");
	if (!all) {
		show_deps_short(paths, kinds, n);
		return;
	}
	for (int i = 0; i < n; i++) {
		const char *p = cJSON_GetStringValue(cJSON_GetArrayItem(paths, i));
		const char *k;

		if (dep_kind(kinds, i, &k) == DEP_FILE)
			printf("  %s\n", p ? p : "?");
		else
			printf("  %s (%s)\n", p ? p : "?", k);
	}
}

static const char *str_or_dash(const cJSON *e, const char *name)
{
	const char *s = cli_json_str(e, name);

	return s && *s ? s : "-";
}

static void show_print(const cJSON *e, bool all_deps)
{
	const int w = 9; /* strlen("toolchain") and strlen("last used") */
	int64_t now = util_wall_s();
	char a[64], b[64];
	uint64_t v;
	int64_t t;

	cli_field(w, "key", "%s", str_or_dash(e, "key"));
	cli_field(w, "path", "%s", str_or_dash(e, "path"));
	if (cli_json_str(e, "log"))
		cli_field(w, "log", "%s", cli_json_str(e, "log"));
	cli_field(w, "label", "%s", str_or_dash(e, "label"));
	cli_field(w, "alias", "%s", str_or_dash(e, "alias"));
	cli_field(w, "toolchain", "%s", str_or_dash(e, "toolchain"));
	cli_field(w, "output", "%s", str_or_dash(e, "output"));
	if (cli_json_u64(e, "size", &v))
		cli_field(w, "size", "%s (%llu bytes)", util_format_size(v, a, sizeof(a)),
			  (unsigned long long)v);
	/* the object's SHA-256, which verify and every first serve check */
	cli_field(w, "sha256", "%s", cli_json_str(e, "sha256") != NULL &&
		  cli_json_str(e, "sha256")[0] != '\0' ? cli_json_str(e, "sha256")
		  : "- (not recorded: an entry from before index schema 3)");
	if (cli_json_i64(e, "created", &t))
		cli_field(w, "created", "%s", cli_format_time(t, a, sizeof(a)));
	if (cli_json_i64(e, "last_used", &t))
		cli_field(w, "last used", "%s (%s)", cli_format_time(t, a, sizeof(a)),
			  cli_format_ago(t, now, b, sizeof(b)));
	if (cli_json_u64(e, "uses", &v))
		cli_field(w, "uses", "%llu", (unsigned long long)v);
	if (cli_json_u64(e, "build_ms", &v))
		cli_field(w, "build", "%s", cli_format_ms(v, a, sizeof(a)));
	cli_field(w, "pinned", "%s", cli_json_true(e, "pinned") ? "yes" : "no");
	show_list(w, "args", cJSON_GetObjectItemCaseSensitive(e, "args"));
	show_list(w, "sources", cJSON_GetObjectItemCaseSensitive(e, "sources"));
	show_deps(w, e, all_deps);
}

/* The command of one entry: parses the arguments, fetches the entry and runs
 * fn on it (0, or -1 after it said why). */
static int with_entry(struct cli *cli, int argc, char **argv,
		      int (*fn)(struct cli *cli, const cJSON *e))
{
	cJSON *e = NULL;
	int status = parse_and_fetch(cli, argc, argv, &e);

	if (status >= 0)
		return status;
	status = fn(cli, e) < 0 ? CLI_EXIT_ERROR : cli_finish_stdout(CLI_EXIT_OK);
	cJSON_Delete(e);
	return status;
}

static const struct cli_optdef show_opts[] = {
	{ "deps", 0, false, 1 },
	{ NULL, 0, false, 0 },
};

int cmd_show(struct cli *cli, int argc, char **argv)
{
	const char *ref = NULL;
	cJSON *e = NULL;
	bool all_deps;
	int nrefs, status;

	status = cli_parse_flag_refs(cli, argc, argv, show_opts, &all_deps, &ref, 1, &nrefs);
	if (status < 0 && nrefs == 0)
		status = cli_usage_error(cli, "show needs a REF (a key, a key prefix or an alias)");
	if (status >= 0)
		return status;
	if (fetch_entry(cli, ref, &e) < 0)
		return CLI_EXIT_ERROR;
	if (!cli->json)
		show_print(e, all_deps);
	status = cli->json && cli_print_json(e) < 0 ? CLI_EXIT_ERROR
						    : cli_finish_stdout(CLI_EXIT_OK);
	cJSON_Delete(e);
	return status;
}

/* Copies the log file at path to stdout. */
static int log_copy(const char *key, const char *path)
{
	char buf[65536];
	ssize_t n;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		if (rc == -ENOENT)
			cli_error("no build log for %s (%s is missing)", key, path);
		else
			cli_error("cannot read the build log %s: %s", path, strerror(-rc));
		return rc;
	}
	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			cli_error("cannot read the build log %s: %s", path, strerror(-rc));
			break;
		}
		if (fwrite(buf, 1, (size_t)n, stdout) != (size_t)n)
			break;
	}
	close(fd);
	return rc;
}

/* Prints {"key", "log", "text"}. */
static int log_json(const char *key, const char *path)
{
	cJSON *out = NULL;
	char *text = NULL;
	size_t len;
	int rc;

	rc = util_read_file(path, LOG_JSON_MAX, &text, &len);
	if (rc == -ENOENT) {
		cli_error("no build log for %s (%s is missing)", key, path);
		goto cleanup;
	}
	if (rc < 0) {
		cli_error("cannot read the build log %s: %s", path, strerror(-rc));
		goto cleanup;
	}
	out = cJSON_CreateObject();
	rc = -ENOMEM;
	if (!out || !cJSON_AddStringToObject(out, "key", key) ||
	    !cJSON_AddStringToObject(out, "log", path) ||
	    !cJSON_AddStringToObject(out, "text", text)) {
		cli_error("out of memory");
		goto cleanup;
	}
	rc = cli_print_json(out);

cleanup:
	cJSON_Delete(out);
	free(text);
	return rc;
}

static int log_entry(struct cli *cli, const cJSON *e)
{
	const char *key = str_or_dash(e, "key"), *path = cli_json_str(e, "log");

	if (!path) {
		cli_error("no build log is recorded for %s", key);
		return -1;
	}
	return (cli->json ? log_json(key, path) : log_copy(key, path)) < 0 ? -1 : 0;
}

/* The cache directory whose logs/ to read: kilnd's when it runs, else
 * --cache-dir. malloc'd, or NULL. */
static char *logs_cache_dir(struct cli *cli)
{
	struct cli_conn c;
	struct msg_request req;
	cJSON *reply = NULL;
	char *dir = NULL;
	if (cli_conn_open(cli, &c) == 0) {
		cli_request_init(&req, OP_STATUS);
		if (cli_call(cli, &c, &req, &reply) == 0 && cli_json_str(reply, "cache_dir") != NULL)
			dir = strdup(cli_json_str(reply, "cache_dir"));
		cJSON_Delete(reply);
		cli_conn_close(&c);
		return dir;
	}
	return strdup(cli->cache_dir);
}

/* dir/logs/failed/NAME (failed builds), else dir/logs/NAME (entries; kiln
 * 0.1 kept failed builds there too), the first that can be read: malloc'd,
 * or NULL. An entry's key and a request key never share a name. */
static char *log_file(const char *dir, const char *name)
{
	static const char *const subs[] = { "logs/failed", "logs" };
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		char *path = NULL;
		if (asprintf(&path, "%s/%s/%s", dir, subs[i], name) < 0)
			return NULL;
		if (access(path, R_OK) == 0)
			return path;
		free(path);
	}
	return NULL;
}

/* A full 64-digit key or request key whose log file exists: the log of an
 * entry, or of a build that failed (kept under its request key, which the
 * failure names). 1 after printing it, 0 when there is none, -1 on error. */
static int log_by_full_key(struct cli *cli, const char *ref)
{
	if (ref == NULL || strlen(ref) != KILN_KEY_HEX ||
	    strspn(ref, "0123456789abcdef") != KILN_KEY_HEX)
		return 0;
	char *dir = logs_cache_dir(cli), name[KILN_KEY_HEX + 8];
	snprintf(name, sizeof(name), "%s.log", ref);
	char *path = dir != NULL ? log_file(dir, name) : NULL;
	free(dir);
	int rc = 0;
	if (path != NULL)
		rc = (cli->json ? log_json(ref, path) : log_copy(ref, path)) < 0 ? -1 : 1;
	free(path);
	return rc;
}

/* An alias whose last build failed: kilnd keeps its request key in
 * logs/failed/alias-<SHA-256 of the alias>.failed until a build of it
 * succeeds. 1 after printing that build's log, 0 when there is none, -1 on
 * error. */
static int log_by_failed_alias(struct cli *cli, const char *ref)
{
	uint8_t digest[32];
	char hex[65], rkey[KILN_KEY_HEX + 1], name[96];
	char *dir = logs_cache_dir(cli), *path = NULL, *text = NULL;
	size_t len = 0;
	util_sha256(ref, strlen(ref), digest);
	util_hex(digest, sizeof(digest), hex);
	snprintf(name, sizeof(name), "alias-%s.failed", hex);
	if (dir == NULL || (path = log_file(dir, name)) == NULL) {
		free(dir);
		return 0;
	}
	int rc = util_read_file(path, 4096, &text, &len);
	free(path);
	path = NULL;
	/* "RKEY\nALIAS\n": the alias is checked, not only its digest. */
	if (rc != 0 || len < KILN_KEY_HEX + 1 || text[KILN_KEY_HEX] != '\n' ||
	    strspn(text, "0123456789abcdef") != KILN_KEY_HEX ||
	    strncmp(text + KILN_KEY_HEX + 1, ref, strlen(ref)) != 0) {
		free(text);
		free(dir);
		return 0;
	}
	memcpy(rkey, text, KILN_KEY_HEX);
	rkey[KILN_KEY_HEX] = '\0';
	free(text);
	snprintf(name, sizeof(name), "%s.log", rkey);
	path = log_file(dir, name);
	free(dir);
	rc = 0;
	if (path != NULL) {
		fflush(stdout);
		fprintf(stderr, "kiln: the last build of %s failed (request key %s); its output:\n",
			ref, rkey);
		rc = (cli->json ? log_json(rkey, path) : log_copy(rkey, path)) < 0 ? -1 : 1;
	}
	free(path);
	return rc;
}

/* A prefix (8 digits or more) of one failed build's request key, as kiln
 * status and the Slurm epilogue name it (16 digits): 1 after printing that
 * build's log, 0 when none or several match, -1 on error. */
static int log_by_failed_prefix(struct cli *cli, const char *ref)
{
	size_t n = ref != NULL ? strlen(ref) : 0;
	if (n < 8 || n >= KILN_KEY_HEX || strspn(ref, "0123456789abcdef") != n)
		return 0;
	char *dir = logs_cache_dir(cli), *path = NULL, found[KILN_KEY_HEX + 8] = "";
	DIR *d = NULL;
	if (dir == NULL || asprintf(&path, "%s/logs/failed", dir) < 0 || (d = opendir(path)) == NULL) {
		free(dir);
		free(path);
		return 0;
	}
	free(path);
	path = NULL;
	unsigned matches = 0;
	for (struct dirent *de; (de = readdir(d)) != NULL;)
		if (strncmp(de->d_name, ref, n) == 0 && strlen(de->d_name) == KILN_KEY_HEX + 4 &&
		    strcmp(de->d_name + KILN_KEY_HEX, ".log") == 0 && matches++ == 0)
			memcpy(found, de->d_name, KILN_KEY_HEX + 5);   /* its length, checked, and NUL */
	closedir(d);
	int rc = 0;
	if (matches == 1 && (path = log_file(dir, found)) != NULL) {
		found[KILN_KEY_HEX] = '\0';
		rc = (cli->json ? log_json(found, path) : log_copy(found, path)) < 0 ? -1 : 1;
	}
	free(path);
	free(dir);
	return rc;
}

int cmd_log(struct cli *cli, int argc, char **argv)
{
	const char *ref = NULL;
	int nrefs, status = cli_parse_refs(cli, argc, argv, &ref, 1, &nrefs);
	if (status >= 0)
		return status;
	int rc = nrefs == 1 ? log_by_full_key(cli, ref) : 0;
	if (rc == 0 && nrefs == 1)
		rc = log_by_failed_alias(cli, ref);
	if (rc == 0 && nrefs == 1)
		rc = log_by_failed_prefix(cli, ref);
	if (rc != 0)
		return rc > 0 ? cli_finish_stdout(CLI_EXIT_OK) : CLI_EXIT_ERROR;
	return with_entry(cli, argc, argv, log_entry);
}
