"""
The opt-in without touching code: with KILN_DACE=1 or KILN_GT4PY=1 in the
environment, the kiln-dace.pth file installed beside the package imports
this module at Python's start-up, and it installs kiln.dace as soon as
DaCe's compiler module is imported, and kiln.gt4py as soon as GT4Py's
runners module is (docs/dace.md, docs/gt4py.md). Without either variable
the .pth line does nothing but read the environment.
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


# KILN_DACE=1: DaCe's builds through kiln, and GT4Py's DaCe programs through
# kiln.gt4py (unless KILN_GT4PY=0); KILN_GT4PY=1: both as well.
if _on("KILN_DACE") or _on("KILN_GT4PY"):
    after_import(TARGET, _install)
    if os.environ.get("KILN_GT4PY", "") != "0":
        after_import(GT4PY_TARGET, _install_gt4py)
