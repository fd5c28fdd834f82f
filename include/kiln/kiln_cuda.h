/*
 * libkiln-cuda: GPU programs built by kilnd (output "cubin", "fatbin" or
 * "ptx") loaded as CUDA driver-API modules. A separate library, so that
 * libkiln needs no CUDA; it loads the driver (libcuda.so.1) at run time, so
 * a program linked with it also starts on nodes without one.
 *
 * Link with -lkiln-cuda -lkiln (pkg-config kiln-cuda). Thread-safe.
 */
#ifndef KILN_CUDA_H
#define KILN_CUDA_H

#include <cuda.h>

#include <kiln/kiln.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The module of p (a GPU output got with kiln_get or kiln_lookup) in the
 * calling thread's current CUDA context, loaded with cuModuleLoadData the
 * first time, a process-local cache hit afterwards. Returns KILN_OK, or
 * KILN_EINVAL (p is a shared library, or there is no current context),
 * KILN_ECUDA (no driver, or the driver refused the image: the driver's error
 * name and text are in kiln_errmsg).
 */
int kiln_cuda_module(struct kiln_program *p, CUmodule *out);

/* The kernel name of p's module in the current context (cached); also
 * KILN_ENOTFOUND when the module has no such function. */
int kiln_cuda_function(struct kiln_program *p, const char *name, CUfunction *out);

#ifdef __cplusplus
}
#endif

#endif
