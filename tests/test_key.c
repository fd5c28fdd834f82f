/*
 * Unit tests of the content keys (daemon/key.c): the same inputs give the
 * same key, and every input that changes an artifact changes the key.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "key.h"
#include "util.h"
#include "unit.h"

static struct toolchain tc;
static uint8_t cpu_a[32], cpu_b[32];

static void setup(void)
{
	char err[256];
	ck_assert_int_eq(key_toolchain_init(&tc, "cc", "/usr/bin/cc", NULL, err, sizeof(err)), 0);
	memset(cpu_a, 1, sizeof(cpu_a));
	memset(cpu_b, 2, sizeof(cpu_b));
}

static void teardown(void)
{
	key_toolchain_fini(&tc);
}

struct req {
	const char *output;
	char *args[4];
	size_t nargs;
	struct key_source src[2];
	size_t nsrc;
	const uint8_t *cpu;
};

static void base(struct req *r)
{
	memset(r, 0, sizeof(*r));
	r->output = "shared";
	r->args[0] = (char *)"-O2";
	r->args[1] = (char *)"-DN=4";
	r->nargs = 2;
	r->src[0] = (struct key_source){ "a.c", "int f(void){return 1;}", 22, NULL };
	r->nsrc = 1;
	r->cpu = cpu_a;
}

static void rkey(const struct req *r, char out[65])
{
	key_request(&tc, r->output, r->args, r->nargs, r->src, r->nsrc, r->cpu, out);
}

START_TEST(same_inputs_same_key)
{
	struct req a, b;
	char ka[65], kb[65];
	base(&a);
	base(&b);
	rkey(&a, ka);
	rkey(&b, kb);
	ck_assert_str_eq(ka, kb);
	ck_assert_uint_eq(strlen(ka), 64);
	ck_assert_uint_eq(strspn(ka, "0123456789abcdef"), 64);
}
END_TEST

/* Each variant changes one input of the base request. */
START_TEST(each_input_changes_key)
{
	struct req r;
	char k0[65], k[65];
	base(&r);
	rkey(&r, k0);

	base(&r);
	r.output = "cubin";
	rkey(&r, k);
	ck_assert_str_ne(k0, k);

	base(&r);
	r.args[0] = (char *)"-O3";
	rkey(&r, k);
	ck_assert_str_ne(k0, k);

	base(&r);
	r.args[0] = (char *)"-DN=4";
	r.args[1] = (char *)"-O2";
	rkey(&r, k);
	ck_assert_msg(strcmp(k0, k) != 0, "argument order must count");

	base(&r);
	r.nargs = 1;
	rkey(&r, k);
	ck_assert_str_ne(k0, k);

	base(&r);
	r.src[0].name = "b.c";
	rkey(&r, k);
	ck_assert_str_ne(k0, k);

	base(&r);
	r.src[0].text = "int f(void){return 2;}";
	rkey(&r, k);
	ck_assert_str_ne(k0, k);

	base(&r);
	r.src[1] = (struct key_source){ "x.h", "", 0, NULL };
	r.nsrc = 2;
	rkey(&r, k);
	ck_assert_str_ne(k0, k);

	/* Another toolchain identity (another compiler binary or version). */
	base(&r);
	tc.id[0] ^= 1;
	rkey(&r, k);
	tc.id[0] ^= 1;
	ck_assert_str_ne(k0, k);
}
END_TEST

/* Field boundaries are part of the serialization: "ab","c" is not "a","bc". */
START_TEST(no_ambiguous_concatenation)
{
	struct req r;
	char k1[65], k2[65];
	base(&r);
	r.args[0] = (char *)"ab";
	r.args[1] = (char *)"c";
	rkey(&r, k1);
	r.args[0] = (char *)"a";
	r.args[1] = (char *)"bc";
	rkey(&r, k2);
	ck_assert_str_ne(k1, k2);

	base(&r);
	r.src[0] = (struct key_source){ "a.c", "xy", 2, NULL };
	rkey(&r, k1);
	r.src[0] = (struct key_source){ "a.cx", "y", 1, NULL };
	rkey(&r, k2);
	ck_assert_str_ne(k1, k2);
}
END_TEST

/* An option given apart from its value keys as joined: "-I" "inc" and
 * "-Iinc" are one key (the compiler reads them the same); a value read by
 * another option, or one another option would read, is left apart. */
static void args_key_with(const struct toolchain *t, const char *a0, const char *a1,
			  const char *a2, const char *a3, char out[65])
{
	struct req r;
	base(&r);
	const char *a[] = { a0, a1, a2, a3 };
	r.nargs = 0;
	for (size_t i = 0; i < 4 && a[i] != NULL; i++)
		r.args[r.nargs++] = (char *)a[i];
	key_request(t, r.output, r.args, r.nargs, r.src, r.nsrc, r.cpu, out);
}

static void args_key(const char *a0, const char *a1, const char *a2, const char *a3,
		     char out[65])
{
	args_key_with(&tc, a0, a1, a2, a3, out);
}

/* Whether two argument lists key alike with t. */
static bool same_key(const struct toolchain *t, const char *a0, const char *a1, const char *b0)
{
	char k1[65], k2[65];
	args_key_with(t, a0, a1, NULL, NULL, k1);
	args_key_with(t, b0, NULL, NULL, NULL, k2);
	return strcmp(k1, k2) == 0;
}

START_TEST(apart_and_joined_options_one_key)
{
	char k1[65], k2[65];
	args_key("-I", "inc", "-O2", NULL, k1);
	args_key("-Iinc", "-O2", NULL, NULL, k2);
	ck_assert_str_eq(k1, k2);
	args_key("-D", "N=4", "-isystem", "/opt/x", k1);
	args_key("-DN=4", "-isystem/opt/x", NULL, NULL, k2);
	ck_assert_str_eq(k1, k2);
	args_key("--param", "max-inline-insns-single=10", NULL, NULL, k1);
	args_key("--param=max-inline-insns-single=10", NULL, NULL, NULL, k2);
	ck_assert_str_eq(k1, k2);
	/* Other values, other keys. */
	args_key("-I", "inc2", "-O2", NULL, k1);
	args_key("-Iinc", "-O2", NULL, NULL, k2);
	ck_assert_str_ne(k1, k2);
	/* -Xlinker's value is the linker's: never joined. */
	args_key("-Xlinker", "-rpath", "-Xlinker", "/x", k1);
	args_key("-Xlinker", "-rpath/x", NULL, NULL, k2);
	ck_assert_str_ne(k1, k2);
	args_key("-Xlinker", "-L", "-Xlinker", "/x", k1);
	args_key("-Xlinker", "-L/x", NULL, NULL, k2);
	ck_assert_str_ne(k1, k2);
}
END_TEST

/*
 * An option given apart keys joined only where the tool reads the apart
 * form as the joined one, by that tool's own rules (docs/design.md, "What
 * the key covers"): gcc refuses "-std" "c11", so it must not be served the
 * entry "-std=c11" built; clang refuses "-znow" and "-specs" apart; nvcc
 * reads "-x" "cu" as "-x=cu" and refuses "-xcu", and reads "-std" "c++17"
 * as "-std=c++17".
 */
START_TEST(apart_options_join_only_as_the_tool_reads_them)
{
	/* tc is /usr/bin/cc: GCC. */
	ck_assert(!same_key(&tc, "-std", "c11", "-std=c11"));
	ck_assert(same_key(&tc, "--std", "c11", "--std=c11"));
	ck_assert(same_key(&tc, "-x", "c", "-xc"));
	ck_assert(same_key(&tc, "-z", "now", "-znow"));
	ck_assert(!same_key(&tc, "-arch", "sm_80", "-arch=sm_80"));

	struct toolchain nv = tc;
	nv.is_nvcc = true;
	nv.is_gcc = false;
	nv.cuda_arch = (char *)"sm_80";
	ck_assert(same_key(&nv, "-std", "c++17", "-std=c++17"));
	ck_assert(same_key(&nv, "-x", "cu", "-x=cu"));
	ck_assert(!same_key(&nv, "-x", "cu", "-xcu"));
	ck_assert(same_key(&nv, "-isystem", "/opt/x", "-isystem=/opt/x"));
	ck_assert(!same_key(&nv, "-isystem", "/opt/x", "-isystem/opt/x"));
	ck_assert(same_key(&nv, "-I", "inc", "-Iinc"));
	ck_assert(same_key(&nv, "-arch", "sm_80", "-arch=sm_80"));
	ck_assert(!same_key(&nv, "-z", "now", "-znow"));

	struct toolchain clang;
	char err[256];
	if (access("/usr/bin/clang", X_OK) != 0)
		return;   /* no clang here */
	ck_assert_int_eq(key_toolchain_init(&clang, "clang", "/usr/bin/clang", NULL, err,
					    sizeof(err)), 0);
	ck_assert(!same_key(&clang, "-z", "now", "-znow"));
	ck_assert(!same_key(&clang, "-specs", "/x.specs", "-specs=/x.specs"));
	ck_assert(!same_key(&clang, "-std", "c11", "-std=c11"));
	ck_assert(same_key(&clang, "-I", "inc", "-Iinc"));
	key_toolchain_fini(&clang);
}
END_TEST

/* A source named by its digest keys exactly like its text, and a different
 * digest keys differently. */
START_TEST(digest_keys_like_text)
{
	struct req r;
	char k1[65], k2[65], k3[65];
	uint8_t d[32];
	base(&r);
	rkey(&r, k1);
	util_sha256(r.src[0].text, r.src[0].len, d);
	r.src[0] = (struct key_source){ "a.c", NULL, 0, d };
	rkey(&r, k2);
	ck_assert_str_eq(k1, k2);
	d[31] ^= 1;
	rkey(&r, k3);
	ck_assert_str_ne(k1, k3);
}
END_TEST

/* The CPU counts only when an argument asks for the build node's CPU. */
START_TEST(cpu_only_with_native)
{
	struct req r;
	char k1[65], k2[65];
	base(&r);
	rkey(&r, k1);
	r.cpu = cpu_b;
	rkey(&r, k2);
	ck_assert_str_eq(k1, k2);

	base(&r);
	r.args[1] = (char *)"-march=native";
	rkey(&r, k1);
	r.cpu = cpu_b;
	rkey(&r, k2);
	ck_assert_str_ne(k1, k2);
	ck_assert(key_args_native(r.args, r.nargs));
	base(&r);
	ck_assert(!key_args_native(r.args, r.nargs));
}
END_TEST

/* Requires that key_args_native says want for the argument a, or for the
 * pair a b when b is not NULL. */
static void check_native(bool want, const char *a, const char *b)
{
	char *v[2] = { (char *)a, (char *)b };
	size_t n = b != NULL ? 2 : 1;
	ck_assert_msg(key_args_native(v, n) == want, "key_args_native(\"%s\"%s%s%s) is not %s", a,
		      b != NULL ? ", \"" : "", b != NULL ? b : "", b != NULL ? "\"" : "",
		      want ? "true" : "false");
}

/* nvcc passes -march=native on to its host compiler through -Xcompiler and
 * --compiler-options, in one argument or two, alone or in a list. */
START_TEST(native_through_host_compiler_options)
{
	check_native(true, "-Xcompiler=-march=native", NULL);
	check_native(true, "--compiler-options=-march=native", NULL);
	check_native(true, "-Xcompiler", "-O2,-march=native");
	check_native(true, "--compiler-options", "-march=native");
}
END_TEST

/* -mtune=native tunes for this CPU as -march=native builds for it. */
START_TEST(native_tune_counts)
{
	check_native(true, "-mtune=native", NULL);
	check_native(true, "-O2", "-mcpu=native");
}
END_TEST

/* A named architecture does not depend on the build node's CPU. */
START_TEST(no_native_without_native)
{
	check_native(false, "-O2", NULL);
	check_native(false, "-march=x86-64-v3", NULL);
	check_native(false, "-Xcompiler", "-O2,-march=x86-64-v3");
}
END_TEST

START_TEST(artifact_key_covers_deps)
{
	struct store_dep d[2];
	char k1[65], k2[65], k3[65];
	const char *rk = "0000000000000000000000000000000000000000000000000000000000000001";
	memset(d, 0, sizeof(d));
	d[0].path = (char *)"/inc/a.h";
	d[1].path = (char *)"/inc/b.h";
	memset(d[0].digest, 0xaa, 32);
	memset(d[1].digest, 0xbb, 32);
	key_artifact(rk, d, 2, k1);
	/* The compiler's listing order does not matter. */
	struct store_dep swapped[2] = { d[1], d[0] };
	key_artifact(rk, swapped, 2, k2);
	ck_assert_str_eq(k1, k2);
	/* A header's content does. */
	d[1].digest[31] ^= 1;
	key_artifact(rk, d, 2, k3);
	ck_assert_str_ne(k1, k3);
	d[1].digest[31] ^= 1;
	/* So does the request key, and the set of headers. */
	key_artifact("0000000000000000000000000000000000000000000000000000000000000002", d, 2, k3);
	ck_assert_str_ne(k1, k3);
	key_artifact(rk, d, 1, k3);
	ck_assert_str_ne(k1, k3);
}
END_TEST

/* The artifact key of one dependency of every kind, against the value this
 * key format gives (KEY_FORMAT): what a kind puts into the key is its row of
 * depkind.h, and a change of that row must be a new key format, never a
 * silent change of every key. */
START_TEST(artifact_key_of_every_kind_is_stable)
{
	struct store_dep d[DEP__COUNT];
	memset(d, 0, sizeof(d));
	static const char *const paths[DEP__COUNT] = {
		"/inc/file.h", "/inc/exists", "/inc/absent.h", "LANG", "/inc", "cc1",
	};
	for (int k = 0; k < DEP__COUNT; k++) {
		d[k].path = (char *)paths[k];
		d[k].kind = (uint8_t)k;
		memset(d[k].digest, 0x11 * (k + 1), 32);
		d[k].mode = k == DEP_EXISTS ? 040755 : dep_kinds[k].named ? 1 : 0;
		d[k].size = 1234;
	}
	char key[65];
	key_artifact("0000000000000000000000000000000000000000000000000000000000000001", d,
		     DEP__COUNT, key);
	ck_assert_str_eq(key, "37da2509d6d46a89d5ed4af8754f8742cf0487af20fc58793ccfa2d5c0a8a5b6");
}
END_TEST

START_TEST(toolchain_errors)
{
	struct toolchain t;
	char err[256];
	ck_assert_int_ne(key_toolchain_init(&t, "x", "relative/cc", NULL, err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(strstr(err, "absolute"));
	ck_assert_int_ne(key_toolchain_init(&t, "x", "/nonexistent/cc", NULL, err, sizeof(err)), 0);
	ck_assert_int_ne(key_toolchain_init(&t, "x", "/etc/passwd", NULL, err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(strstr(tc.version, "cc"));
}
END_TEST

static Suite *key_suite(void)
{
	Suite *s = suite_create("key");
	TCase *tcase = tcase_create("key");
	tcase_add_checked_fixture(tcase, setup, teardown);
	tcase_add_test(tcase, same_inputs_same_key);
	tcase_add_test(tcase, each_input_changes_key);
	tcase_add_test(tcase, no_ambiguous_concatenation);
	tcase_add_test(tcase, apart_and_joined_options_one_key);
	tcase_add_test(tcase, apart_options_join_only_as_the_tool_reads_them);
	tcase_add_test(tcase, cpu_only_with_native);
	tcase_add_test(tcase, native_through_host_compiler_options);
	tcase_add_test(tcase, native_tune_counts);
	tcase_add_test(tcase, no_native_without_native);
	tcase_add_test(tcase, digest_keys_like_text);
	tcase_add_test(tcase, artifact_key_covers_deps);
	tcase_add_test(tcase, artifact_key_of_every_kind_is_stable);
	tcase_add_test(tcase, toolchain_errors);
	suite_add_tcase(s, tcase);
	return s;
}

int main(void)
{
	return unit_run(key_suite());
}
