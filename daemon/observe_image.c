/*
 * A script's `#!` interpreter, as the kernel finds it (observe_image.h).
 * The kernel starts that program, not the script: the start record that
 * answers an exec of a script names the interpreter, and the interpreter
 * (with its loader and libraries, recorded by its own process) is an
 * input of the build like the script.
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "observe_image.h"

static bool blank(char c)
{
	return c == ' ' || c == '\t';
}

bool image_shebang(const char *head, size_t n, char *interp, size_t cap)
{
	if (n > IMAGE_HEAD)
		n = IMAGE_HEAD;
	if (n < 2 || head[0] != '#' || head[1] != '!' || cap == 0)
		return false;
	/* The line ends at its newline, or with the head: a file shorter
	 * than the head ends the name (the kernel's buffer is zeroed past
	 * it), a full head without a blank or NUL after the name may have
	 * cut it, and the kernel refuses that. */
	const char *nl = memchr(head, '\n', n);
	size_t end = nl != NULL ? (size_t)(nl - head) : n;
	size_t i = 2;
	while (i < end && blank(head[i]))
		i++;
	size_t start = i;
	while (i < end && !blank(head[i]) && head[i] != '\0')
		i++;
	if (i == start || (nl == NULL && i == n && n == IMAGE_HEAD))
		return false;
	if (i - start >= cap)
		return false;
	memcpy(interp, head + start, i - start);
	interp[i - start] = '\0';
	return true;
}

bool image_interpreter(const char *path, bool shell, char *interp, size_t cap)
{
	char head[IMAGE_HEAD];
	int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return false;
	long n = syscall(SYS_read, fd, head, sizeof(head));
	syscall(SYS_close, fd);
	if (n < 0)
		return false;
	if (image_shebang(head, (size_t)n, interp, cap))
		return true;
	/* execvp's own rule for what the kernel refuses (ENOEXEC): the file
	 * runs as a shell script. An ELF file the kernel refuses (another
	 * machine's) fails instead. */
	if (!shell || (n >= 4 && memcmp(head, "\177ELF", 4) == 0) || cap < sizeof("/bin/sh"))
		return false;
	memcpy(interp, "/bin/sh", sizeof("/bin/sh"));
	return true;
}

void image_ident_head(char *head, size_t cap, char kind, long pid, const char *pre,
		      const struct stat *st)
{
	snprintf(head, cap, "%c %ld%s %llu %llu %lld %lld %lld %o", kind, pid, pre,
		 (unsigned long long)st->st_dev, (unsigned long long)st->st_ino,
		 (long long)st->st_size,
		 (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec,
		 (long long)st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec,
		 (unsigned)st->st_mode);
}
