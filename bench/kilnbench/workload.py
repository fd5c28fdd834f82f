"""The workload: calibrating the programs' size to a compile time, generating
them with bench/gen.py (time_compile, calibrate, make_workload), and rotate,
the row order of a repetition."""
import os
import statistics
import subprocess
import sys
import time

from .common import FLAGS, HERE, log

# bench/gen.py stays a standalone script next to bench/run.
if HERE not in sys.path:
    sys.path.insert(0, HERE)
import gen  # noqa: E402


def time_compile(bench, src, n=3):
    out = os.path.join(bench.work, "cal.so")
    ts = []
    for _ in range(n):
        t0 = time.monotonic()
        subprocess.run([bench.cxx, *FLAGS, "-fPIC", "-shared", "-o", out, src],
                       env=bench.env(), check=True, stderr=bench.stderr_log)
        ts.append(time.monotonic() - t0)
    return statistics.median(ts)


def calibrate(bench, target, outdir):
    """Finds the number of stencils K for which one compile of a typical
    program takes `target` seconds."""
    hist = []
    k = 8
    seen = {}
    for _ in range(6):
        text = gen.program_source("cal", k, seed="calibration")
        _, src = gen.write_source(outdir, f"cal{k}", text)
        t = time_compile(bench, src)
        hist.append({"stencils": k, "compile_s": round(t, 3), "source_bytes": len(text)})
        seen[k] = t
        log(f"calibration: {k} stencils -> {t:.2f} s per compile")
        if abs(t - target) / target < 0.08:
            break
        # Proportional step on the part above a ~0.07 s fixed cost.
        base = 0.07
        k_new = max(1, round(k * max(0.01, target - base) / max(0.01, t - base)))
        if k_new in seen:
            # Oscillating: take the closest seen.
            k_new = min(seen, key=lambda x: abs(seen[x] - target))
            k = k_new
            break
        k = k_new
    best = min(seen, key=lambda x: abs(seen[x] - target))
    return best, hist


def make_workload(outdir, nprogs, k, ranks, unique_frac, outlier, prefix="p", salt=""):
    w = gen.generate(outdir, nprogs, k, ranks, unique_frac, outlier, prefix=prefix, salt=salt)
    os.makedirs(outdir, exist_ok=True)
    w["lists"] = gen.write_lists(outdir, w)
    sizes = [os.path.getsize(p) for p in w["distinct"].values()]
    w["source_bytes"] = {"min": min(sizes), "median": statistics.median(sizes),
                         "max": max(sizes), "total": sum(sizes)}
    return w


def rotate(items, i):
    i %= len(items)
    return items[i:] + items[:i]
