/*
 * Content keys: see key.h for the scheme and docs/design.md for why each
 * input is there.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "args.h"
#include "hostcc.h"
#include "key.h"
#include "runner.h"
#include "tcenv.h"
#include "util.h"

enum key_tag {
	TAG_VERSION = 1, TAG_TOOLCHAIN, TAG_OUTPUT, TAG_CPU, TAG_NARGS, TAG_ARG,
	TAG_NSOURCES, TAG_SOURCE_NAME, TAG_SOURCE_DIGEST, TAG_RKEY, TAG_NDEPS, TAG_DEP_PATH,
	TAG_DEP_DIGEST, TAG_TC_PATH, TAG_TC_STAT, TAG_TC_VERSION, TAG_ENV, TAG_CUDA_ARCH,
	TAG_DEP_KIND, TAG_DEP_MODE, TAG_TC_PROG, TAG_NPCH, TAG_PCH,
};

static void put_field(EVP_MD_CTX *md, enum key_tag tag, const void *data, size_t len)
{
	uint8_t hdr[9];
	hdr[0] = (uint8_t)tag;
	for (int i = 0; i < 8; i++)
		hdr[1 + i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
	EVP_DigestUpdate(md, hdr, sizeof(hdr));
	if (len > 0)
		EVP_DigestUpdate(md, data, len);
}

static void put_str(EVP_MD_CTX *md, enum key_tag tag, const char *s)
{
	put_field(md, tag, s, s != NULL ? strlen(s) : 0);
}

static void put_u64(EVP_MD_CTX *md, enum key_tag tag, uint64_t v)
{
	uint8_t b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (56 - 8 * i));
	put_field(md, tag, b, sizeof(b));
}

/* "kiln-<what>-<format>", the first field of every digest below, spelled
 * at compile time. */
#define KEY_STR_(x) #x
#define KEY_STR(x) KEY_STR_(x)
#define KEY_TAG(what) "kiln-" what "-" KEY_STR(KEY_FORMAT_VERSION)

static EVP_MD_CTX *key_begin(const char *tag)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	if (md == NULL)
		abort(); /* Only on ENOMEM; a key cannot be computed without it. */
	EVP_DigestInit_ex(md, util_sha256_md(), NULL);
	put_str(md, TAG_VERSION, tag);
	return md;
}

static void key_end(EVP_MD_CTX *md, uint8_t out[32])
{
	unsigned n = 32;
	EVP_DigestFinal_ex(md, out, &n);
	EVP_MD_CTX_free(md);
}

#define PROBE_TIMEOUT_MS 10000

/* A probe of the toolchain, in the environment its runs get (tcenv.h). */
static char *run_capture(char *const *argv)
{
	return spawn_capture_env(argv, tcenv()->vars, NULL, PROBE_TIMEOUT_MS, NULL);
}

/* Its --version, or NULL when it cannot start or runs out of time (then
 * nothing more is asked of it: each probe may take PROBE_TIMEOUT_MS). */
static char *toolchain_version(const char *path)
{
	char *argv[] = { (char *)path, (char *)"--version", NULL };
	int status = 0;
	char *out = spawn_capture_env(argv, tcenv()->vars, NULL, PROBE_TIMEOUT_MS, &status);
	if (out != NULL && status == -1) {
		free(out);
		return NULL;
	}
	return out;
}

/* A program the loader can preload into: an ELF file with an interpreter
 * (PT_INTERP), or a script ("#!", its interpreter is such a program). */
static bool preloadable(const char *path)
{
	unsigned char buf[4096];
	FILE *fp = fopen(path, "rbe");
	size_t n = fp != NULL ? fread(buf, 1, sizeof(buf), fp) : 0;
	if (fp != NULL)
		fclose(fp);
	if (n >= 2 && buf[0] == '#' && buf[1] == '!')
		return true;
	if (n < 64 || memcmp(buf, "\177ELF", 4) != 0 || buf[4] != 2)
		return false;
	uint64_t phoff = 0;
	uint16_t phentsize = 0, phnum = 0;
	memcpy(&phoff, buf + 32, 8);
	memcpy(&phentsize, buf + 54, 2);
	memcpy(&phnum, buf + 56, 2);
	for (uint16_t i = 0; i < phnum; i++) {
		uint64_t off = phoff + (uint64_t)i * phentsize;
		uint32_t type;
		if (off + 4 > n)
			return false;
		memcpy(&type, buf + off, 4);
		if (type == 3) /* PT_INTERP */
			return true;
	}
	return false;
}

/* The first executable regular file called name on the toolchains'
 * PATH, into out. */
static bool search_path(const char *name, char *out, size_t cap)
{
	for (const char *p = tcenv()->path; *p != '\0';) {
		size_t n = strcspn(p, ":");
		struct stat st;
		snprintf(out, cap, "%.*s%s%s", (int)n, p, n > 0 ? "/" : "", name);
		if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
			return true;
		p += n + (p[n] == ':');
	}
	return false;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash != NULL ? slash + 1 : path;
}

/* One program of the toolchain in the identity: its name, where it is,
 * its size and mtime (as for the driver), or that it is not there. */
/* Adds a program's resolved path to tc's (the digests kilnd takes ahead). */
static void keep_program(struct toolchain *tc, const char *real)
{
	if (tc->nprograms < KEY_MAX_PROGRAMS && (tc->programs[tc->nprograms] = strdup(real)) != NULL)
		tc->nprograms++;
}

static void put_program(EVP_MD_CTX *md, struct toolchain *tc, const char *name, const char *path)
{
	struct stat st;
	char real[PATH_MAX];
	bool ok = path != NULL && realpath(path, real) != NULL && stat(real, &st) == 0;
	/* Those every plain build runs, not the alternatives (lto1, gold, lld). */
	static const char *const used[] = { "as", "ld", "collect2", "cc1", "cc1plus", "ptxas",
					    "fatbinary", "nvlink", "cudafe++", "../nvvm/bin/cicc",
					    "host compiler", NULL };
	for (size_t i = 0; ok && S_ISREG(st.st_mode) && used[i] != NULL; i++)
		if (strcmp(name, used[i]) == 0)
			keep_program(tc, real);
	put_str(md, TAG_TC_PROG, name);
	put_str(md, TAG_TC_PROG, ok ? real : "");
	put_u64(md, TAG_TC_STAT, ok ? (uint64_t)st.st_size : 0);
	put_u64(md, TAG_TC_STAT, ok ? (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec : 0);
}

/* The first executable regular file called name in the ':'-separated
 * list of directories dirs (len bytes), into out. */
static bool search_dirs(const char *dirs, size_t len, const char *name, char *out, size_t cap)
{
	for (const char *p = dirs, *end = dirs + len; p < end;) {
		size_t n = strcspn(p, ":\n");
		struct stat st;
		if (n > 0) {
			snprintf(out, cap, "%.*s%s%s", (int)n, p, p[n - 1] == '/' ? "" : "/", name);
			if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
				return true;
		}
		if (p[n] != ':')
			break;
		p += n + 1;
	}
	return false;
}

/*
 * The programs a gcc-like driver runs, resolved as the driver resolves
 * them: in its own program directories (out: its `-print-search-dirs`, one
 * run for all of them), else on kilnd's $PATH. A kilnd restarted after
 * `module load binutils`, or after a binutils upgrade, has another
 * identity.
 */
static void put_driver_programs(EVP_MD_CTX *md, struct toolchain *tc, const char *out)
{
	static const char *const progs[] = { "as", "ld", "collect2", "cc1", "cc1plus", "lto-wrapper",
					     "lto1", "ld.bfd", "ld.gold", "ld.lld", "ld.mold", NULL };
	const char *dirs = out != NULL ? strstr(out, "programs: =") : NULL;
	size_t dlen = dirs != NULL ? strcspn(dirs + 11, "\n") : 0;
	put_str(md, TAG_TC_PROG, dirs != NULL ? "" : "no program directories");
	for (size_t i = 0; progs[i] != NULL; i++) {
		char found[PATH_MAX];
		bool ok = (dirs != NULL && search_dirs(dirs + 11, dlen, progs[i], found, sizeof(found))) ||
			  search_path(progs[i], found, sizeof(found));
		put_program(md, tc, progs[i], ok ? found : NULL);
	}
}

/* What the identification learned by running the toolchain's programs
 * (run_probes), each only after the gate let it; hashing runs nothing. */
struct probes {
	char *dirs;          /* -print-search-dirs of the driver, or of nvcc's host */
	char host[PATH_MAX]; /* nvcc's host compiler, or "" when there is none */
	char *host_ver;      /* its --version */
};

/* nvcc's: its own tools beside it, cicc in nvvm/, and the host compiler
 * the probes found (find_host) with the programs that one runs and its
 * --version. */
static void put_nvcc_programs(EVP_MD_CTX *md, struct toolchain *tc, const char *real_nvcc,
			      const struct probes *p)
{
	static const char *const tools[] = { "ptxas", "fatbinary", "nvlink", "cudafe++", "bin2c",
					     "nvcc.profile", "../nvvm/bin/cicc", NULL };
	char dir[PATH_MAX], path[PATH_MAX * 2];
	snprintf(dir, sizeof(dir), "%s", real_nvcc);
	char *slash = strrchr(dir, '/');
	if (slash != NULL)
		*slash = '\0';
	for (size_t i = 0; tools[i] != NULL; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, tools[i]);
		put_program(md, tc, tools[i], path);
	}
	bool found = p->host[0] != '\0';
	put_program(md, tc, "host compiler", found ? p->host : NULL);
	put_str(md, TAG_TC_PATH, found ? base_name(p->host) : "");
	if (found) {
		put_driver_programs(md, tc, p->dirs);
		put_str(md, TAG_TC_VERSION, p->host_ver);
	}
}

/* The variables toolchain runs get (tcenv.h), but PATH: what was looked
 * up along it is decided by observation, and the programs of the driver
 * by where they were found. Whether one says "native" (the CPU then
 * counts: NVCC_APPEND_FLAGS="-Xcompiler -march=native"). */
static bool put_env(EVP_MD_CTX *md)
{
	bool native = false;
	const struct tcenv *te = tcenv();
	for (size_t i = 0; i < te->nvars; i++) {
		const char *kv = te->vars[i];
		char name[256];
		size_t n = strcspn(kv, "="), len = n < sizeof(name) ? n : sizeof(name) - 1;
		memcpy(name, kv, len);   /* the name, cut at 255 bytes as before */
		name[len] = '\0';
		if (tcenv_unkeyed(name))
			continue;
		put_str(md, TAG_ENV, kv);
		native = native || strstr(kv + n, "native") != NULL;
	}
	return native;
}

/* The resolved path of an executable regular file, with its stat; 0 or
 * a negative errno with a sentence in err. */
static int executable(const char *name, const char *what, const char *path, char real[PATH_MAX],
		      struct stat *st, char *err, size_t errlen)
{
	if (path[0] != '/') {
		snprintf(err, errlen, "toolchain %s: %s \"%s\" is not an absolute path", name, what, path);
		return -EINVAL;
	}
	if (realpath(path, real) == NULL || stat(real, st) != 0) {
		int e = errno;
		snprintf(err, errlen, "toolchain %s: %s %s: %s", name, what, path, strerror(e));
		return -e;
	}
	if (!S_ISREG(st->st_mode) || access(real, X_OK) != 0) {
		snprintf(err, errlen, "toolchain %s: %s %s is not an executable file", name, what, path);
		return -EACCES;
	}
	return 0;
}

static void put_stat(EVP_MD_CTX *md, const struct stat *st)
{
	put_u64(md, TAG_TC_STAT, (uint64_t)st->st_size);
	put_u64(md, TAG_TC_STAT, (uint64_t)st->st_mtim.tv_sec * 1000000000u + (uint64_t)st->st_mtim.tv_nsec);
}

/* Whether --version's first word names a GCC driver: one of its
 * dash-separated parts is "gcc", "g++", "cc", "c++" or "gfortran" (a
 * target prefix, a version or another suffix around it:
 * "x86_64-linux-gnu-g++-12", "gcc-13", and "g++-real", the renamed driver
 * a module's /opt/gcc/bin/g++ wrapper runs on a real GPU node). GNU tools
 * that are no compiler (bash, make, sed, gdb, gcc-ar) name the FSF too,
 * and begin "GNU ...". */
static bool gcc_banner(const char *ver)
{
	static const char *const drivers[] = { "g++", "c++", "gcc", "cc", "gfortran", NULL };
	size_t n = strcspn(ver, " \n");
	for (size_t at = 0; at < n;) {
		size_t m = strcspn(ver + at, "- \n");
		if (m > n - at)
			m = n - at;
		for (size_t i = 0; drivers[i] != NULL; i++)
			if (m == strlen(drivers[i]) && strncmp(ver + at, drivers[i], m) == 0)
				return true;
		at += m + 1;
	}
	return false;
}

/* What the driver is, from its --version (ver). */
static void classify(struct toolchain *tc, const char *ver)
{
	tc->is_nvcc = strstr(ver, "Cuda compilation tools") != NULL;
	/* GCC's drivers (gcc, g++, cc, c++, gfortran) name the FSF; clang and
	 * its derivatives do not, and treat a .gch differently. */
	tc->is_gcc = !tc->is_nvcc && strstr(ver, "Free Software Foundation") != NULL &&
		     strstr(ver, "clang") == NULL;
	/* Clang and the drivers built on it ("Apple clang version", "AMD
	 * clang version", "Cray clang version") read options by clang's
	 * rules: which ones may be given apart (args_joinable). */
	tc->is_clang = !tc->is_nvcc && !tc->is_gcc && strstr(ver, "clang version") != NULL;
	static const char *const marks[] = {
		"clang version", "Cuda compilation tools", "NVIDIA Compilers", "Intel(R) oneAPI",
		"Cray clang", "Cray C", NULL,
	};
	tc->known = tc->is_nvcc || (tc->is_gcc && gcc_banner(ver));
	for (size_t i = 0; marks[i] != NULL && !tc->known; i++)
		tc->known = strstr(ver, marks[i]) != NULL;
}

/* The gate's verdict on path (KEY_GATE_RUN with no gate: a configured
 * toolchain, whose programs are the owner's choice), why saying why not. */
static enum key_gate_verdict gate_check(const struct key_gate *gate, const char *path, char *why,
					size_t cap)
{
	why[0] = '\0';
	return gate != NULL ? gate->check(gate->arg, path, why, cap) : KEY_GATE_RUN;
}

/* Where a program named by text (printed by the driver, or NVCC_CCBIN)
 * runs from: an absolute path as it is, a bare name along the toolchains'
 * PATH (as the driver and nvcc look it up). 1 with out, 0 when there is no
 * such executable file, -EINVAL for a relative path with a '/' (it would
 * name another file in each directory a run starts in). */
static int locate(const char *text, char out[PATH_MAX])
{
	struct stat st;
	if (text == NULL || text[0] == '\0')
		return 0;
	if (strchr(text, '/') == NULL)
		return search_path(text, out, PATH_MAX) ? 1 : 0;
	if (text[0] != '/')
		return -EINVAL;
	if (snprintf(out, PATH_MAX, "%s", text) >= PATH_MAX)
		return 0;
	return stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0 ? 1 : 0;
}

/*
 * Whether the toolchain's linker can list its inputs (GNU ld 2.35+, lld,
 * mold; not gold): then libraries and linker scripts count like headers.
 * Asks the driver which ld it runs and that ld's --help, so that nothing is
 * compiled at start-up. What the driver prints runs only by an absolute
 * path (a bare name as found along PATH) and, for a named toolchain, only
 * once the gate let it: one that others could change refuses the
 * toolchain (its builds would run it too), and one outside what the client
 * may name is not asked (the answer is then no). 0, or a negative errno
 * with a sentence in err.
 */
static int probe_link_depfile(struct toolchain *tc, const struct key_gate *gate, char *err,
			      size_t errlen)
{
	char *argv[] = { tc->path, (char *)"-print-prog-name=ld", NULL };
	char *printed = run_capture(argv), ld[PATH_MAX], why[512];
	int rc = 0;
	if (printed == NULL)
		return 0;
	printed[strcspn(printed, "\n")] = '\0';
	int found = locate(printed, ld);
	enum key_gate_verdict v = found == 1 ? gate_check(gate, ld, why, sizeof(why)) : KEY_GATE_OUTSIDE;
	if (found < 0 && gate != NULL) {
		snprintf(err, errlen, "toolchain %s: it prints the linker \"%.200s\" for "
			 "-print-prog-name=ld, a relative path, and kilnd runs no program of a named "
			 "toolchain by a relative path", tc->name, printed);
		rc = -EINVAL;
	} else if (v == KEY_GATE_REFUSED) {
		snprintf(err, errlen, "toolchain %s: its linker %s (-print-prog-name=ld), which kilnd "
			 "would run: %s", tc->name, ld, why);
		rc = -EACCES;
	} else if (v == KEY_GATE_RUN) {
		char *help_argv[] = { ld, (char *)"--help", NULL };
		char *help = run_capture(help_argv);
		tc->link_depfile = help != NULL && strstr(help, "--dependency-file") != NULL;
		free(help);
	}
	free(printed);
	return rc;
}

/*
 * nvcc's host compiler into host ("" when there is none): the one named
 * (named.c checked it), else NVCC_CCBIN (a path, or a name nvcc looks up
 * along PATH), else gcc on PATH. For a named nvcc the one found so passes
 * the gate as a named host compiler would: anything but KEY_GATE_RUN
 * refuses the toolchain (it compiles the client's host code). 0, or a
 * negative errno with a sentence in err.
 */
static int find_host(const struct toolchain *tc, const char *named, const struct key_gate *gate,
		     char host[PATH_MAX], char *err, size_t errlen)
{
	const char *ccbin = tcenv_get("NVCC_CCBIN");
	bool from_env = named == NULL && ccbin != NULL && ccbin[0] != '\0';
	const char *text = named != NULL ? named : from_env ? ccbin : "gcc";
	const char *how = named != NULL ? "as named" : from_env ? "kilnd's NVCC_CCBIN" : "gcc on PATH";
	char why[512];
	int found = locate(text, host);
	if (found <= 0)
		host[0] = '\0';
	if (found < 0 && gate != NULL) {
		snprintf(err, errlen, "toolchain %s: its host compiler \"%.200s\" (%s) is a relative "
			 "path, and kilnd runs no program of a named toolchain by a relative path",
			 tc->name, text, how);
		return -EINVAL;
	}
	if (found <= 0 || named != NULL || gate_check(gate, host, why, sizeof(why)) == KEY_GATE_RUN)
		return 0;
	snprintf(err, errlen, "toolchain %s: its host compiler %s (%s), which kilnd would run: %s; "
		 "name one with host_compiler", tc->name, host, how, why);
	host[0] = '\0';
	return -EACCES;
}

/*
 * What nvcc hands host, its host compiler (found, and let by the gate),
 * for the C++ sources kilnd compiles with it directly (hostcc.h): the
 * include arguments of nvcc's profile, from a dry run that runs nothing.
 * They follow from nvcc's path and profile, which the identity covers.
 * Without them every source stays with nvcc.
 */
static void probe_host_cc(struct toolchain *tc, const char *host, const struct toolchain *cls)
{
	char *argv[] = { tc->path, (char *)"-dryrun", (char *)"-c", (char *)"-x", (char *)"c++",
			 (char *)"/dev/null", (char *)"-o", (char *)"/dev/null", NULL };
	char *out = run_capture(argv);
	tc->host_incs = hostcc_profile(out);
	free(out);
	tc->host_cc = tc->host_incs != NULL ? strdup(host) : NULL;
	tc->host_cc_gcc = cls->is_gcc;
	if (tc->host_cc == NULL) {
		hostcc_free(tc->host_incs);
		tc->host_incs = NULL;
	}
}

/* The first line of a program's --version, for a sentence. */
static int first_line(const char *ver)
{
	return ver != NULL ? (int)strcspn(ver, "\n") : 0;
}

/*
 * Runs what the identity needs from the toolchain's programs into p, in
 * order, each program only after the gate let it: for nvcc the host
 * compiler's --version (a named toolchain's must name a compiler kiln
 * knows before anything else is asked of it) and -print-search-dirs; for
 * a gcc-like driver its -print-search-dirs and its linker's --help. 0, or a
 * negative errno with a sentence in err.
 */
static int run_probes(struct toolchain *tc, const char *named_host, const struct key_gate *gate,
		      struct probes *p, char *err, size_t errlen)
{
	const char *driver = tc->path;
	if (tc->is_nvcc) {
		int rc = find_host(tc, named_host, gate, p->host, err, errlen);
		if (rc != 0 || p->host[0] == '\0')
			return rc;
		char *argv[] = { p->host, (char *)"--version", NULL };
		p->host_ver = run_capture(argv);
		struct toolchain host = { 0 };
		classify(&host, p->host_ver != NULL ? p->host_ver : "");
		if (gate != NULL && !host.known) {
			snprintf(err, errlen, "toolchain %s: its host compiler %s: its --version "
				 "(\"%.*s\") names no C, C++ or CUDA compiler kiln knows", tc->name,
				 p->host, first_line(p->host_ver) < 120 ? first_line(p->host_ver) : 120,
				 p->host_ver != NULL ? p->host_ver : "");
			return -EINVAL;
		}
		driver = p->host;
		probe_host_cc(tc, p->host, &host);
	}
	char *argv[] = { (char *)driver, (char *)"-print-search-dirs", NULL };
	p->dirs = run_capture(argv);
	return tc->is_nvcc ? 0 : probe_link_depfile(tc, gate, err, errlen);
}

/* The identity digest of tc from its --version (ver) and the probes. */
static void put_identity(struct toolchain *tc, const char *ver, const struct probes *p)
{
	EVP_MD_CTX *md = key_begin(KEY_TAG("toolchain"));
	put_str(md, TAG_TC_PATH, tc->real_path);
	/* The name it runs under: a driver may read its mode from it
	 * (clang++ is the clang binary in C++ mode; a ccache link). */
	put_str(md, TAG_TC_PATH, base_name(tc->path));
	put_stat(md, &tc->st);
	put_str(md, TAG_TC_VERSION, ver);
	if (put_env(md)) {
		uint8_t cpu[32];
		key_cpu_id(cpu);
		put_field(md, TAG_CPU, cpu, sizeof(cpu));
	}
	keep_program(tc, tc->real_path);
	if (tc->is_nvcc)
		put_nvcc_programs(md, tc, tc->real_path, p);
	else
		put_driver_programs(md, tc, p->dirs);
	key_end(md, tc->id);
}

/* What refuses a toolchain once its --version is known, before anything
 * else runs: a host compiler for a driver that is not nvcc, and, for a
 * named toolchain (gate), a --version that names no compiler kiln knows. */
static int refuse_early(const struct toolchain *tc, const char *host, const struct key_gate *gate,
			const char *ver, char *err, size_t errlen)
{
	if (gate != NULL && !tc->known) {
		int n = first_line(ver);
		snprintf(err, errlen, "%s: its --version (\"%.*s\") names no C, C++ or CUDA compiler "
			 "kiln knows (GCC, Clang, NVIDIA, Intel, Cray); configure it with kilnd "
			 "--toolchain NAME=PATH instead", tc->path, n < 120 ? n : 120, ver);
		return -EINVAL;
	}
	if (host != NULL && !tc->is_nvcc) {
		snprintf(err, errlen, "toolchain %s: a host compiler is for nvcc, and %s is not nvcc",
			 tc->name, tc->path);
		return -EINVAL;
	}
	return 0;
}

int key_toolchain_init(struct toolchain *tc, const char *name, const char *path, const char *host,
		       char *err, size_t errlen)
{
	return key_toolchain_identify(tc, name, path, host, NULL, err, errlen);
}

int key_toolchain_identify(struct toolchain *tc, const char *name, const char *path,
			   const char *host, const struct key_gate *gate, char *err, size_t errlen)
{
	memset(tc, 0, sizeof(*tc));
	char real[PATH_MAX], host_real[PATH_MAX];
	int rc = executable(name, "compiler", path, real, &tc->st, err, errlen);
	if (rc == 0 && host != NULL)
		rc = executable(name, "host compiler", host, host_real, &tc->host_st, err, errlen);
	if (rc != 0)
		return rc;
	tc->name = strdup(name);
	tc->path = strdup(path);
	tc->real_path = strdup(real);
	tc->host = host != NULL ? strdup(host) : NULL;
	tc->host_real = host != NULL ? strdup(host_real) : NULL;
	char *ver = toolchain_version(path);
	if (tc->name == NULL || tc->path == NULL || tc->real_path == NULL || ver == NULL ||
	    (host != NULL && (tc->host == NULL || tc->host_real == NULL))) {
		free(ver);
		key_toolchain_fini(tc);
		snprintf(err, errlen, "toolchain %s: %s --version did not answer (it could not start, or "
			 "ran past %d s)", name, path, PROBE_TIMEOUT_MS / 1000);
		return -ENOMEM;
	}
	classify(tc, ver);
	struct probes p = { 0 };
	rc = refuse_early(tc, host, gate, ver, err, errlen);
	if (rc == 0)
		rc = run_probes(tc, host, gate, &p, err, errlen);
	if (rc == 0)
		put_identity(tc, ver, &p);
	free(p.dirs);
	free(p.host_ver);
	if (rc != 0) {
		free(ver);
		key_toolchain_fini(tc);
		return rc;
	}
	tc->dynamic = preloadable(real);
	/* nvcc's first line names the driver; the release line says more. */
	const char *line = tc->is_nvcc ? strstr(ver, "Cuda compilation tools") : NULL;
	if (line != NULL)
		memmove(ver, line, strlen(line) + 1);
	ver[strcspn(ver, "\n")] = '\0';
	tc->version = ver;
	return 0;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

bool key_toolchain_current(const struct toolchain *tc)
{
	char real[PATH_MAX];
	struct stat st;
	if (realpath(tc->path, real) == NULL || strcmp(real, tc->real_path) != 0 ||
	    stat(real, &st) != 0 || !same_file(&st, &tc->st))
		return false;
	return tc->host == NULL || (realpath(tc->host, real) != NULL &&
				    strcmp(real, tc->host_real) == 0 && stat(real, &st) == 0 &&
				    same_file(&st, &tc->host_st));
}

bool key_args_name_arch(char *const *args, size_t nargs)
{
	static const char *const opts[] = {
		"-arch", "--gpu-architecture", "-gencode", "--generate-code", "-code",
		"--gpu-code", NULL,
	};
	for (size_t i = 0; i < nargs; i++)
		for (size_t j = 0; opts[j] != NULL; j++) {
			size_t n = strlen(opts[j]);
			if (strncmp(args[i], opts[j], n) == 0 && (args[i][n] == '\0' || args[i][n] == '='))
				return true;
		}
	return false;
}

void key_toolchain_fini(struct toolchain *tc)
{
	free(tc->cuda_arch);
	free(tc->name);
	free(tc->path);
	free(tc->real_path);
	free(tc->host);
	free(tc->host_real);
	free(tc->version);
	free(tc->host_cc);
	hostcc_free(tc->host_incs);
	for (size_t i = 0; i < tc->nprograms; i++)
		free(tc->programs[i]);
	memset(tc, 0, sizeof(*tc));
}

void key_cpu_id(uint8_t out[32])
{
	EVP_MD_CTX *md = key_begin(KEY_TAG("cpu"));
	FILE *fp = fopen("/proc/cpuinfo", "re");
	char line[8192];
	/* The first processor's model and feature flags decide what
	 * -march=native means; later processors repeat them. */
	while (fp != NULL && fgets(line, sizeof(line), fp) != NULL) {
		if (line[0] == '\n')
			break;
		if (strncmp(line, "vendor_id", 9) == 0 || strncmp(line, "model", 5) == 0 ||
		    strncmp(line, "cpu family", 10) == 0 || strncmp(line, "flags", 5) == 0 ||
		    strncmp(line, "Features", 8) == 0 || strncmp(line, "CPU ", 4) == 0)
			put_str(md, TAG_CPU, line);
	}
	if (fp != NULL)
		fclose(fp);
	key_end(md, out);
}

/*
 * Any argument that says "native" anywhere: -march=native and its kin, but
 * also every way nvcc forwards them to the host compiler (-Xcompiler
 * -march=native, -Xcompiler=-O2,-march=native, --compiler-options=...).
 * Taking the CPU into the key when it was not needed costs sharing
 * between different CPUs only; missing it serves code for the wrong CPU.
 */
bool key_args_native(char *const *args, size_t nargs)
{
	for (size_t i = 0; i < nargs; i++) {
		if (strstr(args[i], "native") != NULL)
			return true;
	}
	return false;
}

/* Whose rules say how tc's driver reads an option given apart. */
static enum args_family args_family_of(const struct toolchain *tc)
{
	return tc->is_nvcc ? ARGS_FAMILY_NVCC : tc->is_gcc ? ARGS_FAMILY_GCC
	       : tc->is_clang ? ARGS_FAMILY_CLANG : ARGS_FAMILY_OTHER;
}

/*
 * The arguments as the toolchain reads them: an option given apart from its
 * value that this toolchain's driver reads the same joined is hashed joined
 * ("-I" "inc" as "-Iinc", args_joinable), so the two spellings are one
 * key; one it reads otherwise ("-std" "c11", an error to gcc) stays apart.
 * Without the memory to tell, the arguments as given (another key, never a
 * wrong one).
 */
static void put_args(EVP_MD_CTX *md, const struct toolchain *tc, char *const *args, size_t nargs)
{
	unsigned char small[64], *join = nargs <= sizeof(small) ? small : malloc(nargs);
	char buf[8192];
	size_t n = nargs;

	/* Only an option followed by a word can be joined: most requests have
	 * none, and skip the walk of the allow-list. */
	bool any = false;
	for (size_t i = 0; i + 1 < nargs && !any; i++)
		any = args[i][0] == '-' && args[i + 1][0] != '-';
	if (join != NULL && (!any || args_joinable((const char *const *)args, nargs,
						   args_family_of(tc), join) == ARGS_REFUSED))
		memset(join, ARGS_JOIN_NONE, nargs);
	/* Only pairs whose joined text fits are joined, counted and hashed. */
	for (size_t i = 0; join != NULL && i < nargs; i++) {
		if (join[i] != ARGS_JOIN_NONE && (i + 1 >= nargs ||
		    args_join_text(args[i], args[i + 1], (enum args_join)join[i], buf,
				   sizeof(buf)) != 0))
			join[i] = ARGS_JOIN_NONE;
		n -= join[i] != ARGS_JOIN_NONE;
	}
	put_u64(md, TAG_NARGS, n);
	for (size_t i = 0; i < nargs; i++) {
		if (join != NULL && join[i] != ARGS_JOIN_NONE) {
			args_join_text(args[i], args[i + 1], (enum args_join)join[i], buf, sizeof(buf));
			put_str(md, TAG_ARG, buf);
			i++;
			continue;
		}
		put_str(md, TAG_ARG, args[i]);
	}
	if (join != small)
		free(join);
}

void key_request(const struct toolchain *tc, const char *output, char *const *args, size_t nargs,
		 const struct key_source *src, size_t nsrc, const uint8_t cpu_id[32], char out[65])
{
	EVP_MD_CTX *md = key_begin(KEY_TAG("rkey"));
	uint8_t digest[32];
	put_field(md, TAG_TOOLCHAIN, tc->id, sizeof(tc->id));
	put_str(md, TAG_OUTPUT, output);
	if (key_args_native(args, nargs))
		put_field(md, TAG_CPU, cpu_id, 32);
	/* Code for one GPU architecture is never served to another: the
	 * architecture the daemon chose is part of the key. */
	if (tc->is_nvcc && (!key_args_name_arch(args, nargs) || key_args_native(args, nargs)))
		put_str(md, TAG_CUDA_ARCH, tc->cuda_arch);
	put_args(md, tc, args, nargs);
	put_u64(md, TAG_NSOURCES, nsrc);
	for (size_t i = 0; i < nsrc; i++) {
		uint8_t sd[32];
		put_str(md, TAG_SOURCE_NAME, src[i].name);
		if (src[i].digest == NULL)
			util_sha256(src[i].text, src[i].len, sd);
		put_field(md, TAG_SOURCE_DIGEST, src[i].digest != NULL ? src[i].digest : sd, 32);
	}
	key_end(md, digest);
	util_hex(digest, sizeof(digest), out);
}

void key_request_pch(char *const *pch, size_t npch, char rkey[65])
{
	EVP_MD_CTX *md = key_begin(KEY_TAG("rkey-pch"));
	uint8_t digest[32];
	put_str(md, TAG_RKEY, rkey);
	put_u64(md, TAG_NPCH, npch);
	for (size_t i = 0; i < npch; i++)
		put_str(md, TAG_PCH, pch[i]);
	key_end(md, digest);
	util_hex(digest, sizeof(digest), rkey);
}

static int dep_cmp(const void *a, const void *b)
{
	const struct store_dep *const *x = a, *const *y = b;
	int c = strcmp((*x)->path, (*y)->path);
	return c != 0 ? c : (int)(*x)->kind - (int)(*y)->kind;
}

void key_artifact(const char *rkey, const struct store_dep *deps, size_t ndeps, char out[65])
{
	/* Sort by path so that the order the compiler listed them in does not matter. */
	const struct store_dep **sorted = malloc((ndeps + 1) * sizeof(*sorted));
	if (sorted == NULL)
		abort();
	for (size_t i = 0; i < ndeps; i++)
		sorted[i] = &deps[i];
	qsort(sorted, ndeps, sizeof(*sorted), dep_cmp);
	EVP_MD_CTX *md = key_begin(KEY_TAG("key"));
	uint8_t digest[32];
	put_str(md, TAG_RKEY, rkey);
	put_u64(md, TAG_NDEPS, ndeps);
	for (size_t i = 0; i < ndeps; i++) {
		const struct store_dep *d = sorted[i];
		put_str(md, TAG_DEP_PATH, d->path);
		put_u64(md, TAG_DEP_KIND, d->kind);
		/* What the state is: content, type and permissions, or a value
		 * and whether it was there (depkind.h's columns). A kind out of
		 * range never reaches here (every decoder refuses it). */
		const struct dep_kind_info *k = dep_kind_info(d->kind);
		if (k == NULL || k->has_digest)
			put_field(md, TAG_DEP_DIGEST, d->digest, 32);
		if (k == NULL || k->has_mode || k->named)
			put_u64(md, TAG_DEP_MODE, d->mode);
	}
	key_end(md, digest);
	free(sorted);
	util_hex(digest, sizeof(digest), out);
}
