/*
 * Unit tests of libkiln (client/) against a fake kilnd (fake_kilnd.c): a
 * thread of the test that answers hello, get and lookup as each test scripts
 * it, passing descriptors of shared objects compiled with cc.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "kiln/kiln.h"
#include "frame.h"
#include "msg.h"
#include "util.h"
#include "wire.h"
#include "unit.h"

#include "fake_kilnd.h"

static void *errmsg_thread(void *arg)
{
	(void)arg;
	return (void *)kiln_errmsg(NULL);
}

START_TEST(test_strerror_errmsg)
{
	int codes[] = { KILN_OK, KILN_EINVAL, KILN_ENOMEM, KILN_ECONNECT, KILN_EPROTO,
			KILN_EIO, KILN_ENOTFOUND, KILN_EBUILD, KILN_ETIMEDOUT, KILN_ELOAD,
			KILN_EREFUSED, KILN_EDENIED, KILN_EBUSY, KILN_EDAEMON };
	const char *unknown = kiln_strerror(42);
	pthread_t t;
	void *text = NULL;
	size_t i, j;

	for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		ck_assert_ptr_nonnull(kiln_strerror(codes[i]));
		ck_assert_str_ne(kiln_strerror(codes[i]), unknown);
		for (j = 0; j < i; j++)
			ck_assert_str_ne(kiln_strerror(codes[i]), kiln_strerror(codes[j]));
	}
	/* A thread that never failed has an empty, never NULL, message. */
	ck_assert_int_eq(pthread_create(&t, NULL, errmsg_thread, NULL), 0);
	ck_assert_int_eq(pthread_join(t, &text), 0);
	ck_assert_str_eq(text, "");
	/* Failures are per thread. */
	ck_assert_int_eq(kiln_get(NULL, NULL, NULL), KILN_EINVAL);
	ck_assert_str_ne(kiln_errmsg(NULL), "");
	ck_assert_int_eq(pthread_create(&t, NULL, errmsg_thread, NULL), 0);
	ck_assert_int_eq(pthread_join(t, &text), 0);
	ck_assert_str_eq(text, "");
}
END_TEST

START_TEST(test_open_no_daemon)
{
	struct kiln *k = (struct kiln *)1;

	ck_assert_int_eq(kiln_open(F->sock, &k), KILN_ECONNECT);
	ck_assert_ptr_null(k);
	ck_assert_ptr_nonnull(strstr(kiln_errmsg(NULL), F->sock));
	ck_assert_ptr_nonnull(strstr(kiln_errmsg(NULL), "KILN_AUTOSPAWN"));
}
END_TEST

/* hello goes out with kiln_open but is not waited for: its refusal is the
 * answer to the first call, and to every later one on that connection. */
START_TEST(test_hello_mismatch)
{
	struct kiln_program *p = NULL;
	struct kiln *k = NULL;

	F->hello_proto = 7;
	fake_start();
	ck_assert_int_eq(kiln_open(F->sock, &k), KILN_OK);
	ck_assert_int_eq(kiln_lookup(k, "gt4py:any", &p), KILN_EPROTO);
	ck_assert_ptr_null(p);
	ck_assert_ptr_nonnull(strstr(kiln_errmsg(k), "version 7"));
	char mine[32];
	snprintf(mine, sizeof(mine), "version %d", KILN_PROTO_VERSION);
	ck_assert_ptr_nonnull(strstr(kiln_errmsg(k), mine));
	ck_assert_ptr_nonnull(strstr(kiln_errmsg(k), F->sock));
	kiln_close(k);
}
END_TEST

START_TEST(test_get_loads_then_local_hits)
{
	struct kiln_source src;
	struct kiln_request req = one_source(&src, "gt4py:abc");
	struct kiln_program *p = NULL, *p2 = NULL, *p3 = NULL;
	struct kiln_stats st, st2;
	struct stat fst, pst;
	struct kiln *k;
	int frames;

	build_so("a.so", 11);
	add_entry("gt4py:abc", "a.so", 1);
	fake_start();
	k = open_fake();

	ck_assert_msg(kiln_get(k, &req, &p) == KILN_OK, "%s", kiln_errmsg(k));
	ck_assert_int_eq(call_value(p), 11);
	ck_assert_str_eq(kiln_program_key(p), F->entries[0].key);
	ck_assert_str_eq(kiln_program_path(p), F->entries[0].path);
	ck_assert_int_eq(fstat(kiln_program_fd(p), &fst), 0);
	ck_assert_int_eq(stat(F->entries[0].path, &pst), 0);
	ck_assert_uint_eq(fst.st_ino, pst.st_ino);
	ck_assert_ptr_null(kiln_sym(p, "no_such_symbol"));
	/* The defaults travel as such. */
	ck_assert_str_eq(F->last_toolchain, "cc");
	ck_assert_str_eq(F->last_output, "shared");
	kiln_get_stats(k, &st);
	ck_assert_uint_eq(st.requests, 2);   /* hello and get */
	ck_assert_uint_eq(st.loads, 1);
	ck_assert_uint_eq(st.local_hits, 0);
	frames = atomic_load(&F->frames);

	/* The same alias again, by get and by lookup: no IPC at all. */
	ck_assert_int_eq(kiln_get(k, &req, &p2), KILN_OK);
	ck_assert_ptr_eq(p2, p);
	ck_assert_int_eq(kiln_lookup(k, "gt4py:abc", &p3), KILN_OK);
	ck_assert_ptr_eq(p3, p);
	kiln_get_stats(k, &st2);
	ck_assert_uint_eq(st2.requests, st.requests);
	ck_assert_uint_eq(st2.loads, 1);
	ck_assert_uint_eq(st2.local_hits, 2);
	ck_assert_int_eq(atomic_load(&F->frames), frames);
	ck_assert_int_eq(atomic_load(&F->bad), 0);
	kiln_close(k);
}
END_TEST

/* A get goes by digest first; when the daemon asks for the text, the
 * library sends it (with the same content) and the caller sees one get. */
START_TEST(test_need_sources_resends_text)
{
	struct kiln_source src[3];
	struct kiln_request reqs[3];
	struct kiln_program *out[3];
	int status[3];
	char alias[3][16];
	struct kiln *k;

	build_so("a.so", 21);
	for (int i = 0; i < 3; i++) {
		snprintf(alias[i], sizeof(alias[i]), "ask:%d", i);
		reqs[i] = one_source(&src[i], alias[i]);
		add_entry(alias[i], "a.so", 21);
	}
	F->ask_text = 1;
	fake_start();
	k = open_fake();
	ck_assert_msg(kiln_get(k, &reqs[0], &out[0]) == KILN_OK, "%s", kiln_errmsg(k));
	ck_assert_int_eq(call_value(out[0]), 21);
	ck_assert_int_eq(atomic_load(&F->asked), 1);
	ck_assert_int_eq(atomic_load(&F->texts), 1);
	/* A batch: every request asked for goes again in a second batch. */
	ck_assert_msg(kiln_get_many(k, &reqs[1], 2, &out[1], status) == KILN_OK, "%s",
		      kiln_errmsg(k));
	ck_assert_int_eq(status[0], KILN_OK);
	ck_assert_int_eq(status[1], KILN_OK);
	ck_assert_int_eq(call_value(out[2]), 21);
	ck_assert_int_eq(atomic_load(&F->asked), 3);
	ck_assert_int_eq(atomic_load(&F->texts), 3);
	ck_assert_int_eq(atomic_load(&F->bad), 0);
	kiln_close(k);
}
END_TEST

/*
 * A source with a NUL byte in a batch fails alone, before anything is sent
 * (the check before kiln_get_many hashes the batch), wherever it is in the
 * batch and in the text (first block, a later one, the last byte).
 */
START_TEST(test_many_nul_source_fails_alone)
{
	enum { N = 5 };
	static const size_t at[N] = { 10, 0, 0, 150, 199 };
	struct kiln_source src[N];
	struct kiln_request reqs[N];
	struct kiln_program *out[N];
	char alias[N][16], text[N][201];
	int status[N];
	struct kiln_stats st;
	struct kiln *k;

	build_so("a.so", 21);
	for (int i = 0; i < N; i++) {
		snprintf(alias[i], sizeof(alias[i]), "nul:%d", i);
		reqs[i] = one_source(&src[i], alias[i]);
		add_entry(alias[i], "a.so", 21);
		memset(text[i], 'a' + i, 200);
		text[i][200] = '\0';
		if (at[i] > 0)
			text[i][at[i]] = '\0';
		src[i].text = text[i];
		src[i].len = i == 1 ? 70 : 200;
	}
	fake_start();
	k = open_fake();
	ck_assert_int_eq(kiln_get_many(k, reqs, N, out, status), KILN_EINVAL);
	ck_assert_msg(strstr(kiln_errmsg(k), "request 0") && strstr(kiln_errmsg(k), "offset 10"),
		      "%s", kiln_errmsg(k));
	for (int i = 0; i < N; i++) {
		ck_assert_msg(status[i] == (at[i] > 0 ? KILN_EINVAL : KILN_OK), "request %d: %s", i,
			      kiln_strerror(status[i]));
		if (at[i] == 0)
			ck_assert_int_eq(call_value(out[i]), 21);
		else
			ck_assert_ptr_null(out[i]);
	}
	/* hello and the two good gets: the bad ones never left. */
	kiln_get_stats(k, &st);
	ck_assert_uint_eq(st.requests, 3);
	ck_assert_int_eq(atomic_load(&F->bad), 0);
	kiln_close(k);
}
END_TEST

/* A batch's requests sharing an argument list are checked once; a list
 * that differs from the one before it, by a string, a count or a NULL, is
 * checked in full and fails alone. */
START_TEST(test_many_args_checked_per_list)
{
	enum { N = 7 };
	static const char *const good[] = { "-O2", "-DX=1" };
	static const char *const out_arg[] = { "-O2", "-o" };
	static const char *const null_arg[] = { "-O2", NULL };
	static const char *const more[] = { "-O2", "-DX=1", "-o", "x" };
	char dx[] = "-DX=1";
	const char *copy[] = { "-O2", dx };
	const char *const *lists[N] = { good, good, out_arg, copy, null_arg, more, good };
	static const size_t nargs[N] = { 2, 2, 2, 2, 2, 4, 2 };
	static const int want[N] = { KILN_OK, KILN_OK, KILN_EINVAL, KILN_OK, KILN_EINVAL,
				     KILN_EINVAL, KILN_OK };
	struct kiln_source src[N];
	struct kiln_request reqs[N];
	struct kiln_program *out[N];
	char alias[N][16];
	int status[N];
	struct kiln *k;

	build_so("a.so", 23);
	for (int i = 0; i < N; i++) {
		snprintf(alias[i], sizeof(alias[i]), "args:%d", i);
		reqs[i] = one_source(&src[i], alias[i]);
		reqs[i].args = lists[i];
		reqs[i].nargs = nargs[i];
		add_entry(alias[i], "a.so", 23);
	}
	fake_start();
	k = open_fake();
	ck_assert_int_eq(kiln_get_many(k, reqs, N, out, status), KILN_EINVAL);
	for (int i = 0; i < N; i++)
		ck_assert_msg(status[i] == want[i], "request %d: %s", i, kiln_strerror(status[i]));
	ck_assert_int_eq(atomic_load(&F->bad), 0);
	kiln_close(k);
}
END_TEST

START_TEST(test_same_key_reused)
{
	struct kiln_program *p = NULL, *q = NULL;
	struct kiln_stats st;
	struct kiln *k;

	build_so("a.so", 5);
	add_entry("alias-one", "a.so", 9);
	add_entry("alias-two", "a.so", 9);
	fake_start();
	k = open_fake();
	ck_assert_int_eq(kiln_lookup(k, "alias-one", &p), KILN_OK);
	ck_assert_int_eq(kiln_lookup(k, "alias-two", &q), KILN_OK);
	/* A second alias of a loaded key asks the daemon but loads nothing. */
	ck_assert_ptr_eq(p, q);
	kiln_get_stats(k, &st);
	ck_assert_uint_eq(st.requests, 3);
	ck_assert_uint_eq(st.loads, 1);
	ck_assert_int_eq(kiln_lookup(k, "alias-two", &q), KILN_OK);
	kiln_get_stats(k, &st);
	ck_assert_uint_eq(st.local_hits, 1);
	/* The second descriptor was closed at once, the first by kiln_close. */
	ck_assert_int_eq(so_fds(1), 1);
	kiln_close(k);
	ck_assert_int_eq(so_fds(0), 0);
}
END_TEST

START_TEST(test_get_without_alias)
{
	struct kiln_source src;
	struct kiln_request req = one_source(&src, NULL);
	struct kiln_program *p = NULL, *q = NULL;
	struct kiln_stats st;
	struct kiln *k;

	build_so("n.so", 3);
	add_entry("prog.c", "n.so", 3);
	fake_start();
	k = open_fake();
	req.toolchain = "c++";
	ck_assert_int_eq(kiln_get(k, &req, &p), KILN_OK);
	ck_assert_int_eq(call_value(p), 3);
	ck_assert_str_eq(F->last_toolchain, "c++");
	/* Without an alias every get asks the daemon, which names the same
	 * key, so the loaded program is reused. */
	ck_assert_int_eq(kiln_get(k, &req, &q), KILN_OK);
	ck_assert_ptr_eq(p, q);
	kiln_get_stats(k, &st);
	ck_assert_uint_eq(st.requests, 3);
	ck_assert_uint_eq(st.loads, 1);
	ck_assert_uint_eq(st.local_hits, 0);
	kiln_close(k);
}
END_TEST

START_TEST(test_lookup_not_found)
{
	struct kiln_program *p = (struct kiln_program *)1;
	struct kiln *k;

	fake_start();
	k = open_fake();
	ck_assert_int_eq(kiln_lookup(k, "gt4py:missing", &p), KILN_ENOTFOUND);
	ck_assert_ptr_null(p);
	ck_assert_ptr_nonnull(strstr(kiln_errmsg(k), "no entry for gt4py:missing"));
	kiln_close(k);
}
END_TEST

START_TEST(test_build_failed)
{
	struct kiln_source src;
	struct kiln_request req = one_source(&src, "broken");
	struct kiln_program *p = NULL;
	struct fake_entry *e;
	struct kiln *k;

	e = add_entry("broken", NULL, 2);
	e->error_code = "build_failed";
	e->error_log = "prog.c:1:5: error: expected ';' before '}' token";
	fake_start();
	k = open_fake();
	ck_assert_int_eq(kiln_get(k, &req, &p), KILN_EBUILD);
	ck_assert_ptr_null(p);
	ck_assert_str_eq(kiln_errmsg(k),
			 "the fake says no\nprog.c:1:5: error: expected ';' before '}' token");
	/* A failure is not cached locally: the next call asks again. */
	ck_assert_int_eq(kiln_get(k, &req, &p), KILN_EBUILD);
	kiln_close(k);
}
END_TEST

START_TEST(test_error_codes)
{
	static const struct {
		const char *code;
		int status;
	} map[] = {
		{ "build_timeout", KILN_ETIMEDOUT }, { "bad_request", KILN_EREFUSED },
		{ "unknown_op", KILN_EREFUSED },     { "bad_toolchain", KILN_EREFUSED },
		{ "bad_name", KILN_EREFUSED },       { "bad_arg", KILN_EREFUSED },
		{ "too_large", KILN_EREFUSED },      { "denied", KILN_EDENIED },
		{ "busy", KILN_EBUSY },              { "shutting_down", KILN_EBUSY },
		{ "io", KILN_EDAEMON },              { "internal", KILN_EDAEMON },
		{ "from_the_future", KILN_EDAEMON }, { "not_found", KILN_ENOTFOUND },
	};
	struct kiln_program *p;
	struct fake_entry *e;
	struct kiln *k;
	size_t i;

	for (i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		e = add_entry(map[i].code, NULL, (unsigned)i);
		e->error_code = map[i].code;
	}
	fake_start();
	k = open_fake();
	for (i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		ck_assert_msg(kiln_lookup(k, map[i].code, &p) == map[i].status, "code %s",
			      map[i].code);
		ck_assert_ptr_nonnull(strstr(kiln_errmsg(k), map[i].code));
	}
	kiln_close(k);
}
END_TEST

START_TEST(test_path_replaced_loads_fd)
{
	struct kiln_program *p = NULL, *q = NULL;
	struct fake_entry *e;
	struct kiln *k;

	build_so("real.so", 1);
	build_so("impostor.so", 2);
	build_so("gone.so", 3);
	/* The path names another file than the descriptor holds. */
	e = add_entry("replaced", "impostor.so", 1);
	snprintf(e->fd_path, sizeof(e->fd_path), "%s/real.so", F->dir);
	/* The path no longer exists at all. */
	e = add_entry("evicted", "gone.so", 2);
	snprintf(e->path, sizeof(e->path), "%s/evicted.so", F->dir);
	fake_start();
	k = open_fake();
	ck_assert_msg(kiln_lookup(k, "replaced", &p) == KILN_OK, "%s", kiln_errmsg(k));
	ck_assert_int_eq(call_value(p), 1);
	ck_assert_str_eq(kiln_program_path(p), F->entries[0].path);
	ck_assert_msg(kiln_lookup(k, "evicted", &q) == KILN_OK, "%s", kiln_errmsg(k));
	ck_assert_int_eq(call_value(q), 3);
	/* Loaded by descriptor, so their descriptors stay open for good: the
	 * loader knows them by the /proc/self/fd name. */
	kiln_close(k);
	ck_assert_int_eq(so_fds(2), 2);
}
END_TEST

/*
 * A hit's reply says which file its descriptor is open on (kilnd's fstat):
 * libkiln compares that with the path instead of asking fstat itself. The
 * path still wins only when it names that file; a path replaced since the
 * reply loads the descriptor, as without the claim.
 */
START_TEST(test_reply_file_id)
{
	struct kiln_program *p = NULL, *q = NULL;
	struct fake_entry *e;
	struct kiln *k;

	build_so("named.so", 4);
	build_so("held.so", 5);
	build_so("held2.so", 6);
	build_so("other.so", 7);
	/* The claim is what libkiln compares: the reply says the path's file
	 * (the descriptor holds another), so the path loads; had libkiln
	 * asked fstat, the descriptor would have. */
	e = add_entry("claimed", "named.so", 1);
	snprintf(e->fd_path, sizeof(e->fd_path), "%s/held.so", F->dir);
	e->say_file = FAKE_FILE_PATH;
	/* Said truly (the descriptor's file), with the path replaced: the
	 * descriptor loads. */
	e = add_entry("replaced", "other.so", 2);
	snprintf(e->fd_path, sizeof(e->fd_path), "%s/held2.so", F->dir);
	e->say_file = FAKE_FILE_FD;
	fake_start();
	k = open_fake();
	ck_assert_msg(kiln_lookup(k, "claimed", &p) == KILN_OK, "%s", kiln_errmsg(k));
	ck_assert_int_eq(call_value(p), 4);
	ck_assert_msg(kiln_lookup(k, "replaced", &q) == KILN_OK, "%s", kiln_errmsg(k));
	ck_assert_int_eq(call_value(q), 6);
	kiln_close(k);
	/* Only the second was loaded by descriptor. */
	ck_assert_int_eq(so_fds(1), 1);
}
END_TEST

START_TEST(test_load_failure)
{
	struct kiln_program *p = NULL;
	struct fake_entry *e;
	struct kiln *k;
	FILE *fp;

	e = add_entry("junk", "junk.so", 4);
	fp = fopen(e->path, "w");
	ck_assert_ptr_nonnull(fp);
	fputs("this is not an ELF file\n", fp);
	fclose(fp);
	fake_start();
	k = open_fake();
	ck_assert_int_eq(kiln_lookup(k, "junk", &p), KILN_ELOAD);
	ck_assert_ptr_null(p);
	ck_assert_ptr_nonnull(strstr(kiln_errmsg(k), e->path));
	kiln_close(k);
}
END_TEST

START_TEST(test_refused_locally)
{
	struct kiln_source srcs[2];
	struct kiln_request req = one_source(&srcs[0], "x");
	const char *bad_args[] = { "-O2", "-o", "/tmp/elsewhere.so" };
	struct kiln_program *p;
	struct kiln_stats st;
	struct kiln *k;

	fake_start();
	k = open_fake();

	srcs[0].name = "../escape.c";
	ck_assert_int_eq(kiln_get(k, &req, &p), KILN_EINVAL);
	ck_assert_ptr_nonnull(strstr(kiln_errmsg(k), "../escape.c"));

	srcs[0].name = "prog.c";
	srcs[0].text = "int a;\0int b;";
	srcs[0].len = 13;
	ck_assert_int_eq(kiln_get(k, &req, &p), KILN_EINVAL);
	ck_assert_ptr_nonnull(strstr(kiln_errmsg(k), "NUL"));

	srcs[0].len = 0;
	srcs[0].path = "/abs/prog.c";
	ck_assert_int_eq(kiln_get(k, &req, &p), KILN_EINVAL);
	ck_assert_ptr_nonnull(strstr(kiln_errmsg(k), "exactly one of text or path"));

	srcs[0].text = NULL;
	srcs[0].path = "relative/prog.c";
	ck_assert_int_eq(kiln_get(k, &req, &p), KILN_EINVAL);
	ck_assert_ptr_nonnull(strstr(kiln_errmsg(k), "not absolute"));

	srcs[0].path = NULL;
	srcs[0].text = "int a;";
	srcs[1] = srcs[0];
	req.nsources = 2;
	ck_assert_int_eq(kiln_get(k, &req, &p), KILN_EINVAL);
	ck_assert_ptr_nonnull(strstr(kiln_errmsg(k), "twice"));

	req.nsources = 1;
	req.args = bad_args;
	req.nargs = 3;
	ck_assert_int_eq(kiln_get(k, &req, &p), KILN_EINVAL);
	ck_assert_ptr_nonnull(strstr(kiln_errmsg(k), "-o"));

	req.nargs = 0;
	req.alias = "has space";
	ck_assert_int_eq(kiln_get(k, &req, &p), KILN_EINVAL);
	ck_assert_int_eq(kiln_lookup(k, "", &p), KILN_EINVAL);
	req.alias = NULL;
	req.toolchain = "-evil";
	ck_assert_int_eq(kiln_get(k, &req, &p), KILN_EINVAL);
	req.toolchain = NULL;
	req.nsources = 0;
	ck_assert_int_eq(kiln_get(k, &req, &p), KILN_EINVAL);

	/* Nothing of that reached the daemon, not even hello: it goes out with
	 * the first request that does. */
	kiln_get_stats(k, &st);
	ck_assert_uint_eq(st.requests, 0);
	usleep(50000);
	ck_assert_int_eq(atomic_load(&F->frames), 0);
	kiln_close(k);
}
END_TEST

#define PIPE_THREADS 8

struct pipe_arg {
	struct kiln *k;
	int index;
	int rc;
	int value;
	char alias[32];
};

static void *pipe_thread(void *v)
{
	struct pipe_arg *a = v;
	struct kiln_source src;
	struct kiln_request req = one_source(&src, a->alias);
	struct kiln_program *p = NULL;

	a->rc = kiln_get(a->k, &req, &p);
	if (a->rc == KILN_OK)
		a->value = call_value(p);
	return NULL;
}

START_TEST(test_pipelining_out_of_order)
{
	struct pipe_arg args[PIPE_THREADS];
	pthread_t threads[PIPE_THREADS];
	char so[32];
	struct kiln_stats st;
	struct kiln *k;
	int i;

	for (i = 0; i < PIPE_THREADS; i++) {
		snprintf(so, sizeof(so), "p%d.so", i);
		build_so(so, 100 + i);
		snprintf(args[i].alias, sizeof(args[i].alias), "pipe:%d", i);
		add_entry(args[i].alias, so, 100 + (unsigned)i);
	}
	/* The fake answers only once every thread's get is in, and in
	 * reverse order: this deadlocks unless the requests are pipelined. */
	F->defer = PIPE_THREADS;
	fake_start();
	k = open_fake();
	for (i = 0; i < PIPE_THREADS; i++) {
		args[i].k = k;
		args[i].index = i;
		args[i].rc = 1;
		ck_assert_int_eq(pthread_create(&threads[i], NULL, pipe_thread, &args[i]), 0);
	}
	for (i = 0; i < PIPE_THREADS; i++)
		pthread_join(threads[i], NULL);
	for (i = 0; i < PIPE_THREADS; i++) {
		ck_assert_int_eq(args[i].rc, KILN_OK);
		ck_assert_int_eq(args[i].value, 100 + i);
	}
	kiln_get_stats(k, &st);
	ck_assert_uint_eq(st.requests, 1 + PIPE_THREADS);
	ck_assert_uint_eq(st.loads, PIPE_THREADS);
	kiln_close(k);
	ck_assert_int_eq(so_fds(0), 0);
}
END_TEST

#define STRESS_THREADS 8
#define STRESS_CALLS 100

static void *stress_thread(void *v)
{
	struct pipe_arg *a = v;
	struct kiln_source src;
	struct kiln_request req = one_source(&src, NULL);
	struct kiln_program *p = NULL;
	char name[32];
	int i;

	/* Without an alias every get is a round trip; misses interleave. */
	snprintf(name, sizeof(name), "s%d.c", a->index);
	src.name = name;
	a->rc = KILN_OK;
	for (i = 0; i < STRESS_CALLS && a->rc == KILN_OK; i++) {
		a->rc = kiln_get(a->k, &req, &p);
		if (a->rc == KILN_OK && call_value(p) != 200 + a->index)
			a->rc = 1;
		if (a->rc == KILN_OK && kiln_lookup(a->k, "stress:missing", &p) != KILN_ENOTFOUND)
			a->rc = 2;
	}
	return NULL;
}

START_TEST(test_threads_share_connection)
{
	struct pipe_arg args[STRESS_THREADS];
	pthread_t threads[STRESS_THREADS];
	char so[32], name[32];
	struct kiln_stats st;
	struct kiln *k;
	int i;

	for (i = 0; i < STRESS_THREADS; i++) {
		snprintf(so, sizeof(so), "s%d.so", i);
		snprintf(name, sizeof(name), "s%d.c", i);
		build_so(so, 200 + i);
		add_entry(name, so, 200 + (unsigned)i);
	}
	fake_start();
	k = open_fake();
	for (i = 0; i < STRESS_THREADS; i++) {
		args[i].k = k;
		args[i].index = i;
		ck_assert_int_eq(pthread_create(&threads[i], NULL, stress_thread, &args[i]), 0);
	}
	for (i = 0; i < STRESS_THREADS; i++)
		pthread_join(threads[i], NULL);
	for (i = 0; i < STRESS_THREADS; i++)
		ck_assert_msg(args[i].rc == KILN_OK, "thread %d: %d", i, args[i].rc);
	kiln_get_stats(k, &st);
	ck_assert_uint_eq(st.requests, 1 + 2 * STRESS_THREADS * STRESS_CALLS);
	ck_assert_uint_eq(st.loads, STRESS_THREADS);
	ck_assert_int_eq(atomic_load(&F->conns), 1);
	kiln_close(k);
}
END_TEST

START_TEST(test_connection_lost_then_reconnect)
{
	struct kiln_source src;
	struct kiln_request req = one_source(&src, "back");
	struct kiln_program *p = NULL;
	struct kiln *k;

	build_so("back.so", 8);
	add_entry("back", "back.so", 8);
	fake_start();
	k = open_fake();
	/* The daemon dies while it handles the request. */
	atomic_store(&F->drop_on_get, 1);
	ck_assert_int_eq(kiln_get(k, &req, &p), KILN_EIO);
	ck_assert_ptr_null(p);
	ck_assert_ptr_nonnull(strstr(kiln_errmsg(k), "lost the connection"));
	/* The next call reconnects by itself. */
	ck_assert_msg(kiln_get(k, &req, &p) == KILN_OK, "%s", kiln_errmsg(k));
	ck_assert_int_eq(call_value(p), 8);
	ck_assert_int_eq(atomic_load(&F->conns), 2);
	kiln_close(k);
}
END_TEST

START_TEST(test_idle_loss_is_transparent)
{
	struct timespec ms = { 0, 1000 * 1000 };
	struct kiln_program *p = NULL;
	struct kiln *k;
	int i;

	build_so("idle.so", 6);
	add_entry("idle", "idle.so", 6);
	build_so("idle2.so", 7);
	add_entry("idle2", "idle2.so", 7);
	atomic_store(&F->close_after_first, 1);
	fake_start();
	k = open_fake();
	ck_assert_msg(kiln_lookup(k, "idle", &p) == KILN_OK, "%s", kiln_errmsg(k));
	ck_assert_int_eq(call_value(p), 6);
	for (i = 0; i < 5000 && atomic_load(&F->closed) == 0; i++)
		nanosleep(&ms, NULL);
	ck_assert_int_eq(atomic_load(&F->closed), 1);
	/* The daemon went away between calls: nothing was in flight, so the
	 * call retries on a new connection instead of failing. */
	ck_assert_msg(kiln_lookup(k, "idle2", &p) == KILN_OK, "%s", kiln_errmsg(k));
	ck_assert_int_eq(call_value(p), 7);
	ck_assert_int_eq(atomic_load(&F->conns), 2);
	kiln_close(k);
}
END_TEST

static void write_script(const char *path, const char *body)
{
	FILE *fp = fopen(path, "w");

	ck_assert_ptr_nonnull(fp);
	fprintf(fp, "#!/bin/sh\n%s", body);
	fclose(fp);
	ck_assert_int_eq(chmod(path, 0755), 0);
}

START_TEST(test_autospawn_failures)
{
	struct kiln_options opts;
	char missing[PATH_MAX], failing[PATH_MAX];
	struct kiln *k = NULL;

	memset(&opts, 0, sizeof(opts));
	snprintf(missing, sizeof(missing), "%s/no-such-kilnd", F->dir);
	opts.socket_path = F->sock;
	opts.autospawn = 1;
	opts.kilnd_path = missing;
	ck_assert_int_eq(kiln_open_with(&opts, &k), KILN_ECONNECT);
	ck_assert_ptr_null(k);
	ck_assert_ptr_nonnull(strstr(kiln_errmsg(NULL), "could not start kilnd at"));
	ck_assert_ptr_nonnull(strstr(kiln_errmsg(NULL), missing));

	snprintf(failing, sizeof(failing), "%s/failing-kilnd", F->dir);
	write_script(failing, "exit 3\n");
	opts.kilnd_path = NULL;
	setenv("KILN_KILND", failing, 1);
	ck_assert_int_eq(kiln_open_with(&opts, &k), KILN_ECONNECT);
	ck_assert_ptr_nonnull(strstr(kiln_errmsg(NULL), failing));
	ck_assert_ptr_nonnull(strstr(kiln_errmsg(NULL), "status 3"));
}
END_TEST

START_TEST(test_autospawn_connects)
{
	char script[PATH_MAX], body[3 * PATH_MAX], spawned[PATH_MAX], argsfile[PATH_MAX];
	char line[4 * PATH_MAX], expect[4 * PATH_MAX];
	struct kiln_options opts;
	struct kiln *k = NULL;
	FILE *fp;

	/* The fake listens elsewhere; the "kilnd" that is started records
	 * its arguments and makes the socket path lead to the fake. */
	fake_start();
	snprintf(spawned, sizeof(spawned), "%s/spawned.sock", F->dir);
	snprintf(argsfile, sizeof(argsfile), "%s/args", F->dir);
	snprintf(script, sizeof(script), "%s/kilnd", F->dir);
	snprintf(body, sizeof(body), "echo \"$@\" > '%s'\nln -s '%s' \"$3\"\n", argsfile,
		 F->sock);
	write_script(script, body);
	memset(&opts, 0, sizeof(opts));
	opts.socket_path = spawned;
	opts.kilnd_path = script;
	opts.cache_dir = "/some/cache";
	setenv("KILN_AUTOSPAWN", "1", 1);
	ck_assert_msg(kiln_open_with(&opts, &k) == KILN_OK, "%s", kiln_errmsg(NULL));
	fp = fopen(argsfile, "r");
	ck_assert_ptr_nonnull(fp);
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), fp));
	fclose(fp);
	snprintf(expect, sizeof(expect), "--daemonize --socket %s --cache-dir /some/cache\n",
		 spawned);
	ck_assert_str_eq(line, expect);
	kiln_close(k);
}
END_TEST

static Suite *client_suite(void)
{
	Suite *s = suite_create("client");
	TCase *tc = tcase_create("fake daemon");

	tcase_add_checked_fixture(tc, fake_setup, fake_teardown);
	tcase_add_test(tc, test_strerror_errmsg);
	tcase_add_test(tc, test_open_no_daemon);
	tcase_add_test(tc, test_hello_mismatch);
	tcase_add_test(tc, test_get_loads_then_local_hits);
	tcase_add_test(tc, test_same_key_reused);
	tcase_add_test(tc, test_need_sources_resends_text);
	tcase_add_test(tc, test_many_nul_source_fails_alone);
	tcase_add_test(tc, test_many_args_checked_per_list);
	tcase_add_test(tc, test_get_without_alias);
	tcase_add_test(tc, test_lookup_not_found);
	tcase_add_test(tc, test_build_failed);
	tcase_add_test(tc, test_error_codes);
	tcase_add_test(tc, test_path_replaced_loads_fd);
	tcase_add_test(tc, test_reply_file_id);
	tcase_add_test(tc, test_load_failure);
	tcase_add_test(tc, test_refused_locally);
	tcase_add_test(tc, test_pipelining_out_of_order);
	tcase_add_test(tc, test_threads_share_connection);
	tcase_add_test(tc, test_connection_lost_then_reconnect);
	tcase_add_test(tc, test_idle_loss_is_transparent);
	tcase_add_test(tc, test_autospawn_failures);
	tcase_add_test(tc, test_autospawn_connects);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(client_suite());
}
