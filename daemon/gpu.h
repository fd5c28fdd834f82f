/*
 * GPU detection through the CUDA driver API, and the architectures nvcc
 * builds for when a request names none.
 */
#ifndef KILN_DAEMON_GPU_H
#define KILN_DAEMON_GPU_H

#include <stddef.h>

#define GPU_MAX 64

struct gpu {
	int index;
	char name[128];
	int major, minor;      /* compute capability */
};

struct gpus {
	struct gpu dev[GPU_MAX];
	size_t n;
	int driver_version;    /* cuDriverGetVersion, e.g. 12040; 0 when unknown */
	char note[256];        /* why there are none, when n == 0 */
};

/*
 * Asks the driver (libcuda.so.1, loaded at run time) for the node's GPUs, in
 * a child process with a time limit, so that kilnd neither links against
 * the driver nor keeps its threads and memory, and a broken driver cannot
 * hang or crash the daemon. Without a driver or a GPU, out->n is 0 and
 * out->note says why.
 */
void gpu_detect(struct gpus *out);

/*
 * The architecture list for nvcc requests that name none: cuda_arch (from
 * --cuda-arch) when given, else the detected GPUs' ("sm_80,sm_90", sorted,
 * unique). NULL when there is neither (malloc'd otherwise).
 */
char *gpu_arch_list(const struct gpus *g, const char *cuda_arch);

/* Checks a --cuda-arch value: comma-separated sm_XY (or XY); 0 or -1. */
int gpu_arch_parse(const char *s, char **normalized);

#endif
