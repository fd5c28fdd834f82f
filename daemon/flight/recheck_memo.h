/*
 * What this node's toolchain read for the stand-ins of a peer's request,
 * remembered (recheck_memo.c). recheck.c runs a request's compiler steps on
 * stand-ins of its sources before it takes an artifact built elsewhere; two
 * requests with the same steps (the same toolchain, arguments, source names
 * and environment) read the same files here as long as those files are as
 * they were. The memo keeps, by the steps' digest, what the last such run
 * read, with each dependency's state as this node checked it; a later check
 * reuses it only when every one of them is in the new sent list with that
 * same state (the list itself checked against this node's files), which is
 * what a new run would have to find. Thread-safe (pool jobs).
 */
#ifndef KILN_DAEMON_RECHECK_MEMO_H
#define KILN_DAEMON_RECHECK_MEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store_dep;
struct table;

/* Remembers this many step sets; the oldest goes first. */
#define RECHECK_MEMO_MAX 64

struct recheck_memo;

struct recheck_memo *recheck_memo_new(void);
void recheck_memo_free(struct recheck_memo *m);

/* An index of sent by "kind:path" (values: the store_dep), for
 * recheck_memo_holds and the comparison; NULL when out of memory. */
struct table *recheck_sent_index(const struct store_dep *sent, size_t nsent);
/* Its key of one dependency (cap at least PATH_MAX + 8). */
void recheck_dep_key(int kind, const char *path, char *out, size_t cap);

/* Whether the steps of digest key were run here and every dependency that
 * run read is in sent_index (recheck_sent_index) with the state recorded
 * then: kind, and the digest, size and mode its kind carries (depkind.h). */
bool recheck_memo_holds(struct recheck_memo *m, const uint8_t key[32], const struct table *sent_index);
/*
 * One run per step set at a time where it can serve the others: waits while
 * another check runs the steps of key, then RECHECK_MEMO_HOLDS (as
 * recheck_memo_holds: no run needed), RECHECK_MEMO_OWN (run them,
 * recheck_memo_put what they read if they passed, and recheck_memo_leave in
 * any case: the checks waiting go on), or RECHECK_MEMO_RUN (run them
 * without owning: this check waited and the record does not fit its list,
 * or RECHECK_MEMO_RUNNING other step sets are running). A pool thread waits
 * only while a run of the same steps is going.
 */
#define RECHECK_MEMO_RUNNING 16
enum { RECHECK_MEMO_HOLDS, RECHECK_MEMO_OWN, RECHECK_MEMO_RUN };
int recheck_memo_enter(struct recheck_memo *m, const uint8_t key[32], const struct table *sent_index);
void recheck_memo_leave(struct recheck_memo *m, const uint8_t key[32]);
/* Remembers deps (their paths and states copied) as what the steps of
 * digest key read; replaces an earlier record of key. 0 or -ENOMEM. */
int recheck_memo_put(struct recheck_memo *m, const uint8_t key[32], const struct store_dep *const *deps,
		     size_t n);
/* Peer checks counted (recheck_memo_count) and those whose stand-in run
 * the memo spared. */
void recheck_memo_count(struct recheck_memo *m, bool reused);
void recheck_memo_counts(struct recheck_memo *m, uint64_t *checks, uint64_t *reused);
/* Checks waiting in recheck_memo_enter now (for the tests). */
unsigned recheck_memo_waiting(struct recheck_memo *m);

#endif
