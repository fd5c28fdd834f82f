"""The command line of bench/run: USAGE (its --help text), parse_args and
main, which builds kiln, runs the selected scenarios on one Bench, prints the
table and writes the JSON."""
import argparse
import json
import os
import shutil
import signal
import sys
import time

from .build import build
from .common import FLAGS, HERE, SCENARIOS, T_START, BenchError, log, machine_info, parse_list
from .harness import Bench
from .report import print_table, report
from .scenarios import (cold_like, real_deps, scenario_herd, scenario_index, scenario_micro,
                        scenario_sweep, scenario_throughput, scenario_warm)
from .workload import calibrate, make_workload

USAGE = """bench/run: the kiln benchmark suite, one command.

    bench/run [--quick] [--build-dir DIR] [--out FILE] [options]

Every comparison runs side by side in the same run, on the same machine state,
so that the ratios hold on a noisy 2-core machine. Nothing here asserts a time.

WHAT IT DOES, IN ORDER
  1. Builds kiln with meson into --build-dir (default build/): `meson setup
     --buildtype release -Dtests=disabled` when the directory is not configured
     yet (an existing one keeps its own options; the JSON records the build
     type), then `ninja`. --no-build uses the directory as it is.
  2. Calibrates the workload: generates one typical program and scales its
     number of stencil functions until one compile (c++ -O2 -fPIC -shared)
     takes --compile-time seconds here (default 0.55; the reference workload
     asks for 0.5-2 s). --stencils K skips the calibration.
  3. Generates the workload with bench/gen.py: --programs stencil-like C++
     translation units (default 52; sizes vary by +-25 %, one outlier is
     --outlier times larger), the same list in the same order for every rank;
     for the "unique" scenario a fraction (--unique-frac, default 0.25) of the
     programs gets one variant per rank (rank-unique keys).
  4. Runs the scenarios (below), prints a table, and writes JSON with every
     figure (median, min, max over the repetitions, and the raw values) to
     --out (default bench/out/results.json), plus the rank sweep's data
     (cold-sweep.dat) and PNG plot (cold-sweep.png) next to it.
  It installs nothing: scripts/bench installs what is missing from Debian
  (ccache, gnuplot-nox, kiln's build dependencies) unless --no-install, then
  runs bench/run with its other arguments (bench/run ignores --no-install).
  Without ccache bench/run stops after the build; without gnuplot it makes
  no plot.

THE MODES (bench/rank.c, one process per simulated rank)
  kiln      kilnd with a fresh cache (cold) or restarted on a populated one
            (warm); each rank: kiln_open, then one kiln_get_many of all its
            programs (aliases, sources inline; all requests in flight on
            libkiln's one connection), kiln_sym, call each entry point. Warm
            also runs kiln_get one program after the other, and kiln_lookup by
            alias first (no source text sent), kiln_get only on a miss.
  xargs     `xargs -P JOBS` of one compile per distinct program: the limit of
            the cold case (compiles only, nothing loaded).
  session   every rank compiles every program itself into a private
            directory (same compiler and flags), one after the other; dlopen.
  flock     GT4Py's way: per program a build directory on a shared path;
            flock its lock file; if the .so is missing compile into a temporary
            file and rename it; unlock; dlopen. Ranks go in program order.
  ccache    `ccache c++ -c` into a private .o with one shared CCACHE_DIR
            (fresh when cold), link with `c++ -shared`, dlopen.
  dlopen    bare dlopen+dlsym+call of kiln's artifact files: the warm limit.
  The compiler of every mode, kilnd's included, is bench/ccount copied to
  <work>/bin/c++, a wrapper that runs /usr/bin/c++ and logs each run, so that
  compiler runs are counted (and their overlap measured) the same way for all.
  kiln rows also report kilnd's own builds_started (kiln --json status).

SCENARIOS (names for --only and --skip)
  cold      cold start, RANKS x PROGRAMS, identical keys: kiln, xargs, session,
            flock, ccache. Wall = from the common start signal until the last
            rank has every program loaded and called.
  unique    the same with --unique-frac rank-unique keys.
  warm      warm restart: kilnd restarted on cold's cache before each kiln
            row, the ranks started once its prewarm is done (as a job's ranks
            come seconds after the prologue started kilnd; the prewarm's time
            is in the log and the JSON); kiln (get), kiln (lookup), kiln with
            the ranks started at once (racing the prewarm), bare dlopen of
            the same files by RANKS processes, ccache hit + link (cold's
            CCACHE_DIR).
  herd      --herd processes (default 64) request one new program at the same
            instant: kiln on a new kilnd and cache, kiln on a kilnd that has
            built another program first (its toolchain's files hashed, as on
            a node in use), one plain compile (the issue's limit), the floor
            (the same compile while the processes wait, then each loads it:
            what any tool's herd costs at least), ccache, flock.
  micro     bench/microbench: warm get+load in a fresh process vs one Unix
            socket round trip + bare dlopen of the same file, and vs a fresh
            connection to a listening server + one round trip + the dlopen
            (alternating fresh processes, --micro-rounds per side); repeated
            kiln_lookup in one process vs dlopen(RTLD_NOLOAD)+dlclose.
  throughput  --clients processes (default 64) each doing --ops mixed requests
            through libkiln: 60 % lookups of aliases new to the process (daemon
            hits), 20 % kiln_get without alias (hits; sources hashed), 20 %
            lookups of unknown aliases (misses). Requests/s, p50/p99 latency.
  index     index scale: bench/scale fills a cache with N synthetic entries
            (--index-sizes, default 100000,1000000; rows with the store's
            columns in one transaction, the deps of a real entry, small object
            files and .meta files), then kilnd's start time (kilnd --daemonize
            until the socket accepts) after a crash (full object check) and
            after a clean stop, lookup latency (raw protocol, random aliases,
            sequential, --index-lookups) and kilnd's RSS. The cache goes to
            --scale-dir (default /dev/shm, a tmpfs: 1M entries are 2M files,
            8.4 GiB there; on this machine's disk creating and removing them
            takes many minutes). A size that does not fit in the memory
            available is skipped and the JSON says so.
  sweep     cold wall time vs number of ranks (--sweep-ranks, default
            1,2,4,8,12,16,32,64) for kiln and the baselines, with SMALLER
            programs (--sweep-programs, default 6, --sweep-stencils, default 1:
            about 0.15 s per compile) to keep the time sane; one run per point.

REPETITIONS AND DURATION
  --reps (default 3) runs of kiln and xargs in cold, of every row but ccache in
  warm and herd, and of throughput. Slower, far-off baselines run fewer times:
  --flock-reps (default 1) for flock in cold and unique; --slow-reps (default
  1) for session and ccache in cold (12 ranks x 52 compiles each on 2 cores:
  3-4 minutes per run) and for ccache in warm and herd. 'unique' runs
  kiln, xargs and flock once (--unique-reps) and leaves session and ccache out:
  they do the same 624 compiles as in 'cold'; --full adds them and runs kiln and
  xargs --reps times there (about 30 minutes in all). The micro scenario runs
  --micro-reps (default 5) times, index scale --index-reps (default 2) starts of
  each kind per size. The row order rotates between repetitions.
  A default run takes about 20 minutes on the 2-core reference machine (19.8
  and 21.5 minutes in the last two; 7 of them session and ccache in 'cold');
  --quick takes about 30 seconds, a fresh build included: 6 programs of ~0.15 s,
  3 ranks, 1 repetition, small herd, throughput, index (2000 entries) and sweep
  (1, 2, 4 ranks). --quick figures are a smoke check, not results.

CLEANUP
  Every kilnd is started with its own --socket and --cache-dir under the work
  directory (default: a new directory under /tmp, or --work-dir), and stopped
  (kiln stop, then SIGTERM, then SIGKILL) when its run ends, on errors and on
  Ctrl-C; rank processes run in their own process groups and are killed with
  them. The work directory is removed at the end unless --keep. Only Unix
  sockets are used.

THE CODE
  bench/run only starts bench/kilnbench/cli.py; the package's other modules:
  common (constants, statistics, /proc), build, harness (class Bench: kilnd,
  ranks, cleanup), baselines (the baseline modes), workload (calibration,
  bench/gen.py), scenarios, report (table, --report, plot).
"""


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="bench/run", description=USAGE,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    a = ap.add_argument
    a("--quick", action="store_true", help="smoke check in under 2 minutes (small everything)")
    a("--report", metavar="JSON", help="print the results in JSON as markdown tables and exit "
                                       "(runs nothing)")
    a("--build-dir", default="build", help="meson build directory (default build/)")
    a("--buildtype", default="release", help="for a new build directory (default release)")
    a("--no-build", action="store_true", help="use the build directory as it is")
    a("--no-install", action="store_true", help=argparse.SUPPRESS)  # ignored (bench/compare passes it)
    a("--out", default=os.path.join(HERE, "out", "results.json"),
      help="JSON results (default bench/out/results.json); plots go next to it")
    a("--work-dir", help="parent of the work directory (default /tmp; keep the path short: "
                         "Unix socket paths are limited to 107 bytes)")
    a("--keep", action="store_true", help="keep the work directory")
    a("--kilnd-arg", action="append", default=[], metavar="ARG",
      help="one more argument for every kilnd started, as --kilnd-arg=--log-level=debug "
           "(repeatable): with --keep, each run's CACHE/kilnd.log shows a build's steps "
           "with their times")
    a("--only", help="comma-separated scenarios to run (" + ",".join(SCENARIOS) + ")")
    a("--skip", help="comma-separated scenarios to skip")
    a("--jobs", type=int, default=os.cpu_count() or 2,
      help="kilnd --jobs and xargs -P (default: online CPUs)")
    a("--programs", type=int, help="programs per rank (default 52)")
    a("--ranks", type=int, help="ranks for cold, unique and warm (default 12)")
    a("--unique-frac", type=float, help="fraction of rank-unique programs in 'unique' (default 0.25)")
    a("--compile-time", type=float, help="calibration target, seconds per compile (default 0.55)")
    a("--stencils", type=int, help="stencil functions per program; skips the calibration")
    a("--outlier", type=float, default=3.0, help="size factor of the one big program (default 3)")
    a("--reps", type=int, help="repetitions of the heavy scenarios' fast rows (default 3)")
    a("--slow-reps", type=int,
      help="repetitions of the slow baselines: session and ccache in cold (and unique with "
           "--full), ccache in warm and herd (default 1)")
    a("--flock-reps", type=int, help="repetitions of flock in cold and unique (default 1)")
    a("--unique-reps", type=int, help="repetitions of kiln and xargs in 'unique' (default 1; "
                                      "with --full: --reps)")
    a("--full", action="store_true",
      help="also run session and ccache in 'unique', and kiln and xargs there --reps times "
           "(about 30 minutes in all)")
    a("--kiln-seq", action="store_true",
      help="cold: add a kiln row whose ranks request one program at a time")
    a("--herd", type=int, help="processes in the herd (default 64)")
    a("--clients", type=int, help="throughput clients (default 64)")
    a("--ops", type=int, help="requests per throughput client (default 2000)")
    a("--micro-reps", type=int, help="runs of the microbench (default 5)")
    a("--micro-rounds", type=int, help="fresh processes per side and run (default 101)")
    a("--micro-lookups", type=int, help="kiln_lookup calls timed per run (default 2000000)")
    a("--index-sizes", help="comma-separated entry counts (default 100000,1000000)")
    a("--index-lookups", type=int, help="timed lookups per index probe (default 20000)")
    a("--index-reps", type=int, help="kilnd starts (after a crash, and after a clean stop) "
                                     "per index size (default 2)")
    a("--scale-dir", help="where the index-scale caches go (default /dev/shm)")
    a("--sweep-ranks", help="comma-separated rank counts (default 1,2,4,8,12,16,32,64)")
    a("--sweep-programs", type=int, help="programs per rank in the sweep (default 6)")
    a("--sweep-stencils", type=int, help="stencils per sweep program (default 1)")
    args = ap.parse_args(argv)
    q = args.quick
    defaults = {
        "programs": (52, 6), "ranks": (12, 3), "unique_frac": (0.25, 0.34),
        "compile_time": (0.55, None), "reps": (3, 1), "slow_reps": (1, 1), "flock_reps": (1, 1), "herd": (64, 8),
        "clients": (64, 8), "ops": (2000, 200), "micro_reps": (5, 2), "micro_rounds": (101, 21),
        "micro_lookups": (2000000, 200000), "index_sizes": ("100000,1000000", "2000"),
        "index_lookups": (20000, 2000), "index_reps": (2, 1), "sweep_ranks": ("1,2,4,8,12,16,32,64", "1,2,4"),
        "sweep_programs": (6, 3), "sweep_stencils": (1, 1),
    }
    for k, (full, quick) in defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, quick if q else full)
    if q and args.stencils is None:
        args.stencils = 1
    args.index_sizes = parse_list(args.index_sizes) if isinstance(args.index_sizes, str) else args.index_sizes
    args.sweep_ranks = parse_list(args.sweep_ranks) if isinstance(args.sweep_ranks, str) else args.sweep_ranks
    sel = set(SCENARIOS)
    if args.only:
        sel = set(parse_list(args.only, str))
    if args.skip:
        sel -= set(parse_list(args.skip, str))
    bad = sel - set(SCENARIOS)
    if bad:
        ap.error(f"unknown scenario(s): {', '.join(sorted(bad))}")
    args.selected = sel
    args.reps = max(1, args.reps)
    if args.unique_reps is None:
        args.unique_reps = args.reps if args.full else 1
    return args


def main(argv):
    args = parse_args(argv)
    if args.report:
        with open(args.report) as f:
            print(report(json.load(f)))
        return 0
    outdir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(outdir, exist_ok=True)
    bd, paths, buildtype = build(args)
    if not shutil.which("ccache"):
        raise BenchError("ccache is not installed (scripts/bench installs what is missing)")
    bench = Bench(args, paths)
    interrupted = []

    def on_signal(signum, frame):
        interrupted.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    res = {"kiln_bench": 1, "quick": args.quick, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "meta": machine_info(), "scenarios": {}}
    res["meta"].update({"build_dir": bd, "buildtype": buildtype, "jobs": args.jobs,
                        "flags": FLAGS, "argv": sys.argv[1:],
                        "loadavg_at_start": os.getloadavg()})
    try:
        wdir = os.path.join(bench.work, "wl")
        if args.stencils is None:
            k, hist = calibrate(bench, args.compile_time, os.path.join(bench.work, "cal"))
        else:
            k, hist = args.stencils, []
        res["workload"] = {"programs": args.programs, "ranks": args.ranks, "stencils": k,
                           "outlier": args.outlier, "unique_frac": args.unique_frac,
                           "compile_time_target_s": None if args.stencils else args.compile_time,
                           "calibration": hist,
                           "calibrated_compile_s": hist[-1]["compile_s"] if hist else None}
        for h in hist:
            if h["stencils"] == k:
                res["workload"]["calibrated_compile_s"] = h["compile_s"]
        w1 = make_workload(os.path.join(wdir, "s1"), args.programs, k, args.ranks, 0.0, args.outlier)
        res["workload"]["source_bytes"] = w1["source_bytes"]
        res["workload"]["program_stencils"] = [p["stencils"] for p in w1["programs"]]
        log(f"workload: {args.programs} programs, {k} stencils (outlier x{args.outlier}), "
            f"sources {w1['source_bytes']['median'] / 1024:.1f} KiB median")
        keep = {}
        sc = res["scenarios"]

        def timed(name, fn):
            t0 = time.monotonic()
            log(f"== {name}")
            try:
                r = fn()
            except BenchError as e:
                # One failing scenario must not cost the others' figures.
                log(f"== {name} FAILED: {e}")
                r = {"error": str(e)}
            r["elapsed_s"] = time.monotonic() - t0
            r["loadavg_after"] = os.getloadavg()
            sc[name] = r
            log(f"== {name} done in {r['elapsed_s']:.0f} s")
            return r

        if "cold" in args.selected:
            def cold():
                r, kp = cold_like(bench, "cold", w1, args, args.reps, extra_kiln_seq=args.kiln_seq)
                keep.update(kp)
                return r
            timed("cold", cold)
        if "unique" in args.selected:
            w2 = make_workload(os.path.join(wdir, "s2"), args.programs, k, args.ranks,
                               args.unique_frac, args.outlier)
            timed("unique", lambda: cold_like(bench, "unique", w2, args, args.unique_reps,
                                              with_slow=args.full)[0])
        if "warm" in args.selected:
            timed("warm", lambda: scenario_warm(bench, w1, args, keep))
        if "herd" in args.selected:
            timed("herd", lambda: scenario_herd(bench, args, k))
        if "micro" in args.selected:
            timed("micro", lambda: scenario_micro(bench, args))
        if "throughput" in args.selected:
            timed("throughput", lambda: scenario_throughput(bench, args))
        if "index" in args.selected:
            deps = real_deps(bench, keep)
            timed("index", lambda: scenario_index(bench, args, deps))
        if "sweep" in args.selected:
            timed("sweep", lambda: scenario_sweep(bench, args, outdir))
    except KeyboardInterrupt:
        log("interrupted; cleaning up")
        res["interrupted"] = True
    finally:
        bench.cleanup(outdir)
        res["elapsed_s"] = time.monotonic() - T_START
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
    print_table(res)
    log(f"results: {args.out} (total {res['elapsed_s'] / 60:.1f} min)")
    return 1 if res.get("interrupted") else 0
