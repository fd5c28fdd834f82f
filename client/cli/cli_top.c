/*
 * kiln top: what kilnd does now, redrawn every second on a terminal, like
 * top: its slots, the builds running (elapsed time, clients waiting), the
 * queue, and hits and misses per second since the last frame. q or Ctrl-C
 * quits. --once prints one frame and exits (scripts, tests); -n N prints N.
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "cli.h"
#include "util.h"

enum { OPT_ONCE = 1, OPT_INTERVAL, OPT_FRAMES };

static const struct cli_optdef top_opts[] = {
	{ "once", 0, false, OPT_ONCE },
	{ "interval", 'd', true, OPT_INTERVAL },
	{ "frames", 'n', true, OPT_FRAMES },
	{ NULL, 0, false, 0 },
};

static volatile sig_atomic_t top_stop;

static void on_signal(int sig)
{
	(void)sig;
	top_stop = 1;
}

/* The counters of one frame, for the rates of the next. */
struct sample {
	double t;
	double hits, misses, requests;
	bool have;
};

static double num(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* What names a build for people: its label; else, where the status reply
 * has them (kilnd's flight_describe sends the label only so far), its alias
 * cut as ls cuts it, or its first source file. */
static const char *build_name(const cJSON *b, char *buf, size_t len)
{
	const char *label = cli_json_str(b, "label");
	const char *alias = cli_json_str(b, "alias");
	const char *source = cli_json_str(b, "source");
	if (label != NULL && *label != '\0')
		return label;
	if (alias != NULL && *alias != '\0')
		return cli_short_alias(alias, buf, len);
	return source != NULL && *source != '\0' ? source : "-";
}

static void print_rows(const cJSON *arr, const char *age, size_t rows)
{
	const cJSON *b;
	size_t i = 0;
	char buf[MSG_MAX_ALIAS + 1];
	cJSON_ArrayForEach(b, arr) {
		if (i++ >= rows)
			break;
		printf("%-16s  %-10s %8.1f s  %7.0f  %s%s\n", cli_json_str(b, "key"),
		       cli_json_str(b, "state"), num(b, age), num(b, "waiters"),
		       build_name(b, buf, sizeof(buf)),
		       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "background")) ? " (background)"
										 : "");
	}
	if (i > rows)
		printf("... %d more\n", cJSON_GetArraySize(arr) - (int)rows);
}

/* One frame from a status reply; rates against *prev, which it updates. */
static void print_frame(const cJSON *st, struct sample *prev, size_t rows)
{
	const cJSON *running = cJSON_GetObjectItemCaseSensitive(st, "running");
	const cJSON *queue = cJSON_GetObjectItemCaseSensitive(st, "queue");
	struct sample now = { .t = util_now_ns() / 1e9, .hits = num(st, "hits"),
			      .misses = num(st, "misses"), .requests = num(st, "requests"),
			      .have = true };
	double dt = prev->have ? now.t - prev->t : 0;
	printf("kilnd pid %.0f  %s  up %.0f s\n", num(st, "pid"), cli_json_str(st, "socket"),
	       num(st, "uptime_s"));
	printf("slots %.0f/%.0f busy  %.0f queued  %.0f connections\n", num(st, "in_flight"),
	       num(st, "jobs"), num(st, "queued"), num(st, "connections"));
	/* Less top's own status request, one per frame. */
	if (dt > 0)
		printf("requests %.1f/s  hits %.1f/s  misses %.1f/s\n",
		       (now.requests - prev->requests > 1 ? now.requests - prev->requests - 1 : 0) / dt,
		       (now.hits - prev->hits) / dt,
		       (now.misses - prev->misses) / dt);
	else
		printf("requests -/s  hits -/s  misses -/s  (rates from the next frame)\n");
	printf("builds %.0f ok, %.0f failed, %.0f cancelled; %.0f entries\n\n", num(st, "builds_ok"),
	       num(st, "builds_failed"), num(st, "cancelled"), num(st, "entries"));
	printf("%-16s  %-10s %10s  %7s  %s\n", "RUNNING", "STATE", "ELAPSED", "WAITING", "LABEL");
	print_rows(running, "elapsed_s", rows);
	printf("\n%-16s  %-10s %10s  %7s  %s\n", "QUEUED", "STATE", "WAITED", "WAITING", "LABEL");
	print_rows(queue, "waited_s", rows);
	*prev = now;
}

/* One status reply, or NULL after saying why. */
static cJSON *fetch(struct cli *cli)
{
	struct cli_conn c = { .wc.fd = -1 };
	struct msg_request req;
	cJSON *reply = NULL;
	if (cli_conn_require(cli, &c) < 0)
		return NULL;
	cli_request_init(&req, OP_STATUS);
	if (cli_call(cli, &c, &req, &reply) < 0 || cli_reply_check(reply, NULL) != ERR_NONE) {
		cJSON_Delete(reply);
		reply = NULL;
	}
	cli_conn_close(&c);
	return reply;
}

/* Waits up to s seconds for q on a terminal's stdin (or a signal). */
static bool wait_quit(double s, bool keys)
{
	struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
	int ms = (int)(s * 1000);
	if (!keys) {
		poll(NULL, 0, ms);
		return top_stop != 0;
	}
	if (poll(&pfd, 1, ms) > 0) {
		char ch = 0;
		if (read(STDIN_FILENO, &ch, 1) == 1 && (ch == 'q' || ch == 'Q' || ch == 3))
			return true;
	}
	return top_stop != 0;
}

static int top_parse(struct cli *cli, int argc, char **argv, bool *once, double *interval,
		     long *frames)
{
	struct cli_parse p;
	const char *val;
	int id;
	char *end;
	cli_parse_init(&p, cli, argc, argv);
	while ((id = cli_next(&p, top_opts, &val)) != CLI_END) {
		switch (id) {
		case CLI_STOP:
			return p.status;
		case CLI_POS:
			return cli_usage_error(cli, "top takes no arguments");
		case OPT_ONCE:
			*once = true;
			break;
		case OPT_INTERVAL:
			*interval = strtod(val, &end);
			if (*end != '\0' || !isfinite(*interval) || *interval < 0.1 || *interval > 3600)
				return cli_usage_error(cli, "--interval needs seconds from 0.1 to 3600, "
							    "not \"%s\"", val);
			break;
		default:
			*frames = strtol(val, &end, 10);
			if (*end != '\0' || *frames < 1)
				return cli_usage_error(cli, "--frames needs a count of 1 or more, not \"%s\"",
						       val);
			break;
		}
	}
	return -1;
}

int cmd_top(struct cli *cli, int argc, char **argv)
{
	bool once = false;
	double interval = 1.0;
	long frames = 0;
	int status = top_parse(cli, argc, argv, &once, &interval, &frames);
	if (status >= 0)
		return status;
	if (once)
		frames = 1;
	/* A terminal gets a redrawn screen and q; anything else frames in turn. */
	bool tty = isatty(STDOUT_FILENO) && !cli->json && !once;
	bool keys = tty && isatty(STDIN_FILENO);
	struct termios saved;
	if (keys && tcgetattr(STDIN_FILENO, &saved) == 0) {
		struct termios raw = saved;
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		raw.c_cc[VMIN] = 0;
		raw.c_cc[VTIME] = 0;
		tcsetattr(STDIN_FILENO, TCSANOW, &raw);
	} else {
		keys = false;
	}
	struct sigaction sa = { .sa_handler = on_signal }, old_int, old_term;
	sigemptyset(&sa.sa_mask);
	top_stop = 0;
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	struct sample prev = { 0 };
	status = CLI_EXIT_OK;
	/* A terminal's alternate screen, as top and less use: what was on the
	 * screen comes back when kiln top ends. */
	if (tty)
		fputs("\033[?1049h", stdout);
	for (long n = 0; !top_stop && (frames == 0 || n < frames); n++) {
		cJSON *st = fetch(cli);
		if (st == NULL) {
			status = CLI_EXIT_ERROR;
			break;
		}
		if (cli->json) {
			cli_print_json(st);
		} else {
			if (tty)
				fputs("\033[H\033[2J", stdout);  /* home, clear */
			print_frame(st, &prev, tty ? 12 : 50);
			if (!tty && (frames == 0 || n + 1 < frames))
				putchar('\n');
		}
		cJSON_Delete(st);
		fflush(stdout);
		if ((frames != 0 && n + 1 >= frames) || wait_quit(interval, keys))
			break;
	}
	if (tty) {
		fputs("\033[?1049l", stdout);
		fflush(stdout);
	}
	if (keys)
		tcsetattr(STDIN_FILENO, TCSANOW, &saved);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	return status == CLI_EXIT_OK ? cli_finish_stdout(status) : status;
}
