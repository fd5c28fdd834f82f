/*
 * Help texts of the kiln CLI. They are kept together, and in step with
 * docs/cli.md, so that every option the parser accepts is described here.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "kiln_build.h"
#include "msg.h"

static const char global_help[] =
	"Usage: kiln [OPTIONS] COMMAND [ARGS...]\n"
	"\n"
	"Inspect and drive kilnd, the per-node compile-and-load daemon, and its cache.\n"
	"\n"
	"Commands:\n"
	"  status                show the daemon's state and counters\n"
	"  top [--once] [-d SECONDS] [-n FRAMES]\n"
	"                        what kilnd does now, redrawn: running builds, the queue,\n"
	"                        hits and misses per second (q quits)\n"
	"  ls [-w]               list the cache entries, most recently used first\n"
	"  show [--deps] REF     show one entry in detail\n"
	"  log REF               print the compiler output of an entry's build\n"
	"  build [-t TOOLCHAIN | --compiler PATH] [--alias ALIAS] [--label LABEL]\n"
	"        [--output KIND] FILE...\n"
	"        [-- COMPILER_ARGS...]\n"
	"                        build FILEs into a shared library (or find it cached)\n"
	"  rm REF...             remove entries from the cache\n"
	"  pin REF               protect an entry from eviction\n"
	"  unpin REF             let an entry be evicted again\n"
	"  gc [--max-size SIZE]  evict least recently used entries\n"
	"  warm MANIFEST.json    build a list of programs in parallel, with progress\n"
	"  export PATH           write the cache's entries to PATH (a directory or\n"
	"                        a .tar/.tar.gz file)\n"
	"  import PATH           take the entries of PATH that fit this node\n"
	"  stats [--zero] [--prometheus [-o FILE [--mode OCTAL]]]\n"
	"                        the counters, kept across restarts (Prometheus text\n"
	"                        format); --zero resets them\n"
	"  config [KEY [VALUE]]  the cache's settings (max-size), kept in its kiln.conf\n"
	"  verify                check every object against its size and SHA-256;\n"
	"                        remove damaged entries (rebuilt on their next request)\n"
	"  stop                  stop the daemon\n"
	"  help [COMMAND]        show this help, or a command's\n"
	"\n"
	"REF is a full key, an alias, a unique key prefix of at least 4 hex digits, or\n"
	  "the label of one entry (quoted when it has spaces: kiln show \"dace axpy\").\n"
	"ls, show, log and stats read the cache read-only when kilnd is not running;\n"
	"stats --zero and config write it then; the other commands need the daemon.\n"
	"\n"
	"Options (before or after the command, up to a '--'):\n"
	"  --socket PATH    kilnd's socket (default: $KILN_SOCKET, else\n"
	"                   $XDG_RUNTIME_DIR/kiln/kilnd.sock, else /tmp/kiln-UID/kilnd.sock)\n"
	"  --cache-dir DIR  cache read by ls, show and log when kilnd is not running\n"
	"                   (default: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else\n"
	"                   ~/.cache/kiln)\n"
	"  --json           print JSON on stdout, one document on one line\n"
	"  -h, --help       show help (of the command, after one) and exit\n"
	"  -V, --version    print the version and exit\n"
	"\n"
	"Exit status: 0 on success, 1 on an error, 2 on a usage error.\n"
	"See 'kiln help COMMAND' for a command's options and output.\n";

/* The global options as every command's help lists them. */
#define GLOBAL_OPTS                                                                  \
	"Global options: --socket PATH, --cache-dir DIR, --json, -h/--help, -V/--version\n" \
	"(see 'kiln --help').\n"

static const struct {
	const char *name;
	const char *text;
} command_help[] = {
	{ "top",
	  "Usage: kiln top [--once] [-d, --interval SECONDS] [-n, --frames N]\n"
	  "\n"
	  "What kilnd does now, like top: its slots (busy/--jobs), the queue length,\n"
	  "requests, hits and misses per second since the last frame, the builds\n"
	  "running (state, elapsed time, clients waiting, label) and the queue (time\n"
	  "waited, background builds last). On a terminal the screen is redrawn every\n"
	  "SECONDS (default 1) until q or Ctrl-C; otherwise, or with --once (one frame)\n"
	  "or -n N (N frames), frames are printed one after another. With --json each\n"
	  "frame is the daemon's status object, whose \"running\" and \"queue\" arrays\n"
	  "hold the builds. Needs kilnd.\n" },
	{ "status",
	  "Usage: kiln status [-v, --verbose]\n"
	  "\n"
	  "Show the daemon's pid, version, socket, cache directory, cache size,\n"
	  "uptime, requests, hits and misses, builds, toolchains, confinement and\n"
	  "GPUs, the latest failed builds, and each counter of trouble that is not\n"
	  "zero (stale entries, text timeouts, not cacheable, not observed,\n"
	  "variants, claims held, claim timeouts, claims refused, cache remade,\n"
	  "denied, stalled, damaged, upstream errors), and the kilnd versions that\n"
	  "wrote the cache when there are several. Needs kilnd.\n"
	  "\n"
	  "  -v, --verbose   every counter, zero or not (protocol, build slots,\n"
	  "                  joins, source texts, claims, upstream traffic, ...),\n"
	  "                  the processes holding claims, what the cache takes on\n"
	  "                  disk, the kilnds that wrote it and the builds in flight\n"
	  "\n"
	  "With --json, prints the daemon's status reply as one object, without \"id\"\n"
	  "and \"ok\": pid, version, proto, socket, cache_dir, jobs, max_size, entries,\n"
	  "bytes, uptime_s, connections, requests, hits, misses, builds_started,\n"
	  "builds_ok, builds_failed, joined, need_sources, text_waits, text_timeouts,\n"
	  "source_texts, imports, in_flight, queued, and whatever else the daemon\n"
	  "reports (such as its toolchains).\n"
	  "A daemon started with --upstream adds upstream, upstream_stale_s,\n"
	  "upstream_hits, upstream_publishes, upstream_waits, upstream_takeovers,\n"
	  "upstream_errors, upstream_looks, upstream_alias_hits,\n"
	  "upstream_alias_records, upstream_alias_claims,\n"
	  "upstream_alias_claim_waits, upstream_alias_claim_takeovers,\n"
	  "job_nodes, job_nodes_source and\n"
	  "upstream_looks_per_s (shown as text with -v).\n"
	  "\n" GLOBAL_OPTS },
	{ "ls",
	  "Usage: kiln ls [-w, --wide]\n"
	  "\n"
	  "List the cache entries, most recently used first: KEY (first 12 hex digits),\n"
	  "SIZE, USES, LAST USED, BUILD (build time), PIN (* when pinned), ALIAS and\n"
	  "LABEL ('-' when absent), then a line with the count and total size. Prints\n"
	  "\"no entries\" for an empty cache.\n"
	  "\n"
	  "An alias's hash (a run of 20 or more hex digits, as in dace:<64 hex>) is cut\n"
	  "to 12 digits and \"..\"; a cut alias is no REF, the KEY is.\n"
	  "  -w, --wide       print aliases whole\n"
	  "\n"
	  "When kilnd is not running, reads the cache at --cache-dir read-only and says\n"
	  "so on stderr.\n"
	  "\n"
	  "With --json, prints an array of entry objects (key, rkey, path, label, alias,\n"
	  "toolchain, output, size, created, last_used, uses, build_ms, pinned).\n"
	  "\n" GLOBAL_OPTS },
	{ "show",
	  "Usage: kiln show [--deps] REF\n"
	  "\n"
	  "Show one entry: key, path, log, label, alias, toolchain, output, size,\n"
	  "created and last used (local time), uses, build time, pinned, the compiler\n"
	  "arguments and sources, one per line, and the recorded dependencies by kind:\n"
	  "the files read and directories listed one per line, the environment\n"
	  "variables read and programs looked up on PATH by name, and a count of the\n"
	  "paths only probed (absent, or found without being read).\n"
	  "  --deps           list every dependency instead, one per line with its kind\n"
	  "\n"
	  "REF is a full key, an alias, a unique key prefix of at least 4 hex digits, or\n"
	  "the label of one entry (quoted when it has spaces: kiln show \"dace axpy\").\n"
	  "Reads the cache read-only when kilnd is not running.\n"
	  "\n"
	  "With --json, prints the entry object with args, sources, deps and log.\n"
	  "\n" GLOBAL_OPTS },
	{ "log",
	  "Usage: kiln log REF\n"
	  "\n"
	  "Print the compiler output of the build of entry REF (a full key, a unique key\n"
	  "prefix of at least 4 hex digits, or an alias). Reads the cache read-only when\n"
	  "kilnd is not running.\n"
	  "\n"
	  "With --json, prints {\"key\", \"log\" (the log file's path), \"text\"}.\n"
	  "\n" GLOBAL_OPTS },
	{ "build",
	  "Usage: kiln build [-t TOOLCHAIN | --compiler PATH] [--host-compiler PATH]\n"
	  "                  [--alias ALIAS] [--label LABEL] [--output KIND] FILE...\n"
	  "                  [-- COMPILER_ARGS...]\n"
	  "\n"
	  "Have kilnd build FILEs into one shared library (or, with nvcc, a cubin,\n"
	  "fatbin or ptx file), or find it in the cache.\n"
	  "Each FILE is sent by its absolute path and compiled under its base name, so\n"
	  "base names must differ and be plain names (letters, digits, '.', '_', '+',\n"
	  "'-'; not starting with '.' or '-'). Arguments after '--' go to the compiler\n"
	  "as given; options that redirect outputs or dependency files, change the\n"
	  "output kind, or read other files (-o, -M..., -c, -S, -E, @FILE, -fplugin=,\n"
	  "-specs=, -wrapper, -B, -save-temps, ...) are refused. Needs kilnd.\n"
	  "\n"
	  "Options:\n"
	  "  -t, --toolchain NAME  a toolchain configured in kilnd (default: by the first\n"
	  "                        FILE: c++ for .cpp .cc .cxx .C, nvcc for .cu, else cc)\n"
	  "  --compiler PATH       a compiler by absolute path instead (/opt/gcc/bin/g++):\n"
	  "                        kilnd identifies it on first use; you may name one that\n"
	  "                        only you or root can change, users kilnd admits one\n"
	  "                        under its --toolchain-dir\n"
	  "  --host-compiler PATH  nvcc's host compiler (nvcc's -ccbin) by absolute path\n"
	  "  --alias ALIAS         point ALIAS (1-256 printable ASCII characters) at\n"
	  "                        the result\n"
	  "  --label LABEL         a label for ls and show (1-256 bytes of UTF-8)\n"
	  "  --output KIND         shared (default), or cubin, fatbin, ptx with an nvcc\n"
	  "                        toolchain (one .cu FILE, plus headers)\n"
	  "\n"
	  "Prints \"built KEY in MS ms\", \"cached KEY\" or \"joined build of KEY\", then\n"
	  "\"path: PATH\". With --json, prints {\"key\", \"path\", \"cached\", \"joined\",\n"
	  "\"build_ms\"}. When the compiler fails, prints the daemon's message and the\n"
	  "compiler output on stderr and exits with status 1.\n"
	  "\n" GLOBAL_OPTS },
	{ "rm",
	  "Usage: kiln rm REF...\n"
	  "\n"
	  "Remove entries from the cache (programs that have one loaded keep working).\n"
	  "Prints \"removed KEY\" for each; goes on after a REF that fails and then\n"
	  "exits with status 1. Needs kilnd.\n"
	  "\n"
	  "With --json, prints an array of {\"ref\", \"key\"} for the removed entries.\n"
	  "\n" GLOBAL_OPTS },
	{ "pin",
	  "Usage: kiln pin REF\n"
	  "\n"
	  "Protect an entry from eviction by gc and by the daemon's size limit.\n"
	  "Prints \"pinned KEY\". Needs kilnd.\n"
	  "\n"
	  "With --json, prints {\"ref\", \"key\", \"pinned\": true}.\n"
	  "\n" GLOBAL_OPTS },
	{ "unpin",
	  "Usage: kiln unpin REF\n"
	  "\n"
	  "Let a pinned entry be evicted again. Prints \"unpinned KEY\". Needs kilnd.\n"
	  "\n"
	  "With --json, prints {\"ref\", \"key\", \"pinned\": false}.\n"
	  "\n" GLOBAL_OPTS },
	{ "warm",
	  "Usage: kiln warm MANIFEST.json\n"
	  "\n"
	  "Have kilnd build (or find) every program of MANIFEST.json, many requests\n"
	  "in flight at once so that all of kilnd's --jobs work. The manifest is\n"
	  "{\"requests\": [REQUEST, ...]} or a bare array; a REQUEST is like a get:\n"
	  "  {\"toolchain\": \"c++\", \"output\": \"shared\", \"args\": [\"-O3\"],\n"
	  "   \"sources\": [\"prog.cpp\", {\"name\": \"cfg.h\", \"text\": \"...\"}],\n"
	  "   \"alias\": \"gt4py:...\", \"label\": \"...\"}\n"
	  "A source is a path (relative to the manifest's directory), {\"name\",\n"
	  "\"path\"} or {\"name\", \"text\"}; toolchain defaults to cc. Needs kilnd.\n"
	  "\n"
	  "On a terminal a progress line is redrawn: done/total, failed, in flight,\n"
	  "elapsed time and ETA; otherwise one line per finished request (\"built\n"
	  "KEY NAME (MS ms)\", \"cached KEY NAME\", \"failed NAME: MESSAGE\"). Then a\n"
	  "summary. Exits 1 when any request failed.\n"
	  "\n"
	  "With --json, prints {\"requests\", \"built\", \"cached\", \"failed\",\n"
	  "\"elapsed_s\", \"results\": [{\"ok\", \"alias\", \"key\", \"cached\",\n"
	  "\"build_ms\"} or {\"ok\": false, \"error\"}]}.\n"
	  "\n" GLOBAL_OPTS },
	{ "export",
	  "Usage: kiln export PATH\n"
	  "\n"
	  "Write every entry of the cache (objects, dependencies, logs) to PATH: a\n"
	  "directory (created; the upstream tier's layout, docs/design.md), or a\n"
	  "tar archive of one when PATH ends in .tar, .tar.gz or .tgz. Use it to fill\n"
	  "compute nodes' caches from a login node: kiln import there. Entries\n"
	  "whose headers changed while they were built are not exported. Needs kilnd.\n"
	  "\n"
	  "With --json, prints {\"dir\", \"exported\", \"kept\", \"skipped\", \"damaged\"}.\n"
	  "\n" GLOBAL_OPTS },
	{ "import",
	  "Usage: kiln import PATH\n"
	  "\n"
	  "Take the entries of PATH (made by kiln export: a directory or a .tar,\n"
	  ".tar.gz or .tgz archive, unpacked privately) into the cache, checked as\n"
	  "upstream entries are: every dependency is hashed on this node, the key\n"
	  "recomputed, the object's size and SHA-256 checked. Entries built with\n"
	  "another compiler or against other headers are skipped; they would never\n"
	  "be asked for here. The request keys in PATH are trusted: import only\n"
	  "exports you made or trust. Needs kilnd.\n"
	  "\n"
	  "With --json, prints {\"dir\", \"imported\", \"kept\", \"skipped\", \"damaged\"}.\n"
	  "\n" GLOBAL_OPTS },
	{ "stats",
	  "Usage: kiln stats [--zero] [--prometheus [-o FILE [--mode OCTAL]]]\n"
	  "\n"
	  "Print kilnd's counters and gauges, one per line (\"NAME VALUE\", named as\n"
	  "kiln status names them; sizes in binary units, hits with the hit ratio),\n"
	  "then the build-time histogram and hits, misses and builds per toolchain.\n"
	  "The counters are kept in the cache's index: they survive a restart, and\n"
	  "when kilnd is not running they are read from the index.\n"
	  "\n"
	  "Options:\n"
	  "  -z, --zero       reset every counter (\"counting since\" becomes now)\n"
	  "  --prometheus     print them in Prometheus' text exposition format\n"
	  "                   (kiln_hits_total{user=\"...\",node=\"...\",cache=\"...\"} 588,\n"
	  "                   ...), for a node exporter's textfile collector\n"
	  "  -o, --output FILE  with --prometheus: write FILE, mode 0644 whatever the\n"
	  "                   umask, through a temporary file beside it, fsync and a\n"
	  "                   rename, so the collector never reads half of it\n"
	  "  --mode OCTAL     with -o: FILE's mode instead (0640, 0600; read and write\n"
	  "                   bits only)\n"
	  "\n"
	  "With --json, prints the same counters as one object, with \"running\",\n"
	  "\"toolchain_stats\" {NAME: {hits, misses, builds_ok, builds_failed}} and\n"
	  "\"build_seconds\" {buckets: [[LE, COUNT], ...] cumulative, sum, count}.\n"
	  "\n" GLOBAL_OPTS },
	{ "config",
	  "Usage: kiln config [KEY [VALUE]]\n"
	  "       kiln config --unset KEY\n"
	  "\n"
	  "Show or change the cache's settings, kept in <cache>/kiln.conf, so that\n"
	  "they hold for every kilnd serving the cache. One key so far:\n"
	  "  max-size SIZE    the cache's size limit, e.g. 20G (binary units);\n"
	  "                   kilnd's --max-size wins over it, 10G when neither is set\n"
	  "With kilnd running, it writes the file and applies the value at once\n"
	  "(evicting least recently used entries when over); otherwise the file is\n"
	  "written here and the next kilnd reads it.\n"
	  "\n"
	  "Options:\n"
	  "  --unset          remove KEY from kiln.conf (back to the default)\n"
	  "\n"
	  "With --json, prints {\"saved_max_size\" (null when unset), \"file\"} and, from a\n"
	  "running kilnd, \"max_size\" (in force) and \"max_size_source\" (\"command line\",\n"
	  "\"kiln.conf\" or \"default\").\n"
	  "\n" GLOBAL_OPTS },
	{ "verify",
	  "Usage: kiln verify\n"
	  "\n"
	  "Check every entry's object against the size and SHA-256 recorded when it\n"
	  "was published. Damaged entries (missing, truncated or altered objects) are\n"
	  "removed, so that their next request builds them again. Prints one line per\n"
	  "damaged entry, then \"checked N entries: N ok, N damaged and removed\".\n"
	  "Entries from caches older than schema 3 have no recorded SHA-256; only their\n"
	  "size is checked (\"unverified\"). Files in the cache's objects/ that kiln\n"
	  "never writes there (a loader's copy such as <key>.so_0) are listed as\n"
	  "\"stray\" and removed. Needs kilnd. Exits 0 when every entry is intact,\n"
	  "1 when some were damaged (and removed) or the check failed.\n"
	  "\n"
	  "With --json, prints {\"checked\", \"intact\", \"removed\", \"unverified\",\n"
	  "\"damaged\": [{\"key\", \"problem\"}], \"strays_removed\", \"strays\": [...]}.\n"
	  "\n" GLOBAL_OPTS },
	{ "gc",
	  "Usage: kiln gc [--max-size SIZE | --stale]\n"
	  "\n"
	  "Evict unpinned entries, those of an older or unknown key format first, then\n"
	  "least recently used, until the cache takes at most SIZE on disk (its objects,\n"
	  "metas and logs, the index with its WAL, the logs of failed builds: what du\n"
	  "counts, tmp/ aside). Prints \"removed N entries, freed X on disk; cache now N\n"
	  "entries, X (Y on disk)\". Then remove the logs of failed builds (logs/failed/)\n"
	  "older than 7 days or beyond the newest 1000, and say how many when there were\n"
	  "some. Needs kilnd.\n"
	  "\n"
	  "Options:\n"
	  "  --max-size SIZE  the limit, e.g. 512M, 1.5G, 4096 (binary units; default:\n"
	  "                   the daemon's --max-size)\n"
	  "  --stale          remove every entry of an older key format (built by an\n"
	  "                   older kilnd: never hit again) or of an unknown one (from\n"
	  "                   before kiln recorded formats, not hit since), pinned ones\n"
	  "                   too, with a warning; kiln status counts them\n"
	  "\n"
	  "With --json, prints {\"removed\", \"freed\", \"failed_logs_removed\", \"entries\",\n"
	  "\"bytes\", \"disk\"} and, with --stale, \"pinned_removed\".\n"
	  "\n" GLOBAL_OPTS },
	{ "stop",
	  "Usage: kiln stop\n"
	  "\n"
	  "Ask kilnd to shut down (running builds are killed) and wait up to 10 s until\n"
	  "it is gone. Prints \"kilnd (pid N) stopped\". Needs kilnd.\n"
	  "\n"
	  "With --json, prints {\"pid\", \"stopped\": true}.\n"
	  "\n" GLOBAL_OPTS },
	{ "help",
	  "Usage: kiln help [COMMAND]\n"
	  "\n"
	  "Show the overview, or the help of COMMAND (the same as 'kiln COMMAND --help').\n"
	  "\n" GLOBAL_OPTS },
};

void cli_help_global(FILE *f)
{
	fputs(global_help, f);
}

int cli_help_command(const char *cmd, FILE *f)
{
	for (size_t i = 0; i < sizeof(command_help) / sizeof(command_help[0]); i++) {
		if (!strcmp(command_help[i].name, cmd)) {
			fputs(command_help[i].text, f);
			return 0;
		}
	}
	return -ENOENT;
}

void cli_print_version(void)
{
	printf("kiln %s (build %s, protocol %d)\n", KILN_VERSION_STR, KILN_BUILD_STR,
	       KILN_PROTO_VERSION);
}
