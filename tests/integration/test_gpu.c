/*
 * The GPU test: a saxpy kernel got through kiln as a cubin (and as fatbin
 * and ptx), loaded with libkiln-cuda, launched, and its result checked; a
 * host .cpp and a .cu linked into one shared library that launches its
 * kernel through the CUDA runtime, called and checked; then
 * cold (nvcc) against warm (from the cache) for a stencil program of the
 * reference workload's size. Needs a CUDA driver and a GPU: otherwise it
 * skips (77) and says why. The driver is opened with dlopen, so the test
 * also builds and starts where there is none.
 *
 * KILN_GPU_RESULTS=FILE appends the figures to FILE.
 */
#include "harness.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef KILN_HAVE_CUDA
#include <kiln/kiln_cuda.h>

#include "stencil_cu.h"

#define N (1 << 20)


/* The driver calls the test makes itself. */
static struct {
	void *lib;
	CUresult (*init)(unsigned);
	CUresult (*count)(int *);
	CUresult (*device_get)(CUdevice *, int);
	CUresult (*name)(char *, int, CUdevice);
	CUresult (*version)(int *);
	CUresult (*retain)(CUcontext *, CUdevice);
	CUresult (*set_current)(CUcontext);
	CUresult (*mem_alloc)(CUdeviceptr *, size_t);
	CUresult (*mem_free)(CUdeviceptr);
	CUresult (*htod)(CUdeviceptr, const void *, size_t);
	CUresult (*dtoh)(void *, CUdeviceptr, size_t);
	CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			   unsigned, CUstream, void **, void **);
	CUresult (*sync)(void);
} cu;

static const char *driver_open(void)
{
	static char why[512];

	cu.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (cu.lib == NULL) {
		snprintf(why, sizeof(why), "no CUDA driver (%s)", dlerror());
		return why;
	}
	*(void **)&cu.init = dlsym(cu.lib, "cuInit");
	*(void **)&cu.count = dlsym(cu.lib, "cuDeviceGetCount");
	*(void **)&cu.device_get = dlsym(cu.lib, "cuDeviceGet");
	*(void **)&cu.name = dlsym(cu.lib, "cuDeviceGetName");
	*(void **)&cu.version = dlsym(cu.lib, "cuDriverGetVersion");
	*(void **)&cu.retain = dlsym(cu.lib, "cuDevicePrimaryCtxRetain");
	*(void **)&cu.set_current = dlsym(cu.lib, "cuCtxSetCurrent");
	*(void **)&cu.mem_alloc = dlsym(cu.lib, "cuMemAlloc_v2");
	*(void **)&cu.mem_free = dlsym(cu.lib, "cuMemFree_v2");
	*(void **)&cu.htod = dlsym(cu.lib, "cuMemcpyHtoD_v2");
	*(void **)&cu.dtoh = dlsym(cu.lib, "cuMemcpyDtoH_v2");
	*(void **)&cu.launch = dlsym(cu.lib, "cuLaunchKernel");
	*(void **)&cu.sync = dlsym(cu.lib, "cuCtxSynchronize");
	if (!cu.init || !cu.count || !cu.device_get || !cu.retain || !cu.set_current ||
	    !cu.mem_alloc || !cu.mem_free || !cu.htod || !cu.dtoh || !cu.launch || !cu.sync ||
	    !cu.name || !cu.version)
		return "libcuda.so.1 lacks a driver API function";
	/* Asked in a child: the driver does not survive fork(), and each test
	 * runs in a process Check forks from this one, so this process must
	 * never initialise it. */
	pid_t pid = fork();
	if (pid == 0) {
		int n = 0;
		_exit(cu.init(0) == CUDA_SUCCESS && cu.count(&n) == CUDA_SUCCESS && n > 0 ? 0 : 1);
	}
	int status = 0;
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0)
		return "the CUDA driver reports no usable GPU";
	return NULL;
}

static void make_current(void)
{
	CUdevice dev;
	CUcontext ctx;

	ck_assert_int_eq(cu.init(0), CUDA_SUCCESS);
	ck_assert_int_eq(cu.device_get(&dev, 0), CUDA_SUCCESS);
	ck_assert_int_eq(cu.retain(&ctx, dev), CUDA_SUCCESS);
	ck_assert_int_eq(cu.set_current(ctx), CUDA_SUCCESS);
}

static void start(void)
{
	static char tc[HARNESS_PATH + 16];
	const char *args[] = { "--toolchain", tc, NULL };

	snprintf(tc, sizeof(tc), "nvcc=%s", getenv("KILN_TEST_NVCC"));
	harness_startv(args);
}

/* Runs saxpy from p on N elements and checks every result. */
static void run_saxpy(struct kiln_program *p)
{
	static float x[N], y[N];
	CUdeviceptr dx, dy;
	CUfunction f, again;
	int n = N;
	float a = 2.0f;
	void *params[] = { &n, &a, &dx, &dy };

	ck_assert_msg(kiln_cuda_function(p, "saxpy", &f) == KILN_OK, "%s", kiln_errmsg(NULL));
	ck_assert_int_eq(kiln_cuda_function(p, "saxpy", &again), KILN_OK);
	ck_assert_ptr_eq(f, again);
	ck_assert_int_eq(kiln_cuda_function(p, "no_such_kernel", &again), KILN_ENOTFOUND);
	for (int i = 0; i < N; i++) {
		x[i] = (float)i;
		y[i] = 1.0f;
	}
	ck_assert_int_eq(cu.mem_alloc(&dx, sizeof(x)), CUDA_SUCCESS);
	ck_assert_int_eq(cu.mem_alloc(&dy, sizeof(y)), CUDA_SUCCESS);
	ck_assert_int_eq(cu.htod(dx, x, sizeof(x)), CUDA_SUCCESS);
	ck_assert_int_eq(cu.htod(dy, y, sizeof(y)), CUDA_SUCCESS);
	ck_assert_int_eq(cu.launch(f, (N + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, params, NULL),
			 CUDA_SUCCESS);
	ck_assert_int_eq(cu.sync(), CUDA_SUCCESS);
	ck_assert_int_eq(cu.dtoh(y, dy, sizeof(y)), CUDA_SUCCESS);
	for (int i = 0; i < N; i++)
		ck_assert_msg(y[i] == 2.0f * (float)i + 1.0f, "y[%d] = %g", i, (double)y[i]);
	cu.mem_free(dx);
	cu.mem_free(dy);
}

START_TEST(saxpy_through_kiln)
{
	static const char *const outputs[] = { "cubin", "fatbin", "ptx" };
	char *text = harness_data_file("saxpy.cu");
	struct kiln_source src = { .name = "saxpy.cu", .text = text };
	struct kiln *k;
	cJSON *st;

	start();
	st = harness_status();
	ck_assert_int_ge(cJSON_GetArraySize(cJSON_GetObjectItem(st, "gpus")), 1);
	cJSON_Delete(st);
	make_current();
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	for (size_t i = 0; i < 3; i++) {
		struct kiln_request req = { .toolchain = "nvcc", .output = outputs[i],
					    .sources = &src, .nsources = 1 };
		struct kiln_program *p;
		CUmodule m1, m2;

		ck_assert_msg(kiln_get(k, &req, &p) == KILN_OK, "%s: %s", outputs[i], kiln_errmsg(k));
		ck_assert_int_eq(kiln_cuda_module(p, &m1), KILN_OK);
		ck_assert_int_eq(kiln_cuda_module(p, &m2), KILN_OK);
		ck_assert_ptr_eq(m1, m2);
		run_saxpy(p);
	}
	kiln_close(k);
	harness_stop();
	free(text);
}
END_TEST

/* The form DaCe and GT4Py build: a host .cpp and a .cu linked by nvcc into
 * one shared library that launches its kernel through the CUDA runtime;
 * loaded with kiln_get, called through kiln_sym, its result checked. */
START_TEST(shared_library_launches)
{
	static const char prog_cpp[] =
		"#include \"kernels.h\"\n"
		"extern \"C\" int program_run(int n, float a, float *y) { return run_scale(n, a, y); }\n";
	static const char kernels_cu[] =
		"#include \"kernels.h\"\n"
		"__global__ void scale(int n, float a, float *y)\n"
		"{\n"
		"\tint i = blockIdx.x * blockDim.x + threadIdx.x;\n"
		"\tif (i < n) y[i] = a * y[i] + (float)i;\n"
		"}\n"
		"int run_scale(int n, float a, float *y)\n"
		"{\n"
		"\tfloat *d;\n"
		"\tif (cudaMalloc(&d, n * sizeof(float)) != cudaSuccess) return 1;\n"
		"\tcudaMemcpy(d, y, n * sizeof(float), cudaMemcpyHostToDevice);\n"
		"\tscale<<<(n + 255) / 256, 256>>>(n, a, d);\n"
		"\tif (cudaDeviceSynchronize() != cudaSuccess) return 2;\n"
		"\tcudaMemcpy(y, d, n * sizeof(float), cudaMemcpyDeviceToHost);\n"
		"\tcudaFree(d);\n"
		"\treturn cudaGetLastError() == cudaSuccess ? 0 : 3;\n"
		"}\n";
	static const char kernels_h[] = "int run_scale(int n, float a, float *y);\n";
	struct kiln_source srcs[] = {
		{ .name = "program.cpp", .text = prog_cpp },
		{ .name = "kernels.cu", .text = kernels_cu },
		{ .name = "kernels.h", .text = kernels_h },
	};
	struct kiln_request req = { .toolchain = "nvcc", .sources = srcs, .nsources = 3 };
	struct kiln_program *p;
	int (*run)(int, float, float *);
	static float y[N];
	struct kiln *k;

	start();
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	ck_assert_msg(kiln_get(k, &req, &p) == KILN_OK, "%s", kiln_errmsg(k));
	ck_assert_str_eq(kiln_program_output(p), "shared");
	*(void **)&run = kiln_sym(p, "program_run");
	ck_assert_ptr_nonnull(run);
	for (int i = 0; i < N; i++)
		y[i] = 1.0f;
	ck_assert_int_eq(run(N, 3.0f, y), 0);
	for (int i = 0; i < N; i++)
		ck_assert_msg(y[i] == 3.0f + (float)i, "y[%d] = %g", i, (double)y[i]);
	kiln_close(k);
	harness_stop();
}
END_TEST

START_TEST(cold_and_warm)
{
	char *text = stencil_cu_text(0, 60, 0);
	struct kiln_source src = { .name = "stencils.cu", .text = text };
	struct kiln_request req = { .toolchain = "nvcc", .output = "cubin", .sources = &src,
				    .nsources = 1 };
	struct kiln_program *p;
	struct kiln *k;
	CUmodule m;
	double t0, cold, warm = 1e9;
	const char *out = getenv("KILN_GPU_RESULTS");
	char name[128] = "";
	int driver = 0;
	CUdevice dev;

	start();
	make_current();
	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	t0 = harness_now_s();
	ck_assert_msg(kiln_get(k, &req, &p) == KILN_OK, "%s", kiln_errmsg(k));
	ck_assert_int_eq(kiln_cuda_module(p, &m), KILN_OK);
	cold = harness_now_s() - t0;
	kiln_close(k);
	/* Warm: a new handle each time, so the daemon is asked and the module
	 * loaded again, as in a new process; best of 5. */
	for (int i = 0; i < 5; i++) {
		ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
		t0 = harness_now_s();
		ck_assert_int_eq(kiln_get(k, &req, &p), KILN_OK);
		ck_assert_int_eq(kiln_cuda_module(p, &m), KILN_OK);
		if (harness_now_s() - t0 < warm)
			warm = harness_now_s() - t0;
		kiln_close(k);
	}
	cu.device_get(&dev, 0);
	cu.name(name, sizeof(name), dev);
	cu.version(&driver);
	printf("GPU %s, driver %d: %zu-byte .cu, cold (nvcc + load) %.3f s, warm (cache + load) "
	       "%.4f s, %.0fx\n", name, driver, strlen(text), cold, warm, cold / warm);
	if (out != NULL) {
		FILE *fp = fopen(out, "a");

		if (fp != NULL) {
			fprintf(fp, "gpu=\"%s\" driver=%d cu_bytes=%zu cold_s=%.3f warm_s=%.4f\n", name,
				driver, strlen(text), cold, warm);
			fclose(fp);
		}
	}
	harness_stop();
	free(text);
}
END_TEST

int main(void)
{
	Suite *s;
	const char *why;

	if (getenv("KILN_TEST_NVCC") == NULL) {
		printf("SKIP: no nvcc\n");
		return 77;
	}
	if ((why = driver_open()) != NULL) {
		printf("SKIP: %s; run this on a machine with an NVIDIA GPU (docs/cuda.md)\n", why);
		return 77;
	}
	s = suite_create("gpu");
	suite_add_tcase(s, harness_tcase("saxpy", saxpy_through_kiln, 300));
	suite_add_tcase(s, harness_tcase("shared", shared_library_launches, 300));
	suite_add_tcase(s, harness_tcase("cold_warm", cold_and_warm, 600));
	return harness_main(s);
}
#else
int main(void)
{
	printf("SKIP: libkiln-cuda is not built (no cuda.h; see -Dcudatoolkit)\n");
	return 77;
}
#endif
