"""The scenarios: cold and unique (cold_like), warm, herd, micro, throughput,
index (with index_need and real_deps) and sweep; each runs its rows on a Bench
and returns its figures for the JSON (row_from_runs: one row's statistics)."""
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time

from .common import (BenchError, log, med, mem_available, percentile, proc_status, ratio,
                     rows_by_name, stat)
from .report import plot_sweep
from .workload import make_workload, rotate


def cold_like(bench, name, w, args, reps, extra_kiln_seq=False, with_slow=True):
    """cold and unique: kiln, xargs (x reps), flock (x flock reps), session,
    ccache (x slow reps, when with_slow)."""
    lists = w["lists"]
    nprogs = len(w["programs"])
    distinct = len(w["distinct"])
    runs = {m: [] for m in ("kiln", "xargs", "session", "flock", "ccache")}
    if extra_kiln_seq:
        runs["kiln_seq"] = []
    keep = {}
    fast_reps = reps
    reps = max(fast_reps, args.flock_reps, args.slow_reps if with_slow else 0)
    for rep in range(reps):
        modes = ["kiln", "xargs"] if rep < fast_reps else []
        if rep < args.flock_reps:
            modes.append("flock")
        if rep < args.slow_reps:
            modes += (["session", "ccache"] if with_slow else []) + (["kiln_seq"] if extra_kiln_seq else [])
        for m in rotate(modes, rep):
            la = os.getloadavg()[0]
            m0 = bench.mark()
            if m == "kiln":
                r = bench.run_kiln(lists, many=True)
                keep["kiln_cache"] = r["cache"]
            elif m == "kiln_seq":
                r = bench.run_kiln(lists, j=1)
            elif m == "xargs":
                r = bench.run_xargs(w["distinct"])
            elif m == "ccache":
                r = bench.run_baseline("ccache", lists)
                keep["ccache_dir"] = r["ccache_dir"]
            else:
                r = bench.run_baseline(m, lists)
            runs[m].append(add_run_context(bench, r, rep, la, m0))
            log(f"{name} rep {rep + 1}: {m:8s} wall {r['wall_s']:.2f} s, other CPU "
                f"{r['other_cpu_frac'] * 100:.0f} %, "
                f"{r.get('compiles')} compiles"
                + (f", builds_started {r.get('builds_started')}" if m.startswith("kiln") else "")
                + (f", ERRORS {r['errors']}" if r.get("errors") else ""))
    titles = {
        "kiln": f"kiln: per rank one kiln_get_many of its {nprogs} programs",
        "kiln_seq": "kiln: ranks kiln_get one program after the other",
        "xargs": f"xargs -P {args.jobs}, each distinct program once (limit)",
        "session": "session mode: every rank compiles everything",
        "flock": "flock per build directory (GT4Py)",
        "ccache": "ccache, shared CCACHE_DIR",
    }
    rows = []
    for m, rs in runs.items():
        if not rs:
            continue
        rows.append(row_from_runs(m, titles[m], rs))
    kw = rows_by_name(rows)
    ratios = {
        "kiln_over_xargs": ratio(med(kw.get("kiln", {}).get("wall_s")), med(kw.get("xargs", {}).get("wall_s"))),
        "session_over_kiln": ratio(med(kw.get("session", {}).get("wall_s")), med(kw.get("kiln", {}).get("wall_s"))) if "session" in kw else None,
        "flock_over_kiln": ratio(med(kw.get("flock", {}).get("wall_s")), med(kw.get("kiln", {}).get("wall_s"))),
        "ccache_over_kiln": ratio(med(kw.get("ccache", {}).get("wall_s")), med(kw.get("kiln", {}).get("wall_s"))) if "ccache" in kw else None,
        "kiln_compiles_over_distinct_keys": ratio(med(kw["kiln"]["compiles"]), distinct),
    }
    # The slow rows run once: also compare them with the kiln run of the same
    # repetition, next to them in time.
    k0 = {r["rep"]: r["wall_s"] for r in runs["kiln"]}
    for b in ("session", "flock", "ccache"):
        same = [r["wall_s"] / k0[r["rep"]] for r in runs.get(b, []) if r["rep"] in k0]
        if same:
            ratios[f"{b}_over_kiln_same_rep"] = statistics.median(same)
    return {"ranks": len(lists), "programs": nprogs, "distinct_keys": distinct,
            "rows": rows, "ratios": ratios}, keep


def rep_modes(args, rep, fast):
    """The rows of warm and herd that run in repetition rep, in their order:
    the fast ones --reps times, ccache --slow-reps times; rotated."""
    modes = list(fast) if rep < args.reps else []
    if rep < args.slow_reps:
        modes.append("ccache")
    return rotate(modes, rep)


def add_run_context(bench, r, rep, la, m0):
    """Adds to a row's run r its repetition, the load average before it (la)
    and the CPU the rest of the machine used since mark m0; returns r."""
    r["rep"] = rep
    r["loadavg_before"] = la
    r.update(bench.other_cpu(m0))
    return r


def row_from_runs(name, title, rs):
    row = {"name": name, "title": title, "runs": rs}
    for k in ("wall_s", "first_end_s", "tail_s", "rank_wall_median_s", "rank_wall_max_s",
              "compiles", "preprocess",
              "links", "builds_started", "joined", "errors", "max_parallel_compiles",
              "mean_compile_s", "daemon_start_s", "other_cpu_frac"):
        vals = [r.get(k) for r in rs if r.get(k) is not None]
        if vals:
            row[k] = stat(vals)
    return row


def scenario_warm(bench, w, args, keep):
    lists = w["lists"]
    cache = keep.get("kiln_cache")
    if cache is None:
        log("warm: no cache from the cold scenario; populating one (not measured)")
        cache = bench.run_kiln(lists, many=True)["cache"]
    ccache_dir = keep.get("ccache_dir")
    if ccache_dir is None:
        log("warm: no CCACHE_DIR from the cold scenario; populating one (not measured)")
        ccache_dir = bench.run_baseline("ccache", lists[:1])["ccache_dir"]
    # The artifacts, by alias, for the bare-dlopen rows.
    d = bench.newdir("warmls")
    sock = os.path.join(d, "s")
    pid, _ = bench.kilnd_start(cache, sock)
    try:
        entries = bench.kiln_json(sock, "ls")
    finally:
        bench.kilnd_stop(pid)
    by_alias = {e["alias"]: e["path"] for e in entries if e.get("alias")}
    dl_lists = []
    for r, lst in enumerate(lists):
        out = os.path.join(d, f"dl{r}.tsv")
        with open(lst) as f, open(out, "w") as g:
            for line in f:
                sym, alias, _, cid = line.rstrip("\n").split("\t")
                if alias not in by_alias:
                    raise BenchError(f"warm: {alias} is not in the cache")
                g.write(f"{sym}\t{alias}\t{by_alias[alias]}\t{cid}\n")
        dl_lists.append(out)
    runs = {"kiln": [], "kiln_seq": [], "kiln_lookup": [], "kiln_now": [], "dlopen": [],
            "ccache": []}
    for rep in range(max(args.reps, args.slow_reps)):
        for m in rep_modes(args, rep, ["kiln", "kiln_seq", "kiln_lookup", "kiln_now", "dlopen"]):
            la = os.getloadavg()[0]
            m0 = bench.mark()
            if m == "kiln":
                r = bench.run_kiln(lists, many=True, cache=cache, cclog_tag="warm")
            elif m == "kiln_seq":
                r = bench.run_kiln(lists, j=1, cache=cache, cclog_tag="warms")
            elif m == "kiln_lookup":
                r = bench.run_kiln(lists, j=1, lookup=True, cache=cache, cclog_tag="warml")
            elif m == "kiln_now":
                r = bench.run_kiln(lists, many=True, cache=cache, cclog_tag="warmn", prewarm=False)
            elif m == "dlopen":
                r = bench.run_dlopen(dl_lists)
            else:
                r = bench.run_baseline("ccache", lists, ccache_dir=ccache_dir)
            runs[m].append(add_run_context(bench, r, rep, la, m0))
            log(f"warm rep {rep + 1}: {m:11s} wall {r['wall_s'] * 1e3:.1f} ms, rank median "
                f"{r['rank_wall_median_s'] * 1e3:.1f} ms, compiles {r.get('compiles')}"
                + (f", builds_started {r.get('builds_started')}, kilnd start "
                   f"{r['daemon_start_s'] * 1e3:.0f} ms" if m.startswith("kiln") else "")
                + (f", prewarm {r.get('prewarm_wall_ms')} ms ({r.get('prewarm_loop_ms')} ms of "
                   f"loop, {r.get('prewarm_ready')} ready)" if r.get("prewarm_wall_ms") is not None
                   else "")
                + (f", ERRORS {r['errors']}" if r.get("errors") else ""))
    titles = {
        "kiln": "kiln after restart: kiln_get_many (as cold), sources inline",
        "kiln_seq": "kiln after restart: kiln_get one after the other",
        "kiln_lookup": "kiln after restart: kiln_lookup by alias, one after the other",
        "kiln_now": "kiln after restart, ranks at once (no wait for prewarm), kiln_get_many",
        "dlopen": f"bare dlopen of the same files by {len(lists)} processes (limit)",
        "ccache": "ccache hit + link, then dlopen",
    }
    rows = [row_from_runs(m, titles[m], rs) for m, rs in runs.items() if rs]
    kw = rows_by_name(rows)
    ratios = {
        "kiln_over_dlopen": ratio(med(kw.get("kiln", {}).get("wall_s")), med(kw.get("dlopen", {}).get("wall_s"))),
        "kiln_seq_over_dlopen": ratio(med(kw.get("kiln_seq", {}).get("wall_s")), med(kw.get("dlopen", {}).get("wall_s"))),
        "kiln_lookup_over_dlopen": ratio(med(kw.get("kiln_lookup", {}).get("wall_s")), med(kw.get("dlopen", {}).get("wall_s"))),
        "kiln_now_over_dlopen": ratio(med(kw.get("kiln_now", {}).get("wall_s")), med(kw.get("dlopen", {}).get("wall_s"))),
        "kiln_rank_median_over_dlopen": ratio(med(kw.get("kiln", {}).get("rank_wall_median_s")),
                                              med(kw.get("dlopen", {}).get("rank_wall_median_s"))),
        "ccache_over_kiln": ratio(med(kw.get("ccache", {}).get("wall_s")), med(kw.get("kiln", {}).get("wall_s"))),
    }
    return {"ranks": len(lists), "programs": len(w["programs"]), "rows": rows, "ratios": ratios}


def scenario_herd(bench, args, k):
    n = args.herd
    runs = {"kiln": [], "kiln_used": [], "plain": [], "floor": [], "ccache": [], "flock": []}
    fast = ["kiln", "kiln_used", "plain", "floor", "flock"]
    if not bench.rank_has_go():
        log("herd: this build's bench/rank has no --go: no floor row")
        fast.remove("floor")
    for rep in range(max(args.reps, args.slow_reps)):
        outdir = os.path.join(bench.work, f"herd{rep}")
        w = make_workload(outdir, 2, k, 1, 0.0, 1.0, prefix="h", salt=f"herd{rep}")
        # The herd's program, and another that kiln_used's kilnd builds first.
        srcs = [e[2] for e in w["ranks"][0]]
        lst = os.path.join(outdir, "herd.tsv")
        with open(w["lists"][0]) as f, open(lst, "w") as g:
            first = f.readline()
            g.write(first)
        sym = first.split("\t")[0]
        src = srcs[0]
        for m in rep_modes(args, rep, fast):
            la = os.getloadavg()[0]
            m0 = bench.mark()
            if m == "kiln":
                r = bench.run_kiln([lst] * n, j=1)
            elif m == "kiln_used":
                r = bench.run_kiln([lst] * n, j=1, cclog_tag="kilnu", seed_src=srcs[1])
            elif m == "plain":
                r = bench.plain_compile(src)
            elif m == "floor":
                r = bench.run_floor(src, sym, n)
            else:
                r = bench.run_baseline(m, [lst] * n)
            runs[m].append(add_run_context(bench, r, rep, la, m0))
            log(f"herd rep {rep + 1}: {m:7s} wall {r['wall_s']:.2f} s, {r.get('compiles')} compiles"
                + (f", builds_started {r.get('builds_started')}" if m == "kiln" else "")
                + (f", ERRORS {r['errors']}" if r.get("errors") else ""))
    titles = {"kiln": f"kiln, {n} processes, a new kilnd and cache",
              "kiln_used": f"kiln, {n} processes, a kilnd that has built another program "
                           "(its toolchain's files hashed)",
              "plain": "one plain compile (the issue's limit)",
              "floor": f"one plain compile, then {n} processes load it (no tool: the floor)",
              "ccache": f"ccache, {n} processes, shared CCACHE_DIR",
              "flock": f"flock per build directory, {n} processes"}
    rows = [row_from_runs(m, titles[m], rs) for m, rs in runs.items() if rs]
    kw = rows_by_name(rows)
    ratios = {
        "kiln_over_plain": ratio(med(kw.get("kiln", {}).get("wall_s")), med(kw.get("plain", {}).get("wall_s"))),
        "kiln_used_over_plain": ratio(med(kw.get("kiln_used", {}).get("wall_s")),
                                      med(kw.get("plain", {}).get("wall_s"))),
        "kiln_over_flock": ratio(med(kw.get("kiln", {}).get("wall_s")), med(kw.get("flock", {}).get("wall_s"))),
        "ccache_over_plain": ratio(med(kw.get("ccache", {}).get("wall_s")), med(kw.get("plain", {}).get("wall_s"))),
        "flock_over_plain": ratio(med(kw.get("flock", {}).get("wall_s")), med(kw.get("plain", {}).get("wall_s"))),
        "floor_over_plain": ratio(med(kw.get("floor", {}).get("wall_s")), med(kw.get("plain", {}).get("wall_s"))),
        "kiln_over_floor": ratio(med(kw.get("kiln", {}).get("wall_s")), med(kw.get("floor", {}).get("wall_s"))),
        "kiln_used_over_floor": ratio(med(kw.get("kiln_used", {}).get("wall_s")),
                                      med(kw.get("floor", {}).get("wall_s"))),
        "flock_over_floor": ratio(med(kw.get("flock", {}).get("wall_s")), med(kw.get("floor", {}).get("wall_s"))),
    }
    return {"processes": n, "rows": rows, "ratios": ratios}


def scenario_micro(bench, args):
    d = bench.newdir("micro")
    sock = os.path.join(d, "s")
    pid, _ = bench.kilnd_start(os.path.join(d, "cache"), sock)
    res = []
    try:
        for rep in range(args.micro_reps):
            m0 = bench.mark()
            r = subprocess.run([bench.p["microbench"], sock, str(args.micro_rounds),
                                "--lookups", str(args.micro_lookups), "--json"],
                               stdout=subprocess.PIPE, stderr=bench.stderr_log, text=True,
                               env=bench.env(), timeout=600)
            if r.returncode != 0:
                raise BenchError("microbench failed (see stderr.log in the work directory)")
            m = json.loads(r.stdout.strip().splitlines()[-1])
            m["loadavg_before"] = os.getloadavg()[0]
            pp = subprocess.run([bench.p["scale"], "pingpong", "20000"], stdout=subprocess.PIPE,
                                stderr=bench.stderr_log, text=True, timeout=300)
            m["pingpong"] = json.loads(pp.stdout) if pp.returncode == 0 else None
            m.update(bench.other_cpu(m0))
            res.append(m)
            log(f"micro rep {rep + 1}: warm get {m['warm_get_us']['median']:.0f} us vs "
                f"{m['baseline_us']['median']:.0f} us (x{m['ratio']:.2f}); lookup "
                f"{m['lookup_ns']:.1f} ns vs NOLOAD {m['noload_ns']:.1f} ns")
    finally:
        bench.kilnd_stop(pid)
    out = {
        "rounds_per_rep": args.micro_rounds,
        "warm_get_us": stat([m["warm_get_us"]["median"] for m in res]),
        "baseline_us": stat([m["baseline_us"]["median"] for m in res]),
        "warm_get_p90_us": stat([m["warm_get_us"]["p90"] for m in res]),
        "baseline_p90_us": stat([m["baseline_us"]["p90"] for m in res]),
        "ratio_warm_get": stat([m["ratio"] for m in res]),
        # A microbench older than the connect baseline has none (bench/compare
        # runs the old tree's).
        "connect_baseline_us": stat([m["connect_baseline_us"]["median"] for m in res
                                     if m.get("connect_baseline_us")]),
        "ratio_connect": stat([m["ratio_connect"] for m in res if m.get("ratio_connect")]),
        "lookup_ns": stat([m["lookup_ns"] for m in res]),
        "noload_ns": stat([m["noload_ns"] for m in res]),
        "socket_round_trip_p50_us": stat([m["pingpong"]["p50_us"] for m in res if m.get("pingpong")]),
        "socket_round_trip_p99_us": stat([m["pingpong"]["p99_us"] for m in res if m.get("pingpong")]),
        "runs": res,
    }
    return out


def scenario_throughput(bench, args):
    d = bench.newdir("tp")
    sock = os.path.join(d, "s")
    pid, _ = bench.kilnd_start(os.path.join(d, "cache"), sock)
    naliases = max(16, int(args.ops * 0.6) + 16)
    runs = []
    try:
        t0 = time.monotonic()
        r = subprocess.run([bench.p["rank"], "--mode", "aliases", "--socket", sock, "--aliases",
                            str(naliases), "--variants", "8"], env=bench.env(),
                           stderr=bench.stderr_log, timeout=600)
        if r.returncode != 0:
            raise BenchError("throughput setup (aliases) failed")
        log(f"throughput: {naliases} aliases over 8 programs set up in {time.monotonic() - t0:.1f} s")
        for rep in range(args.reps):
            st0 = bench.kiln_json(sock, "status")
            argvs = []
            lats = []
            for c in range(args.clients):
                lat = os.path.join(d, f"lat{rep}-{c}")
                lats.append(lat)
                argvs.append([bench.p["rank"], "--mode", "mixed", "--socket", sock, "--rank", str(c),
                              "--ops", str(args.ops), "--aliases", str(naliases), "--variants", "8",
                              "--get-frac", "0.2", "--miss-frac", "0.2", "--seed", str(rep + 1),
                              "--lat", lat])
            la = os.getloadavg()[0]
            m0 = bench.mark()
            t0, outs, failures = bench.run_ranks(argvs, bench.env())
            oc = bench.other_cpu(m0)
            st1 = bench.kiln_json(sock, "status")
            wall = max(o["end"] for o in outs) - t0
            allv = []
            for lat in lats:
                with open(lat) as f:
                    allv.extend(float(x) / 1e3 for x in f.read().split())
                os.unlink(lat)
            allv.sort()
            total = sum(o["ops"] for o in outs)
            rr = {
                "rep": rep, "clients": args.clients, "ops": total, "wall_s": wall,
                "ops_per_s": total / wall if wall > 0 else None,
                "p50_us": percentile(allv, 0.50), "p99_us": percentile(allv, 0.99),
                "max_us": allv[-1] if allv else None,
                "errors": sum(o["errors"] for o in outs) + failures,
                "daemon_requests": st1["requests"] - st0["requests"],
                "daemon_hits": st1["hits"] - st0["hits"],
                "daemon_misses": st1["misses"] - st0["misses"],
                "loadavg_before": la,
            }
            rr.update(oc)
            rr["daemon_requests_per_s"] = rr["daemon_requests"] / wall if wall > 0 else None
            runs.append(rr)
            log(f"throughput rep {rep + 1}: {rr['ops_per_s']:.0f} requests/s, p50 "
                f"{rr['p50_us']:.0f} us, p99 {rr['p99_us']:.0f} us"
                + (f", ERRORS {rr['errors']}" if rr["errors"] else ""))
    finally:
        bench.kilnd_stop(pid)
    out = {"clients": args.clients, "ops_per_client": args.ops,
           "mix": "60% lookup of an alias new to the process (hit), 20% get without alias (hit), "
                  "20% lookup of an unknown alias (miss)",
           "runs": runs}
    for k in ("ops_per_s", "p50_us", "p99_us", "max_us", "daemon_requests_per_s"):
        out[k] = stat([r[k] for r in runs])
    return out


def index_need(n, ndeps):
    """Bytes a cache of n synthetic entries with ndeps deps each takes while
    it is filled on tmpfs: the object (one page), the meta (whole pages), the
    row with its deps blob about three times (table, and WAL pages written
    more than once in the one big transaction: measured), the filling
    process (~1.5 GiB, mostly SQLite's cache) and 3 GiB to spare."""
    meta_pages = -(-(700 + 160 * ndeps) // 4096)
    return n * (4096 + 4096 * meta_pages + 3 * (450 + 115 * ndeps)) + (9 << 29)


def scenario_index(bench, args, deps):
    out = {"sizes": {}, "deps_of_a_real_entry": len(deps)}
    for n in args.index_sizes:
        base = args.scale_dir or "/dev/shm"
        res = {"entries": n, "dir_base": base}
        use = list(deps)
        if base.startswith("/dev/shm") and mem_available() < index_need(n, len(use)):
            # A real C++ entry records ~30 deps (headers and link inputs),
            # about 3.3 KB of index per entry; at 1M that does not fit in
            # this machine's memory next to 2M files. Keep the first few.
            use = use[:4]
            res["deps_reduced"] = (f"{len(deps)} deps per entry (as a real entry) would need "
                                   f"{index_need(n, len(deps)) >> 20} MiB on tmpfs, "
                                   f"{mem_available() >> 20} MiB are available: "
                                   f"{len(use)} deps per entry instead")
            log(f"index {n}: {res['deps_reduced']}")
        res["deps_per_entry"] = len(use)
        need = index_need(n, len(use))
        if base.startswith("/dev/shm") and mem_available() < need:
            res["skipped"] = (f"not enough memory available for {n} entries on tmpfs "
                              f"({mem_available() >> 20} MiB available, {need >> 20} MiB needed)")
            log(f"index {n}: skipped: {res['skipped']}")
            out["sizes"][str(n)] = res
            continue
        d = tempfile.mkdtemp(prefix="kb-scale-", dir=base)
        bench.scale_dirs.append(d)
        os.chmod(d, 0o700)
        cache = os.path.join(d, "c")
        try:
            t0 = time.monotonic()
            cmd = [bench.p["scale"], "fill", cache, str(n)]
            for p in use:
                cmd += ["--dep", p]
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                raise BenchError(f"scale fill {n} failed (status {r.returncode}): "
                                 f"{r.stderr.strip()[-500:]}")
            res["fill"] = json.loads(r.stdout.strip().splitlines()[-1])
            log(f"index {n}: filled in {time.monotonic() - t0:.1f} s")
            full, clean, stops, probes, probes_key = [], [], [], [], []
            rss_start, rss_after, hwm, rss_clean = [], [], [], []
            sock = os.path.join(d, "s")
            for rep in range(args.index_reps):
                # After the fill, and after the SIGKILL below: no clean stop,
                # so kilnd checks every object (as after a crash).
                pid, st = bench.kilnd_start(cache, sock)
                full.append(st)
                rss_start.append(proc_status(pid).get("VmRSS"))
                res["status_entries"] = bench.kiln_json(sock, "status").get("entries")
                pr = subprocess.run([bench.p["scale"], "probe", sock, str(n), str(args.index_lookups),
                                     "--seed", str(rep + 1)], stdout=subprocess.PIPE,
                                    stderr=bench.stderr_log, text=True, timeout=900)
                if pr.returncode == 0:
                    probes.append(json.loads(pr.stdout.strip().splitlines()[-1]))
                pk = subprocess.run([bench.p["scale"], "probe", sock, str(n),
                                     str(max(1, args.index_lookups // 4)), "--seed", str(rep + 11),
                                     "--by-key"], stdout=subprocess.PIPE, stderr=bench.stderr_log,
                                    text=True, timeout=900)
                if pk.returncode == 0:
                    probes_key.append(json.loads(pk.stdout.strip().splitlines()[-1]))
                ps = proc_status(pid)
                rss_after.append(ps.get("VmRSS"))
                hwm.append(ps.get("VmHWM"))
                stops.append(bench.kilnd_stop(pid))
                # A restart after that clean stop.
                pid, st2 = bench.kilnd_start(cache, sock)
                clean.append(st2)
                rss_clean.append(proc_status(pid).get("VmRSS"))
                bench.kilnd_stop(pid, kill=True)
                log(f"index {n} rep {rep + 1}: kilnd start {st * 1e3:.0f} ms after a crash, "
                    f"{st2 * 1e3:.0f} ms after a clean stop; lookup p50 "
                    f"{probes[-1]['p50_us'] if probes else float('nan'):.0f} us p99 "
                    f"{probes[-1]['p99_us'] if probes else float('nan'):.0f} us; RSS "
                    f"{(rss_after[-1] or 0) / 2**20:.1f} MiB (peak {(hwm[-1] or 0) / 2**20:.1f} MiB)"
                    + (f", {probes[-1]['errors']} LOOKUP ERRORS" if probes and probes[-1]["errors"] else ""))
            res.update({
                "daemon_start_after_crash_s": stat(full), "daemon_start_after_clean_stop_s": stat(clean),
                "daemon_stop_s": stat(stops),
                "lookup_p50_us": stat([p["p50_us"] for p in probes]),
                "lookup_p99_us": stat([p["p99_us"] for p in probes]),
                "lookup_max_us": stat([p["max_us"] for p in probes]),
                "lookup_by_key_p99_us": stat([p["p99_us"] for p in probes_key]),
                "lookup_errors": sum(p["errors"] for p in probes) + (args.index_reps - len(probes)),
                "rss_after_start_bytes": stat(rss_start), "rss_after_lookups_bytes": stat(rss_after),
                "rss_peak_bytes": stat(hwm), "rss_after_clean_start_bytes": stat(rss_clean),
                "probes": probes, "probes_by_key": probes_key,
            })
            du = subprocess.run(["du", "-sb", cache], stdout=subprocess.PIPE, text=True).stdout.split()
            res["cache_bytes"] = int(du[0]) if du else None
        finally:
            t0 = time.monotonic()
            shutil.rmtree(d, ignore_errors=True)
            bench.scale_dirs.remove(d)
            res["remove_s"] = time.monotonic() - t0
        out["sizes"][str(n)] = res
    return out


def scenario_sweep(bench, args, outdir_results):
    outdir = os.path.join(bench.work, "sweep")
    rmax = max(args.sweep_ranks)
    w = make_workload(outdir, args.sweep_programs, args.sweep_stencils, rmax, 0.0, 1.0, prefix="s")
    modes = ["kiln", "xargs", "flock", "session", "ccache"]
    points = []
    for i, nr in enumerate(args.sweep_ranks):
        lists = w["lists"][:nr]
        pt = {"ranks": nr}
        for m in rotate(modes, i):
            if m == "kiln":
                r = bench.run_kiln(lists, many=True)
            elif m == "xargs":
                r = bench.run_xargs(w["distinct"])
            else:
                r = bench.run_baseline(m, lists)
            pt[m] = {"wall_s": r["wall_s"], "compiles": r.get("compiles"), "errors": r.get("errors"),
                     "mean_compile_s": r.get("mean_compile_s")}
        points.append(pt)
        log("sweep {:2d} ranks: ".format(nr) + ", ".join(
            f"{m} {pt[m]['wall_s']:.2f} s" for m in modes))
    dat = os.path.join(outdir_results, "cold-sweep.dat")
    with open(dat, "w") as f:
        f.write(f"# kiln bench/run cold sweep: {args.sweep_programs} programs of "
                f"{args.sweep_stencils} stencil(s) (smaller than the main workload), "
                f"identical keys, one run per point; wall seconds\n")
        f.write("# ranks " + " ".join(modes) + "\n")
        for pt in points:
            f.write(f"{pt['ranks']} " + " ".join(f"{pt[m]['wall_s']:.4f}" for m in modes) + "\n")
    xc = [pt["xargs"]["mean_compile_s"] for pt in points if pt["xargs"].get("mean_compile_s")]
    compile_s = statistics.median(xc) if xc else None
    png = plot_sweep(dat, modes, args, outdir_results, compile_s)
    return {"programs": args.sweep_programs, "stencils": args.sweep_stencils,
            "compile_s_in_xargs": compile_s,
            "source_bytes": w["source_bytes"],
            "note": "smaller programs than the main workload, to keep the sweep's time sane",
            "points": points, "data": dat, "plot": png}


def real_deps(bench, keep):
    """The recorded deps of one real workload entry (headers and link inputs),
    given to the synthetic index entries so that lookups validate as many
    files as for a real one. Without cold's cache, builds one program."""
    cache = keep.get("kiln_cache")
    try:
        if cache is None:
            d = bench.newdir("deps")
            w = make_workload(os.path.join(d, "wl"), 1, 1, 1, 0.0, 1.0, prefix="d")
            cache = bench.run_kiln(w["lists"], many=True)["cache"]
        r = subprocess.run([bench.p["kiln"], "--cache-dir", cache, "--json", "ls"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        ents = json.loads(r.stdout)
        r = subprocess.run([bench.p["kiln"], "--cache-dir", cache, "--json", "show", ents[0]["key"]],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        return [p for p in json.loads(r.stdout).get("deps", []) if os.path.isfile(p)]
    except (ValueError, IndexError, KeyError, BenchError):
        return []
