/*
 * kiln-exec waiting for its start (exec_standby.c).
 */
#ifndef KILN_DAEMON_EXEC_STANDBY_H
#define KILN_DAEMON_EXEC_STANDBY_H

/*
 * Waits on stdin for kilnd's start and takes it: stdout, stdin, the
 * working directory and environ set, *argc and *argv the run's arguments.
 * 0; 1 when kilnd closed the socket without one (nothing to run); -1 when
 * what came is no start (nothing to run either).
 */
int exec_standby_wait(int *argc, char ***argv);

#endif
