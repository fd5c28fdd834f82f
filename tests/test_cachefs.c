/*
 * Unit tests of the cache directory's filesystem check (daemon/cachefs.c):
 * which statfs types are network filesystems, what a refusal says, and
 * that a local directory, existing or not, passes without being made.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cachefs.h"
#include "unit.h"

START_TEST(network_filesystems_are_named)
{
	static const struct {
		unsigned long magic;
		const char *name;
	} net[] = {
		{ 0x6969, "NFS" }, { 0x0BD00BD0, "Lustre" }, { 0x47504653, "GPFS (IBM Storage Scale)" },
		{ 0x19830326, "BeeGFS" }, { 0x00C36400, "CephFS" }, { 0xFF534D42, "SMB (CIFS)" },
		{ 0xFE534D42, "SMB2/3" }, { 0x517B, "SMB (smbfs)" }, { 0x5346414F, "AFS" },
		{ 0x73757245, "Coda" }, { 0x564C, "NCP" }, { 0x01021997, "9P" },
		{ 0xAAD7AAEA, "PanFS" }, { 0x20030528, "OrangeFS (PVFS2)" }, { 0x01161970, "GFS2" },
		{ 0x7461636F, "OCFS2" },
	};
	for (size_t i = 0; i < sizeof(net) / sizeof(net[0]); i++) {
		const char *name = cachefs_network_name(net[i].magic);

		ck_assert_msg(name != NULL && strcmp(name, net[i].name) == 0, "0x%lx: %s, not %s",
			      net[i].magic, name != NULL ? name : "(local)", net[i].name);
	}
	/* f_type is a signed long: SMB's types come sign-extended where it is
	 * 32 bits wide, and only the low 32 bits count. */
	ck_assert_str_eq(cachefs_network_name((unsigned long)(long)(int)0xFF534D42u), "SMB (CIFS)");
}
END_TEST

START_TEST(local_filesystems_are_not_refused)
{
	/* ext4, XFS, Btrfs, tmpfs, overlayfs, ZFS, ramfs, squashfs, and FUSE,
	 * whose one type covers fuse-overlayfs as much as sshfs. */
	static const unsigned long local[] = { 0xEF53, 0x58465342, 0x9123683E, 0x01021994,
					       0x794C7630, 0x2FC12FC1, 0x858458F6, 0x73717368,
					       0x65735546, 0 };
	for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++)
		ck_assert_msg(cachefs_network_name(local[i]) == NULL, "0x%lx refused as %s", local[i],
			      cachefs_network_name(local[i]));
}
END_TEST

START_TEST(refusal_names_a_local_directory_and_upstream)
{
	char err[2048];

	cachefs_refusal("/home/alice/.cache/kiln", 0x0BD00BD0, "/tmp/kiln-1000/cache", err,
			sizeof(err));
	ck_assert_msg(strstr(err, "/home/alice/.cache/kiln is on Lustre (statfs type 0xbd00bd0), a "
				  "network filesystem") != NULL, "%s", err);
	ck_assert_msg(strstr(err, "file locking") != NULL, "%s", err);
	ck_assert_msg(strstr(err, "KILN_CACHE_DIR=/tmp/kiln-1000/cache or --cache-dir "
				  "/tmp/kiln-1000/cache") != NULL, "%s", err);
	ck_assert_msg(strstr(err, "$TMPDIR") != NULL && strstr(err, "$XDG_RUNTIME_DIR") != NULL,
		      "%s", err);
	ck_assert_msg(strstr(err, "--upstream DIR") != NULL, "%s", err);
	ck_assert_msg(strstr(err, "--allow-network-cache") != NULL, "%s", err);
	/* No local directory known: still says what kind to use. */
	cachefs_refusal("/nfs/c", 0x6969, NULL, err, sizeof(err));
	ck_assert_msg(strstr(err, "KILN_CACHE_DIR or --cache-dir (local disk or tmpfs)") != NULL,
		      "%s", err);
	/* A short buffer is cut, never overrun. */
	cachefs_refusal("/nfs/c", 0x6969, NULL, err, 16);
	ck_assert_uint_eq(strlen(err), 15);
}
END_TEST

/* This test's own directory is local (it is where the suite runs): it, and
 * a path below it that does not exist, pass; the path is not made. */
START_TEST(local_directory_passes_unmade)
{
	char tmpl[] = "/tmp/kiln-cachefs-XXXXXX", path[128], err[1024] = "";
	const char *netfs = "unset";
	char *dir = mkdtemp(tmpl);

	ck_assert(dir != NULL);
	ck_assert_int_eq(cachefs_check(dir, false, &netfs, err, sizeof(err)), 0);
	ck_assert_ptr_null(netfs);
	snprintf(path, sizeof(path), "%s/a/b/cache", dir);
	ck_assert_int_eq(cachefs_check(path, false, &netfs, err, sizeof(err)), 0);
	ck_assert_msg(access(path, F_OK) != 0 && errno == ENOENT, "%s was made", path);
	ck_assert_int_eq(cachefs_check("relative/dir", false, &netfs, err, sizeof(err)), 0);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cachefs");
	TCase *tc = tcase_create("cachefs");

	tcase_add_test(tc, network_filesystems_are_named);
	tcase_add_test(tc, local_filesystems_are_not_refused);
	tcase_add_test(tc, refusal_names_a_local_directory_and_upstream);
	tcase_add_test(tc, local_directory_passes_unmade);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
