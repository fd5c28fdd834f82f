/*
 * The scheduler of the flights (flight_int.h, "flight_sched.c"): the
 * --jobs slots, the two FIFOs of flights waiting for one (the builds
 * clients wait for, and background ones), the flights holding a slot, and
 * the slots lent to a build's compile steps. It decides which flight gets
 * a slot and tells flight.c (flight_slot_granted); it never moves a
 * flight's state. Loop thread.
 */
#include <stdbool.h>
#include <stddef.h>

#include "flight.h"
#include "flight_int.h"
#include "kilnd.h"
#include "thread.h"

/* Two FIFOs: the builds clients wait for, and background ones (a .gch
 * nobody waits for), which get a slot only when kilnd is otherwise idle:
 * no build running or waiting. */
void sched_push(struct kilnd *d, struct flight *b)
{
	struct flight **head = b->in.background ? &d->fl->bg_head : &d->fl->queue_head;
	struct flight **tail = b->in.background ? &d->fl->bg_tail : &d->fl->queue_tail;
	b->qnext = NULL;
	if (*tail != NULL)
		(*tail)->qnext = b;
	else
		*head = b;
	*tail = b;
	d->fl->queued++;
}

struct flight *sched_pop(struct kilnd *d)
{
	bool bg = d->fl->queue_head == NULL;
	if (bg && d->fl->in_flight > 0 && !d->stopping)
		return NULL;
	struct flight **head = bg ? &d->fl->bg_head : &d->fl->queue_head;
	struct flight *b = *head;
	if (b == NULL)
		return NULL;
	*head = b->qnext;
	if (*head == NULL)
		*(bg ? &d->fl->bg_tail : &d->fl->queue_tail) = NULL;
	d->fl->queued--;
	return b;
}

/* Takes b out of whichever queue holds it; false when none does. */
bool sched_remove(struct kilnd *d, struct flight *b)
{
	struct flight **heads[2] = { &d->fl->queue_head, &d->fl->bg_head };
	struct flight **tails[2] = { &d->fl->queue_tail, &d->fl->bg_tail };
	for (int q = 0; q < 2; q++) {
		struct flight *prev = NULL, *it = *heads[q];
		while (it != NULL && it != b) {
			prev = it;
			it = it->qnext;
		}
		if (it == NULL)
			continue;
		*(prev != NULL ? &prev->qnext : heads[q]) = b->qnext;
		if (*tails[q] == b)
			*tails[q] = prev;
		b->qnext = NULL;
		d->fl->queued--;
		return true;
	}
	return false;
}

void flight_promote(struct flight *b)
{
	ASSERT_LOOP();
	struct kilnd *d = b->d;
	struct flight *prev = NULL, *q = d->fl->bg_head;
	while (q != NULL && q != b) {
		prev = q;
		q = q->qnext;
	}
	if (q == NULL)
		return;  /* not waiting in the background (running, or promoted) */
	*(prev != NULL ? &prev->qnext : &d->fl->bg_head) = b->qnext;
	if (d->fl->bg_tail == b)
		d->fl->bg_tail = prev;
	b->in.background = false;
	b->qnext = d->fl->queue_head;
	d->fl->queue_head = b;
	if (d->fl->queue_tail == NULL)
		d->fl->queue_tail = b;
}

static void running_add(struct kilnd *d, struct flight *b)
{
	b->rprev = NULL;
	b->rnext = d->fl->running;
	if (d->fl->running != NULL)
		d->fl->running->rprev = b;
	d->fl->running = b;
	d->fl->in_flight++;
	b->has_slot = true;
}

void sched_leave_slot(struct kilnd *d, struct flight *b)
{
	if (!b->has_slot)
		return;
	b->has_slot = false;
	if (b->rprev != NULL)
		b->rprev->rnext = b->rnext;
	else
		d->fl->running = b->rnext;
	if (b->rnext != NULL)
		b->rnext->rprev = b->rprev;
	d->fl->in_flight--;
}

void flight_release_slot(struct flight *b)
{
	sched_leave_slot(b->d, b);
	sched_pump(b->d);
}

/* Lent slots count against --jobs like a build's own; a build waiting in
 * the queue comes first. */
bool step_slot_borrow(struct kilnd *d)
{
	ASSERT_LOOP();
	if (d->stopping || d->fl->in_flight + d->fl->lent >= d->cfg->jobs || d->fl->queue_head != NULL)
		return false;
	d->fl->lent++;
	return true;
}

void step_slot_return(struct kilnd *d)
{
	ASSERT_LOOP();
	d->fl->lent--;
	sched_pump(d);
}

/* Moves queued flights into free slots (flight_slot_granted). */
void sched_pump(struct kilnd *d)
{
	/* A build that fails at once (the cache unusable) finishes inside
	 * flight_slot_granted and pumps again: that inner call only asks this loop to
	 * go on, so the stack does not grow with the queue. */
	struct flights *fl = d->fl;
	if (fl->pumping) {
		fl->pump_again = true;
		return;
	}
	fl->pumping = true;
	do {
		fl->pump_again = false;
		while (!d->stopping && d->fl->in_flight + d->fl->lent < d->cfg->jobs) {
			struct flight *b = sched_pop(d);
			if (b == NULL)
				break;
			running_add(d, b);
			flight_slot_granted(b);
		}
	} while (fl->pump_again);
	fl->pumping = false;
}

