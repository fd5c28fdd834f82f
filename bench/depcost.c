/*
 * What validating a hit costs, by who owns the headers (docs/design.md,
 * "Validation of a hit"): kilnd trusts inotify for the content of files
 * only root can write, and stats a user's files once per batch of
 * requests. Two programs, each including the same number of generated
 * headers, one set owned by root, the other by another user (65534), are
 * got alternately, one request per read (each a batch of its own), in one
 * process: the difference per get is the price of the stats.
 *
 * Usage (as root, kilnd running on SOCKET): depcost SOCKET DIR [HEADERS] [GETS]
 * DIR is a scratch directory for the headers. Prints µs per get for both.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <kiln/kiln.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* DIR/<tag>/h<i>.h for i < n, owned by uid; the program text including them. */
static char *make_headers(const char *dir, const char *tag, int n, uid_t uid)
{
	char path[4096];
	size_t cap = (size_t)n * 64 + 256, len = 0;
	char *text = malloc(cap);
	snprintf(path, sizeof(path), "%s/%s", dir, tag);
	if (text == NULL || (mkdir(path, 0755) != 0 && errno != EEXIST))
		return NULL;
	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s/h%d.h", dir, tag, i);
		FILE *fp = fopen(path, "w");
		if (fp == NULL)
			return NULL;
		fprintf(fp, "#define %s_H%d %d\n", tag, i, i);
		fclose(fp);
		if (chown(path, uid, uid) != 0)
			return NULL;
		len += (size_t)snprintf(text + len, cap - len, "#include \"%s/h%d.h\"\n", tag, i);
	}
	snprintf(text + len, cap - len, "int __program_%s(void) { return %s_H0; }\n", tag, tag);
	return text;
}

static int get(struct kiln *k, const char *text, const char *name, const char *incarg)
{
	struct kiln_source src = { .name = name, .text = text };
	const char *args[] = { incarg };
	struct kiln_request req = { .args = args, .nargs = 1, .sources = &src, .nsources = 1 };
	struct kiln_program *p;
	return kiln_get(k, &req, &p);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: depcost SOCKET DIR [HEADERS] [GETS]\n");
		return 2;
	}
	int n = argc > 3 ? atoi(argv[3]) : 100, gets = argc > 4 ? atoi(argv[4]) : 2000;
	char inc[4200];
	snprintf(inc, sizeof(inc), "-I%s", argv[2]);
	char *root = make_headers(argv[2], "root", n, 0);
	char *user = make_headers(argv[2], "user", n, 65534);
	struct kiln *k;
	if (root == NULL || user == NULL || kiln_open(argv[1], &k) != KILN_OK) {
		fprintf(stderr, "depcost: cannot set up (%s)\n", strerror(errno));
		return 1;
	}
	if (get(k, root, "root.c", inc) != KILN_OK || get(k, user, "user.c", inc) != KILN_OK) {
		fprintf(stderr, "depcost: %s\n", kiln_errmsg(k));
		return 1;
	}
	/* A file changed less than 2 s ago is hashed again at each check
	 * (digests.h, "racily clean"): wait until the headers have settled,
	 * then get once more so that the states are current. */
	sleep(3);
	if (get(k, root, "root.c", inc) != KILN_OK || get(k, user, "user.c", inc) != KILN_OK)
		return 1;
	/* kiln_get of a program loaded in this process is answered by the
	 * daemon each time (only lookups by alias stay in the process). */
	double t[2] = { 0, 0 };
	for (int i = 0; i < gets; i++) {
		for (int side = 0; side < 2; side++) {
			double t0 = now_s();
			int rc = side == 0 ? get(k, root, "root.c", inc) : get(k, user, "user.c", inc);
			t[side] += now_s() - t0;
			if (rc != KILN_OK) {
				fprintf(stderr, "depcost: %s\n", kiln_errmsg(k));
				return 1;
			}
		}
	}
	printf("headers %d, gets %d per side\n", n, gets);
	printf("root-owned headers (events): %.1f us per get\n", t[0] / gets * 1e6);
	printf("user-owned headers (stat per batch): %.1f us per get\n", t[1] / gets * 1e6);
	printf("difference: %.1f us per get, %.2f us per header\n", (t[1] - t[0]) / gets * 1e6,
	       (t[1] - t[0]) / gets * 1e6 / n);
	kiln_close(k);
	free(root);
	free(user);
	return 0;
}
