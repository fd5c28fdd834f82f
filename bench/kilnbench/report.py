"""The output: the table bench/run prints at the end (print_table, fmt_*),
the markdown report of a results file (report, md_*, targets: bench/run
--report FILE), and the rank sweep's plot (plot_sweep, with gnuplot)."""
import os
import shutil
import statistics
import subprocess

from .common import log, med, ratio, rows_by_name


def plot_sweep(dat, modes, args, outdir, compile_s):
    if not shutil.which("gnuplot"):
        log("gnuplot not found: no plot (scripts/bench installs gnuplot-nox)")
        return None
    png = os.path.join(outdir, "cold-sweep.png")
    titles = {"kiln": "kiln", "xargs": f"xargs -P{args.jobs} (limit)", "flock": "flock per directory",
              "session": "session mode", "ccache": "ccache, shared dir"}
    colors = {"kiln": "#1f5fbf", "xargs": "#2ca02c", "flock": "#ff7f0e", "session": "#d62728",
              "ccache": "#7f3f9f"}
    plots = ", ".join(f"'{dat}' using 1:{i + 2} with linespoints lw 2 pt 7 lc rgb '{colors[m]}' "
                      f"title '{titles[m]}'" for i, m in enumerate(modes))
    script = f"""
set terminal pngcairo size 900,600 font ',11'
set output '{png}'
set title 'cold start: {args.sweep_programs} small programs per rank ({compile_s or 0:.2f} s per compile), identical keys, {args.jobs} cores'
set xlabel 'ranks (processes)'
set ylabel 'wall time until every rank has every program loaded [s]'
set logscale x 2
set logscale y
set grid
set key top left
plot {plots}
"""
    r = subprocess.run(["gnuplot"], input=script, text=True, stderr=subprocess.PIPE)
    if r.returncode != 0:
        log(f"gnuplot failed: {r.stderr.strip()}")
        return None
    return png


# ---------------------------------------------------------------- the table

def fmt_x(x):
    a = abs(x)
    if a >= 100:
        return f"{x:.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def fmt_s(s, unit="s"):
    if s is None:
        return "-"
    m, lo, hi = s["median"], s["min"], s["max"]
    if unit == "ms":
        m, lo, hi = m * 1e3, lo * 1e3, hi * 1e3
    if s["n"] == 1:
        return fmt_x(m)
    return f"{fmt_x(m)} [{fmt_x(lo)}-{fmt_x(hi)}]"


def fmt_n(s):
    if s is None:
        return "-"
    if s["min"] == s["max"]:
        return f"{s['median']:g}"
    return f"{s['median']:g} [{s['min']:g}-{s['max']:g}]"


def fmt_r(x):
    return "-" if x is None else f"{x:.2f}"


def print_table(res):
    sc = res["scenarios"]
    lines = []
    w1, w2, w3 = 58, 28, 22

    def row(a, b, c, d=""):
        lines.append(f"{a:<{w1}} {b:>{w2}} {c:>{w3}} {d}")

    def block(key, title, unit="s"):
        if key not in sc:
            return
        s = sc[key]
        lines.append("")
        lines.append(title)
        row("  row", f"wall {unit}: median [min-max]", "compiler runs", "x kiln")
        base = med(s["rows"][0]["wall_s"])
        for r in s["rows"]:
            runs = r.get("compiles")
            extra = ""
            if r.get("builds_started"):
                extra = f" (kilnd builds_started {fmt_n(r['builds_started'])})"
            if r.get("links") and med(r["links"]):
                extra += f" + {fmt_n(r['links'])} links"
            row("  " + r["title"][:w1 - 2], fmt_s(r["wall_s"], unit), fmt_n(runs),
                fmt_r(ratio(med(r["wall_s"]), base)) + extra)
        lines.append("  ratios: " + ", ".join(f"{k} {fmt_r(v)}" for k, v in s["ratios"].items()
                                          if v is not None))

    lines.append("kiln bench/run results" + (" (--quick: smoke check, not results)" if res["quick"] else ""))
    failed = {k: v for k, v in sc.items() if "error" in v}
    sc = {k: v for k, v in sc.items() if "error" not in v}
    wl = res.get("workload")
    if wl is None:
        print("\n".join(lines + ["(no workload: the run stopped early)"]))
        return
    cal = wl.get("calibrated_compile_s")
    lines.append(f"workload: {wl['programs']} programs x {wl['ranks']} ranks, {wl['stencils']} stencils "
                 f"({f'calibrated: {cal} s per compile' if cal else 'not calibrated'}), sources "
                 f"{wl['source_bytes']['median'] / 1024:.0f} KiB median; jobs {res['meta']['jobs']}")
    if "cold" in sc:
        block("cold", f"cold, {sc['cold']['ranks']} ranks x {sc['cold']['programs']} programs, identical keys "
              f"({sc['cold']['distinct_keys']} distinct)")
    if "unique" in sc:
        block("unique", f"cold, {sc['unique']['ranks']} ranks x {sc['unique']['programs']} programs, "
              f"{res['workload']['unique_frac'] * 100:.0f} % rank-unique keys ({sc['unique']['distinct_keys']} distinct)")
    if "warm" in sc:
        block("warm", f"warm restart, {sc['warm']['ranks']} x {sc['warm']['programs']} loads", unit="ms")
        kr = rows_by_name(sc["warm"]["rows"])
        lines.append("  per-rank wall median, ms: " + ", ".join(
            f"{n} {fmt_s(r.get('rank_wall_median_s'), 'ms')}" for n, r in kr.items()))
    if "herd" in sc:
        block("herd", f"herd: {sc['herd']['processes']} processes, one new program")
    if "micro" in sc:
        m = sc["micro"]
        lines.append("")
        lines.append(f"single warm get+load in a fresh process ({m['rounds_per_rep']} per side and rep, medians)")
        row("  kiln_open + kiln_get + kiln_sym", fmt_s(m["warm_get_us"], "s") + " us", "", "")
        row("  one socket round trip + bare dlopen+dlsym", fmt_s(m["baseline_us"], "s") + " us", "", "")
        lines.append(f"  ratio {fmt_n(m['ratio_warm_get'])}")
        if m.get("connect_baseline_us"):
            row("  connect + round trip + bare dlopen+dlsym",
                fmt_s(m["connect_baseline_us"], "s") + " us", "", "")
            lines.append(f"  ratio {fmt_n(m['ratio_connect'])}")
        row("  repeated kiln_lookup, ns/call", fmt_s(m["lookup_ns"]), "", "")
        row("  dlopen(RTLD_NOLOAD)+dlclose, ns/call", fmt_s(m["noload_ns"]), "", "")
        row("  machine floor: 200-byte socket round trip p50 / p99, us",
            f"{fmt_s(m.get('socket_round_trip_p50_us'))} / {fmt_s(m.get('socket_round_trip_p99_us'))}", "", "")
    if "throughput" in sc:
        t = sc["throughput"]
        lines.append("")
        lines.append(f"throughput: {t['clients']} clients x {t['ops_per_client']} mixed requests")
        row("  requests/s (client-side, libkiln)", fmt_s(t["ops_per_s"]), "", "")
        row("  latency p50 / p99, us", f"{fmt_s(t['p50_us'])} / {fmt_s(t['p99_us'])}", "", "")
    if "index" in sc:
        lines.append("")
        lines.append("index scale")
        for n, r in sc["index"]["sizes"].items():
            if r.get("skipped"):
                lines.append(f"  {n} entries: skipped ({r['skipped']})")
                continue
            rss = r.get("rss_after_lookups_bytes")
            lines.append(f"  {n} entries: kilnd start {fmt_s(r['daemon_start_after_crash_s'], 'ms')} ms after a "
                         f"crash, {fmt_s(r['daemon_start_after_clean_stop_s'], 'ms')} ms after a clean stop; lookup p50 "
                         f"{fmt_s(r['lookup_p50_us'])} us, p99 {fmt_s(r['lookup_p99_us'])} us, RSS "
                         f"{med(rss) / 2**20 if rss else float('nan'):.1f} MiB (peak "
                         f"{med(r['rss_peak_bytes']) / 2**20 if r.get('rss_peak_bytes') else float('nan'):.1f} MiB)")
    if "sweep" in sc:
        s = sc["sweep"]
        lines.append("")
        lines.append(f"sweep (cold, {s['programs']} small programs, identical keys), wall s:")
        modes = ["kiln", "xargs", "flock", "session", "ccache"]
        lines.append("  ranks " + "".join(f"{m:>10}" for m in modes))
        for pt in s["points"]:
            lines.append(f"  {pt['ranks']:5d} " + "".join(f"{pt[m]['wall_s']:10.2f}" for m in modes))
        if s.get("plot"):
            lines.append(f"  plot: {s['plot']}")
    for k, v in failed.items():
        lines.append("")
        lines.append(f"{k}: FAILED: {v['error']}")
    print("\n".join(lines))


# ---------------------------------------------------------------- markdown report

def md_s(s, unit="s", scale=1.0):
    if s is None:
        return "-"
    m, lo, hi = s["median"] * scale, s["min"] * scale, s["max"] * scale
    if s["n"] == 1:
        return f"{fmt_x(m)} (1 run)"
    return f"{fmt_x(m)} [{fmt_x(lo)}–{fmt_x(hi)}] ({s['n']} runs)"


def md_other(r):
    """Other processes' share of the CPU during the row's runs: median, max."""
    o = r.get("other_cpu_frac")
    if o is None:
        return "-"
    return f"{max(0, o['median']) * 100:.0f} %" + (f" (max {max(0, o['max']) * 100:.0f} %)" if o["n"] > 1 else "")


def md_n(s):
    return "-" if s is None else fmt_n(s)


def md_head(L, title, s, columns, failed=None):
    """Starts a scenario's section in L: a blank line, the title and a blank
    line; then, when it failed (failed; default: s has an error), "FAILED:"
    and False, else the header of its table (columns) and True."""
    L += ["", title, ""]
    if ("error" in s) if failed is None else failed:
        L.append(f"FAILED: {s['error']}")
        return False
    L.append("| " + " | ".join(columns) + " |")
    L.append("| --- " * len(columns) + "|")
    return True


def report(res):
    """The results as markdown tables (bench/run --report FILE)."""
    sc = res["scenarios"]
    meta = res.get("meta", {})
    wl = res.get("workload", {})
    L = []
    L.append(f"Run of {res.get('started', '?')}, kiln {str(meta.get('kiln_commit'))[:12]}"
             + (" (with uncommitted changes)" if meta.get("kiln_tree_modified") else "")
             + f", build type {meta.get('buildtype')}, {meta.get('cpus')} CPUs ({meta.get('cpu')}), "
             f"{meta.get('mem_gib')} GiB, Linux {meta.get('kernel')}, {meta.get('cxx')}, "
             f"{meta.get('ccache')}; kilnd --jobs {meta.get('jobs')}; total "
             f"{res.get('elapsed_s', 0) / 60:.1f} min"
             + (" (--quick: a smoke check, not results)" if res.get("quick") else "") + ".")
    if wl:
        sb = wl.get("source_bytes", {})
        L.append("")
        cal = wl.get("calibrated_compile_s")
        L.append(f"Workload: {wl.get('programs')} programs, {wl.get('stencils')} stencils each "
                 f"(× 0.75–1.25, one outlier × {wl.get('outlier')}), "
                 + (f"calibrated to {cal} s per compile" if cal else "not calibrated") + "; sources "
                 f"{sb.get('min', 0) / 1024:.1f}–{sb.get('max', 0) / 1024:.1f} KiB "
                 f"(median {sb.get('median', 0) / 1024:.1f} KiB). Figures: median [min–max] over "
                 "the runs.")

    def cold_block(key, title):
        if key not in sc:
            return
        s = sc[key]
        if not md_head(L, f"**{title}**", s, ["row", "wall, s", "compiler runs", "× kiln", "others' CPU"]):
            return
        base = med(s["rows"][0]["wall_s"])
        for r in s["rows"]:
            runs = md_n(r.get("compiles"))
            if r.get("builds_started"):
                runs += f" (kilnd builds_started {md_n(r['builds_started'])})"
            if r.get("links") and med(r["links"]):
                runs += f", + {md_n(r['links'])} links"
            L.append(f"| {r['title']} | {md_s(r['wall_s'])} | {runs} | "
                     f"{fmt_r(ratio(med(r['wall_s']), base))} | {md_other(r)} |")
        same = {k: v for k, v in s["ratios"].items() if k.endswith("_same_rep")}
        if same:
            L.append("")
            L.append("Rows that ran once, against the kiln run of the same repetition: " + ", ".join(
                f"{k.split('_over')[0]} / kiln = {v:.2f}" for k, v in same.items()) + ".")

    if "cold" in sc and "error" not in sc["cold"]:
        c = sc["cold"]
        cold_block("cold", f"Cold start, {c['ranks']} ranks × {c['programs']} programs, identical keys "
                   f"({c['distinct_keys']} distinct)")
    else:
        cold_block("cold", "Cold start")
    if "unique" in sc and "error" not in sc["unique"]:
        u = sc["unique"]
        cold_block("unique", f"Cold start, {u['ranks']} ranks × {u['programs']} programs, "
                   f"{wl.get('unique_frac', 0) * 100:.0f} % rank-unique keys ({u['distinct_keys']} distinct)")
    else:
        cold_block("unique", "Cold start with rank-unique keys")
    if "warm" in sc:
        s = sc["warm"]
        if md_head(L, f"**Warm restart, {s.get('ranks')} ranks × {s.get('programs')} loads** (kilnd "
                   "restarted on the cold cache before each kiln run)", s,
                   ["row", "wall, ms", "per-rank wall (median rank), ms", "compiler runs",
                    "× bare dlopen", "others' CPU"]):
            kw = rows_by_name(s["rows"])
            base = med(kw.get("dlopen", {}).get("wall_s")) if "dlopen" in kw else None
            for r in s["rows"]:
                runs = md_n(r.get("compiles"))
                if r.get("builds_started") is not None:
                    runs += f" (kilnd builds_started {md_n(r['builds_started'])})"
                if r.get("links") and med(r["links"]):
                    runs += f", + {md_n(r['links'])} links"
                L.append(f"| {r['title']} | {md_s(r['wall_s'], scale=1e3)} | "
                         f"{md_s(r.get('rank_wall_median_s'), scale=1e3)} | {runs} | "
                         f"{fmt_r(ratio(med(r['wall_s']), base))} | {md_other(r)} |")
            ks = [x for r in s["rows"] if r.get("daemon_start_s") for x in r["daemon_start_s"]["values"]]
            if ks:
                L.append("")
                L.append(f"kilnd restart on the 52-entry cache: {fmt_x(statistics.median(ks) * 1e3)} ms "
                         f"(median of {len(ks)}).")
    if "herd" in sc:
        s = sc["herd"]
        if md_head(L, f"**Herd: {s.get('processes')} processes request one new program at the same "
                   "instant**", s, ["row", "wall, s", "compiler runs", "× one plain compile", "others' CPU"]):
            kw = rows_by_name(s["rows"])
            base = med(kw.get("plain", {}).get("wall_s"))
            for r in s["rows"]:
                runs = md_n(r.get("compiles"))
                if r.get("builds_started"):
                    runs += f" (kilnd builds_started {md_n(r['builds_started'])})"
                L.append(f"| {r['title']} | {md_s(r['wall_s'])} | {runs} | "
                         f"{fmt_r(ratio(med(r['wall_s']), base))} | {md_other(r)} |")
            rt = s.get("ratios", {})
            if rt.get("floor_over_plain"):
                L.append("")
                L.append("Against the floor (the compile, then the loads, no tool): " + ", ".join(
                    f"{k.replace('_over_floor', '')} {fmt_r(rt[k])} ×"
                    for k in ("kiln_over_floor", "kiln_used_over_floor", "flock_over_floor")
                    if rt.get(k)) + f"; the floor is {fmt_r(rt['floor_over_plain'])} × one plain compile.")
    if "micro" in sc:
        m = sc["micro"]
        if md_head(L, f"**Warm paths** (bench/microbench, {m.get('rounds_per_rep')} fresh processes per "
                   "side and run; per run the median)", m, ["path", "kiln", "baseline, same run", "ratio"]):
            L.append(f"| get + load of a cached program in a fresh process (`kiln_open`, `kiln_get`, "
                     f"`kiln_sym`), µs | {md_s(m['warm_get_us'])} | one 200-byte Unix socket round trip "
                     f"+ `dlopen`/`dlsym` of the same file: {md_s(m['baseline_us'])} | "
                     f"{md_s(m['ratio_warm_get'])} |")
            if m.get("connect_baseline_us"):
                L.append(f"| the same | {md_s(m['warm_get_us'])} | a fresh connection to a server that "
                         f"sleeps in `accept`, one 200-byte round trip, `dlopen`/`dlsym`: "
                         f"{md_s(m['connect_baseline_us'])} | {md_s(m['ratio_connect'])} |")
            L.append(f"| repeated `kiln_lookup` of a loaded alias, ns per call | {md_s(m['lookup_ns'])} | "
                     f"`dlopen(RTLD_NOLOAD)` + `dlclose` of a loaded object: {md_s(m['noload_ns'])} | "
                     f"{fmt_r(ratio(med(m['lookup_ns']), med(m['noload_ns'])))} |")
            if m.get("socket_round_trip_p50_us"):
                L.append("")
                L.append(f"Machine floor in the same run: a 200-byte Unix socket round trip between two "
                         f"processes takes {md_s(m['socket_round_trip_p50_us'])} µs (p50), "
                         f"{md_s(m['socket_round_trip_p99_us'])} µs (p99).")
    if "throughput" in sc:
        t = sc["throughput"]
        if md_head(L, f"**Throughput: {t.get('clients')} clients × {t.get('ops_per_client')} requests** "
                   f"({t.get('mix')})", t, ["requests/s", "latency p50, µs", "latency p99, µs", "max, µs"]):
            L.append(f"| {md_s(t['ops_per_s'])} | {md_s(t['p50_us'])} | {md_s(t['p99_us'])} | "
                     f"{md_s(t['max_us'])} |")
    if "index" in sc:
        s = sc["index"]
        if md_head(L, "**Index scale** (synthetic entries; caches on tmpfs)", s,
                   ["entries", "deps per entry", "fill, s", "kilnd start after a crash, ms",
                    "after a clean stop, ms", "lookup p50, µs", "lookup p99, µs",
                    "kilnd RSS after the lookups, MiB (peak)"],
                   failed="error" in s and not s.get("sizes")):
            for n, r in s.get("sizes", {}).items():
                if r.get("skipped"):
                    L.append(f"| {n} | skipped: {r['skipped']} | | | | | | |")
                    continue
                if "lookup_p99_us" not in r:
                    continue
                rss = r.get("rss_after_lookups_bytes")
                peak = r.get("rss_peak_bytes")
                L.append(f"| {int(n):,} | {r.get('deps_per_entry')} | {r['fill']['seconds']:.0f} | "
                         f"{md_s(r['daemon_start_after_crash_s'], scale=1e3)} | "
                         f"{md_s(r['daemon_start_after_clean_stop_s'], scale=1e3)} | "
                         f"{md_s(r['lookup_p50_us'])} | {md_s(r['lookup_p99_us'])} | "
                         f"{fmt_x(med(rss) / 2**20) if rss else '-'} ({fmt_x(med(peak) / 2**20) if peak else '-'}) |")
            for n, r in s.get("sizes", {}).items():
                if r.get("deps_reduced"):
                    L.append("")
                    L.append(f"{int(n):,} entries: {r['deps_reduced']}.")
            if "error" in s:
                L.append("")
                L.append(f"FAILED: {s['error']}")
    if "sweep" in sc:
        s = sc["sweep"]
        modes = ["kiln", "xargs", "flock", "session", "ccache"]
        if md_head(L, f"**Sweep: cold wall time (s) vs ranks**, {s.get('programs')} small programs per "
                   f"rank ({fmt_x(s['compile_s_in_xargs']) if s.get('compile_s_in_xargs') else '?'} s per "
                   "compile), identical keys, one run per point", s, ["ranks"] + modes):
            for pt in s["points"]:
                L.append(f"| {pt['ranks']} | " + " | ".join(f"{pt[m]['wall_s']:.2f}" for m in modes) + " |")
    L.append("")
    L.append("\"others' CPU\": the share of the machine's CPU that processes outside the benchmark "
             "used during the runs of a row (busy CPU from /proc/stat minus the CPU time of the "
             "benchmark's own processes); runs of seconds with more than ~10 % were disturbed. In "
             "runs of a few hundred milliseconds it also catches the kernel's own threads working "
             "for the benchmark (process teardown, writeback), so a few % are expected there.")
    L.extend(targets(res))
    return "\n".join(L)


def targets(res):
    """The issue's targets next to this run's figures."""
    sc = res["scenarios"]
    rows = []

    def add(target, measured, ok):
        rows.append(f"| {target} | {measured} | {'yes' if ok else 'no' if ok is not None else '-'} |")

    m = sc.get("micro")
    if m and "error" not in m:
        r = med(m["ratio_warm_get"])
        add("warm get+load in a fresh process ≤ 1.5 × (round trip + bare dlopen)", f"{r:.2f} ×", r <= 1.5)
        x = med(m["lookup_ns"])
        add("process-local repeated lookup ≤ 50 ns", f"{x:.1f} ns", x <= 50)
    h = sc.get("herd")
    if h and "error" not in h:
        kw = rows_by_name(h["rows"])
        c = kw["kiln"].get("compiles")
        r = h["ratios"]["kiln_over_plain"]
        add("herd: exactly 1 compiler run", f"{md_n(c)}", c is not None and c["max"] == 1 and c["min"] == 1)
        fl = h["ratios"].get("floor_over_plain")
        add("herd: wall ≤ 1.2 × one plain compile",
            f"{r:.2f} ×" + (f" (the floor, no tool: {fl:.2f} ×)" if fl else ""), r <= 1.2)
    for key, name in (("cold", "cold 12 × 52"), ("unique", "cold, 25 % rank-unique")):
        c = sc.get(key)
        if not c or "error" in c:
            continue
        kw = rows_by_name(c["rows"])
        comp = kw["kiln"].get("compiles")
        add(f"{name}: compiler runs = distinct keys ({c['distinct_keys']})", md_n(comp),
            comp is not None and comp["max"] == c["distinct_keys"] and comp["min"] == c["distinct_keys"])
        r = c["ratios"]["kiln_over_xargs"]
        add(f"{name}: wall ≤ 1.1 × xargs -P", f"{r:.2f} ×", r <= 1.1)
        for b, want in (("session", "≥ 10 × faster than session mode"), ("flock", "faster than flock"),
                        ("ccache", "faster than ccache")):
            r = c["ratios"].get(f"{b}_over_kiln")
            if r is not None:
                add(f"{name}: {want}", f"{b} / kiln = {r:.2f}", r >= 10 if b == "session" else r > 1)
    w = sc.get("warm")
    if w and "error" not in w:
        kw = rows_by_name(w["rows"])
        for k in ("kiln", "kiln_seq", "kiln_lookup"):
            if k in kw:
                r = ratio(med(kw[k]["wall_s"]), med(kw.get("dlopen", {}).get("wall_s")))
                add(f"warm restart 12 × 52 ({kw[k]['title'].split(': ', 1)[-1]}): wall ≤ 1.3 × bare dlopen",
                    f"{r:.2f} ×", r <= 1.3)
        comp = kw["kiln"].get("compiles")
        add("warm restart: zero compiler runs", md_n(comp), comp is not None and comp["max"] == 0)
    t = sc.get("throughput")
    if t and "error" not in t:
        x = med(t["ops_per_s"])
        add("≥ 20,000 lookups/s with 64 clients", f"{x:,.0f} /s", x >= 20000)
    ix = sc.get("index", {}).get("sizes", {})
    r100 = ix.get("100000")
    if r100 and "daemon_start_after_crash_s" in r100:
        a, b = med(r100["daemon_start_after_crash_s"]), med(r100["daemon_start_after_clean_stop_s"])
        add("daemon start ≤ 200 ms at 100k entries, after a clean stop", f"{b * 1e3:.0f} ms", b <= 0.2)
        add("daemon start ≤ 200 ms at 100k entries, after a crash (full object check)",
            f"{a * 1e3:.0f} ms", a <= 0.2)
    r1m = ix.get("1000000")
    if r1m and "lookup_p99_us" in r1m:
        p = med(r1m["lookup_p99_us"])
        add("lookup p99 ≤ 1 ms at 1M entries", f"{p:.0f} µs", p <= 1000)
        rss = r1m.get("rss_peak_bytes")
        if rss:
            add("daemon RSS ≤ 64 MiB at 1M entries (peak)", f"{med(rss) / 2**20:.1f} MiB",
                med(rss) <= 64 * 2**20)
    if not rows:
        return []
    return ["", "**Targets of the performance issue, against this run**", "",
            "| target | measured (median) | met |", "| --- | --- | --- |"] + rows
