/*
 * Validation of names and compiler arguments that come from clients. The
 * daemon enforces these rules; libkiln and the CLI run the same checks first
 * so that a user sees the same sentence without a round trip.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "util.h"
#include "validate.h"

#define QUOTE_MAX VALIDATE_QUOTE_MAX

/*
 * Copies s into out for quoting in a message: control bytes and non-ASCII
 * bytes become '?' so that a hostile value cannot forge lines in a log, and a
 * long value is cut with "..." so that the sentence around it survives.
 */
const char *validate_quote(const char *s, char out[VALIDATE_QUOTE_MAX + 4])
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
			      what, validate_quote(name, q), max);
	if (strchr(name, '/'))
		return refuse(why, whylen,
			      "%s \"%s\" is not a plain file name: it contains '/'",
			      what, validate_quote(name, q));
	if (no_dot && name[0] == '.')
		return refuse(why, whylen,
			      "%s \"%s\" is not a plain file name: it starts with '.'",
			      what, validate_quote(name, q));
	if (name[0] == '-')
		return refuse(why, whylen,
			      "%s \"%s\" starts with '-', which a compiler would read as an option",
			      what, validate_quote(name, q));
	for (i = 0; i < len; i++) {
		if (!is_name_char((unsigned char)name[i]))
			return refuse(why, whylen,
				      "%s \"%s\" contains %s; only letters, digits and . _ + - are allowed",
				      what, validate_quote(name, q),
				      describe_char((unsigned char)name[i], c));
	}
	return 0;
}

/*
 * A source name: a relative path of plain names ("prog.cpp",
 * "src/cpu/prog.cpp", "include/hash.h"), each folder and file name by the
 * rules of check_name, so that no name is empty, ".", "..", hidden or an
 * option, and the file lands inside the build directory's src/.
 */
int validate_source_name(const char *name, char *why, size_t whylen)
{
	char q[QUOTE_MAX + 4], part[VALIDATE_SOURCE_MAX + 1];
	size_t len, depth = 0;
	const char *p;

	if (!name || !strchr(name, '/'))
		return check_name("source name", name, VALIDATE_SOURCE_MAX, true, why, whylen);
	len = strlen(name);
	if (len > VALIDATE_SOURCE_MAX)
		return refuse(why, whylen, "source name \"%s\" is longer than %d characters",
			      validate_quote(name, q), VALIDATE_SOURCE_MAX);
	if (name[0] == '/')
		return refuse(why, whylen, "source name \"%s\" is an absolute path; name the "
			      "file relative to the program's folder", validate_quote(name, q));
	for (p = name; ; p += strlen(part) + 1) {
		size_t n = strcspn(p, "/");
		memcpy(part, p, n);
		part[n] = '\0';
		if (n == 0)
			return refuse(why, whylen, "source name \"%s\" has an empty folder name "
				      "(\"//\" or a '/' at the end)", validate_quote(name, q));
		if (strcmp(part, "..") == 0 || strcmp(part, ".") == 0)
			return refuse(why, whylen, "source name \"%s\" has \"%s\" in it; folders "
				      "must go down, never up or nowhere", validate_quote(name, q), part);
		if (check_name("a folder or file name", part, VALIDATE_SOURCE_MAX, true, why,
			       whylen) != 0) {
			char inner[200];
			snprintf(inner, sizeof(inner), "%s", why ? why : "");
			return refuse(why, whylen, "source name \"%s\": %s", validate_quote(name, q),
				      inner);
		}
		if (++depth > VALIDATE_SOURCE_DEPTH)
			return refuse(why, whylen, "source name \"%s\" is more than %d folders deep",
				      validate_quote(name, q), VALIDATE_SOURCE_DEPTH - 1);
		if (p[n] == '\0')
			return 0;
	}
}

int validate_source_set(const char *const *names, size_t n, size_t stride, char *why,
			size_t whylen)
{
	char q[QUOTE_MAX + 4], q2[QUOTE_MAX + 4];

#define NAME(i) (*(const char *const *)((const char *)names + (i) * stride))
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < n; j++) {
			const char *a = NAME(i), *b = NAME(j);
			size_t la = strlen(a);
			if (i < j && strcmp(a, b) == 0)
				return refuse(why, whylen, "source name \"%s\" appears twice",
					      validate_quote(a, q));
			if (i != j && strncmp(a, b, la) == 0 && b[la] == '/')
				return refuse(why, whylen, "source \"%s\" is a file, so \"%s\" cannot "
					      "be inside it", validate_quote(a, q), validate_quote(b, q2));
		}
	}
#undef NAME
	return 0;
}

int validate_compiler_path(const char *what, const char *path, char *why, size_t whylen)
{
	char q[QUOTE_MAX + 4], c[32];
	size_t len = path != NULL ? strlen(path) : 0;
	if (len == 0 || path[0] != '/')
		return refuse(why, whylen, "%s \"%s\" is not an absolute path", what,
			      validate_quote(path != NULL ? path : "", q));
	if (len > VALIDATE_COMPILER_PATH_MAX)
		return refuse(why, whylen, "%s \"%s\" is longer than %d bytes", what,
			      validate_quote(path, q), VALIDATE_COMPILER_PATH_MAX);
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)path[i];
		if (ch < 0x20 || ch == 0x7f)
			return refuse(why, whylen, "%s \"%s\" contains %s", what,
				      validate_quote(path, q), describe_char(ch, c));
	}
	/* An entry records "PATH -ccbin HOST": a path holding that is ambiguous. */
	if (strstr(path, " -ccbin ") != NULL)
		return refuse(why, whylen, "%s \"%s\" contains \" -ccbin \"", what,
			      validate_quote(path, q));
	return 0;
}

int validate_toolchain_name(const char *name, char *why, size_t whylen)
{
	if (name != NULL && name[0] == '/')
		return validate_compiler_path("compiler", name, why, whylen);
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
			      validate_quote(alias, q));
	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)alias[i];

		if (ch < 0x21 || ch > 0x7e)
			return refuse(why, whylen,
				      "alias \"%s\" contains %s; only printable ASCII without spaces is allowed",
				      validate_quote(alias, q), describe_char(ch, c));
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
	unsigned bad = 0;

	/* No branch per digit (keys are random hex; libkiln checks two per
	 * reply). */
	for (size_t i = 0; i < len; i++)
		bad |= util_hex_value(s[i]);
	return (bad & 16) == 0;
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

bool validate_is_header(const char *name)
{
	static const char *const hdr[] = { ".h", ".hh", ".hpp", ".hxx", ".h++", ".inc", ".inl",
					   ".ipp", ".tcc", ".cuh", NULL };
	const char *dot = name != NULL ? strrchr(name, '.') : NULL;
	for (size_t k = 0; dot != NULL && hdr[k] != NULL; k++)
		if (strcmp(dot, hdr[k]) == 0)
			return true;
	return false;
}

char validate_source_lang(const char *name)
{
	static const char *const cxx[] = { ".cc", ".cpp", ".cxx", ".c++", ".C", ".cp", ".CPP", NULL };
	const char *dot = name != NULL ? strrchr(name, '.') : NULL;
	if (dot == NULL)
		return 0;
	if (strcmp(dot, ".c") == 0)
		return 'c';
	if (strcmp(dot, ".cu") == 0)
		return 'u';
	for (size_t k = 0; cxx[k] != NULL; k++)
		if (strcmp(dot, cxx[k]) == 0)
			return 'x';
	return 0;
}

const char *validate_default_toolchain(const char *const *names, size_t n, size_t stride)
{
	for (size_t i = 0; i < n; i++) {
		const char *name = *(const char *const *)((const char *)names + i * stride);
		if (name == NULL || validate_is_header(name))
			continue;
		char lang = validate_source_lang(name);
		return lang == 'u' ? "nvcc" : lang == 'x' ? "c++" : "cc";
	}
	return "cc";
}

/* Padded base64 (RFC 4648, section 4): groups of four of the alphabet,
 * '=' only as the last one or two. */
bool validate_base64(const char *t, size_t n)
{
	static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t body = n;

	if (n == 0 || n % 4 != 0)
		return false;
	if (t[n - 1] == '=')
		body = t[n - 2] == '=' ? n - 2 : n - 1;
	return strspn(t, alphabet) == body;
}
