/*
 * GPU detection. The driver is loaded with dlopen in a forked child that
 * reports one line per device through a pipe: kilnd starts and serves CPU
 * work on nodes without a driver, and never initializes CUDA itself.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu.h"
#include "util.h"

#define DETECT_TIMEOUT_MS 20000
/* CUdevice_attribute values of cuda.h, stable since CUDA 2.x. */
#define ATTR_CC_MAJOR 75
#define ATTR_CC_MINOR 76

typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_int_fn)(int *);
typedef int (*cu_device_get_fn)(int *, int);
typedef int (*cu_name_fn)(char *, int, int);
typedef int (*cu_attr_fn)(int *, int, int);

/* In the child: writes "driver V", then "gpu I MAJOR MINOR NAME" lines, or
 * "none REASON", to fd. */
static void detect_child(int fd)
{
	FILE *out = fdopen(fd, "w");
	if (out == NULL)
		_exit(1);
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		fprintf(out, "none no CUDA driver: %s\n", dlerror());
		fclose(out);
		_exit(0);
	}
	cu_init_fn init = (cu_init_fn)dlsym(h, "cuInit");
	cu_int_fn version = (cu_int_fn)dlsym(h, "cuDriverGetVersion");
	cu_int_fn count = (cu_int_fn)dlsym(h, "cuDeviceGetCount");
	cu_device_get_fn get = (cu_device_get_fn)dlsym(h, "cuDeviceGet");
	cu_name_fn name = (cu_name_fn)dlsym(h, "cuDeviceGetName");
	cu_attr_fn attr = (cu_attr_fn)dlsym(h, "cuDeviceGetAttribute");
	int v = 0, n = 0, rc;
	if (!init || !version || !count || !get || !name || !attr) {
		fprintf(out, "none libcuda.so.1 lacks the driver API\n");
	} else if ((rc = init(0)) != 0) {
		fprintf(out, "none cuInit failed with CUDA error %d\n", rc);
	} else {
		if (version(&v) == 0)
			fprintf(out, "driver %d\n", v);
		if ((rc = count(&n)) != 0)
			fprintf(out, "none cuDeviceGetCount failed with CUDA error %d\n", rc);
		else if (n == 0)
			fprintf(out, "none the driver reports no GPU\n");
		for (int i = 0; i < n && i < GPU_MAX; i++) {
			int dev, major = 0, minor = 0;
			char nm[128] = "";
			if (get(&dev, i) != 0 || attr(&major, ATTR_CC_MAJOR, dev) != 0 ||
			    attr(&minor, ATTR_CC_MINOR, dev) != 0)
				continue;
			name(nm, (int)sizeof(nm), dev);
			nm[strcspn(nm, "\n")] = '\0';
			fprintf(out, "gpu %d %d %d %s\n", i, major, minor, nm);
		}
	}
	fclose(out);
	_exit(0);
}

static void parse_report(char *text, struct gpus *g)
{
	for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
		struct gpu *d = &g->dev[g->n];
		int off = 0;
		if (strncmp(line, "none ", 5) == 0) {
			snprintf(g->note, sizeof(g->note), "%s", line + 5);
		} else if (sscanf(line, "driver %d", &g->driver_version) == 1) {
			continue;
		} else if (g->n < GPU_MAX &&
			   sscanf(line, "gpu %d %d %d %n", &d->index, &d->major, &d->minor, &off) == 3) {
			snprintf(d->name, sizeof(d->name), "%s", line + off);
			g->n++;
		}
	}
}

void gpu_detect(struct gpus *g)
{
	memset(g, 0, sizeof(*g));
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) != 0) {
		snprintf(g->note, sizeof(g->note), "pipe: %s", strerror(errno));
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(fds[0]);
		detect_child(fds[1]);
	}
	close(fds[1]);
	if (pid < 0) {
		snprintf(g->note, sizeof(g->note), "fork: %s", strerror(errno));
		close(fds[0]);
		return;
	}
	char buf[8192];
	size_t len = 0;
	uint64_t deadline = util_now_ns() + (uint64_t)DETECT_TIMEOUT_MS * 1000000;
	for (;;) {
		uint64_t now = util_now_ns();
		struct pollfd pfd = { .fd = fds[0], .events = POLLIN };
		if (now >= deadline || poll(&pfd, 1, (int)((deadline - now) / 1000000) + 1) == 0) {
			snprintf(g->note, sizeof(g->note), "the CUDA driver did not answer in %d s",
				 DETECT_TIMEOUT_MS / 1000);
			kill(pid, SIGKILL);
			len = 0;
			break;
		}
		ssize_t n = read(fds[0], buf + len, sizeof(buf) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || (len += (size_t)n) == sizeof(buf) - 1)
			break;
	}
	close(fds[0]);
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	buf[len] = '\0';
	if (len == 0 && g->note[0] == '\0')
		snprintf(g->note, sizeof(g->note), "the CUDA driver probe died (status %d)", status);
	parse_report(buf, g);
}

static int arch_cmp(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* A sorted, unique list of compute capabilities (major * 10 + minor) as text. */
static char *format_archs(int *cc, size_t n)
{
	qsort(cc, n, sizeof(*cc), arch_cmp);
	char *s = malloc(n * 16 + 1);
	if (s == NULL)
		return NULL;
	size_t off = 0;
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && cc[i] == cc[i - 1])
			continue;
		off += (size_t)sprintf(s + off, "%ssm_%d", off > 0 ? "," : "", cc[i]);
	}
	s[off] = '\0';
	return s;
}

int gpu_arch_parse(const char *s, char **normalized)
{
	int cc[GPU_MAX];
	size_t n = 0;
	const char *p = s;
	*normalized = NULL;
	while (*p != '\0') {
		if (strncmp(p, "sm_", 3) == 0)
			p += 3;
		char *end;
		long v = strtol(p, &end, 10);
		/* Plain numbers only: suffixed ones (sm_90a) are not handled yet. */
		if (end == p || v < 10 || v > 999 || n == GPU_MAX || (*end != ',' && *end != '\0'))
			return -1;
		cc[n++] = (int)v;
		p = *end == ',' ? end + 1 : end;
	}
	if (n == 0)
		return -1;
	*normalized = format_archs(cc, n);
	return *normalized != NULL ? 0 : -1;
}

char *gpu_arch_list(const struct gpus *g, const char *cuda_arch)
{
	int cc[GPU_MAX];
	if (cuda_arch != NULL)
		return strdup(cuda_arch);
	if (g->n == 0)
		return NULL;
	for (size_t i = 0; i < g->n; i++)
		cc[i] = g->dev[i].major * 10 + g->dev[i].minor;
	return format_archs(cc, g->n);
}
