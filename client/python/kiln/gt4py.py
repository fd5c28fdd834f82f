"""
kiln.gt4py: GT4Py programs cached at GT4Py's level (docs/gt4py.md).

    import kiln.gt4py
    kiln.gt4py.install()      # or KILN_GT4PY=1 (KILN_DACE=1 too) with kiln-dace.pth

GT4Py's DaCe backend (run_dace_cpu, run_dace_gpu, make_dace_backend) turns a
program into a library in three steps that every rank runs: translation
(lowering and DaCe's transformations), bindings, and compilation (code
generation and the compiler). kiln.dace serves the compiler; kiln.gt4py
serves the whole workflow, before translation:

- kiln.gt4py wraps GT4Py's compilation runner (gt4py.next.otf.runners,
  get_default_runner: every runner, process, thread or serial). For each
  program whose executor is the DaCe workflow it computes an alias,
  "gt4py:<sha256>", from the key GT4Py computes for its own translation
  cache (the strict fingerprint of the lowered program with its argument
  types, static arguments, column axis and offset provider, connectivity
  tables by content) and what that key leaves out for a cache shared by
  jobs and nodes: the workflow's steps and settings with every callable by
  its code (_steps_id), GT4Py's and DaCe's versions and code, Python, the
  CPU, the compilers (_code), and what the build reads as it reads it:
  DaCe's configuration inside the configuration GT4Py builds under, with
  $CXXFLAGS and the other variables (_build_view); docs/gt4py.md, "What the
  alias covers".
- At the submission it looks the alias up (a hit: done). A miss goes to
  GT4Py's runner as a task that, when it starts (in a worker, a thread or
  this thread), computes the alias as its process sees it, and asks kilnd
  again, claiming it (docs/protocol.md, lookup's claim): when another
  process of the node claimed it first, this one waits for its result
  instead of lowering the same program again, within the process's wait
  budget (KILN_GT4PY_WAIT, all programs together), and no longer than the
  holder's heartbeat shows progress (KILN_GT4PY_STALL). A queued task holds
  no claim.
- A hit: the library's file is placed in a private folder under GT4Py's
  cache (with DaCe's loader stub beside it), and GT4Py gets the
  DaCeCompilationArtifact it would have built: no translation, no code
  generation, no compiler. What loading needs besides the library (the
  SDFG, the binding source and function, the device type) is the alias's
  data in kilnd (docs/protocol.md, "Alias data"), not part of the library,
  so that the ranks' aliases of identical code (their own connectivity
  tables) name one library, compiled once.
- A program another process holds is never waited for in GT4Py's pool: its
  task ends at once (_Deferred), and the submitting process waits in a
  thread of its own (_await) while GT4Py's future is pending.
- A miss: GT4Py's workflow runs as always, with kiln.dace building the
  code, and the compilation step names the alias and its data, computed
  once more at the build (_AtBuild), so that kilnd publishes the program
  under what the build read.

What kiln.gt4py cannot serve runs as GT4Py runs it, after one line on
stderr (counted in stats["fallbacks"]): another backend, a workflow of
another shape, a key that cannot be computed (a setting whose code kiln
cannot identify among them), no kilnd.
"""

import concurrent.futures
import dataclasses
import json
import os
import pathlib
import struct
import sys
import threading
import zlib
from typing import Any, Optional

from . import dace as kiln_dace
from .errors import Claimed, Held, KilnError, NotFound

_RUNNERS = "gt4py.next.otf.runners"
MAGIC = b"KILNGT4PY\x02"

_lock = threading.Lock()
_state = {"socket": None, "get_runner": None, "wrapped": None, "env": None, "stub": None,
          "said": set(), "budget": None}

# Per process: programs found in kilnd, lowered here (kilnd did not have
# them), not served by kiln.gt4py (fallbacks).
stats = {"hits": 0, "lowered": 0, "fallbacks": 0}


def _say(msg):
    print("kiln.gt4py: " + msg, file=sys.stderr, flush=True)


def _fallback(why):
    stats["fallbacks"] += 1
    if why not in _state["said"]:
        _state["said"].add(why)
        _say("GT4Py builds this program as usual: " + why)


def install(socket: Optional[str] = None) -> None:
    """Routes GT4Py's DaCe programs through kiln (idempotent; anywhere
    before the first call). Installs kiln.dace too, which builds a miss and
    reaches GT4Py's compile workers. Outside the GT4Py versions this kiln
    supports (kiln/_versions.py) GT4Py builds as usual, after one line."""
    import gt4py
    from ._versions import unsupported
    why = unsupported("gt4py", getattr(gt4py, "__version__", "unknown"))
    if why is not None:
        _fallback(why)
        return
    kiln_dace.install(socket=socket)
    with _lock:
        _state["socket"] = socket
    from ._autodace import after_import
    after_import(_RUNNERS, _patch_runners)


def _patch_runners(runners):
    with _lock:
        if _state["get_runner"] is None:
            _state["get_runner"] = runners.get_default_runner
            runners.get_default_runner = _get_default_runner


def uninstall() -> None:
    """Gives GT4Py its own runner back (kiln.dace stays installed, with its
    patch of GT4Py's worker initializer: kiln.dace.uninstall() gives both
    back)."""
    runners = sys.modules.get(_RUNNERS)
    with _lock:
        if runners is not None and _state["get_runner"] is not None:
            runners.get_default_runner = _state["get_runner"]
            _state["get_runner"] = None
            _state["wrapped"] = None


def _get_default_runner():
    """GT4Py's default runner, wrapped (one wrapper per runner GT4Py makes)."""
    inner = _state["get_runner"]()
    with _lock:
        w = _state["wrapped"]
        if w is None or w.inner is not inner:
            w = _state["wrapped"] = _Runner(inner)
        return w


class _Runner:
    """GT4Py's runner with kilnd in front: a program kilnd has is answered
    with a finished future; any other is GT4Py's task, which looks the
    program up again and claims it when its lowering starts (_lower)."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def submit(self, task):
        plan = _Plan.of(task)
        if plan is None:
            return self.inner.submit(task)
        artifact = plan.find()
        if artifact is not None:
            stats["hits"] += 1
            done = concurrent.futures.Future()
            done.set_result(artifact)
            return done
        # No claim here: a queued task holds nothing another process could
        # wait for (issue 47). The task claims the program when it starts.
        store = _Store(task.executor, plan.program, plan.gpu, _state["socket"],
                       _budget_path(), _wait_s(), _stall_s())
        inner = self.inner.submit(dataclasses.replace(task, executor=store))
        # GT4Py gets a future of its own, finished once the outcome is
        # counted (a done callback of the inner one runs after its waiters
        # have been woken), or once the program another process holds is
        # there (_Deferred).
        outer = concurrent.futures.Future()
        inner.add_done_callback(lambda f: _finished(self, task, store, f, outer))
        return outer

    def shutdown(self, wait=True):
        return self.inner.shutdown(wait)


def _finished(runner, task, store, inner, outer):
    """Counts what the task did (a program found when its lowering was to
    start, in whichever process, is placed under kiln's folder) and passes
    its outcome on; a task deferred to another process's claim is awaited
    in a thread of its own (_await), so that nothing of GT4Py's pool waits
    for it."""
    if inner.cancelled():
        outer.cancel()
        return
    error = inner.exception()
    if error is not None:
        outer.set_exception(error)
        return
    artifact = inner.result()
    if isinstance(artifact, _Deferred):
        threading.Thread(target=_await, args=(runner, task, store, artifact.alias, outer),
                         name="kiln.gt4py await", daemon=True).start()
        return
    _settle(artifact, outer)


def _settle(artifact, outer):
    try:
        found = _is_placed(artifact.library_path)
    except Exception:
        found = False
    with _lock:
        stats["hits" if found else "lowered"] += 1
    outer.set_result(artifact)


@dataclasses.dataclass(frozen=True)
class _Deferred:
    """A task's answer when another process holds its program's claim: the
    pool's worker goes on with the next task at once, and the submitting
    process waits for the program (_await)."""

    alias: str      # as the task's process saw it


def _await(runner, task, store, alias, outer):
    """In the submitting process: waits for the program another process
    holds (within the wait budget, watching its heartbeat). Found: GT4Py's
    future is done. Taken over (its holder died) or given up (released,
    the budget spent, no heartbeat): the task goes back to GT4Py's pool,
    to lower it holding the claim this thread took, or unclaimed."""
    claim = _Claim(alias, store)
    try:
        got = claim.take()
        artifact = _served(got[0], got[1], alias) if got is not None else None
        if artifact is not None:
            claim.end()
            _settle(artifact, outer)
            return
        mode = "claimed" if claim.k is not None else "unclaimed"
        again = dataclasses.replace(task, executor=dataclasses.replace(store, mode=mode))
        inner = runner.inner.submit(again)
    except BaseException as e:     # never leave GT4Py's future waiting
        claim.end()
        outer.set_exception(e)
        return

    def done(f):
        claim.end()     # a no-op once the build published the alias
        _finished(runner, task, store, f, outer)
    inner.add_done_callback(done)


def _dace_workflow(executor):
    """The DaCe workflow's compilation step when executor is GT4Py's DaCe
    workflow (translation, bindings, a DaCeCompiler), else None."""
    try:
        from gt4py.next.otf import recipes
        from gt4py.next.program_processors.runners.dace.workflow import compilation
    except Exception:
        return None
    if not isinstance(executor, recipes.OTFCompileWorkflow):
        return None
    step = executor.compilation
    return step if isinstance(step, compilation.DaCeCompiler) else None


def _seconds(name, default, most):
    try:
        return min(most, max(0.0, float(os.environ.get(name, default))))
    except ValueError:
        return float(default)


def _wait_s():
    """How long this process (with GT4Py's compile workers) waits for other
    processes' claims, all programs together (KILN_GT4PY_WAIT, seconds;
    default 600): past it, a program another process holds is lowered
    here at once."""
    return _seconds("KILN_GT4PY_WAIT", "600", 86400.0)


def _stall_s():
    """How long a claim's holder may show no heartbeat before a process
    waiting for it lowers the program itself (KILN_GT4PY_STALL, seconds;
    default 60; 0: never)."""
    return _seconds("KILN_GT4PY_STALL", "60", 86400.0)


class _Plan:
    """One program at its submission: its alias as this process sees it
    now, and GT4Py's fingerprint of the program, which the task takes
    along."""

    def __init__(self, program, alias, gpu):
        self.program, self.alias, self.gpu = program, alias, gpu

    @classmethod
    def of(cls, task):
        step = _dace_workflow(task.executor)
        if step is None:
            return None
        from gt4py._core import definitions as core_defs
        from gt4py.next import fingerprinting
        if step.add_gpu_trace_markers and step.device_type == core_defs.CUPY_DEVICE_TYPE:
            _fallback("GPU trace markers (GT4PY_ADD_GPU_TRACE_MARKERS) change the SDFG after "
                      "the key")
            return None
        try:
            program = fingerprinting.strict_fingerprinter(task.construct_compilable(False))
            alias = _alias(_prefix(task.executor, step, program), _build_view(step))
        except Unidentified as e:
            _fallback(str(e))
            return None
        except Exception as e:  # a program GT4Py's fingerprint refuses: GT4Py's own way
            _fallback("no key for it (%s: %s)" % (type(e).__name__, e))
            return None
        return cls(program, alias, step.device_type != core_defs.DeviceType.CPU)

    def find(self):
        """The program's artifact from kilnd, or None (a plain lookup: it
        neither claims nor waits)."""
        k = kiln_dace._kiln()
        tools = _tools(self.gpu) if k is not None else None
        if tools is None:
            return None
        try:
            prog, data = k.lookup_data(self.alias, **tools)
        except NotFound:
            return None
        except KilnError as e:
            _fallback("kilnd's lookup failed: %s" % e)
            return None
        return _served(prog, data, self.alias)


def _tools(gpu):
    try:
        tools, _ = kiln_dace._compilers(gpu)
    except Exception:   # DaCe's configuration names no usable compiler
        return None
    return tools


def _served(prog, data, alias):
    """The artifact of kilnd's entry prog with the alias's data, or None
    when it cannot be used. An alias without data (an index rebuilt from
    the objects' .meta files) is a miss: the program is lowered and
    published again, with its data."""
    if data is None:
        return None
    try:
        return _artifact(prog, data, alias)
    except Exception as e:
        _state["stub"] = None   # the stub's file may be what went (evicted): ask again
        _fallback("kilnd's entry for it cannot be used: %s" % e)
        return None


# ---- a task: the claim when its lowering starts ---------------------------

@dataclasses.dataclass(frozen=True)
class _Store:
    """GT4Py's workflow behind kilnd (picklable: the process runner ships
    it to a worker): at the start it looks the program up again, claiming
    it, then lowers it with its compilation step wrapped (_Compile)."""

    inner: Any
    program: str                # GT4Py's strict fingerprint of the program (the submitter's)
    gpu: bool
    socket: Optional[str]
    budget: Optional[str]       # the file of the submitting process's wait budget
    wait: float                 # that budget, seconds
    stall: float                # KILN_GT4PY_STALL of the submitting process
    # "claim": claim at the start, deferring to another process's claim;
    # "claimed": the submitting process holds the claim (taken over);
    # "unclaimed": lower without one (the holder gave up, the budget is spent)
    mode: str = "claim"

    def __call__(self, compilable):
        return _lower(self, compilable)


def _lower(store, compilable):
    """A task's run, where GT4Py runs it (a worker process, a thread, the
    submitting thread): the alias as this process sees it now, the claim,
    then a hit or GT4Py's workflow."""
    step = store.inner.compilation
    try:
        prefix = _prefix(store.inner, step, store.program)
        alias = _alias(prefix, _build_view(step))
    except Exception as e:
        _fallback("no key for it here (%s: %s)" % (type(e).__name__, e))
        return store.inner(compilable)
    wrapped = dataclasses.replace(store.inner, compilation=_Compile(step, prefix, alias))
    if store.mode != "claim":
        return wrapped(compilable)
    claim = _Claim(alias, store)
    try:
        try:
            got = claim.try_take()
        except Exception as e:   # kiln's trouble is never the program's: lower it
            _fallback("kilnd's claim failed: %s: %s" % (type(e).__name__, e))
            got = None
        if isinstance(got, _Deferred):
            return got
        if got is not None:
            artifact = _served(got[0], got[1], alias)
            if artifact is not None:
                return artifact
        return wrapped(compilable)
    finally:
        claim.end()


class _Claim:
    """A task's claim on its alias (docs/protocol.md, lookup's claim), taken
    when the lowering starts, with this process's share of the wait
    budget, watching the heartbeat of the process that holds it when
    another does."""

    def __init__(self, alias, store):
        self.alias, self.store = alias, store
        self.k = None           # the connection holding the claim
        self.beat = None        # its heartbeat file

    def _connect(self):
        """(a connection of the claim's own, the tools), or None."""
        k0 = kiln_dace._kiln()
        tools = _tools(self.store.gpu) if k0 is not None else None
        if tools is None:
            return None
        from .client import Kiln
        try:
            return (Kiln(self.store.socket) if self.store.socket else Kiln()), tools
        except KilnError:
            return None

    def try_take(self):
        """Without waiting: (prog, data) (a hit); _Deferred when another
        process holds the claim; None: lower it, holding the claim when
        kilnd granted it."""
        got = self._connect()
        if got is None:
            return None
        k, tools = got
        try:
            prog, data = k.lookup_data(self.alias, claim=True, wait=0, **tools)
        except Claimed:
            self.k = k
            self.beat = _beats.add(self.alias, self.store.socket, self.store.stall, k, tools)
            return None
        except Held:
            k.close()
            return _Deferred(self.alias)
        except NotFound:
            k.close()
            return None
        except KilnError as e:
            k.close()
            _fallback("kilnd's lookup failed: %s" % e)
            return None
        k.close()
        return prog, data

    def take(self):
        """kilnd's entry and the alias's data (a hit), or None: lower it,
        holding the claim when kilnd granted it."""
        got = self._connect()
        if got is None:
            return None
        k, tools = got
        budget = _Budget.at(self.store.budget, self.store.wait)
        allowed = budget.begin()
        try:
            if allowed <= 0:
                _say_once("the wait for other processes' claims (KILN_GT4PY_WAIT, %g s in all "
                          "for this process) is spent: a program another process holds is "
                          "lowered here at once" % self.store.wait)
            outcome, value = _Wait(k, self.alias, tools, allowed).until(
                self._stalled if self.store.stall > 0 else None,
                min(1.0, max(0.05, self.store.stall / 4)))
        finally:
            budget.end()
        if outcome == "claimed":
            self.k = k
            self.beat = _beats.add(self.alias, self.store.socket, self.store.stall, k, tools)
            return None
        if outcome != "abandoned":
            k.close()
        if outcome == "hit":
            return value
        if outcome == "error":
            _fallback("kilnd's lookup failed: %s" % value)
        return None

    def _stalled(self, since):
        """Why the holder of the claim counts as stuck (its heartbeat is
        older than the stall bound, and this process has waited that
        long), or None."""
        beat = _beats.read(self.alias, self.store.socket)
        if beat is None:
            return None     # no heartbeat to judge by (another node, tmpfs, kiln)
        mtime, info = beat
        try:
            interval = float(info.get("interval", _BEAT_MAX_S))
        except (TypeError, ValueError):
            interval = _BEAT_MAX_S
        limit = max(self.store.stall, 4 * interval)
        import time
        quiet = time.time() - max(mtime, since)
        if quiet <= limit:
            return None
        return ("the process holding its claim (pid %s) has shown no progress for %.1f s "
                "(no heartbeat)" % (info.get("pid", "?"), quiet))

    def end(self):
        """The claim ends (a no-op for kilnd once the alias is published;
        after a failure or a fallback, the waiting processes lower the
        program themselves, at once, not one after another)."""
        k, self.k = self.k, None
        if self.beat is not None:
            _beats.remove(self.beat)
            self.beat = None
        if k is not None:
            try:
                k.release_claim(self.alias)
            except KilnError:
                pass    # the claim ends with the connection anyway
            k.close()


class _Wait:
    """One lookup that claims, on a connection of its own, in a thread of its
    own while a stall check runs (a wait that is given up leaves the thread
    to end it: a claim it gets then is given back at once)."""

    def __init__(self, k, alias, tools, seconds):
        self.k, self.alias, self.tools, self.seconds = k, alias, tools, seconds
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.outcome = None
        self.abandoned = False

    def until(self, stalled, poll=1.0):
        """(outcome, value): ("hit", (prog, data)), ("claimed", None), ("not_found",
        None), ("error", e), or ("abandoned", why) when stalled(since) said
        the holder is stuck."""
        import time
        since = time.time()
        if stalled is None or self.seconds <= 0:
            self._run()
            return self.outcome
        threading.Thread(target=self._run, name="kiln.gt4py wait", daemon=True).start()
        while not self.done.wait(poll):
            why = stalled(since)
            if why is None:
                continue
            with self.lock:
                if self.outcome is None:
                    self.abandoned = True
                    _say("%s: %s: lowering it here" % (self.alias[:22], why))
                    return "abandoned", why
        return self.outcome

    def _run(self):
        import time
        end = time.monotonic() + self.seconds
        while True:
            left = end - time.monotonic()
            asked = time.monotonic()
            try:
                got = ("hit", self.k.lookup_data(self.alias, claim=True,
                                                 wait=max(0.0, min(600.0, left)),
                                                 **self.tools))
            except Claimed:
                got = ("claimed", None)
            except NotFound:
                # kilnd waits 600 s at most per lookup: a longer budget asks again
                if left > 600 and time.monotonic() - asked >= 599:
                    continue
                got = ("not_found", None)
            except Exception as e:     # KilnError, or anything: never leave until() waiting
                got = ("error", e)
            break
        with self.lock:
            if not self.abandoned:
                self.outcome = got
                self.done.set()
                return
        if got[0] == "claimed":     # given up meanwhile: others may have it
            try:
                self.k.release_claim(self.alias)
            except KilnError:
                pass
        self.k.close()


# The heartbeat of claims: a file per claimed alias, in a folder of this
# user's on the node (tmpfs), whose modification time the holder's thread
# renews every interval while it holds the claim. A process waiting for the
# claim reads it: a holder that is stopped or wedged (its connection, and so
# its claim, alive) stops renewing it, and past the stall bound the waiter
# lowers the program itself instead of waiting out its budget. The protocol
# carries no heartbeat a waiter could read (docs/gt4py.md, "Limits"); the
# same thread also asks kilnd for the claim again every _RENEW_S on the
# claim's connection (answered "claimed": it is still this one's), which a
# kilnd whose claims expire counts as the producer's progress.
_BEAT_MAX_S = 2.0
_RENEW_S = 30.0


def _beat_dir():
    import stat
    import tempfile
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK | os.X_OK) else tempfile.gettempdir()
    d = os.path.join(base, "kiln-gt4py-%d" % os.getuid())
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
        st = os.lstat(d)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        return None     # not this user's own folder: no heartbeats
    return d


class _Beats:
    """This process's heartbeat files, renewed by one thread."""

    def __init__(self):
        self.lock = threading.Lock()
        self.renewing = threading.Lock()    # held while a renewal is asked
        self.files = {}
        self.interval = None
        self.dir = False        # not looked for yet

    def path(self, alias, socket):
        """alias's heartbeat file, for kilnd at socket (the task's: its
        holder and its waiters name kilnd alike in every build mode)."""
        import hashlib
        with self.lock:
            if self.dir is False:
                self.dir = _beat_dir()
        if self.dir is None:
            return None
        socket = socket or os.environ.get("KILN_SOCKET") or "default"
        if socket != "default":
            socket = os.path.realpath(socket)
        name = hashlib.sha256(("%s\0%s" % (socket, alias)).encode()).hexdigest()[:40]
        return os.path.join(self.dir, name + ".beat")

    def add(self, alias, socket, stall, k=None, tools=None):
        """Starts alias's heartbeat (and the renewal of its claim on k);
        the handle remove() takes."""
        import time
        interval = min(_BEAT_MAX_S, max(0.05, stall / 8)) if stall > 0 else _BEAT_MAX_S
        path = self.path(alias, socket)
        if path is not None:
            tmp = "%s.%d.%d" % (path, os.getpid(), threading.get_ident())
            try:
                with open(tmp, "w") as f:
                    json.dump({"pid": os.getpid(), "interval": interval}, f)
                os.replace(tmp, path)
            except OSError:
                path = None     # no file: the claim is still renewed
        handle = path or "%s %d (no heartbeat file)" % (alias, threading.get_ident())
        with self.lock:
            self.files[handle] = (path, alias, k, tools, time.monotonic())
            self._start(interval)
        return handle

    def _start(self, interval):
        if self.interval is None:
            self.interval = interval
            threading.Thread(target=self._run, name="kiln.gt4py heartbeat",
                             daemon=True).start()

    def remove(self, handle):
        """Ends a heartbeat; after it no renewal of the claim is in flight
        (the claim may be released: a renewal after that would claim it
        again)."""
        with self.lock:
            entry = self.files.pop(handle, None)
        with self.renewing:
            pass
        if entry is not None and entry[0] is not None:
            try:
                os.unlink(entry[0])
            except OSError:
                pass

    def read(self, alias, socket):
        """(modification time, what the holder wrote) of alias's heartbeat,
        or None."""
        path = self.path(alias, socket)
        if path is None:
            return None
        try:
            mtime = os.stat(path).st_mtime
            with open(path) as f:
                info = json.load(f)
        except (OSError, ValueError):
            return None
        return mtime, info if isinstance(info, dict) else {}

    def _run(self):
        import time
        while True:
            time.sleep(self.interval)
            with self.lock:
                entries = list(self.files.items())
            for handle, (path, alias, k, tools, renewed) in entries:
                if path is not None:
                    try:
                        os.utime(path)
                    except OSError:
                        pass
                if k is None or time.monotonic() - renewed < _RENEW_S:
                    continue
                with self.renewing:
                    with self.lock:
                        if handle not in self.files:
                            continue
                        self.files[handle] = (path, alias, k, tools, time.monotonic())
                    try:
                        k.lookup(alias, load=False, claim=True, wait=0, **tools)
                    except (Claimed, NotFound):
                        pass    # still its claim; or taken over, displaced, published
                    except Exception:
                        pass    # kilnd went away: the claim ended with the connection


_beats = _Beats()


class _Budget:
    """A process's wait budget, shared with its GT4Py compile workers
    through a file: the seconds during which at least one of their waits
    for another process's claim was in progress (so waits side by side
    spend it once), against KILN_GT4PY_WAIT."""

    _memory = {}
    _mlock = threading.Lock()

    def __init__(self, path, total):
        self.path, self.total = path, total

    @classmethod
    def at(cls, path, total):
        return cls(path, total)

    def _update(self, active_delta):
        """(consumed seconds) after adding active_delta waits now."""
        import fcntl
        import time
        with self._mlock:
            fd = None
            if self.path is not None:
                try:
                    fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
                except OSError:
                    fd = None
            try:
                if fd is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                    raw = os.pread(fd, 24, 0)
                else:
                    raw = self._memory.get(self.path, b"")
                consumed, since, active = (struct.unpack("<ddq", raw) if len(raw) == 24
                                           else (0.0, 0.0, 0))
                now = time.monotonic()
                if active > 0:
                    consumed += max(0.0, now - since)
                since, active = now, max(0, active + active_delta)
                raw = struct.pack("<ddq", consumed, since, active)
                if fd is not None:
                    os.pwrite(fd, raw, 0)
                else:
                    self._memory[self.path] = raw
                return consumed
            finally:
                if fd is not None:
                    os.close(fd)

    def begin(self):
        """One more wait: the seconds left for it."""
        return max(0.0, self.total - self._update(+1))

    def end(self):
        self._update(-1)


def _budget_path():
    """This process's budget file (made at its first miss; removed at exit),
    or None (then each process keeps its own)."""
    if _state.get("budget") is None:
        import atexit
        import tempfile
        try:
            fd, path = tempfile.mkstemp(prefix="kiln-gt4py-wait-")
            os.close(fd)
        except OSError:
            return None
        _state["budget"] = path
        atexit.register(lambda: os.path.exists(path) and os.unlink(path))
    return _state["budget"]


# ---- the alias ------------------------------------------------------------

# GT4PY_* variables that cannot change a program: where GT4Py keeps its
# caches and for how long, how many workers compile and how. Every other
# GT4PY_* variable is in the alias (GT4Py reads most at import, into
# gt4py.next.config; a new one costs at most a miss).
_ENV_LEFT_OUT = frozenset(("GT4PY_BUILD_CACHE_DIR", "GT4PY_BUILD_CACHE_LIFETIME",
                           "GT4PY_BUILD_JOBS", "GT4PY_BUILD_JOBS_MODE"))
# The same settings in gt4py.next.config, which GT4Py ships to its workers.
_CONFIG_LEFT_OUT = frozenset(("BUILD_CACHE_DIR", "BUILD_CACHE_LIFETIME", "BUILD_JOBS",
                              "BUILD_JOBS_MODE"))

# Variables GT4Py's DaCe workflow reads at every lowering and build, besides
# DaCe's own (kiln.dace._environment_id): set_dace_config (workflow/
# common.py) makes CXXFLAGS, CUDAFLAGS and HIPFLAGS DaCe's compiler.cpu.args,
# compiler.cuda.args and compiler.cuda.hip_args, in place of GT4Py's own
# flags, and get_device_arch (otf/compilation/common.py) makes CUDAARCHS or
# HIPARCHS DaCe's compiler.cuda.cuda_arch and hip_arch. Their effect is in
# DaCe's configuration as _build_view reads it; they are in the alias by
# name and value as well.
_BUILD_ENV = ("CXXFLAGS", "CUDAFLAGS", "HIPFLAGS", "CUDAARCHS", "HIPARCHS")

# DaCe's configuration entries that say where it builds, not what: left out
# of the compilation step's non-default configuration (GT4Py keys its build
# folder by all of it).
_DACE_CONFIG_LEFT_OUT = ("default_build_folder", "build_cache_root")


def _package_id(h, module):
    """A package's files by path, size and modification time."""
    root = os.path.dirname(os.path.abspath(module.__file__))
    for r, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if not f.endswith((".pyc", ".pyo")):
                kiln_dace._file_id(h, os.path.join(r, f))


def _cpu():
    """The CPU's model and flags (-march=native builds for them)."""
    model = flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                k = k.strip()
                if k in ("model name", "cpu model", "Processor") and not model:
                    model = v.strip()
                elif k in ("flags", "Features", "isa") and not flags:
                    flags = v.strip()
                elif not line.strip() and (model or flags):
                    break
    except OSError:
        pass
    import platform
    return "%s|%s|%s" % (platform.machine(), model, flags)


def _code():
    """What decides a program and cannot change while the process runs,
    once per process: GT4Py's and DaCe's code, kiln's, Python, the CPU,
    the compilers."""
    import hashlib
    import gt4py

    if _state["env"] is None:
        h = hashlib.sha256(b"kiln.gt4py 1\0")
        h.update(("gt4py %s\0python %s\0" % (gt4py.__version__, sys.version)).encode())
        _package_id(h, gt4py)
        with open(os.path.abspath(__file__), "rb") as f:
            h.update(f.read())
        h.update(kiln_dace._code_id().encode())
        h.update(_cpu().encode())
        _state["env"] = h.hexdigest()
    return _state["env"]


def _build_view(step, inside=False):
    """What GT4Py's lowering and build read that may change while the
    process runs, read as they read it, now: DaCe's stored configuration
    inside the configuration GT4Py builds under (dace_context with the
    compilation step's device and build type: set_dace_config reads
    $CXXFLAGS and the others there, at every build), less the build folder;
    DaCe's variables and configuration file (kiln.dace); GT4Py's
    variables and gt4py.next.config as GT4Py ships it to its workers; the
    flags variables. inside: the caller runs in that configuration already
    (kiln.dace's SDFG.compile, called by GT4Py's DaCeCompiler)."""
    if not inside:
        from gt4py.next.program_processors.runners.dace.workflow import common as wfcommon
        with wfcommon.dace_context(device_type=step.device_type,
                                   cmake_build_type=step.cmake_build_type):
            return _build_view(step, inside=True)
    from dace.config import Config
    from gt4py.next import config as gt_config

    config = json.loads(json.dumps(Config._data._config, default=str))
    config.pop("default_build_folder", None)
    gt = sorted([n, str(v)] for n, v in vars(gt_config).items()
                if n.isupper() and not n.startswith("_") and n not in _CONFIG_LEFT_OUT
                and not callable(v) and not isinstance(v, type))
    return "\0".join((
        kiln_dace._environment_id(), kiln_dace._config_file_id(),
        json.dumps(sorted([k, v] for k, v in os.environ.items()
                          if k.upper().startswith("GT4PY_") and k not in _ENV_LEFT_OUT)),
        json.dumps([[k, os.environ.get(k)] for k in _BUILD_ENV]),
        json.dumps(gt), json.dumps(config, sort_keys=True)))


def _steps_id(executor, step):
    """The workflow's steps and their settings (its translation cache: the
    bare translation step; its build folder: the compilation step's
    non-default DaCe configuration), without where GT4Py keeps its caches,
    with every callable among them by its code (_settings_fingerprint)."""
    from gt4py.next import config

    translation = getattr(executor.translation, "step", executor.translation)
    nondefaults = json.loads(json.dumps(step.dace_config_nondefaults, default=str))
    compiler = nondefaults.get("compiler")
    if isinstance(compiler, dict):
        for k in _DACE_CONFIG_LEFT_OUT:
            compiler.pop(k, None)
    nondefaults.pop("default_build_folder", None)
    return _settings_fingerprint((
        config.BUILD_CACHE_VERSION_ID, translation, executor.bindings, step.bind_func_name,
        str(step.device_type), str(step.cmake_build_type), step.add_gpu_trace_markers,
        json.dumps(nondefaults, sort_keys=True)))


def _prefix(executor, step, program):
    """The part of a program's alias that its lowering cannot change."""
    import hashlib

    h = hashlib.sha256(b"kiln.gt4py prefix 2\0")
    for part in (_code(), _steps_id(executor, step), program):
        h.update(part.encode() + b"\0")
    return h.hexdigest()


def _alias(prefix, view):
    import hashlib

    return "gt4py:" + hashlib.sha256(("%s\0%s" % (prefix, view)).encode()).hexdigest()


# ---- the settings' callables by their code --------------------------------
#
# GT4Py fingerprints its workflow's settings leniently (fingerprinting.
# lenient_fingerprinter): an importable function, type or module counts by
# its qualified name, which is the same after the user edits it; in one
# process (GT4Py's cache) that is a hazard of one folder, in kiln's alias of
# every folder, job and node. Here every callable that takes part counts by
# its code: a function by its bytecode, constants (nested code too), names,
# defaults, closure cells and the globals it reads by name (a module among
# them by what is read of it); a bound method by its function and object;
# a class of the user's by what it defines; partials and other objects by
# their parts (pickle's reduction, GT4Py's fallback). Code whose files are
# already in the alias (GT4Py, DaCe, kiln), Python's own (the version is in
# the alias) and installed packages (their module file by path, size and
# modification time) count by name. What has no identity to be had (a C
# function of no module found, an object that cannot be taken apart) makes
# the program GT4Py's alone: Unidentified, one line on stderr, no alias.

class Unidentified(TypeError):
    """A setting whose code kiln cannot identify: kiln.gt4py gives the
    program to GT4Py without an alias."""


_OURS = ("gt4py", "dace", "kiln")
_FINGERPRINTER = []
_STAMPS = {}


def _stdlib_dirs():
    if "stdlib" not in _STAMPS:
        import sysconfig
        _STAMPS["stdlib"] = tuple({os.path.realpath(sysconfig.get_paths()[k]) + os.sep
                                   for k in ("stdlib", "platstdlib")})
    return _STAMPS["stdlib"]


def _installed(path):
    parts = path.split(os.sep)
    return "site-packages" in parts or "dist-packages" in parts


def _module_stamp(modname):
    """How a module counts when its objects count by name: b"ours" (its
    files are in the alias), b"python", the module file's identity for an
    installed package; None for the user's own code (which counts by its
    code); Unidentified when it cannot be found."""
    if not modname:
        return None
    if modname.partition(".")[0] in _OURS:
        return b"ours"
    mod = sys.modules.get(modname)
    path = getattr(mod, "__file__", None)
    if path is None:
        if modname in sys.builtin_module_names:
            return b"python"
        if modname.partition(".")[0] in getattr(sys, "stdlib_module_names", ()):
            return b"python"
        if mod is None or modname == "__main__":
            return None
        raise Unidentified("module %s has no file" % modname)
    real = os.path.realpath(path)
    if _installed(real):
        import hashlib
        h = hashlib.sha256()
        kiln_dace._file_id(h, real)
        return b"installed " + h.hexdigest().encode()
    if real.startswith(_stdlib_dirs()):
        return b"python"
    return None


def _named(obj):
    """Whether obj resolves as <module>.<qualname>, by which it counts."""
    modname = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if not modname or not qualname or "<" in qualname:
        return False
    target = sys.modules.get(modname)
    for part in qualname.split("."):
        target = getattr(target, part, None)
        if target is None:
            return False
    return target is obj


def _by_name(obj, kind):
    """A reference (EmptyDeconstruction) when obj counts by its name, else None."""
    from gt4py.next import fingerprinting as fp
    modname = getattr(obj, "__module__", None)
    stamp = _module_stamp(modname)
    if stamp is None or not _named(obj):
        return None
    return fp.EmptyDeconstruction(("%s\0%s.%s\0" % (kind, modname, obj.__qualname__)).encode()
                                  + stamp)


def _codes(code):
    yield code
    for c in code.co_consts:
        if isinstance(c, type(code)):
            yield from _codes(c)


class _ModuleUse:
    """A module as a function reads it: by name (and stamp), or for the
    user's own module, what the function's names read of it."""

    def __init__(self, module, names):
        self.module, self.names = module, names


def _deconstruct_module_use(use):
    from gt4py.next import fingerprinting as fp
    name = use.module.__name__
    stamp = _module_stamp(name)
    if stamp is not None:
        return fp.EmptyDeconstruction(b"module\0" + name.encode() + b"\0" + stamp)
    d = vars(use.module)
    return fp.Deconstruction.from_pieces(
        *((n, _global(d[n], use.names)) for n in sorted(use.names)
          if n in d and not n.startswith("__")),
        state=b"kiln user module\0" + name.encode())


def _global(value, names):
    import types
    return _ModuleUse(value, names) if isinstance(value, types.ModuleType) else value


def _deconstruct_function(func):
    from gt4py.next import fingerprinting as fp
    ref = _by_name(func, "function")
    if ref is not None:
        return ref
    code = func.__code__
    names = set()
    for c in _codes(code):
        names.update(c.co_names)
    g = func.__globals__
    read = tuple((n, _global(g[n], names)) for n in sorted(names) if n in g)
    return fp.Deconstruction.from_pieces(
        code, func.__defaults__, func.__kwdefaults__, func.__closure__ or (), read,
        state=b"kiln function\0" + func.__qualname__.encode())


def _deconstruct_code(code):
    from gt4py.next import fingerprinting as fp
    return fp.Deconstruction.from_pieces(
        code.co_code, code.co_consts, code.co_names, code.co_varnames, code.co_freevars,
        code.co_cellvars, code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount,
        code.co_flags, state=b"kiln code\0" + code.co_name.encode())


def _deconstruct_cell(cell):
    from gt4py.next import fingerprinting as fp
    try:
        contents = cell.cell_contents
    except ValueError:
        return fp.EmptyDeconstruction(b"kiln empty cell")
    return fp.Deconstruction.from_pieces(contents, state=b"kiln cell")


def _deconstruct_builtin(func):
    """A C function or method: a module's by the module (Python's own, an
    installed extension by its file), a bound one by its object too."""
    import types
    from gt4py.next import fingerprinting as fp
    owner = getattr(func, "__self__", None)
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", "?")
    if owner is None or isinstance(owner, types.ModuleType):
        modname = getattr(func, "__module__", None) or getattr(owner, "__name__", None)
        stamp = _module_stamp(modname) if modname else None
        if stamp is None:
            mod = sys.modules.get(modname) if modname else None
            path = getattr(mod, "__file__", None)
            if path is None:
                raise Unidentified("C function %s of module %s, which has no file"
                                   % (name, modname))
            import hashlib
            h = hashlib.sha256()
            kiln_dace._file_id(h, os.path.realpath(path))
            stamp = h.hexdigest().encode()
        return fp.EmptyDeconstruction(("builtin\0%s.%s\0" % (modname, name)).encode() + stamp)
    return fp.Deconstruction.from_pieces(owner, state=b"kiln bound builtin\0" + name.encode())


def _deconstruct_method(method):
    from gt4py.next import fingerprinting as fp
    return fp.Deconstruction.from_pieces(method.__func__, method.__self__,
                                         state=b"kiln method")


def _deconstruct_wrapped(obj):
    from gt4py.next import fingerprinting as fp
    if isinstance(obj, property):
        return fp.Deconstruction.from_pieces(obj.fget, obj.fset, obj.fdel,
                                             state=b"kiln property")
    return fp.Deconstruction.from_pieces(obj.__func__, state=b"kiln " + type(obj).__name__.encode())


def _plain(value):
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return True
    return isinstance(value, (tuple, frozenset)) and all(_plain(v) for v in value)


def _deconstruct_type(cls):
    """A class: by name when it is GT4Py's, DaCe's, Python's or an installed
    package's; the user's by its bases and what it defines (its functions
    and plain class attributes)."""
    import types
    from gt4py.next import fingerprinting as fp
    ref = _by_name(cls, "type")
    if ref is not None:
        return ref
    items = []
    for k, v in sorted(vars(cls).items()):
        if isinstance(v, (types.FunctionType, staticmethod, classmethod, property)):
            items.append((k, v))
        elif not k.startswith("__") and _plain(v):
            items.append((k, v))
    return fp.Deconstruction.from_pieces(cls.__qualname__, tuple(cls.__bases__), tuple(items),
                                         state=b"kiln class")


def _deconstruct_module(module):
    return _deconstruct_module_use(_ModuleUse(module, set()))


def _fallback_deconstruct(obj):
    """Any other object (GT4Py's rule: a dataclass by its fields, anything
    else by pickle's reduction), with its class when that is the user's (a
    callable object's __call__, a dataclass's methods)."""
    from gt4py.next import fingerprinting as fp
    try:
        d = fp.metadata_based_deconstructor_fallback(obj)
    except TypeError as e:
        raise Unidentified("%s: %s" % (type(obj).__name__, e.__cause__ or e)) from e
    state = d.state if isinstance(d.state, bytes) else repr(d.state).encode()
    if state.startswith(b"global\0"):
        # pickled by name (a C object, a ufunc, an lru_cache wrapper): its
        # module's stamp, or for the user's code the function it wraps
        modname = getattr(obj, "__module__", None)
        if not isinstance(modname, str) or not modname:
            import pickle
            modname = pickle.whichmodule(obj, state.partition(b":")[2].decode())
        stamp = _module_stamp(modname)
        if stamp is None:
            wrapped = getattr(obj, "__wrapped__", None)
            if wrapped is None:
                raise Unidentified("%r counts by its name only" % (obj,))
            return fp.Deconstruction.from_pieces(wrapped, state=b"kiln wrapped\0" + state)
        return fp.EmptyDeconstruction(state + b"\0" + modname.encode() + b"\0" + stamp)
    cls = type(obj)
    if _by_name(cls, "type") is None:
        return fp.Deconstruction.from_pieces(cls, *d.pieces, state=b"kiln object\0" + state)
    return d


def _settings_fingerprint(obj):
    """The fingerprint of obj with every callable in it by its code; raises
    Unidentified for one that has no identity to be had."""
    if not _FINGERPRINTER:
        import types
        from gt4py.next import fingerprinting as fp
        deconstructor = fp.make_deconstructor(
            overrides={
                types.FunctionType: _deconstruct_function,
                types.BuiltinFunctionType: _deconstruct_builtin,
                types.MethodType: _deconstruct_method,
                types.ModuleType: _deconstruct_module,
                types.CodeType: _deconstruct_code,
                types.CellType: _deconstruct_cell,
                type: _deconstruct_type,
                staticmethod: _deconstruct_wrapped,
                classmethod: _deconstruct_wrapped,
                property: _deconstruct_wrapped,
                _ModuleUse: _deconstruct_module_use,
                type(Ellipsis): lambda o: fp.EmptyDeconstruction(b"kiln ellipsis"),
                type(NotImplemented): lambda o: fp.EmptyDeconstruction(b"kiln notimplemented"),
            },
            fallback=_fallback_deconstruct)
        _FINGERPRINTER.append(fp.make_fingerprinter(deconstructor=deconstructor))
    try:
        return _FINGERPRINTER[0](obj)
    except Unidentified as e:
        raise Unidentified("its workflow's settings hold code kiln cannot identify (%s)"
                           % e) from None


# ---- storing: the compilation step of a task -------------------------------

@dataclasses.dataclass(frozen=True)
class _Compile:
    """The DaCe compilation step, building under the alias, which it
    computes again at the build (_AtBuild), with what loading needs as the
    alias's data."""

    inner: Any
    prefix: str
    alias: str      # the alias the task looked up and claimed

    def __call__(self, inp):
        source = inp.program_source.source_code
        sdfg = json.loads(source) if isinstance(source, str) else source
        meta = {"name": sdfg["attributes"]["name"],
                "sdfg_json": json.dumps(source),
                "binding_source_code": inp.binding_source.source_code,
                "bind_func_name": self.inner.bind_func_name,
                "device_type": int(self.inner.device_type)}
        kiln_dace._batch.gt4py = _AtBuild(self.prefix, self.alias, meta)
        try:
            return self.inner(inp)
        finally:
            kiln_dace._batch.gt4py = None


class _AtBuild:
    """What kiln.dace's SDFG.compile asks for when GT4Py's DaCeCompiler
    compiles the program, inside the configuration it builds under: the
    alias as the build reads DaCe's configuration and the variables (a
    CXXFLAGS set since the lookup, a worker's environment that is not the
    submitter's), and the data to store with it (load_data). The library is
    published under that alias, whatever was claimed."""

    def __init__(self, prefix, claimed, meta):
        self.prefix, self.claimed, self.meta = prefix, claimed, meta

    def __call__(self):
        try:
            alias = _alias(self.prefix, _build_view(None, inside=True))
        except Exception as e:
            _fallback("no key for its build (%s: %s)" % (type(e).__name__, e))
            return None
        if alias != self.claimed:
            _say_once("a build reads another configuration than its lookup did (a variable or "
                      "DaCe's configuration changed, or a compile worker's environment differs "
                      "from this process's): it is published under its own alias")
        return alias, load_data(dict(self.meta, alias=alias))


def _say_once(msg):
    if msg not in _state["said"]:
        _state["said"].add(msg)
        _say(msg)


def load_data(meta):
    """The data kilnd stores with the alias (docs/protocol.md, "Alias
    data"): MAGIC, then meta as zlib'd JSON. Not compiled into the library,
    so that every rank's alias of identical code (other connectivity
    tables, the same program) names one library built once."""
    return MAGIC + zlib.compress(json.dumps(meta, sort_keys=True).encode(), 6)


def read_load_data(data):
    """The meta of load_data's bytes (ValueError when damaged)."""
    if not isinstance(data, bytes) or not data.startswith(MAGIC):
        raise ValueError("the alias's data is not kiln.gt4py's")
    try:
        meta = json.loads(zlib.decompress(data[len(MAGIC):]))
    except (zlib.error, ValueError) as e:
        raise ValueError("the alias's data is damaged (%s)" % e)
    if not isinstance(meta, dict):
        raise ValueError("the alias's data is damaged")
    return meta


# ---- a hit: the artifact from the library and the alias's data ------------

def _hit_folder(key, name):
    """A private folder for a found program, under GT4Py's cache (removed
    with a session's cache at exit; kept with a persistent one), named by
    the entry's key: an alias may come to name another entry (its program
    rebuilt after a header changed), a key never does."""
    from gt4py.next import config
    from gt4py.next.otf.compilation import cache

    base = cache.get_cache_base_path(config.BUILD_CACHE_LIFETIME)
    return os.path.join(str(base), "kiln", "%s_%s" % (name, key[:32]))


def _is_placed(path):
    """Whether path is in the folders kiln.gt4py places found programs in."""
    from gt4py.next import config
    from gt4py.next.otf.compilation import cache

    base = os.path.realpath(os.path.join(
        str(cache.get_cache_base_path(config.BUILD_CACHE_LIFETIME)), "kiln"))
    return os.path.realpath(str(path)).startswith(base + os.sep)


def _stub_path():
    """DaCe's loader stub, through kiln once per process."""
    if _state.get("stub") is None:
        _state["stub"] = kiln_dace._stub(kiln_dace._kiln()).path
    return _state["stub"]


def _artifact(prog, data, alias):
    """GT4Py's DaCeCompilationArtifact for kilnd's library prog with the
    alias's data, placed in a private folder."""
    from gt4py._core import definitions as core_defs
    from gt4py.next.program_processors.runners.dace.workflow import compilation

    path = prog.path
    meta = read_load_data(data)
    if meta.get("alias") != alias:
        raise ValueError("the alias's data names another program (%.40s)" % meta.get("alias"))
    name = meta.get("name")
    if not isinstance(name, str) or not name.replace("_", "a").isalnum():
        raise ValueError("the alias's data names no program")
    folder = _hit_folder(prog.key, name)
    lib = os.path.join(folder, "lib%s.so" % name)
    if not os.path.exists(lib):   # placed whole or not at all (kiln.dace._place)
        kiln_dace._place(path, lib)
    stub = os.path.join(folder, "libdacestub_%s.so" % name)
    if not os.path.exists(stub):
        kiln_dace._place(_stub_path(), stub)
    return compilation.DaCeCompilationArtifact(
        library_path=pathlib.Path(lib), sdfg_json=meta["sdfg_json"],
        binding_source_code=meta["binding_source_code"], bind_func_name=meta["bind_func_name"],
        device_type=core_defs.DeviceType(meta["device_type"]))
