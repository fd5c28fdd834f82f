/*
 * The start that kilnd hands to a kiln-exec already running and waiting
 * (child.c's standbys, kiln-exec's `standby` mode): the working directory,
 * the arguments and the whole environment in one buffer, which the waiting
 * program takes as its own before it goes on as if started with them. The
 * program's standard output travels beside it as a descriptor (SCM_RIGHTS).
 * Pure: packing and checking, no I/O (test_standby_msg).
 *
 * Layout: "KSB1", then three little-endian u32 (the whole length, argc,
 * envc), then cwd, the argc arguments and the envc variables, each ending
 * in NUL, and nothing after them.
 */
#ifndef KILN_DAEMON_STANDBY_MSG_H
#define KILN_DAEMON_STANDBY_MSG_H

#include <stddef.h>
#include <stdint.h>

#include <signal.h>

#define STANDBY_HEAD 16                 /* magic and the three counts */
/* A standby that could not take the start it was handed (no directory, a
 * malformed start) ends by this signal, after saying why on the output it
 * received where it got one: kilnd reports that as its own failure, not
 * the build's (a run's own signals come back as exit statuses, 128 + N). */
#define STANDBY_REFUSED_SIGNAL SIGUSR2
#define STANDBY_MAX (8u << 20)          /* the longest request taken */
#define STANDBY_MAX_STRINGS 65536u      /* arguments and variables each */

/* The buffer for cwd ("" for none), argv and env (both NULL-terminated);
 * its length into *len. NULL when out of memory or past STANDBY_MAX. */
char *standby_pack(const char *cwd, char *const *argv, char *const *env, size_t *len);

/* The whole length a request says it has, from its first STANDBY_HEAD
 * bytes: 0 when they are no request's (magic, a length under the head or
 * over STANDBY_MAX). */
uint32_t standby_length(const unsigned char head[STANDBY_HEAD]);

/*
 * Takes a whole request apart in place (buf, len bytes, writable: kept by
 * the caller while the results are used): *cwd points into it, *argv and
 * *env are new NULL-terminated arrays of pointers into it (free them, not
 * their strings). 0, -EINVAL for anything but a well-formed request
 * (counts, NULs, lengths, at least one argument), -ENOMEM.
 */
int standby_unpack(char *buf, size_t len, char **cwd, char ***argv, char ***env);

#endif
