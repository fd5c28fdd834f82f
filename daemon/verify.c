/*
 * Object checks. An object is immutable once published, but a person, a
 * full disk or a broken filesystem can still change it behind kilnd's back:
 * a truncated or altered object is never handed out. Serving checks the
 * bytes once per inode (and again when the inode's size or ctime moves,
 * which any write does); `verify` checks every entry and removes the
 * damaged ones, whose next request then rebuilds them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kilnd.h"
#include "log.h"
#include "msg.h"
#include "server.h"
#include "table.h"
#include "util.h"
#include "verify.h"

/* Objects seen intact, by key; dropped all at once beyond this many. */
#define VERIFIED_MAX 65536

struct stamp {
	dev_t dev;
	ino_t ino;
	off_t size;
	int64_t ctime_ns;
};

static struct stamp stamp_of(const struct stat *st)
{
	return (struct stamp){
		.dev = st->st_dev, .ino = st->st_ino, .size = st->st_size,
		.ctime_ns = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec,
	};
}

/* Size and SHA-256 of the file behind fd against e; 0 or -EBADMSG. */
static int check_bytes(const struct store_entry *e, int fd, char *why, size_t whylen)
{
	uint8_t got[32];
	uint64_t n = 0;
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(why, whylen, "not a readable regular file");
		return -EBADMSG;
	}
	if ((uint64_t)st.st_size != e->size) {
		snprintf(why, whylen, "size %lld, recorded %llu", (long long)st.st_size,
			 (unsigned long long)e->size);
		return -EBADMSG;
	}
	if (!e->has_sha256)
		return 0;
	if (lseek(fd, 0, SEEK_SET) != 0 || util_copy_sha256(fd, -1, &n, got) != 0) {
		snprintf(why, whylen, "cannot be read: %s", strerror(errno));
		return -EBADMSG;
	}
	lseek(fd, 0, SEEK_SET);
	if (n != e->size || memcmp(got, e->sha256, 32) != 0) {
		snprintf(why, whylen, "SHA-256 differs from the recorded one");
		return -EBADMSG;
	}
	return 0;
}

/* Records now as the stamp of key's intact object. */
static void remember(struct kilnd *d, const char *key, const struct stamp *now)
{
	if (d->verified == NULL && (d->verified = table_new()) == NULL)
		return;
	struct stamp *seen = table_get(d->verified, key);
	if (seen != NULL) {
		*seen = *now;
		return;
	}
	if (table_count(d->verified) >= VERIFIED_MAX) {
		table_free(d->verified, free);
		if ((d->verified = table_new()) == NULL)
			return;
	}
	struct stamp *s = malloc(sizeof(*s));
	if (s != NULL) {
		*s = *now;
		if (table_put(d->verified, key, s, NULL) != 0)
			free(s);
	}
}

void verify_record(struct kilnd *d, const char *key, int fd)
{
	struct stat st;
	if (fstat(fd, &st) == 0) {
		struct stamp now = stamp_of(&st);
		remember(d, key, &now);
	}
}

int verify_served(struct kilnd *d, const struct store_entry *e, int fd, char *why, size_t whylen)
{
	struct stat st;
	if (fstat(fd, &st) != 0) {
		snprintf(why, whylen, "fstat: %s", strerror(errno));
		return -EBADMSG;
	}
	struct stamp now = stamp_of(&st);
	struct stamp *seen = d->verified != NULL ? table_get(d->verified, e->key) : NULL;
	if (seen != NULL && memcmp(seen, &now, sizeof(now)) == 0)
		return 0;
	int rc = check_bytes(e, fd, why, whylen);
	if (rc != 0) {
		if (d->verified != NULL)
			free(table_del(d->verified, e->key));
		return rc;
	}
	remember(d, e->key, &now);
	return 0;
}

void verify_fini(struct kilnd *d)
{
	table_free(d->verified, free);
	d->verified = NULL;
}

struct verify_job {
	struct conn *c;
	uint64_t id;
	struct store_entry *list;
	size_t n;
	char (*why)[96];        /* per entry: "" when intact */
	uint64_t unverified;    /* rows from before schema 3: size checked only */
	uint64_t removed;
	int rc;
};

static void verify_work(void *arg)
{
	struct verify_job *j = arg;
	struct kilnd *d = j->c->d;
	for (size_t i = 0; i < j->n; i++) {
		const struct store_entry *e = &j->list[i];
		int fd = store_object_open(d->store, e->key, e->output);
		if (fd < 0) {
			snprintf(j->why[i], sizeof(j->why[i]), "object %s",
				 fd == -ENOENT ? "missing" : strerror(-fd));
		} else {
			(void)check_bytes(e, fd, j->why[i], sizeof(j->why[i]));
			close(fd);
		}
		if (!e->has_sha256)
			j->unverified++;
		if (j->why[i][0] == '\0')
			continue;
		int rc = store_remove(d->store, e->key);
		if (rc == 0 || rc == -ENOENT)
			j->removed++;
		else
			j->rc = rc;
	}
}

static void verify_done(void *arg)
{
	struct verify_job *j = arg;
	struct conn *c = j->c;
	struct kilnd *d = c->d;
	uint64_t damaged = 0;
	kilnd_refresh_totals(d);
	cJSON *r = cJSON_CreateObject();
	if (r != NULL) {
		msg_add_int(r, "id", (int64_t)j->id);
		cJSON_AddBoolToObject(r, "ok", 1);
	}
	cJSON *list = r != NULL ? cJSON_AddArrayToObject(r, "damaged") : NULL;
	for (size_t i = 0; i < j->n; i++) {
		if (j->why[i][0] == '\0')
			continue;
		damaged++;
		log_warn("verify: entry %.16s is damaged (%s); removed", j->list[i].key, j->why[i]);
		cJSON *o = cJSON_CreateObject();
		if (o == NULL || !cJSON_AddItemToArray(list, o)) {
			cJSON_Delete(o);
			continue;
		}
		cJSON_AddStringToObject(o, "key", j->list[i].key);
		cJSON_AddStringToObject(o, "problem", j->why[i]);
	}
	d->c.damaged += damaged;
	if (j->rc != 0) {
		cJSON_Delete(r);
		conn_reply_error(c, j->id, ERR_IO, NULL, "cannot remove a damaged entry: %s",
				 strerror(-j->rc));
	} else if (r == NULL || list == NULL) {
		cJSON_Delete(r);
		conn_reply_error(c, j->id, ERR_INTERNAL, NULL, "out of memory");
	} else {
		cJSON_AddNumberToObject(r, "checked", (double)j->n);
		cJSON_AddNumberToObject(r, "intact", (double)(j->n - damaged));
		cJSON_AddNumberToObject(r, "removed", (double)j->removed);
		cJSON_AddNumberToObject(r, "unverified", (double)j->unverified);
		conn_reply(c, r, -1);
	}
	store_entries_free(j->list, j->n);
	free(j->why);
	conn_unref(c);
	free(j);
}

void op_verify(struct conn *c, struct msg_request *req)
{
	struct kilnd *d = c->d;
	struct verify_job *j = calloc(1, sizeof(*j));
	int rc = j != NULL ? store_list(d->store, &j->list, &j->n) : -ENOMEM;
	if (rc == 0 && (j->why = calloc(j->n ? j->n : 1, sizeof(*j->why))) == NULL)
		rc = -ENOMEM;
	if (rc != 0) {
		if (j != NULL)
			store_entries_free(j->list, j->n);
		free(j);
		conn_reply_error(c, req->id, rc == -ENOMEM ? ERR_INTERNAL : ERR_IO, NULL,
				 "cannot read the index: %s", strerror(-rc));
		return;
	}
	j->c = c;
	j->id = req->id;
	conn_ref(c);
	if (kilnd_work(d, verify_work, verify_done, j) != 0) {
		conn_unref(c);
		store_entries_free(j->list, j->n);
		free(j->why);
		free(j);
		conn_reply_error(c, req->id, ERR_INTERNAL, NULL, "cannot queue work");
	}
}
