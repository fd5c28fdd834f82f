/*
 * The turn to send a request key's text (text_turn.c): a herd of gets by
 * digest that miss at once sends one text, not one per client
 * (docs/design.md, "A herd by digest waits for one text"). Loop thread.
 */
#ifndef KILN_DAEMON_TEXT_TURN_H
#define KILN_DAEMON_TEXT_TURN_H

struct build_input;
struct conn;
struct kilnd;

/* How long a get waits for another client's text before it is asked for
 * its own. */
#define TEXT_WAIT_MS 2000
/* A connection that holds this many claims (turns and aliases') takes no
 * more turns, so that its lookups' claims of aliases (CLAIMS_PER_OWNER in
 * all) keep room. */
#define TEXT_TURNS_MAX 512

/* Looks a get up again once its wait ended (op_get.c's resolve_get). */
typedef void (*text_again_fn)(struct conn *c, struct build_input *in, int fd);

/*
 * A get by digest (in, owned) that missed with no flight to join: answers
 * need_sources (this client takes the key's turn and sends the text), or
 * parks the get until another client's turn ends, then calls again(c, in,
 * -1) (its text was answered or joined the flight, or its connection
 * closed), or after TEXT_WAIT_MS answers need_sources and ends the turn for
 * every waiter; shutting_down when kilnd stops; nothing when c closes.
 */
void text_turn_need(struct conn *c, struct build_input *in, text_again_fn again);
/* A get with the text for rkey was answered or joined its flight: the
 * turn ends, and the gets waiting on it look again. */
void text_turn_done(struct kilnd *d, const char *rkey);

#endif
