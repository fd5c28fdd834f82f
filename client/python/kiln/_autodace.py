"""
The opt-in without touching code: with KILN_DACE=1 or KILN_GT4PY=1 in the
environment, the kiln-dace.pth file installed beside the package imports
this module at Python's start-up, and it installs kiln.dace as soon as
DaCe's compiler module is imported, and kiln.gt4py as soon as GT4Py's
runners module is (docs/dace.md, docs/gt4py.md). Without either variable
the .pth line does nothing but read the environment. Where Python reads no
.pth file (kiln found through PYTHONPATH: a module file, a prefix install,
pip install -e), bootstrap/sitecustomize.py imports this module instead.
"""

import importlib.abc
import importlib.util
import os
import sys

TARGET = "dace.codegen.compiler"
GT4PY_TARGET = "gt4py.next.otf.runners"


class _Loader(importlib.abc.Loader):
    """The module's own loader, then then(module)."""

    def __init__(self, inner, then):
        self.inner, self.then = inner, then

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        self.then(module)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, name, then):
        self.name, self.then = name, then

    def find_spec(self, name, path, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)   # once, and no recursion below
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, self.then)
        return spec


def after_import(name, then):
    """Runs then(module) once the module called name has been imported (its
    code run), or now when it is already."""
    if name in sys.modules:
        then(sys.modules[name])
    else:
        sys.meta_path.insert(0, _Finder(name, then))


def _install(_module=None):
    from . import dace as kiln_dace
    kiln_dace.install()


def _install_gt4py(_module=None):
    from . import gt4py as kiln_gt4py
    try:
        kiln_gt4py.install()
    except ImportError as e:   # GT4Py without DaCe: nothing of it to serve
        print("kiln.gt4py: not installed: %s" % e, file=sys.stderr, flush=True)


def _on(name):
    return os.environ.get(name, "") not in ("", "0")


def summary():
    """The process's one line about kiln, or None: that the switch is on,
    which kilnd it asked, and where its programs came from."""
    parts = []
    gt = sys.modules.get("kiln.gt4py")
    if gt is not None and any(gt.stats.values()):
        parts.append("kiln.gt4py: %(hits)d programs found in kilnd, %(lowered)d lowered here, "
                     "%(fallbacks)d left to GT4Py" % gt.stats)
    dc = sys.modules.get("kiln.dace")
    if dc is not None and any(dc.stats.values()):
        parts.append("kiln.dace: %(built)d built or found by kilnd, %(looked_up)d found before "
                     "code generation, %(fallbacks)d built by DaCe's CMake" % dc.stats)
    if not parts:
        return None     # DaCe and GT4Py built nothing here: nothing to say
    sock = os.environ.get("KILN_SOCKET") or "the per-user default socket"
    return "kiln: on in this process (kilnd at %s; KILN_QUIET=1 silences this line): %s" % (
        sock, "; ".join(parts))


def _say_summary():
    if _on("KILN_QUIET"):
        return
    try:
        import multiprocessing
        if multiprocessing.parent_process() is not None:
            return      # a GT4Py compile worker: its parent says it
        line = summary()
    except Exception:
        return
    if line:
        print(line, file=sys.stderr, flush=True)


# KILN_DACE=1: DaCe's builds through kiln, and GT4Py's DaCe programs through
# kiln.gt4py (unless KILN_GT4PY=0); KILN_GT4PY=1: both as well. At the
# process's exit one line says that kiln was on and where the programs came
# from (KILN_QUIET=1: not), so that "served by kiln" and "never loaded" are
# told apart.
if _on("KILN_DACE") or _on("KILN_GT4PY"):
    import atexit
    atexit.register(_say_summary)
    after_import(TARGET, _install)
    if os.environ.get("KILN_GT4PY", "") != "0":
        after_import(GT4PY_TARGET, _install_gt4py)
