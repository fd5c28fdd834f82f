#!/usr/bin/python3
"""bench/run counts what it says it counts: a small herd (4 processes, one
tiny program, one repetition, no ccache) on this build tree, and the
figures that need no clock: every row made exactly one compiler run (the
counting wrapper's log, kilnd's builds included: bench/ccount.c), kiln's
rows report kilnd's builds of the ranks alone (1, though kilnd's counters
persist and kiln_used's kilnd built another program first), the floor row
ran, and no rank failed. No timing is checked.

usage: check_bench.py SOURCE_ROOT BUILD_DIR; exits 77, saying why, when the
build has no bench programs, or there is no /usr/bin/c++ or no ccache, which
bench/run needs to start (scripts/test installs both: KILN_PACKAGES)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile


def main():
    root, build = sys.argv[1], os.path.abspath(sys.argv[2])
    for p in ("bench/rank", "bench/ccount", "daemon/kilnd", "client/kiln"):
        if not os.access(os.path.join(build, p), os.X_OK):
            print(f"SKIP: {p} is not built in {build}")
            return 77
    if not os.access("/usr/bin/c++", os.X_OK):
        print("SKIP: no /usr/bin/c++ (the bench's compiler)")
        return 77
    if not shutil.which("ccache"):
        print("SKIP: ccache is not installed: bench/run needs it to start (scripts/test "
              "installs it, with every package of KILN_PACKAGES in scripts/common.sh)")
        return 77
    with tempfile.TemporaryDirectory(prefix="kiln-check-bench-") as tmp:
        out = os.path.join(tmp, "r.json")
        argv = ["/usr/bin/python3", os.path.join(root, "bench", "run"), "--no-build",
                "--build-dir", build, "--only", "herd", "--herd", "4", "--reps", "1",
                "--slow-reps", "0", "--stencils", "1", "--work-dir", tmp, "--out", out]
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=600)
        sys.stdout.write(r.stdout[-3000:])
        if r.returncode != 0:
            print(f"FAIL: bench/run exited {r.returncode}")
            return 1
        with open(out) as f:
            herd = json.load(f)["scenarios"]["herd"]
    if "error" in herd:
        print(f"FAIL: the herd scenario failed: {herd['error']}")
        return 1
    rows = {row["name"]: row for row in herd["rows"]}
    bad = []
    for name in ("kiln", "kiln_used", "plain", "floor", "flock"):
        if name not in rows:
            bad.append(f"no {name} row")
            continue
        runs = rows[name]["runs"]
        if [x.get("compiles") for x in runs] != [1]:
            bad.append(f"{name}: compiler runs {[x.get('compiles') for x in runs]}, not [1]")
        if any(x.get("errors") for x in runs):
            bad.append(f"{name}: errors {[x.get('errors') for x in runs]}")
        if name.startswith("kiln") and [x.get("builds_started") for x in runs] != [1]:
            bad.append(f"{name}: kilnd builds_started {[x.get('builds_started') for x in runs]}, "
                       "not [1]")
    if not herd["ratios"].get("floor_over_plain"):
        bad.append("no floor_over_plain ratio")
    for b in bad:
        print("FAIL:", b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
