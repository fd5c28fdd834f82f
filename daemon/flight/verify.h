/*
 * Checks that objects are what the index recorded (size and SHA-256): before
 * an object is served, and for every entry on `verify`.
 */
#ifndef KILN_DAEMON_VERIFY_H
#define KILN_DAEMON_VERIFY_H

#include "store.h"

struct kilnd;

/*
 * Whether fd (open on e's object) holds what e records. The first time an
 * object is served, and whenever its inode, size or ctime changed since, it
 * is hashed (on the calling thread); otherwise an fstat decides. Returns 0,
 * or -EBADMSG with a short reason in why when it is damaged. When id is not
 * NULL it gets the object's device and inode, from that fstat.
 */
struct msg_file_id;
int verify_served(struct kilnd *d, const struct store_entry *e, int fd, struct msg_file_id *id,
		  char *why, size_t whylen);
/* Records the object open on fd as key's, intact: a build just hashed it
 * while publishing, so its first serve needs no second hash (loop thread). */
void verify_record(struct kilnd *d, const char *key, int fd);
/* Frees the record of verified objects (at shutdown). */
void verify_fini(struct kilnd *d);

/* Size and SHA-256 of the file behind fd against e: 0, or -EBADMSG with a
 * short reason in why. Any thread. */
int verify_bytes(const struct store_entry *e, int fd, char *why, size_t whylen);

#endif
