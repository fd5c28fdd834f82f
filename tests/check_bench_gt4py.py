#!/usr/bin/python3
"""bench/gt4py's granule pattern runs (client/python/tests/gt4py_granule.py):
one rank, one icon4py stencil (calculate_nabla2_for_w) in its 2 static
variants on a tiny grid, compiled ahead of time with kiln.gt4py on a fresh
kilnd, both variants checked against NumPy by the rank. Checked here, with no
clock: the rank succeeded, lowered each variant once (2 lowerings), kilnd
built something, the JSON has the row. The vendored DaCe and GT4Py are
unpacked as py_gt4py does (client/python/tests/run.py).

usage: check_bench_gt4py.py SOURCE_ROOT BUILD_DIR; exits 77, saying why, when
the vendored GT4Py, its Debian packages or a compiler are absent. Under
AddressSanitizer it restarts with the runtime preloaded (run.asan_restart)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile


def main():
    root, build = sys.argv[1], os.path.abspath(sys.argv[2])
    for p in ("daemon/kilnd", "client/kiln", "client/libkiln.so.0"):
        if not os.path.exists(os.path.join(build, p)):
            print(f"SKIP: {p} is not built in {build}")
            return 77
    sys.path.insert(0, os.path.join(root, "client", "python", "tests"))
    import run   # py_gt4py's unpacking of the vendored DaCe and GT4Py
    sanitize = os.environ.get("KILN_TEST_SANITIZE", "none")
    if "thread" in sanitize:
        print("SKIP: libkiln is built with ThreadSanitizer, which python3 cannot load")
        return 77
    if "address" in sanitize and not os.environ.get("KILN_TEST_ASAN_PRELOADED"):
        # The ranks load an instrumented libkiln: this process restarts
        # with the ASan runtime preloaded, as py_gt4py does, and the ranks
        # inherit it.
        print("SKIP:", run.asan_restart(os.environ["KILN_LIBRARY"]))
        return 77
    why = run.gt4py_setup()
    if why:
        print(f"SKIP: {why}")
        return 77
    unpacked = os.environ["KILN_TEST_DACE_DIR"]
    try:
        with tempfile.TemporaryDirectory(prefix="kiln-check-gt4py-") as tmp:
            out = os.path.join(tmp, "r.json")
            argv = ["/usr/bin/python3", os.path.join(root, "bench", "gt4py"),
                    "--gt4py", unpacked, "--build-dir", build, "--ranks", "1",
                    "--only", "gt4py-kiln-cold", "--programs", "nabla2_for_w",
                    "--variants", "2", "--sizes", "8,12,3", "--json", out]
            r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, timeout=600)
            sys.stdout.write(r.stdout[-3000:])
            if r.returncode != 0:
                print(f"FAIL: bench/gt4py exited {r.returncode}")
                return 1
            with open(out) as f:
                rows = json.load(f)["rows"]
    finally:
        shutil.rmtree(unpacked, ignore_errors=True)
    bad = []
    if [row["scenario"] for row in rows] != ["gt4py-kiln-cold"]:
        bad.append(f"rows {[row['scenario'] for row in rows]}, not [gt4py-kiln-cold]")
    else:
        row = rows[0]
        if row["lowerings"] != 2:
            bad.append(f"{row['lowerings']} lowerings, not 2 (one per static variant)")
        if not row["kilnd_builds"]:
            bad.append("kilnd built nothing")
        if row["init_max_s"] is None or row["init_max_s"] <= 0:
            bad.append(f"no init time: {row['init_max_s']}")
    for b in bad:
        print("FAIL:", b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
