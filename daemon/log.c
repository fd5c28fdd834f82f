/*
 * Daemon logging. A line is formatted into a local buffer first and written
 * with one call, so lines from the loop and the thread pool never interleave.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static enum log_level cur_level = LOG_INFO;
static FILE *log_fp;

static const char *const level_names[] = { "error", "warn", "info", "debug" };

int log_level_parse(const char *name, enum log_level *out)
{
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (strcmp(name, level_names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

int log_open(enum log_level level, const char *path)
{
	cur_level = level;
	if (path == NULL)
		return 0;
	FILE *fp = fopen(path, "ae");
	if (fp == NULL)
		return -errno;
	setvbuf(fp, NULL, _IOLBF, 0);
	log_close();
	log_fp = fp;
	return 0;
}

void log_close(void)
{
	if (log_fp != NULL)
		fclose(log_fp);
	log_fp = NULL;
}

enum log_level log_get_level(void)
{
	return cur_level;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	if (level > cur_level)
		return;
	char line[2048];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	int n = snprintf(line, sizeof(line), "%04d-%02d-%02d %02d:%02d:%02d.%03ld kilnd[%d] %s: ",
			 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
			 tm.tm_sec, ts.tv_nsec / 1000000, (int)getpid(), level_names[level]);
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	FILE *fp = log_fp != NULL ? log_fp : stderr;
	fwrite(line, 1, len, fp);
	fflush(fp);
}
