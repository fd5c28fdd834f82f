"""
Runs the Python binding's tests under meson test (test py_kiln): exits 77
(skipped), saying why, when they cannot run here, and otherwise with pytest's
status. In a build with AddressSanitizer, libkiln needs the ASan runtime
loaded before anything else, which an uninstrumented python3 does not do:
this script restarts itself with libasan in LD_PRELOAD.
"""

import os
import re
import shutil
import subprocess
import sys

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))


def skip(why):
    print("%s skipped: %s" % ("py_dace" if "--dace" in sys.argv[1:] else "py_kiln", why),
          flush=True)
    return SKIP


def needed_runtime(lib, pattern):
    """The path of the library of libkiln's dependencies that matches
    pattern (per ldd), or None."""
    try:
        out = subprocess.run(["ldd", lib], capture_output=True, text=True, check=False).stdout
    except OSError:
        return None
    for line in out.splitlines():
        m = re.match(r"\s*(\S+)\s+=>\s+(\S+)", line)
        if m and re.search(pattern, m.group(1)):
            return m.group(2)
    return None


def asan_restart(lib):
    """Restarts with the ASan runtime preloaded; returns only on failure
    (a reason to skip)."""
    runtime = needed_runtime(lib, r"^libasan\.so")
    if runtime is None:
        return "libkiln is built with AddressSanitizer, but without a shared libasan " \
               "to preload into python3 (clang's static runtime?)"
    env = dict(os.environ)
    # kilnd, started by the tests, keeps the caller's options (leak
    # checking included); python3 itself is not instrumented and "leaks"
    # by design, so leak checking is off in this process and its children.
    env["KILN_TEST_KILND_ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "")
    opts = [o for o in os.environ.get("ASAN_OPTIONS", "").split(":")
            if o and not o.startswith("detect_leaks=")]
    env["ASAN_OPTIONS"] = ":".join(opts + ["detect_leaks=0"])
    env["LD_PRELOAD"] = " ".join(filter(None, [runtime, os.environ.get("LD_PRELOAD")]))
    env["KILN_TEST_ASAN_PRELOADED"] = "1"
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable] + sys.argv, env)
    return "could not restart python3"  # not reached


DACE_MODULES = ("numpy", "sympy", "networkx", "ply", "astunparse", "dill", "yaml",
                "packaging", "ordered_set")


def dace_setup():
    """For the py_dace test: unpacks the vendored DaCe (KILN_TEST_DACE_TARBALL,
    ../shared/vendor/dace of the source tree) into a temporary directory and
    puts it on the module path of this process and its children. Returns
    None, or why it cannot run here."""
    import importlib
    import tarfile
    import tempfile

    tarball = os.environ.get("KILN_TEST_DACE_TARBALL", "")
    if not tarball or not os.path.exists(tarball):
        return "the vendored DaCe (%s) is absent" % (tarball or "KILN_TEST_DACE_TARBALL unset")
    missing = []
    for m in DACE_MODULES:
        try:
            importlib.import_module(m)
        except ImportError:
            missing.append(m)
    if missing:
        return ("DaCe needs Python modules missing here: %s (see ../shared/vendor/dace/"
                "README.md for the Debian packages)" % ", ".join(missing))
    if not shutil.which("c++"):
        return "no c++ compiler"
    into = tempfile.mkdtemp(prefix="kiln-dace-")
    with tarfile.open(tarball) as t:
        t.extractall(into)
    paths = [into, os.path.join(os.path.dirname(tarball), "ml_dtypes-standin")]
    sys.path[:0] = paths
    os.environ["PYTHONPATH"] = os.pathsep.join(paths + [os.environ.get("PYTHONPATH", "")])
    os.environ["KILN_TEST_DACE_DIR"] = into
    return None


def gt4py_setup():
    """For the py_gt4py test: the vendored DaCe (dace_setup), then the
    vendored GT4Py, its pure-Python dependencies and icon4py's diffusion
    stencils (KILN_TEST_GT4PY_DIR, ../shared/vendor/gt4py) unpacked beside
    it. Returns None, or why it cannot run here."""
    import glob
    import subprocess
    import tarfile

    why = dace_setup()
    if why:
        return why
    src = os.environ.get("KILN_TEST_GT4PY_DIR", "")
    tarballs = sorted(glob.glob(os.path.join(src, "*.tar.gz"))) if src else []
    if not tarballs:
        return "the vendored GT4Py (%s) is absent" % (src or "KILN_TEST_GT4PY_DIR unset")
    into = os.environ["KILN_TEST_DACE_DIR"]
    for t in tarballs:
        with tarfile.open(t) as tf:
            tf.extractall(into)
    p = subprocess.run([sys.executable, "-c", "import gt4py.next"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        last = (p.stdout.strip().splitlines() or ["?"])[-1]
        return ("GT4Py does not import here: %s (../shared/vendor/gt4py/README.md lists the "
                "Debian packages)" % last)
    return None


def main():
    for var in ("KILN_LIBRARY", "KILN_TEST_KILND"):
        if not os.environ.get(var):
            return skip("%s is not set; run the tests through meson test" % var)
    try:
        import pytest
    except ImportError:
        return skip("pytest is not installed for %s (Debian: apt-get install python3-pytest)"
                    % sys.executable)
    sanitize = os.environ.get("KILN_TEST_SANITIZE", "none")
    if "thread" in sanitize:
        return skip("libkiln is built with ThreadSanitizer, which python3 cannot load")
    if "address" in sanitize and not os.environ.get("KILN_TEST_ASAN_PRELOADED"):
        why = asan_restart(os.environ["KILN_LIBRARY"])
        return skip(why)
    # Nothing of the user's own daemon may leak into the tests.
    for var in ("KILN_SOCKET", "KILN_AUTOSPAWN", "KILN_KILND", "KILN_CACHE_DIR"):
        os.environ.pop(var, None)
    if os.environ.get("KILN_TEST_ASAN_PRELOADED"):
        print("py_kiln: libkiln has AddressSanitizer; python3 runs with LD_PRELOAD=%s"
              % os.environ.get("LD_PRELOAD"), flush=True)
    if "--gt4py" in sys.argv[1:]:
        why = gt4py_setup()
        if why:
            return skip(why)
        targets = [os.path.join(HERE, "test_gt4py.py")]
    elif "--dace" in sys.argv[1:]:
        why = dace_setup()
        if why:
            return skip(why)
        targets = [os.path.join(HERE, "test_dace.py")]
    else:
        targets = [HERE, "--ignore", os.path.join(HERE, "test_dace.py"),
                   "--ignore", os.path.join(HERE, "test_gt4py.py")]
    # KILN_TEST_K: only the tests pytest's -k expression selects.
    if os.environ.get("KILN_TEST_K"):
        targets += ["-k", os.environ["KILN_TEST_K"]]
    rc = pytest.main(["-v", "-p", "no:cacheprovider", "--rootdir", HERE] + targets)
    if rc == pytest.ExitCode.NO_TESTS_COLLECTED:
        print("py_kiln: pytest collected no tests", flush=True)
        return 1
    return int(rc)


if __name__ == "__main__":
    sys.exit(main())
