/*
 * Unit tests for the entry codec (store/entry_codec.c): each form's fields,
 * round trips through text, format numbers, and every kind of malformed
 * metadata refused.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "entry_codec.h"
#include "util.h"
#include "dep_fixture.h"
#include "unit.h"

#define KEY_A "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define KEY_B "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

/* fixture_deps, with a size and modes that JSON numbers (doubles) hold. */
static void four_deps(struct store_dep d[4])
{
	fixture_deps(d);
	d[0].size = 123456789;
	d[0].mode = 0100644;
	d[1].mode = 040755;
	d[3].mode = 1;
}

static void sample(struct store_entry *e, struct store_dep d[4])
{
	memset(e, 0, sizeof(*e));
	memcpy(e->key, KEY_A, 65);
	memcpy(e->rkey, KEY_B, 65);
	e->alias = "stencils";
	e->label = "granule 3";
	e->toolchain = "c++";
	e->output = "shared";
	e->size = 4096;
	e->has_sha256 = true;
	for (int i = 0; i < 32; i++)
		e->sha256[i] = (uint8_t)(0xa0 + i);
	e->created = 1700000000;
	e->last_used = 1700000100;
	e->uses = 7;
	e->build_ms = 1234;
	e->pinned = true;
	e->args_json = "[\"-O2\",\"-DN=4\"]";
	e->sources_json = "[\"p.cpp\",\"p.h\"]";
	four_deps(d);
	e->deps = d;
	e->ndeps = 4;
	e->deps_source = STORE_DEPS_OBSERVED;
}

/* e encoded in form, printed, parsed back: what a file holds. */
static cJSON *through_text(const struct store_entry *e, enum entry_form form)
{
	cJSON *o = entry_encode(e, form);
	ck_assert_ptr_nonnull(o);
	char *text = cJSON_Print(o);
	cJSON_Delete(o);
	ck_assert_ptr_nonnull(text);
	o = cJSON_Parse(text);
	free(text);
	ck_assert_ptr_nonnull(o);
	return o;
}

static void deps_equal(const struct store_dep *a, const struct store_dep *b, size_t n,
		       bool identity)
{
	for (size_t i = 0; i < n; i++) {
		ck_assert_str_eq(a[i].path, b[i].path);
		ck_assert_uint_eq(a[i].kind, b[i].kind);
		if (a[i].kind == STORE_DEP_FILE || a[i].kind == STORE_DEP_ENV ||
		    a[i].kind == STORE_DEP_LISTING)
			ck_assert_mem_eq(a[i].digest, b[i].digest, 32);
		if (a[i].kind == STORE_DEP_FILE)
			ck_assert_uint_eq(a[i].size, b[i].size);
		if (a[i].kind != STORE_DEP_ABSENT && (identity || a[i].kind != STORE_DEP_FILE))
			ck_assert_uint_eq(a[i].mode, b[i].mode);
		if (identity) {
			ck_assert_int_eq(a[i].mtime_ns, b[i].mtime_ns);
			ck_assert_int_eq(a[i].ctime_ns, b[i].ctime_ns);
			ck_assert_uint_eq(a[i].dev, b[i].dev);
			ck_assert_uint_eq(a[i].ino, b[i].ino);
		} else {
			ck_assert_uint_eq(b[i].dev, 0);
			ck_assert_int_eq(b[i].mtime_ns, 0);
		}
	}
}

/* META keeps everything, node identities included. */
START_TEST(meta_round_trip)
{
	struct store_entry e, back;
	struct store_dep d[4];

	sample(&e, d);
	cJSON *o = through_text(&e, ENTRY_FORM_META);
	ck_assert_int_eq(cJSON_GetObjectItem(o, "kiln_meta")->valueint, ENTRY_META_VERSION);
	ck_assert_int_eq(entry_decode(o, ENTRY_FORM_META, &back), 0);
	cJSON_Delete(o);
	ck_assert_str_eq(back.key, KEY_A);
	ck_assert_str_eq(back.rkey, KEY_B);
	ck_assert_str_eq(back.alias, "stencils");
	ck_assert_str_eq(back.label, "granule 3");
	ck_assert_str_eq(back.toolchain, "c++");
	ck_assert_str_eq(back.output, "shared");
	ck_assert_uint_eq(back.size, 4096);
	ck_assert(back.has_sha256);
	ck_assert_mem_eq(back.sha256, e.sha256, 32);
	ck_assert_int_eq(back.created, 1700000000);
	ck_assert_int_eq(back.last_used, 1700000100);
	ck_assert_uint_eq(back.uses, 7);
	ck_assert_uint_eq(back.build_ms, 1234);
	ck_assert(back.pinned);
	ck_assert_str_eq(back.args_json, e.args_json);
	ck_assert_str_eq(back.sources_json, e.sources_json);
	ck_assert_uint_eq(back.deps_source, STORE_DEPS_OBSERVED);
	ck_assert_uint_eq(back.ndeps, 4);
	deps_equal(d, back.deps, 4, true);
	store_entry_free(&back);

	/* Absent strings and arrays are null, and come back absent; no
	 * sha256 (rows from before schema 3) stays none. */
	e.alias = e.label = NULL;
	e.args_json = e.sources_json = NULL;
	e.has_sha256 = false;
	e.pinned = false;
	e.ndeps = 0;
	e.deps_source = STORE_DEPS_DEPFILE;
	o = through_text(&e, ENTRY_FORM_META);
	ck_assert(cJSON_IsNull(cJSON_GetObjectItem(o, "label")));
	ck_assert_int_eq(entry_decode(o, ENTRY_FORM_META, &back), 0);
	cJSON_Delete(o);
	ck_assert_ptr_null(back.alias);
	ck_assert_ptr_null(back.label);
	ck_assert_ptr_null(back.args_json);
	ck_assert(!back.has_sha256);
	ck_assert(!back.pinned);
	ck_assert_uint_eq(back.ndeps, 0);
	ck_assert_uint_eq(back.deps_source, STORE_DEPS_DEPFILE);
	store_entry_free(&back);
}
END_TEST

/* UPSTREAM carries what another node needs and nothing of this node's. */
START_TEST(upstream_round_trip)
{
	static const char *const local[] = { "alias", "created", "last_used", "uses", "pinned",
					     "deps_source" };
	struct store_entry e, back;
	struct store_dep d[4];

	sample(&e, d);
	e.label = NULL;
	cJSON *o = through_text(&e, ENTRY_FORM_UPSTREAM);
	ck_assert_int_eq(cJSON_GetObjectItem(o, "kiln_upstream")->valueint,
			 ENTRY_UPSTREAM_VERSION);
	for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++)
		ck_assert_msg(cJSON_GetObjectItem(o, local[i]) == NULL, "%s written", local[i]);
	ck_assert_ptr_null(cJSON_GetObjectItem(o, "label"));   /* left out, not null */
	const cJSON *dep;
	cJSON_ArrayForEach(dep, cJSON_GetObjectItem(o, "deps"))
		ck_assert_ptr_null(cJSON_GetObjectItem(dep, "ino"));
	ck_assert_int_eq(entry_decode(o, ENTRY_FORM_UPSTREAM, &back), 0);
	ck_assert_str_eq(back.key, KEY_A);
	ck_assert_str_eq(back.output, "shared");
	ck_assert_mem_eq(back.sha256, e.sha256, 32);
	ck_assert_uint_eq(back.build_ms, 1234);
	ck_assert_str_eq(back.args_json, e.args_json);
	ck_assert_ptr_null(back.alias);
	ck_assert_int_eq(back.uses, 0);
	ck_assert_uint_eq(back.ndeps, 4);
	deps_equal(d, back.deps, 4, false);
	store_entry_free(&back);
	/* One form is not the other. */
	ck_assert_int_eq(entry_decode(o, ENTRY_FORM_META, &back), -EBADMSG);
	cJSON_Delete(o);
}
END_TEST

/* LIST and SHOW: the protocol's entry objects (docs/protocol.md). */
START_TEST(list_and_show)
{
	struct store_entry e;
	struct store_dep d[4];
	char hex[65];

	sample(&e, d);
	cJSON *o = entry_encode(&e, ENTRY_FORM_LIST);
	ck_assert_ptr_nonnull(o);
	ck_assert_str_eq(cJSON_GetObjectItem(o, "alias")->valuestring, "stencils");
	ck_assert_int_eq(cJSON_GetObjectItem(o, "uses")->valueint, 7);
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(o, "pinned")));
	ck_assert_ptr_null(cJSON_GetObjectItem(o, "deps"));
	ck_assert_ptr_null(cJSON_GetObjectItem(o, "kiln_meta"));
	cJSON_Delete(o);

	o = entry_encode(&e, ENTRY_FORM_SHOW);
	ck_assert_ptr_nonnull(o);
	const cJSON *paths = cJSON_GetObjectItem(o, "deps");
	ck_assert_int_eq(cJSON_GetArraySize(paths), 4);
	ck_assert_str_eq(cJSON_GetArrayItem(paths, 1)->valuestring, "/usr/include");
	util_hex(d[3].digest, 32, hex);
	ck_assert_str_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "dep_sha256"), 3)->valuestring,
			 hex);
	ck_assert_str_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "dep_kinds"), 2)->valuestring,
			 "absent");
	ck_assert_int_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "dep_modes"), 1)->valueint,
			 040755);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(o, "args")), 2);
	ck_assert_str_eq(cJSON_GetObjectItem(o, "deps_source")->valuestring, "observed");
	cJSON_Delete(o);

	/* Damaged stored arrays: shown as [], but META refuses to write what
	 * reconcile could not read back. */
	e.args_json = "{not an array";
	o = entry_encode(&e, ENTRY_FORM_SHOW);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(o, "args")), 0);
	cJSON_Delete(o);
	ck_assert_ptr_null(entry_encode(&e, ENTRY_FORM_META));
}
END_TEST

/* The format numbers: an older upstream entry is skipped (-ENOENT), any
 * other number is not kiln's. */
START_TEST(versions)
{
	struct store_entry e, back;
	struct store_dep d[4];

	sample(&e, d);
	cJSON *o = entry_encode(&e, ENTRY_FORM_UPSTREAM);
	cJSON_ReplaceItemInObject(o, "kiln_upstream", cJSON_CreateNumber(1));
	ck_assert_int_eq(entry_decode(o, ENTRY_FORM_UPSTREAM, &back), -ENOENT);
	cJSON_ReplaceItemInObject(o, "kiln_upstream", cJSON_CreateNumber(3));
	ck_assert_int_eq(entry_decode(o, ENTRY_FORM_UPSTREAM, &back), -EBADMSG);
	cJSON_Delete(o);
	o = entry_encode(&e, ENTRY_FORM_META);
	cJSON_ReplaceItemInObject(o, "kiln_meta", cJSON_CreateNumber(2));
	ck_assert_int_eq(entry_decode(o, ENTRY_FORM_META, &back), -EBADMSG);
	cJSON_Delete(o);
	/* Not an object; LIST is not read back. */
	o = cJSON_CreateArray();
	ck_assert_int_eq(entry_decode(o, ENTRY_FORM_META, &back), -EBADMSG);
	cJSON_Delete(o);
	o = entry_encode(&e, ENTRY_FORM_LIST);
	ck_assert_int_eq(entry_decode(o, ENTRY_FORM_LIST, &back), -EBADMSG);
	cJSON_Delete(o);
}
END_TEST

/* Each field a reader requires, removed or given a wrong value: refused,
 * and nothing is left allocated (ASan sees to that). */
static void refuse(enum entry_form form, const char *field, cJSON *value)
{
	struct store_entry e, back;
	struct store_dep d[4];

	sample(&e, d);
	cJSON *o = entry_encode(&e, form);
	ck_assert_ptr_nonnull(o);
	if (value == NULL)
		cJSON_DeleteItemFromObject(o, field);
	else if (!cJSON_ReplaceItemInObject(o, field, value))
		cJSON_AddItemToObject(o, field, value);
	ck_assert_msg(entry_decode(o, form, &back) == -EBADMSG, "%s: %s accepted",
		      form == ENTRY_FORM_META ? "meta" : "upstream", field);
	ck_assert_ptr_null(back.output);
	cJSON_Delete(o);
}

START_TEST(malformed_refused)
{
	static const enum entry_form both[] = { ENTRY_FORM_META, ENTRY_FORM_UPSTREAM };
	for (size_t i = 0; i < 2; i++) {
		enum entry_form f = both[i];
		refuse(f, "key", NULL);
		refuse(f, "key", cJSON_CreateString("0123"));
		refuse(f, "key", cJSON_CreateString(KEY_A "0"));
		refuse(f, "rkey", cJSON_CreateString(
			"0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef"));
		refuse(f, "output", NULL);
		refuse(f, "output", cJSON_CreateString("exe"));
		refuse(f, "output", cJSON_CreateNumber(1));
		refuse(f, "label", cJSON_CreateNumber(5));
		refuse(f, "size", NULL);
		refuse(f, "size", cJSON_CreateNumber(-1));
		refuse(f, "size", cJSON_CreateNumber(1e300));
		refuse(f, "size", cJSON_CreateString("12"));
		refuse(f, "sha256", cJSON_CreateString("xyz"));
		refuse(f, "args", cJSON_CreateString("-O2"));
		refuse(f, "sources", cJSON_CreateObject());
		refuse(f, "deps", cJSON_CreateString("/a.h"));
		refuse(f, "toolchain", cJSON_CreateBool(true));
	}
	refuse(ENTRY_FORM_META, "toolchain", NULL);
	refuse(ENTRY_FORM_META, "toolchain", cJSON_CreateString(""));
	refuse(ENTRY_FORM_META, "build_ms", NULL);
	refuse(ENTRY_FORM_META, "created", NULL);
	refuse(ENTRY_FORM_META, "uses", cJSON_CreateNumber(-3));
	refuse(ENTRY_FORM_META, "pinned", NULL);
	refuse(ENTRY_FORM_META, "pinned", cJSON_CreateNumber(1));
	refuse(ENTRY_FORM_META, "alias", cJSON_CreateArray());
	refuse(ENTRY_FORM_UPSTREAM, "sha256", NULL);
	refuse(ENTRY_FORM_UPSTREAM, "deps", NULL);
}
END_TEST

/* A dependency with a bad member, as the meta's last dependency: the whole
 * entry is refused, the dependencies read before it freed. */
START_TEST(bad_dependency_refuses_the_entry)
{
	struct store_entry e, back;
	struct store_dep d[4];

	sample(&e, d);
	cJSON *o = entry_encode(&e, ENTRY_FORM_META);
	cJSON *last = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "deps"), 3);
	cJSON_ReplaceItemInObject(last, "ino", cJSON_CreateString("-5"));
	ck_assert_int_eq(entry_decode(o, ENTRY_FORM_META, &back), -EBADMSG);
	cJSON_ReplaceItemInObject(last, "ino", cJSON_CreateString("12x"));
	ck_assert_int_eq(entry_decode(o, ENTRY_FORM_META, &back), -EBADMSG);
	cJSON_ReplaceItemInObject(last, "ino", cJSON_CreateString("99999999999999999999"));
	ck_assert_int_eq(entry_decode(o, ENTRY_FORM_META, &back), -EBADMSG);
	cJSON_ReplaceItemInObject(last, "ino", cJSON_CreateString("18446744073709551615"));
	ck_assert_int_eq(entry_decode(o, ENTRY_FORM_META, &back), 0);
	ck_assert_uint_eq(back.deps[3].ino, 18446744073709551615ull);
	store_entry_free(&back);
	cJSON_Delete(o);
}
END_TEST

/* tmpl with each '@' replaced by hex, into out. */
static void with_hex(const char *tmpl, const char *hex, char *out, size_t cap)
{
	size_t o = 0, hl = strlen(hex);
	for (; *tmpl != '\0'; tmpl++) {
		ck_assert_uint_lt(o + hl + 1, cap);
		if (*tmpl == '@') {
			memcpy(out + o, hex, hl);
			o += hl;
		} else {
			out[o++] = *tmpl;
		}
	}
	out[o] = '\0';
}

/* One dependency through text, for each kind: what the kind stands for
 * survives; what a kind needs is required. */
START_TEST(dependency_kinds)
{
	struct store_dep d[4], back;
	char hex[65], text[256];

	four_deps(d);
	for (int i = 0; i < 4; i++) {
		cJSON *o = entry_dep_encode(&d[i], false);
		ck_assert_ptr_nonnull(o);
		ck_assert_str_eq(cJSON_GetObjectItem(o, "kind")->valuestring,
				 store_dep_kind_name(i));
		char *t = cJSON_PrintUnformatted(o);
		cJSON_Delete(o);
		o = cJSON_Parse(t);
		free(t);
		ck_assert_int_eq(entry_dep_decode(o, false, &back), 0);
		cJSON_Delete(o);
		deps_equal(&d[i], &back, 1, false);
		free(back.path);
	}
	/* An unset variable stays unset. */
	d[3].mode = 0;
	cJSON *o = entry_dep_encode(&d[3], false);
	ck_assert_int_eq(entry_dep_decode(o, false, &back), 0);
	ck_assert_uint_eq(back.mode, 0);
	free(back.path);
	cJSON_Delete(o);

	util_hex(d[0].digest, 32, hex);
	static const char *const bad[] = {
		"{\"path\":\"/a.h\",\"kind\":\"file\",\"size\":1}",
		"{\"path\":\"/a.h\",\"kind\":\"file\",\"size\":-1,\"sha256\":\"@\"}",
		"{\"path\":\"/usr\",\"kind\":\"exists\"}",
		"{\"path\":\"/usr\",\"kind\":\"exists\",\"mode\":-1}",
		"{\"path\":\"CPATH\",\"kind\":\"env\",\"sha256\":\"@\"}",
		"{\"path\":\"CPATH\",\"kind\":\"env\",\"set\":true}",
		"{\"path\":\"rel.h\",\"kind\":\"absent\"}",
		"{\"path\":\"\",\"kind\":\"env\",\"set\":false,\"sha256\":\"@\"}",
		"{\"path\":\"/a.h\",\"kind\":\"other\"}",
		"{\"kind\":\"absent\"}",
		"[\"/a.h\"]",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		with_hex(bad[i], hex, text, sizeof(text));
		o = cJSON_Parse(text);
		ck_assert_ptr_nonnull(o);
		ck_assert_msg(entry_dep_decode(o, false, &back) == -EBADMSG, "accepted %s", text);
		ck_assert_ptr_null(back.path);
		cJSON_Delete(o);
	}
	/* Metadata from before kinds: a file. */
	snprintf(text, sizeof(text), "{\"path\":\"/a.h\",\"size\":7,\"sha256\":\"%s\"}", hex);
	o = cJSON_Parse(text);
	ck_assert_int_eq(entry_dep_decode(o, false, &back), 0);
	ck_assert_uint_eq(back.kind, STORE_DEP_FILE);
	ck_assert_uint_eq(back.size, 7);
	free(back.path);
	cJSON_Delete(o);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("entry_codec");
	TCase *tc = tcase_create("codec");

	tcase_add_test(tc, meta_round_trip);
	tcase_add_test(tc, upstream_round_trip);
	tcase_add_test(tc, list_and_show);
	tcase_add_test(tc, versions);
	tcase_add_test(tc, malformed_refused);
	tcase_add_test(tc, bad_dependency_refuses_the_entry);
	tcase_add_test(tc, dependency_kinds);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
