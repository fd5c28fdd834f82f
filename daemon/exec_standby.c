/*
 * kiln-exec's standby mode: started ahead of need by kilnd (child.c), it
 * waits on its standard input, a socket, for the start of a compile step or
 * a load check (standby_msg.h), and then becomes that run: the step's
 * output descriptor as its stdout, /dev/null as its stdin, the working
 * directory and the whole environment given, and the arguments, which
 * exec.c's main then takes as if it had been started with them. Waking a
 * waiting process is what this buys: in a herd, a new process waits its
 * turn behind every process already runnable, a woken one runs at once
 * (docs/performance.md, "Issue 51, second try").
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "exec_standby.h"
#include "standby_msg.h"

extern char **environ;

/* The head, with the descriptor beside it: 0, 1 at EOF before any byte,
 * -1 on anything else. */
static int read_head(unsigned char head[STANDBY_HEAD], int *fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = head, .iov_len = STANDBY_HEAD };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf) };
	ssize_t n;
	*fd = -1;
	while ((n = recvmsg(STDIN_FILENO, &m, MSG_WAITALL | MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); n >= 0 && c != NULL; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(fd, CMSG_DATA(c), sizeof(int));
	if (n == 0)
		return 1;
	if (n != STANDBY_HEAD || (m.msg_flags & MSG_CTRUNC) || *fd < 0) {
		if (*fd >= 0)
			close(*fd);
		return -1;
	}
	return 0;
}

int exec_standby_wait(int *argc, char ***argv)
{
	unsigned char head[STANDBY_HEAD];
	int out, rc = read_head(head, &out);
	if (rc != 0)
		return rc;
	uint32_t len = standby_length(head);
	char *buf = len != 0 ? malloc(len) : NULL;
	if (buf == NULL) {
		close(out);
		return -1;
	}
	memcpy(buf, head, STANDBY_HEAD);
	for (size_t got = STANDBY_HEAD; got < len;) {
		ssize_t n = read(STDIN_FILENO, buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			close(out);
			return -1;
		}
		got += (size_t)n;
	}
	char *cwd, **av, **env;
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (standby_unpack(buf, len, &cwd, &av, &env) != 0 || null < 0 ||
	    dup2(out, STDOUT_FILENO) < 0 || dup2(null, STDIN_FILENO) < 0) {
		close(out);
		return -1;
	}
	close(out);
	close(null);
	if (cwd[0] != '\0' && chdir(cwd) != 0) {
		/* Into the step's output, which kilnd logs. */
		printf("kiln-exec: cannot enter %s: %s\n", cwd, strerror(errno));
		fflush(stdout);
		return -1;
	}
	/* buf holds the strings for the rest of the run. */
	environ = env;
	*argc = 0;
	while (av[*argc] != NULL)
		(*argc)++;
	*argv = av;
	return 0;
}
