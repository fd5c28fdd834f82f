/*
 * The upstream tier (kilnd --upstream DIR): a directory on a filesystem that
 * every node sees (Lustre, GPFS, NFS), persistent across jobs, holding plain
 * immutable files only. A local miss looks there before building; a build
 * is published there; a claim file per request key keeps nodes from
 * building one program at the same time. docs/design.md, "Upstream tier",
 * has the layout and the protocol.
 *
 * Loop thread only; the filesystem work runs on the thread pool
 * (upstream_fs.c).
 */
#ifndef KILN_DAEMON_UPSTREAM_H
#define KILN_DAEMON_UPSTREAM_H

#include <stddef.h>

#include <cjson/cJSON.h>

struct kilnd;
struct build;

/*
 * Opens the tier named by d->cfg->upstream_dir (nothing to do without one):
 * creates DIR when its parent exists, refuses a directory that is not the
 * user's own or is writable by others, creates its folders and proves it
 * writable. Blocking; at start-up, before the socket opens. Returns 0 or a
 * negative errno with a sentence in err.
 */
int upstream_init(struct kilnd *d, char *err, size_t errlen);
/* At a stop: closes the timers and fails the flights waiting on another
 * node's claim with shutting_down. Idempotent. */
void upstream_stop(struct kilnd *d);
/* Frees the tier once the loop has ended. */
void upstream_fini(struct kilnd *d);

/*
 * A new flight (build.c): looks upstream first. By digest only, a miss
 * answers need_sources; with the text, a miss queues the build for a slot,
 * or waits (without a slot) while another node holds the key's claim.
 */
void upstream_flight_start(struct build *b);
/* A queued build got a --jobs slot (build.c): claims its key, then begins
 * the build (build_begin), or gives the slot back and waits when another
 * node claimed it meanwhile, or ends with the entry that node published. */
void upstream_claim(struct build *b);
/* The end of a flight (build.c, after the replies): publishes a new build
 * upstream, then releases its claim; frees the flight's upstream state. */
void upstream_flight_end(struct build *b);
/* Adds the tier's members to a status reply (none without --upstream). */
void upstream_status(struct kilnd *d, cJSON *reply);
/* A client said its job has nodes nodes (hello's job_nodes): the pace of
 * polling follows the largest said in the last 15 minutes. */
void upstream_job_hint(struct kilnd *d, long nodes);

#endif
