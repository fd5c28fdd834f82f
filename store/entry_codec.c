/*
 * The entry codec (entry_codec.h): store entries to JSON and back, in the
 * four forms the store, the protocol and the upstream tier use. Each field
 * is written and read here alone; a form decides which fields it carries and
 * which of them a reader requires (struct form below).
 *
 * Numbers are JSON numbers where a double holds them exactly (sizes, times in
 * seconds or milliseconds, counts); a dependency's node identity (mtime and
 * ctime in nanoseconds, device, inode) is a decimal string, which a double
 * could not hold. Pure: no I/O. Thread-safe.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "entry_codec.h"
#include "store_int.h"
#include "util.h"

/* What a form carries, and what its reader requires. */
struct form {
	const char *version_name;  /* "kiln_meta", "kiln_upstream", or NULL */
	int version;
	bool nulls;        /* absent strings written as null (else left out) */
	bool local;        /* alias, created, last_used, uses, pinned, deps_source */
	bool identity;     /* each dep's identity on this node (META) */
	bool deps_objects; /* deps as objects (META, UPSTREAM); else parallel arrays */
	bool detail;       /* sha256, args, sources, deps (all but LIST) */
	/* The reader's requirements (META and UPSTREAM only). */
	bool need_toolchain, need_sha256, need_build_ms, need_deps;
};

static const struct form forms[] = {
	[ENTRY_FORM_META] = { .version_name = "kiln_meta", .version = ENTRY_META_VERSION,
			      .nulls = true, .local = true, .identity = true,
			      .deps_objects = true, .detail = true, .need_toolchain = true,
			      .need_build_ms = true },
	[ENTRY_FORM_UPSTREAM] = { .version_name = "kiln_upstream",
				  .version = ENTRY_UPSTREAM_VERSION, .deps_objects = true,
				  .detail = true, .need_sha256 = true, .need_deps = true },
	[ENTRY_FORM_LIST] = { .nulls = true, .local = true },
	[ENTRY_FORM_SHOW] = { .nulls = true, .local = true, .detail = true },
};

/* The largest integer a JSON number (a double) holds exactly. */
#define JSON_INT_MAX 9007199254740992.0

/* Encoding. */

static bool enc_str(cJSON *o, const struct form *f, const char *name, const char *v)
{
	if (v != NULL)
		return cJSON_AddStringToObject(o, name, v) != NULL;
	return !f->nulls || cJSON_AddNullToObject(o, name) != NULL;
}

static bool enc_num(cJSON *o, const char *name, double v)
{
	return cJSON_AddNumberToObject(o, name, v) != NULL;
}

/* Adds item to o (to an array when name is NULL); frees it on failure. */
static bool enc_item(cJSON *o, const char *name, cJSON *item)
{
	bool ok = item != NULL && (name ? cJSON_AddItemToObject(o, name, item)
					: cJSON_AddItemToArray(o, item));
	if (!ok)
		cJSON_Delete(item);
	return ok;
}

/* A stored JSON array (args, sources) as a real array, so that a human can
 * read it. META must be able to read it back (false when it is not an
 * array); the other forms show a damaged one as [] (UPSTREAM leaves it out). */
static bool enc_array(cJSON *o, const struct form *f, const char *name, const char *json)
{
	cJSON *a = json != NULL ? cJSON_Parse(json) : NULL;

	if (a != NULL && cJSON_IsArray(a))
		return enc_item(o, name, a);
	cJSON_Delete(a);
	if (f == &forms[ENTRY_FORM_META])
		return json == NULL && cJSON_AddNullToObject(o, name) != NULL;
	if (!f->nulls)
		return true;
	return enc_item(o, name, cJSON_CreateArray());
}

static bool enc_digest(cJSON *o, const char *name, const uint8_t digest[32])
{
	char hex[65];

	util_hex(digest, 32, hex);
	return cJSON_AddStringToObject(o, name, hex) != NULL;
}

cJSON *entry_dep_encode(const struct store_dep *dep, bool identity)
{
	cJSON *o = cJSON_CreateObject();
	const struct dep_kind_info *k = dep_kind_info(dep->kind);
	bool ok = o != NULL && k != NULL && cJSON_AddStringToObject(o, "path", dep->path) != NULL &&
		  cJSON_AddStringToObject(o, "kind", k->name) != NULL;

	/* What the kind carries (depkind.h's columns), in this order. */
	if (ok && k->has_size)
		ok = enc_num(o, "size", (double)dep->size);
	if (ok && k->has_mode)
		ok = enc_num(o, "mode", dep->mode);
	if (ok && k->named)
		ok = cJSON_AddBoolToObject(o, k->flag, dep->mode != 0) != NULL;
	if (ok && k->has_digest)
		ok = enc_digest(o, "sha256", dep->digest);
	if (ok && identity) {
		/* The identity that stands for the digest on this node. */
		char num[4][24];
		snprintf(num[0], sizeof(num[0]), "%lld", (long long)dep->mtime_ns);
		snprintf(num[1], sizeof(num[1]), "%lld", (long long)dep->ctime_ns);
		snprintf(num[2], sizeof(num[2]), "%llu", (unsigned long long)dep->dev);
		snprintf(num[3], sizeof(num[3]), "%llu", (unsigned long long)dep->ino);
		ok = cJSON_AddStringToObject(o, "mtime_ns", num[0]) != NULL &&
		     cJSON_AddStringToObject(o, "ctime_ns", num[1]) != NULL &&
		     cJSON_AddStringToObject(o, "dev", num[2]) != NULL &&
		     cJSON_AddStringToObject(o, "ino", num[3]) != NULL &&
		     (dep->kind != STORE_DEP_FILE || enc_num(o, "mode", dep->mode));
	}
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* deps as objects (META, UPSTREAM). */
static bool enc_dep_objects(cJSON *o, const struct form *f, const struct store_entry *e)
{
	cJSON *deps = cJSON_AddArrayToObject(o, "deps");
	bool ok = deps != NULL;

	for (size_t i = 0; ok && i < e->ndeps; i++)
		ok = enc_item(deps, NULL, entry_dep_encode(&e->deps[i], f->identity));
	return ok;
}

/* deps as parallel arrays (SHOW): paths, then their digests, kinds and
 * modes in the same order (what a put carries: docs/protocol.md). */
static bool enc_dep_arrays(cJSON *o, const struct store_entry *e)
{
	cJSON *paths = cJSON_AddArrayToObject(o, "deps");
	cJSON *sha = cJSON_AddArrayToObject(o, "dep_sha256");
	cJSON *kinds = cJSON_AddArrayToObject(o, "dep_kinds");
	cJSON *modes = cJSON_AddArrayToObject(o, "dep_modes");
	bool ok = paths != NULL && sha != NULL && kinds != NULL && modes != NULL;

	for (size_t i = 0; ok && i < e->ndeps; i++) {
		const struct store_dep *d = &e->deps[i];
		char hex[65];
		util_hex(d->digest, 32, hex);
		ok = enc_item(paths, NULL, cJSON_CreateString(d->path)) &&
		     enc_item(sha, NULL, cJSON_CreateString(hex)) &&
		     enc_item(kinds, NULL, cJSON_CreateString(store_dep_kind_name(d->kind))) &&
		     enc_item(modes, NULL, cJSON_CreateNumber(d->mode));
	}
	return ok;
}

static bool enc_detail(cJSON *o, const struct form *f, const struct store_entry *e)
{
	bool ok = !e->has_sha256 || enc_digest(o, "sha256", e->sha256);

	ok = ok && enc_array(o, f, "args", e->args_json) &&
	     enc_array(o, f, "sources", e->sources_json);
	if (ok && f->local)
		ok = enc_str(o, f, "deps_source", store_deps_source_name(e->deps_source));
	if (ok)
		ok = f->deps_objects ? enc_dep_objects(o, f, e) : enc_dep_arrays(o, e);
	return ok;
}

cJSON *entry_encode(const struct store_entry *e, enum entry_form form)
{
	const struct form *f = &forms[form];
	cJSON *o = cJSON_CreateObject();
	bool ok = o != NULL;

	if (ok && f->version_name != NULL)
		ok = enc_num(o, f->version_name, f->version);
	ok = ok && cJSON_AddStringToObject(o, "key", e->key) != NULL &&
	     cJSON_AddStringToObject(o, "rkey", e->rkey) != NULL;
	ok = ok && enc_str(o, f, "label", e->label) && enc_str(o, f, "toolchain", e->toolchain) &&
	     enc_str(o, f, "output", e->output) && enc_num(o, "size", (double)e->size) &&
	     enc_num(o, "build_ms", (double)e->build_ms);
	if (ok && e->key_format > 0)
		ok = enc_num(o, "key_format", e->key_format);
	if (ok && f->local)
		ok = enc_str(o, f, "alias", e->alias) && enc_num(o, "created", (double)e->created) &&
		     enc_num(o, "last_used", (double)e->last_used) &&
		     enc_num(o, "uses", (double)e->uses) &&
		     cJSON_AddBoolToObject(o, "pinned", e->pinned) != NULL &&
		     (e->disk == 0 || enc_num(o, "disk", (double)e->disk));
	ok = ok && (!f->detail || enc_detail(o, f, e));
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* Decoding: every reader returns 0, -EBADMSG or -ENOMEM. */

static const cJSON *dec_member(const cJSON *o, const char *name)
{
	return cJSON_GetObjectItemCaseSensitive(o, name);
}

/* A string member: absent or null is NULL (-EBADMSG when required);
 * anything but a string, or an empty required one, is -EBADMSG. */
static int dec_str(const cJSON *o, const char *name, bool required, char **out)
{
	const cJSON *v = dec_member(o, name);

	*out = NULL;
	if (v == NULL || cJSON_IsNull(v))
		return required ? -EBADMSG : 0;
	if (!cJSON_IsString(v) || (required && v->valuestring[0] == '\0'))
		return -EBADMSG;
	*out = strdup(v->valuestring);
	return *out != NULL ? 0 : -ENOMEM;
}

static int dec_key(const cJSON *o, const char *name, char out[KILN_KEY_HEX + 1])
{
	const cJSON *v = dec_member(o, name);

	if (!cJSON_IsString(v) || !store_key_valid(v->valuestring))
		return -EBADMSG;
	memcpy(out, v->valuestring, KILN_KEY_HEX + 1);
	return 0;
}

/* A whole, non-negative JSON number; absent is 0 unless required. */
static int dec_u64(const cJSON *o, const char *name, bool required, uint64_t *out)
{
	const cJSON *v = dec_member(o, name);

	*out = 0;
	if (v == NULL && !required)
		return 0;
	if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= JSON_INT_MAX))
		return -EBADMSG;
	*out = (uint64_t)v->valuedouble;
	return 0;
}

/* A decimal string (a dependency's identity), signed or not (a device or
 * inode number may pass INT64_MAX); absent is 0 (metadata from before it was
 * written). */
static int dec_decimal(const cJSON *o, const char *name, bool is_signed, uint64_t *out)
{
	const cJSON *v = dec_member(o, name);
	char *end;

	*out = 0;
	if (v == NULL)
		return 0;
	if (!cJSON_IsString(v) || v->valuestring[0] == '\0' ||
	    (!is_signed && v->valuestring[0] == '-'))
		return -EBADMSG;
	errno = 0;
	if (is_signed)
		*out = (uint64_t)strtoll(v->valuestring, &end, 10);
	else
		*out = strtoull(v->valuestring, &end, 10);
	return errno != 0 || *end != '\0' ? -EBADMSG : 0;
}

/* args and sources: an array, kept as its JSON text, or absent/null. */
static int dec_array_text(const cJSON *o, const char *name, char **out)
{
	const cJSON *v = dec_member(o, name);

	*out = NULL;
	if (v == NULL || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsArray(v))
		return -EBADMSG;
	*out = cJSON_PrintUnformatted(v);
	return *out != NULL ? 0 : -ENOMEM;
}

/* The node identity of a META dependency. */
static int dec_identity(const cJSON *o, struct store_dep *dep)
{
	const cJSON *mode = dec_member(o, "mode");
	uint64_t v[2];
	int rc = dec_decimal(o, "mtime_ns", true, &v[0]);

	rc = rc != 0 ? rc : dec_decimal(o, "ctime_ns", true, &v[1]);
	rc = rc != 0 ? rc : dec_decimal(o, "dev", false, &dep->dev);
	rc = rc != 0 ? rc : dec_decimal(o, "ino", false, &dep->ino);
	if (rc != 0)
		return rc;
	dep->mtime_ns = (int64_t)v[0];
	dep->ctime_ns = (int64_t)v[1];
	if (dep->kind == STORE_DEP_FILE && cJSON_IsNumber(mode))
		dep->mode = (uint32_t)mode->valuedouble;
	return 0;
}

int entry_dep_decode(const cJSON *o, bool identity, struct store_dep *dep)
{
	const cJSON *path = dec_member(o, "path"), *kind = dec_member(o, "kind");
	const cJSON *size = dec_member(o, "size"), *mode = dec_member(o, "mode");
	const cJSON *sha = dec_member(o, "sha256");

	memset(dep, 0, sizeof(*dep));
	if (!cJSON_IsObject(o))
		return -EBADMSG;
	/* Metadata written before kinds existed lists files only. */
	int kn = kind == NULL ? STORE_DEP_FILE : store_dep_kind_parse(cJSON_GetStringValue(kind));
	const struct dep_kind_info *k = dep_kind_info(kn);
	if (k == NULL)
		return -EBADMSG;
	/* What the kind carries (depkind.h's columns). */
	const cJSON *set = k->named ? dec_member(o, k->flag) : NULL;
	if (!cJSON_IsString(path) || path->valuestring[0] == '\0' ||
	    (!k->named && path->valuestring[0] != '/') ||
	    (k->bare && strchr(path->valuestring, '/') != NULL))
		return -EBADMSG;
	if (k->has_digest && (!cJSON_IsString(sha) || !util_unhex32(sha->valuestring, dep->digest)))
		return -EBADMSG;
	if (k->has_size && size != NULL &&
	    (!cJSON_IsNumber(size) || !(size->valuedouble >= 0 && size->valuedouble <= JSON_INT_MAX)))
		return -EBADMSG;
	if (k->has_mode &&
	    (!cJSON_IsNumber(mode) || !(mode->valuedouble >= 0 && mode->valuedouble <= 07777777)))
		return -EBADMSG;
	if (k->named && !cJSON_IsBool(set))
		return -EBADMSG;
	dep->kind = (uint8_t)kn;
	dep->size = k->has_size && size != NULL ? (uint64_t)size->valuedouble : 0;
	dep->mode = k->has_mode ? (uint32_t)mode->valuedouble
		  : k->named	? (uint32_t)cJSON_IsTrue(set)
				: 0;
	int rc = identity ? dec_identity(o, dep) : 0;
	if (rc == 0 && (dep->path = strdup(path->valuestring)) == NULL)
		rc = -ENOMEM;
	return rc;
}

static int dec_deps(const cJSON *o, const struct form *f, struct store_entry *e)
{
	const cJSON *v = dec_member(o, "deps"), *d;

	if (v == NULL || cJSON_IsNull(v))
		return f->need_deps ? -EBADMSG : 0;
	if (!cJSON_IsArray(v))
		return -EBADMSG;
	int n = cJSON_GetArraySize(v);
	if (n == 0)
		return 0;
	if ((e->deps = calloc((size_t)n, sizeof(*e->deps))) == NULL)
		return -ENOMEM;
	cJSON_ArrayForEach(d, v) {
		int rc = entry_dep_decode(d, f->identity, &e->deps[e->ndeps]);
		if (rc != 0)
			return rc;
		e->ndeps++;
	}
	return 0;
}

/* The format number: -ENOENT for an older UPSTREAM entry. */
static int dec_version(const cJSON *o, const struct form *f)
{
	uint64_t v;

	if (dec_u64(o, f->version_name, true, &v) != 0)
		return -EBADMSG;
	if (v < (uint64_t)f->version && f == &forms[ENTRY_FORM_UPSTREAM])
		return -ENOENT;
	return v == (uint64_t)f->version ? 0 : -EBADMSG;
}

static int dec_local(const cJSON *o, struct store_entry *e)
{
	const cJSON *pinned = dec_member(o, "pinned");
	uint64_t created, last_used;
	int rc = dec_str(o, "alias", false, &e->alias);

	rc = rc != 0 ? rc : dec_u64(o, "created", true, &created);
	rc = rc != 0 ? rc : dec_u64(o, "last_used", true, &last_used);
	rc = rc != 0 ? rc : dec_u64(o, "uses", true, &e->uses);
	if (rc == 0 && !cJSON_IsBool(pinned))
		rc = -EBADMSG;
	if (rc != 0)
		return rc;
	e->created = (int64_t)created;
	e->last_used = (int64_t)last_used;
	e->pinned = cJSON_IsTrue(pinned);
	const char *source = cJSON_GetStringValue(dec_member(o, "deps_source"));
	e->deps_source = source != NULL && strcmp(source, "observed") == 0 ? STORE_DEPS_OBSERVED
									   : STORE_DEPS_DEPFILE;
	return 0;
}

static int decode(const cJSON *o, const struct form *f, struct store_entry *e)
{
	const cJSON *sha = dec_member(o, "sha256");
	int rc = dec_version(o, f);

	rc = rc != 0 ? rc : dec_key(o, "key", e->key);
	rc = rc != 0 ? rc : dec_key(o, "rkey", e->rkey);
	rc = rc != 0 ? rc : dec_str(o, "label", false, &e->label);
	rc = rc != 0 ? rc : dec_str(o, "toolchain", f->need_toolchain, &e->toolchain);
	rc = rc != 0 ? rc : dec_str(o, "output", true, &e->output);
	if (rc == 0 && store_output_ext(e->output) == NULL)
		rc = -EBADMSG;
	rc = rc != 0 ? rc : dec_u64(o, "size", true, &e->size);
	rc = rc != 0 ? rc : dec_u64(o, "build_ms", f->need_build_ms, &e->build_ms);
	uint64_t fmt = 0;
	rc = rc != 0 ? rc : dec_u64(o, "key_format", false, &fmt);
	e->key_format = fmt <= 1000000 ? (int)fmt : 0;
	if (rc == 0 && (sha != NULL || f->need_sha256)) {
		e->has_sha256 = cJSON_IsString(sha) && util_unhex32(sha->valuestring, e->sha256);
		rc = e->has_sha256 ? 0 : -EBADMSG;
	}
	rc = rc != 0 ? rc : dec_array_text(o, "args", &e->args_json);
	rc = rc != 0 ? rc : dec_array_text(o, "sources", &e->sources_json);
	if (rc == 0 && f->local)
		rc = dec_local(o, e);
	return rc != 0 ? rc : dec_deps(o, f, e);
}

int entry_decode(const cJSON *o, enum entry_form form, struct store_entry *e)
{
	memset(e, 0, sizeof(*e));
	if ((form != ENTRY_FORM_META && form != ENTRY_FORM_UPSTREAM) || !cJSON_IsObject(o))
		return -EBADMSG;
	int rc = decode(o, &forms[form], e);
	if (rc != 0)
		store_entry_free(e);
	return rc;
}

/* The protocol's entry object: LIST or SHOW, with where this store keeps
 * the object (and, in SHOW, the build's log). */
cJSON *store_entry_json(const struct store *s, const struct store_entry *e, bool detail)
{
	cJSON *o = entry_encode(e, detail ? ENTRY_FORM_SHOW : ENTRY_FORM_LIST);
	char *path = store_object_path(s, e->key, e->output);
	char *log = detail ? store_log_path(s, e->key) : NULL;
	bool ok = o != NULL;

	ok = ok && (path ? cJSON_AddStringToObject(o, "path", path)
			 : cJSON_AddNullToObject(o, "path")) != NULL;
	if (ok && detail)
		ok = (log ? cJSON_AddStringToObject(o, "log", log) : cJSON_AddNullToObject(o, "log")) !=
		     NULL;
	free(path);
	free(log);
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}
