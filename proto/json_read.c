/*
 * The strict JSON reader (json_read.h): recursive descent over a bounded
 * buffer, building cJSON nodes linked as cJSON links its own (an array's or
 * object's first child's prev is its last).
 */
#include <limits.h>
#include <locale.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json_read.h"

struct reader {
	const char *p, *end;
};

static void skip_space(struct reader *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
		r->p++;
}

static cJSON *new_node(int type)
{
	cJSON *n = cJSON_malloc(sizeof(*n));
	if (n != NULL) {
		memset(n, 0, sizeof(*n));
		n->type = type;
	}
	return n;
}

static bool literal(struct reader *r, const char *word, size_t n)
{
	if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0)
		return false;
	r->p += n;
	return true;
}

static int hex4(const char *s)
{
	int v = 0;
	for (int i = 0; i < 4; i++) {
		char c = s[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (d < 0)
			return -1;
		v = v * 16 + d;
	}
	return v;
}

/* One \uXXXX escape (a surrogate pair counts as one) at p, just after the
 * backslash, as UTF-8 into out; returns the bytes written, 0 when invalid.
 * *used gets the input it took. */
static size_t read_u_escape(const char *p, const char *end, char *out, size_t *used)
{
	if (end - p < 5)
		return 0;
	long cp = hex4(p + 1);
	*used = 5;
	if (cp <= 0 || (cp >= 0xDC00 && cp <= 0xDFFF))
		return 0;   /* \u0000 (it would cut the string) or a lone low surrogate */
	if (cp >= 0xD800 && cp <= 0xDBFF) {
		if (end - p < 11 || p[5] != '\\' || p[6] != 'u')
			return 0;
		long lo = hex4(p + 7);
		if (lo < 0xDC00 || lo > 0xDFFF)
			return 0;
		cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
		*used = 11;
	}
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xC0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xE0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		out[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (char)(0xF0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	out[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

/* A string at r->p (on its opening quote), decoded into a cJSON_malloc'd
 * buffer; NULL when invalid or out of memory. The decoded text is never
 * longer than the escaped one, so the buffer is sized by the scan. */
static char *read_string(struct reader *r)
{
	const char *s = r->p + 1, *q = s;
	bool escapes = false;
	while (q < r->end && *q != '"') {
		if ((unsigned char)*q < 0x20)
			return NULL;
		if (*q == '\\') {
			escapes = true;
			q++;
		}
		q++;
	}
	if (q >= r->end)
		return NULL;
	size_t n = (size_t)(q - s);
	char *out = cJSON_malloc(n + 1), *o = out;
	if (out == NULL)
		return NULL;
	if (!escapes) {
		memcpy(out, s, n);
		o += n;
	}
	for (const char *p = s; escapes && p < q; p++) {
		if (*p != '\\') {
			*o++ = *p;
			continue;
		}
		static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
		const char *e = p[1] != '\0' ? strchr(from, p[1]) : NULL;
		if (e != NULL) {
			*o++ = to[e - from];
			p++;
			continue;
		}
		size_t used = 0, w = p[1] == 'u' ? read_u_escape(p + 1, q, o, &used) : 0;
		if (w == 0) {
			cJSON_free(out);
			return NULL;
		}
		o += w;
		p += used;
	}
	*o = '\0';
	r->p = q + 1;
	return out;
}

/* A number at r->p: integers of up to 15 digits are read here (exactly
 * representable, so the same double strtod gives); the rest by strtod with
 * the locale's decimal point, as cJSON does. */
static bool read_number(struct reader *r, double *out)
{
	const char *p = r->p;
	bool neg = p < r->end && *p == '-';
	p += neg;
	const char *digits = p;
	while (p < r->end && *p >= '0' && *p <= '9')
		p++;
	size_t nd = (size_t)(p - digits);
	if (nd == 0 || (nd > 1 && digits[0] == '0'))
		return false;
	bool frac = p < r->end && *p == '.', expo;
	if (frac) {
		const char *f = ++p;
		while (p < r->end && *p >= '0' && *p <= '9')
			p++;
		if (p == f)
			return false;
	}
	expo = p < r->end && (*p == 'e' || *p == 'E');
	if (expo) {
		p++;
		if (p < r->end && (*p == '+' || *p == '-'))
			p++;
		const char *e = p;
		while (p < r->end && *p >= '0' && *p <= '9')
			p++;
		if (p == e)
			return false;
	}
	if (!frac && !expo && nd <= 15) {
		int64_t v = 0;
		for (size_t i = 0; i < nd; i++)
			v = v * 10 + (digits[i] - '0');
		*out = neg ? -(double)v : (double)v;
		r->p = p;
		return true;
	}
	char buf[64];
	size_t len = (size_t)(p - r->p);
	if (len >= sizeof(buf))
		return false;
	memcpy(buf, r->p, len);
	buf[len] = '\0';
	char point = localeconv()->decimal_point[0];
	char *dot = strchr(buf, '.');
	if (dot != NULL)
		*dot = point;
	char *stop;
	*out = strtod(buf, &stop);
	if (stop != buf + len)
		return false;
	r->p = p;
	return true;
}

static cJSON *read_value(struct reader *r, int depth);

/* The members of an array or object after its opening bracket, appended
 * to parent; false when invalid or out of memory (parent stays whole). */
static bool read_members(struct reader *r, cJSON *parent, bool object, int depth)
{
	char close = object ? '}' : ']';
	cJSON *last = NULL;
	skip_space(r);
	if (r->p < r->end && *r->p == close) {
		r->p++;
		return true;
	}
	for (;;) {
		char *key = NULL;
		if (object) {
			skip_space(r);
			if (r->p >= r->end || *r->p != '"' || (key = read_string(r)) == NULL)
				return false;
			skip_space(r);
			if (r->p >= r->end || *r->p != ':') {
				cJSON_free(key);
				return false;
			}
			r->p++;
		}
		cJSON *item = read_value(r, depth + 1);
		if (item == NULL) {
			cJSON_free(key);
			return false;
		}
		item->string = key;
		if (last == NULL) {
			parent->child = item;
		} else {
			last->next = item;
			item->prev = last;
		}
		last = item;
		parent->child->prev = last;
		skip_space(r);
		if (r->p < r->end && *r->p == ',') {
			r->p++;
			continue;
		}
		if (r->p < r->end && *r->p == close) {
			r->p++;
			return true;
		}
		return false;
	}
}

static cJSON *read_value(struct reader *r, int depth)
{
	skip_space(r);
	if (r->p >= r->end || depth > JSON_READ_DEPTH)
		return NULL;
	cJSON *n = NULL;
	char c = *r->p;
	if (c == '{' || c == '[') {
		r->p++;
		n = new_node(c == '{' ? cJSON_Object : cJSON_Array);
		if (n != NULL && !read_members(r, n, c == '{', depth)) {
			cJSON_Delete(n);
			n = NULL;
		}
	} else if (c == '"') {
		char *s = read_string(r);
		if (s != NULL && (n = new_node(cJSON_String)) != NULL)
			n->valuestring = s;
		else
			cJSON_free(s);
	} else if (c == '-' || (c >= '0' && c <= '9')) {
		double v;
		if (read_number(r, &v) && (n = new_node(cJSON_Number)) != NULL) {
			n->valuedouble = v;
			n->valueint = v >= INT_MAX ? INT_MAX : v <= (double)INT_MIN ? INT_MIN : (int)v;
		}
	} else if (literal(r, "true", 4)) {
		n = new_node(cJSON_True);
	} else if (literal(r, "false", 5)) {
		n = new_node(cJSON_False);
	} else if (literal(r, "null", 4)) {
		n = new_node(cJSON_NULL);
	}
	return n;
}

cJSON *json_read(const char *text, size_t len)
{
	if (text == NULL)
		return NULL;
	struct reader r = { .p = text, .end = text + len };
	cJSON *v = read_value(&r, 1);
	skip_space(&r);
	if (v != NULL && r.p != r.end) {
		cJSON_Delete(v);
		return NULL;
	}
	return v;
}
