/*
 * The compiler's messages in the user's terms; see diag.h.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"

/* Whether a mention may start at log + i. */
static bool starts_mention(const char *log, size_t i)
{
	if (i == 0)
		return true;
	char c = log[i - 1];
	return c == '\n' || c == ' ' || c == '\t' || c == '"' || c == '\'' || c == '(' || c == '`';
}

/* The pair whose from matches at log + i (the longest), or n. */
static size_t match_at(const char *log, size_t len, size_t i, const char *const *from, size_t n)
{
	size_t best = n, best_len = 0;
	for (size_t k = 0; k < n; k++) {
		size_t m = strlen(from[k]);
		if (m == 0 || m <= best_len || i + m >= len || memcmp(log + i, from[k], m) != 0)
			continue;
		if (log[i + m] != ':' && log[i + m] != '(')
			continue;
		best = k;
		best_len = m;
	}
	return best;
}

char *diag_user_paths(const char *log, size_t len, const char *const *from, const char *const *to,
		      size_t n, size_t *outlen)
{
	size_t grow = 0;
	for (size_t k = 0; k < n; k++) {
		size_t a = strlen(from[k]), b = strlen(to[k]);
		grow = b > a && b - a > grow ? b - a : grow;
	}
	/* Each mention is at least as long as its from: at most len / 2 + 1 of
	 * them, each growing by at most grow. */
	size_t cap = len + 1 + (grow > 0 ? (len / 2 + 1) * grow : 0);
	char *out = malloc(cap), *p = out;
	if (out == NULL)
		return NULL;
	for (size_t i = 0; i < len;) {
		size_t k = starts_mention(log, i) ? match_at(log, len, i, from, n) : n;
		if (k < n) {
			size_t m = strlen(to[k]);
			memcpy(p, to[k], m);
			p += m;
			i += strlen(from[k]);
		} else {
			*p++ = log[i++];
		}
	}
	*p = '\0';
	*outlen = (size_t)(p - out);
	return out;
}
