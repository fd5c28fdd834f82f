/*
 * Output helpers of the kiln CLI: typed access to reply members, JSON
 * printing, and the human formats for durations, times and ages.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "util.h"

bool cli_json_u64(const cJSON *obj, const char *name, uint64_t *out)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, name);

	/* Protocol numbers are integers below 2^53, exact in a double. */
	if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble) || item->valuedouble < 0 ||
	    item->valuedouble >= 18446744073709551616.0)
		return false;
	*out = (uint64_t)item->valuedouble;
	return true;
}

bool cli_json_i64(const cJSON *obj, const char *name, int64_t *out)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, name);

	if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble) ||
	    fabs(item->valuedouble) >= 9223372036854775808.0)
		return false;
	*out = (int64_t)item->valuedouble;
	return true;
}

const char *cli_json_str(const cJSON *obj, const char *name)
{
	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(obj, name));
}

bool cli_json_true(const cJSON *obj, const char *name)
{
	return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj, name));
}

int cli_print_json(const cJSON *item)
{
	/* One document on one line: easy for jq, for line-oriented tools and
	 * for scripts that read a single line. */
	char *s = cJSON_PrintUnformatted(item);

	if (!s) {
		cli_error("out of memory");
		return -ENOMEM;
	}
	puts(s);
	free(s);
	cli_json_printed();
	return 0;
}

char *cli_format_ms(uint64_t ms, char *buf, size_t len)
{
	if (ms < 1000)
		snprintf(buf, len, "%llu ms", (unsigned long long)ms);
	else if (ms < 100000)
		snprintf(buf, len, "%.1f s", (double)ms / 1000.0);
	else
		snprintf(buf, len, "%.0f s", (double)ms / 1000.0);
	return buf;
}

char *cli_format_time(int64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;
	size_t n;

	if (!localtime_r(&tt, &tm) || len < 26 ||
	    !(n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S%z", &tm))) {
		snprintf(buf, len, "%lld", (long long)t);
		return buf;
	}
	/* strftime's %z gives "+0100"; ISO 8601's extended format, which the
	 * date part already uses, wants "+01:00". */
	if (n >= 5 && n + 1 < len) {
		memmove(buf + n - 1, buf + n - 2, 3);
		buf[n - 2] = ':';
	}
	return buf;
}

char *cli_format_ago(int64_t t, int64_t now, char *buf, size_t len)
{
	char age[32];

	/* A time slightly ahead (clocks of another node) reads as "0s ago". */
	util_format_age(now > t ? now - t : 0, age, sizeof(age));
	snprintf(buf, len, "%s ago", age);
	return buf;
}

void cli_field(int width, const char *name, const char *fmt, ...)
{
	va_list ap;

	printf("%s:%*s", name, width - (int)strlen(name) + 1, "");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

const char *cli_entries_word(uint64_t n)
{
	return n == 1 ? "entry" : "entries";
}

/* The names people read for the members of the status reply, one per
 * counter, so that kiln status and kiln stats say the same (JSON and
 * Prometheus keep the member names). */
static const struct {
	const char *field;
	const char *name;
} counter_names[] = {
	{ "proto", "protocol" },
	{ "cache_dir", "cache dir" },
	{ "bytes", "size" },
	{ "disk_bytes", "size on disk" },
	{ "stale_entries", "stale entries" },
	{ "max_size", "max size" },
	{ "uptime_s", "uptime" },
	{ "builds_started", "builds started" },
	{ "builds_ok", "builds ok" },
	{ "builds_failed", "builds failed" },
	{ "need_sources", "sources asked" },
	{ "text_waits", "text waits" },
	{ "text_timeouts", "text timeouts" },
	{ "source_texts", "sources sent" },
	{ "imports", "imported" },
	{ "inputs_changed", "inputs changed" },
	{ "uncacheable", "not cacheable" },
	{ "unobserved", "not observed" },
	{ "variant_builds", "variant builds" },
	{ "claims_held", "claims held" },
	{ "claim_waits", "claim waits" },
	{ "claim_takeovers", "claim takeovers" },
	{ "claim_timeouts", "claim timeouts" },
	{ "cache_recreated", "cache remade" },
	{ "cache_problem", "cache problem" },
	{ "in_flight", "in flight" },
	{ "slots_lent", "slots lent" },
	{ "pending", "requests pending" },
	{ "evicted_bytes", "evicted size" },
	{ "stats_since", "counting since" },
	{ "upstream_hits", "upstream hits" },
	{ "upstream_publishes", "upstream publishes" },
	{ "upstream_waits", "upstream waits" },
	{ "upstream_takeovers", "upstream takeovers" },
	{ "upstream_errors", "upstream errors" },
	{ "upstream_looks", "upstream looks" },
	{ "upstream_alias_hits", "upstream alias hits" },
	{ "upstream_alias_records", "upstream alias records" },
	{ "upstream_alias_claims", "upstream alias claims" },
	{ "upstream_alias_claim_waits", "upstream alias claim waits" },
	{ "upstream_alias_claim_takeovers", "upstream alias claim takeovers" },
	{ "job_nodes", "job nodes" },
	{ "upstream_looks_per_s", "upstream pace" },
};

const char *cli_counter_name(const char *field)
{
	/* A member this table does not name (a counter newer than it): its
	 * words, never the member name. Four at a time may be in use. */
	static char spare[4][64];
	static unsigned next;
	for (size_t i = 0; i < sizeof(counter_names) / sizeof(counter_names[0]); i++)
		if (strcmp(counter_names[i].field, field) == 0)
			return counter_names[i].name;
	char *out = spare[next++ % 4];
	snprintf(out, sizeof(spare[0]), "%s", field);
	for (char *p = out; *p != '\0'; p++)
		if (*p == '_')
			*p = ' ';
	return out;
}

char *cli_format_hits(uint64_t hits, uint64_t misses, char *buf, size_t len)
{
	if (hits + misses > 0)
		snprintf(buf, len, "%llu (%.1f%% of lookups)", (unsigned long long)hits,
			 100.0 * (double)hits / (double)(hits + misses));
	else
		snprintf(buf, len, "%llu", (unsigned long long)hits);
	return buf;
}

const char *cli_short_alias(const char *alias, char *buf, size_t len)
{
	static const char hex[] = "0123456789abcdefABCDEF";
	size_t out = 0, i = 0, n = strlen(alias);
	bool cut = false;

	if (len == 0)
		return alias;
	while (i < n && out + 1 < len) {
		size_t run = strspn(alias + i, hex);
		size_t keep = run >= CLI_ALIAS_HASH_MIN ? CLI_ALIAS_HASH_KEEP : run;
		if (run == 0)
			keep = run = 1;   /* one character that is no hex digit */
		int w = snprintf(buf + out, len - out, "%.*s%s", (int)keep, alias + i,
				 keep < run ? CLI_ALIAS_CUT : "");
		if (w < 0 || (size_t)w >= len - out)
			return alias;
		cut |= keep < run;
		out += (size_t)w;
		i += run;
	}
	return cut && i == n ? buf : alias;
}
