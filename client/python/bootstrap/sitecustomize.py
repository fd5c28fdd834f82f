"""
kiln's switch where the kiln package is found through PYTHONPATH (a module
file, a prefix install, `pip install -e`), where Python reads no .pth file:
this directory first on PYTHONPATH makes KILN_DACE=1 and KILN_GT4PY=1 work as
kiln-dace.pth does in a site directory (docs/dace.md, "Switching it on").
Python imports the first sitecustomize on its path at start-up; this one
then runs the next one on the path (the site's own, a virtualenv's, Debian's),
as if this directory were not there, so nothing the site set up is lost.
Without either variable it only reads the environment.
"""

import os
import sys


def _on(name):
    return os.environ.get(name, "") not in ("", "0")


def _next_sitecustomize():
    """The sitecustomize that Python would have imported without this one."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


try:
    if _on("KILN_DACE") or _on("KILN_GT4PY"):
        try:
            import kiln._autodace  # noqa: F401 (its import is the switch)
        except Exception as e:  # kiln not importable: the program runs without it
            print("kiln: KILN_DACE/KILN_GT4PY is set but kiln is off in this process: %s: %s"
                  % (type(e).__name__, e), file=sys.stderr, flush=True)
finally:
    _next_sitecustomize()
