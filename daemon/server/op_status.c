/*
 * The status operation (docs/protocol.md, "status"): what kilnd is, holds
 * and does now, from the counters, the flights, the digest cache, the
 * validation of hits, confinement, the tier, the toolchains and the GPUs.
 * Loop thread; reads only.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "claims.h"
#include "flight.h"
#include "digests.h"
#include "gpu.h"
#include "headers.h"
#include "kiln_build.h"
#include "kilnd.h"
#include "log.h"
#include "msg.h"
#include "named.h"
#include "prewarm.h"
#include "server.h"
#include "stats.h"
#include "ops.h"
#include "upstream.h"
#include "util.h"

#define ADD_NUM(obj, name, v) cJSON_AddNumberToObject(obj, name, (double)(v))

/* "gpus" (what the driver reported at start), "cuda_driver", and
 * "gpu_note" saying why there are none. */
static void add_gpus(const struct kilnd *d, cJSON *r)
{
	const struct gpus *g = d->gpus;
	cJSON *arr = cJSON_AddArrayToObject(r, "gpus");
	if (g == NULL || arr == NULL)
		return;
	for (size_t i = 0; i < g->n; i++) {
		cJSON *o = cJSON_CreateObject();
		char arch[16];
		if (o == NULL || !cJSON_AddItemToArray(arr, o)) {
			cJSON_Delete(o);
			return;
		}
		snprintf(arch, sizeof(arch), "sm_%d%d", g->dev[i].major, g->dev[i].minor);
		ADD_NUM(o, "index", g->dev[i].index);
		cJSON_AddStringToObject(o, "name", g->dev[i].name);
		cJSON_AddStringToObject(o, "arch", arch);
	}
	if (g->driver_version > 0)
		ADD_NUM(r, "cuda_driver", g->driver_version);
	if (g->n == 0 && g->note[0] != '\0')
		cJSON_AddStringToObject(r, "gpu_note", g->note);
}

/* How a toolchain's builds record what they read (docs/design.md). */
static const char *observe_mechanism(const struct kilnd *d, const struct toolchain *tc)
{
	return d->observe_lib != NULL && tc->dynamic ? "preload" : "none";
}

struct tc_list {
	const struct kilnd *d;
	cJSON *arr;
};

/* One toolchain of "toolchains": a configured one, or one a request named
 * by path ("named": true, nvcc's "host_compiler"). */
static void add_toolchain(const struct toolchain *tc, void *arg)
{
	struct tc_list *l = arg;
	cJSON *t = cJSON_CreateObject();
	if (t == NULL)
		return;
	cJSON_AddStringToObject(t, "name", tc->name);
	cJSON_AddStringToObject(t, "path", tc->path);
	cJSON_AddStringToObject(t, "version", tc->version);
	cJSON_AddStringToObject(t, "observe", observe_mechanism(l->d, tc));
	if (tc->named)
		cJSON_AddTrueToObject(t, "named");
	if (tc->host != NULL)
		cJSON_AddStringToObject(t, "host_compiler", tc->host);
	if (tc->is_nvcc) {
		if (tc->cuda_arch != NULL)
			cJSON_AddStringToObject(t, "cuda_arch", tc->cuda_arch);
		else
			cJSON_AddNullToObject(t, "cuda_arch");
	}
	cJSON_AddItemToArray(l->arr, t);
}

/* "observation": the interposer, and how hits are validated. */
static void add_observation(const struct kilnd *d, cJSON *r)
{
	cJSON *o = cJSON_AddObjectToObject(r, "observation");
	if (o == NULL)
		return;
	if (d->observe_lib != NULL)
		cJSON_AddStringToObject(o, "library", d->observe_lib);
	else
		cJSON_AddNullToObject(o, "library");
	const char *ignore = getenv("KILN_OBSERVE_IGNORE");
	if (ignore != NULL && ignore[0] != '\0')
		cJSON_AddStringToObject(o, "ignored", ignore);
	cJSON_AddStringToObject(o, "validation", headers_events_complete(d)
				? "events where complete, else stat once per batch of requests"
				: "stat once per batch of requests");
	uint64_t events, floods, on_pool;
	headers_counts(d, &events, &floods, &on_pool);
	ADD_NUM(o, "events", events);
	ADD_NUM(o, "event_floods", floods);
	ADD_NUM(o, "hashed_on_pool", on_pool);
	struct flight_counts fc;
	flight_counts(d, &fc);
	ADD_NUM(o, "peer_checks", fc.peer_checks);
	ADD_NUM(o, "peer_checks_remembered", fc.peer_checks_remembered);
}

static void add_group(cJSON *o, const char *name, const struct store_format_group *g)
{
	cJSON *x = cJSON_AddObjectToObject(o, name);
	if (x != NULL) {
		ADD_NUM(x, "entries", g->entries);
		ADD_NUM(x, "disk", g->disk);
		if (strcmp(name, "current") != 0)   /* not counted for the current ones */
			ADD_NUM(x, "pinned", g->pinned);
	}
}

/* What the cache takes (max-size bounds disk.total), its entries by key
 * format and the kilnd versions that wrote it (upgrade.h). */
static void add_disk(struct kilnd *d, cJSON *r)
{
	cJSON *o = cJSON_AddObjectToObject(r, "disk");
	if (o != NULL) {
		ADD_NUM(o, "total", d->disk.total);
		ADD_NUM(o, "entries", d->disk.entries_disk);
		ADD_NUM(o, "index", d->disk.index);
		ADD_NUM(o, "other", d->disk.other);
	}
	o = cJSON_AddObjectToObject(r, "key_formats");
	if (o != NULL) {
		ADD_NUM(o, "this", KEY_FORMAT_VERSION);
		add_group(o, "current", &d->formats.current);
		add_group(o, "older", &d->formats.older);
		add_group(o, "unknown", &d->formats.unknown);
		add_group(o, "newer", &d->formats.newer);
	}
	struct store_writer *w = NULL;
	size_t n = 0;
	cJSON *a = cJSON_AddArrayToObject(r, "writers");
	if (a == NULL || store_writers(d->store, &w, &n) != 0)
		return;
	for (size_t i = 0; i < n && i < 16; i++) {
		cJSON *x = cJSON_CreateObject();
		if (x == NULL || !cJSON_AddItemToArray(a, x))
			break;
		cJSON_AddStringToObject(x, "version", w[i].version);
		ADD_NUM(x, "key_format", w[i].key_format);
		ADD_NUM(x, "first_start", w[i].first_start);
		ADD_NUM(x, "last_start", w[i].last_start);
	}
	free(w);
}

/* The name the kernel gives pid (its comm, at most 15 bytes), or "". */
static void process_name(pid_t pid, char *out, size_t len)
{
	char path[64];
	out[0] = '\0';
	if (pid <= 0)
		return;
	snprintf(path, sizeof(path), "/proc/%ld/comm", (long)pid);
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return;
	if (fgets(out, (int)len, f) == NULL)
		out[0] = '\0';
	out[strcspn(out, "\n")] = '\0';
	fclose(f);
}

/* "claim_limits", and "claim_holders": who holds the node's claims (the
 * processes holding the most, STATUS_HOLDERS of them; "claim_holders_more"
 * says how many more hold any), so that one client filling them is named. */
#define STATUS_HOLDERS 16
static void add_claims(const struct kilnd *d, cJSON *r)
{
	cJSON *lim = cJSON_AddObjectToObject(r, "claim_limits");
	if (lim != NULL) {
		ADD_NUM(lim, "node", CLAIMS_MAX);
		ADD_NUM(lim, "process", CLAIMS_PER_PEER);
		ADD_NUM(lim, "connection", CLAIMS_PER_OWNER);
		ADD_NUM(lim, "waiters", CLAIM_WAITERS_MAX);
		ADD_NUM(lim, "expiry_s", (double)claims_expiry_ms(d) / 1000.0);
	}
	struct claim_holder h[STATUS_HOLDERS];
	size_t n = claims_holders(d, h, STATUS_HOLDERS);
	cJSON *arr = cJSON_AddArrayToObject(r, "claim_holders");
	for (size_t i = 0; arr != NULL && i < n && i < STATUS_HOLDERS; i++) {
		char name[32];
		cJSON *o = cJSON_CreateObject();
		if (o == NULL || !cJSON_AddItemToArray(arr, o)) {
			cJSON_Delete(o);
			break;
		}
		ADD_NUM(o, "pid", h[i].pid);
		ADD_NUM(o, "uid", h[i].uid);
		process_name(h[i].pid, name, sizeof(name));
		if (name[0] != '\0')
			cJSON_AddStringToObject(o, "name", name);
		ADD_NUM(o, "connections", h[i].connections);
		ADD_NUM(o, "claims", h[i].claims);
		ADD_NUM(o, "text_turns", h[i].turns);
		ADD_NUM(o, "waits", h[i].waits);
	}
	if (n > STATUS_HOLDERS)
		ADD_NUM(r, "claim_holders_more", n - STATUS_HOLDERS);
}

void op_status(struct conn *c, struct msg_request *req)
{
	struct kilnd *d = c->d;
	cJSON *r = msg_ok_reply(req->id);
	if (r == NULL) {
		log_error("out of memory building a reply");
		return;
	}
	ADD_NUM(r, "pid", getpid());
	cJSON_AddStringToObject(r, "version", KILN_VERSION_STR);
	cJSON_AddStringToObject(r, "build", KILN_BUILD_STR);
	ADD_NUM(r, "proto", KILN_PROTO_VERSION);
	cJSON_AddStringToObject(r, "socket", d->cfg->socket_path);
	cJSON_AddStringToObject(r, "cache_dir", d->cfg->cache_dir);
	ADD_NUM(r, "jobs", d->cfg->jobs);
	ADD_NUM(r, "max_size", d->cfg->max_size);
	cJSON_AddStringToObject(r, "max_size_source", d->max_size_source);
	ADD_NUM(r, "entries", d->entries);
	ADD_NUM(r, "bytes", d->bytes);
	ADD_NUM(r, "disk_bytes", d->disk.total);
	ADD_NUM(r, "stale_entries", d->formats.older.entries + d->formats.unknown.entries);
	add_disk(d, r);
	cJSON_AddBoolToObject(r, "checking_cache", d->sweep_pending);
	prewarm_status(d, r);
	ADD_NUM(r, "uptime_s", util_round3((double)(util_now_ns() - d->start_ns) / 1e9));
	ADD_NUM(r, "connections", server_connections(d));
	ADD_NUM(r, "claims_held", claims_count(d));
	add_claims(d, r);
	stats_add_json(d, r);
	struct flight_counts fc;
	flight_counts(d, &fc);
	ADD_NUM(r, "in_flight", fc.in_flight);
	ADD_NUM(r, "slots_lent", fc.lent);
	ADD_NUM(r, "queued", fc.queued);
	unsigned states[FLIGHT__COUNT];
	flight_count_states(d, states);
	cJSON *fl = cJSON_AddObjectToObject(r, "flights");
	for (int i = FLIGHT_UPSTREAM; fl != NULL && i < FLIGHT_DONE; i++)
		ADD_NUM(fl, flight_state_name((enum flight_state)i), states[i]);
	/* What runs and waits now (kiln top): 50 of each at most. */
	flight_describe(d, cJSON_AddArrayToObject(r, "running"), cJSON_AddArrayToObject(r, "queue"),
			50);
	ADD_NUM(r, "pending", server_pending(d));
	uint64_t hashed, hashed_bytes, cached;
	digests_counts(&hashed, &hashed_bytes, &cached);
	cJSON *dg = cJSON_AddObjectToObject(r, "digests");
	if (dg != NULL) {
		ADD_NUM(dg, "hashed", hashed);
		ADD_NUM(dg, "hashed_bytes", hashed_bytes);
		ADD_NUM(dg, "cached", cached);
	}
	cJSON_AddBoolToObject(r, "socket_activated", d->activated);
	if (d->cache_why[0] != '\0')
		cJSON_AddStringToObject(r, "cache_problem", d->cache_why);
	add_observation(d, r);
	cJSON *conf = cJSON_AddObjectToObject(r, "confinement");
	if (conf != NULL) {
		cJSON_AddBoolToObject(conf, "landlock", d->landlock_abi > 0);
		if (d->landlock_abi > 0)
			ADD_NUM(conf, "abi", d->landlock_abi);
		else
			cJSON_AddStringToObject(conf, "why", d->landlock_why);
		cJSON_AddBoolToObject(conf, "toolchain_code", d->cfg->allow_toolchain_code);
	}
	upstream_status(d, r);
	struct tc_list list = { .d = d, .arr = cJSON_AddArrayToObject(r, "toolchains") };
	for (size_t i = 0; list.arr != NULL && i < d->ntoolchains; i++)
		add_toolchain(&d->toolchains[i], &list);
	/* Then those requests named by path (named.h), as identified now. */
	if (list.arr != NULL)
		named_foreach(d, add_toolchain, &list);
	add_gpus(d, r);
	conn_reply(c, r, -1);
}

