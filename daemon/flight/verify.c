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
#include "table.h"
#include "util.h"
#include "msg_artifact.h"
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

int verify_bytes(const struct store_entry *e, int fd, char *why, size_t whylen)
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
	/* pread from 0: the open file description is shared with every client
	 * that received the descriptor, so its offset is theirs to keep. */
	int rc = util_copy_sha256(fd, -1, &n, got);
	if (rc != 0) {
		snprintf(why, whylen, "cannot be read: %s", strerror(-rc));
		return -EBADMSG;
	}
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

int verify_served(struct kilnd *d, const struct store_entry *e, int fd, struct msg_file_id *id,
		  char *why, size_t whylen)
{
	struct stat st;
	if (fstat(fd, &st) != 0) {
		snprintf(why, whylen, "fstat: %s", strerror(errno));
		return -EBADMSG;
	}
	struct stamp now = stamp_of(&st);
	struct stamp *seen = d->verified != NULL ? table_get(d->verified, e->key) : NULL;
	if (id != NULL)
		*id = (struct msg_file_id){ .dev = (uint64_t)st.st_dev, .ino = (uint64_t)st.st_ino };
	if (seen != NULL && memcmp(seen, &now, sizeof(now)) == 0)
		return 0;
	int rc = verify_bytes(e, fd, why, whylen);
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

