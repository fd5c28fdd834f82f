/*
 * The inside of the validation of hits, shared by headers.c (states,
 * checks, hashing) and headers_watch.c (inotify watches, the path index,
 * events). Nothing else includes it.
 */
#ifndef KILN_DAEMON_HEADERS_INT_H
#define KILN_DAEMON_HEADERS_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <uv.h>

#include "table.h"

struct kilnd;

struct hhash;

struct hstate {
	bool names_watched;  /* events see it appear, go or change type */
	bool content_watched; /* events see every change of its content too */
	bool chosen;         /* the two above were decided */
	uint64_t chosen_gen; /* headers.choose_gen when they were */
	bool known;          /* the fields below describe the path */
	bool exists, lexists; /* stat / lstat found it */
	struct stat st;
	bool has_digest;
	bool racy;           /* hashed too soon after a change to trust later */
	uint8_t digest[32];
	bool has_listing;    /* a directory's listing digest (below) is current */
	uint8_t listing[32];
	uint64_t epoch;      /* of the last stat */
	char *real;          /* the path with symlinks resolved, when it differs */
	char *indexed_real;  /* the real path entered in the index */
	bool clean;          /* watched, and no event since it was stat'ed */
	uint64_t clean_flood; /* headers.flood when clean was set */
	bool evented;        /* an event came: rehash even if stat looks the same */
	struct hhash *hashing; /* its digest is being taken on the pool */
};

struct hdir {
	int wd;
	uint32_t mask;
	char *dir;
};

struct headers {
	int ifd;
	uv_poll_t poll;
	bool polling;
	struct table *files;      /* path -> struct hstate */
	struct table *index;      /* path -> struct hlist: states at or below it */
	struct table *dirs;       /* directory -> struct hdir */
	struct table *wds;        /* decimal wd -> struct hdir */
	struct table *validated;  /* artifact key -> struct hvalid */
	struct table *env;        /* variable name -> struct henv */
	uintptr_t gen;            /* bumped whenever any header turns dirty */
	uint64_t flood;           /* bumped when events were too many to read */
	uint64_t epoch;           /* bumped per batch of requests read */
	uint64_t choose_gen;      /* bumped when every state must choose anew */
	bool mounts_moved;        /* a mount or unmount since the last check */
	bool stale;               /* a request was read since the last drain */
	int mfd;                  /* /proc/self/mountinfo, polled for mounts */
	uv_poll_t mpoll;
	bool mpolling;
	int closing;              /* polls still closing at the end */
	struct hhash *last;       /* the hash the last pending verdict waits for */
	/* Counters for `kiln status` (observation.events). */
	uint64_t events, floods, hashed_on_pool;
};

/* Watched, and no event came since the state was last stat'ed. */
static inline bool hstate_clean(const struct headers *h, const struct hstate *hs)
{
	return hs->clean && hs->clean_flood == h->flood;
}

/* headers_watch.c */
/* Enters hs under path and every directory above it in the index. */
int hwatch_index(struct headers *h, const char *path, struct hstate *hs);
/* Decides how the state of path is tracked (names and content by events,
 * or a stat per batch), adding the watches it needs. */
void hwatch_choose(struct headers *h, const char *path, struct hstate *hs);
/* Reads queued events, handling at most budget bytes of them; returns
 * false when more were queued (then everything counts as dirty). */
bool hwatch_drain(struct headers *h, size_t budget);
/* Before a check: reads the events queued up to now, at most a bounded
 * amount; beyond it, every state counts as dirty. */
void hwatch_catch_up(struct headers *h);
/* Before a check: after mounts moved, the watches are dropped and every
 * state chooses anew (once per check, however many mount events came). */
void hwatch_after_mounts(struct headers *h);
/* The state must decide how it is tracked (again). */
static inline bool hstate_unchosen(const struct headers *h, const struct hstate *hs)
{
	return !hs->chosen || hs->chosen_gen != h->choose_gen;
}
/* Starts inotify and the mount watch (false when inotify is missing). */
void hwatch_start(struct kilnd *d, struct headers *h);
/* Frees the index and the watches' records. */
void hwatch_free(struct headers *h);

#endif
