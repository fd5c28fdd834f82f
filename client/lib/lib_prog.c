/*
 * The process-local program table of libkiln: artifacts loaded in this
 * process by key, and the aliases that name them, so that a repeated lookup
 * of an alias is a hash-table hit without IPC. Also the loading itself, from
 * the path and descriptor that a reply carries.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib_internal.h"
#include "msg_artifact.h"
#include "table.h"
#include "validate.h"

static void prog_free(void *v)
{
	struct kiln_program *p = v;

	if (!p)
		return;
	/*
	 * A program loaded as /proc/self/fd/N is known to the dynamic loader
	 * by that name, and it matches objects by name before it looks at
	 * files: once N were closed and reused, a later dlopen of
	 * /proc/self/fd/N would return this object for another artifact. The
	 * mapping pins the file anyway, so its descriptor stays open for the
	 * life of the process.
	 */
	if (p->fd >= 0 && !p->fd_named)
		close(p->fd);
	free(p->path);
	free(p);
}

int lib_prog_init(struct kiln *k)
{
	k->by_key = table_new();
	if (!k->by_key || alias_map_init(&k->by_alias) != 0) {
		lib_prog_fini(k);
		return lib_err_set(KILN_ENOMEM, "out of memory");
	}
	return 0;
}

void lib_prog_fini(struct kiln *k)
{
	if (atomic_load(&k->by_alias.cur) != NULL)
		alias_map_fini(&k->by_alias);
	if (k->by_key)
		table_free(k->by_key, prog_free);
	k->by_key = NULL;
}

/* Takes a reference on p unless it has none (it is being released, or was):
 * that caller goes the slow way, which loads it again under load_lock. */
static bool prog_ref(struct kiln_program *p)
{
	int n = atomic_load_explicit(&p->refs, memory_order_relaxed);
	while (n > 0)
		if (atomic_compare_exchange_weak_explicit(&p->refs, &n, n + 1, memory_order_acquire,
							  memory_order_relaxed))
			return true;
	return false;
}

struct kiln_program *lib_prog_by_alias(struct kiln *k, const char *alias)
{
	struct kiln_program *p = alias_map_get(&k->by_alias, alias);
	return p != NULL && prog_ref(p) ? p : NULL;
}

/*
 * dlopens the artifact: by its real path when that still names the file the
 * descriptor holds (debuggers and profilers then show real names), else
 * through the descriptor, so that an eviction or replacement of the path
 * between the reply and this load cannot make it fail or load other code.
 */
static int prog_dlopen(struct kiln_program *p, const struct msg_file_id *file)
{
	struct stat fst, pst;
	struct msg_file_id held;
	char name[64];
	const char *why;

	/* kilnd's fstat of the descriptor it attached, when the reply says it
	 * (a hit's does): the same file, one system call fewer per load. */
	if (file != NULL && file->ino != 0) {
		held = *file;
	} else if (fstat(p->fd, &fst) == 0) {
		held = (struct msg_file_id){ .dev = (uint64_t)fst.st_dev, .ino = (uint64_t)fst.st_ino };
	} else {
		return lib_err_set(KILN_EIO, "could not stat the descriptor of %s: %s", p->path,
				   strerror(errno));
	}
	void *h = NULL;
	if (stat(p->path, &pst) == 0 && (uint64_t)pst.st_dev == held.dev &&
	    (uint64_t)pst.st_ino == held.ino)
		h = dlopen(p->path, RTLD_NOW | RTLD_LOCAL);
	/* Else, or when the path went away after the stat: the descriptor. */
	if (h == NULL) {
		snprintf(name, sizeof(name), "/proc/self/fd/%d", p->fd);
		h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
		p->fd_named = h != NULL;
	}
	if (h != NULL) {
		/* Published last: a thread holding p from kiln_get_file may read
		 * it in kiln_sym while another thread loads p. */
		__atomic_store_n(&p->handle, h, __ATOMIC_RELEASE);
		return 0;
	}
	why = dlerror();
	return lib_err_set(KILN_ELOAD, "could not load %s (key %s): %s", p->path, p->key,
			   why ? why : "unknown dlopen error");
}

/*
 * A GPU output (cubin, fatbin, ptx) is data for the CUDA driver, not a
 * library: it is mapped read-only from the descriptor, plus a NUL after the
 * end for PTX text (cuModuleLoadData reads PTX as a C string). The mapping
 * of the descriptor cannot change under us: objects are replaced by rename,
 * never rewritten.
 */
static int prog_map(struct kiln_program *p)
{
	struct stat st;
	if (fstat(p->fd, &st) < 0)
		return lib_err_set(KILN_EIO, "could not stat the descriptor of %s: %s", p->path,
				   strerror(errno));
	p->size = (size_t)st.st_size;
	/* One byte more than the file, zero-filled by mmap when the file does
	 * not end on a page boundary; a fresh page otherwise. */
	long page = sysconf(_SC_PAGESIZE);
	size_t len = p->size + 1;
	if (p->size % (size_t)page == 0) {
		char *buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (buf == MAP_FAILED || (p->size > 0 && pread(p->fd, buf, p->size, 0) != (ssize_t)p->size)) {
			if (buf != MAP_FAILED)
				munmap(buf, len);
			return lib_err_set(KILN_EIO, "could not read %s: %s", p->path, strerror(errno));
		}
		mprotect(buf, len, PROT_READ);
		p->map_len = len;
		__atomic_store_n(&p->data, buf, __ATOMIC_RELEASE);
		return 0;
	}
	void *data = mmap(NULL, p->size, PROT_READ, MAP_PRIVATE, p->fd, 0);
	if (data == MAP_FAILED)
		return lib_err_set(KILN_EIO, "could not map %s: %s", p->path, strerror(errno));
	p->map_len = p->size;
	__atomic_store_n(&p->data, data, __ATOMIC_RELEASE);
	return 0;
}

/* Loads p (a library: dlopen; a GPU output: mapped), once. */
static int prog_finish_load(struct kiln *k, struct kiln_program *p, const struct msg_file_id *file)
{
	if (p->loaded)
		return 0;
	int rc = strcmp(p->output, "shared") == 0 ? prog_dlopen(p, file) : prog_map(p);
	if (rc < 0)
		return rc;
	p->loaded = true;
	atomic_fetch_add(&k->loads, 1);
	return 0;
}

/* Makes a program from a reply's key, path and descriptor (the file it is
 * open on: file, when the reply said), and loads it when load; takes the
 * descriptor. */
static int prog_load(struct kiln *k, const char *key, const char *path, const char *output,
		     int fd, const struct msg_file_id *file, bool load, struct kiln_program **out)
{
	struct kiln_program *p;
	int rc;

	*out = NULL;
	p = calloc(1, sizeof(*p));
	if (!p) {
		close(fd);
		return lib_err_set(KILN_ENOMEM, "out of memory");
	}
	p->fd = fd;
	memcpy(p->key, key, KILN_KEY_HEX + 1);
	p->path = strdup(path);
	if (!p->path) {
		rc = lib_err_set(KILN_ENOMEM, "out of memory");
		goto fail;
	}
	/* Not snprintf: no printf on a fresh process's path (msg_add_int). */
	size_t olen = strnlen(output, sizeof(p->output) - 1);
	memcpy(p->output, output, olen);
	p->output[olen] = '\0';
	rc = load ? prog_finish_load(k, p, file) : 0;
	if (rc < 0)
		goto fail;
	/* The handle is kept even if the insert fails: the code may be in
	 * use already, and kiln never dlcloses. */
	if (table_put(k->by_key, key, p, NULL) < 0) {
		rc = lib_err_set(KILN_ENOMEM, "out of memory");
		goto fail;
	}
	*out = p;
	return 0;
fail:
	prog_free(p);
	return rc;
}

int lib_prog_from_reply(struct kiln *k, const cJSON *reply, int fd, const char *alias, bool load,
			struct kiln_program **out)
{
	struct msg_artifact a;
	const char *why;
	struct kiln_program *p;
	int rc = 0;

	*out = NULL;
	if (msg_artifact_parse(reply, &a, &why) != 0) {
		if (fd >= 0)
			close(fd);
		return lib_err_set(KILN_EPROTO, "%s", why);
	}
	const char *key = a.key, *path = a.path, *output = a.output;
	if (fd < 0)
		return lib_err_set(KILN_EPROTO, "kilnd sent the artifact %s without its descriptor",
				   path);

	/* Loads are serialised: they are rare (once per artifact and
	 * process), and two threads must not load one key twice. */
	pthread_mutex_lock(&k->load_lock);
	p = table_get(k->by_key, key);
	if (p) {
		close(fd);
		/* Got as a file before (kiln_get_file), or released, and
		 * wanted loaded now. */
		/* Its own descriptor, not this reply's: fstat'ed. */
		rc = load ? prog_finish_load(k, p, NULL) : 0;
		if (rc < 0)
			goto out;
	} else {
		rc = prog_load(k, key, path, output != NULL ? output : "shared", fd, &a.file, load,
			       &p);
		if (rc < 0)
			goto out;
	}
	/* Under load_lock, so from 0 too: a release waiting for the lock
	 * then finds a reference and leaves p loaded. */
	if (load)
		atomic_fetch_add_explicit(&p->refs, 1, memory_order_acquire);
	/* Only loaded programs enter the alias fast path, which kiln_get
	 * answers without loading. */
	if (alias && p->loaded) {
		/* A failed insert only costs a later IPC round trip, so the
		 * loaded program is still returned. */
		(void)alias_map_put(&k->by_alias, alias, p);
	}
	*out = p;
out:
	pthread_mutex_unlock(&k->load_lock);
	return rc;
}

/* Unloads p, whose last reference is gone (load_lock held): its aliases
 * leave the fast path first, then the object goes (dlclose, or unmapped). */
static void prog_unload(struct kiln *k, struct kiln_program *p)
{
	alias_map_drop(&k->by_alias, p);
	void *h = __atomic_exchange_n(&p->handle, NULL, __ATOMIC_ACQ_REL);
	void *data = __atomic_exchange_n(&p->data, NULL, __ATOMIC_ACQ_REL);
	if (h != NULL)
		dlclose(h);
	if (data != NULL)
		munmap(data, p->map_len);
	p->loaded = false;
}

int kiln_release(struct kiln *k, struct kiln_program *p)
{
	if (k == NULL || p == NULL)
		return lib_err_set(KILN_EINVAL, "kiln_release: k and p must not be NULL");
	int n = atomic_load_explicit(&p->refs, memory_order_relaxed);
	do {
		if (n <= 0)
			return lib_err_set(KILN_EINVAL, "kiln_release: program %.16s holds no "
					   "reference (released already, or got with kiln_get_file)",
					   p->key);
	} while (!atomic_compare_exchange_weak_explicit(&p->refs, &n, n - 1, memory_order_release,
							memory_order_relaxed));
	if (n > 1)
		return KILN_OK;
	pthread_mutex_lock(&k->load_lock);
	if (atomic_load_explicit(&p->refs, memory_order_acquire) == 0 && p->loaded)
		prog_unload(k, p);
	pthread_mutex_unlock(&k->load_lock);
	return KILN_OK;
}

void *kiln_sym(const struct kiln_program *p, const char *name)
{
	void *h = p != NULL ? __atomic_load_n(&p->handle, __ATOMIC_ACQUIRE) : NULL;
	if (!name || !h)
		return NULL;
	return dlsym(h, name);
}

const void *kiln_program_data(const struct kiln_program *p, size_t *size)
{
	void *data = p != NULL ? __atomic_load_n(&p->data, __ATOMIC_ACQUIRE) : NULL;
	if (size)
		*size = data != NULL ? p->size : 0;
	return data;
}

const char *kiln_program_output(const struct kiln_program *p)
{
	return p ? p->output : NULL;
}

int kiln_program_loaded(const struct kiln_program *p)
{
	if (p == NULL)
		return 0;
	bool shared = strcmp(p->output, "shared") == 0;
	return (shared ? __atomic_load_n(&p->handle, __ATOMIC_ACQUIRE)
		       : __atomic_load_n(&p->data, __ATOMIC_ACQUIRE)) != NULL;
}

const char *kiln_program_key(const struct kiln_program *p)
{
	return p ? p->key : NULL;
}

const char *kiln_program_path(const struct kiln_program *p)
{
	return p ? p->path : NULL;
}

int kiln_program_fd(const struct kiln_program *p)
{
	return p ? p->fd : -1;
}
