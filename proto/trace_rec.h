/*
 * The records of a build's trace, as kiln-observe.so (daemon/observe.c,
 * which has the format) and kiln-exec (daemon/exec.c) write them and kilnd
 * reads them (daemon/flight/trace.c): one letter each, spelled here once.
 */
#ifndef KILN_PROTO_TRACE_REC_H
#define KILN_PROTO_TRACE_REC_H

enum trace_rec {
	REC_HELLO = 'H',        /* this process started: ppid and its executable's
	                         * identity, path the executable */
	REC_OPEN = 'O',         /* opened for reading, with its identity */
	REC_WRITE = 'W',        /* opened for writing only */
	REC_STAT = 'S',         /* exists (stat, access, opendir, readlink): mode */
	REC_ABSENT = 'A',       /* looked for and not found (ENOENT, ENOTDIR) */
	REC_FAILED = 'Q',       /* looked for, failed otherwise (EACCES, ELOOP, ...) */
	REC_EXEC = 'X',         /* about to execute the program, with its identity */
	REC_EXEC_FAILED = 'F',  /* the exec failed; the process goes on */
	REC_SPAWN = 'P',        /* posix_spawn started a child running the path */
	REC_INTERP = 'I',       /* the exec (or spawn) just recorded for the pid
	                         * runs this `#!` interpreter: it must answer */
	REC_LOAD = 'L',         /* a shared object loaded in this process */
	REC_ENV = 'E',          /* getenv of a variable */
	REC_LISTING = 'D',      /* a directory listed: its names are an input */
	REC_INCOMPLETE = 'N',   /* the trace cannot be complete (why) */
	REC_IMAGE = 'K',        /* kiln-exec's: the kernel started this image in the
	                         * pid (ptrace): its own start record must answer */
	REC_UNWATCHED = 'U',    /* kiln-exec's: the kernel refused the watch (why) */
};

#endif
