/*
 * kiln_get_many: a batch of gets in flight at once. A rank that asks for its
 * programs one after another lets the daemon build only one at a time while
 * the other --jobs slots idle; a batch fills them. The calling thread packs
 * every request, writes them together on the shared, pipelined connection
 * (lib_conn_call_many), and loads each program as its reply arrives, so that
 * programs already cached are loaded while the others build. No threads:
 * a warm batch costs the daemon one read and the client a few writes.
 * Sources go by digest first; the requests that kilnd answers need_sources
 * (it has no entry for them) go again, with their text, as a second batch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln_x.h"
#include "lib_internal.h"
#include "msg_artifact.h"

struct many {
	struct kiln *k;
	const struct kiln_request *reqs;
	struct kiln_program **out;
	int *status;
	size_t *index;            /* batch position -> request index */
	bool *again;              /* by request index: kilnd asked for the text */
	size_t nagain;
	bool with_text;           /* this batch already carries the text */
	size_t n;
	char **msgs;              /* by request index: the failure's text (or NULL) */
	int *fds;                 /* fetch only: descriptors instead of loads */
	char (*keys)[65];         /* fetch only: the keys */
	size_t first_failed;      /* index of the first failure seen, or n */
	int first_rc;
	char msg[4096];           /* its kiln_errmsg, for the calling thread */
};

static void many_result(struct many *m, size_t i, int rc)
{
	if (m->status != NULL)
		m->status[i] = rc;
	if (rc != KILN_OK && m->msgs != NULL && m->msgs[i] == NULL)
		m->msgs[i] = strdup(kiln_errmsg(m->k));
	if (rc != KILN_OK && i < m->first_failed) {
		m->first_failed = i;
		m->first_rc = rc;
		snprintf(m->msg, sizeof(m->msg), "request %zu: %s", i, kiln_errmsg(m->k));
	}
}

static void many_reply(void *arg, size_t pos, int rc, cJSON *reply, int fd)
{
	struct many *m = arg;
	size_t i = m->index[pos];

	if (rc < 0) {
		cJSON_Delete(reply);
		reply = NULL;
	}
	if (rc == LIB_ENEEDSRC && !m->with_text) {
		m->again[i] = true;
		m->nagain++;
		return;
	}
	if (rc == LIB_ENEEDSRC)
		rc = lib_err_set(KILN_EPROTO, "kilnd asked for the text of sources it was sent");
	if (rc == 0 && m->fds) {
		struct msg_artifact a;
		const char *why;

		if (fd < 0 || msg_artifact_parse(reply, &a, &why) != 0) {
			if (fd >= 0)
				close(fd);
			rc = lib_err_set(KILN_EPROTO, "%s", fd < 0 ? "kilnd sent an artifact without "
					 "its descriptor" : why);
		} else {
			m->fds[i] = fd;
			memcpy(m->keys[i], a.key, 65);
		}
		cJSON_Delete(reply);
	} else if (rc == 0) {
		rc = lib_prog_from_reply(m->k, reply, fd, m->reqs[i].alias, true, &m->out[i]);
		cJSON_Delete(reply);
	}
	many_result(m, i, rc);
}

/*
 * Requests written before their replies are read. kilnd stops reading a
 * connection while --max-requests of its requests are in progress or 4 MiB
 * of its replies wait (docs/security.md, "Limits"), and this thread writes a
 * window whole before it reads: a window's replies must fit in what kilnd
 * queues, or both sides would wait on each other. 512 hits are ~200 KB.
 */
#define MANY_WINDOW 512

/* Sends one batch, a window at a time; 0, or the status that every request
 * of some window failed with. */
static int many_send(struct many *m, struct msg_request *const *batch, size_t nbatch)
{
	size_t *index = m->index;
	int first = 0;

	for (size_t start = 0; start < nbatch; start += MANY_WINDOW) {
		size_t cnt = nbatch - start < MANY_WINDOW ? nbatch - start : MANY_WINDOW;
		int rc;

		m->index = index + start;
		rc = lib_conn_call_many(m->k, batch + start, cnt, many_reply, m);
		if (rc < 0) {
			/* Nothing of the window was answered: all failed alike. */
			for (size_t i = 0; i < cnt; i++)
				many_result(m, m->index[i], rc);
			if (first == 0)
				first = rc;
		}
	}
	m->index = index;
	return first;
}

static int get_many(struct kiln *k, const struct kiln_request *reqs, size_t n,
		    struct kiln_program **out, int *status, char **errs, int *fds,
		    char (*keys)[65]);

int kiln_get_many(struct kiln *k, const struct kiln_request *reqs, size_t n,
		  struct kiln_program **out, int *status)
{
	return kiln_x_get_many(k, reqs, n, out, status, NULL);
}

int kiln_x_get_many(struct kiln *k, const struct kiln_request *reqs, size_t n,
		    struct kiln_program **out, int *status, char **errs)
{
	return get_many(k, reqs, n, out, status, errs, NULL, NULL);
}

int kiln_x_fetch_many(struct kiln *k, const struct kiln_request *reqs, size_t n, int *fds,
		      char (*keys)[65], int *status, char **errs)
{
	struct kiln_program **out = calloc(n + 1, sizeof(*out));
	int rc;

	for (size_t i = 0; i < n; i++)
		fds[i] = -1;
	if (!out)
		return lib_err_set(KILN_ENOMEM, "out of memory");
	rc = get_many(k, reqs, n, out, status, errs, fds, keys);
	free(out);
	return rc;
}

static int get_many(struct kiln *k, const struct kiln_request *reqs, size_t n,
		    struct kiln_program **out, int *status, char **errs, int *fds,
		    char (*keys)[65])
{
	struct many m = { .k = k, .reqs = reqs, .out = out, .status = status, .n = n,
			  .msgs = errs, .fds = fds, .keys = keys, .first_failed = n };
	struct msg_request *msgs = NULL, **batch = NULL;
	const struct kiln_request *prev = NULL;
	size_t nbatch = 0, i;
	int rc;

	if (!k || (n > 0 && (!reqs || !out)))
		return lib_err_set(KILN_EINVAL, "kiln_get_many: k, reqs and out must not be NULL");
	if (n == 0)
		return KILN_OK;
	memset(out, 0, n * sizeof(*out));
	if (m.msgs != NULL)
		memset(m.msgs, 0, n * sizeof(*m.msgs));
	msgs = calloc(n, sizeof(*msgs));
	batch = calloc(n, sizeof(*batch));
	m.index = calloc(n, sizeof(*m.index));
	m.again = calloc(n, sizeof(*m.again));
	if (!msgs || !batch || !m.index || !m.again) {
		free(msgs);
		free(batch);
		free(m.index);
		free(m.again);
		return lib_err_set(KILN_ENOMEM, "out of memory for a batch of %zu requests", n);
	}
	for (i = 0; i < n; i++) {
		/* As kiln_get: a loaded alias needs no IPC. */
		if (reqs[i].alias && !fds) {
			out[i] = lib_prog_by_alias(k, reqs[i].alias);
			if (out[i]) {
				atomic_fetch_add_explicit(&k->local_hits, 1, memory_order_relaxed);
				many_result(&m, i, KILN_OK);
				continue;
			}
		}
		rc = lib_request_check(&reqs[i], &msgs[i], prev);
		if (rc < 0) {
			many_result(&m, i, rc);
			continue;
		}
		prev = &reqs[i];
		m.index[nbatch] = i;
		batch[nbatch++] = &msgs[i];
	}
	lib_request_digests(batch, nbatch);
	rc = many_send(&m, batch, nbatch);
	if (rc == 0 && m.nagain > 0) {
		nbatch = 0;
		for (i = 0; i < n; i++) {
			if (!m.again[i])
				continue;
			lib_request_with_text(&msgs[i]);
			m.index[nbatch] = i;
			batch[nbatch++] = &msgs[i];
		}
		m.with_text = true;
		many_send(&m, batch, nbatch);
	}
	for (i = 0; i < n; i++)
		free(msgs[i].sources);
	free(msgs);
	free(batch);
	free(m.index);
	free(m.again);
	if (m.first_failed == n)
		return KILN_OK;
	return lib_err_set(m.first_rc, "%s", m.msg);
}
