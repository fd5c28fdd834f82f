/*
 * A stand-in for the kernel's answer to statfs(2), preloaded into kilnd by
 * it_cachefs: paths under $KILN_TEST_STATFS_PREFIX get the f_type
 * $KILN_TEST_STATFS_MAGIC (as if that directory were on NFS, Lustre, ...),
 * every other path the real answer. kilnd itself has no test hook for it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
/* Both entry points are defined here, so neither may be renamed to the
 * other by the large-file headers. */
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>

/* True when path is the prefix or below it. */
static int faked(const char *path, long *magic)
{
	const char *prefix = getenv("KILN_TEST_STATFS_PREFIX");
	const char *value = getenv("KILN_TEST_STATFS_MAGIC");
	size_t n;

	if (path == NULL || prefix == NULL || value == NULL || prefix[0] != '/')
		return 0;
	n = strlen(prefix);
	if (strncmp(path, prefix, n) != 0 || (path[n] != '\0' && path[n] != '/'))
		return 0;
	*magic = (long)strtoul(value, NULL, 0);
	return 1;
}

int statfs(const char *path, struct statfs *buf)
{
	static int (*real)(const char *, struct statfs *);
	long magic;
	int rc;

	if (real == NULL)
		*(void **)&real = dlsym(RTLD_NEXT, "statfs");
	rc = real(path, buf);
	if (rc == 0 && faked(path, &magic))
		buf->f_type = magic;
	return rc;
}

int statfs64(const char *path, struct statfs64 *buf)
{
	static int (*real)(const char *, struct statfs64 *);
	long magic;
	int rc;

	if (real == NULL)
		*(void **)&real = dlsym(RTLD_NEXT, "statfs64");
	rc = real(path, buf);
	if (rc == 0 && faked(path, &magic))
		buf->f_type = magic;
	return rc;
}
