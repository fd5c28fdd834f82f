"""Building kiln for the benchmark: meson setup and ninja in the build
directory, and the paths of the binaries bench/run needs from it."""
import json
import os
import subprocess
import sys

from .common import ROOT, BenchError, log


def build(args):
    bd = os.path.abspath(os.path.join(ROOT, args.build_dir))
    if not args.no_build:
        if not os.path.exists(os.path.join(bd, "build.ninja")):
            log(f"meson setup {bd} (--buildtype {args.buildtype})")
            subprocess.run(["meson", "setup", bd, "--buildtype", args.buildtype,
                            "-Dtests=disabled"], cwd=ROOT, check=True,
                           stdout=subprocess.DEVNULL)
        log(f"ninja -C {bd}")
        r = subprocess.run(["ninja", "-C", bd], cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            sys.stderr.write(r.stdout[-4000:])
            raise BenchError("the build failed")
    paths = {
        "kilnd": os.path.join(bd, "daemon", "kilnd"),
        "kiln": os.path.join(bd, "client", "kiln"),
        "rank": os.path.join(bd, "bench", "rank"),
        "ccount": os.path.join(bd, "bench", "ccount"),
        "scale": os.path.join(bd, "bench", "scale"),
        "microbench": os.path.join(bd, "bench", "microbench"),
    }
    for k, p in paths.items():
        if not os.access(p, os.X_OK):
            raise BenchError(f"{p} is missing; build {bd} first")
    buildtype = None
    try:
        with open(os.path.join(bd, "meson-info", "intro-buildoptions.json")) as f:
            for o in json.load(f):
                if o.get("name") == "buildtype":
                    buildtype = o.get("value")
    except (OSError, ValueError):
        pass
    return bd, paths, buildtype
