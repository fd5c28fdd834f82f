/*
 * Internal interface of the kiln CLI: the global options, the argument
 * parser every command shares, the daemon connection and the output helpers.
 */
#ifndef KILN_CLIENT_CLI_H
#define KILN_CLIENT_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "msg.h"
#include "wire.h"

/* Exit statuses, documented in docs/cli.md. */
#define CLI_EXIT_OK 0
#define CLI_EXIT_ERROR 1
#define CLI_EXIT_USAGE 2

/* Global options, valid before or after the command. */
struct cli {
	const char *cmd;        /* command being run, NULL before it is known */
	char *socket;           /* malloc'd: --socket or util_default_socket() */
	char *cache_dir;        /* malloc'd: --cache-dir or util_default_cache_dir() */
	bool socket_given;      /* --socket was on the command line */
	bool cache_dir_given;   /* --cache-dir was on the command line */
	bool cache_dir_named;   /* $KILN_CACHE_DIR is set: a typo there is an error too */
	bool json;
};

/*
 * Argument parser. Commands list their own options in a table ending with a
 * zero entry; global options are recognised everywhere before "--" and stored
 * in struct cli, so that "kiln ls --json" works like "kiln --json ls".
 */
struct cli_optdef {
	const char *lng;   /* "toolchain" for --toolchain, or NULL */
	char shrt;         /* 't' for -t, or 0 */
	bool has_arg;
	int id;            /* > 0, returned by cli_next() */
};

struct cli_parse {
	struct cli *cli;
	int argc;
	char **argv;
	int i;
	bool dashdash;     /* "--" was seen: everything after it is positional */
	int status;        /* exit status when cli_next() returned CLI_STOP */
	const char *hint;  /* added to "unknown option" messages, or NULL */
};

#define CLI_END 0      /* no arguments left */
#define CLI_POS (-1)   /* a positional argument in *val */
#define CLI_STOP (-2)  /* help or version printed, or a usage error reported:
			* exit with p->status */

void cli_parse_init(struct cli_parse *p, struct cli *cli, int argc, char **argv);
/* Returns an option id with its value in *val (NULL for flags), CLI_POS with
 * the argument in *val, CLI_END or CLI_STOP. -h/--help prints the help of
 * cli->cmd (or the global help), --version the version. */
int cli_next(struct cli_parse *p, const struct cli_optdef *defs, const char **val);
/*
 * As cli_parse_refs, for a command with one option of its own that takes no
 * value: defs lists it first (then the zero entry), *flag is set when it is
 * given. defs and flag may be NULL (no option).
 */
int cli_parse_flag_refs(struct cli *cli, int argc, char **argv, const struct cli_optdef *defs,
			bool *flag, const char **refs, int max, int *nrefs);
/*
 * Parses the arguments of a command that has no options of its own and
 * stores its positional REFs in refs. max is 0 (no arguments; refs may be
 * NULL), 1 (one REF at most) or -1 (any number; refs holds argc entries).
 * Returns -1 to go on with *nrefs set, or the exit status.
 */
int cli_parse_refs(struct cli *cli, int argc, char **argv, const char **refs, int max,
		   int *nrefs);

/* Messages on stderr, prefixed "kiln: ". cli_usage_error adds a pointer to
 * the command's help and returns CLI_EXIT_USAGE for "return cli_usage_error()". */
/* The error code (a protocol code such as "not_found", or "usage") of the
 * next cli_error, for --json's failure object; "error" when none is set. */
void cli_error_code(const char *code);
/* The compiler output that goes with the failure (--json's "log"). */
void cli_error_log(const char *log);
/* A command printed its JSON result (a failure then needs no object). */
void cli_json_printed(void);
/* Makes the paths of -I, -isystem, -iquote, -idirafter, -L (joined or
 * separate), -include and -imacros (separate) absolute against base: args[i]
 * then points to owned[i] (malloc'd, the caller frees each), else owned[i]
 * is NULL. Absolute, sysroot-relative (=, $) values stay. 0. */
int cli_absolute_args(char **args, size_t n, const char *base, char **owned);
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int cli_usage_error(const struct cli *cli, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Help texts (cli_help.c). cli_help_command returns 0, or -ENOENT for an
 * unknown command. */
void cli_help_global(FILE *f);
int cli_help_command(const char *cmd, FILE *f);
void cli_print_version(void);

/* A connection to kilnd that has passed hello. */
struct cli_conn {
	struct wire_conn wc;
	uint64_t next_id;
	int64_t pid;       /* the daemon's pid from hello, or -1 */
};

/*
 * Connects to cli->socket and says hello. Returns 0 (close c with
 * cli_conn_close), -ECONNREFUSED when no daemon runs there (nothing is
 * printed: the caller decides whether that is an error or a reason to read
 * the cache offline), or another negative errno after printing why.
 */
int cli_conn_open(const struct cli *cli, struct cli_conn *c);
void cli_conn_close(struct cli_conn *c);
/* cli_conn_open for commands that need the daemon: also reports that none
 * runs. */
int cli_conn_require(const struct cli *cli, struct cli_conn *c);
struct store;
/*
 * Opens the cache at cli->cache_dir while kilnd is not running: read-only,
 * or for writing (write). Returns 0 with *out set, 0 with *out NULL when no
 * cache was ever created at the default directory (an empty cache, not an
 * error), or a negative errno after printing why: a --cache-dir given that
 * does not exist or holds no cache is an error (a typo must not read as "no
 * entries").
 */
int cli_open_offline(const struct cli *cli, bool write, struct store **out);
/* Prints "kilnd is not running at SOCKET; start it with: ..." */
void cli_not_running(const struct cli *cli);

/* Zeroes req for op, with the numbers that mean "absent" set to -1. */
void cli_request_init(struct msg_request *req, enum msg_op op);

/*
 * Sends req (its id is assigned here) and waits for the reply. Returns 0 and
 * the parsed reply in *reply (owned by the caller), whether the daemon said
 * ok or not; a negative errno after printing why when the connection failed.
 * A descriptor attached to the reply is closed: the CLI never loads artifacts.
 */
int cli_call(const struct cli *cli, struct cli_conn *c, struct msg_request *req,
	     cJSON **reply);
/* Returns ERR_NONE when reply says ok; otherwise prints the error (naming ref
 * for not_found and ambiguous; ref may be NULL) and returns its code. */
enum msg_err cli_reply_check(const cJSON *reply, const char *ref);
/* The messages for a reference that matches nothing or several entries. */
void cli_ref_error(enum msg_err code, const char *ref);

/* Output helpers (cli_print.c). The getters return false when the member is
 * missing or of another type. */
bool cli_json_u64(const cJSON *obj, const char *name, uint64_t *out);
bool cli_json_i64(const cJSON *obj, const char *name, int64_t *out);
const char *cli_json_str(const cJSON *obj, const char *name);
bool cli_json_true(const cJSON *obj, const char *name);
/* Prints item as one line of unformatted JSON. Returns 0 or -ENOMEM. */
int cli_print_json(const cJSON *item);
/* "812 ms" or "12.3 s". Each returns buf. */
char *cli_format_ms(uint64_t ms, char *buf, size_t len);
/* ISO-8601 local time with offset, "2025-11-21T13:00:00+01:00". */
char *cli_format_time(int64_t t, char *buf, size_t len);
/* "3m ago" for a Unix time in the past. */
char *cli_format_ago(int64_t t, int64_t now, char *buf, size_t len);
/* Prints "name:" padded to width + 2 columns, then the formatted value. */
void cli_field(int width, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The name kiln status and kiln stats print for a member of the status
 * reply ("need_sources": "sources asked"); the member's own name when it
 * has no other ("hits"). Static. */
const char *cli_counter_name(const char *field);
/* "588 (91.9% of lookups)": hits with their share of hits and misses (the
 * bare count when both are 0). Returns buf. */
char *cli_format_hits(uint64_t hits, uint64_t misses, char *buf, size_t len);
/*
 * An alias as ls and top show it unless --wide: each run of at least
 * CLI_ALIAS_HASH_MIN hex digits (a hash, as in DaCe's "dace:<64 hex>") cut
 * to its first CLI_ALIAS_HASH_KEEP and CLI_ALIAS_CUT, "dace:3f2a9b8c7d6e..".
 * Returns buf (len bytes) holding that, or alias itself when nothing is cut
 * (or buf is too small). A cut alias is no REF: the key is.
 */
#define CLI_ALIAS_HASH_MIN 20
#define CLI_ALIAS_HASH_KEEP 12
#define CLI_ALIAS_CUT ".."
const char *cli_short_alias(const char *alias, char *buf, size_t len);
/* "entry" for 1, else "entries". */
const char *cli_entries_word(uint64_t n);
/* Flushes stdout and reports a write error (a full disk, a closed pipe).
 * Returns status, or CLI_EXIT_ERROR when the output was lost. */
int cli_finish_stdout(int status);

/* Commands. Each returns the process exit status, having already told the
 * user what went wrong. */
int cmd_status(struct cli *cli, int argc, char **argv);
int cmd_ls(struct cli *cli, int argc, char **argv);
int cmd_show(struct cli *cli, int argc, char **argv);
int cmd_log(struct cli *cli, int argc, char **argv);
int cmd_build(struct cli *cli, int argc, char **argv);
int cmd_rm(struct cli *cli, int argc, char **argv);
int cmd_pin(struct cli *cli, int argc, char **argv);
int cmd_unpin(struct cli *cli, int argc, char **argv);
int cmd_gc(struct cli *cli, int argc, char **argv);
int cmd_verify(struct cli *cli, int argc, char **argv);
int cmd_stats(struct cli *cli, int argc, char **argv);
int cmd_config(struct cli *cli, int argc, char **argv);
int cmd_warm(struct cli *cli, int argc, char **argv);
int cmd_top(struct cli *cli, int argc, char **argv);
int cmd_export(struct cli *cli, int argc, char **argv);
int cmd_import(struct cli *cli, int argc, char **argv);
int cmd_stop(struct cli *cli, int argc, char **argv);

#endif
