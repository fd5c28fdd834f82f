/*
 * Job-wide claims on aliases: a claiming lookup that misses here and in the
 * tier takes a lease, DIR/claims/alias-<sha256 of alias>.claim, before its
 * node-local claim is answered (docs/design.md, "Upstream tier", "Claims on
 * aliases across nodes"). The lease file is a build claim's (upstream_fs.c:
 * O_EXCL, refreshed, judged stale and taken over alike); while another node
 * holds it, the lookup waits as a waiting flight does (upstream.c's poll
 * timer and pace), for the alias record or for the lease to go. A lease
 * lives as long as its local claim (claims.c calls its end hook) and ends
 * after the alias record is written when the claim ends by a publication.
 *
 * Loop thread, except lease_work on the pool, which reads only the lease's
 * alias, name and toolchain (set at its creation, never changed) and its
 * job's own copies.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "claims.h"
#include "kilnd.h"
#include "log.h"
#include "table.h"
#include "thread.h"
#include "upstream.h"
#include "upstream_int.h"
#include "util.h"

enum lease_state {
	LEASE_ASKING,      /* a lookup waits for it: a look on the pool, or a turn to look */
	LEASE_HELD,        /* this kilnd holds the file while the local claim lives */
	LEASE_ENDING,      /* the claim ended by a publication: held until its record is written */
};

struct up_lease {
	struct kilnd *d;
	char *alias;
	char name[72];                   /* "alias-<sha256 of alias>": the claim file's name */
	struct toolchain tc;             /* the first lookup's, copied: its records' toolchain */
	const struct claim_owner *owner; /* the local claim's */
	enum lease_state state;
	struct up_poller poll;           /* waiting for another node's lease */
	uv_timer_t timer;                /* the waiting lookup's deadline */
	upstream_lease_cb cb;            /* the lookup waiting, or NULL */
	void *arg;
	uint64_t deadline;               /* uv_now, ms */
	bool wait;                       /* the lookup may wait (wait_ms > 0) */
	bool in_table, waited;
	struct up_claim *held;           /* the file, while held */
	struct up_seen seen;             /* another node's lease, as last seen */
	unsigned refs;                   /* the table, the job on the pool, records being written */
	unsigned records;
};

struct lease_job {
	struct up_lease *l;
	struct up_seen seen;
	int claim_rc;                    /* upfs_claim's */
	int fd;
	bool took_over, found;
	char key[65];
	char *data;
	unsigned bad;
	int err;
};

static struct table *leases(struct kilnd *d)
{
	return upstream_lease_table(d);
}

static void lease_closed(uv_handle_t *h)
{
	struct up_lease *l = h->data;
	upstream_tc_free(&l->tc);
	free(l->alias);
	free(l);
}

static void lease_unref(struct up_lease *l)
{
	if (--l->refs == 0)
		uv_close((uv_handle_t *)&l->timer, lease_closed);
}

/* Out of the table: the alias may have a new lease now. Last use of l. */
static void lease_detach(struct up_lease *l)
{
	if (!l->in_table)
		return;
	l->in_table = false;
	table_del(leases(l->d), l->alias);
	lease_unref(l);
}

/* The file goes (on the pool, if it is still this kilnd's). */
static void lease_drop(struct up_lease *l)
{
	if (l->held != NULL)
		upstream_claim_drop(l->d, l->held, NULL, NULL);
	l->held = NULL;
}

/* Answers the waiting lookup (once). */
static void lease_answer(struct up_lease *l, bool held, enum claim_end why)
{
	upstream_lease_cb cb = l->cb;
	void *arg = l->arg;
	l->cb = NULL;
	uv_timer_stop(&l->timer);
	upstream_poll_del(l->d, &l->poll);
	if (cb != NULL)
		cb(arg, held, why);
}

/* ---- one look, on the pool ---------------------------------------------- */

static void lease_work(void *arg)
{
	struct lease_job *j = arg;
	struct up_lease *l = j->l;
	const struct up_dirs *fs = upstream_dirs(l->d);
	j->claim_rc = upfs_claim(fs, l->name, &j->seen, &j->fd, &j->took_over);
	/* Taken or not, the record may be there: its producer writes it before
	 * its lease goes, and may have done both since the lookup missed. */
	j->found = upstream_alias_take(l->d, l->alias, &l->tc, j->key, &j->data, &j->bad,
				       &j->err) == 1;
	if (j->found && j->claim_rc == 0) {
		char *path = upfs_claim_path(fs, l->name);
		if (path != NULL)
			upfs_unclaim(path, j->fd);
		else
			close(j->fd);
		free(path);
		j->fd = -1;
		j->claim_rc = 1;
	}
}

/* The lease just made (fd): kept and refreshed while the claim lives. */
static void lease_keep(struct up_lease *l, struct lease_job *j)
{
	char *path = upfs_claim_path(upstream_dirs(l->d), l->name);
	l->held = path != NULL ? upstream_claim_keep(l->d, j->fd, path) : NULL;
	if (l->held == NULL) {
		/* Not refreshed: it goes stale, as a killed kilnd's would. */
		free(path);
		close(j->fd);
	}
	j->fd = -1;
	l->state = LEASE_HELD;
	l->d->c.upstream_alias_claims++;
	if (j->took_over) {
		l->d->c.upstream_alias_claim_takeovers++;
		log_info("took over the stale lease on alias \"%s\"", l->alias);
	}
}

static void on_deadline(uv_timer_t *t);

/* Another node holds the lease: wait for a turn to look, until the deadline. */
static void lease_wait(struct up_lease *l, struct lease_job *j)
{
	struct kilnd *d = l->d;
	uint64_t now = uv_now(d->loop);
	if (!l->wait || l->deadline <= now) {
		lease_detach(l);
		lease_answer(l, false, CLAIM_TIMEOUT);
		return;
	}
	if (!l->waited) {
		l->waited = true;
		d->c.upstream_alias_claim_waits++;
		log_info("alias \"%s\" is being produced by %s; waiting for it", l->alias,
			 j->seen.owner);
		uv_timer_start(&l->timer, on_deadline, l->deadline - now, 0);
	}
	upstream_poll_add(d, &l->poll);
}

static void lease_done(void *arg, int status)
{
	struct lease_job *j = arg;
	struct up_lease *l = j->l;
	struct kilnd *d = l->d;
	if (status != 0 && j->err == 0)
		j->err = status;
	d->c.upstream_errors += j->bad + (j->err != 0);
	if (j->err != 0)
		log_warn("upstream tier, alias lease: %s", strerror(-j->err));
	l->seen = j->seen;
	bool mine = l->in_table && l->cb != NULL;
	if (j->found) {
		if (mine)
			lease_detach(l);
		/* The claim ends here as published (its waiters find it); the
		 * lookup then looks again and finds it too. */
		upstream_alias_taken(d, l->alias, j->key, j->data);
		if (mine)
			lease_answer(l, false, CLAIM_PUBLISHED);
	} else if (!mine || d->stopping) {
		/* Nobody waits for it any more (the wait ran out, the claim
		 * ended), or kilnd stops: a lease just made goes again. */
		if (j->fd >= 0) {
			char *path = upfs_claim_path(upstream_dirs(d), l->name);
			struct up_claim *c = path != NULL ? upstream_claim_keep(d, j->fd, path) : NULL;
			if (c != NULL)
				upstream_claim_drop(d, c, NULL, NULL);
			else
				close(j->fd);
			if (c == NULL)
				free(path);
		}
		if (mine) {
			lease_detach(l);
			lease_answer(l, false, CLAIM_GONE);
		}
	} else if (j->claim_rc == 0) {
		lease_keep(l, j);
		lease_answer(l, true, CLAIM_PUBLISHED);
	} else if (j->claim_rc == 1) {
		lease_wait(l, j);
	} else {
		/* No lease can be made: the claim stays node-local, as before. */
		d->c.upstream_errors++;
		log_warn("cannot take the lease on alias \"%s\" in the upstream tier: %s; the "
			 "claim is this node's only", l->alias, strerror(-j->claim_rc));
		lease_detach(l);
		lease_answer(l, true, CLAIM_PUBLISHED);
	}
	free(j->data);
	free(j);
	lease_unref(l);
}

static int lease_look(struct up_lease *l)
{
	struct lease_job *j = calloc(1, sizeof(*j));
	if (j == NULL)
		return -ENOMEM;
	j->l = l;
	j->fd = -1;
	j->seen = l->seen;
	l->refs++;
	if (kilnd_work(l->d, POOL_UP_LOOK, lease_work, lease_done, j) != 0) {
		l->refs--;
		free(j);
		return -EAGAIN;
	}
	return 0;
}

/* ---- the waiting lookup's turns and deadline ---------------------------- */

static struct up_lease *lease_of(struct up_poller *p)
{
	return (struct up_lease *)((char *)p - offsetof(struct up_lease, poll));
}

static void on_turn(struct up_poller *p)
{
	struct up_lease *l = lease_of(p);
	if (lease_look(l) != 0) {
		l->d->c.upstream_errors++;
		lease_detach(l);
		lease_answer(l, true, CLAIM_PUBLISHED);   /* node-local, as without the tier */
	}
}

static void on_stop(struct up_poller *p)
{
	struct up_lease *l = lease_of(p);
	lease_detach(l);
	lease_answer(l, false, CLAIM_GONE);
}

static void on_deadline(uv_timer_t *t)
{
	struct up_lease *l = t->data;
	lease_detach(l);
	lease_answer(l, false, CLAIM_TIMEOUT);
}

/* ---- the claims' side ---------------------------------------------------- */

int upstream_lease_take(struct kilnd *d, const char *alias, const struct toolchain *tc,
			const struct claim_owner *owner, uint64_t deadline, bool wait,
			upstream_lease_cb cb, void *arg)
{
	ASSERT_LOOP();
	if (d->up == NULL || tc == NULL || d->stopping)
		return 0;
	struct up_lease *l = table_get(leases(d), alias);
	if (l != NULL && l->cb != NULL && l->owner == owner)
		return -EALREADY;
	if (l != NULL && l->cb != NULL) {
		/* The claim went to another owner while its lookup waited for
		 * the lease (an expiry, a full table): the new owner waits on,
		 * with its own deadline; the old lookup looks again. */
		upstream_lease_cb old = l->cb;
		void *old_arg = l->arg;
		l->owner = owner;
		l->cb = cb;
		l->arg = arg;
		l->deadline = deadline;
		l->wait = wait;
		if (uv_is_active((uv_handle_t *)&l->timer)) {
			uint64_t now = uv_now(d->loop);
			uv_timer_start(&l->timer, on_deadline, deadline > now ? deadline - now : 0, 0);
		}
		old(old_arg, false, CLAIM_FREE);
		return 1;
	}
	if (l != NULL) {
		/* Held for a claim that ended unpublished, and taken over here
		 * (or about to end after its record): the new owner's now. */
		l->owner = owner;
		l->state = LEASE_HELD;
		return 0;
	}
	if ((l = calloc(1, sizeof(*l))) == NULL)
		return 0;
	if ((l->alias = strdup(alias)) == NULL || upstream_tc_copy(&l->tc, tc) != 0 ||
	    table_put(leases(d), alias, l, NULL) != 0) {
		upstream_tc_free(&l->tc);
		free(l->alias);
		free(l);
		return 0;
	}
	uint8_t digest[32];
	char hex[65];
	util_sha256(alias, strlen(alias), digest);
	util_hex(digest, 32, hex);
	snprintf(l->name, sizeof(l->name), "alias-%s", hex);
	l->d = d;
	l->owner = owner;
	l->cb = cb;
	l->arg = arg;
	l->deadline = deadline;
	l->wait = wait;
	l->in_table = true;
	l->refs = 1;
	l->poll.alias = true;
	l->poll.look = on_turn;
	l->poll.stop = on_stop;
	snprintf(l->poll.key, sizeof(l->poll.key), "%.16s", hex);
	uv_timer_init(d->loop, &l->timer);
	l->timer.data = l;
	if (lease_look(l) != 0) {
		l->cb = NULL;
		lease_detach(l);
		return 0;
	}
	return 1;
}

/* The claims' end hook: the local claim of alias ended; its lease with it. */
static void claim_ended(struct kilnd *d, const char *alias, const struct claim_owner *owner,
			enum claim_end why)
{
	struct up_lease *l = d->up != NULL ? table_get(leases(d), alias) : NULL;
	if (l == NULL || l->owner != owner)
		return;   /* none, or handed to a waiter that took the claim over */
	if (l->cb != NULL) {
		lease_detach(l);
		lease_answer(l, false, why);
		return;
	}
	if (why == CLAIM_PUBLISHED && l->records > 0) {
		l->state = LEASE_ENDING;   /* upstream_lease_record_end ends it */
		return;
	}
	lease_drop(l);
	lease_detach(l);
}

struct up_lease *upstream_lease_record_begin(struct kilnd *d, const char *alias)
{
	struct up_lease *l = d->up != NULL ? table_get(leases(d), alias) : NULL;
	if (l == NULL || l->state == LEASE_ASKING)
		return NULL;
	l->records++;
	l->refs++;
	return l;
}

void upstream_lease_record_end(struct kilnd *d, struct up_lease *l)
{
	(void)d;
	if (--l->records == 0 && l->state == LEASE_ENDING && l->in_table) {
		lease_drop(l);
		lease_detach(l);
	}
	lease_unref(l);
}

int upstream_lease_init(struct kilnd *d)
{
	claims_set_end_hook(d, claim_ended);
	return 0;
}

static void lease_forget(const char *key, void *val, void *ctx)
{
	struct up_lease *l = val;
	(void)key;
	(void)ctx;
	/* Its file, if held, is on the tier's list of claims, which
	 * upstream_fini closes: it goes stale. */
	l->held = NULL;
	l->in_table = false;
	uv_timer_stop(&l->timer);
	lease_unref(l);
}

void upstream_lease_fini(struct kilnd *d)
{
	claims_set_end_hook(d, NULL);
	table_foreach(leases(d), lease_forget, NULL);
}
