/*
 * What nvcc would hand its host compiler for a C++ source (hostcc.h): the
 * toolkit's include directories and the host's share of the request's
 * arguments, read by one small table of nvcc's options. An option the
 * table does not know keeps the source with nvcc: that costs speed, never
 * a program compiled otherwise than the arguments say.
 */
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "hostcc.h"
#include "tcenv.h"
#include "validate.h"

/* How an option of nvcc's reaches the host compiler. */
enum hc_kind {
	HC_KEEP,      /* as given: "-DX", "-I" "dir", "-O3" */
	HC_RENAME,    /* nvcc's long name for a host option: "--define-macro=X" */
	HC_STD,       /* the dialect: "-std=V" */
	HC_SPLIT,     /* -Xcompiler: its value, split at commas as nvcc does */
	HC_DROP,      /* nvcc's own (device code, the architecture, the link) */
};

/* How the value is given: none, joined or apart ("-Dx", "-D" "x"), or
 * after "=" or apart ("-std=c++17", "-std" "c++17"). */
enum hc_val { HV_NONE, HV_JOINED, HV_EQ };

struct hc_opt {
	const char *name;
	enum hc_val val;
	enum hc_kind kind;
	const char *to;   /* HC_RENAME: the host's name */
};

static const struct hc_opt hc_table[] = {
	{ "-Xcompiler", HV_EQ, HC_SPLIT, NULL },
	{ "--compiler-options", HV_EQ, HC_SPLIT, NULL },
	{ "-D", HV_JOINED, HC_KEEP, NULL },
	{ "-U", HV_JOINED, HC_KEEP, NULL },
	{ "-isystem", HV_JOINED, HC_KEEP, NULL },
	{ "-include", HV_JOINED, HC_KEEP, NULL },
	{ "-iquote", HV_JOINED, HC_KEEP, NULL },
	{ "-idirafter", HV_JOINED, HC_KEEP, NULL },
	{ "-I", HV_JOINED, HC_KEEP, NULL },
	{ "--define-macro", HV_EQ, HC_RENAME, "-D" },
	{ "--undefine-macro", HV_EQ, HC_RENAME, "-U" },
	{ "--include-path", HV_EQ, HC_RENAME, "-I" },
	{ "--system-include", HV_EQ, HC_RENAME, "-isystem" },
	{ "--pre-include", HV_EQ, HC_RENAME, "-include" },
	{ "-std", HV_EQ, HC_STD, NULL },
	{ "--std", HV_EQ, HC_STD, NULL },
	{ "-O0", HV_NONE, HC_KEEP, NULL },
	{ "-O1", HV_NONE, HC_KEEP, NULL },
	{ "-O2", HV_NONE, HC_KEEP, NULL },
	{ "-O3", HV_NONE, HC_KEEP, NULL },
	{ "-g", HV_NONE, HC_KEEP, NULL },
	{ "--debug", HV_NONE, HC_RENAME, "-g" },
	{ "-w", HV_NONE, HC_KEEP, NULL },
	{ "--disable-warnings", HV_NONE, HC_RENAME, "-w" },
	{ "-m64", HV_NONE, HC_KEEP, NULL },
	/* nvcc's own: device code and its tools, the architecture. */
	{ "-gencode", HV_EQ, HC_DROP, NULL },
	{ "--generate-code", HV_EQ, HC_DROP, NULL },
	{ "-arch", HV_EQ, HC_DROP, NULL },
	{ "--gpu-architecture", HV_EQ, HC_DROP, NULL },
	{ "-code", HV_EQ, HC_DROP, NULL },
	{ "--gpu-code", HV_EQ, HC_DROP, NULL },
	{ "-rdc", HV_EQ, HC_DROP, NULL },
	{ "--relocatable-device-code", HV_EQ, HC_DROP, NULL },
	{ "-G", HV_NONE, HC_DROP, NULL },
	{ "--device-debug", HV_NONE, HC_DROP, NULL },
	{ "-lineinfo", HV_NONE, HC_DROP, NULL },
	{ "--generate-line-info", HV_NONE, HC_DROP, NULL },
	{ "-use_fast_math", HV_NONE, HC_DROP, NULL },
	{ "--use_fast_math", HV_NONE, HC_DROP, NULL },
	{ "-ftz", HV_EQ, HC_DROP, NULL },
	{ "--ftz", HV_EQ, HC_DROP, NULL },
	{ "-prec-div", HV_EQ, HC_DROP, NULL },
	{ "--prec-div", HV_EQ, HC_DROP, NULL },
	{ "-prec-sqrt", HV_EQ, HC_DROP, NULL },
	{ "--prec-sqrt", HV_EQ, HC_DROP, NULL },
	{ "-fmad", HV_EQ, HC_DROP, NULL },
	{ "--fmad", HV_EQ, HC_DROP, NULL },
	{ "-maxrregcount", HV_EQ, HC_DROP, NULL },
	{ "--maxrregcount", HV_EQ, HC_DROP, NULL },
	{ "-expt-relaxed-constexpr", HV_NONE, HC_DROP, NULL },
	{ "--expt-relaxed-constexpr", HV_NONE, HC_DROP, NULL },
	{ "-expt-extended-lambda", HV_NONE, HC_DROP, NULL },
	{ "--expt-extended-lambda", HV_NONE, HC_DROP, NULL },
	{ "-extended-lambda", HV_NONE, HC_DROP, NULL },
	{ "--extended-lambda", HV_NONE, HC_DROP, NULL },
	{ "-default-stream", HV_EQ, HC_DROP, NULL },
	{ "--default-stream", HV_EQ, HC_DROP, NULL },
	{ "-cudart", HV_EQ, HC_DROP, NULL },
	{ "--cudart", HV_EQ, HC_DROP, NULL },
	{ "-t", HV_EQ, HC_DROP, NULL },
	{ "--threads", HV_EQ, HC_DROP, NULL },
	{ "-split-compile", HV_EQ, HC_DROP, NULL },
	{ "--split-compile", HV_EQ, HC_DROP, NULL },
	{ "-allow-unsupported-compiler", HV_NONE, HC_DROP, NULL },
	{ "--allow-unsupported-compiler", HV_NONE, HC_DROP, NULL },
	{ "-Wno-deprecated-gpu-targets", HV_NONE, HC_DROP, NULL },
	{ "-Xptxas", HV_EQ, HC_DROP, NULL },
	{ "--ptxas-options", HV_EQ, HC_DROP, NULL },
	{ "-Xnvlink", HV_EQ, HC_DROP, NULL },
	{ "--nvlink-options", HV_EQ, HC_DROP, NULL },
	{ "-Xfatbin", HV_EQ, HC_DROP, NULL },
	{ "--fatbin-options", HV_EQ, HC_DROP, NULL },
	{ "-Xcudafe", HV_EQ, HC_DROP, NULL },
	{ "-time", HV_EQ, HC_DROP, NULL },
	{ "--time", HV_EQ, HC_DROP, NULL },
	/* The link's (a compile with -c does not read them). */
	{ "-Xlinker", HV_EQ, HC_DROP, NULL },
	{ "--linker-options", HV_EQ, HC_DROP, NULL },
	{ "-L", HV_JOINED, HC_DROP, NULL },
};

#define HC_N (sizeof(hc_table) / sizeof(hc_table[0]))

struct strv {
	char **v;
	size_t n, cap;
	bool bad;   /* out of memory, or an argument not understood */
};

static void strv_push(struct strv *s, const char *text, size_t len)
{
	if (s->bad)
		return;
	if (s->n + 2 > s->cap) {
		size_t cap = s->cap == 0 ? 16 : s->cap * 2;
		char **v = realloc(s->v, cap * sizeof(*v));
		if (v == NULL) {
			s->bad = true;
			return;
		}
		s->v = v;
		s->cap = cap;
	}
	if ((s->v[s->n] = strndup(text, len)) == NULL) {
		s->bad = true;
		return;
	}
	s->v[++s->n] = NULL;
}

static void strv_put(struct strv *s, const char *text)
{
	strv_push(s, text, strlen(text));
}

void hostcc_free(char **v)
{
	for (size_t i = 0; v != NULL && v[i] != NULL; i++)
		free(v[i]);
	free(v);
}

/* The table's entry for arg, with its value (joined, after "=", or NULL:
 * the next argument's, or none). */
static const struct hc_opt *hc_find(const char *arg, const char **val)
{
	for (size_t i = 0; i < HC_N; i++) {
		const struct hc_opt *o = &hc_table[i];
		size_t len = strlen(o->name);
		*val = NULL;
		if (strncmp(arg, o->name, len) != 0)
			continue;
		if (arg[len] == '\0')
			return o;
		if (o->val == HV_JOINED) {
			*val = arg + len;
			return o;
		}
		if (o->val == HV_EQ && arg[len] == '=') {
			*val = arg + len + 1;
			return o;
		}
	}
	return NULL;
}

/* -Xcompiler's value: each comma-separated part is a host argument. */
static void hc_split(struct strv *s, const char *val)
{
	while (!s->bad) {
		size_t n = strcspn(val, ",");
		if (n > 0)
			strv_push(s, val, n);
		if (val[n] == '\0')
			break;
		val += n + 1;
	}
}

/* One option and its value into s. */
static void hc_emit(struct strv *s, const struct hc_opt *o, const char *arg, const char *val)
{
	switch (o->kind) {
	case HC_KEEP:
		strv_put(s, arg);
		if (o->val != HV_NONE && arg[strlen(o->name)] == '\0')
			strv_put(s, val);
		break;
	case HC_RENAME:
		strv_put(s, o->to);
		if (val != NULL)
			strv_put(s, val);
		break;
	case HC_STD: {
		char buf[64];
		size_t n = strlen(val);
		if (n + 6 > sizeof(buf)) {
			s->bad = true;
			break;
		}
		memcpy(buf, "-std=", 5);
		memcpy(buf + 5, val, n + 1);
		strv_put(s, buf);
		break;
	}
	case HC_SPLIT:
		hc_split(s, val);
		break;
	case HC_DROP:
		break;
	}
}

/* args[0..n) (libs[i] marks a library: left out) into s. */
static void hc_list(struct strv *s, const char *const *args, size_t n, const bool *libs)
{
	for (size_t i = 0; i < n && !s->bad; i++) {
		const char *val, *opt = args[i];
		if (libs != NULL && libs[i])
			continue;
		const struct hc_opt *o = hc_find(opt, &val);
		if (o == NULL) {
			s->bad = true;
			break;
		}
		if (o->val != HV_NONE && val == NULL) {
			if (i + 1 >= n) {
				s->bad = true;
				break;
			}
			val = args[++i];
		}
		hc_emit(s, o, opt, val);
	}
}

/* One of nvcc's environment variables of flags, split at blanks as nvcc
 * does; one with quotes is not understood. */
static void hc_env(struct strv *s, const char *name)
{
	const char *v = tcenv_get(name);
	char *words[64];
	size_t n = 0;
	if (v == NULL || v[0] == '\0')
		return;
	if (strpbrk(v, "\"'\\") != NULL) {
		s->bad = true;
		return;
	}
	char *copy = strdup(v);
	if (copy == NULL) {
		s->bad = true;
		return;
	}
	for (char *save = NULL, *w = strtok_r(copy, " \t\n", &save); w != NULL;
	     w = strtok_r(NULL, " \t\n", &save)) {
		if (n == sizeof(words) / sizeof(words[0])) {
			s->bad = true;
			break;
		}
		words[n++] = w;
	}
	hc_list(s, (const char *const *)words, n, NULL);
	free(copy);
}

char **hostcc_args(const char *const *args, size_t n, size_t *nout)
{
	struct strv s = { 0 };
	bool *libs = calloc(n + 1, sizeof(bool));
	if (libs == NULL)
		return NULL;
	validate_args_for(args, n, 0, libs, NULL, NULL, 0);
	hc_env(&s, "NVCC_PREPEND_FLAGS");
	hc_list(&s, args, n, libs);
	hc_env(&s, "NVCC_APPEND_FLAGS");
	free(libs);
	if (!s.bad && s.v == NULL)
		s.v = calloc(1, sizeof(*s.v));   /* understood, and empty */
	if (s.bad || s.v == NULL) {
		hostcc_free(s.v);
		return NULL;
	}
	if (nout != NULL)
		*nout = s.n;
	return s.v;
}

bool hostcc_understood(const char *const *args, size_t n)
{
	char **v = hostcc_args(args, n, NULL);
	hostcc_free(v);
	return v != NULL;
}

/* The quoted words of one "#$ NAME=..." line of the dry run into s. */
static void hc_profile_line(struct strv *s, const char *out, const char *name)
{
	const char *p = strstr(out, name);
	while (p != NULL && p != out && p[-1] != ' ')
		p = strstr(p + 1, name);
	if (p == NULL)
		return;
	const char *end = p + strcspn(p, "\n");
	for (p += strlen(name); p < end;) {
		const char *q = memchr(p, '"', (size_t)(end - p));
		const char *close = q != NULL ? memchr(q + 1, '"', (size_t)(end - q - 1)) : NULL;
		if (close == NULL)
			break;
		if (close > q + 1)
			strv_push(s, q + 1, (size_t)(close - q - 1));
		p = close + 1;
	}
}

char **hostcc_profile(const char *dryrun)
{
	struct strv s = { 0 };
	if (dryrun == NULL)
		return NULL;
	hc_profile_line(&s, dryrun, "INCLUDES=");
	hc_profile_line(&s, dryrun, "SYSTEM_INCLUDES=");
	if (s.bad || s.n == 0 || s.n > HOSTCC_MAX_INCS) {
		hostcc_free(s.v);
		return NULL;
	}
	return s.v;
}
