/*
 * Integration tests of header and link input validation: a program that
 * includes "h.h" (or links a static library) is a hit while its inputs stay
 * as they are, and a miss that returns the new value as soon as they change,
 * however they change: through a symlinked header, a flipped release
 * symlink, one directory under two names, a rewrite that keeps size and
 * mtime, a header above 1 MiB, a replaced parent directory, or a rebuilt
 * static library; and sources in folders (a generated tree).
 */
#include "observe_util.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A request for a generated tree, DaCe's shape: src/cpu/prog.c includes
 * "../../include/hash.h" and its own "kernels.h"; hash_value goes into
 * include/hash.h. */
static void tree_request(struct kiln_request *req, struct kiln_source src[3], char hash[64],
			 int hash_value)
{
	static const char prog[] = "#include \"../../include/hash.h\"\n"
				   "#include \"kernels.h\"\n"
				   "int kiln_test_value(void) { return HASH + KERNELS; }\n";
	snprintf(hash, 64, "#define HASH %d\n", hash_value);
	memset(req, 0, sizeof(*req));
	src[0] = (struct kiln_source){ .name = "src/cpu/prog.c", .text = prog };
	src[1] = (struct kiln_source){ .name = "src/cpu/kernels.h", .text = "#define KERNELS 2\n" };
	src[2] = (struct kiln_source){ .name = "include/hash.h", .text = hash };
	req->sources = src;
	req->nsources = 3;
}

static void tree_expect(const struct kiln_request *req, int value, int64_t builds)
{
	struct harness_result res = harness_in_child(req, NULL);

	ck_assert_msg(res.rc == KILN_OK, "the tree failed in %s: %s: %s", res.stage,
		      kiln_strerror(res.rc), res.msg);
	ck_assert_int_eq(res.value, value);
	ck_assert_int_eq(builds_started(), builds);
}

/* Sources in folders are built in the same layout, so relative includes
 * between them work; the tree is a hit when asked again, and a changed
 * header in another folder is a new build. */
START_TEST(generated_tree_in_folders)
{
	struct kiln_request req;
	struct kiln_source src[3];
	char hash[64];

	harness_start(NULL);
	tree_request(&req, src, hash, 40);
	tree_expect(&req, 42, 1);
	tree_expect(&req, 42, 1);
	tree_request(&req, src, hash, 50);
	tree_expect(&req, 52, 2);
	harness_stop();
}
END_TEST

/* A symlinked header (inc/h.h -> ../real/h.h): editing its target counts. */
START_TEST(symlinked_header)
{
	char inc[HARNESS_PATH], dir[HARNESS_PATH], real[HARNESS_PATH], link[HARNESS_PATH];
	char *text;
	struct oreq r;

	ck_assert_int_eq(mkdir(harness_path(inc, "inc"), 0700), 0);
	ck_assert_int_eq(mkdir(harness_path(dir, "real"), 0700), 0);
	harness_path(real, "real/h.h");
	write_header(real, 1);
	ck_assert_int_eq(symlink("../real/h.h", harness_path(link, "inc/h.h")), 0);
	oreq_program(&r, inc);
	start_and_build(&r);

	/* Edited in place, the way an editor saves through the link. */
	text = header_text(22, 0);
	overwrite_in_place(real, text, O_TRUNC);
	free(text);
	expect_twice(&r, 22, 2, "after editing the target in place");

	/* Replaced by a new file next to it (write and rename). */
	write_header(real, 333);
	expect_twice(&r, 333, 3, "after replacing the target");

	oreq_free(&r);
	harness_stop();
}
END_TEST

/* Points <dir>/current to target atomically: a new symlink renamed over it. */
static void flip_current(const char *target)
{
	char tmp[HARNESS_PATH], cur[HARNESS_PATH];

	harness_path(tmp, "current.new");
	unlink(tmp);
	ck_assert_int_eq(symlink(target, tmp), 0);
	ck_assert_msg(rename(tmp, harness_path(cur, "current")) == 0, "rename %s: %s", tmp,
		      strerror(errno));
}

/* -I<dir>/current/include, with current a symlink to a release directory
 * that is flipped to another release as deployments do. */
START_TEST(flipped_release_symlink)
{
	char path[HARNESS_PATH], v2h[HARNESS_PATH], inc[HARNESS_PATH];
	struct oreq r;

	ck_assert_int_eq(mkdir(harness_path(path, "v1"), 0700), 0);
	ck_assert_int_eq(mkdir(harness_path(path, "v1/include"), 0700), 0);
	ck_assert_int_eq(mkdir(harness_path(path, "v2"), 0700), 0);
	ck_assert_int_eq(mkdir(harness_path(path, "v2/include"), 0700), 0);
	write_header(harness_path(path, "v1/include/h.h"), 1);
	write_header(harness_path(v2h, "v2/include/h.h"), 22);
	flip_current("v1");
	oreq_program(&r, harness_path(inc, "current/include"));
	harness_start(NULL);

	expect(&r, 1, 1, "first request on v1");
	expect(&r, 1, 1, "second request on v1");

	flip_current("v2");
	expect_twice(&r, 22, 2, "after flipping current to v2");

	/* The new release's header is watched as well. */
	write_header(v2h, 333);
	expect_twice(&r, 333, 3, "after editing v2's header");

	/* Back to v1: whether it rebuilds or finds the first artifact again,
	 * the program must be v1's. */
	flip_current("v1");
	{
		struct harness_result res = harness_in_child(&r.req, NULL);

		ck_assert_msg(res.rc == KILN_OK, "after flipping back to v1: %s: %s",
			      kiln_strerror(res.rc), res.msg);
		ck_assert_msg(res.value == 1, "after flipping back to v1 the program returned %d",
			      res.value);
	}

	oreq_free(&r);
	harness_stop();
}
END_TEST

/* One directory under two names (inc, and alias -> inc), used by two
 * programs: an edit must reach both. */
START_TEST(one_directory_two_names)
{
	char inc[HARNESS_PATH], alias[HARNESS_PATH], hdr[HARNESS_PATH];
	struct oreq a, b;
	char *text_b = NULL;

	ck_assert_int_eq(mkdir(harness_path(inc, "inc"), 0700), 0);
	ck_assert_int_eq(symlink("inc", harness_path(alias, "alias")), 0);
	write_header(harness_path(hdr, "inc/h.h"), 1);
	ck_assert(asprintf(&text_b, "/* Through the alias. */\n%s", program_text) > 0);
	oreq_program(&a, inc);
	oreq_init(&b, text_b);
	oreq_arg(&b, "-I%s", alias);
	harness_start(NULL);

	expect(&a, 1, 1, "first request through inc");
	expect(&b, 1, 2, "first request through alias");
	expect(&a, 1, 2, "second request through inc");
	expect(&b, 1, 2, "second request through alias");

	write_header(hdr, 22);
	expect(&a, 22, 3, "through inc after the edit");
	expect(&b, 22, 4, "through alias after the edit");
	expect(&a, 22, 4, "again through inc after the edit");
	expect(&b, 22, 4, "again through alias after the edit");

	/* Once more, the other one first. */
	write_header(hdr, 333);
	expect(&b, 333, 5, "through alias after the second edit");
	expect(&a, 333, 6, "through inc after the second edit");

	oreq_free(&a);
	oreq_free(&b);
	free(text_b);
	harness_stop();
}
END_TEST

/* A rewrite with another content of the same size that keeps the mtime, as
 * cp -p (in place) and rsync -t (a new file renamed over) do. */
START_TEST(same_size_same_mtime_rewrite)
{
	char inc[HARNESS_PATH], hdr[HARNESS_PATH], tmp[HARNESS_PATH];
	struct stat st;
	char *text;
	struct oreq r;

	ck_assert_int_eq(mkdir(harness_path(inc, "inc"), 0700), 0);
	write_header(harness_path(hdr, "inc/h.h"), 11);
	oreq_program(&r, inc);
	harness_start(NULL);

	expect_twice(&r, 11, 1, "first request");

	/* cp -p: truncate and write the same inode, then set the old times. */
	ck_assert_int_eq(stat(hdr, &st), 0);
	text = header_text(22, 0);
	overwrite_in_place(hdr, text, O_TRUNC);
	free(text);
	restore_times(hdr, &st);
	check_same_stat(hdr, &st);
	expect_twice(&r, 22, 2, "after an in-place rewrite keeping size and mtime");

	/* rsync -t: a new file with the old times, renamed over the header. */
	ck_assert_int_eq(stat(hdr, &st), 0);
	text = header_text(33, 0);
	harness_path(tmp, "inc/.h.h.rsync");
	harness_write_file(tmp, text);
	free(text);
	restore_times(tmp, &st);
	ck_assert_int_eq(rename(tmp, hdr), 0);
	check_same_stat(hdr, &st);
	expect_twice(&r, 33, 3, "after a rename-over keeping size and mtime");

	oreq_free(&r);
	harness_stop();
}
END_TEST

/* A raw get of program_text with -I for each of dirs, as libkiln sends it. */
static char *raw_get(uint64_t id, char dirs[][HARNESS_PATH], int ndirs)
{
	cJSON *r = cJSON_CreateObject(), *src = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "op", "get");
	cJSON_AddNumberToObject(r, "id", (double)id);
	cJSON_AddStringToObject(r, "toolchain", "cc");
	cJSON *args = cJSON_AddArrayToObject(r, "args");
	for (int i = 0; i < ndirs; i++) {
		char *arg = NULL;
		ck_assert_int_gt(asprintf(&arg, "-I%s", dirs[i]), 0);
		cJSON_AddItemToArray(args, cJSON_CreateString(arg));
		free(arg);
	}
	cJSON_AddStringToObject(src, "name", "prog.c");
	cJSON_AddStringToObject(src, "text", program_text);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(r, "sources"), src);
	char *text = cJSON_PrintUnformatted(r);
	cJSON_Delete(r);
	ck_assert_ptr_nonnull(text);
	return text;
}

static int raw_hello(void)
{
	int fd = harness_raw_connect(harness.socket);
	harness_raw_send(fd, "{\"op\":\"hello\",\"id\":1,\"proto\":3}");
	cJSON_Delete(harness_raw_recv(fd));
	return fd;
}

static void raw_recv_expect(int fd, bool cached, int round)
{
	cJSON *reply = harness_raw_recv(fd);
	ck_assert_ptr_nonnull(reply);
	char *text = cJSON_PrintUnformatted(reply);
	ck_assert_msg(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "ok")), "round %d: %s",
		      round, text);
	ck_assert_msg(cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(reply, "cached")) &&
		      cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "cached")) == cached,
		      "round %d: expected %s: %s", round, cached ? "a hit" : "a build", text);
	free(text);
	cJSON_Delete(reply);
}

static void raw_get_expect(int fd, const char *get, bool cached, int round)
{
	harness_raw_send(fd, get);
	raw_recv_expect(fd, cached, round);
}

/* Stops kilnd once its loop sleeps in epoll_wait (nothing left of its last
 * turn, such as a change of what it polls for, which would reorder what is
 * ready), and waits until it has stopped. Where wchan cannot be read, a
 * pause stands in for the first wait. */
static void stop_while_idle(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/wchan", (int)pid);
	for (int i = 0; i < 400; i++) {
		char *w = harness_read_file(path);
		bool idle = w != NULL && strstr(w, "epoll_wait") != NULL;
		bool known = w != NULL;   /* "0" while it runs */
		free(w);
		if (idle)
			break;
		harness_sleep_ms(known ? 5 : 200);
		if (!known)
			break;
	}
	ck_assert_int_eq(kill(pid, SIGSTOP), 0);
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	for (int i = 0; i < 400; i++) {
		char *st = harness_read_file(path);
		char *p = st != NULL ? strrchr(st, ')') : NULL;
		bool stopped = p != NULL && p[1] == ' ' && p[2] == 'T';
		free(st);
		if (stopped)
			return;
		harness_sleep_ms(5);
	}
	ck_abort_msg("kilnd (pid %d) did not stop", (int)pid);
}

/*
 * A header that appears before a request is sent, while kilnd has not yet
 * read the change's inotify event, must count for that request. The
 * program includes "h.h" along -I inc1 .. inc3 and base, where it is at
 * first; names in those directories are watched (no stat per request).
 * kilnd is stopped; a status request makes the connection ready first,
 * then h.h appears in inc<n> (inotify ready second) and the get follows
 * on the same connection. On resuming, kilnd serves the connection before
 * it drains inotify between requests: only the check before each batch of
 * requests can see the new header.
 */
START_TEST(change_before_the_request_in_one_turn)
{
	char dirs[4][HARNESS_PATH], hdr[HARNESS_PATH + 8];
	struct oreq r;

	oreq_init(&r, program_text);
	for (int i = 0; i < 4; i++) {
		if (i < 3)
			harness_path(dirs[i], "inc%d", i + 1);
		else
			harness_path(dirs[i], "base");
		ck_assert_int_eq(mkdir(dirs[i], 0700), 0);
		oreq_arg(&r, "-I%s", dirs[i]);
	}
	write_header(harness_path(hdr, "base/h.h"), 1);
	harness_start(NULL);
	char *get = raw_get(3, dirs, 4);
	/* Built, then a hit while nothing changes. */
	int fd = raw_hello();
	raw_get_expect(fd, get, false, 1);
	raw_get_expect(fd, get, true, 1);
	close(fd);
	for (int round = 2; round <= 4; round++) {
		fd = raw_hello();
		stop_while_idle(harness.pid);
		harness_raw_send(fd, "{\"op\":\"status\",\"id\":2}");
		/* inc3, then inc2, then inc1: each earlier on the path. */
		snprintf(hdr, sizeof(hdr), "%s/h.h", dirs[4 - round]);
		write_header(hdr, round);
		harness_raw_send(fd, get);
		ck_assert_int_eq(kill(harness.pid, SIGCONT), 0);
		cJSON_Delete(harness_raw_recv(fd));
		/* A hit here would be the program of the header before. */
		raw_recv_expect(fd, false, round);
		raw_get_expect(fd, get, true, round);
		close(fd);
		expect_value(&r, round, "after the new header");
	}
	free(get);
	oreq_free(&r);
	harness_stop();
}
END_TEST

/* A header above 1 MiB: unchanged, it is a hit; changed, a rebuild. */
START_TEST(large_header)
{
	char inc[HARNESS_PATH], hdr[HARNESS_PATH];
	char *text;
	struct oreq r;

	ck_assert_int_eq(mkdir(harness_path(inc, "inc"), 0700), 0);
	harness_path(hdr, "inc/h.h");
	text = header_text(1, (size_t)3 << 19);
	harness_write_file(hdr, text);
	free(text);
	oreq_program(&r, inc);
	harness_start(NULL);

	expect(&r, 1, 1, "first request");
	expect(&r, 1, 1, "second request of an unchanged large header");
	expect(&r, 1, 1, "third request of an unchanged large header");

	/* A different size. */
	text = header_text(22, ((size_t)3 << 19) + 100);
	harness_write_file(hdr, text);
	free(text);
	expect_twice(&r, 22, 2, "after changing the large header");

	oreq_free(&r);
	harness_stop();
}
END_TEST

/* The header's directory tree is moved away and a fresh one created under
 * the same name: the new file counts, and so do later edits of it. */
START_TEST(replaced_parent_directory)
{
	char path[HARNESS_PATH], old[HARNESS_PATH], inc[HARNESS_PATH], hdr[HARNESS_PATH];
	struct oreq r;

	ck_assert_int_eq(mkdir(harness_path(path, "a"), 0700), 0);
	ck_assert_int_eq(mkdir(harness_path(inc, "a/inc"), 0700), 0);
	write_header(harness_path(hdr, "a/inc/h.h"), 1);
	oreq_program(&r, inc);
	start_and_build(&r);

	ck_assert_int_eq(rename(path, harness_path(old, "old")), 0);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	ck_assert_int_eq(mkdir(inc, 0700), 0);
	write_header(hdr, 22);
	expect_twice(&r, 22, 2, "after replacing the directory a");

	write_header(hdr, 333);
	expect_twice(&r, 333, 3, "after editing the header in the new directory");

	oreq_free(&r);
	harness_stop();
}
END_TEST

/* Compiles <dir>/x.c into <dir>/libx.a (replacing it). */
static void build_static_lib(const char *x_text)
{
	char xc[HARNESS_PATH], xo[HARNESS_PATH], lib[HARNESS_PATH], err[HARNESS_PATH];
	const char *cc[] = { "/usr/bin/cc", "-c", "-fPIC", "-O2", "-o", xo, xc, NULL };
	const char *ar[] = { "/usr/bin/ar", "rcs", lib, xo, NULL };
	int status;

	harness_path(xc, "x.c");
	harness_path(xo, "x.o");
	harness_path(lib, "libx.a");
	harness_path(err, "ar-cc.err");
	harness_write_file(xc, x_text);
	status = harness_run(cc, err, err, 60);
	ck_assert_msg(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "cc -c x.c failed (status 0x%x)", status);
	unlink(lib);
	status = harness_run(ar, err, err, 60);
	ck_assert_msg(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "ar rcs libx.a failed (status 0x%x)", status);
}

/* A static library linked with -L<dir> -lx is an input like a header. */
START_TEST(static_library_input)
{
	static const char prog[] =
		"int x(void);\n"
		"\n"
		"int kiln_test_value(void)\n"
		"{\n"
		"\treturn x();\n"
		"}\n";
	char larg[HARNESS_PATH + 4], lib[HARNESS_PATH];
	const char *args[2] = { larg, "-lx" };
	struct kiln_request req;
	struct kiln_source src;
	struct harness_result res;
	struct stat before, after;
	int64_t n;

	build_static_lib("int x(void)\n{\n\treturn 1;\n}\n");
	ck_assert_int_eq(stat(harness_path(lib, "libx.a"), &before), 0);
	snprintf(larg, sizeof(larg), "-L%s", harness.dir);
	harness_request(&req, &src, "prog.c", prog);
	req.args = args;
	req.nargs = 2;
	harness_start(NULL);

	for (int i = 0; i < 2; i++) {
		res = harness_in_child(&req, NULL);
		ck_assert_msg(res.rc == KILN_OK, "request %d: %s: %s", i + 1, kiln_strerror(res.rc),
			      res.msg);
		ck_assert_int_eq(res.value, 1);
		ck_assert_int_eq(builds_started(), 1);
	}

	/* Another function too, so that the archive's size changes for sure. */
	build_static_lib("int x(void)\n{\n\treturn 22;\n}\n\nint x_more(void)\n{\n\treturn 7;\n}\n");
	ck_assert_int_eq(stat(lib, &after), 0);
	ck_assert_int_ne(after.st_size, before.st_size);

	res = harness_in_child(&req, NULL);
	ck_assert_msg(res.rc == KILN_OK, "after rebuilding libx.a: %s: %s", kiln_strerror(res.rc),
		      res.msg);
	n = builds_started();
	ck_assert_msg(res.value == 22 && n == 2, "after rebuilding libx.a the program returned %d "
		      "with builds_started %lld: the old artifact was served", res.value, (long long)n);
	res = harness_in_child(&req, NULL);
	ck_assert_msg(res.rc == KILN_OK, "again after rebuilding libx.a: %s: %s",
		      kiln_strerror(res.rc), res.msg);
	ck_assert_int_eq(res.value, 22);
	ck_assert_int_eq(builds_started(), 2);
	harness_stop();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("headers");

	suite_add_tcase(s, harness_tcase("symlinked_header", symlinked_header, 90));
	suite_add_tcase(s, harness_tcase("flipped_release", flipped_release_symlink, 90));
	suite_add_tcase(s, harness_tcase("two_names", one_directory_two_names, 90));
	suite_add_tcase(s, harness_tcase("same_size_mtime", same_size_same_mtime_rewrite, 90));
	suite_add_tcase(s, harness_tcase("large_header", large_header, 90));
	suite_add_tcase(s, harness_tcase("replaced_parent", replaced_parent_directory, 90));
	suite_add_tcase(s, harness_tcase("static_library", static_library_input, 90));
	suite_add_tcase(s, harness_tcase("tree", generated_tree_in_folders, 90));
	suite_add_tcase(s, harness_tcase("one_turn", change_before_the_request_in_one_turn, 90));
	return harness_main(s);
}
