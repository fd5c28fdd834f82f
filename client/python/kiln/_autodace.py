"""
The opt-in without touching code: with KILN_DACE=1 in the environment, the
kiln-dace.pth file installed beside the package imports this module at
Python's start-up, and it installs kiln.dace as soon as DaCe's compiler
module is imported (docs/dace.md). Without KILN_DACE the .pth line does
nothing but read the environment.
"""

import importlib.abc
import importlib.util
import sys

TARGET = "dace.codegen.compiler"


class _Loader(importlib.abc.Loader):
    """DaCe's own loader, then kiln.dace.install()."""

    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        from . import dace as kiln_dace
        kiln_dace.install()


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != TARGET:
            return None
        sys.meta_path.remove(self)   # once, and no recursion below
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


if TARGET in sys.modules:
    from . import dace as _kiln_dace
    _kiln_dace.install()
else:
    sys.meta_path.insert(0, _Finder())
