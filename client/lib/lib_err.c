/*
 * Error reporting of libkiln: the calling thread's last error text, the
 * mapping of the daemon's stable error codes to status codes, and
 * kiln_strerror(). Per-thread text lets threads share one struct kiln
 * without reading each other's failures.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib_internal.h"

/* Used when even the error text cannot be allocated; never freed. */
static char err_oom_text[] = "out of memory (while formatting the error message)";

static pthread_key_t err_key;
static pthread_once_t err_once = PTHREAD_ONCE_INIT;
static int err_key_ok;

static void err_text_free(void *text)
{
	if (text != err_oom_text)
		free(text);
}

static void err_key_create(void)
{
	err_key_ok = pthread_key_create(&err_key, err_text_free) == 0;
}

/*
 * Thread-specific values are freed only when a thread exits, and the main
 * thread never does; free its text when the library is unloaded or the
 * process exits so that leak checkers see a clean exit.
 */
__attribute__((destructor)) static void err_fini(void)
{
	void *text;

	if (!err_key_ok)
		return;
	text = pthread_getspecific(err_key);
	pthread_setspecific(err_key, NULL);
	err_text_free(text);
}

int lib_err_set(int code, const char *fmt, ...)
{
	va_list ap;
	char *text = NULL;
	void *old;
	int n;

	pthread_once(&err_once, err_key_create);
	if (!err_key_ok)
		return code;
	va_start(ap, fmt);
	n = vasprintf(&text, fmt, ap);
	va_end(ap);
	if (n < 0)
		text = err_oom_text;
	old = pthread_getspecific(err_key);
	if (pthread_setspecific(err_key, text) != 0) {
		err_text_free(text);
		return code;
	}
	err_text_free(old);
	return code;
}

const char *kiln_errmsg(const struct kiln *k)
{
	const char *text;

	(void)k;
	pthread_once(&err_once, err_key_create);
	if (!err_key_ok)
		return "";
	text = pthread_getspecific(err_key);
	return text ? text : "";
}

int lib_err_map(enum msg_err err)
{
	switch (err) {
	case ERR_NONE:
		return KILN_OK;
	case ERR_NOT_FOUND:
		return KILN_ENOTFOUND;
	case ERR_CLAIMED:
		return KILN_ECLAIMED;
	case ERR_BUILD_FAILED:
	case ERR_INPUTS_CHANGED:
		return KILN_EBUILD;
	case ERR_BUILD_TIMEOUT:
		return KILN_ETIMEDOUT;
	case ERR_BAD_REQUEST:
	case ERR_UNKNOWN_OP:
	case ERR_AMBIGUOUS:
	case ERR_BAD_TOOLCHAIN:
	case ERR_BAD_NAME:
	case ERR_BAD_ARG:
	case ERR_TOO_LARGE:
	case ERR_MISMATCH:
		return KILN_EREFUSED;
	case ERR_DENIED:
		return KILN_EDENIED;
	case ERR_BUSY:
	case ERR_SHUTTING_DOWN:
		return KILN_EBUSY;
	case ERR_PROTO_MISMATCH:
	case ERR_BAD_FRAME:
	case ERR_BAD_JSON:
		return KILN_EPROTO;
	case ERR_NEED_SOURCES:
		return LIB_ENEEDSRC;
	case ERR_IO:
	case ERR_INTERNAL:
	case ERR__COUNT:
		break;
	}
	/* Unknown codes are treated like "internal", as the protocol asks. */
	return KILN_EDAEMON;
}

int lib_err_from_reply(const cJSON *reply)
{
	const cJSON *error = cJSON_GetObjectItemCaseSensitive(reply, "error");
	const char *code = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(error, "code"));
	const char *message =
		cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(error, "message"));
	const char *log = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(error, "log"));
	enum msg_err err;
	int status;

	if (!code)
		return lib_err_set(KILN_EPROTO, "kilnd sent a failed reply without an error code");
	err = msg_err_parse(code);
	status = lib_err_map(err);
	/* A miss whose claim another client holds (kilnd names the field). */
	const char *field = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(error, "field"));
	if (err == ERR_NOT_FOUND && field != NULL && strcmp(field, "claim") == 0)
		status = KILN_EHELD;
	if (!message || !*message)
		message = code;
	/* The compiler's text is what the user needs to fix a failed build,
	 * so it follows the daemon's one-line summary. */
	if (log && *log)
		return lib_err_set(status, "%s\n%s", message, log);
	return lib_err_set(status, "%s (%s)", message, code);
}

const char *kiln_version(void)
{
	return KILN_VERSION_STR;
}

const char *kiln_strerror(int code)
{
	switch (code) {
	case KILN_OK:
		return "success";
	case KILN_EINVAL:
		return "invalid argument";
	case KILN_ENOMEM:
		return "out of memory";
	case KILN_ECONNECT:
		return "no kilnd answers at the socket";
	case KILN_EPROTO:
		return "protocol error or protocol version mismatch";
	case KILN_EIO:
		return "I/O error";
	case KILN_ENOTFOUND:
		return "no such entry";
	case KILN_EBUILD:
		return "build failed";
	case KILN_ETIMEDOUT:
		return "build timed out";
	case KILN_ELOAD:
		return "could not load the artifact";
	case KILN_EREFUSED:
		return "request refused by kilnd";
	case KILN_EDENIED:
		return "access denied by kilnd";
	case KILN_EBUSY:
		return "kilnd is busy or shutting down";
	case KILN_EDAEMON:
		return "kilnd failed internally";
	case KILN_ECUDA:
		return "the CUDA driver failed";
	case KILN_ECLAIMED:
		return "not found; this client holds the claim and produces it";
	case KILN_EHELD:
		return "not found; another client holds the claim";
	}
	return "unknown status code";
}
