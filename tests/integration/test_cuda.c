/*
 * Integration tests of GPU builds without a GPU: nvcc toolchain, cubin,
 * fatbin and ptx for an explicit architecture (checked in the bytes), the
 * architecture in the key, a DaCe-style .cpp + .cu shared library, compile
 * errors, and a kilnd that starts without a usable CUDA driver. Needs nvcc
 * (KILN_TEST_NVCC); without it the test skips (77).
 */
#include "harness.h"

#include <dlfcn.h>
#ifdef KILN_HAVE_CUDA
#include <kiln/kiln_cuda.h>
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EM_CUDA 190


static char tc_arg[HARNESS_PATH + 16];

static const char *nvcc(void)
{
	return getenv("KILN_TEST_NVCC");
}

/* kilnd with the nvcc toolchain, a driver that cannot load (an empty
 * libcuda.so.1 first on the library path: no GPU, whatever the machine has)
 * and the extra arguments (NULL-terminated, may be NULL). */
static void start_without_driver(const char *const *extra)
{
	static char ldpath[HARNESS_PATH + 8192];
	char dir[HARNESS_PATH], lib[HARNESS_PATH];
	const char *args[16];
	const char *env[] = { ldpath, NULL };
	size_t n = 0;

	harness_path(dir, "fakecuda");
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	harness_write_file(harness_path(lib, "fakecuda/libcuda.so.1"), "not a library");
	/* First on the path, before what the test runs with (a packed kilnd
	 * finds its own libraries there: scripts/gpu-test --pack). */
	const char *inherited = getenv("LD_LIBRARY_PATH");
	snprintf(ldpath, sizeof(ldpath), "LD_LIBRARY_PATH=%s%s%s", dir, inherited ? ":" : "",
		 inherited ? inherited : "");
	snprintf(tc_arg, sizeof(tc_arg), "nvcc=%s", nvcc());
	args[n++] = "--toolchain";
	args[n++] = tc_arg;
	for (size_t i = 0; extra != NULL && extra[i] != NULL; i++)
		args[n++] = extra[i];
	args[n] = NULL;
	/* The harness's own socket and cache, as the default daemon. */
	harness_start_env(args, env);
}

static int get_gpu(struct kiln *k, const char *output, const char *arg, struct kiln_program **p)
{
	char *text = harness_data_file("saxpy.cu");
	struct kiln_source src = { .name = "saxpy.cu", .text = text };
	const char *args[] = { arg };
	struct kiln_request req = { .toolchain = "nvcc", .output = output, .sources = &src,
				    .nsources = 1, .args = args, .nargs = arg != NULL ? 1 : 0 };
	int rc = kiln_get(k, &req, p);

	free(text);
	return rc;
}

static bool contains(const void *data, size_t size, const char *needle)
{
	return memmem(data, size, needle, strlen(needle)) != NULL;
}

/* The SM number an NVIDIA cubin's ELF header carries (e_flags: bits 8-15
 * from ELF ABI version 8 on, bits 0-7 before). */
static int cubin_sm(const unsigned char *elf, size_t size)
{
	uint32_t flags;

	ck_assert_uint_ge(size, 64);
	ck_assert_msg(memcmp(elf, "\177ELF", 4) == 0, "not an ELF file");
	ck_assert_int_eq(elf[4], 2);   /* 64-bit */
	ck_assert_int_eq(elf[18] | elf[19] << 8, EM_CUDA);
	memcpy(&flags, elf + 48, 4);
	return elf[8] >= 8 ? (int)((flags >> 8) & 0xff) : (int)(flags & 0xff);
}

START_TEST(gpu_outputs_for_an_explicit_arch)
{
	const char *const extra[] = { "--cuda-arch", "sm_80", NULL };
	struct kiln_program *cubin, *fatbin, *ptx, *cubin90;
	const unsigned char *data;
	const char *elf;
	struct kiln *k;
	size_t size;

	start_without_driver(extra);
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	ck_assert_msg(get_gpu(k, "cubin", NULL, &cubin) == KILN_OK, "cubin: %s", kiln_errmsg(k));
	ck_assert_str_eq(kiln_program_output(cubin), "cubin");
	data = kiln_program_data(cubin, &size);
	ck_assert_ptr_nonnull(data);
	ck_assert_int_eq(cubin_sm(data, size), 80);
	ck_assert_msg(contains(data, size, "saxpy"), "the kernel is not in the cubin");
	ck_assert_ptr_null(kiln_sym(cubin, "saxpy"));

	ck_assert_msg(get_gpu(k, "fatbin", NULL, &fatbin) == KILN_OK, "fatbin: %s", kiln_errmsg(k));
	data = kiln_program_data(fatbin, &size);
	ck_assert_uint_ge(size, 64);
	ck_assert_msg(data[0] == 0x50 && data[1] == 0xed && data[2] == 0x55 && data[3] == 0xba,
		      "not a fatbin (magic %02x%02x%02x%02x)", data[0], data[1], data[2], data[3]);
	elf = memmem(data, size, "\177ELF", 4);
	ck_assert_msg(elf != NULL, "no cubin inside the fatbin");
	ck_assert_int_eq(cubin_sm((const unsigned char *)elf, size - (size_t)(elf - (const char *)data)),
			 80);
	ck_assert(contains(data, size, "saxpy"));

	ck_assert_msg(get_gpu(k, "ptx", NULL, &ptx) == KILN_OK, "ptx: %s", kiln_errmsg(k));
	data = kiln_program_data(ptx, &size);
	ck_assert_msg(strstr((const char *)data, ".target sm_80") != NULL, "ptx for another target");
	ck_assert_msg(strstr((const char *)data, ".entry saxpy") != NULL, "no saxpy entry in the ptx");
	ck_assert_uint_eq(strlen((const char *)data), size);

	/* Another architecture is another key, and another SM in the bytes. */
	ck_assert_int_eq(get_gpu(k, "cubin", "-arch=sm_90", &cubin90), KILN_OK);
	ck_assert_str_ne(kiln_program_key(cubin90), kiln_program_key(cubin));
	data = kiln_program_data(cubin90, &size);
	ck_assert_int_eq(cubin_sm(data, size), 90);
	ck_assert_str_ne(kiln_program_key(cubin), kiln_program_key(fatbin));
	ck_assert_str_ne(kiln_program_key(cubin), kiln_program_key(ptx));
#ifdef KILN_HAVE_CUDA
	/* Without a driver in this process, libkiln-cuda says so. */
	if (dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) == NULL &&
	    dlopen("libcuda.so.1", RTLD_NOW) == NULL) {
		CUmodule m;

		ck_assert_int_eq(kiln_cuda_module(cubin, &m), KILN_ECUDA);
		ck_assert_msg(harness_contains(kiln_errmsg(k), "libcuda.so.1"), "%s", kiln_errmsg(k));
	}
#endif
	kiln_close(k);
	harness_stop();
}
END_TEST

/* The architecture kilnd chose is part of the key: daemons for sm_80 and
 * sm_90 give the same request different keys, and each its own SM. */
START_TEST(daemon_arch_is_in_the_key)
{
	const char *const a80[] = { "--cuda-arch", "sm_80", NULL };
	const char *const a90[] = { "--toolchain", tc_arg, "--cuda-arch", "90", NULL };
	char sock90[HARNESS_PATH], key80[72];
	const unsigned char *data;
	struct kiln_program *p;
	struct kiln *k;
	size_t size;

	start_without_driver(a80);
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	ck_assert_int_eq(get_gpu(k, "cubin", NULL, &p), KILN_OK);
	snprintf(key80, sizeof(key80), "%s", kiln_program_key(p));
	kiln_close(k);
	harness_start_named("sm90", a90, NULL, sock90);
	ck_assert_int_eq(kiln_open(sock90, &k), KILN_OK);
	ck_assert_msg(get_gpu(k, "cubin", NULL, &p) == KILN_OK, "%s", kiln_errmsg(k));
	ck_assert_str_ne(kiln_program_key(p), key80);
	data = kiln_program_data(p, &size);
	ck_assert_int_eq(cubin_sm(data, size), 90);
	{
		cJSON *st = harness_status_at(sock90), *tc;
		bool seen = false;

		cJSON_ArrayForEach(tc, cJSON_GetObjectItem(st, "toolchains"))
			if (strcmp(harness_str(tc, "name"), "nvcc") == 0) {
				ck_assert_str_eq(harness_str(tc, "cuda_arch"), "sm_90");
				seen = true;
			}
		ck_assert(seen);
		cJSON_Delete(st);
	}
	kiln_close(k);

	/* nvcc's environment is in the key too. */
	{
		const char *const a80b[] = { "--toolchain", tc_arg, "--cuda-arch", "sm_80", NULL };
		const char *const env[] = { "NVCC_APPEND_FLAGS=-lineinfo", NULL };
		char sock[HARNESS_PATH];

		harness_start_named("appendflags", a80b, env, sock);
		ck_assert_int_eq(kiln_open(sock, &k), KILN_OK);
		ck_assert_msg(get_gpu(k, "cubin", NULL, &p) == KILN_OK, "%s", kiln_errmsg(k));
		ck_assert_str_ne(kiln_program_key(p), key80);
		kiln_close(k);
	}
	harness_stop();
}
END_TEST

/* A DaCe-style program: host .cpp + .cu, one .so against the CUDA runtime. */
START_TEST(cpp_and_cu_link_into_one_library)
{
	const char *const extra[] = { "--cuda-arch", "sm_80", NULL };
	static const char prog_cpp[] =
		"#include \"kernels.h\"\n"
		"extern \"C\" int __program_init(void) { return 0; }\n"
		"extern \"C\" int program_value(void) { return kernels_value() + 1; }\n"
		"extern \"C\" int __program_exit(void) { return 0; }\n";
	static const char kernels_cu[] =
		"#include \"kernels.h\"\n"
		"__global__ void scale(float *x, float a) { x[threadIdx.x] *= a; }\n"
		"int kernels_value(void) { return 41; }\n";
	static const char kernels_h[] = "int kernels_value(void);\n";
	struct kiln_source srcs[] = {
		{ .name = "program.cpp", .text = prog_cpp },
		{ .name = "kernels.cu", .text = kernels_cu },
		{ .name = "kernels.h", .text = kernels_h },
	};
	struct kiln_request req = { .toolchain = "nvcc", .sources = srcs, .nsources = 3 };
	struct kiln_program *p;
	int (*fn)(void);
	struct kiln *k;

	start_without_driver(extra);
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	ck_assert_msg(kiln_get(k, &req, &p) == KILN_OK, "%s", kiln_errmsg(k));
	ck_assert_str_eq(kiln_program_output(p), "shared");
	ck_assert_ptr_null(kiln_program_data(p, NULL));
	*(void **)&fn = kiln_sym(p, "program_value");
	ck_assert_ptr_nonnull(fn);
	ck_assert_int_eq(fn(), 42);
	kiln_close(k);
	harness_stop();
}
END_TEST

static int64_t builds(void)
{
	cJSON *st = harness_status();
	int64_t n = harness_num(st, "builds_started");
	cJSON_Delete(st);
	return n;
}

/* The int a program's function returns, or -1 when it is not there. */
static int value_of(struct kiln_program *p, const char *name)
{
	int (*fn)(void);
	*(void **)&fn = kiln_sym(p, name);
	return fn != NULL ? fn() : -1;
}

/*
 * The .cpp of a .cpp + .cu program is compiled by nvcc's host compiler
 * itself (docs/cuda.md, "Host sources"), as DaCe's CMake build does: it
 * does not see nvcc's __NVCC__, it gets the host's share of the arguments
 * (-D, -I, -O, -std, -Xcompiler's values), the .cu is nvcc's, the two link
 * into one library; and a header on disk that only the .cpp reads is an
 * input of the entry (observed in the host compiler's run).
 */
START_TEST(cpp_compiled_by_the_host_compiler)
{
	const char *const extra[] = { "--cuda-arch", "sm_80", NULL };
	static const char prog_cpp[] =
		"#include <cuda_runtime.h>\n"
		"#include \"onlycpp.h\"\n"
		"#ifndef WITH_CUDA\n#error no -DWITH_CUDA\n#endif\n"
		"extern \"C\" int cu_value(void);\n"
		"#ifdef __NVCC__\n"
		"extern \"C\" int by_nvcc(void) { return 1; }\n"
		"#else\n"
		"extern \"C\" int by_nvcc(void) { return 0; }\n"
		"#endif\n"
		"extern \"C\" int from_xcompiler(void) { return FROM_XCOMPILER; }\n"
		"extern \"C\" int header_value(void) { return ONLYCPP + cu_value(); }\n";
	static const char kernels_cu[] =
		"#ifndef __NVCC__\n#error not nvcc\n#endif\n"
		"__global__ void scale(float *x, float a) { x[threadIdx.x] *= a; }\n"
		"extern \"C\" int cu_value(void) { return 1000; }\n";
	char inc[HARNESS_PATH], hdr[HARNESS_PATH], iarg[HARNESS_PATH + 4];
	struct kiln_source srcs[] = {
		{ .name = "program.cpp", .text = prog_cpp },
		{ .name = "kernels.cu", .text = kernels_cu },
	};
	const char *args[] = { "-O2", "-std=c++17", "--expt-relaxed-constexpr", "-DWITH_CUDA",
			       "-lineinfo", "-Xcompiler=-DFROM_XCOMPILER=7,-fno-math-errno", iarg };
	struct kiln_request req = { .toolchain = "nvcc", .sources = srcs, .nsources = 2,
				    .args = args, .nargs = 7 };
	struct kiln_program *p;
	struct kiln *k;

	start_without_driver(extra);
	harness_path(inc, "inc");
	ck_assert_int_eq(mkdir(inc, 0700), 0);
	snprintf(iarg, sizeof(iarg), "-I%s", inc);
	harness_write_file(harness_path(hdr, "inc/onlycpp.h"), "#define ONLYCPP 1\n");
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	ck_assert_msg(kiln_get(k, &req, &p) == KILN_OK, "%s", kiln_errmsg(k));
	ck_assert_int_eq(value_of(p, "by_nvcc"), 0);
	ck_assert_int_eq(value_of(p, "from_xcompiler"), 7);
	ck_assert_int_eq(value_of(p, "cu_value"), 1000);
	ck_assert_int_eq(value_of(p, "header_value"), 1001);
	kiln_release(k, p);
	int64_t before = builds();
	/* The same request again is a hit; after the header changed, a miss
	 * that builds the new value. */
	ck_assert_msg(kiln_get(k, &req, &p) == KILN_OK, "%s", kiln_errmsg(k));
	ck_assert_int_eq(builds(), before);
	kiln_release(k, p);
	harness_write_file(hdr, "#define ONLYCPP 2\n");
	ck_assert_msg(kiln_get(k, &req, &p) == KILN_OK, "%s", kiln_errmsg(k));
	ck_assert_int_eq(builds(), before + 1);
	ck_assert_int_eq(value_of(p, "header_value"), 1002);
	kiln_release(k, p);
	kiln_close(k);
	harness_stop();
}
END_TEST

/* No driver: kilnd starts, reports why there is no GPU, serves CPU builds,
 * and refuses an nvcc request without an architecture, saying what to do.
 * nvcc's compile errors reach the client. */
START_TEST(no_driver_no_arch_and_compile_errors)
{
	struct kiln_source bad = { .name = "bad.cu", .text = "__global__ void k( { }\n" };
	const char *arch_args[] = { "-arch=sm_80", "-ccbin", "/bin/sh" };
	struct kiln_request req = { .toolchain = "nvcc", .output = "cubin", .sources = &bad,
				    .nsources = 1 };
	struct kiln_program *p;
	struct kiln *k;
	char key[72];
	cJSON *st;

	start_without_driver(NULL);
	st = harness_status();
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(st, "gpus")), 0);
	ck_assert_msg(harness_contains(harness_str(st, "gpu_note"), "libcuda.so.1"),
		      "gpu_note: %s", harness_str(st, "gpu_note"));
	cJSON_Delete(st);
	harness_get_program(NULL, "cpu_side", 7, NULL, key);

	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	ck_assert_int_eq(get_gpu(k, "cubin", NULL, &p), KILN_EREFUSED);
	ck_assert_msg(harness_contains(kiln_errmsg(k), "-arch=sm_"), "%s", kiln_errmsg(k));
	/* With an architecture in the request it builds; the error is nvcc's. */
	{
		req.args = arch_args;
		req.nargs = 1;
		ck_assert_int_eq(kiln_get(k, &req, &p), KILN_EBUILD);
		ck_assert_msg(harness_contains(kiln_errmsg(k), "error"), "%s", kiln_errmsg(k));
	}
	/* GPU outputs need nvcc; nvcc's dangerous options are refused. */
	req.toolchain = "cc";
	ck_assert_int_eq(kiln_get(k, &req, &p), KILN_EREFUSED);
	{
		req.toolchain = "nvcc";
		req.args = arch_args;
		req.nargs = 3;
		/* -ccbin picks another host compiler: code into the toolchain,
		 * which only kilnd's --allow-toolchain-code lets through. */
		ck_assert_int_eq(kiln_get(k, &req, &p), KILN_EREFUSED);
		ck_assert_msg(harness_contains(kiln_errmsg(k), "--allow-toolchain-code"), "%s",
			      kiln_errmsg(k));
	}
	kiln_close(k);
	harness_stop();
}
END_TEST

int main(void)
{
	Suite *s;

	if (nvcc() == NULL || access(nvcc(), X_OK) != 0) {
		printf("SKIP: no nvcc (the CUDA toolkit; meson looks in -Dcudatoolkit=DIR/bin)\n");
		return 77;
	}
	snprintf(tc_arg, sizeof(tc_arg), "nvcc=%s", nvcc());
	s = suite_create("cuda");
	suite_add_tcase(s, harness_tcase("outputs", gpu_outputs_for_an_explicit_arch, 240));
	suite_add_tcase(s, harness_tcase("arch_key", daemon_arch_is_in_the_key, 240));
	suite_add_tcase(s, harness_tcase("cpp_cu", cpp_and_cu_link_into_one_library, 240));
	suite_add_tcase(s, harness_tcase("host_cpp", cpp_compiled_by_the_host_compiler, 240));
	suite_add_tcase(s, harness_tcase("no_driver", no_driver_no_arch_and_compile_errors, 240));
	return harness_main(s);
}
