/*
 * The cache directory's filesystem (cachefs.h): statfs(2) of the directory,
 * or of its nearest existing parent, against the magic numbers of the
 * network and cluster filesystems HPC sites mount.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cachefs.h"

/*
 * Network and cluster filesystems by statfs f_type (linux/magic.h and the
 * vendors' modules). FUSE (0x65735546) is left out on purpose: GlusterFS,
 * ceph-fuse, sshfs or JuiceFS share its one type with local FUSE
 * filesystems such as fuse-overlayfs in rootless containers, so refusing it
 * would refuse those too (docs/operations.md).
 */
static const struct {
	unsigned long magic;
	const char *name;
} network_fs[] = {
	{ 0x00006969UL, "NFS" },
	{ 0x0BD00BD0UL, "Lustre" },
	{ 0x47504653UL, "GPFS (IBM Storage Scale)" },
	{ 0x19830326UL, "BeeGFS" },
	{ 0x00C36400UL, "CephFS" },
	{ 0xFF534D42UL, "SMB (CIFS)" },
	{ 0xFE534D42UL, "SMB2/3" },
	{ 0x0000517BUL, "SMB (smbfs)" },
	{ 0x5346414FUL, "AFS" },
	{ 0x73757245UL, "Coda" },
	{ 0x0000564CUL, "NCP" },
	{ 0x01021997UL, "9P" },
	{ 0xAAD7AAEAUL, "PanFS" },
	{ 0x20030528UL, "OrangeFS (PVFS2)" },
	{ 0x01161970UL, "GFS2" },
	{ 0x7461636FUL, "OCFS2" },
};

const char *cachefs_network_name(unsigned long magic)
{
	magic &= 0xFFFFFFFFUL;   /* f_type is a signed long; SMB's types are >= 2^31 */
	for (size_t i = 0; i < sizeof(network_fs) / sizeof(network_fs[0]); i++)
		if (network_fs[i].magic == magic)
			return network_fs[i].name;
	return NULL;
}

void cachefs_refusal(const char *dir, unsigned long magic, const char *local, char *err,
		     size_t errlen)
{
	const char *name = cachefs_network_name(magic);
	char use[PATH_MAX + 128];

	if (local != NULL)
		snprintf(use, sizeof(use), "KILN_CACHE_DIR=%s or --cache-dir %s (a directory under "
			 "the job's $TMPDIR, or under $XDG_RUNTIME_DIR, which is in memory, also "
			 "does)", local, local);
	else
		snprintf(use, sizeof(use), "KILN_CACHE_DIR or --cache-dir (local disk or tmpfs)");
	snprintf(err, errlen, "the cache directory %s is on %s (statfs type 0x%lx), a network "
		 "filesystem: its index needs file locking that network filesystems do not "
		 "provide reliably, and every hit would cross the network. Use a node-local "
		 "directory: %s; to share builds between nodes and jobs, give every kilnd "
		 "--upstream DIR on the shared filesystem; --allow-network-cache starts anyway",
		 dir, name != NULL ? name : "a network filesystem", magic & 0xFFFFFFFFUL, use);
}

/* statfs of path, or of its nearest existing parent while it does not exist:
 * 0 with *magic, or -errno. */
static int fs_type(const char *path, unsigned long *magic)
{
	char buf[PATH_MAX];
	struct statfs st;

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	while (statfs(buf, &st) != 0) {
		char *slash = strrchr(buf, '/');

		if (errno != ENOENT || slash == NULL)
			return -errno;
		if (slash == buf)
			slash[1] = '\0';   /* up to "/" itself */
		else
			*slash = '\0';
	}
	*magic = (unsigned long)st.f_type & 0xFFFFFFFFUL;
	return 0;
}

/* A node-local cache directory to suggest: /tmp/kiln-UID/cache (where the
 * Slurm prologue puts it, kept across jobs), else under $TMPDIR or /var/tmp;
 * the first whose filesystem is not a network one. NULL when none is. */
static const char *local_suggestion(char *buf, size_t len)
{
	const char *tmpdir = getenv("TMPDIR");
	const char *cands[] = { "/tmp", tmpdir, "/var/tmp" };
	unsigned long magic;
	struct stat st;

	for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]); i++) {
		if (cands[i] == NULL || cands[i][0] != '/' || stat(cands[i], &st) != 0 ||
		    !S_ISDIR(st.st_mode) || fs_type(cands[i], &magic) != 0 ||
		    cachefs_network_name(magic) != NULL)
			continue;
		snprintf(buf, len, "%s/kiln-%d/cache", cands[i], (int)geteuid());
		return buf;
	}
	return NULL;
}

int cachefs_check(const char *dir, bool allow, const char **netfs, char *err, size_t errlen)
{
	unsigned long magic = 0;
	char local[PATH_MAX];
	int rc = fs_type(dir, &magic);

	*netfs = NULL;
	/* A filesystem statfs cannot tell is not refused: creating or opening
	 * the directory next says what is wrong with it. */
	if (rc != 0 || cachefs_network_name(magic) == NULL)
		return 0;
	if (allow) {
		*netfs = cachefs_network_name(magic);
		return 0;
	}
	cachefs_refusal(dir, magic, local_suggestion(local, sizeof(local)), err, errlen);
	return -EREMOTE;
}
