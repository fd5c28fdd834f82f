/*
 * The turn to send a request key's text (text_turn.h). A get by digest that
 * misses with no flight to join is answered need_sources and takes the
 * key's turn: a claim (claims.h) on "text <rkey>", a name no alias can
 * have (aliases hold no space). Gets by digest of that key from other
 * connections wait on the claim instead of each being asked for the text
 * (a herd: every rank of a node asks at once, and each text would be sent,
 * parsed and hashed for nothing). The turn ends
 *   - when a get with the text for the key is answered or joins its flight
 *     (text_turn_done): the waiters look again and join it, or hit;
 *   - when its connection goes away (claims_owner_gone): they look again,
 *     one takes the turn and is asked for the text, the others wait on it;
 *   - when a waiter has waited TEXT_WAIT_MS: the turn's client is taken to
 *     be stuck (its text refused, say), the turn is ended for all, and that
 *     waiter is asked for its own text.
 * A connection that holds any claim starts no wait: libkiln's kiln_get_many
 * sends its texts only once every reply of its batch is in, so two batches
 * waiting on each other's turns would each hold the other up until the
 * waits ran out. A waiter looks again through the same resolution, so it
 * is only ever served its own request key. A turn whose client never sends
 * the text and stays connected lasts until another client's wait on it
 * runs out, until that client closes, or until the claims' expiry. Turns
 * share the node's claims with the aliases' (claims.h: per process, and a
 * full table makes room for a process holding fewer), so another
 * client's claims never cost a herd its turn.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "flight.h"
#include "claims.h"
#include "kilnd.h"
#include "msg.h"
#include "server.h"
#include "text_turn.h"

#define TEXT_NAME_LEN (5 + 64)

static void turn_name(const char *rkey, char out[TEXT_NAME_LEN + 1])
{
	memcpy(out, "text ", 5);
	memcpy(out + 5, rkey, 64);
	out[TEXT_NAME_LEN] = '\0';
}

static void need_sources(struct conn *c, struct build_input *in)
{
	c->d->c.need_sources++;
	conn_reply_error(c, in->req.id, ERR_NEED_SOURCES, "sources",
			 "no entry for these sources; send their text");
	build_input_free(in);
	free(in);
}

struct text_wait {
	struct conn *c;
	struct build_input *in;
	text_again_fn again;
};

static void wake(void *arg, enum claim_end why)
{
	struct text_wait *w = arg;
	struct conn *c = w->c;
	if (c->dead || why == CLAIM_LEFT) {
		build_input_free(w->in);   /* gone while it waited: nothing to answer */
		free(w->in);
	} else if (why == CLAIM_GONE) {
		conn_reply_error(c, w->in->req.id, ERR_SHUTTING_DOWN, NULL, "kilnd is shutting down");
		build_input_free(w->in);
		free(w->in);
	} else if (why == CLAIM_TIMEOUT) {
		c->d->c.text_timeouts++;
		text_turn_done(c->d, w->in->rkey);   /* the others look again now */
		need_sources(c, w->in);
	} else {
		/* The text came, or the turn's client went away: look again. */
		w->again(c, w->in, -1);
	}
	conn_unref(c);
	free(w);
}

void text_turn_need(struct conn *c, struct build_input *in, text_again_fn again)
{
	struct kilnd *d = c->d;
	char name[TEXT_NAME_LEN + 1];
	if (c->dead) {
		/* Its claims ended when it closed; one taken now would outlive
		 * it. Nothing to answer. */
		build_input_free(in);
		free(in);
		return;
	}
	turn_name(in->rkey, name);
	bool holds = c->claims.nclaims > 0;
	if (c->claims.nclaims >= TEXT_TURNS_MAX) {
		d->c.claims_refused++;
		need_sources(c, in);   /* asked without a turn: others ask too */
		return;
	}
	enum claim_take took = claims_take(d, name, CLAIM_TURN, &c->claims);
	if (took == CLAIM_OWNER_FULL || took == CLAIM_PEER_FULL || took == CLAIM_FULL)
		d->c.claims_refused++;   /* a limit of this client's: it sends the text unturned */
	if (took == CLAIM_OTHER && !holds) {
		struct text_wait *w = calloc(1, sizeof(*w));
		if (w != NULL) {
			*w = (struct text_wait){ .c = c, .in = in, .again = again };
			if (claims_wait(d, name, TEXT_WAIT_MS, &c->claims, wake, w) == 0) {
				conn_ref(c);
				if (!in->text_waited)
					d->c.text_waits++;
				in->text_waited = true;
				return;
			}
			free(w);
		}
	}
	/* This client has the turn now (or had it), or holds other claims, or
	 * no wait was to be had (a limit, memory, kilnd stopping): it sends the
	 * text. */
	need_sources(c, in);
}

void text_turn_done(struct kilnd *d, const char *rkey)
{
	char name[TEXT_NAME_LEN + 1];
	turn_name(rkey, name);
	claims_published(d, name);
}
