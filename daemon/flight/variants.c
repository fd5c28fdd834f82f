/*
 * One program, one variant (docs/design.md, "Variants"): a program that
 * kilnd builds under a second request key within VARIANT_WINDOW_NS (the
 * same label, as kiln.dace's "dace <name>", or the same alias) was most
 * likely generated differently by two processes of one job: DaCe's
 * transformations under Python's hash randomization, for one. It is
 * said once per program in the log, with the keys, the likely cause and
 * the remedy, and counted (status.variants, kiln stats, the Slurm
 * epilogue's summary).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_int.h"
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

static void note(struct kilnd *d, const char *what, const char *name, const char *rkey)
{
	char key[400];
	uint64_t now = util_now_ns();
	snprintf(key, sizeof(key), "%s:%.300s", what, name);
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
	log_warn("%s \"%s\" is built in more than one variant (request keys %.16s and %.16s): "
		 "two processes generated different code for one program, most likely "
		 "nondeterministic code generation (DaCe's transformations under Python's hash "
		 "randomization); each variant costs a build and a cache entry. Remedy: set "
		 "PYTHONHASHSEED=0 (the Slurm prologue does unless the job set it)", what, name,
		 v->rkeys[0], v->rkeys[1]);
}

void variants_note(struct kilnd *d, const struct build_input *in)
{
	ASSERT_LOOP();
	if (build_is_pch(in))
		return;
	if (in->req.label != NULL)
		note(d, "program", in->req.label, in->rkey);
	else if (in->req.alias != NULL)
		note(d, "alias", in->req.alias, in->rkey);
}

void variants_fini(struct kilnd *d)
{
	table_free(d->variants, free);
	d->variants = NULL;
}
