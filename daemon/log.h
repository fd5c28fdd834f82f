/*
 * Daemon logging: one line per event with a timestamp and level, to stderr
 * or the --log-file. Safe from any thread (one fprintf per line).
 */
#ifndef KILN_DAEMON_LOG_H
#define KILN_DAEMON_LOG_H

enum log_level { LOG_ERROR = 0, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* Returns 0, or -EINVAL for an unknown name ("error", "warn", "info", "debug"). */
int log_level_parse(const char *name, enum log_level *out);
/* Sends output to path (appending; NULL keeps stderr). 0 or negative errno. */
int log_open(enum log_level level, const char *path);
void log_close(void);
enum log_level log_get_level(void);

void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) \
	do { \
		if (log_get_level() >= LOG_DEBUG) \
			log_msg(LOG_DEBUG, __VA_ARGS__); \
	} while (0)

#endif
