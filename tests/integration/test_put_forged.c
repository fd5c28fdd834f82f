/*
 * Integration tests of what other caches and clients say, which kilnd must
 * not take on trust, and of how it reports what it recorded:
 *   - an alias follows the last get that named it, however the pool orders
 *     its jobs;
 *   - a put whose dependency list was emptied (the key recomputed to match)
 *     and a put of an artifact that does not load are refused: the
 *     importing node observes its own toolchain and loads the artifact;
 *   - a node that remembers what its toolchain read for one put's stand-ins
 *     still refuses the next put whose list lacks one of those files, and
 *     its stand-in runs never read the real texts (forged tier entries);
 *   - kiln status and kiln show say how dependencies were recorded, and a
 *     compiler that escapes the interposer falls back to dependency files.
 */
#include "harness.h"
#include "observe_util.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "entry_codec.h"
#include "key.h"
#include "kiln_x.h"
#include "util.h"

/* Gets program name (returning value) with alias in a fresh connection of
 * this process, so that the request reaches the daemon, and waits for it. */
static void get_with_alias(const char *name, int value, const char *alias)
{
	char key[72];

	harness_get_program(NULL, name, value, alias, key);
}

/* kiln_lookup(alias) in a fresh connection; returns the program's value. */
static int lookup_value(const char *alias)
{
	struct kiln *k = NULL;
	struct kiln_program *p = NULL;
	int (*fn)(void);
	int rc, value;

	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	rc = kiln_lookup(k, alias, &p);
	ck_assert_msg(rc == KILN_OK, "kiln_lookup %s: %s: %s", alias, kiln_strerror(rc),
		      kiln_errmsg(k));
	*(void **)&fn = kiln_sym(p, "kiln_test_value");
	ck_assert_ptr_nonnull(fn);
	value = fn();
	kiln_close(k);
	return value;
}

/* An alias points at the program of the last get that named it, even when
 * every get is a hit and their alias updates run on the thread pool. */
START_TEST(alias_follows_the_last_get)
{
	char key[72];

	harness_start(NULL);
	harness_get_program(NULL, "x", 141, NULL, key);
	harness_get_program(NULL, "y", 142, NULL, key);
	for (int round = 1; round <= 20; round++) {
		int value;

		get_with_alias("x", 141, "a");
		get_with_alias("y", 142, "a");
		get_with_alias("x", 141, "a");
		value = lookup_value("a");
		ck_assert_msg(value == 141, "round %d: after getting x, y, x with alias a, the alias "
			      "gives the program returning %d, not x's 141", round, value);
	}
	ck_assert_int_eq(builds_started(), 2);
	harness_stop();
}
END_TEST

/* Gets req on the harness daemon and exports its artifact. */
static void export_request(struct harness_export *x, const struct kiln_request *req)
{
	struct kiln *k;
	struct kiln_program *p;

	ck_assert_int_eq(kiln_open(harness.socket, &k), KILN_OK);
	ck_assert_msg(kiln_get(k, req, &p) == KILN_OK, "%s", kiln_errmsg(k));
	snprintf(x->key, sizeof(x->key), "%s", kiln_program_key(p));
	x->skel = kiln_x_skeleton(req);
	ck_assert_ptr_nonnull(x->skel);
	x->size = (size_t)lseek(kiln_program_fd(p), 0, SEEK_END);
	x->bytes = malloc(x->size);
	ck_assert_ptr_nonnull(x->bytes);
	ck_assert_int_eq(pread(kiln_program_fd(p), x->bytes, x->size, 0), (ssize_t)x->size);
	ck_assert_msg(kiln_x_export(k, x->key, x->bytes, x->size, &x->meta) == KILN_OK, "%s",
		      kiln_errmsg(k));
	kiln_close(k);
}

static void exported_free(struct harness_export *x)
{
	free(x->skel);
	free(x->meta);
	free(x->bytes);
}

/* Puts skeleton skel with meta and bytes into the kilnd at sock; its error
 * text goes to msg. */
static int put_to(const char *sock, const char *skel, const char *meta, const char *bytes,
		  size_t size, char *msg, size_t msglen)
{
	struct kiln *k;
	int fd = memfd_create("observe-put", MFD_CLOEXEC), rc;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, bytes, size), (ssize_t)size);
	ck_assert_int_eq(kiln_open(sock, &k), KILN_OK);
	rc = kiln_x_put(k, skel, meta, fd);
	snprintf(msg, msglen, "%s", rc == KILN_OK ? "" : kiln_errmsg(k));
	kiln_close(k);
	close(fd);
	return rc;
}

/* meta with member name replaced by value (taken over); malloc'd. */
static char *meta_with(const char *meta, const char *name, cJSON *value)
{
	cJSON *m = cJSON_Parse(meta);
	char *out;

	ck_assert_msg(cJSON_IsObject(m), "export metadata is no JSON object: %s", meta);
	cJSON_DeleteItemFromObjectCaseSensitive(m, name);
	cJSON_AddItemToObject(m, name, value);
	out = cJSON_PrintUnformatted(m);
	ck_assert_ptr_nonnull(out);
	cJSON_Delete(m);
	return out;
}

/* 64 hex digits into 32 bytes. */

/* The artifact key of request key rkey with deps (NULL: none), computed
 * with kilnd's own function. */
static void key_for(const char *rkey, const cJSON *deps, char out[65])
{
	int n = cJSON_GetArraySize(deps);
	struct store_dep *d = calloc((size_t)n + 1, sizeof(*d));
	const cJSON *dep;
	int i = 0;

	ck_assert_ptr_nonnull(d);
	cJSON_ArrayForEach(dep, deps) {
		/* The wire form of a dep is the store's JSON form. */
		ck_assert_int_eq(entry_dep_decode(dep, false, &d[i]), 0);
		i++;
	}
	key_artifact(rkey, d, (size_t)n, out);
	for (i = 0; i < n; i++)
		free(d[i].path);
	free(d);
}

/* The artifact key of x's entry computed from its meta's deps (NULL: none)
 * with kilnd's own function, for the request key the daemon recorded. */
static void artifact_key(const struct harness_export *x, const cJSON *deps, char out[65])
{
	cJSON *ls = harness_cli_json("ls", NULL);
	const cJSON *e = harness_find_entry(ls, "key", x->key);

	ck_assert_ptr_nonnull(e);
	key_for(harness_str(e, "rkey"), deps, out);
	cJSON_Delete(ls);
}

/* A put whose deps are emptied, with the key recomputed to match: the
 * artifact was built with h.h, so the importing node cannot take the claim
 * that it depends on nothing. */
START_TEST(put_with_empty_deps_is_refused)
{
	char inc[HARNESS_PATH], hdr[HARNESS_PATH], sock[HARNESS_PATH], msg[4096], key[65];
	struct harness_export x;
	cJSON *m, *deps;
	char *meta, *forged;
	struct oreq r;
	int rc;

	make_dir(inc, "inc");
	write_header(harness_path(hdr, "inc/h.h"), 1);
	oreq_program(&r, inc);
	harness_start(NULL);
	export_request(&x, &r.req);

	/* The key is recomputed the way kilnd computes it; first check that
	 * the recorded deps give the key the build got. */
	m = cJSON_Parse(x.meta);
	deps = cJSON_GetObjectItemCaseSensitive(m, "deps");
	ck_assert_msg(cJSON_GetArraySize(deps) > 0, "the export names no deps: %s", x.meta);
	artifact_key(&x, deps, key);
	ck_assert_str_eq(key, x.key);
	cJSON_Delete(m);
	artifact_key(&x, NULL, key);
	meta = meta_with(x.meta, "deps", cJSON_CreateArray());
	forged = meta_with(meta, "key", cJSON_CreateString(key));
	free(meta);

	harness_start_named("b", NULL, NULL, sock);
	rc = put_to(sock, x.skel, forged, x.bytes, x.size, msg, sizeof(msg));
	ck_assert_msg(rc != KILN_OK, "node b imported an artifact built with h.h from a put "
		      "that claimed it depends on nothing");
	ck_assert_msg(rc == KILN_EREFUSED && harness_contains(msg, "(mismatch)"),
		      "a put claiming no deps got %s, not mismatch: %s", kiln_strerror(rc), msg);
	ck_assert_int_eq(harness_status_num_at(sock, "entries"), 0);
	ck_assert_int_eq(harness_status_num_at(sock, "imports"), 0);
	free(forged);
	exported_free(&x);
	oreq_free(&r);
}
END_TEST

/* Builds <dir>/bad.so, which refers to a variable nobody defines: its
 * relocation fails at load time however it is loaded. */
static void build_unloadable(char path[HARNESS_PATH])
{
	char c[HARNESS_PATH];
	const char *cc[] = { "/usr/bin/cc", "-shared", "-fPIC", "-o", path, c, NULL };

	harness_write_file(harness_path(c, "bad.c"),
			   "extern int kiln_test_missing_variable;\n"
			   "\n"
			   "int kiln_test_value(void)\n"
			   "{\n"
			   "\treturn kiln_test_missing_variable;\n"
			   "}\n");
	run_ok(cc);
	/* Even lazy binding resolves data references at load time. */
	ck_assert_msg(dlopen(path, RTLD_LAZY | RTLD_LOCAL) == NULL, "%s loads after all", path);
}

/* As harness_in_child(), for the kilnd at sock. */
static struct harness_result in_child_at(const char *sock, const struct kiln_request *req)
{
	struct harness_fleet *f = harness_fleet_start(1, &(struct harness_fleet_opts){
		.socket = sock, .reqs = req, .nreqs = 1 });
	struct harness_result res;

	harness_fleet_wait(f, 60);
	res = f->results[0];
	harness_fleet_free(f);
	return res;
}

/* A put whose key, deps and digest all match, but whose bytes are a shared
 * object that does not load: the importing node must check it as a build. */
START_TEST(put_of_an_artifact_that_does_not_load_is_refused)
{
	char sock[HARNESS_PATH], msg[4096], bad[HARNESS_PATH], hex[65];
	char *text = harness_program("loads", 16), *bytes, *meta, *forged;
	uint8_t digest[32];
	struct harness_result res;
	struct harness_export x;
	struct oreq r;
	size_t size;
	int rc;

	oreq_init(&r, text);
	free(text);
	harness_start(NULL);
	export_request(&x, &r.req);

	harness_path(bad, "bad.so");
	build_unloadable(bad);
	bytes = harness_read_file(bad);
	ck_assert_ptr_nonnull(bytes);
	{
		struct stat st;

		ck_assert_int_eq(stat(bad, &st), 0);
		size = (size_t)st.st_size;
	}
	util_sha256(bytes, size, digest);
	util_hex(digest, sizeof(digest), hex);
	meta = meta_with(x.meta, "sha256", cJSON_CreateString(hex));
	forged = meta_with(meta, "size", cJSON_CreateNumber((double)size));
	free(meta);

	harness_start_named("b", NULL, NULL, sock);
	rc = put_to(sock, x.skel, forged, bytes, size, msg, sizeof(msg));
	ck_assert_msg(rc != KILN_OK, "an artifact that does not load was imported");
	ck_assert_int_eq(harness_status_num_at(sock, "entries"), 0);

	/* Node b builds the program itself instead. */
	res = in_child_at(sock, &r.req);
	check_result(&res, 16, "a get on node b after the refused put");
	free(forged);
	free(bytes);
	exported_free(&x);
	oreq_free(&r);
}
END_TEST

/* Node sock's status.observation member name. */
static int64_t observation_num(const char *sock, const char *name)
{
	cJSON *st = harness_status_at(sock);
	int64_t v = harness_num(cJSON_GetObjectItemCaseSensitive(st, "observation"), name);

	cJSON_Delete(st);
	return v;
}

/* Exports program name (returning value), compiled as prog.c like every
 * program of the test: the same compiler steps, other sources. */
static void export_program(struct harness_export *x, const char *name, int value)
{
	char *text = harness_program(name, value);
	struct oreq r;

	oreq_init(&r, text);
	free(text);
	export_request(x, &r.req);
	oreq_free(&r);
}

/* A node that checked one put remembers what its toolchain read for the
 * stand-ins of those compiler steps and spares the run for the next put of
 * the same steps (status.observation.peer_checks_remembered); a forged list
 * that lacks one of those files (the linker's start file) is refused all
 * the same, whatever the memo holds. */
START_TEST(remembered_stand_ins_still_need_the_list)
{
	char sock[HARNESS_PATH], msg[4096], key[65], *forged, *meta, lacked[HARNESS_PATH] = "";
	struct harness_export x1, x2, x3;
	cJSON *m, *deps, *dep;
	int i = 0, drop = -1;

	harness_start(NULL);
	export_program(&x1, "one", 31);
	export_program(&x2, "two", 32);
	export_program(&x3, "three", 33);

	/* x3's list without one start file of the link (read by the stand-ins'
	 * run, not by the preprocessor), its key recomputed to match. */
	m = cJSON_Parse(x3.meta);
	deps = cJSON_GetObjectItemCaseSensitive(m, "deps");
	cJSON_ArrayForEach(dep, deps) {
		const char *path = harness_str(dep, "path");

		if (drop < 0 && strcmp(harness_str(dep, "kind"), "file") == 0 && strstr(path, "/crt") != NULL) {
			drop = i;
			snprintf(lacked, sizeof(lacked), "%s", path);
		}
		i++;
	}
	ck_assert_msg(drop >= 0, "x3's list holds no start file of the link: %s", x3.meta);
	cJSON_DeleteItemFromArray(deps, drop);
	artifact_key(&x3, deps, key);
	meta = meta_with(x3.meta, "deps", cJSON_Duplicate(deps, true));
	forged = meta_with(meta, "key", cJSON_CreateString(key));
	free(meta);
	cJSON_Delete(m);

	harness_start_named("b", NULL, NULL, sock);
	ck_assert_msg(put_to(sock, x1.skel, x1.meta, x1.bytes, x1.size, msg, sizeof(msg)) == KILN_OK,
		      "%s", msg);
	ck_assert_int_eq(observation_num(sock, "peer_checks"), 1);
	ck_assert_int_eq(observation_num(sock, "peer_checks_remembered"), 0);
	ck_assert_msg(put_to(sock, x2.skel, x2.meta, x2.bytes, x2.size, msg, sizeof(msg)) == KILN_OK,
		      "%s", msg);
	ck_assert_int_eq(observation_num(sock, "peer_checks"), 2);
	ck_assert_msg(observation_num(sock, "peer_checks_remembered") == 1,
		      "the second put of the same compiler steps ran the stand-ins again");

	int rc = put_to(sock, x3.skel, forged, x3.bytes, x3.size, msg, sizeof(msg));
	ck_assert_msg(rc == KILN_EREFUSED && harness_contains(msg, "(mismatch)") &&
		      harness_contains(msg, lacked),
		      "a put whose list lacks %s after two honest ones got %s: %s", lacked,
		      kiln_strerror(rc), msg);
	ck_assert_int_eq(observation_num(sock, "peer_checks_remembered"), 1);
	ck_assert_int_eq(harness_status_num_at(sock, "entries"), 2);
	free(forged);
	exported_free(&x1);
	exported_free(&x2);
	exported_free(&x3);
}
END_TEST

/* kiln build prog.c x.h [-- -Wl,real/x.h] through the harness's kilnd, the
 * sources in dir; the CLI's exit status. */
static int build_pair(const char *dir, bool real_arg)
{
	char prog[HARNESS_PATH + 16], hdr[HARNESS_PATH + 16];
	char *out = NULL, *err = NULL;
	int rc;

	snprintf(prog, sizeof(prog), "%s/prog.c", dir);
	snprintf(hdr, sizeof(hdr), "%s/x.h", dir);
	rc = real_arg ? harness_cli(&out, &err, "build", prog, hdr, "--", "-Wl,real/x.h", NULL)
		      : harness_cli(&out, &err, "build", prog, hdr, NULL);
	free(out);
	free(err);
	return rc;
}

/* The request key of the build that just failed on the harness's kilnd:
 * the name of its log in logs/failed/ (other than not). */
static void failed_rkey(const char *not, char rkey[65])
{
	char dir[HARNESS_PATH + 16];

	snprintf(dir, sizeof(dir), "%s/logs/failed", harness.cache);
	rkey[0] = '\0';
	for (int tries = 0; tries < 600 && rkey[0] == '\0'; tries++) {
		DIR *d = opendir(dir);
		struct dirent *de;

		ck_assert_ptr_nonnull(d);
		while ((de = readdir(d)) != NULL) {
			if (strlen(de->d_name) == 68 && strcmp(de->d_name + 64, ".log") == 0 &&
			    strncmp(de->d_name, not, 64) != 0)
				snprintf(rkey, 65, "%.64s", de->d_name);
		}
		closedir(d);
		if (rkey[0] == '\0')
			usleep(50 * 1000);
	}
	ck_assert_msg(rkey[0] != '\0', "no failed build's log in %s", dir);
}

static char found_json[HARNESS_PATH * 2];
static int found_count;

static int note_json(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	size_t n = strlen(path);

	(void)st;
	(void)ftw;
	if (flag == FTW_F && n > 5 && strcmp(path + n - 5, ".json") == 0) {
		snprintf(found_json, sizeof(found_json), "%s", path);
		found_count++;
	}
	return 0;
}

/* The path of the one entry's metadata in the tier up. */
static const char *one_entry(const char *up)
{
	char dir[HARNESS_PATH + 16];

	snprintf(dir, sizeof(dir), "%s/entries", up);
	found_count = 0;
	ck_assert_int_eq(nftw(dir, note_json, 16, FTW_PHYS), 0);
	ck_assert_int_eq(found_count, 1);
	return found_json;
}

/* Writes into the tier up a copy of entry json (an honest entry's) as the
 * entry of request key rkey, its artifact key recomputed to match. */
static void forge_entry(const char *up, const char *json, const char *rkey)
{
	cJSON *m = cJSON_Parse(json);
	char key[65], path[HARNESS_PATH * 2];
	char *text;

	ck_assert_ptr_nonnull(m);
	key_for(rkey, cJSON_GetObjectItemCaseSensitive(m, "deps"), key);
	cJSON_ReplaceItemInObjectCaseSensitive(m, "rkey", cJSON_CreateString(rkey));
	cJSON_ReplaceItemInObjectCaseSensitive(m, "key", cJSON_CreateString(key));
	text = cJSON_PrintUnformatted(m);
	snprintf(path, sizeof(path), "%s/entries/%.2s", up, rkey);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/entries/%.2s/%s", up, rkey, rkey);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/entries/%.2s/%s/%s.json", up, rkey, rkey, key);
	harness_write_file(path, text);
	free(text);
	cJSON_Delete(m);
}

/*
 * What a check's stand-in run may read in its directory is what its memo
 * key covers: the real texts are written only after that run. The tier
 * holds, forged, entries for prog.c and x.h built with -Wl,real/x.h (ld
 * reads an unknown input as a linker script), first with a harmless x.h,
 * then with one whose INPUT() makes the link read libz, its list without
 * libz. A node whose check let the stand-in run read real/x.h would take
 * the first and remember its run, then take the second on the memo's word;
 * here neither is taken (the stand-in run finds no real/x.h), and the
 * builds fail as they do on the node that made them.
 */
START_TEST(stand_ins_never_read_the_real_texts)
{
	char up[HARNESS_PATH], src[HARNESS_PATH], hdr[HARNESS_PATH + 16], old[HARNESS_PATH + 8];
	char rkey_a[65], rkey_b[65], *text = harness_program("realtext", 61), *entry;
	static const char harmless[] = "/* nothing */\n";
	static const char libz[] = "INPUT(/usr/lib/x86_64-linux-gnu/libz.so.1)\n";

	ck_assert_msg(access("/usr/lib/x86_64-linux-gnu/libz.so.1", R_OK) == 0,
		      "this test needs /usr/lib/x86_64-linux-gnu/libz.so.1 (Debian's zlib1g)");
	make_dir(up, "up");
	make_dir(src, "src");
	snprintf(hdr, sizeof(hdr), "%s/prog.c", src);
	harness_write_file(hdr, text);
	snprintf(hdr, sizeof(hdr), "%s/x.h", src);
	harness_write_file(hdr, harmless);
	harness_start("--upstream", up, NULL);
	ck_assert_int_eq(build_pair(src, false), 0);       /* the honest entry */
	ck_assert_int_ne(build_pair(src, true), 0);
	failed_rkey("", rkey_a);
	harness_write_file(hdr, libz);
	ck_assert_int_ne(build_pair(src, true), 0);
	failed_rkey(rkey_a, rkey_b);
	harness_stop();   /* its publishes are done once it has stopped */

	entry = harness_read_file(one_entry(up));
	ck_assert_ptr_nonnull(entry);
	forge_entry(up, entry, rkey_a);
	forge_entry(up, entry, rkey_b);
	free(entry);

	/* Another node: a new cache on the same tier. */
	snprintf(old, sizeof(old), "%s-a", harness.cache);
	ck_assert_int_eq(rename(harness.cache, old), 0);
	harness_start("--upstream", up, NULL);
	harness_write_file(hdr, harmless);
	ck_assert_msg(build_pair(src, true) != 0, "the forged entry of the harmless x.h was taken");
	harness_write_file(hdr, libz);
	ck_assert_msg(build_pair(src, true) != 0, "the forged entry whose x.h links libz, its list "
		      "without libz, was taken");
	ck_assert_int_eq(harness_status_num_at(harness.socket, "upstream_hits"), 0);
	harness_stop();
	free(text);
}
END_TEST


/* The default toolchain is observed: status says so, and an entry lists
 * what the compiler looked for and did not find as well as what it read. */
START_TEST(status_and_show_name_the_mechanism)
{
	char inc[HARNESS_PATH], hdr[HARNESS_PATH], *out = NULL;
	struct oreq r;

	make_dir(inc, "inc");
	write_header(harness_path(hdr, "inc/h.h"), 1);
	oreq_program(&r, inc);
	harness_start(NULL);
	expect(&r, 1, 1, "first request");

	cJSON *st = harness_status();
	const cJSON *tcs = cJSON_GetObjectItemCaseSensitive(st, "toolchains");
	ck_assert_str_eq(harness_str(cJSON_GetArrayItem(tcs, 0), "observe"), "preload");
	ck_assert_int_eq(harness_num(st, "unobserved"), 0);
	cJSON_Delete(st);

	cJSON *ls = harness_cli_json("ls", NULL);
	cJSON *e = harness_cli_json("show", harness_str(cJSON_GetArrayItem(ls, 0), "key"), NULL);
	ck_assert_str_eq(harness_str(e, "deps_source"), "observed");
	const cJSON *paths = cJSON_GetObjectItemCaseSensitive(e, "deps");
	const cJSON *kinds = cJSON_GetObjectItemCaseSensitive(e, "dep_kinds");
	bool header = false, absent = false;
	for (int i = 0; i < cJSON_GetArraySize(paths); i++) {
		const char *p = cJSON_GetStringValue(cJSON_GetArrayItem(paths, i));
		const char *k = cJSON_GetStringValue(cJSON_GetArrayItem(kinds, i));
		header = header || (strcmp(p, hdr) == 0 && strcmp(k, "file") == 0);
		absent = absent || strcmp(k, "absent") == 0;
	}
	ck_assert_msg(header, "the entry does not list %s as a file it read", hdr);
	ck_assert_msg(absent, "the entry lists no path looked for and not found");
	ck_assert_int_eq(harness_cli(&out, NULL, "show", harness_str(e, "key"), NULL), 0);
	ck_assert_msg(strstr(out, "observed: every file the toolchain read or looked for") != NULL,
		      "kiln show does not say how the dependencies were recorded:\n%s", out);
	free(out);
	cJSON_Delete(e);
	cJSON_Delete(ls);
	oreq_free(&r);
	harness_stop();
}
END_TEST

/* Adds a test case holding one test (see harness_tcase). */
int main(void)
{
	Suite *s = suite_create("imports");

	harness_add(s, "alias_last_get", alias_follows_the_last_get, 120);
	harness_add(s, "put_empty_deps", put_with_empty_deps_is_refused, 90);
	harness_add(s, "put_unloadable", put_of_an_artifact_that_does_not_load_is_refused, 90);
	harness_add(s, "put_remembered", remembered_stand_ins_still_need_the_list, 120);
	harness_add(s, "real_texts", stand_ins_never_read_the_real_texts, 120);
	harness_add(s, "mechanism", status_and_show_name_the_mechanism, 90);
	return harness_main(s);
}
