/*
 * The directory a build's toolchain writes its trace into (observe.c): the
 * secret its records are signed with, and reading every file of it back.
 * Any thread; no daemon state.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "tracedir.h"
#include "util.h"

void tracedir_token(char out[33])
{
	uint8_t rnd[16];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		/* No entropy source: still unique, if guessable. */
		uint64_t t = (uint64_t)util_now_ns() ^ ((uint64_t)getpid() << 32);
		memcpy(rnd, &t, sizeof(t));
		memcpy(rnd + 8, &t, sizeof(t));
	}
	util_hex(rnd, sizeof(rnd), out);
}

int tracedir_read(const char *dir, char **text, size_t *len)
{
	DIR *dp = opendir(dir);
	struct dirent *de;
	size_t total = 0, cap = 0;
	char *buf = NULL;
	int rc = dp != NULL ? 0 : -errno;
	while (rc == 0 && (de = readdir(dp)) != NULL) {
		char path[PATH_MAX + 300], *part = NULL;
		size_t n = 0;
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		rc = util_read_file(path, TRACE_MAX - total, &part, &n);
		if (rc == 0 && total + n + 1 > cap) {
			size_t ncap = (total + n + 1) * 2;
			char *nb = realloc(buf, ncap);
			if (nb == NULL)
				rc = -ENOMEM;
			else {
				buf = nb;
				cap = ncap;
			}
		}
		if (rc == 0) {
			memcpy(buf + total, part, n);
			total += n;
			buf[total++] = '\0'; /* a file cut short ends its record here */
		}
		free(part);
	}
	if (dp != NULL)
		closedir(dp);
	if (rc != 0) {
		free(buf);
		return rc;
	}
	*text = buf;
	*len = total;
	return 0;
}

