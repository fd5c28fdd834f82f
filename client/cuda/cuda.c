/*
 * libkiln-cuda. The driver is opened with dlopen once per process; modules
 * and functions are cached by (program, context[, name]) in one table under
 * one lock, since loads are rare and lookups short.
 *
 * cuModuleLoadData rather than cuLibraryLoadData: a module belongs to the
 * context it is loaded in, which is what GT4Py's and DaCe's generated code
 * uses (the current context of the calling thread), and it works with
 * every driver the toolkit supports; context-independent libraries need a
 * 12.0 driver. With a module cache per context, a process that switches
 * contexts still loads each program once per context.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kiln/kiln_cuda.h>

#include "kiln_x.h"
#include "table.h"

struct driver {
	void *lib;
	CUresult (*ctx_get_current)(CUcontext *);
	CUresult (*module_load_data)(CUmodule *, const void *);
	CUresult (*module_get_function)(CUfunction *, CUmodule, const char *);
	CUresult (*error_name)(CUresult, const char **);
	CUresult (*error_string)(CUresult, const char **);
	char why[512];   /* why it could not be loaded, when lib is NULL */
};

static struct driver drv;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct table *cache;   /* "P:CTX" -> CUmodule, "P:CTX:NAME" -> CUfunction */

static void *sym(const char *name)
{
	void *f = dlsym(drv.lib, name);
	if (f == NULL && drv.why[0] == '\0')
		snprintf(drv.why, sizeof(drv.why), "libcuda.so.1 has no %s", name);
	return f;
}

static void driver_open(void)
{
	drv.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (drv.lib == NULL) {
		const char *e = dlerror();
		snprintf(drv.why, sizeof(drv.why), "cannot load the CUDA driver: %s",
			 e != NULL ? e : "libcuda.so.1 not found");
		return;
	}
	*(void **)&drv.ctx_get_current = sym("cuCtxGetCurrent");
	*(void **)&drv.module_load_data = sym("cuModuleLoadData");
	*(void **)&drv.module_get_function = sym("cuModuleGetFunction");
	*(void **)&drv.error_name = sym("cuGetErrorName");
	*(void **)&drv.error_string = sym("cuGetErrorString");
	if (drv.why[0] != '\0') {
		dlclose(drv.lib);
		drv.lib = NULL;
	}
}

static int driver(void)
{
	pthread_once(&drv_once, driver_open);
	return drv.lib != NULL ? 0 : kiln_x_fail(KILN_ECUDA, "%s", drv.why);
}

/* KILN_ECUDA with the driver's name and text for rc, after what. */
static int cuda_fail(CUresult rc, const char *what, const struct kiln_program *p)
{
	const char *name = NULL, *text = NULL;
	drv.error_name(rc, &name);
	drv.error_string(rc, &text);
	return kiln_x_fail(KILN_ECUDA, "%s (program %s): %s: %s", what, kiln_program_key(p),
			   name != NULL ? name : "CUDA error", text != NULL ? text : "unknown");
}

/* The module of p in ctx; the caller holds cache_lock. */
static int module_locked(struct kiln_program *p, CUcontext ctx, CUmodule *out)
{
	char key[64];
	snprintf(key, sizeof(key), "%p:%p", (void *)p, (void *)ctx);
	CUmodule m = table_get(cache, key);
	if (m != NULL) {
		*out = m;
		return KILN_OK;
	}
	size_t size;
	const void *data = kiln_program_data(p, &size);
	if (data == NULL)
		return kiln_x_fail(KILN_EINVAL, "program %s is a %s, not a GPU output (cubin, fatbin "
				   "or ptx): use kiln_sym", kiln_program_key(p), kiln_program_output(p));
	CUresult rc = drv.module_load_data(&m, data);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(rc, "cuModuleLoadData failed", p);
	if (table_put(cache, key, m, NULL) != 0)
		return kiln_x_fail(KILN_ENOMEM, "out of memory");
	*out = m;
	return KILN_OK;
}

static int current_context(const struct kiln_program *p, CUcontext *ctx)
{
	CUresult rc = drv.ctx_get_current(ctx);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(rc, "cuCtxGetCurrent failed", p);
	if (*ctx == NULL)
		return kiln_x_fail(KILN_EINVAL, "no current CUDA context in this thread: create or "
				   "retain one (cuCtxCreate, cuDevicePrimaryCtxRetain + cuCtxSetCurrent) "
				   "before loading program %s", kiln_program_key(p));
	return KILN_OK;
}

static int lock_cache(void)
{
	pthread_mutex_lock(&cache_lock);
	if (cache == NULL && (cache = table_new()) == NULL) {
		pthread_mutex_unlock(&cache_lock);
		return kiln_x_fail(KILN_ENOMEM, "out of memory");
	}
	return KILN_OK;
}

int kiln_cuda_module(struct kiln_program *p, CUmodule *out)
{
	CUcontext ctx;
	int rc;
	if (p == NULL || out == NULL)
		return kiln_x_fail(KILN_EINVAL, "kiln_cuda_module: program and out must not be NULL");
	if ((rc = driver()) != KILN_OK || (rc = current_context(p, &ctx)) != KILN_OK ||
	    (rc = lock_cache()) != KILN_OK)
		return rc;
	rc = module_locked(p, ctx, out);
	pthread_mutex_unlock(&cache_lock);
	return rc;
}

int kiln_cuda_function(struct kiln_program *p, const char *name, CUfunction *out)
{
	CUcontext ctx;
	CUmodule m;
	char key[64 + 256];
	int rc;
	if (p == NULL || name == NULL || out == NULL || strlen(name) > 255)
		return kiln_x_fail(KILN_EINVAL, "kiln_cuda_function: program, name (at most 255 "
				   "bytes) and out must be given");
	if ((rc = driver()) != KILN_OK || (rc = current_context(p, &ctx)) != KILN_OK ||
	    (rc = lock_cache()) != KILN_OK)
		return rc;
	snprintf(key, sizeof(key), "%p:%p:%s", (void *)p, (void *)ctx, name);
	CUfunction f = table_get(cache, key);
	if (f == NULL && (rc = module_locked(p, ctx, &m)) == KILN_OK) {
		CUresult cr = drv.module_get_function(&f, m, name);
		if (cr == CUDA_ERROR_NOT_FOUND)
			rc = kiln_x_fail(KILN_ENOTFOUND, "program %s has no kernel \"%s\" (declare "
					 "it extern \"C\" to keep its name unmangled)",
					 kiln_program_key(p), name);
		else if (cr != CUDA_SUCCESS)
			rc = cuda_fail(cr, "cuModuleGetFunction failed", p);
		else if (table_put(cache, key, f, NULL) != 0)
			rc = kiln_x_fail(KILN_ENOMEM, "out of memory");
	}
	pthread_mutex_unlock(&cache_lock);
	if (rc == KILN_OK)
		*out = f;
	return rc;
}
