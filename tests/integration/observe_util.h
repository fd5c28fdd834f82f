/*
 * Helpers shared by the integration tests of what a build observed
 * (test_observe.c) and of what other caches send (test_put_forged.c): a request
 * with its arguments, headers defining a value, scripts, and the checks of
 * what a client gets back.
 */
#ifndef KILN_TESTS_OBSERVE_UTIL_H
#define KILN_TESTS_OBSERVE_UTIL_H

#include <stdint.h>
#include <sys/stat.h>

#include "harness.h"

#define OREQ_ARGS 4
/* How many "../" reach / from any directory the build may run in. */
#define UP_LEVELS 24

/* One request of a test: its arguments and its source kept together. */
struct oreq {
	struct kiln_request req;
	struct kiln_source src;
	char arg[OREQ_ARGS][HARNESS_PATH + 128];
	const char *args[OREQ_ARGS];
	char *text;
};

/* The program of most tests: it returns what h.h defines. */
extern const char program_text[];

void oreq_init(struct oreq *r, const char *text);
void oreq_arg(struct oreq *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void oreq_free(struct oreq *r);
/* The usual request: program_text with -I<inc>. */
void oreq_program(struct oreq *r, const char *inc);
/* Starts kilnd and gets r twice: one build of value 1, then a hit. */
void start_and_build(const struct oreq *r);
/* After start_and_build: h.h at hdr changed to 2 is a rebuild, then a hit;
 * frees r and stops kilnd. */
void header_change_counts(struct oreq *r, const char *hdr);
char *header_text(int value, size_t pad);
void write_header(const char *path, int value);
char *make_dir(char *buf, const char *rel);
int header_value(const char *path);
void write_script(const char *path, const char *text);
void run_ok(const char *const *argv);
void wait_for_file(const char *path, double timeout_s, const char *what);
void restore_times(const char *path, const struct stat *st);
void check_same_stat(const char *path, const struct stat *st);
void overwrite_in_place(const char *path, const char *text, int flags);
int64_t builds_started(void);
void check_result(const struct harness_result *res, int value, const char *what);
void expect(const struct oreq *r, int value, int64_t builds, const char *what);
/* expect() twice: the second request must be a hit of the first. */
void expect_twice(const struct oreq *r, int value, int64_t builds, const char *what);
void expect_value(const struct oreq *r, int value, const char *what);
void start_with_wrapper(const char *wrapper, char *buf, size_t len);

#endif
