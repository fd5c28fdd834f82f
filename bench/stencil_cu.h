/*
 * The generated GPU program of the benchmarks and it_gpu: KERNELS stencil
 * kernels of ~540 bytes of .cu each (75 make the reference workload's
 * ~40 KB), with coefficients that depend on the program number. Program 0's
 * text is the one it_gpu has always timed. Returns malloc'd text or NULL.
 */
#ifndef KILN_BENCH_STENCIL_CU_H
#define KILN_BENCH_STENCIL_CU_H

#include <stdio.h>
#include <stdlib.h>

static inline char *stencil_cu_text(int program, int kernels, size_t extra)
{
	size_t cap = (size_t)kernels * 1024 + 1024 + extra, off = 0;
	char *s = malloc(cap);

	if (s == NULL)
		return NULL;
	s[0] = '\0';
	for (int k = 0; k < kernels; k++)
		off += (size_t)snprintf(s + off, cap - off,
			"extern \"C\" __global__ void stencil_%d(int nx, int ny, int nz,\n"
			"\tconst double *__restrict__ in, double *__restrict__ out)\n"
			"{\n"
			"\tint i = blockIdx.x * blockDim.x + threadIdx.x + 1;\n"
			"\tint j = blockIdx.y * blockDim.y + threadIdx.y + 1;\n"
			"\tif (i >= nx - 1 || j >= ny - 1)\n"
			"\t\treturn;\n"
			"\tfor (int k = 1; k < nz - 1; k++) {\n"
			"\t\tlong c = ((long)k * ny + j) * nx + i;\n"
			"\t\tdouble v = %d.0 * in[c] - in[c - 1] - in[c + 1] - in[c - nx] - in[c + nx]\n"
			"\t\t\t- in[c - (long)nx * ny] - in[c + (long)nx * ny];\n"
			"\t\tout[c] = v * %g + sqrt(fabs(in[c])) * %g;\n"
			"\t}\n"
			"}\n\n", k, 6 + (program + k) % 5, 0.5 + program * 0.001 + k * 0.01,
			0.25 / (k + 1));
	return s;
}

#endif
