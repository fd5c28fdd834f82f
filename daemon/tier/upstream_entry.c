/*
 * The upstream tier on disk, part two: entries. A lookup verifies all it
 * takes (every dependency hashed on this node, the artifact key recomputed,
 * the object's size and SHA-256 checked while it is copied into the local
 * cache); a publish writes the object, then the metadata, each through
 * tmp/, fsync and link() or rename(), so metadata present implies its object
 * complete. Runs on the thread pool.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "key.h"
#include "deps.h"
#include "entry_codec.h"
#include "log.h"
#include "upstream_int.h"
#include "util.h"

/* A metadata file is small (the dependency list, the build's output). */
#define META_MAX ((size_t)16 << 20)
/* Entries tried per request key; more is a directory someone filled by hand. */
#define CANDIDATES_MAX 256

/* The metadata of one upstream entry, as read: the entry (the codec's
 * UPSTREAM form: no node-local fields) and the build's output. */
struct up_meta {
	struct store_entry e;
	char *log;
};

static void meta_free(struct up_meta *m)
{
	store_entry_free(&m->e);
	free(m->log);
	memset(m, 0, sizeof(*m));
}

static bool is_key(const char *s)
{
	uint8_t tmp[32];
	return util_unhex32(s, tmp);
}

/* True when the file at path has exactly size bytes with this SHA-256. */
static bool object_ok(const char *path, uint64_t size, const uint8_t digest[32])
{
	struct stat st;
	uint8_t got[32];
	uint64_t n = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == size &&
		  util_copy_sha256(fd, -1, &n, got) == 0 && n == size && memcmp(got, digest, 32) == 0;
	close(fd);
	return ok;
}

static void object_path(const struct up_dirs *u, const uint8_t sha[32], const char *output,
			char *buf, size_t len)
{
	char hex[65];
	util_hex(sha, 32, hex);
	snprintf(buf, len, "%s/%.2s/%s.%s", u->objects, hex, hex, store_output_ext(output));
}
/* Metadata. */

/* Reads and checks the shape of a metadata file. 0, -EBADMSG for a file
 * that is not what kiln writes, -ENOENT for one of an older format (keys this
 * kilnd never computes), or another negative errno. */
static int meta_read(const char *path, struct up_meta *m)
{
	char *text = NULL;
	size_t len;
	memset(m, 0, sizeof(*m));
	int rc = util_read_file(path, META_MAX, &text, &len);
	if (rc != 0)
		return rc;
	cJSON *o = cJSON_ParseWithLength(text, len);
	free(text);
	rc = o != NULL ? entry_decode(o, ENTRY_FORM_UPSTREAM, &m->e) : -EBADMSG;
	const char *log = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "log"));
	if (rc == 0 && log != NULL && (m->log = strdup(log)) == NULL)
		rc = -ENOMEM;
	cJSON_Delete(o);
	if (rc != 0)
		meta_free(m);
	return rc;
}

/* Lookup. */

/*
 * Checks every dependency against this node's file: the same size and the
 * same SHA-256, or the entry is not for this node (a header differs here).
 * On success m->e.deps carry this node's mtimes.
 */
static bool deps_match(struct up_meta *m)
{
	char why[512];
	for (size_t i = 0; i < m->e.ndeps; i++) {
		if (deps_check_here(&m->e.deps[i], why, sizeof(why)) != 0) {
			log_debug("upstream entry %.16s: %s", m->e.key, why);
			return false;
		}
	}
	return true;
}

/* Copies the object of m into tmp_object, checking size and SHA-256. */
static int fetch_object(const struct up_dirs *u, const struct up_meta *m, const char *tmp_object)
{
	char path[PATH_MAX];
	uint8_t got[32];
	uint64_t n = 0;
	object_path(u, m->e.sha256, m->e.output, path, sizeof(path));
	int in = open(path, O_RDONLY | O_CLOEXEC);
	if (in < 0) {
		log_warn("upstream entry %.16s names object %s, which cannot be opened: %s", m->e.key, path,
			 strerror(errno));
		return -EBADMSG;
	}
	unlink(tmp_object);
	int out = open(tmp_object, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (out < 0) {
		int rc = -errno;
		log_warn("cannot create %s in the cache: %s", tmp_object, strerror(-rc));
		close(in);
		return rc;
	}
	int rc = util_copy_sha256(in, out, &n, got);
	if (close(out) != 0 && rc == 0)
		rc = -errno;
	close(in);
	if (rc == 0 && (n != m->e.size || memcmp(got, m->e.sha256, 32) != 0)) {
		log_warn("upstream object %s does not match its metadata (%llu bytes, %llu expected, or "
			 "another SHA-256); not using it", path, (unsigned long long)n,
			 (unsigned long long)m->e.size);
		rc = -EBADMSG;
	} else if (rc != 0) {
		log_warn("cannot copy upstream object %s: %s", path, strerror(-rc));
		rc = -EBADMSG;
	}
	if (rc != 0)
		unlink(tmp_object);
	return rc;
}

/* One candidate: 1 taken, 0 not for this node, -EBADMSG broken. */
static int try_entry(const struct up_dirs *u, const char *dir, const char *name, const char *rkey,
		     const char *output, const char *tmp_object, struct up_meta *m)
{
	char path[PATH_MAX + 320], key[65];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int rc = meta_read(path, m);
	if (rc == -ENOENT)
		return 0;
	if (rc != 0) {
		log_warn("ignoring upstream metadata %s: %s", path,
			 rc == -EBADMSG ? "not valid kiln metadata" : strerror(-rc));
		return -EBADMSG;
	}
	if (strncmp(name, m->e.key, 64) != 0 || strcmp(m->e.rkey, rkey) != 0 ||
	    strcmp(m->e.output, output) != 0) {
		log_warn("ignoring upstream metadata %s: its key, request key or output do not match "
			 "its place", path);
		return -EBADMSG;
	}
	if (!deps_match(m))
		return 0;
	key_artifact(rkey, m->e.deps, m->e.ndeps, key);
	if (strcmp(key, m->e.key) != 0) {
		log_warn("ignoring upstream metadata %s: its dependencies give key %.16s", path, key);
		return -EBADMSG;
	}
	rc = fetch_object(u, m, tmp_object);
	return rc == 0 ? 1 : rc;
}

/* The metadata files of dir ("<key>.json"), malloc'd names. */
static int list_candidates(const char *dir, char ***out, size_t *n)
{
	DIR *dp = opendir(dir);
	struct dirent *de;
	*out = NULL;
	*n = 0;
	if (dp == NULL)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
	char **names = calloc(CANDIDATES_MAX, sizeof(*names));
	if (names == NULL) {
		closedir(dp);
		return -ENOMEM;
	}
	while ((de = readdir(dp)) != NULL && *n < CANDIDATES_MAX) {
		char key[65];
		size_t len = strlen(de->d_name);
		if (len != 64 + 5 || strcmp(de->d_name + 64, ".json") != 0)
			continue;
		memcpy(key, de->d_name, 64);
		key[64] = '\0';
		if (is_key(key) && (names[*n] = strdup(de->d_name)) != NULL)
			(*n)++;
	}
	closedir(dp);
	*out = names;
	return 0;
}

/* Moves what a lookup takes of m into e (its label, arguments and
 * sources only when e has none; an "imported" toolchain name replaced by
 * the publisher's), and the build's output into *log. */
static void take_meta(struct store_entry *e, struct up_meta *m, char **log)
{
	memcpy(e->key, m->e.key, sizeof(e->key));
	memcpy(e->rkey, m->e.rkey, sizeof(e->rkey));
	e->size = m->e.size;
	memcpy(e->sha256, m->e.sha256, 32);
	e->has_sha256 = true;
	e->build_ms = m->e.build_ms;
	e->deps = m->e.deps;
	e->ndeps = m->e.ndeps;
	e->deps_source = STORE_DEPS_OBSERVED;
	m->e.deps = NULL;
	m->e.ndeps = 0;
	if (e->label == NULL) {
		e->label = m->e.label;
		m->e.label = NULL;
	}
	if (e->args_json == NULL) {
		e->args_json = m->e.args_json;
		m->e.args_json = NULL;
	}
	if (e->sources_json == NULL) {
		e->sources_json = m->e.sources_json;
		m->e.sources_json = NULL;
	}
	if (m->e.toolchain != NULL && e->toolchain != NULL && strcmp(e->toolchain, "imported") == 0) {
		free(e->toolchain);
		e->toolchain = m->e.toolchain;
		m->e.toolchain = NULL;
	}
	*log = m->log;
	m->log = NULL;
}

int upfs_find(const struct up_dirs *u, const char *rkey, const char *output,
	      const char *tmp_object, struct store_entry *e, char **log, unsigned *bad)
{
	char dir[PATH_MAX];
	char **names;
	size_t n;
	int found = 0;
	*log = NULL;
	snprintf(dir, sizeof(dir), "%s/%.2s/%s", u->entries, rkey, rkey);
	int rc = list_candidates(dir, &names, &n);
	if (rc != 0)
		return rc;
	for (size_t i = 0; i < n && found == 0; i++) {
		struct up_meta m;
		rc = try_entry(u, dir, names[i], rkey, output, tmp_object, &m);
		if (rc == -EBADMSG)
			(*bad)++;
		if (rc == 1) {
			found = 1;
			take_meta(e, &m, log);
		}
		meta_free(&m);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return found;
}

int upfs_take(const struct up_dirs *u, const char *rkey, const char *key, const char *output,
	      const char *tmp_object, struct store_entry *e, char **log)
{
	char dir[PATH_MAX], name[80];
	struct up_meta m;
	*log = NULL;
	if (!is_key(rkey) || !is_key(key))
		return -EBADMSG;
	snprintf(dir, sizeof(dir), "%s/%.2s/%s", u->entries, rkey, rkey);
	snprintf(name, sizeof(name), "%s.json", key);
	int rc = try_entry(u, dir, name, rkey, output, tmp_object, &m);
	if (rc == -ENOENT)
		rc = 0;
	if (rc == 1)
		take_meta(e, &m, log);
	meta_free(&m);
	return rc;
}

bool upfs_has_entry(const struct up_dirs *u, const char *rkey, const char *key)
{
	char path[PATH_MAX];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%.2s/%s/%s.json", u->entries, rkey, rkey, key);
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Publishing. */

static bool deps_publishable(const struct store_entry *e)
{
	/* Only what observation recorded is complete enough to share. */
	return e->deps_source == STORE_DEPS_OBSERVED;
}

/* Makes a file in tmp/ from data or from the file src; read-only, fsync'ed.
 * With src, reports its size and SHA-256. 0 or a negative errno. */
int upfs_write_tmp(const struct up_dirs *u, const char *tag, const char *key, const char *data,
			   size_t len, const char *src, uint64_t *size, uint8_t digest[32], char *path,
			   size_t pathlen)
{
	int in = -1, rc = 0;
	snprintf(path, pathlen, "%s/%s-%.16s-%s-%d-XXXXXX", u->tmp, tag, key, u->host, (int)getpid());
	if (src != NULL && (in = open(src, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	int fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		if (in >= 0)
			close(in);
		return rc;
	}
	rc = src != NULL ? util_copy_sha256(in, fd, size, digest) : util_write_all(fd, data, len);
	if (rc == 0 && (fchmod(fd, 0444) != 0 || fsync(fd) != 0))
		rc = -errno;
	/* close() reports deferred write errors on NFS and quota overruns. */
	if (close(fd) != 0 && rc == 0)
		rc = -errno;
	if (in >= 0)
		close(in);
	if (rc != 0)
		unlink(path);
	return rc;
}

/*
 * Puts the object in place under its digest; 1 written, 0 an existing one
 * kept. link() never replaces, so a concurrent publisher's file stays; an
 * existing file is checked, and one that does not hold these bytes
 * (damaged) is replaced with rename().
 */
static int place_object(const char *tmp, const char *path, uint64_t size, const uint8_t digest[32])
{
	int rc = 1;
	if (link(tmp, path) == 0) {
		unlink(tmp);
		return 1;
	}
	int err = errno;
	if (err == EEXIST && object_ok(path, size, digest)) {
		unlink(tmp);
		return 0;
	}
	if (err != EEXIST)
		log_debug("link %s: %s; renaming instead", path, strerror(err));
	/* A damaged object, or a filesystem without hard links: since the
	 * name is the digest, whatever rename() replaces held the same bytes
	 * or wrong ones. */
	if (rename(tmp, path) != 0) {
		rc = -errno;
		unlink(tmp);
	}
	return rc;
}

/* True when the metadata at path is valid for key and its object verifies. */
static bool entry_ok(const struct up_dirs *u, const char *path, const char *key)
{
	struct up_meta m;
	char obj[PATH_MAX];
	if (meta_read(path, &m) != 0)
		return false;
	object_path(u, m.e.sha256, m.e.output, obj, sizeof(obj));
	bool ok = strcmp(m.e.key, key) == 0 && object_ok(obj, m.e.size, m.e.sha256);
	meta_free(&m);
	return ok;
}

/* Puts the metadata in place; 1 written, 0 an existing valid entry kept. */
static int place_meta(const struct up_dirs *u, const char *tmp, const char *path, const char *key)
{
	if (link(tmp, path) == 0) {
		unlink(tmp);
		return 1;
	}
	if (errno == EEXIST && entry_ok(u, path, key)) {
		unlink(tmp);
		return 0;
	}
	if (rename(tmp, path) != 0) {
		int rc = -errno;
		unlink(tmp);
		return rc;
	}
	return 1;
}

/* After placing a file from tmp into dir (rc: the place_* result, or the
 * error that came before it): the directory synced. On an error tmp is
 * removed (place_* removed it already; its mkostemp name is this call's
 * alone, so a second unlink finds nothing). */
int upfs_placed(int rc, const char *tmp, const char *dir)
{
	if (rc < 0) {
		unlink(tmp);
		return rc;
	}
	int src = util_fsync_dir_at(AT_FDCWD, dir);
	return src != 0 ? src : rc;
}

static char *entry_meta_text(const struct up_dirs *u, const struct store_entry *e, uint64_t size,
			     const uint8_t sha[32], const char *log, size_t loglen)
{
	char hex[65], obj[PATH_MAX];
	struct store_entry pub = *e;   /* shallow: the object as published */
	pub.size = size;
	memcpy(pub.sha256, sha, 32);
	pub.has_sha256 = true;
	cJSON *o = entry_encode(&pub, ENTRY_FORM_UPSTREAM);
	char *text = NULL;
	util_hex(sha, 32, hex);
	snprintf(obj, sizeof(obj), "objects/%.2s/%s.%s", hex, hex, store_output_ext(e->output));
	bool ok = o != NULL && cJSON_AddStringToObject(o, "object", obj) != NULL &&
		  cJSON_AddNumberToObject(o, "created", (double)time(NULL)) != NULL &&
		  cJSON_AddStringToObject(o, "host", u->host) != NULL;
	if (ok && log != NULL && loglen > 0 && strlen(log) == loglen)
		ok = cJSON_AddStringToObject(o, "log", log) != NULL;
	if (ok)
		text = cJSON_Print(o);
	cJSON_Delete(o);
	return text;
}

static int publish_object(const struct up_dirs *u, const struct store_entry *e, const char *object,
			  uint64_t *size, uint8_t sha[32])
{
	char tmp[PATH_MAX], dir[PATH_MAX], path[PATH_MAX], hex[65];
	int rc = upfs_write_tmp(u, "o", e->key, NULL, 0, object, size, sha, tmp, sizeof(tmp));
	if (rc != 0)
		return rc;
	util_hex(sha, 32, hex);
	snprintf(dir, sizeof(dir), "%s/%.2s", u->objects, hex);
	object_path(u, sha, e->output, path, sizeof(path));
	rc = upfs_mkdir(dir);
	if (rc == 0)
		rc = place_object(tmp, path, *size, sha);
	return upfs_placed(rc, tmp, dir);
}

int upfs_publish(const struct up_dirs *u, const struct store_entry *e, const char *object,
		 const char *log, size_t loglen)
{
	char tmp[PATH_MAX], dir[PATH_MAX], path[PATH_MAX + 80];
	uint8_t sha[32];
	uint64_t size = 0;
	if (!deps_publishable(e)) {
		log_debug("not publishing %.16s upstream: a dependency changed during its build", e->key);
		return 0;
	}
	int wrote = upfs_ensure_dirs(u);
	if (wrote == 0)
		wrote = publish_object(u, e, object, &size, sha);
	if (wrote < 0)
		return wrote;
	char *text = entry_meta_text(u, e, size, sha, log, loglen);
	if (text == NULL)
		return -ENOMEM;
	int rc = upfs_write_tmp(u, "m", e->key, text, strlen(text), NULL, NULL, NULL, tmp, sizeof(tmp));
	free(text);
	if (rc != 0)
		return rc;
	snprintf(dir, sizeof(dir), "%s/%.2s", u->entries, e->rkey);
	rc = upfs_mkdir(dir);
	snprintf(dir, sizeof(dir), "%s/%.2s/%s", u->entries, e->rkey, e->rkey);
	if (rc == 0)
		rc = upfs_mkdir(dir);
	snprintf(path, sizeof(path), "%s/%s.json", dir, e->key);
	if (rc == 0)
		rc = place_meta(u, tmp, path, e->key);
	rc = upfs_placed(rc, tmp, dir);
	return rc < 0 ? rc : rc == 1 || wrote == 1;
}
