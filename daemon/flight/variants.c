/*
 * One input, one variant (docs/design.md, "Variants"): an alias that kilnd
 * builds under a second request key within VARIANT_WINDOW_NS names one
 * input (kiln.gt4py: GT4Py's key of the program to lower; kiln.dace: the
 * SDFG) that two processes turned into different code: DaCe's
 * transformations under Python's hash randomization, for one. It is said
 * once per alias in the log, with the keys, the likely cause and the
 * remedy, and counted (status.variants, kiln stats, the Slurm epilogue's
 * summary). Labels are not inputs: the static variants of one GT4Py
 * program (its domain bounds, a vertical_start) share a label and are
 * distinct programs, each under its own alias, and so are programs that
 * differ by argument types or connectivity tables; none is reported.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flight_int.h"
#include "kilnd.h"
#include "log.h"
#include "table.h"
#include "thread.h"
#include "util.h"

#define VARIANT_WINDOW_NS (3600ull * 1000000000ull)
#define VARIANT_NAMES_MAX 4096
#define VARIANT_KEYS 4

struct variant {
	char rkeys[VARIANT_KEYS][65];
	unsigned n;               /* request keys seen (up to VARIANT_KEYS kept) */
	uint64_t first_ns;
	bool said;
};

static void note(struct kilnd *d, const char *alias, const char *label, const char *rkey)
{
	char key[400];
	uint64_t now = util_now_ns();
	snprintf(key, sizeof(key), "%.300s", alias);
	if (d->variants == NULL || table_count(d->variants) >= VARIANT_NAMES_MAX) {
		table_free(d->variants, free);
		if ((d->variants = table_new()) == NULL)
			return;
	}
	struct variant *v = table_get(d->variants, key);
	if (v != NULL && now - v->first_ns > VARIANT_WINDOW_NS) {
		table_del(d->variants, key);
		free(v);
		v = NULL;
	}
	if (v == NULL) {
		if ((v = calloc(1, sizeof(*v))) == NULL || table_put(d->variants, key, v, NULL) != 0) {
			free(v);
			return;
		}
		v->first_ns = now;
	}
	for (unsigned i = 0; i < v->n && i < VARIANT_KEYS; i++) {
		if (strcmp(v->rkeys[i], rkey) == 0)
			return;
	}
	if (v->n < VARIANT_KEYS)
		snprintf(v->rkeys[v->n], sizeof(v->rkeys[v->n]), "%s", rkey);
	v->n++;
	if (v->n < 2)
		return;
	d->c.variant_builds++;
	if (v->said)
		return;
	v->said = true;
	d->c.variants++;
	log_warn("alias \"%s\"%s%.256s%s is built in more than one variant (request keys %.16s and "
		 "%.16s): two processes generated different code from the same input, most likely "
		 "nondeterministic code generation (DaCe's transformations under Python's hash "
		 "randomization); each variant costs a build and a cache entry. Remedy: set "
		 "PYTHONHASHSEED=0 (the Slurm prologue does unless the job set it)", alias,
		 label != NULL ? " (" : "", label != NULL ? label : "", label != NULL ? ")" : "",
		 v->rkeys[0], v->rkeys[1]);
}

void variants_note(struct kilnd *d, const struct build_input *in)
{
	ASSERT_LOOP();
	if (build_input_is_gch(in))
		return;
	if (in->req.alias != NULL)
		note(d, in->req.alias, in->req.label, in->rkey);
}

void variants_fini(struct kilnd *d)
{
	table_free(d->variants, free);
	d->variants = NULL;
}
