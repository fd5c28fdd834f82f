"""The benchmark harness: class Bench, which owns the work directory, the
counting compiler wrapper, every kilnd it starts (start, status, stop) and
every rank process (started together behind one barrier, killed with their
process groups), runs the kiln mode, and cleans up."""
import json
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time

from .baselines import Baselines
from .common import (FLAGS, BenchError, cpu_busy_s, log, own_cpu_s, proc_cpu_s,
                     read_cc_log)


class Bench(Baselines):
    """One bench/run's work directory, kilnd processes and rank processes."""

    def __init__(self, args, paths):
        self.args = args
        self.p = paths
        self.daemons = {}   # pid -> socket
        self.procs = []     # live Popen objects (own process groups)
        self.counter = 0
        if args.work_dir:
            # Absolute: the counting wrapper's log is named to kilnd by path
            # (KILN_OBSERVE_IGNORE takes absolute paths only).
            wd = os.path.abspath(args.work_dir)
            os.makedirs(wd, exist_ok=True)
            self.work = tempfile.mkdtemp(prefix="kb-", dir=wd)
        else:
            self.work = tempfile.mkdtemp(prefix="kb-", dir="/tmp")
        os.chmod(self.work, 0o700)
        self.bin = os.path.join(self.work, "bin")
        os.makedirs(self.bin)
        self.cxx = os.path.join(self.bin, "c++")
        shutil.copy2(paths["ccount"], self.cxx)
        self.real_cxx = os.path.realpath("/usr/bin/c++")
        self.ccache = shutil.which("ccache")
        self.stderr_log = open(os.path.join(self.work, "stderr.log"), "a")
        self.scale_dirs = []
        self.daemon_cpu = 0.0  # CPU seconds of the kilnd processes stopped so far

    def mark(self):
        return (time.monotonic(), cpu_busy_s(), own_cpu_s(), self.daemon_cpu)

    def other_cpu(self, m0):
        """The CPU time the rest of the machine used since mark m0: busy CPU
        minus this benchmark's own processes (ranks, compilers, kilnd), as a
        fraction of the CPU available. Above ~0.1 someone else was busy."""
        t, busy, own, dcpu = self.mark()
        other = (busy - m0[1]) - (own - m0[2]) - (dcpu - m0[3])
        avail = (t - m0[0]) * (os.cpu_count() or 1)
        return {"other_cpu_s": round(other, 2),
                "other_cpu_frac": round(other / avail, 3) if avail > 0 else None}

    # -- paths and environment

    def newdir(self, tag):
        self.counter += 1
        d = os.path.join(self.work, f"{tag}{self.counter}")
        os.makedirs(d)
        return d

    def env(self, cclog=None, **extra):
        e = dict(os.environ)
        e["KILN_BENCH_REAL_CXX"] = self.real_cxx
        e.pop("KILN_BENCH_CC_LOG", None)
        if cclog:
            e["KILN_BENCH_CC_LOG"] = cclog
        # The counting wrapper's own variable and log change from run to run
        # and are no input of the build: kiln-observe.so leaves them out.
        # kilnd passes this list to its compilers, and no other KILN_*
        # variable, so the wrapper finds its log there (bench/ccount.c).
        e["KILN_OBSERVE_IGNORE"] = "KILN_BENCH_CC_LOG" + (":" + cclog if cclog else "")
        for k in ("KILN_SOCKET", "KILN_CACHE_DIR", "KILN_AUTOSPAWN", "CCACHE_DIR"):
            e.pop(k, None)
        e.update(extra)
        return e

    # -- kilnd

    def kilnd_start(self, cache, sock, cclog=None):
        argv = [self.p["kilnd"], "--socket", sock, "--cache-dir", cache, "--daemonize",
                "--jobs", str(self.args.jobs), "--toolchain", f"c++={self.cxx}"]
        argv += self.args.kilnd_arg
        if cclog:
            # The counting wrapper appends to its log: kilnd confines
            # compilers to their build directory otherwise.
            os.makedirs(os.path.dirname(cclog), exist_ok=True)
            argv += ["--allow-write", os.path.dirname(cclog)]
        t0 = time.monotonic()
        r = subprocess.run(argv, env=self.env(cclog), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=900)
        dt = time.monotonic() - t0
        if r.returncode != 0:
            raise BenchError(f"kilnd did not start: {r.stderr.strip()}")
        try:
            pid = int(r.stdout.strip().split()[-1])
        except (ValueError, IndexError):
            raise BenchError(f"kilnd --daemonize printed {r.stdout!r}, not a pid")
        self.daemons[pid] = sock
        return pid, dt

    def kiln_json(self, sock, *cmd):
        r = subprocess.run([self.p["kiln"], "--socket", sock, "--json", *cmd],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
        if r.returncode != 0:
            raise BenchError(f"kiln {' '.join(cmd)}: {r.stderr.strip()}")
        return json.loads(r.stdout)

    def kilnd_stop(self, pid, kill=False):
        """Stops kilnd (kiln stop; kill: SIGKILL at once, as a crash would);
        returns the seconds until the process was gone."""
        sock = self.daemons.pop(pid, None)
        cpu_before = proc_cpu_s(pid)
        t0 = time.monotonic()
        if kill:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        elif sock is not None:
            subprocess.run([self.p["kiln"], "--socket", sock, "stop"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=120)
        for sig, wait in ((None, 60), (signal.SIGTERM, 10), (signal.SIGKILL, 5)):
            if sig is not None:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    self.daemon_cpu += cpu_before
                    return time.monotonic() - t0
                log(f"kilnd {pid} still running; sent {signal.Signals(sig).name}")
            end = time.monotonic() + wait
            while time.monotonic() < end:
                if not os.path.exists(f"/proc/{pid}") or self._zombie(pid):
                    self.daemon_cpu += cpu_before
                    return time.monotonic() - t0
                time.sleep(0.01)
        self.daemon_cpu += cpu_before
        return time.monotonic() - t0

    @staticmethod
    def _zombie(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            return True

    # -- ranks

    def run_ranks(self, argvs, env, timeout=3600, during=None):
        """Starts one process per argv, waits until all are set up, releases
        them at once, waits for all. Returns (t0, [json per rank], failures).
        With during (a function), the ranks also get --go: once released
        they wait until during() has returned (bench/rank.c)."""
        r_ready = w_ready = r_bar = w_bar = r_go = w_go = -1
        procs = []
        try:
            r_ready, w_ready = os.pipe()
            r_bar, w_bar = os.pipe()
            if during:
                r_go, w_go = os.pipe()
            for argv in argvs:
                extra = ["--go", str(r_go)] if during else []
                fds = (w_ready, r_bar, r_go) if during else (w_ready, r_bar)
                p = subprocess.Popen(argv + ["--ready", str(w_ready), "--barrier", str(r_bar)] + extra,
                                     pass_fds=fds, stdout=subprocess.PIPE,
                                     stderr=self.stderr_log, env=env, start_new_session=True,
                                     text=True)
                procs.append(p)
                self.procs.append(p)
            os.close(w_ready)
            w_ready = -1
            os.close(r_bar)
            r_bar = -1
            if during:
                os.close(r_go)
                r_go = -1
            got = 0
            while got < len(argvs):
                b = os.read(r_ready, 4096)
                if not b:
                    break
                got += len(b)
            t0 = time.monotonic()
            os.close(w_bar)
            w_bar = -1
            if during:
                during()
                os.close(w_go)
                w_go = -1
            deadline = time.monotonic() + timeout
            out, failures = [], 0
            for p in procs:
                try:
                    so, _ = p.communicate(timeout=max(1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    raise BenchError(f"ranks ran past {timeout} s")
                if p.returncode != 0:
                    failures += 1
                for line in so.splitlines():
                    if line.startswith("{"):
                        out.append(json.loads(line))
            return t0, out, failures
        finally:
            for fd in (w_ready, r_bar, w_bar, r_ready, r_go, w_go):
                if fd >= 0:
                    os.close(fd)
            for p in procs:
                self._kill(p)

    def _kill(self, p):
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        if p in self.procs:
            self.procs.remove(p)

    def rank_argv(self, mode, lst, r, **kw):
        a = [self.p["rank"], "--mode", mode, "--list", lst, "--rank", str(r)]
        for f in FLAGS:
            a += ["--flag", f]
        for k, v in kw.items():
            if v is True:
                a.append("--" + k)
            elif v is not None:
                a += (["-j", str(v)] if k == "j" else ["--" + k, str(v)])
        return a

    def summarize_ranks(self, t0, outs, failures, nranks):
        ends = [o["end"] for o in outs]
        walls = sorted(o["wall_s"] for o in outs)
        errors = sum(o.get("errors", 0) for o in outs) + failures + (nranks - len(outs))
        return {
            "wall_s": (max(ends) - t0) if ends else None,
            # From the release: the first rank to end, and the spread of
            # the ends (a rank's own wall starts when it woke, later).
            "first_end_s": (min(ends) - t0) if ends else None,
            "tail_s": (max(ends) - min(ends)) if ends else None,
            "rank_wall_median_s": statistics.median(walls) if walls else None,
            "rank_wall_max_s": walls[-1] if walls else None,
            "rank_wall_min_s": walls[0] if walls else None,
            "errors": errors,
            "rank_compiled": sum(o.get("compiled", 0) for o in outs),
            "kiln_requests": sum(o.get("requests", 0) for o in outs),
            "kiln_local_hits": sum(o.get("local_hits", 0) for o in outs),
            "kiln_loads": sum(o.get("loads", 0) for o in outs),
        }

    # -- one run of each mode

    def wait_prewarm(self, sock, timeout_s=30.0):
        """Until kilnd's prewarm (its check of the most recently used
        entries, docs/design.md "Prewarm") is done: as a job's ranks come
        seconds after the prologue started kilnd. Its status figures."""
        end = time.monotonic() + timeout_s
        while True:
            pw = self.kiln_json(sock, "status").get("prewarm") or {}
            if pw.get("state") in ("done", "off", None) or time.monotonic() > end:
                return pw
            time.sleep(0.02)

    def run_kiln(self, lists, j=None, lookup=False, many=False, cache=None, cclog_tag="kiln",
                 prewarm=True, seed_src=None):
        """kiln mode. cache None: a fresh cache (cold); else that cache, with
        kilnd restarted on it (warm); the ranks start once kilnd's prewarm
        is done unless prewarm is False (then at once, racing it). seed_src:
        a source kilnd builds (kiln build, the ranks' flags) before the
        ranks start, not measured: a kilnd that has built before."""
        d = self.newdir(cclog_tag)
        cclog = os.path.join(d, "cc.log")
        fresh = cache is None
        cache = cache or os.path.join(d, "cache")
        sock = os.path.join(d, "s")
        pid, start_s = self.kilnd_start(cache, sock, cclog)
        pw = {}
        try:
            if prewarm and not fresh:
                pw = self.wait_prewarm(sock)
            if seed_src is not None:
                self.kiln_json(sock, "build", seed_src, "--", *FLAGS)
                # Its compiler run is not the ranks'.
                if os.path.exists(cclog):
                    os.unlink(cclog)
            argvs = [self.rank_argv("kiln", lst, r, socket=sock, j=j, lookup=lookup or None,
                                    many=many or None)
                     for r, lst in enumerate(lists)]
            # kilnd's counters are kept in its cache across restarts: the
            # ranks' share is the difference.
            st0 = self.kiln_json(sock, "status")
            t0, outs, failures = self.run_ranks(argvs, self.env())
            st = self.kiln_json(sock, "status")
            st = {k: st[k] - st0.get(k, 0) for k in ("builds_started", "joined", "hits", "misses")
                  if isinstance(st.get(k), int)}
        finally:
            self.kilnd_stop(pid)
        res = self.summarize_ranks(t0, outs, failures, len(lists))
        res.update(read_cc_log(cclog))
        res.update({"builds_started": st.get("builds_started"), "joined": st.get("joined"),
                    "hits": st.get("hits"), "misses": st.get("misses"),
                    "daemon_start_s": start_s, "cache": cache,
                    "prewarm_wall_ms": pw.get("wall_ms"), "prewarm_loop_ms": pw.get("loop_ms"),
                    "prewarm_ready": pw.get("ready")})
        return res

    # -- cleanup

    def cleanup(self, outdir=None):
        for p in list(self.procs):
            self._kill(p)
        for pid in list(self.daemons):
            try:
                self.kilnd_stop(pid)
            except Exception as e:  # noqa: BLE001 - cleanup must go on
                log(f"stopping kilnd {pid}: {e}")
        self.stderr_log.close()
        if outdir:
            # The ranks' and tools' stderr, for a look after the work
            # directory is gone.
            shutil.copy(self.stderr_log.name, os.path.join(outdir, "stderr.log"))
        for d in self.scale_dirs:
            shutil.rmtree(d, ignore_errors=True)
        if self.args.keep:
            log(f"work directory kept: {self.work}")
        else:
            shutil.rmtree(self.work, ignore_errors=True)
