"""The baseline modes that kiln is measured against: session, flock and
ccache (rank processes, run_baseline), bare dlopen of kiln's artifacts,
xargs -P of the distinct programs, one plain compile, and the herd's floor
(one plain compile, then processes that load it). A mixin of Bench
(harness.py), whose work directory, environment and rank processes they use."""
import os
import subprocess
import time

from .common import FLAGS, BenchError, read_cc_log


class Baselines:
    """Bench's baseline modes; each returns one run's figures (a dict)."""

    def run_baseline(self, mode, lists, ccache_dir=None, shared_dir=None):
        d = self.newdir(mode)
        cclog = os.path.join(d, "cc.log")
        extra = {}
        if mode == "ccache":
            extra["CCACHE_DIR"] = ccache_dir or os.path.join(d, "ccache")
            os.makedirs(extra["CCACHE_DIR"], exist_ok=True)
            subprocess.run([self.ccache, "--zero-stats"], env=self.env(**extra),
                           stdout=subprocess.DEVNULL)
        argvs = []
        for r, lst in enumerate(lists):
            if mode == "flock":
                wd = shared_dir or os.path.join(d, "shared")
            else:
                wd = os.path.join(d, f"r{r}")
            os.makedirs(wd, exist_ok=True)
            kw = {"dir": wd, "cxx": self.cxx}
            if mode == "ccache":
                kw["ccache"] = self.ccache
            argvs.append(self.rank_argv(mode, lst, r, **kw))
        t0, outs, failures = self.run_ranks(argvs, self.env(cclog, **extra))
        res = self.summarize_ranks(t0, outs, failures, len(lists))
        res.update(read_cc_log(cclog))
        if mode == "ccache":
            res["ccache_dir"] = extra["CCACHE_DIR"]
            res["ccache_stats"] = self.ccache_stats(extra["CCACHE_DIR"])
        return res

    def ccache_stats(self, cdir):
        r = subprocess.run([self.ccache, "--print-stats"], env=self.env(CCACHE_DIR=cdir),
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        st = {}
        for line in r.stdout.splitlines():
            k, _, v = line.partition("\t")
            if k in ("direct_cache_hit", "preprocessed_cache_hit", "cache_miss"):
                st[k] = int(v)
        return st

    def run_dlopen(self, lists):
        argvs = [self.rank_argv("dlopen", lst, r) for r, lst in enumerate(lists)]
        t0, outs, failures = self.run_ranks(argvs, self.env())
        res = self.summarize_ranks(t0, outs, failures, len(lists))
        res.update({"compiles": 0, "links": 0})
        return res

    def rank_has_go(self):
        """Whether this build's bench/rank takes --go (older ones, which
        bench/compare may run, do not: they have no floor row)."""
        r = subprocess.run([self.p["rank"], "--mode", "dlopen", "--list", "/dev/null", "--go", "-1"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return r.returncode == 0

    def run_floor(self, src, sym, n):
        """The herd's floor: n processes released at once wait while one
        plain compile (as plain_compile) makes the program, then each loads
        it (dlopen, dlsym, call), with no tool between them. Timed like
        the herd's other rows: from the release to the last rank's end."""
        d = self.newdir("floor")
        cclog = os.path.join(d, "cc.log")
        so = os.path.join(d, "p.so")
        lst = os.path.join(d, "floor.tsv")
        with open(lst, "w") as f:
            f.write(f"{sym}\tfloor\t{so}\tfloor\n")
        argvs = [self.rank_argv("dlopen", lst, r) for r in range(n)]

        def compile_once():
            try:
                r = subprocess.run([self.cxx, *FLAGS, "-fPIC", "-shared", "-o", so, src],
                                   env=self.env(cclog), stderr=self.stderr_log, timeout=900)
            except (OSError, subprocess.TimeoutExpired) as e:
                raise BenchError(f"floor: the plain compile: {e}")
            if r.returncode != 0:
                # Ranks that cannot load would make a fast floor.
                raise BenchError(f"floor: the plain compile exited {r.returncode}")

        t0, outs, failures = self.run_ranks(argvs, self.env(), during=compile_once)
        res = self.summarize_ranks(t0, outs, failures, n)
        res.update(read_cc_log(cclog))
        return res

    def run_xargs(self, distinct):
        d = self.newdir("xargs")
        cclog = os.path.join(d, "cc.log")
        lst = os.path.join(d, "list")
        with open(lst, "w") as f:
            for cid, src in sorted(distinct.items()):
                f.write(f"{os.path.join(d, cid + '.so')} {src}\n")
        argv = ["xargs", "-P", str(self.args.jobs), "-L", "1", self.cxx, *FLAGS, "-fPIC",
                "-shared", "-o"]
        with open(lst) as stdin:
            t0 = time.monotonic()
            r = subprocess.run(argv, stdin=stdin, env=self.env(cclog), stderr=self.stderr_log)
            wall = time.monotonic() - t0
        res = {"wall_s": wall, "errors": 0 if r.returncode == 0 else 1}
        res.update(read_cc_log(cclog))
        return res

    def plain_compile(self, src):
        d = self.newdir("plain")
        cclog = os.path.join(d, "cc.log")
        t0 = time.monotonic()
        r = subprocess.run([self.cxx, *FLAGS, "-fPIC", "-shared", "-o", os.path.join(d, "p.so"), src],
                           env=self.env(cclog), stderr=self.stderr_log)
        wall = time.monotonic() - t0
        res = {"wall_s": wall, "errors": 0 if r.returncode == 0 else 1}
        res.update(read_cc_log(cclog))
        return res
