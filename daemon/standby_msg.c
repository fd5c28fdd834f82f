/*
 * A waiting kiln-exec's start, packed and taken apart (standby_msg.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "standby_msg.h"

static const char magic[4] = { 'K', 'S', 'B', '1' };

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The strings of v into *n, their bytes with NULs added to *bytes; -1
 * past the limits. */
static int count(char *const *v, size_t *n, size_t *bytes)
{
	*n = 0;
	for (; v != NULL && v[*n] != NULL; (*n)++) {
		if (*n >= STANDBY_MAX_STRINGS)
			return -1;
		*bytes += strlen(v[*n]) + 1;
		if (*bytes > STANDBY_MAX)
			return -1;
	}
	return 0;
}

char *standby_pack(const char *cwd, char *const *argv, char *const *env, size_t *len)
{
	size_t argc, envc, bytes = STANDBY_HEAD + strlen(cwd != NULL ? cwd : "") + 1;
	if (count(argv, &argc, &bytes) != 0 || count(env, &envc, &bytes) != 0 || argc == 0 ||
	    bytes > STANDBY_MAX)
		return NULL;
	unsigned char *buf = malloc(bytes);
	if (buf == NULL)
		return NULL;
	memcpy(buf, magic, 4);
	put32(buf + 4, (uint32_t)bytes);
	put32(buf + 8, (uint32_t)argc);
	put32(buf + 12, (uint32_t)envc);
	char *p = (char *)buf + STANDBY_HEAD;
	const char *dir = cwd != NULL ? cwd : "";
	p = stpcpy(p, dir) + 1;
	for (size_t i = 0; i < argc; i++)
		p = stpcpy(p, argv[i]) + 1;
	for (size_t i = 0; i < envc; i++)
		p = stpcpy(p, env[i]) + 1;
	*len = bytes;
	return (char *)buf;
}

uint32_t standby_length(const unsigned char head[STANDBY_HEAD])
{
	uint32_t n = get32(head + 4);
	if (memcmp(head, magic, 4) != 0 || n < STANDBY_HEAD + 2 || n > STANDBY_MAX)
		return 0;
	return n;
}

/* n strings from *p on, each NUL-ended before end, into v (n + 1 slots). */
static int take(char **p, const char *end, size_t n, char **v)
{
	for (size_t i = 0; i < n; i++) {
		char *nul = *p < end ? memchr(*p, '\0', (size_t)(end - *p)) : NULL;
		if (nul == NULL)
			return -EINVAL;
		v[i] = *p;
		*p = nul + 1;
	}
	v[n] = NULL;
	return 0;
}

int standby_unpack(char *buf, size_t len, char **cwd, char ***argv, char ***env)
{
	*cwd = NULL;
	*argv = *env = NULL;
	if (len < STANDBY_HEAD || standby_length((const unsigned char *)buf) != len)
		return -EINVAL;
	uint32_t argc = get32((const unsigned char *)buf + 8);
	uint32_t envc = get32((const unsigned char *)buf + 12);
	/* Each string takes a byte at least: counts the buffer cannot hold
	 * are refused before anything is allocated for them. */
	if (argc == 0 || argc > STANDBY_MAX_STRINGS || envc > STANDBY_MAX_STRINGS ||
	    (size_t)argc + envc + 1 > len - STANDBY_HEAD)
		return -EINVAL;
	char **a = calloc((size_t)argc + 1, sizeof(*a)), **e = calloc((size_t)envc + 1, sizeof(*e));
	if (a == NULL || e == NULL) {
		free(a);
		free(e);
		return -ENOMEM;
	}
	char *p = buf + STANDBY_HEAD, *end = buf + len, *dir[2];
	int rc = take(&p, end, 1, dir);
	if (rc == 0)
		rc = take(&p, end, argc, a);
	if (rc == 0)
		rc = take(&p, end, envc, e);
	if (rc == 0 && p != end)
		rc = -EINVAL;   /* bytes after the last string */
	if (rc != 0) {
		free(a);
		free(e);
		return rc;
	}
	*cwd = dir[0];
	*argv = a;
	*env = e;
	return 0;
}
