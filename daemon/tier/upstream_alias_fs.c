/*
 * The upstream tier on disk, part three: alias records. An alias record says
 * "alias names the entry key of rkey, built by this toolchain"; it lives at
 * aliases/<2 hex>/<sha256 of the alias>/<key>.json, so that a hostile alias
 * never becomes a path and several nodes (other compilers, re-points) each
 * leave their own record. A record is a hint: a reader takes the entry it
 * names only after every check an upstream entry passes (upfs_take, then
 * the tier's toolchain and recheck). Runs on the thread pool.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "log.h"
#include "upstream_int.h"
#include "util.h"
#include "validate.h"

/* A record is small: the alias (4 KiB at most on the wire) and its data. */
#define RECORD_MAX (UP_ALIAS_DATA_MAX + ((size_t)64 << 10))
/* Records read per alias; more is a directory someone filled by hand. */
#define RECORDS_MAX 64

void upfs_alias_free(struct up_alias *a)
{
	free(a->alias);
	free(a->output);
	free(a->toolchain);
	free(a->data);
	memset(a, 0, sizeof(*a));
}

void upfs_alias_dir(const struct up_dirs *u, const char *alias, char *buf, size_t len)
{
	uint8_t digest[32];
	char hex[65];
	util_sha256(alias, strlen(alias), digest);
	util_hex(digest, 32, hex);
	snprintf(buf, len, "%s/%.2s/%s", u->aliases, hex, hex);
}

static bool is_hex64(const char *s)
{
	uint8_t tmp[32];
	return s != NULL && strlen(s) == 64 && util_unhex32(s, tmp);
}

static char *record_text(const struct up_dirs *u, const struct up_alias *a)
{
	char id[65];
	cJSON *o = cJSON_CreateObject();
	util_hex(a->tc_id, 32, id);
	bool ok = o != NULL && cJSON_AddNumberToObject(o, "kiln_upstream_alias", UP_ALIAS_VERSION) &&
		  cJSON_AddStringToObject(o, "alias", a->alias) &&
		  cJSON_AddStringToObject(o, "key", a->key) &&
		  cJSON_AddStringToObject(o, "rkey", a->rkey) &&
		  cJSON_AddStringToObject(o, "output", a->output) &&
		  cJSON_AddStringToObject(o, "toolchain", a->toolchain) &&
		  cJSON_AddStringToObject(o, "toolchain_id", id) &&
		  cJSON_AddNumberToObject(o, "created", util_wall_s()) &&
		  cJSON_AddStringToObject(o, "host", u->host);
	if (ok && a->data != NULL)
		ok = cJSON_AddStringToObject(o, "data", a->data) != NULL;
	char *text = ok ? cJSON_Print(o) : NULL;
	cJSON_Delete(o);
	return text;
}

int upfs_alias_publish(const struct up_dirs *u, const struct up_alias *a)
{
	char tmp[PATH_MAX], dir[PATH_MAX], path[PATH_MAX + 80];
	if (!is_hex64(a->key) || !is_hex64(a->rkey) || a->alias == NULL || a->output == NULL ||
	    a->toolchain == NULL || (a->data != NULL && strlen(a->data) > UP_ALIAS_DATA_MAX))
		return -EINVAL;
	int rc = upfs_ensure_dirs(u);
	if (rc != 0)
		return rc;
	char *text = record_text(u, a);
	if (text == NULL)
		return -ENOMEM;
	rc = upfs_write_tmp(u, "a", a->key, text, strlen(text), NULL, NULL, NULL, tmp, sizeof(tmp));
	free(text);
	if (rc != 0)
		return rc;
	upfs_alias_dir(u, a->alias, dir, sizeof(dir));
	/* The 2-hex level first: dir without its last component. */
	char *slash = strrchr(dir, '/');
	*slash = '\0';
	rc = upfs_mkdir(dir);
	*slash = '/';
	if (rc == 0)
		rc = upfs_mkdir(dir);
	snprintf(path, sizeof(path), "%s/%s.json", dir, a->key);
	/* rename: the record of the same alias and key, written again, is the
	 * newest now (readers see the old file or the new one, whole). */
	if (rc == 0 && rename(tmp, path) != 0)
		rc = -errno;
	return upfs_placed(rc, tmp, dir);
}

static char *dup_string(const cJSON *o, const char *name, size_t max)
{
	const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, name));
	if (s == NULL || s[0] == '\0' || strlen(s) > max)
		return NULL;
	return strdup(s);
}

/* Decodes a record; false when it is not one kiln writes, or not at its
 * place (name: its file name, "<key>.json"; hex: its folder, the SHA-256
 * of the alias inside), or (alias not NULL) another alias's. */
static bool record_decode(const cJSON *o, const char *alias, const char *hex, const char *name,
			  struct up_alias *a)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "kiln_upstream_alias");
	const cJSON *created = cJSON_GetObjectItemCaseSensitive(o, "created");
	const cJSON *data = cJSON_GetObjectItemCaseSensitive(o, "data");
	const char *key = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "key"));
	const char *rkey = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "rkey"));
	const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "toolchain_id"));
	uint8_t digest[32];
	char mine[65];
	memset(a, 0, sizeof(*a));
	if (!cJSON_IsNumber(v) || v->valuedouble != UP_ALIAS_VERSION || !cJSON_IsNumber(created) ||
	    !is_hex64(key) || !is_hex64(rkey) || !is_hex64(id) || strncmp(name, key, 64) != 0 ||
	    (data != NULL && (!cJSON_IsString(data) || strlen(data->valuestring) > UP_ALIAS_DATA_MAX ||
			      !validate_base64(data->valuestring, strlen(data->valuestring)))))
		return false;
	/* The folder is the alias's digest; the alias inside must be the one
	 * asked for, byte for byte, and hash to its folder (a record copied
	 * by hand into another alias's folder is no hit). */
	a->alias = dup_string(o, "alias", 1 << 16);
	a->output = dup_string(o, "output", 32);
	a->toolchain = dup_string(o, "toolchain", PATH_MAX * 2 + 16);
	if (a->alias != NULL) {
		util_sha256(a->alias, strlen(a->alias), digest);
		util_hex(digest, 32, mine);
	}
	char why[128];
	if (a->alias == NULL || validate_alias(a->alias, why, sizeof(why)) != 0 || strcmp(mine, hex) != 0 || (alias != NULL && strcmp(a->alias, alias) != 0) ||
	    a->output == NULL || a->toolchain == NULL ||
	    (data != NULL && (a->data = strdup(data->valuestring)) == NULL)) {
		upfs_alias_free(a);
		return false;
	}
	memcpy(a->key, key, 65);
	memcpy(a->rkey, rkey, 65);
	util_unhex32(id, a->tc_id);
	a->created = created->valuedouble;
	return true;
}

/* Reads dir/name into a; 0, -ENOENT (gone meanwhile), or -EBADMSG. */
static int record_read(const char *dir, const char *hex, const char *name, const char *alias,
		       struct up_alias *a)
{
	char path[PATH_MAX + 80], *text = NULL;
	size_t len = 0;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int rc = util_read_file(path, RECORD_MAX, &text, &len);
	if (rc == -ENOENT)
		return rc;
	cJSON *o = rc == 0 ? cJSON_ParseWithLength(text, len) : NULL;
	free(text);
	bool ok = o != NULL && record_decode(o, alias, hex, name, a);
	cJSON_Delete(o);
	if (!ok) {
		log_warn("ignoring upstream alias record %s: %s", path,
			 rc != 0 ? strerror(-rc) : "not a valid kiln alias record for its place");
		return -EBADMSG;
	}
	return 0;
}

static int newest_first(const void *pa, const void *pb)
{
	const struct up_alias *a = pa, *b = pb;
	return a->created < b->created ? 1 : a->created > b->created ? -1 : strcmp(a->key, b->key);
}

int upfs_alias_records(const struct up_dirs *u, const char *hex, const char *alias,
		       struct up_alias **out, size_t *n, unsigned *bad)
{
	char dir[PATH_MAX];
	struct dirent *de;
	*out = NULL;
	*n = 0;
	if (!is_hex64(hex))
		return -EINVAL;
	snprintf(dir, sizeof(dir), "%s/%.2s/%s", u->aliases, hex, hex);
	DIR *dp = opendir(dir);
	if (dp == NULL)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
	struct up_alias *v = calloc(RECORDS_MAX, sizeof(*v));
	if (v == NULL) {
		closedir(dp);
		return -ENOMEM;
	}
	while ((de = readdir(dp)) != NULL && *n < RECORDS_MAX) {
		size_t len = strlen(de->d_name);
		if (len != 64 + 5 || strcmp(de->d_name + 64, ".json") != 0)
			continue;
		int rc = record_read(dir, hex, de->d_name, alias, &v[*n]);
		if (rc == 0)
			(*n)++;
		else if (rc == -EBADMSG)
			(*bad)++;
	}
	closedir(dp);
	qsort(v, *n, sizeof(*v), newest_first);
	*out = v;
	return 0;
}

int upfs_alias_list(const struct up_dirs *u, const char *alias, struct up_alias **out, size_t *n,
		    unsigned *bad)
{
	uint8_t digest[32];
	char hex[65];
	util_sha256(alias, strlen(alias), digest);
	util_hex(digest, 32, hex);
	return upfs_alias_records(u, hex, alias, out, n, bad);
}
