"""
Every change kiln makes to GT4Py, each with its inverse (docs/python.md,
"The integrations' layout"). Three names of gt4py.next.otf.runners:

- _pool_worker_initializer (for kiln.dace): GT4Py compiles in worker
  processes it starts with "spawn" (ProcessRunner); they import the main
  script's module level, not what main() did, so an install() there would
  not reach them. GT4Py hands its pool an initializer, a module-level
  function the pool pickles by name; kiln puts its own in that name's place
  (a partial of _worker_init, with the parent's socket), which the worker
  unpickles by importing this module: it installs kiln.dace with the
  parent's socket, then runs GT4Py's own initializer. Thread and serial
  modes build in the submitting process, which kiln.dace.install() has
  patched already.
- get_default_runner (for kiln.gt4py): every runner GT4Py makes (process,
  thread, serial) is handed out wrapped.
- reset_default_runner (for kiln.gt4py): GT4Py's wait_for_compilation()
  shuts the default runner down before it waits for the programs; kiln.gt4py's
  lookups and waits still in flight, which may yet hand that runner a task,
  end first.

Each patch is made when the runners module is imported (now, or later
through kiln._autodace.after_import), and only while it is wanted: a hook
still waiting for GT4Py's import after restore_*() patches nothing.
"""

import functools
import importlib
import sys
import threading

RUNNERS = "gt4py.next.otf.runners"

_lock = threading.RLock()
_state = {
    # the worker initializer: wanted (the parent's socket), GT4Py's own, hooked
    "workers": False, "socket": None, "init": None, "workers_hook": False,
    # the default runner: the wrapper, GT4Py's own, hooked; its reset: what
    # runs before it, GT4Py's own
    "wrap": None, "get_runner": None, "runner_hook": False,
    "before_reset": None, "reset": None,
}


def _now_or_at_import(hook, patch):
    """patch(runners) now when GT4Py's runners module is imported, else once
    it is (one hook at a time: _state[hook] says one is waiting)."""
    with _lock:
        runners = sys.modules.get(RUNNERS)
        if runners is not None:
            patch(runners)
            return
        if _state[hook]:
            return
        _state[hook] = True

    def hooked(module):
        with _lock:
            _state[hook] = False
        patch(module)
    from ._autodace import after_import
    after_import(RUNNERS, hooked)


# ---- GT4Py's compile workers: kiln.dace in each -----------------------------

def _is_ours(init):
    return isinstance(init, functools.partial) and init.func is _worker_init


def _worker_init(socket, *args):
    """A GT4Py compile worker's start: kiln.dace, then GT4Py's initializer."""
    runners = importlib.import_module(RUNNERS)
    init = getattr(runners, "_pool_worker_initializer", None)
    original = _state["init"] if _is_ours(init) else init
    from . import dace as kiln_dace
    try:
        kiln_dace.install(socket=socket)
    except Exception as e:  # DaCe cannot be patched here: its own build, said once
        kiln_dace.stats["fallbacks"] += 1
        kiln_dace._say("cannot route this GT4Py compile worker's builds through kiln: %s" % e)
    if original is not None and not _is_ours(original):
        original(*args)


def _patch_workers_now(runners):
    with _lock:
        if not _state["workers"]:
            return   # restored since the hook was set
        init = getattr(runners, "_pool_worker_initializer", None)
        if init is None or _is_ours(init):
            if init is not None:   # patched already: a new socket is the new one
                runners._pool_worker_initializer = functools.partial(_worker_init,
                                                                     _state["socket"])
            return
        _state["init"] = init
        runners._pool_worker_initializer = functools.partial(_worker_init, _state["socket"])


def patch_workers(socket):
    """GT4Py's compile workers install kiln.dace with socket, from the
    runners module's import on."""
    with _lock:
        _state["workers"], _state["socket"] = True, socket
    _now_or_at_import("workers_hook", _patch_workers_now)


def restore_workers():
    """GT4Py's own worker initializer back."""
    with _lock:
        _state["workers"] = False
        runners = sys.modules.get(RUNNERS)
        if runners is not None and _state["init"] is not None:
            if _is_ours(getattr(runners, "_pool_worker_initializer", None)):
                runners._pool_worker_initializer = _state["init"]
        _state["init"] = None


# ---- GT4Py's default runner: kiln.gt4py's wrapper ----------------------------

def _get_default_runner():
    """GT4Py's default runner, as the wrapper hands it out."""
    with _lock:
        get, wrap = _state["get_runner"], _state["wrap"]
    if get is None:   # restored while a caller held this function
        return sys.modules[RUNNERS].get_default_runner()
    inner = get()
    return wrap(inner) if wrap is not None else inner


def _reset_default_runner():
    """GT4Py's reset_default_runner (wait_for_compilation() calls it before
    it waits), after what kiln.gt4py still has to hand the runner."""
    with _lock:
        before, reset = _state["before_reset"], _state["reset"]
    if before is not None:
        before()
    if reset is None:   # restored while a caller held this function
        return sys.modules[RUNNERS].reset_default_runner()
    return reset()


def default_runner():
    """GT4Py's default runner of now, unwrapped."""
    with _lock:
        get = _state["get_runner"]
    return get() if get is not None else sys.modules[RUNNERS].get_default_runner()


def _patch_runner_now(runners):
    with _lock:
        if _state["wrap"] is None or _state["get_runner"] is not None:
            return   # restored since the hook was set, or patched already
        _state["get_runner"] = runners.get_default_runner
        runners.get_default_runner = _get_default_runner
        _state["reset"] = runners.reset_default_runner
        runners.reset_default_runner = _reset_default_runner


def patch_runner(wrap, before_reset=None):
    """From the runners module's import on, get_default_runner() returns
    wrap(GT4Py's runner), and reset_default_runner() runs before_reset()
    first."""
    with _lock:
        _state["wrap"], _state["before_reset"] = wrap, before_reset
    _now_or_at_import("runner_hook", _patch_runner_now)


def restore_runner():
    """GT4Py's own get_default_runner back."""
    with _lock:
        _state["wrap"] = _state["before_reset"] = None
        runners = sys.modules.get(RUNNERS)
        if runners is not None and _state["get_runner"] is not None:
            if runners.get_default_runner is _get_default_runner:
                runners.get_default_runner = _state["get_runner"]
            if runners.reset_default_runner is _reset_default_runner:
                runners.reset_default_runner = _state["reset"]
        _state["get_runner"] = _state["reset"] = None


def patched():
    """The names of GT4Py this module has changed now (for tests and logs)."""
    runners = sys.modules.get(RUNNERS)
    if runners is None:
        return []
    out = []
    if _is_ours(getattr(runners, "_pool_worker_initializer", None)):
        out.append(RUNNERS + "._pool_worker_initializer")
    if getattr(runners, "get_default_runner", None) is _get_default_runner:
        out.append(RUNNERS + ".get_default_runner")
    if getattr(runners, "reset_default_runner", None) is _reset_default_runner:
        out.append(RUNNERS + ".reset_default_runner")
    return out
