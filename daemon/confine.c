/*
 * Landlock confinement of compiler runs (confine.h). Landlock needs no
 * privileges: an unprivileged process restricts itself and its children,
 * and the kernel enforces it on every path, however the path is named. Only
 * write-like rights are handled, so reading and executing stay free.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "confine.h"

/* Newer than some installed headers: truncating a file (ABI 3). */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif

int confine_abi(char *why, size_t cap)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	if (abi < 1) {
		snprintf(why, cap, "Landlock is not available in this kernel (%s)",
			 strerror(errno == 0 ? ENOSYS : errno));
		return 0;
	}
	why[0] = '\0';
	return (int)abi;
}

/* The write-like rights of an ABI. */
static uint64_t write_rights(int abi)
{
	uint64_t r = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
		     LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR |
		     LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
		     LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |
		     LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;
	if (abi >= 2)
		r |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		r |= LANDLOCK_ACCESS_FS_TRUNCATE;
	return r;
}

static int allow(int ruleset, const char *path, uint64_t rights, char *why, size_t cap)
{
	int fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, cap, "cannot open %s: %s", path, strerror(errno));
		return -errno;
	}
	struct landlock_path_beneath_attr pb = { .allowed_access = rights, .parent_fd = fd };
	long rc = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
	int e = errno;
	close(fd);
	if (rc != 0) {
		snprintf(why, cap, "landlock_add_rule(%s): %s", path, strerror(e));
		return -e;
	}
	return 0;
}

int confine_writes(const char *dir, const char *const *extra, size_t nextra, char *why, size_t cap)
{
	int abi = confine_abi(why, cap);
	if (abi < 1)
		return -ENOSYS;
	uint64_t rights = write_rights(abi);
	struct landlock_ruleset_attr attr = { .handled_access_fs = rights };
	int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
	if (ruleset < 0) {
		snprintf(why, cap, "landlock_create_ruleset: %s", strerror(errno));
		return -errno;
	}
	/* Files only take file rights; /dev/null is where outputs are thrown. */
	uint64_t file_rights = LANDLOCK_ACCESS_FS_WRITE_FILE |
			       (abi >= 3 ? LANDLOCK_ACCESS_FS_TRUNCATE : 0);
	int rc = allow(ruleset, dir, rights, why, cap);
	for (size_t i = 0; rc == 0 && i < nextra; i++)
		rc = allow(ruleset, extra[i], rights, why, cap);
	if (rc == 0)
		rc = allow(ruleset, "/dev/null", file_rights, why, cap);
	if (rc == 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		rc = -errno;
		snprintf(why, cap, "PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
	}
	if (rc == 0 && syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) {
		rc = -errno;
		snprintf(why, cap, "landlock_restrict_self: %s", strerror(errno));
	}
	close(ruleset);
	return rc;
}
