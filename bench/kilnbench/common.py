"""What every part of bench/run shares: the paths and constants, the log,
BenchError, the statistics helpers (stat, med, ratio, percentile), parse_list,
rows_by_name (scenarios and report), the machine (machine_info, memory, CPU
time from /proc) and the compiler wrapper's log (read_cc_log)."""
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

# bench/, where bench/run and bench/gen.py are; the source tree above it.
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(HERE)

FLAGS = ["-O2"]
SOURCE_EXT = (".c", ".cc", ".cpp", ".cxx", ".C")
SCENARIOS = ["cold", "unique", "warm", "herd", "micro", "throughput", "index", "sweep"]
T_START = time.monotonic()


def log(msg):
    el = time.monotonic() - T_START
    print(f"[{int(el // 60):3d}:{int(el % 60):02d}] {msg}", file=sys.stderr, flush=True)


class BenchError(Exception):
    pass


def stat(values):
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals),
            "n": len(vals), "values": vals}


def med(s):
    return None if s is None else s["median"]


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def percentile(sorted_vals, p):
    if not sorted_vals:
        return None
    i = min(len(sorted_vals) - 1, int(len(sorted_vals) * p))
    return sorted_vals[i]


def parse_list(s, conv=int):
    return [conv(x) for x in s.split(",") if x.strip()]


def rows_by_name(rows):
    return {r["name"]: r for r in rows}


def machine_info():
    info = {"hostname": platform.node(), "kernel": platform.release(),
            "cpus": os.cpu_count(), "python": platform.python_version()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    info["mem_gib"] = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    try:
        with open("/etc/debian_version") as f:
            info["debian"] = f.read().strip()
    except OSError:
        pass
    for tool, argv in (("cxx", ["/usr/bin/c++", "--version"]), ("ccache", ["ccache", "--version"])):
        try:
            info[tool] = subprocess.run(argv, stdout=subprocess.PIPE, text=True).stdout.split("\n")[0]
        except OSError:
            info[tool] = None
    try:
        info["kiln_commit"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"],
                                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                             text=True).stdout.strip() or None
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
        info["kiln_tree_modified"] = bool(dirty.strip())
    except OSError:
        pass
    return info


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable"):
                return int(line.split()[1]) * 1024
    return 0


def proc_status(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM"):
                    out[k] = int(v.split()[0]) * 1024
    except OSError:
        pass
    return out


CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_busy_s():
    """CPU seconds the whole machine spent busy (not idle, not iowait)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / CLK_TCK


def own_cpu_s():
    """CPU seconds of this script and every descendant it has waited for."""
    a = resource.getrusage(resource.RUSAGE_CHILDREN)
    b = resource.getrusage(resource.RUSAGE_SELF)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def proc_cpu_s(pid):
    """utime+stime+cutime+cstime of pid (its waited-for children included)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            v = f.read().rsplit(")", 1)[1].split()
        return sum(int(x) for x in v[11:15]) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return 0.0


# ---------------------------------------------------------------- compiler log

def read_cc_log(path):
    """Classifies the wrapper's log: compiles (a source and no -E),
    preprocess runs (-E), links (-shared and no source), probes (the rest,
    e.g. --version). Also the largest number of compiles that overlapped and
    their mean duration."""
    res = {"compiles": 0, "preprocess": 0, "links": 0, "probes": 0, "failed": 0,
           "max_parallel_compiles": 0, "mean_compile_s": None}
    if not os.path.exists(path):
        return res
    intervals = []
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 4:
                continue
            start, end, code, argv = float(parts[1]), float(parts[2]), int(parts[3]), parts[4:]
            if code != 0:
                res["failed"] += 1
            has_src = any(a.endswith(SOURCE_EXT) and not a.startswith("-") for a in argv)
            if "-E" in argv:
                res["preprocess"] += 1
            elif has_src:
                res["compiles"] += 1
                intervals.append((start, end))
            elif "-shared" in argv:
                res["links"] += 1
            else:
                res["probes"] += 1
    if intervals:
        ev = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
        cur = best = 0
        for _, d in ev:
            cur += d
            best = max(best, cur)
        res["max_parallel_compiles"] = best
        res["mean_compile_s"] = sum(e - s for s, e in intervals) / len(intervals)
    return res
