/*
 * Validation of names and compiler arguments that come from clients. The
 * daemon enforces these rules; libkiln and the CLI run the same checks first
 * so that a user sees the same sentence without a round trip.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "validate.h"

/* Longest part of a refused value that is quoted back in a message. */
#define QUOTE_MAX 64

/*
 * Copies s into out for quoting in a message: control bytes and non-ASCII
 * bytes become '?' so that a hostile value cannot forge lines in a log, and a
 * long value is cut with "..." so that the sentence around it survives.
 */
static const char *quote(const char *s, char out[QUOTE_MAX + 4])
{
	size_t i;

	for (i = 0; s[i] && i < QUOTE_MAX; i++) {
		unsigned char ch = (unsigned char)s[i];

		out[i] = ch < 0x20 || ch >= 0x7f ? '?' : (char)ch;
	}
	if (s[i]) {
		memcpy(out + i, "...", 3);
		i += 3;
	}
	out[i] = '\0';
	return out;
}

__attribute__((format(printf, 3, 4)))
static int refuse(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	if (why && whylen) {
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

static bool is_name_char(unsigned char ch)
{
	return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
	       (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '+' ||
	       ch == '-';
}

/* Describes a refused character for a message, e.g. "a space". */
static const char *describe_char(unsigned char ch, char buf[32])
{
	if (ch == ' ')
		return "a space";
	if (ch == '/')
		return "'/'";
	if (ch < 0x20 || ch == 0x7f)
		snprintf(buf, 32, "a control character (0x%02x)", ch);
	else if (ch >= 0x80)
		snprintf(buf, 32, "a non-ASCII byte (0x%02x)", ch);
	else
		snprintf(buf, 32, "'%c'", ch);
	return buf;
}

/* Shared rules of source and toolchain names; what names the kind of name. */
static int check_name(const char *what, const char *name, size_t max, bool no_dot,
		      char *why, size_t whylen)
{
	char q[QUOTE_MAX + 4], c[32];
	size_t len, i;

	if (!name)
		return refuse(why, whylen, "%s is missing", what);
	len = strlen(name);
	if (len == 0)
		return refuse(why, whylen, "%s is empty", what);
	if (len > max)
		return refuse(why, whylen, "%s \"%s\" is longer than %zu characters",
			      what, quote(name, q), max);
	if (strchr(name, '/'))
		return refuse(why, whylen,
			      "%s \"%s\" is not a plain file name: it contains '/'",
			      what, quote(name, q));
	if (no_dot && name[0] == '.')
		return refuse(why, whylen,
			      "%s \"%s\" is not a plain file name: it starts with '.'",
			      what, quote(name, q));
	if (name[0] == '-')
		return refuse(why, whylen,
			      "%s \"%s\" starts with '-', which a compiler would read as an option",
			      what, quote(name, q));
	for (i = 0; i < len; i++) {
		if (!is_name_char((unsigned char)name[i]))
			return refuse(why, whylen,
				      "%s \"%s\" contains %s; only letters, digits and . _ + - are allowed",
				      what, quote(name, q),
				      describe_char((unsigned char)name[i], c));
	}
	return 0;
}

int validate_source_name(const char *name, char *why, size_t whylen)
{
	return check_name("source name", name, 255, true, why, whylen);
}

int validate_toolchain_name(const char *name, char *why, size_t whylen)
{
	return check_name("toolchain name", name, 64, false, why, whylen);
}

int validate_alias(const char *alias, char *why, size_t whylen)
{
	char q[QUOTE_MAX + 4], c[32];
	size_t len, i;

	if (!alias)
		return refuse(why, whylen, "alias is missing");
	len = strlen(alias);
	if (len == 0)
		return refuse(why, whylen, "alias is empty");
	if (len > 256)
		return refuse(why, whylen, "alias \"%s\" is longer than 256 characters",
			      quote(alias, q));
	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)alias[i];

		if (ch < 0x21 || ch > 0x7e)
			return refuse(why, whylen,
				      "alias \"%s\" contains %s; only printable ASCII without spaces is allowed",
				      quote(alias, q), describe_char(ch, c));
	}
	return 0;
}

/*
 * Decodes one UTF-8 sequence at s (n bytes left). Returns its length and the
 * code point in *cp, or 0 for an invalid, overlong or surrogate sequence.
 */
static size_t utf8_decode(const unsigned char *s, size_t n, unsigned *cp)
{
	size_t len, i;
	unsigned v, min;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	} else if ((s[0] & 0xe0) == 0xc0) {
		len = 2, v = s[0] & 0x1f, min = 0x80;
	} else if ((s[0] & 0xf0) == 0xe0) {
		len = 3, v = s[0] & 0x0f, min = 0x800;
	} else if ((s[0] & 0xf8) == 0xf0) {
		len = 4, v = s[0] & 0x07, min = 0x10000;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		v = v << 6 | (s[i] & 0x3f);
	}
	if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		return 0;
	*cp = v;
	return len;
}

int validate_label(const char *label, char *why, size_t whylen)
{
	const unsigned char *s = (const unsigned char *)label;
	size_t len, i, n;
	unsigned cp;

	if (!label)
		return refuse(why, whylen, "label is missing");
	len = strlen(label);
	if (len == 0)
		return refuse(why, whylen, "label is empty");
	if (len > 256)
		return refuse(why, whylen, "label is longer than 256 bytes");
	for (i = 0; i < len; i += n) {
		n = utf8_decode(s + i, len - i, &cp);
		if (n == 0)
			return refuse(why, whylen, "label is not valid UTF-8 (at byte %zu)", i);
		/* C0, DEL and C1 controls could forge lines in listings and logs. */
		if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))
			return refuse(why, whylen,
				      "label contains a control character (U+%04X at byte %zu)",
				      cp, i);
	}
	return 0;
}

static bool is_lower_hex(const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	}
	return true;
}

int validate_key(const char *key)
{
	if (!key || strlen(key) != 64 || !is_lower_hex(key, 64))
		return -1;
	return 0;
}

int validate_key_prefix(const char *s)
{
	size_t len;

	if (!s)
		return -1;
	len = strlen(s);
	if (len < 4 || len > 64 || !is_lower_hex(s, len))
		return -1;
	return 0;
}

static bool starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/*
 * True when arg is the long option full ("--output") or an abbreviation of it
 * ("--out", "--outp=x"): gcc and GNU ld accept unambiguous abbreviations, so
 * refusing only the full spelling would leave a way around the rule.
 */
static bool long_opt(const char *arg, const char *full)
{
	size_t n;

	if (arg[0] != '-' || arg[1] != '-')
		return false;
	n = strcspn(arg, "=");
	return n > 2 && n <= strlen(full) && strncmp(arg, full, n) == 0;
}

/*
 * True when one argument of the linker, assembler or preprocessor names an
 * output or a response file: "-o", "-oFILE" (single-dash options that begin
 * with 'o' mean -o to GNU ld), "--output" and its abbreviations, "@file".
 */
static bool tool_arg_redirects(const char *a, bool cpp)
{
	if (a[0] == '@')
		return true;
	if (a[0] == '-' && a[1] == 'o')
		return true;
	if (long_opt(a, "--output") || starts_with(a, "--output"))
		return true;
	/* The preprocessor can also write dependency files. */
	if (cpp && a[0] == '-' && a[1] == 'M')
		return true;
	return false;
}

/* Checks each comma-separated element of "-Wl,...", "-Wa,..." or "-Wp,...". */
static bool tool_list_redirects(const char *list, bool cpp)
{
	char elem[128];
	const char *p = list;
	size_t n;

	for (;;) {
		n = strcspn(p, ",");
		/* Elements longer than the buffer cannot be one of the short
		 * options we look for, but they may still start with one. */
		if (n >= sizeof(elem))
			n = sizeof(elem) - 1;
		memcpy(elem, p, n);
		elem[n] = '\0';
		if (tool_arg_redirects(elem, cpp))
			return true;
		p = strchr(p, ',');
		if (!p)
			return false;
		p++;
	}
}

/* One refused form: an exact argument or a prefix, and why it is refused. */
struct arg_rule {
	const char *text;
	bool prefix;
	const char *why;
};

static const char why_output[] = "the daemon chooses the output file";
static const char why_deps[] = "the daemon writes and reads the dependency file itself";
static const char why_kind[] = "it changes the kind of output the daemon builds";
static const char why_plugin[] = "it loads code into the compiler that the cache key does not cover";
static const char why_temps[] = "it writes files outside the build";
static const char why_host[] = "it picks the host compiler, which only kilnd's configuration may";
static const char why_optf[] = "options files would read options the request does not show";
static const char why_run[] = "it runs the program it builds";

static const struct arg_rule arg_rules[] = {
	{ "-o", true, why_output },
	{ "--output", true, why_output },
	{ "-M", true, why_deps },
	{ "-c", false, why_kind },
	{ "-S", false, why_kind },
	{ "-E", false, why_kind },
	{ "-fplugin", true, why_plugin },
	{ "-fpass-plugin", true, why_plugin },
	{ "-iplugindir", true, why_plugin },
	{ "-specs", true, why_plugin },
	{ "--specs", true, why_plugin },
	{ "-wrapper", true, why_plugin },
	{ "-B", true, why_plugin },
	{ "--ld-path", true, why_plugin },
	{ "-save-temps", true, why_temps },
	{ "--save-temps", true, why_temps },
	{ "-dumpdir", true, why_temps },
	{ "-dumpbase", true, why_temps },
	/* nvcc's */
	{ "-ccbin", true, why_host },
	{ "--compiler-bindir", true, why_host },
	{ "-optf", true, why_optf },
	{ "--options-file", true, why_optf },
	{ "-run", false, why_run },
	{ "--run", true, why_run },
	{ "-keep", true, why_temps },
	{ "--keep", true, why_temps },
	{ "--dependency-output", true, why_deps },
	{ "--generate-dependencies", true, why_deps },
	{ "--generate-nonsystem-dependencies", true, why_deps },
	{ "-cubin", false, why_kind },
	{ "--cubin", false, why_kind },
	{ "-ptx", false, why_kind },
	{ "--ptx", false, why_kind },
	{ "-fatbin", false, why_kind },
	{ "--fatbin", false, why_kind },
	{ "-dc", false, why_kind },
	{ "--device-c", false, why_kind },
	{ "-dw", false, why_kind },
	{ "--device-w", false, why_kind },
	{ "-dlink", false, why_kind },
	{ "--device-link", false, why_kind },
	{ "-lib", false, why_kind },
	{ "--lib", false, why_kind },
	{ "-cuda", false, why_kind },
	{ "--cuda", false, why_kind },
	{ "-link", false, why_kind },
	{ "--link", false, why_kind },
	{ "-optix-ir", false, why_kind },
	{ "--optix-ir", false, why_kind },
};

/* nvcc's options that pass their value, a comma-separated list, to another
 * tool: the host compiler's is checked like the driver's arguments, the
 * others for outputs and response files. */
static const struct {
	const char *opt;
	bool host;
} nvcc_tool_opts[] = {
	{ "-Xcompiler", true }, { "--compiler-options", true },
	{ "-Xptxas", false }, { "--ptxas-options", false },
	{ "-Xnvlink", false }, { "--nvlink-options", false },
	{ "-Xfatbin", false }, { "--fatbin-options", false },
	{ "-Xarchive", false }, { "--archive-options", false },
};

static int check_arg_alone(const char *arg, char *why, size_t whylen);

/* Checks the value of an nvcc tool option (list) for the tool named opt. */
static int check_tool_list(const char *opt, bool host, const char *list, char *why, size_t whylen)
{
	char q[QUOTE_MAX + 4], elem[256];
	const char *p = list;
	for (;;) {
		size_t n = strcspn(p, ",");
		if (n >= sizeof(elem))
			n = sizeof(elem) - 1;
		memcpy(elem, p, n);
		elem[n] = '\0';
		if (host && elem[0] != '\0' && check_arg_alone(elem, why, whylen) != 0)
			return -1;
		if (!host && tool_arg_redirects(elem, false))
			return refuse(why, whylen,
				      "argument \"%s\" is not allowed after \"%s\": it passes an output or "
				      "response file to that tool", quote(list, q), opt);
		p = strchr(p, ',');
		if (p == NULL)
			return 0;
		p++;
	}
}

/* gcc's long spellings of refused options, matched with abbreviations. */
static const struct arg_rule long_rules[] = {
	{ "--output", false, why_output },
	{ "--dependencies", false, why_deps },
	{ "--user-dependencies", false, why_deps },
	{ "--write-dependencies", false, why_deps },
	{ "--write-user-dependencies", false, why_deps },
	{ "--print-missing-file-dependencies", false, why_deps },
	{ "--compile", false, why_kind },
	{ "--assemble", false, why_kind },
	{ "--preprocess", false, why_kind },
	{ "--specs", false, why_plugin },
	{ "--save-temps", false, why_temps },
	{ "--dumpdir", false, why_temps },
	{ "--dumpbase", false, why_temps },
	{ "--prefix", false, why_plugin },
	{ "--for-linker", false, "use -Wl, or -Xlinker, whose arguments are checked" },
	{ "--for-assembler", false, "use -Wa, or -Xassembler, whose arguments are checked" },
};

/* Checks arg on its own, without regard to the argument before it. */
static int check_arg_alone(const char *arg, char *why, size_t whylen)
{
	char q[QUOTE_MAX + 4];
	size_t i;

	for (i = 0; i < sizeof(arg_rules) / sizeof(arg_rules[0]); i++) {
		const struct arg_rule *r = &arg_rules[i];

		if (r->prefix ? starts_with(arg, r->text) : strcmp(arg, r->text) == 0)
			return refuse(why, whylen, "argument \"%s\" is not allowed: %s",
				      quote(arg, q), r->why);
	}
	for (i = 0; i < sizeof(long_rules) / sizeof(long_rules[0]); i++) {
		if (long_opt(arg, long_rules[i].text))
			return refuse(why, whylen, "argument \"%s\" is not allowed: %s",
				      quote(arg, q), long_rules[i].why);
	}
	if (arg[0] == '@')
		return refuse(why, whylen,
			      "argument \"%s\" is not allowed: response files would read options the request does not show",
			      quote(arg, q));
	if (starts_with(arg, "-fuse-ld=") && strchr(arg, '/'))
		return refuse(why, whylen, "argument \"%s\" is not allowed: %s",
			      quote(arg, q), why_plugin);
	if (starts_with(arg, "-Wl,") && tool_list_redirects(arg + 4, false))
		return refuse(why, whylen,
			      "argument \"%s\" is not allowed: it passes an output file or response file to the linker",
			      quote(arg, q));
	if (starts_with(arg, "-Wa,") && tool_list_redirects(arg + 4, false))
		return refuse(why, whylen,
			      "argument \"%s\" is not allowed: it passes an output file or response file to the assembler",
			      quote(arg, q));
	if (starts_with(arg, "-Wp,") && tool_list_redirects(arg + 4, true))
		return refuse(why, whylen,
			      "argument \"%s\" is not allowed: it passes an output or dependency file to the preprocessor",
			      quote(arg, q));
	return 0;
}

int validate_arg(const char *arg, const char *prev, char *why, size_t whylen)
{
	char q[QUOTE_MAX + 4];

	if (!arg || !*arg)
		return refuse(why, whylen, "an empty argument is not allowed");
	for (size_t i = 0; i < sizeof(nvcc_tool_opts) / sizeof(nvcc_tool_opts[0]); i++) {
		const char *opt = nvcc_tool_opts[i].opt;
		size_t n = strlen(opt);
		if (prev && strcmp(prev, opt) == 0)
			return check_tool_list(opt, nvcc_tool_opts[i].host, arg, why, whylen);
		if (strncmp(arg, opt, n) == 0 && arg[n] == '=')
			return check_tool_list(opt, nvcc_tool_opts[i].host, arg + n + 1, why, whylen);
	}
	if (prev && strcmp(prev, "-o") == 0)
		return refuse(why, whylen, "argument \"%s\" is not allowed after \"-o\": %s",
			      quote(arg, q), why_output);
	/* The argument after -Xlinker and friends goes verbatim to that tool,
	 * so it is checked by the tool's rules, not the driver's. */
	if (prev && (strcmp(prev, "-Xlinker") == 0 || strcmp(prev, "-Xassembler") == 0) &&
	    tool_arg_redirects(arg, false))
		return refuse(why, whylen,
			      "argument \"%s\" is not allowed after \"%s\": it passes an output or response file to that tool",
			      quote(arg, q), prev);
	if (prev && strcmp(prev, "-Xpreprocessor") == 0 && tool_arg_redirects(arg, true))
		return refuse(why, whylen,
			      "argument \"%s\" is not allowed after \"-Xpreprocessor\": it passes an output or dependency file to the preprocessor",
			      quote(arg, q));
	if (prev && strcmp(prev, "-Xclang") == 0 &&
	    (starts_with(arg, "-load") || starts_with(arg, "-plugin") ||
	     starts_with(arg, "-add-plugin") || starts_with(arg, "-dependency-file")))
		return refuse(why, whylen, "argument \"%s\" is not allowed after \"-Xclang\": %s",
			      quote(arg, q), why_plugin);
	return check_arg_alone(arg, why, whylen);
}
