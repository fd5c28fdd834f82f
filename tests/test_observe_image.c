/*
 * Unit tests of what the kernel runs for an exec (daemon/observe_image.c):
 * a script's `#!` interpreter, read as fs/binfmt_script.c reads it, and
 * execvp's /bin/sh for files the kernel refuses.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "observe_image.h"
#include "unit.h"

static void shebang_is(const char *head, const char *want)
{
	char out[64];
	ck_assert_msg(image_shebang(head, strlen(head), out, sizeof(out)), "%s: no interpreter", head);
	ck_assert_str_eq(out, want);
}

static void no_shebang(const char *head, size_t n)
{
	char out[64];
	ck_assert_msg(!image_shebang(head, n, out, sizeof(out)), "%s: an interpreter %s", head, out);
}

/* The name after "#!" and any blanks, up to a blank or the line's end. */
START_TEST(interpreter_names)
{
	shebang_is("#!/bin/sh\nexec cc\n", "/bin/sh");
	shebang_is("#! /bin/sh -e\n", "/bin/sh");
	shebang_is("#!\t/usr/bin/env  bash\n", "/usr/bin/env");
	shebang_is("#!relative/sh\n", "relative/sh");
	shebang_is("#!/opt/sh", "/opt/sh"); /* no newline: the file's end */
	shebang_is("#!/opt/sh \t\n", "/opt/sh");
}
END_TEST

/* No script, or a line the kernel refuses. */
START_TEST(not_scripts)
{
	no_shebang("\177ELF\2\1\1", 7);
	no_shebang("#/bin/sh\n", 9);
	no_shebang("#!\n", 3);
	no_shebang("#!   \n", 6);
	no_shebang("", 0);
	no_shebang("#", 1);
}
END_TEST

/* A name that runs to the end of the 256 bytes the kernel reads may be
 * cut: refused, as the kernel refuses it; one that ends inside is read. */
START_TEST(long_lines)
{
	char head[IMAGE_HEAD + 64], out[IMAGE_HEAD + 8];
	memset(head, 'a', sizeof(head));
	memcpy(head, "#!/", 3);
	ck_assert(!image_shebang(head, sizeof(head), out, sizeof(out)));
	head[100] = ' ';
	ck_assert(image_shebang(head, sizeof(head), out, sizeof(out)));
	ck_assert_uint_eq(strlen(out), 98);
	/* Too long for the caller's buffer: no name rather than half a name. */
	ck_assert(!image_shebang(head, sizeof(head), out, 50));
}
END_TEST

static char *temp_file(const char *text)
{
	char *path = strdup("/tmp/kiln-image-XXXXXX");
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

/* Read from the file; execvp's rule runs anything but ELF under /bin/sh. */
START_TEST(interpreter_of_a_file)
{
	char out[256];
	char *script = temp_file("#!/bin/dash\necho\n");
	char *plain = temp_file("echo no line\n");
	char *elf = temp_file("\177ELF\2\1\1\0");
	ck_assert(image_interpreter(script, false, out, sizeof(out)));
	ck_assert_str_eq(out, "/bin/dash");
	ck_assert(!image_interpreter(plain, false, out, sizeof(out)));
	ck_assert(image_interpreter(plain, true, out, sizeof(out)));
	ck_assert_str_eq(out, "/bin/sh");
	ck_assert(!image_interpreter(elf, true, out, sizeof(out)));
	ck_assert(!image_interpreter("/nonexistent/kiln", true, out, sizeof(out)));
	unlink(script);
	unlink(plain);
	unlink(elf);
	free(script);
	free(plain);
	free(elf);
}
END_TEST

/* The identity every writer of the trace spells one way (trace.c reads
 * the mode in octal, the rest in decimal). */
START_TEST(identity_head)
{
	char head[256];
	struct stat st = { .st_dev = 2049, .st_ino = 77, .st_size = 5, .st_mode = S_IFREG | 0755 };
	st.st_mtim.tv_sec = 1;
	st.st_mtim.tv_nsec = 2;
	st.st_ctim.tv_sec = 3;
	st.st_ctim.tv_nsec = 4;
	image_ident_head(head, sizeof(head), 'K', 42, "", &st);
	ck_assert_str_eq(head, "K 42 2049 77 5 1000000002 3000000004 100755");
	image_ident_head(head, sizeof(head), 'H', 42, " 41", &st);
	ck_assert_str_eq(head, "H 42 41 2049 77 5 1000000002 3000000004 100755");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("observe_image");
	TCase *tc = tcase_create("shebang");
	tcase_add_test(tc, interpreter_names);
	tcase_add_test(tc, not_scripts);
	tcase_add_test(tc, long_lines);
	tcase_add_test(tc, interpreter_of_a_file);
	tcase_add_test(tc, identity_head);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
