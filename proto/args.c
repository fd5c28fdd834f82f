/*
 * The matcher of the allow-list of compiler arguments (args.h): walks a
 * request's arguments through the tables of args_table.c. An argument is
 * allowed when one table entry matches it exactly (or as the entry's joined
 * form), plus three open families of the driver whose members neither
 * write files nor load code: -f<feature> without a value, -W<warning>,
 * -m<machine>. Options whose value goes to another program (-Wl,...,
 * -Xlinker, -Xcompiler, ...) are checked by that program's table.
 * Everything else is refused, with a sentence naming the argument.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "args_table.h"
#include "validate.h"

#define QUOTE_MAX VALIDATE_QUOTE_MAX
/* Most elements in one comma-separated list. */
#define LIST_MAX 256
/* Longest list (the protocol's longest argument). */
#define LIST_LEN 4096

/* The walk over one request's arguments. */
struct walk {
	const char *arg;   /* the client's argument being checked */
	size_t at;         /* its index */
	bool refused;
	char *why;
	size_t whylen;
	bool *libs;        /* when not NULL: marks the top level's libraries */
	unsigned char *join; /* when not NULL: marks the top level's options
	                      * given apart from their value that read the same
	                      * joined (enum args_join) */
	enum args_family family; /* whose rules decide that (args_join_rules) */
	bool code;         /* an argument loads code into the toolchain */
	size_t code_at;
	char code_why[256];
};

/* Refuses the current argument: "argument "<arg>" is not allowed: <why>". */
__attribute__((format(printf, 2, 3)))
static int args_refuse(struct walk *w, const char *fmt, ...)
{
	char q[QUOTE_MAX + 4], reason[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	if (!w->refused && w->why != NULL && w->whylen > 0)
		snprintf(w->why, w->whylen, "argument \"%s\" is not allowed: %s",
			 validate_quote(w->arg, q), reason);
	w->refused = true;
	return -1;
}

/* Notes that the current argument loads code into the toolchain. */
static void note_code(struct walk *w, const char *tool)
{
	char q[QUOTE_MAX + 4];
	if (w->code)
		return;
	w->code = true;
	w->code_at = w->at;
	snprintf(w->code_why, sizeof(w->code_why),
		 "argument \"%s\" loads code into %s, which kilnd allows only when started "
		 "with --allow-toolchain-code", validate_quote(w->arg, q), tool);
}

static bool starts_with(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

static bool is_word(const char *v)
{
	if (*v == '\0')
		return false;
	for (; *v; v++)
		if (*v == '/' || (unsigned char)*v < 0x20 || *v == 0x7f)
			return false;
	return true;
}

/* The reason a driver option is refused, or NULL when none is known. */
static const char *known_reason(const char *a)
{
	for (size_t i = 0; i < args_nreasons; i++)
		if (args_reasons[i].prefix ? starts_with(a, args_reasons[i].text) : !strcmp(a, args_reasons[i].text))
			return args_reasons[i].why;
	return NULL;
}

static int refuse_unknown(struct walk *w, const struct args_tool *t, const char *el)
{
	char q[QUOTE_MAX + 4];
	const char *r = t == &args_tools[V_NONE] || t == &args_tools[V_HOST] ? known_reason(el) : NULL;
	if (r != NULL)
		return el == w->arg ? args_refuse(w, "%s", r) : args_refuse(w, "\"%s\": %s", validate_quote(el, q), r);
	if (el == w->arg)
		return args_refuse(w, "it is not one of the options kiln accepts "
			      "(docs/protocol.md, \"Compiler arguments\")");
	return args_refuse(w, "\"%s\" is not one of the options kiln passes to %s "
		      "(docs/protocol.md, \"Compiler arguments\")", validate_quote(el, q), t->what);
}

/*
 * Matches el against one entry: true with *val at its joined value (NULL
 * when the value is the next element, *sep set).
 */
static bool match(const struct args_opt *o, const char *el, const char **val, bool *sep)
{
	*val = NULL;
	*sep = false;
	/* Every form needs el to begin with the name: its first two characters
	 * reject nearly every entry of a table without a strlen or strncmp (the
	 * walk runs for every argument of every request). */
	if (o->name[0] != '\0' &&
	    (o->name[0] != el[0] || (o->name[1] != '\0' && o->name[1] != el[1])))
		return false;
	size_t n = strlen(o->name);
	switch (o->form) {
	case F_EXACT:
		return strcmp(el, o->name) == 0;
	case F_JOINED:
	case F_LIST:
		if (!starts_with(el, o->name))
			return false;
		*val = el + n;
		return true;
	case F_EQ:
		if (!starts_with(el, o->name) || el[n] != '=')
			return false;
		*val = el + n + 1;
		return true;
	case F_SEP:
		return (*sep = strcmp(el, o->name) == 0);
	case F_JOINED_OR_SEP:
		if (!starts_with(el, o->name))
			return false;
		*sep = el[n] == '\0';
		*val = *sep ? NULL : el + n;
		return true;
	default: /* F_EQ_OR_SEP */
		if (!starts_with(el, o->name) || (el[n] != '\0' && el[n] != '='))
			return false;
		*sep = el[n] == '\0';
		*val = *sep ? NULL : el + n + 1;
		return true;
	}
}

static const struct args_opt *lookup(const struct args_opt *opts, size_t n, const char *el,
				const char **val, bool *sep)
{
	for (size_t i = 0; i < n; i++)
		if (match(&opts[i], el, val, sep))
			return &opts[i];
	return NULL;
}

static int check_list(struct walk *w, const struct args_tool *t, const char *list);
static int check_elems(struct walk *w, const struct args_tool *t, const char *const *el, size_t n);

/* Checks a value that goes to another program (kind is its tool). */
static int check_passed(struct walk *w, const struct args_opt *o, const char *val)
{
	const struct args_tool *t = &args_tools[o->value];
	if (o->form == F_LIST || (o->flags & OPT_SPLIT))
		return check_list(w, t, val);
	/* One element, given as it is; nvcc would split it at commas, so
	 * its parts must pass too. */
	if (check_elems(w, t, &val, 1) < 0)
		return -1;
	return strchr(val, ',') != NULL ? check_list(w, t, val) : 0;
}

/* Checks the value of a matched entry. */
static int check_value(struct walk *w, const struct args_tool *t, const struct args_opt *o, const char *val)
{
	char q[QUOTE_MAX + 4];
	if (o->flags & OPT_CODE)
		note_code(w, t == &args_tools[V_NONE] ? "the toolchain" : t->what);
	if (val == NULL)
		return 0;
	switch (o->value) {
	case V_NONE:
	case V_ANY:
	case V_PATH:
		return 0;
	case V_WORD:
		return is_word(val) || (val[0] == '\0' && o->form == F_JOINED) ? 0 : args_refuse(w, "the value \"%s\" of %s must be a word "
						 "without '/'", validate_quote(val, q), o->name);
	default:
		return check_passed(w, o, val);
	}
}

/* The driver's open families: -f<feature>[=value], -W<warning>. */
static int check_family(struct walk *w, const struct args_tool *t, const char *el)
{
	char q[QUOTE_MAX + 4], name[80];
	if (el[1] == 'W' && (el[2] == '\0' || is_word(el + 2)) && strchr(el, ',') == NULL)
		return 0;
	if (el[1] != 'f' || el[2] == '\0')
		return refuse_unknown(w, t, el);
	const char *f = starts_with(el + 2, "no-") ? el + 5 : el + 2;
	const char *eq = strchr(f, '=');
	if (eq == NULL) {
		/* Features without a value write, if anything, next to the
		 * output, in the build directory. */
		for (const char *p = f; *p; p++)
			if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			      (*p >= '0' && *p <= '9') || strchr("_+-.", *p) != NULL))
				return args_refuse(w, "\"%s\" is not a compiler feature name",
					      validate_quote(el, q));
		return 0;
	}
	snprintf(name, sizeof(name), "%.*s", (int)(eq - f), f);
	for (size_t i = 0; i < args_nf_value_opts; i++) {
		if (strcmp(name, args_f_value_opts[i].name) != 0)
			continue;
		if (!strcmp(name, "use-ld") && strchr(eq + 1, '/') != NULL) {
			note_code(w, "the toolchain");
			return 0;
		}
		return check_value(w, t, &args_f_value_opts[i], eq + 1);
	}
	if (known_reason(el) != NULL)
		return refuse_unknown(w, t, el);
	return args_refuse(w, "-f options with a value are allowed only from kiln's list "
		      "(docs/protocol.md, \"Compiler arguments\"), and \"-f%s=\" is not on it", name);
}

int args_join_text(const char *opt, const char *val, enum args_join how, char *out, size_t len)
{
	int n = snprintf(out, len, "%s%s%s", opt, how == ARGS_JOIN_EQ ? "=" : "", val);
	return n >= 0 && (size_t)n < len ? 0 : -1;
}

/* How family joins the driver option name given apart (args_join_rules):
 * ARGS_JOIN_NONE for an option it does not read the same joined, or one
 * the table does not list. */
static enum args_join join_rule(const char *name, enum args_family family)
{
	for (size_t i = 0; i < args_njoin_rules; i++) {
		const struct args_join_rule *r = &args_join_rules[i];
		if (strcmp(r->name, name) != 0)
			continue;
		unsigned char how = family == ARGS_FAMILY_GCC ? r->gcc
				    : family == ARGS_FAMILY_CLANG ? r->clang
				    : family == ARGS_FAMILY_NVCC ? r->nvcc : J_NO;
		return how == J_DIRECT ? ARGS_JOIN_DIRECT : how == J_EQ ? ARGS_JOIN_EQ : ARGS_JOIN_NONE;
	}
	return ARGS_JOIN_NONE;
}

/* How option o (given apart) with val reads the same joined: the family's
 * tool reads its joined text as o with val (join_rule), and kiln's table
 * reads it back as o with val too, not as another option that happens to
 * begin the same way ("-l" "ib" is not nvcc's "-lib"). A value that begins
 * with '=' stays apart: nvcc reads "-I=inc" as the directory "inc". */
static enum args_join joins_same(const struct walk *w, const struct args_tool *t,
				 const struct args_opt *o, const char *val)
{
	char buf[LIST_LEN + 64];
	const char *v2;
	bool sep;
	enum args_join how = join_rule(o->name, w->family);

	if (how == ARGS_JOIN_NONE || val[0] == '\0' || val[0] == '=' ||
	    args_join_text(o->name, val, how, buf, sizeof(buf)) != 0)
		return ARGS_JOIN_NONE;
	const struct args_opt *again = lookup(t->extra, t->nextra, buf, &v2, &sep);
	if (again == NULL)
		again = lookup(t->opts, t->nopts, buf, &v2, &sep);
	/* An option whose own form is "-xVALUE" reads nvcc's "-x=cu" as "=cu". */
	if (v2 != NULL && how == ARGS_JOIN_EQ && o->form == F_JOINED_OR_SEP && v2[0] == '=')
		v2++;
	return again == o && !sep && v2 != NULL && strcmp(v2, val) == 0 ? how : ARGS_JOIN_NONE;
}

/* Checks element *i of el (and the value after it, moving *i past it). */
static int check_elem(struct walk *w, const struct args_tool *t, const char *const *el, size_t n,
		      size_t *i)
{
	char q[QUOTE_MAX + 4];
	const char *a = el[*i], *val;
	const struct args_opt *o;
	bool sep;

	if (a[0] == '\0')
		return a == w->arg ? args_refuse(w, "it is empty")
				   : args_refuse(w, "it passes an empty element to %s", t->what);
	if (a[0] == '@')
		return args_refuse(w, "response files would read options the request does not show");
	if (a[0] != '-' || a[1] == '\0')
		return t->positionals ? 0 : args_refuse(w, "\"%s\" is not an option of %s; "
						      "only options and their values may be passed to it",
						      validate_quote(a, q), t->what);
	o = lookup(t->extra, t->nextra, a, &val, &sep);
	if (o == NULL)
		o = lookup(t->opts, t->nopts, a, &val, &sep);
	if (o == NULL)
		return t->families ? check_family(w, t, a) : refuse_unknown(w, t, a);
	if (o->flags & OPT_DENY)
		return refuse_unknown(w, t, a);
	bool lib = w->libs != NULL && a == w->arg && o->name[0] == '-' && o->name[1] == 'l' &&
		   o->name[2] == '\0';
	if (lib)
		w->libs[*i] = true;
	if (sep && t->consumes) {
		/* Within a passed-on element, a program that takes lone words
		 * as inputs gets the value in a later argument, checked then. */
		if (*i + 1 >= n && t->positionals && a != w->arg)
			return check_value(w, t, o, NULL);
		if (*i + 1 >= n)
			return args_refuse(w, "%s needs a value%s", o->name,
				      a == w->arg ? "" : " in the same argument");
		val = el[++*i];
		if (lib)
			w->libs[*i] = true;
		if (w->join != NULL && a == w->arg && t == &args_tools[V_NONE])
			w->join[*i - 1] = (unsigned char)joins_same(w, t, o, val);
		if (val[0] == '-' && o->value < V_LINKER)
			return args_refuse(w, "the value of %s may not start with '-'", o->name);
	}
	return check_value(w, t, o, val);
}

static int check_elems(struct walk *w, const struct args_tool *t, const char *const *el, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (check_elem(w, t, el, n, &i) < 0)
			return -1;
	return 0;
}

/* Splits list at commas and checks its elements with t. */
static int check_list(struct walk *w, const struct args_tool *t, const char *list)
{
	char buf[LIST_LEN + 1];
	const char *el[LIST_MAX];
	size_t n = 0, len = strlen(list);

	if (len > LIST_LEN)
		return args_refuse(w, "its list is longer than %d bytes", LIST_LEN);
	memcpy(buf, list, len + 1);
	for (char *p = buf;;) {
		if (n == LIST_MAX)
			return args_refuse(w, "its list has more than %d elements", LIST_MAX);
		el[n++] = p;
		p = strchr(p, ',');
		if (p == NULL)
			break;
		*p++ = '\0';
	}
	return check_elems(w, t, el, n);
}

/* Characters a shell or make would read as more than text. */
static const char shell_chars[] = " \t\n\r\v\f$`'\"\\;|&<>()*?{}#";

static void refuse_shell(struct walk *w)
{
	char c = w->arg[strcspn(w->arg, shell_chars)], what[16];
	snprintf(what, sizeof(what), c == ' ' ? "a space" : isspace((unsigned char)c)
		 ? "white space" : "'%c'", c);
	args_refuse(w, "nvcc runs its steps through a shell, which would read %s in it; kiln "
	       "refuses white space, quotes and $`\\;|&<>()*?{}# in arguments for nvcc", what);
}

enum args_verdict validate_args_for(const char *const *args, size_t n, unsigned flags, bool *libs,
				    size_t *at, char *why, size_t whylen)
{
	struct walk w = { .why = why, .whylen = whylen, .libs = libs };
	const struct args_tool *t = &args_tools[V_NONE];

	if (why != NULL && whylen > 0)
		why[0] = '\0';
	for (size_t i = 0; libs != NULL && i < n; i++)
		libs[i] = false;
	/* Every argument, also those read as values by the walk below. */
	for (size_t i = 0; (flags & ARGS_SHELL) && i < n; i++) {
		if (args[i] == NULL || args[i][strcspn(args[i], shell_chars)] == '\0')
			continue;
		w.arg = args[i];
		w.at = i;
		refuse_shell(&w);
		if (at != NULL)
			*at = i;
		return ARGS_REFUSED;
	}
	for (size_t i = 0; i < n; i++) {
		w.arg = args[i] != NULL ? args[i] : "";
		w.at = i;
		if (args[i] == NULL) {
			args_refuse(&w, "it is missing");
		} else if (check_elem(&w, t, args, n, &i) == 0) {
			continue;
		}
		if (at != NULL)
			*at = w.at;
		return ARGS_REFUSED;
	}
	if (!w.code)
		return ARGS_OK;
	if (at != NULL)
		*at = w.code_at;
	if (why != NULL && whylen > 0)
		snprintf(why, whylen, "%s", w.code_why);
	return ARGS_CODE;
}

enum args_verdict args_joinable(const char *const *args, size_t n, enum args_family family,
				unsigned char *join)
{
	struct walk w = { .join = join, .family = family };
	const struct args_tool *t = &args_tools[V_NONE];

	for (size_t i = 0; i < n; i++)
		join[i] = ARGS_JOIN_NONE;
	for (size_t i = 0; i < n; i++) {
		w.arg = args[i] != NULL ? args[i] : "";
		w.at = i;
		if (args[i] == NULL || check_elem(&w, t, args, n, &i) != 0) {
			for (size_t k = 0; k < n; k++)
				join[k] = ARGS_JOIN_NONE;
			return ARGS_REFUSED;
		}
	}
	return w.code ? ARGS_CODE : ARGS_OK;
}

enum args_verdict validate_args(const char *const *args, size_t n, size_t *at, char *why,
				size_t whylen)
{
	return validate_args_for(args, n, 0, NULL, at, why, whylen);
}
