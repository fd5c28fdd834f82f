/*
 * Which pseudo-files a toolchain may read without making its build
 * uncacheable; see pseudo.h. The allow-lists are short on purpose: what
 * is not on them and is made by the kernel when read is an input that
 * cannot be recorded, and such a build is served but not cached.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>

#include "pseudo.h"
#include "util.h"

/* The toolchain's own process: its executable, memory map, limits and
 * descriptors; they shape how it runs, not what it writes. Not environ:
 * variables read there instead of through getenv would escape the record. */
static const char *const self_ok[] = {
	"exe", "maps", "smaps", "status", "stat", "statm", "auxv", "limits", "cgroup",
	"mountinfo", "mounts", "comm", "cmdline", "fd", "fdinfo", "task", "oom_score_adj",
	"coredump_filter", "sessionid", "loginuid", NULL,
};

/* The system's size and housekeeping: memory, CPU counts, the kernel's
 * random pool, SELinux and cgroup state (libselinux, nproc in a
 * container). A prefix, matched at a '/' boundary. */
static const char *const system_ok[] = {
	"/proc/meminfo", "/proc/filesystems", "/proc/stat", "/proc/loadavg", "/proc/swaps",
	"/proc/sys/vm/overcommit_memory", "/proc/sys/kernel/random", "/proc/sys/kernel/pid_max",
	"/proc/sys/kernel/threads-max", "/proc/sys/kernel/osrelease",
	"/sys/devices/system/cpu/online", "/sys/devices/system/cpu/possible",
	"/sys/devices/system/cpu/present", "/sys/devices/system/cpu/kernel_max",
	"/sys/fs/selinux", "/sys/fs/cgroup", "/sys/kernel/mm/transparent_hugepage",
	/* The GPU (nvcc -arch=native asks the driver): its architecture is in
	 * the key of every nvcc build (docs/cuda.md). */
	"/proc/driver/nvidia", "/sys/module/nvidia", "/sys/bus/pci/devices",
	NULL,
};

/* The CPU's description: what -march=native reads on some machines
 * (/proc/cpuinfo on Arm). The key holds the CPU only when an argument
 * says "native". */
static const char *const cpu_desc[] = {
	"/proc/cpuinfo", "/sys/devices/system/cpu", "/sys/devices/system/node", NULL,
};

static bool below(const char *path, const char *root)
{
	size_t n = strlen(root);
	return strncmp(path, root, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

static bool below_any(const char *path, const char *const *roots)
{
	for (size_t i = 0; roots[i] != NULL; i++)
		if (below(path, roots[i]))
			return true;
	return false;
}

enum pseudo_kind pseudo_by_name(const char *path, bool cpu_in_key, const char **why)
{
	*why = "";
	if (!below(path, "/proc") && !below(path, "/sys"))
		return PSEUDO_NO;
	/* "/sys/fs/cgroup/../../../tmp/h.h" is no file of /sys: a name with
	 * ".." (or "." or "//") decides nothing by its text; what stat and
	 * statfs find there does (pseudo_classify). */
	if (strstr(path, "/../") != NULL || strstr(path, "/./") != NULL || strstr(path, "//") != NULL ||
	    (strlen(path) >= 3 && (strcmp(path + strlen(path) - 3, "/..") == 0 ||
				   strcmp(path + strlen(path) - 2, "/.") == 0)))
		return PSEUDO_NO;
	if (strcmp(path, "/proc") == 0 || strcmp(path, "/sys") == 0 ||
	    strcmp(path, "/proc/self") == 0 || strcmp(path, "/proc/thread-self") == 0) {
		*why = "a mount point of the kernel's";
		return PSEUDO_HARMLESS;
	}
	if (strncmp(path, "/proc/self/", 11) == 0 || strncmp(path, "/proc/thread-self/", 18) == 0) {
		const char *rest = strchr(path + 6, '/') + 1;
		size_t n = strcspn(rest, "/");
		for (size_t i = 0; self_ok[i] != NULL; i++) {
			if (strlen(self_ok[i]) != n || strncmp(rest, self_ok[i], n) != 0)
				continue;
			/* The descriptor table, not what a descriptor names (a pipe,
			 * the toolchain's standard input). */
			if (strcmp(self_ok[i], "fd") == 0 && rest[n] == '/') {
				*why = "it is what one of the toolchain's descriptors names (a pipe or "
				       "socket: not a file)";
				return PSEUDO_UNTRUSTED;
			}
			*why = "the toolchain's own process";
			return PSEUDO_HARMLESS;
		}
		*why = "it is made by the kernel when read (procfs)";
		return PSEUDO_UNTRUSTED;
	}
	if (below_any(path, system_ok)) {
		*why = "the system's size or housekeeping, not an input of what is built";
		return PSEUDO_HARMLESS;
	}
	if (below_any(path, cpu_desc)) {
		*why = cpu_in_key ? "the CPU, which is in the key (an argument says native)"
				  : "it describes the CPU, which is in the key only when an argument "
				    "says native";
		return cpu_in_key ? PSEUDO_HARMLESS : PSEUDO_UNTRUSTED;
	}
	*why = below(path, "/proc") ? "it is made by the kernel when read (procfs)"
				    : "it is made by the kernel when read (sysfs)";
	return PSEUDO_UNTRUSTED;
}

enum pseudo_kind pseudo_by_stat(const char *path, const struct stat *st, long fs_type,
				const char **why)
{
	*why = "";
	if (S_ISCHR(st->st_mode)) {
		unsigned ma = major(st->st_rdev), mi = minor(st->st_rdev);
		/* null, zero, full, random, urandom: nothing, or random bytes. */
		if (ma == 1 && (mi == 3 || mi == 5 || mi == 7 || mi == 8 || mi == 9)) {
			*why = "a device that gives nothing, zeros or random bytes";
			return PSEUDO_HARMLESS;
		}
		/* The controlling terminal: a compiler runs in a session of
		 * its own, with none, so opening it fails (bash tries it for
		 * job control) and nothing can be read from it. */
		if (ma == 5 && mi == 0) {
			*why = "the controlling terminal, which compiler runs have none of";
			return PSEUDO_HARMLESS;
		}
		/* NVIDIA's devices (195; nvidia-uvm and -caps have dynamic
		 * numbers, under their names in /dev). */
		if (ma == 195 || strncmp(path, "/dev/nvidia", 11) == 0) {
			*why = "the GPU, whose architecture is in the key of nvcc builds";
			return PSEUDO_HARMLESS;
		}
		*why = "it is a device";
		return PSEUDO_UNTRUSTED;
	}
	if (S_ISBLK(st->st_mode)) {
		*why = "it is a block device";
		return PSEUDO_UNTRUSTED;
	}
	if (S_ISFIFO(st->st_mode)) {
		*why = "it is a FIFO: what it gives is written by another process";
		return PSEUDO_UNTRUSTED;
	}
	if (S_ISSOCK(st->st_mode)) {
		*why = "it is a socket";
		return PSEUDO_UNTRUSTED;
	}
	if (util_pseudo_fs(fs_type)) {
		*why = "it is on a filesystem whose files the kernel makes when read";
		return PSEUDO_UNTRUSTED;
	}
	return PSEUDO_NO;
}

enum pseudo_kind pseudo_classify(const char *path, bool cpu_in_key, const char **why)
{
	enum pseudo_kind k = pseudo_by_name(path, cpu_in_key, why);
	if (k != PSEUDO_NO)
		return k;
	struct stat st;
	struct statfs fs;
	if (stat(path, &st) != 0)
		return PSEUDO_NO;
	long type = statfs(path, &fs) == 0 ? (long)fs.f_type : 0;
	return pseudo_by_stat(path, &st, type, why);
}
