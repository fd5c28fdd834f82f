/*
 * <cache>/kiln.conf: the cache's own settings (cache_conf.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache_conf.h"
#include "util.h"

#define CONF_MAX 65536

static void trim(char **s, char **e)
{
	while (*s < *e && (**s == ' ' || **s == '\t'))
		(*s)++;
	while (*e > *s && ((*e)[-1] == ' ' || (*e)[-1] == '\t' || (*e)[-1] == '\r'))
		(*e)--;
}

int cache_conf_set(struct cache_conf *c, const char *key, const char *value, char *err,
		   size_t errlen)
{
	if (strcmp(key, "max-size") != 0) {
		snprintf(err, errlen, "unknown setting \"%s\" (known: max-size)", key);
		return -1;
	}
	if (value == NULL) {
		c->has_max_size = false;
		c->max_size = 0;
		return 0;
	}
	uint64_t v;
	if (util_parse_size(value, &v) != 0 || v == 0) {
		snprintf(err, errlen, "max-size: \"%s\" is not a size (like 512M or 20G)", value);
		return -1;
	}
	c->has_max_size = true;
	c->max_size = v;
	return 0;
}

int cache_conf_parse(const char *text, size_t len, struct cache_conf *c, char *err, size_t errlen)
{
	memset(c, 0, sizeof(*c));
	const char *p = text, *end = text + len;
	for (unsigned line = 1; p < end; line++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *stop = nl != NULL ? nl : end;
		char buf[512], why[300];
		size_t n = (size_t)(stop - p);
		if (n >= sizeof(buf)) {
			snprintf(err, errlen, "line %u: too long", line);
			return -1;
		}
		memcpy(buf, p, n);
		buf[n] = '\0';
		p = nl != NULL ? nl + 1 : end;
		char *hash = strchr(buf, '#');
		if (hash != NULL)
			*hash = '\0';
		char *s = buf, *e = buf + strlen(buf);
		trim(&s, &e);
		if (s == e)
			continue;
		*e = '\0';
		char *eq = strchr(s, '=');
		if (eq == NULL) {
			snprintf(err, errlen, "line %u: expected \"key = value\", got \"%.200s\"", line, s);
			return -1;
		}
		char *ks = s, *ke = eq, *vs = eq + 1, *ve = e;
		trim(&ks, &ke);
		trim(&vs, &ve);
		*ke = '\0';
		*ve = '\0';
		if (cache_conf_set(c, ks, vs, why, sizeof(why)) != 0) {
			snprintf(err, errlen, "line %u: %s", line, why);
			return -1;
		}
	}
	return 0;
}

int cache_conf_read(const char *cache_dir, struct cache_conf *c, char *err, size_t errlen)
{
	char path[4200];
	char *text = NULL;
	size_t len = 0;
	memset(c, 0, sizeof(*c));
	snprintf(path, sizeof(path), "%s/%s", cache_dir, CACHE_CONF_NAME);
	int rc = util_read_file(path, CONF_MAX, &text, &len);
	if (rc == -ENOENT)
		return 0;
	if (rc != 0) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(-rc));
		return -1;
	}
	char why[400];
	rc = cache_conf_parse(text, len, c, why, sizeof(why));
	free(text);
	if (rc != 0) {
		memset(c, 0, sizeof(*c));
		snprintf(err, errlen, "%s: %s", path, why);
	}
	return rc;
}

/* "20G" when exact in a binary unit, else the bytes: parses back the same. */
static const char *exact_size(uint64_t v, char *buf, size_t len)
{
	static const char units[] = "KMGTPE";
	int u = -1;
	while (u < 5 && v != 0 && v % 1024 == 0) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%llu", (unsigned long long)v);
	else
		snprintf(buf, len, "%llu%c", (unsigned long long)v, units[u]);
	return buf;
}

int cache_conf_write(const char *cache_dir, const struct cache_conf *c, char *err, size_t errlen)
{
	char text[256], size[64];
	int n = snprintf(text, sizeof(text),
			 "# Settings of this kiln cache (kiln config; docs/cli.md).\n");
	if (c->has_max_size)
		n += snprintf(text + n, sizeof(text) - (size_t)n, "max-size = %s\n",
			      exact_size(c->max_size, size, sizeof(size)));
	int dfd = open(cache_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = dfd >= 0 ? util_replace_file_at(dfd, CACHE_CONF_NAME, text, (size_t)n, true) : -errno;
	if (dfd >= 0)
		close(dfd);
	if (rc != 0) {
		snprintf(err, errlen, "cannot write %s/%s: %s", cache_dir, CACHE_CONF_NAME,
			 strerror(-rc));
		return -1;
	}
	return 0;
}

int cache_conf_update(const char *cache_dir, int64_t max_size, struct cache_conf *c,
		      bool *replaced, char *err, size_t errlen)
{
	*replaced = false;
	if (cache_conf_read(cache_dir, c, err, errlen) != 0) {
		if (max_size < 0)
			return -1;
		memset(c, 0, sizeof(*c));
		*replaced = true;
	}
	if (max_size < 0)
		return 0;
	c->has_max_size = max_size > 0;
	c->max_size = (uint64_t)max_size;
	/* err keeps what made the file unreadable unless the write fails. */
	char werr[700];
	if (cache_conf_write(cache_dir, c, werr, sizeof(werr)) != 0) {
		snprintf(err, errlen, "%s", werr);
		return -1;
	}
	return 0;
}
