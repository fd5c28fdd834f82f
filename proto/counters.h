/*
 * kilnd's counters, defined once for kilnd and the kiln CLI: the member of
 * kilnd's struct counters (daemon/kilnd.h), the name in status replies,
 * `kiln stats` and the index, whether it is shown only with --upstream, and
 * its help text (`kiln stats --prometheus` names it kiln_NAME_total).
 * X(name, upstream_only, help).
 */
#ifndef KILN_PROTO_COUNTERS_H
#define KILN_PROTO_COUNTERS_H

#define KILN_COUNTERS(X) \
	X(requests, false, "Requests kilnd received.") \
	X(hits, false, "get and lookup requests served from the cache.") \
	X(misses, false, "get and lookup requests that were not in the cache.") \
	X(builds_started, false, "Builds started (compiler runs).") \
	X(builds_ok, false, "Builds that produced an artifact.") \
	X(builds_failed, false, "Builds that failed.") \
	X(joined, false, "Requests that joined a build already running.") \
	X(need_sources, false, "Gets by digest asked for their text.") \
	X(text_waits, false, "Gets by digest that waited for another client's text of the same request instead of sending their own.") \
	X(text_timeouts, false, "Waits for another client's text that ran out: the waiter was asked for its own.") \
	X(source_texts, false, "Requests that carried source text.") \
	X(imports, false, "Artifacts imported with put.") \
	X(upstream_hits, true, "Local misses served from --upstream.") \
	X(upstream_publishes, true, "Entries written to --upstream.") \
	X(upstream_waits, true, "Flights that waited on another node's claim.") \
	X(upstream_takeovers, true, "Stale claims of other nodes taken over.") \
	X(upstream_errors, true, "Damaged upstream entries and failed upstream I/O.") \
	X(upstream_looks, true, "Looks again at a claim another node holds.") \
	X(upstream_alias_hits, true, "Alias lookups that missed locally, served from --upstream.") \
	X(upstream_alias_records, true, "Alias records written to --upstream.") \
	X(upstream_alias_claims, true, "Job-wide leases on aliases taken in --upstream (claims/alias-*.claim).") \
	X(upstream_alias_claim_waits, true, "Claiming lookups that waited for another node's lease on the alias.") \
	X(upstream_alias_claim_takeovers, true, "Stale alias leases of other nodes taken over.") \
	X(busy, false, "Requests and connections answered busy.") \
	X(denied, false, "Connections refused for their user.") \
	X(stalled, false, "Connections closed by --frame-timeout.") \
	X(damaged, false, "Damaged objects found (serving, verify).") \
	X(inputs_changed, false, "Builds whose inputs changed while they ran.") \
	X(uncacheable, false, "Builds served but not cached: a pseudo-file decides them, or a program of the toolchain ran unobserved.") \
	X(unobserved, false, "Builds served but not cached because a program of the toolchain ran without the interposer.") \
	X(variants, false, "Programs (by label or alias) built in more than one variant within an hour: nondeterministic code generation.") \
	X(variant_builds, false, "Builds of a second or later variant of a program.") \
	X(cache_recreated, false, "Times the cache directory was made again while kilnd ran.") \
	X(cancelled, false, "Builds stopped because every client that asked for them had gone.") \
	X(evicted, false, "Entries evicted (--max-size or kiln gc).") \
	X(evicted_bytes, false, "Bytes of objects evicted.") \
	X(claims, false, "Aliases claimed by lookups (one producer per alias).") \
	X(claim_waits, false, "Lookups that waited for another client's claim.") \
	X(claim_takeovers, false, "Claims taken over after one ended unpublished.") \
	X(claim_timeouts, false, "Waits for a claim that ran out.") \
	X(claims_refused, false, "Claims and text turns not granted at a limit (a connection's, a process's share, a full table): the client produced the program or sent its text itself.") \
	X(claims_displaced, false, "Claims ended in a full table to make room for a process holding fewer (the process holding the most gave up its least recently renewed claim).") \
	X(claims_expired, false, "Claims ended after --claim-expiry without progress (a waiter took them over).")

#endif
