/*
 * Unit tests for the classification of pseudo-files (daemon/flight/pseudo.c):
 * which paths under /proc and /sys, and which devices and filesystems, are
 * no input, and which make a build uncacheable.
 */
#include <check.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "pseudo.h"
#include "unit.h"

static enum pseudo_kind by_name(const char *path, bool cpu)
{
	const char *why = NULL;
	enum pseudo_kind k = pseudo_by_name(path, cpu, &why);
	ck_assert_ptr_nonnull(why);
	ck_assert_msg(k == PSEUDO_NO || why[0] != '\0', "%s: no reason", path);
	return k;
}

START_TEST(ordinary_paths_are_inputs)
{
	ck_assert_int_eq(by_name("/usr/include/stdio.h", false), PSEUDO_NO);
	ck_assert_int_eq(by_name("/dev/shm/dace/h.h", false), PSEUDO_NO);
	/* prefixes of the names, not the names */
	ck_assert_int_eq(by_name("/procfoo/h.h", false), PSEUDO_NO);
	/* ".." after an allowed name leads elsewhere: the name decides nothing
	 * (stat and statfs do, in pseudo_classify) */
	ck_assert_int_eq(by_name("/sys/fs/cgroup/../../../tmp/h.h", false), PSEUDO_NO);
	ck_assert_int_eq(by_name("/proc/self/task/../../../tmp/h.h", false), PSEUDO_NO);
	ck_assert_int_eq(by_name("/sys/devices/system/cpu/..", true), PSEUDO_NO);
	ck_assert_int_eq(by_name("/system/h.h", false), PSEUDO_NO);
}
END_TEST

START_TEST(own_process_and_housekeeping_are_no_input)
{
	ck_assert_int_eq(by_name("/proc/self/maps", false), PSEUDO_HARMLESS);
	ck_assert_int_eq(by_name("/proc/self/exe", false), PSEUDO_HARMLESS);
	ck_assert_int_eq(by_name("/proc/thread-self/status", false), PSEUDO_HARMLESS);
	ck_assert_int_eq(by_name("/proc/self/fd", false), PSEUDO_HARMLESS);
	ck_assert_int_eq(by_name("/proc/self", false), PSEUDO_HARMLESS);
	ck_assert_int_eq(by_name("/proc/meminfo", false), PSEUDO_HARMLESS);
	ck_assert_int_eq(by_name("/proc/sys/vm/overcommit_memory", false), PSEUDO_HARMLESS);
	ck_assert_int_eq(by_name("/sys/devices/system/cpu/online", false), PSEUDO_HARMLESS);
	ck_assert_int_eq(by_name("/sys/fs/selinux", false), PSEUDO_HARMLESS);
	ck_assert_int_eq(by_name("/proc/driver/nvidia/params", false), PSEUDO_HARMLESS);
}
END_TEST

START_TEST(what_decides_is_untrusted)
{
	/* variables read behind getenv's back; a pipe the toolchain read */
	ck_assert_int_eq(by_name("/proc/self/environ", false), PSEUDO_UNTRUSTED);
	ck_assert_int_eq(by_name("/proc/self/fd/0", false), PSEUDO_UNTRUSTED);
	ck_assert_int_eq(by_name("/proc/self/fdinfo2", false), PSEUDO_UNTRUSTED);
	/* another process (a link the interposer could not resolve) */
	ck_assert_int_eq(by_name("/proc/1/root/tmp/h.h", false), PSEUDO_UNTRUSTED);
	ck_assert_int_eq(by_name("/proc/sys/kernel/ostype", false), PSEUDO_UNTRUSTED);
	ck_assert_int_eq(by_name("/proc/version", false), PSEUDO_UNTRUSTED);
	ck_assert_int_eq(by_name("/sys/kernel/profiling", false), PSEUDO_UNTRUSTED);
	/* a prefix of an allowed name is not that name */
	ck_assert_int_eq(by_name("/proc/meminfo2", false), PSEUDO_UNTRUSTED);
	ck_assert_int_eq(by_name("/sys/devices/system/cpu/online2", false), PSEUDO_UNTRUSTED);
}
END_TEST

START_TEST(cpu_description_counts_only_when_in_the_key)
{
	ck_assert_int_eq(by_name("/proc/cpuinfo", false), PSEUDO_UNTRUSTED);
	ck_assert_int_eq(by_name("/proc/cpuinfo", true), PSEUDO_HARMLESS);
	ck_assert_int_eq(by_name("/sys/devices/system/cpu/cpu0/regs/identification/midr_el1", false),
			 PSEUDO_UNTRUSTED);
	ck_assert_int_eq(by_name("/sys/devices/system/cpu/cpu0/regs/identification/midr_el1", true),
			 PSEUDO_HARMLESS);
}
END_TEST

static enum pseudo_kind by_stat(const char *path, mode_t type, unsigned ma, unsigned mi, long fs)
{
	struct stat st = { .st_mode = type | 0644, .st_rdev = makedev(ma, mi) };
	const char *why = NULL;
	enum pseudo_kind k = pseudo_by_stat(path, &st, fs, &why);
	ck_assert_msg(k == PSEUDO_NO || why[0] != '\0', "%s: no reason", path);
	return k;
}

START_TEST(devices_fifos_and_pseudo_filesystems)
{
	const long tmpfs = 0x01021994, ext4 = 0xEF53, proc = 0x9fa0, sysfs = 0x62656572;

	ck_assert_int_eq(by_stat("/dev/null", S_IFCHR, 1, 3, tmpfs), PSEUDO_HARMLESS);
	ck_assert_int_eq(by_stat("/dev/urandom", S_IFCHR, 1, 9, tmpfs), PSEUDO_HARMLESS);
	/* by its numbers, whatever its name */
	ck_assert_int_eq(by_stat("/tmp/null", S_IFCHR, 1, 3, ext4), PSEUDO_HARMLESS);
	ck_assert_int_eq(by_stat("/dev/null", S_IFCHR, 4, 1, tmpfs), PSEUDO_UNTRUSTED);
	ck_assert_int_eq(by_stat("/dev/mem", S_IFCHR, 1, 1, tmpfs), PSEUDO_UNTRUSTED);
	ck_assert_int_eq(by_stat("/dev/tty", S_IFCHR, 5, 0, tmpfs), PSEUDO_HARMLESS);
	ck_assert_int_eq(by_stat("/dev/console", S_IFCHR, 5, 1, tmpfs), PSEUDO_UNTRUSTED);
	ck_assert_int_eq(by_stat("/dev/pts/0", S_IFCHR, 136, 0, tmpfs), PSEUDO_UNTRUSTED);
	ck_assert_int_eq(by_stat("/dev/nvidia0", S_IFCHR, 195, 0, tmpfs), PSEUDO_HARMLESS);
	ck_assert_int_eq(by_stat("/dev/sda", S_IFBLK, 8, 0, tmpfs), PSEUDO_UNTRUSTED);
	ck_assert_int_eq(by_stat("/tmp/h.h", S_IFIFO, 0, 0, ext4), PSEUDO_UNTRUSTED);
	ck_assert_int_eq(by_stat("/tmp/s", S_IFSOCK, 0, 0, ext4), PSEUDO_UNTRUSTED);
	/* procfs or sysfs mounted elsewhere */
	ck_assert_int_eq(by_stat("/tmp/p/version", S_IFREG, 0, 0, proc), PSEUDO_UNTRUSTED);
	ck_assert_int_eq(by_stat("/tmp/s/kernel/profiling", S_IFREG, 0, 0, sysfs),
			 PSEUDO_UNTRUSTED);
	ck_assert_int_eq(by_stat("/dev/shm/h.h", S_IFREG, 0, 0, tmpfs), PSEUDO_NO);
	ck_assert_int_eq(by_stat("/usr/include", S_IFDIR, 0, 0, ext4), PSEUDO_NO);
}
END_TEST

static Suite *pseudo_suite(void)
{
	Suite *s = suite_create("pseudo");
	TCase *t = tcase_create("pseudo");
	tcase_add_test(t, ordinary_paths_are_inputs);
	tcase_add_test(t, own_process_and_housekeeping_are_no_input);
	tcase_add_test(t, what_decides_is_untrusted);
	tcase_add_test(t, cpu_description_counts_only_when_in_the_key);
	tcase_add_test(t, devices_fifos_and_pseudo_filesystems);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return unit_run(pseudo_suite());
}
