/*
 * A fake kilnd for libkiln's unit tests (test_client.c): a thread of the
 * test that listens on a Unix socket in a temporary directory, parses
 * requests with the shared proto code and answers hello, get and lookup as
 * each test scripts it through F, passing descriptors of shared objects
 * compiled with cc.
 */
#ifndef KILN_TESTS_FAKE_KILND_H
#define KILN_TESTS_FAKE_KILND_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/kiln.h"

#define FAKE_MAX_ENTRIES 32
#define FAKE_MAX_DEFER 16

/* What the fake answers for one alias (or, for a get without an alias, for
 * its first source's name). */
enum { FAKE_FILE_FD = 1, FAKE_FILE_PATH = 2 };

struct fake_entry {
	char match[128];
	char key[65];
	char path[PATH_MAX];       /* the path the reply names */
	char fd_path[PATH_MAX];    /* the file whose descriptor the reply carries */
	int say_file;              /* the reply's dev and ino: 0 none, FAKE_FILE_FD the
	                              descriptor's (as kilnd), FAKE_FILE_PATH the path's */
	const char *error_code;    /* a failure reply instead, when set */
	const char *error_log;
};

struct fake_deferred {
	uint64_t id;
	struct fake_entry *e;
};

struct fake {
	char dir[128];
	char sock[PATH_MAX];
	int lfd;
	pthread_t thread;
	/* Set up before the thread starts. */
	int hello_proto;
	struct fake_entry entries[FAKE_MAX_ENTRIES];
	size_t nentries;
	int defer;                 /* gets collected, then answered in reverse */
	/* Touched by the thread and the test. */
	atomic_int frames;         /* requests received, hello included */
	atomic_int bad;            /* requests that msg_request_parse refused */
	atomic_int conns;          /* connections accepted */
	atomic_int closed;         /* connections the fake closed on purpose */
	atomic_int drop_on_get;    /* close instead of answering the next get */
	atomic_int close_after_first;  /* close once the first call after hello is answered */
	atomic_int ask_text;       /* answer need_sources to a get by digest */
	atomic_int asked;          /* gets by digest answered need_sources */
	atomic_int texts;          /* gets with text whose digest came before */
	uint8_t digest[32];        /* the last digest answered need_sources */
	char last_toolchain[64];   /* of the last get; read after the call returns */
	char last_output[64];
};

/* The fake of the running test (set up by fake_setup). */
extern struct fake *F;

/* The test case's fixture: a fresh F and directory, and their removal. */
void fake_setup(void);
void fake_teardown(void);
/* Starts the fake; tests first script it through F. */
void fake_start(void);
/* Compiles a shared object whose value() returns value into F->dir/name. */
void build_so(const char *name, int value);
/* Adds an entry that hands out F->dir/so_name under the name match. */
struct fake_entry *add_entry(const char *match, const char *so_name, unsigned key);
/* kiln_open on the fake's socket; fails the test when it fails. */
struct kiln *open_fake(void);
/* Calls the loaded program's value(). */
int call_value(const struct kiln_program *p);
/* A one-source request with alias (may be NULL). */
struct kiln_request one_source(struct kiln_source *src, const char *alias);
/* This process's descriptors open on shared objects in F->dir, polled
 * until want (the fake closes its copy just after sending). */
int so_fds(int want);

#endif
