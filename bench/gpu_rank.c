/*
 * The GPU node benchmark's client processes (bench/gpu drives it; see
 * docs/performance.md, "GPU node: ranks against kiln").
 *
 *   gpu_rank MODE PROCS PROGRAMS KERNELS DIR [SOCKET]
 *
 * Forks PROCS processes that start at one instant (a pipe closed under
 * them). Each initialises the CUDA driver in its own primary context, makes
 * PROGRAMS modules ready, then launches a check kernel of each and compares
 * every element with the value computed here. Programs are stencil .cu files
 * of KERNELS kernels (~540 bytes each: 75 make the reference workload's
 * ~40 KB) plus check_<i>, whose name and constants belong to program i alone,
 * so a module of another program fails the check.
 *
 * MODE is how a process gets its modules:
 *   kiln  kiln_get_many (output cubin) from kilnd at SOCKET, then
 *         kiln_cuda_module of each;
 *   self  the status quo: one program after another, writes DIR/rank<r>/p<i>.cu, runs nvcc -cubin for
 *         the device's architecture, cuModuleLoad of the result;
 *   bare  cuModuleLoad of DIR/rank0/p<i>.cubin (left by a self run): the
 *         warm limit, no kiln and no compiler.
 *
 * Prints one line per process ("rank R ctx_s X ready_s Y check ok"), then
 * "wall_s W ready_max_s M ready_median_s D nvcc_runs N failed F load_max_s L
 * load_median_s E" (ready: from the start to every module loaded; load: the
 * same after the CUDA context was made).
 * Exit status 0 only if every process checked every program.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <kiln/kiln.h>
#include <kiln/kiln_cuda.h>

#include "stencil_cu.h"

#define CHECK_N 4096

static struct {
	CUresult (*init)(unsigned);
	CUresult (*device_get)(CUdevice *, int);
	CUresult (*attr)(int *, CUdevice_attribute, CUdevice);
	CUresult (*retain)(CUcontext *, CUdevice);
	CUresult (*set_current)(CUcontext);
	CUresult (*load)(CUmodule *, const char *);
	CUresult (*function)(CUfunction *, CUmodule, const char *);
	CUresult (*mem_alloc)(CUdeviceptr *, size_t);
	CUresult (*htod)(CUdeviceptr, const void *, size_t);
	CUresult (*dtoh)(void *, CUdeviceptr, size_t);
	CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			   unsigned, CUstream, void **, void **);
	CUresult (*sync)(void);
} cu;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int driver_open(void)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL)
		return -1;
	*(void **)&cu.init = dlsym(lib, "cuInit");
	*(void **)&cu.device_get = dlsym(lib, "cuDeviceGet");
	*(void **)&cu.attr = dlsym(lib, "cuDeviceGetAttribute");
	*(void **)&cu.retain = dlsym(lib, "cuDevicePrimaryCtxRetain");
	*(void **)&cu.set_current = dlsym(lib, "cuCtxSetCurrent");
	*(void **)&cu.load = dlsym(lib, "cuModuleLoad");
	*(void **)&cu.function = dlsym(lib, "cuModuleGetFunction");
	*(void **)&cu.mem_alloc = dlsym(lib, "cuMemAlloc_v2");
	*(void **)&cu.htod = dlsym(lib, "cuMemcpyHtoD_v2");
	*(void **)&cu.dtoh = dlsym(lib, "cuMemcpyDtoH_v2");
	*(void **)&cu.launch = dlsym(lib, "cuLaunchKernel");
	*(void **)&cu.sync = dlsym(lib, "cuCtxSynchronize");
	return cu.init && cu.device_get && cu.attr && cu.retain && cu.set_current && cu.load &&
			       cu.function && cu.mem_alloc && cu.htod && cu.dtoh && cu.launch &&
			       cu.sync
		       ? 0
		       : -1;
}

/* Program i's source: KERNELS stencils and check_<i>. */
static char *program_text(int i, int kernels)
{
	char *s = stencil_cu_text(i, kernels, 512);
	size_t off;

	if (s == NULL)
		return NULL;
	off = strlen(s);
	snprintf(s + off, 512,
		 "extern \"C\" __global__ void check_%d(int n, const double *in, double *out)\n"
		 "{\n"
		 "\tint t = blockIdx.x * blockDim.x + threadIdx.x;\n"
		 "\tif (t < n)\n"
		 "\t\tout[t] = in[t] * %d.0 + %d.0;\n"
		 "}\n", i, i + 2, i);
	return s;
}

static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (f == NULL)
		return -1;
	int rc = fputs(text, f) < 0 ? -1 : 0;
	return fclose(f) != 0 ? -1 : rc;
}

struct opts {
	const char *mode, *dir, *socket, *nvcc;
	int procs, programs, kernels;
};

/* kiln: every program asked at once (kiln_get_many, so kilnd builds the
 * missing ones in parallel), then each loaded as a module. */
static int kiln_modules(const struct opts *o, struct kiln *k, int rank, CUmodule *mods)
{
	size_t n = (size_t)o->programs;
	struct kiln_source *src = calloc(n, sizeof(*src));
	struct kiln_request *req = calloc(n, sizeof(*req));
	struct kiln_program **p = calloc(n, sizeof(*p));
	char (*names)[32] = calloc(n, sizeof(*names));
	int rc = -1;

	if (src == NULL || req == NULL || p == NULL || names == NULL)
		goto out;
	for (size_t i = 0; i < n; i++) {
		snprintf(names[i], sizeof(names[i]), "p%zu.cu", i);
		src[i] = (struct kiln_source){ .name = names[i],
					       .text = program_text((int)i, o->kernels) };
		req[i] = (struct kiln_request){ .toolchain = "nvcc", .output = "cubin",
						.sources = &src[i], .nsources = 1 };
	}
	if (kiln_get_many(k, req, n, p, NULL) != KILN_OK) {
		fprintf(stderr, "rank %d: %s\n", rank, kiln_errmsg(k));
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		if (kiln_cuda_module(p[i], &mods[i]) != KILN_OK) {
			fprintf(stderr, "rank %d: p%zu: %s\n", rank, i, kiln_errmsg(NULL));
			goto out;
		}
	rc = 0;
out:
	for (size_t i = 0; src != NULL && i < n; i++)
		free((char *)src[i].text);
	free(src);
	free(req);
	free(p);
	free(names);
	return rc;
}

/* self or bare: program i's module in the current context. */
static int get_module(const struct opts *o, int rank, int i, int arch, CUmodule *m,
		      int *nvcc_runs)
{
	char path[4096], cmd[8192];

	if (strcmp(o->mode, "self") == 0) {
		char *text = program_text(i, o->kernels);
		snprintf(path, sizeof(path), "%s/rank%d/p%d.cu", o->dir, rank, i);
		int rc = text == NULL ? -1 : write_file(path, text);
		free(text);
		if (rc != 0)
			return -1;
		snprintf(cmd, sizeof(cmd), "'%s' -cubin -arch=sm_%d -o '%s/rank%d/p%d.cubin' '%s'",
			 o->nvcc, arch, o->dir, rank, i, path);
		(*nvcc_runs)++;
		if (system(cmd) != 0) {
			fprintf(stderr, "rank %d: %s failed\n", rank, cmd);
			return -1;
		}
		snprintf(path, sizeof(path), "%s/rank%d/p%d.cubin", o->dir, rank, i);
	} else {
		snprintf(path, sizeof(path), "%s/rank0/p%d.cubin", o->dir, i);
	}
	CUresult r = cu.load(m, path);
	if (r != CUDA_SUCCESS)
		fprintf(stderr, "rank %d: cuModuleLoad %s: error %d\n", rank, path, (int)r);
	return r == CUDA_SUCCESS ? 0 : -1;
}

/* Launches check_<i> of module m and compares every element. */
static int check(CUmodule m, int i, CUdeviceptr din, CUdeviceptr dout, const double *in)
{
	static double out[CHECK_N];
	char name[32];
	CUfunction f;
	int n = CHECK_N;
	void *params[] = { &n, &din, &dout };

	snprintf(name, sizeof(name), "check_%d", i);
	if (cu.function(&f, m, name) != CUDA_SUCCESS ||
	    cu.launch(f, (CHECK_N + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, params, NULL) !=
		    CUDA_SUCCESS ||
	    cu.sync() != CUDA_SUCCESS || cu.dtoh(out, dout, sizeof(out)) != CUDA_SUCCESS)
		return -1;
	for (int t = 0; t < CHECK_N; t++)
		if (out[t] != in[t] * (i + 2) + i)
			return -1;
	return 0;
}

/* One process: returns its exit status; prints its line. */
static int rank_main(const struct opts *o, int rank, int barrier)
{
	char c, path[4096];
	CUdevice dev;
	CUcontext ctx;
	struct kiln *k = NULL;
	int major = 0, minor = 0, nvcc_runs = 0;
	CUmodule *mods = calloc((size_t)o->programs, sizeof(*mods));
	static double in[CHECK_N];
	CUdeviceptr din, dout;

	if (read(barrier, &c, 1) < 0 || mods == NULL)
		return 1;
	double t0 = now_s();
	if (cu.init(0) != CUDA_SUCCESS || cu.device_get(&dev, 0) != CUDA_SUCCESS ||
	    cu.retain(&ctx, dev) != CUDA_SUCCESS || cu.set_current(ctx) != CUDA_SUCCESS) {
		fprintf(stderr, "rank %d: no CUDA context\n", rank);
		return 1;
	}
	cu.attr(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
	cu.attr(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
	double t_ctx = now_s();
	if (strcmp(o->mode, "kiln") == 0 && kiln_open(o->socket, &k) != KILN_OK) {
		fprintf(stderr, "rank %d: %s\n", rank, kiln_errmsg(NULL));
		return 1;
	}
	if (strcmp(o->mode, "self") == 0) {
		snprintf(path, sizeof(path), "%s/rank%d", o->dir, rank);
		if (mkdir(path, 0700) != 0 && errno != EEXIST)
			return 1;
	}
	if (k != NULL) {
		if (kiln_modules(o, k, rank, mods) != 0)
			return 1;
	} else {
		for (int i = 0; i < o->programs; i++)
			if (get_module(o, rank, i, major * 10 + minor, &mods[i], &nvcc_runs) != 0)
				return 1;
	}
	double t_ready = now_s();
	for (int t = 0; t < CHECK_N; t++)
		in[t] = t * 0.5 + rank;
	if (cu.mem_alloc(&din, sizeof(in)) != CUDA_SUCCESS ||
	    cu.mem_alloc(&dout, sizeof(in)) != CUDA_SUCCESS ||
	    cu.htod(din, in, sizeof(in)) != CUDA_SUCCESS)
		return 1;
	int bad = 0;
	for (int i = 0; i < o->programs; i++)
		if (check(mods[i], i, din, dout, in) != 0) {
			fprintf(stderr, "rank %d: program %d failed its check\n", rank, i);
			bad++;
		}
	printf("rank %d ctx_s %.4f ready_s %.4f nvcc_runs %d check %s\n", rank, t_ctx - t0,
	       t_ready - t0, nvcc_runs, bad ? "FAILED" : "ok");
	fflush(stdout);
	if (k != NULL)
		kiln_close(k);
	return bad ? 1 : 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	struct opts o = { 0 };
	int fds[2], out[2];

	if (argc < 6) {
		fprintf(stderr, "usage: gpu_rank kiln|self|bare PROCS PROGRAMS KERNELS DIR [SOCKET]\n");
		return 2;
	}
	o.mode = argv[1];
	o.procs = atoi(argv[2]);
	o.programs = atoi(argv[3]);
	o.kernels = atoi(argv[4]);
	o.dir = argv[5];
	o.socket = argc > 6 ? argv[6] : NULL;
	o.nvcc = getenv("NVCC") ? getenv("NVCC") : "nvcc";
	if (o.procs < 1 || o.programs < 1 || o.kernels < 0 ||
	    (strcmp(o.mode, "kiln") == 0 && o.socket == NULL) ||
	    (strcmp(o.mode, "kiln") != 0 && strcmp(o.mode, "self") != 0 &&
	     strcmp(o.mode, "bare") != 0)) {
		fprintf(stderr, "gpu_rank: bad arguments (see the comment at the top of bench/gpu_rank.c)\n");
		return 2;
	}
	if (driver_open() != 0) {
		fprintf(stderr, "gpu_rank: no CUDA driver\n");
		return 77;
	}
	/* Children report through a pipe; the barrier pipe's write end is
	 * closed once all are forked, so all start at once. */
	if (pipe(fds) != 0 || pipe(out) != 0)
		return 1;
	pid_t *pids = calloc((size_t)o.procs, sizeof(*pids));
	for (int r = 0; r < o.procs; r++) {
		pids[r] = fork();
		if (pids[r] == 0) {
			close(fds[1]);
			close(out[0]);
			dup2(out[1], 1);
			_exit(rank_main(&o, r, fds[0]));
		}
	}
	close(fds[0]);
	close(out[1]);
	double t0 = now_s();
	close(fds[1]);
	int failed = 0;
	for (int r = 0; r < o.procs; r++) {
		int st;
		if (waitpid(pids[r], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			failed++;
	}
	double wall = now_s() - t0;
	FILE *f = fdopen(out[0], "r");
	char line[512];
	double *ready = calloc((size_t)o.procs, sizeof(*ready));
	double *load = calloc((size_t)o.procs, sizeof(*load));
	int n = 0, nvcc = 0;
	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		int r, runs;
		double cs, rs;
		fputs(line, stdout);
		if (sscanf(line, "rank %d ctx_s %lf ready_s %lf nvcc_runs %d", &r, &cs, &rs, &runs) ==
			    4 &&
		    n < o.procs) {
			load[n] = rs - cs;
			ready[n++] = rs;
			nvcc += runs;
		}
	}
	qsort(ready, (size_t)n, sizeof(*ready), cmp_double);
	qsort(load, (size_t)n, sizeof(*load), cmp_double);
	printf("wall_s %.3f ready_max_s %.4f ready_median_s %.4f nvcc_runs %d failed %d "
	       "load_max_s %.4f load_median_s %.4f\n",
	       wall, n ? ready[n - 1] : NAN, n ? ready[n / 2] : NAN, nvcc, failed + (o.procs - n),
	       n ? load[n - 1] : NAN, n ? load[n / 2] : NAN);
	return failed || n != o.procs ? 1 : 0;
}
