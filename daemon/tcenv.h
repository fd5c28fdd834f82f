/*
 * The environment a toolchain run gets (docs/design.md, "The build
 * environment"): not kilnd's, but the variables of a documented list taken
 * from it, each value part of every toolchain's identity, so that no entry
 * depends on where kilnd or the job was started, and two jobs whose
 * environments differ only in what cannot change a build share entries.
 * PATH is passed too but is not in the identity: what the toolchain looked
 * up along it is recorded by observation and decides (a "search"
 * dependency, deps.c).
 *
 * Made once at start-up and never changed: any thread may read it.
 */
#ifndef KILN_DAEMON_TCENV_H
#define KILN_DAEMON_TCENV_H

#include <stdbool.h>
#include <stddef.h>

#define TCENV_MAX_EXTRA 32

struct tcenv {
	char **vars;     /* "NAME=value", sorted by name, NULL-terminated */
	size_t nvars;
	char *path;      /* the PATH passed: the absolute entries of the given one */
};

/*
 * Picks the variables of env (NULL-terminated "NAME=value") that a toolchain
 * run gets: the list of tcenv.c, and extra (names, or prefixes ending in
 * '*': --toolchain-env). Returns 0 or -ENOMEM.
 */
int tcenv_make(struct tcenv *e, char *const *env, char *const *extra, size_t nextra);
void tcenv_fini(struct tcenv *e);
/* The value a toolchain run gets for name, or NULL. */
const char *tcenv_value(const struct tcenv *e, const char *name);
/* Whether name is passed to toolchain runs but left out of the identity. */
bool tcenv_unkeyed(const char *name);
/* Whether an extra name (--toolchain-env) is well formed. */
bool tcenv_name_ok(const char *name);

/* The process's own, made by main (tcenv_set) before any toolchain. */
void tcenv_set(struct tcenv *e);
const struct tcenv *tcenv(void);
/* tcenv_value on the process's own. */
const char *tcenv_get(const char *name);

#endif
