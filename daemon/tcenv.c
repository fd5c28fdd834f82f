/*
 * The environment of toolchain runs (tcenv.h). The list, and why each
 * variable is on it, is in docs/design.md ("The build environment").
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcenv.h"

/* Passed by exact name. */
static const char *const names[] = {
	/* gcc's and the linker's search and output (the GCC manual's
	 * "Environment Variables"; ld's). */
	"CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "OBJC_INCLUDE_PATH", "LIBRARY_PATH",
	"COMPILER_PATH", "SOURCE_DATE_EPOCH", "SDKROOT", "LD_RUN_PATH", "GNUTARGET",
	"LDEMULATION",
	/* where the loader finds a module compiler's own libraries (libisl,
	 * libmpc, ...): without it a compiler outside /usr cannot start. */
	"LD_LIBRARY_PATH",
	/* the input character set follows the locale; __DATE__ and __TIME__
	 * follow the time zone. */
	"LANG", "LC_ALL", "LC_CTYPE", "TZ",
	/* nvcc's toolkit. */
	"CUDA_PATH", "CUDA_HOME",
	"PATH",
	NULL,
};

/* Passed by prefix: the compilers' own (GCC_EXEC_PREFIX, GCC_COMPARE_DEBUG,
 * NVCC_PREPEND_FLAGS, NVCC_APPEND_FLAGS, NVCC_CCBIN, ...). */
static const char *const prefixes[] = { "GCC_", "NVCC_", NULL };

/* Never passed although a prefix or --toolchain-env matches: those that
 * change only how messages look (kilnd captures them without a terminal),
 * and those kilnd and kiln-exec set themselves (step.c, exec.c). */
static const char *const dropped[] = {
	"GCC_COLORS", "GCC_URLS", "GCC_EXTRA_DIAGNOSTIC_OUTPUT",
	"TMPDIR", "PWD", "OLDPWD", "LD_PRELOAD", "LD_AUDIT", NULL,
};

/* Passed but not in the identity: PATH (observation decides, deps.c), and
 * the sanitizers' options of kiln's own helper in a sanitizer build, and
 * the paths kiln-observe.so leaves out of the record (status shows them). */
static const char *const unkeyed[] = { "PATH", "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
					"KILN_OBSERVE_IGNORE", NULL };

static bool in(const char *const *list, const char *name, size_t n)
{
	for (size_t i = 0; list[i] != NULL; i++) {
		if (strlen(list[i]) == n && strncmp(list[i], name, n) == 0)
			return true;
	}
	return false;
}

bool tcenv_unkeyed(const char *name)
{
	return in(unkeyed, name, strlen(name));
}

bool tcenv_name_ok(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n > 128)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		bool ok = c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			  (i > 0 && c >= '0' && c <= '9') || (i == n - 1 && i > 0 && c == '*');
		if (!ok)
			return false;
	}
	return true;
}

static bool wanted(const char *kv, char *const *extra, size_t nextra)
{
	size_t n = strcspn(kv, "=");
	if (kv[n] != '=' || n == 0)
		return false;
	if (in(names, kv, n) || in(unkeyed, kv, n))
		return true;
	if (in(dropped, kv, n) || strncmp(kv, "KILN_", 5) == 0)
		return false;
	for (size_t i = 0; prefixes[i] != NULL; i++) {
		if (strncmp(kv, prefixes[i], strlen(prefixes[i])) == 0)
			return true;
	}
	for (size_t i = 0; i < nextra; i++) {
		size_t m = strlen(extra[i]);
		bool prefix = m > 0 && extra[i][m - 1] == '*';
		if (prefix ? m - 1 <= n && strncmp(kv, extra[i], m - 1) == 0
			   : m == n && strncmp(kv, extra[i], n) == 0)
			return true;
	}
	return false;
}

/* PATH's absolute entries: an empty or relative one would name the build
 * directory (the toolchain's working directory), which is no place to
 * find a program in. The default when kilnd has none: glibc's. */
static char *absolute_path(const char *v)
{
	size_t len = v != NULL ? strlen(v) : 0, o = 0;
	char *out = malloc(len + 16);
	if (out == NULL)
		return NULL;
	for (const char *p = v; p != NULL && *p != '\0';) {
		size_t n = strcspn(p, ":");
		if (n > 0 && p[0] == '/') {
			if (o > 0)
				out[o++] = ':';
			memcpy(out + o, p, n);
			o += n;
		}
		p += n + (p[n] == ':');
	}
	if (o == 0)
		o = (size_t)snprintf(out, len + 16, "/bin:/usr/bin");
	out[o] = '\0';
	return out;
}

/* Variables that are lists of directories: an empty or relative element
 * would name the build directory (the compilers' working directory), so
 * only absolute ones are passed, and none at all when none is left. */
static const char *const path_lists[] = {
	"CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "OBJC_INCLUDE_PATH", "LIBRARY_PATH",
	"COMPILER_PATH", "LD_LIBRARY_PATH", "LD_RUN_PATH", NULL,
};

/* "NAME=" and the absolute elements of kv's value, malloc'd; NULL when
 * none is left or out of memory (*oom then). */
static char *absolute_list(const char *kv, bool *oom)
{
	size_t n = strcspn(kv, "="), o = n + 1;
	char *out = malloc(strlen(kv) + 1);
	*oom = out == NULL;
	if (out == NULL)
		return NULL;
	memcpy(out, kv, n + 1);
	for (const char *p = kv + n + 1; *p != '\0';) {
		size_t m = strcspn(p, ":");
		if (m > 0 && p[0] == '/') {
			if (o > n + 1)
				out[o++] = ':';
			memcpy(out + o, p, m);
			o += m;
		}
		p += m + (p[m] == ':');
	}
	out[o] = '\0';
	if (o == n + 1) {
		free(out);
		return NULL;
	}
	return out;
}

static int by_name(const void *a, const void *b)
{
	const char *x = *(char *const *)a, *y = *(char *const *)b;
	size_t nx = strcspn(x, "="), ny = strcspn(y, "=");
	int c = strncmp(x, y, nx < ny ? nx : ny);
	return c != 0 ? c : (nx > ny) - (nx < ny);
}

static bool have(const struct tcenv *e, const char *kv)
{
	for (size_t i = 0; i < e->nvars; i++) {
		if (by_name(&e->vars[i], &kv) == 0)
			return true;
	}
	return false;
}

int tcenv_make(struct tcenv *e, char *const *env, char *const *extra, size_t nextra)
{
	size_t n = 0;
	const char *path = NULL;
	memset(e, 0, sizeof(*e));
	while (env != NULL && env[n] != NULL)
		n++;
	e->vars = calloc(n + 2, sizeof(*e->vars));
	if (e->vars == NULL)
		return -ENOMEM;
	/* A name set twice in env: the first, as getenv finds it. */
	for (size_t i = 0; i < n; i++) {
		if (strncmp(env[i], "PATH=", 5) == 0) {
			if (path == NULL)
				path = env[i] + 5;
		} else if (wanted(env[i], extra, nextra) && !have(e, env[i])) {
			bool list = in(path_lists, env[i], strcspn(env[i], "=")), oom = false;
			char *kv = list ? absolute_list(env[i], &oom) : strdup(env[i]);
			if (kv != NULL)
				e->vars[e->nvars++] = kv;
			else if (!list || oom) {
				tcenv_fini(e);
				return -ENOMEM;
			}
		}
	}
	e->path = absolute_path(path);
	if (e->path == NULL || asprintf(&e->vars[e->nvars], "PATH=%s", e->path) < 0) {
		e->vars[e->nvars] = NULL;
		tcenv_fini(e);
		return -ENOMEM;
	}
	e->nvars++;
	qsort(e->vars, e->nvars, sizeof(*e->vars), by_name);
	return 0;
}

void tcenv_fini(struct tcenv *e)
{
	for (size_t i = 0; e->vars != NULL && i < e->nvars; i++)
		free(e->vars[i]);
	free(e->vars);
	free(e->path);
	memset(e, 0, sizeof(*e));
}

const char *tcenv_value(const struct tcenv *e, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; e != NULL && i < e->nvars; i++) {
		if (strncmp(e->vars[i], name, n) == 0 && e->vars[i][n] == '=')
			return e->vars[i] + n + 1;
	}
	return NULL;
}

extern char **environ;

static struct tcenv *own;
static struct tcenv fallback;
static pthread_once_t fallback_once = PTHREAD_ONCE_INIT;

void tcenv_set(struct tcenv *e)
{
	own = e;
}

/* A program that never called tcenv_set (a unit test): the list applied
 * to its environment. */
static void make_fallback(void)
{
	if (tcenv_make(&fallback, environ, NULL, 0) != 0)
		memset(&fallback, 0, sizeof(fallback));
}

const struct tcenv *tcenv(void)
{
	if (own == NULL) {
		pthread_once(&fallback_once, make_fallback);
		return &fallback;
	}
	return own;
}

const char *tcenv_get(const char *name)
{
	return tcenv_value(tcenv(), name);
}
