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
  cache (the strict fingerprint, aggregated with SHA-256, of the lowered
  program with its argument
  types, static arguments, column axis and offset provider, connectivity
  tables by content) and what that key leaves out for a cache shared by
  jobs and nodes: the workflow's steps and settings with every callable by
  its code, GT4Py's and DaCe's versions and code, kiln's, Python, the
  CPU, the compilers, and what the build reads as it reads it:
  DaCe's configuration inside the configuration GT4Py builds under, with
  $CXXFLAGS and the other variables (kiln/_gt4py_identity.py;
  docs/gt4py.md, "What the alias covers").
- At the submission it looks the alias up (a hit: done). A miss goes to
  GT4Py's runner as a task that, when it starts (in a worker, a thread or
  this thread), computes the alias as its process sees it, and asks kilnd
  again, claiming it (docs/protocol.md, lookup's claim): when another
  process of the node claimed it first, this one waits for its result
  instead of lowering the same program again, within the process's wait
  budget (KILN_GT4PY_WAIT, all programs together), and no longer than the
  holder's heartbeat shows progress (KILN_GT4PY_STALL;
  kiln/_gt4py_claims.py). A queued task holds no claim.
- A hit: the library's file is placed in a private folder under GT4Py's
  cache (with DaCe's loader stub beside it), and GT4Py gets the
  DaCeCompilationArtifact it would have built: no translation, no code
  generation, no compiler. What loading needs besides the library (the
  SDFG, the binding source and function, the device type) is the alias's
  data in kilnd (docs/protocol.md, "Alias data"), not part of the library,
  so that the ranks' aliases of identical code (their own connectivity
  tables) name one library, compiled once.
- A program another process holds is never waited for in GT4Py's pool: its
  task ends at once (_gt4py_claims.Deferred), and the submitting process waits in a
  thread of its own (_await) while GT4Py's future is pending.
- A miss that this task claimed: GT4Py's IR passes (the part of the
  translation that reads the tables), then the translation alias over
  what they left (kiln/_gt4py_translated.py), claimed the same way: a hit
  is another rank's program (other tables, the same code), and this
  rank's alias is pointed at it; a miss lowers the rest.
- Lowering: GT4Py's workflow runs as always, with kiln.dace building the
  code, and the compilation step names the alias and its data, computed
  once more at the build (_AtBuild), so that kilnd publishes the program
  under what the build read; kiln.dace.publishing() hands them to
  kiln.dace's SDFG.compile as a Publication, with the translation alias
  as its further alias.

The connection, the compilers and the placing of files are the process's
session (kiln/_session.py), shared with kiln.dace; GT4Py's runner is wrapped
by kiln/_gt4py_patches.py, which holds every change kiln makes to GT4Py with
its inverse.

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
import threading
from typing import Any, Optional

from . import _gt4py_claims as _claims, _gt4py_identity as _identity, _gt4py_patches
from . import _gt4py_translated as _translated
from ._gt4py_translated import MAGIC, load_data, read_load_data  # noqa: F401 (kiln.gt4py's)
from . import _session, dace as kiln_dace
from ._gt4py_identity import Unidentified  # noqa: F401 (kiln.gt4py.Unidentified)
from . import _gt4py_report as _report
from ._gt4py_report import fallback as _fallback, say_once as _say_once
from ._gt4py_report import stats  # noqa: F401 (kiln.gt4py.stats)
from .errors import KilnError, NotFound

__all__ = ["install", "uninstall", "stats", "Unidentified", "load_data", "read_load_data",
           "MAGIC"]

_lock = threading.Lock()
_state = {"wrapped": None}


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
    _gt4py_patches.patch_runner(_wrap, before_reset=_drain)


def uninstall() -> None:
    """Gives GT4Py its own runner back (kiln.dace stays installed, with its
    patch of GT4Py's worker initializer: kiln.dace.uninstall() gives that
    back)."""
    _gt4py_patches.restore_runner()
    with _lock:
        _state["wrapped"] = None


def _wrap(inner):
    """GT4Py's runner inner, wrapped (one wrapper per runner GT4Py makes)."""
    with _lock:
        w = _state["wrapped"]
        if w is None or w.inner is not inner:
            w = _state["wrapped"] = _Runner(inner)
        return w


class _Runner:
    """GT4Py's runner with kilnd in front: a program kilnd has is answered
    with a finished future; any other is GT4Py's task, which looks the
    program up again and claims it when its lowering starts (_lower).

    Under GT4Py's thread and process runners the lookup does not hold up
    the submission either: the alias is computed now, in the submitting
    thread (what GT4Py's configuration and DaCe's are now), and the lookup
    runs in one of kiln.gt4py's lookup threads, so that compile() of many
    variants asks kilnd for all of them side by side (a hit that kilnd takes
    from the upstream tier costs a fetch and a check there, each program's
    in parallel on kilnd's pool), and a miss then goes to GT4Py's pool from
    that thread. The serial runner, and a task GT4Py would compile in the
    calling thread, look up and submit in the submitting thread, as GT4Py
    compiles them there."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def submit(self, task):
        plan = _Plan.of(task)
        if plan is None:
            return self.inner.submit(task)
        outer = concurrent.futures.Future()
        if _pooled(self.inner, task):
            _inflight.begin()
            try:
                _lookups().submit(self._resolve, task, plan, outer, True)
            except BaseException:
                _inflight.end()
                raise
        else:
            self._resolve(task, plan, outer)
        return outer

    def _resolve(self, task, plan, outer, counted=False):
        """The lookup, then the hit's artifact or GT4Py's task; GT4Py's
        future (outer) is never left pending by an error here."""
        try:
            self._lookup_then_submit(task, plan, outer)
        finally:
            if counted:
                _inflight.end()

    def _lookup_then_submit(self, task, plan, outer):
        try:
            artifact = plan.find()
            if artifact is not None:
                _report.count("hits")
                outer.set_result(artifact)
                return
            # No claim here: a queued task holds nothing another process could
            # wait for (issue 47). The task claims the program when it starts.
            store = _Store(task.executor, plan.program, plan.gpu, _session.socket(),
                           _claims.budget_path(), _claims.wait_s(), _claims.stall_s())
            inner = _submit(self, dataclasses.replace(task, executor=store))
        except BaseException as e:
            if not outer.done():
                outer.set_exception(e)
            return
        # GT4Py's future is finished once the outcome is counted (a done
        # callback of the inner one runs after its waiters have been woken),
        # or once the program another process holds is there (_Deferred).
        inner.add_done_callback(lambda f: _finished(self, task, store, f, outer))

    def shutdown(self, wait=True):
        return self.inner.shutdown(wait)


class _InFlight:
    """kiln.gt4py's work that will still hand GT4Py's runner a task: lookups
    in the lookup threads, waits for another process's claim. GT4Py's
    wait_for_compilation() shuts the default runner down before it waits
    for the futures (runners.reset_default_runner); kiln/_gt4py_patches.py
    has it wait for this work first (_drain), so that a miss found late
    still goes to the pool it was meant for, not to a pool shut down."""

    def __init__(self):
        self.cond = threading.Condition()
        self.n = 0

    def begin(self):
        with self.cond:
            self.n += 1

    def end(self):
        with self.cond:
            self.n -= 1
            if self.n == 0:
                self.cond.notify_all()

    def drain(self):
        with self.cond:
            self.cond.wait_for(lambda: self.n == 0)


_inflight = _InFlight()


def _drain():
    _inflight.drain()


def _submit(runner, task):
    """GT4Py's runner's submit; when that runner is shut down meanwhile (a
    reset_default_runner that kiln did not hold up: the interpreter's exit,
    a caller of GT4Py's own), GT4Py's default runner of now."""
    try:
        return runner.inner.submit(task)
    except RuntimeError as e:
        if "shutdown" not in str(e):
            raise
        return _gt4py_patches.default_runner().submit(task)


def _pooled(inner, task):
    """Whether GT4Py's runner compiles task in a pool of its own (a thread
    or process runner that will not fall back to the calling thread)."""
    kind = type(inner).__name__
    if kind == "ThreadRunner":
        return True
    return kind == "ProcessRunner" and getattr(task, "no_offload_reason", None) is None


def _lookups():
    """kiln.gt4py's lookup threads (made at the first submission)."""
    with _lock:
        pool = _state.get("lookups")
        if pool is None:
            pool = _state["lookups"] = concurrent.futures.ThreadPoolExecutor(
                max_workers=16, thread_name_prefix="kiln.gt4py lookup")
        return pool


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
    if isinstance(artifact, _claims.Deferred):
        _inflight.begin()
        try:
            threading.Thread(target=_await, args=(runner, task, store, artifact, outer),
                             name="kiln.gt4py await", daemon=True).start()
        except BaseException as e:
            _inflight.end()
            outer.set_exception(e)
        return
    _settle(artifact, outer)


def _settle(artifact, outer):
    try:
        found = _is_placed(artifact.library_path)
    except Exception:
        found = False
    _report.count("hits" if found else "lowered")
    outer.set_result(artifact)


def _await(runner, task, store, deferred, outer):
    """In the submitting process: waits for the program another process
    holds (within the wait budget, watching its heartbeat). Found: GT4Py's
    future is done. Taken over (its holder died) or given up (released,
    the budget spent, no heartbeat): the task goes back to GT4Py's pool,
    to lower it holding the claim this thread took, or unclaimed. Counted
    in flight (_inflight) until then."""
    try:
        _await_in_flight(runner, task, store, deferred, outer)
    finally:
        _inflight.end()


def _await_in_flight(runner, task, store, deferred, outer):
    alias = deferred.alias
    claim = _claims.Claim(alias, store)
    try:
        got = claim.take()
        artifact = _served(got[0], got[1], alias) if got is not None else None
        if artifact is not None:
            claim.end()
            if deferred.publish is not None:     # a translation alias: this rank's own too
                _translated.republish(deferred.publish, got[1])
            _settle(artifact, outer)
            return
        mode = "claimed" if claim.k is not None else "unclaimed"
        again = dataclasses.replace(task, executor=dataclasses.replace(store, mode=mode,
                                                                       held=alias))
        inner = _submit(runner, again)
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
        if step.add_gpu_trace_markers and step.device_type == core_defs.CUPY_DEVICE_TYPE:
            _fallback("GPU trace markers (GT4PY_ADD_GPU_TRACE_MARKERS) change the SDFG after "
                      "the key")
            return None
        try:
            program = _identity.fingerprint(task.construct_compilable(False))
            alias = _identity.alias(_identity.prefix(task.executor, step, program), _identity.build_view(step))
        except _identity.Unidentified as e:
            _fallback(str(e))
            return None
        except Exception as e:  # a program GT4Py's fingerprint refuses: GT4Py's own way
            _fallback("no key for it (%s: %s)" % (type(e).__name__, e))
            return None
        return cls(program, alias, step.device_type != core_defs.DeviceType.CPU)

    def find(self):
        """The program's artifact from kilnd, or None (a plain lookup: it
        neither claims nor waits)."""
        k = _session.connection()
        tools = _session.tools(self.gpu) if k is not None else None
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
        _session.forget_stub()   # its file may be what went (evicted): ask again
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
    # "claimed": the submitting process holds the claim on held (taken
    # over), the GT4Py alias or the translation alias, and the task claims
    # only the other one; "unclaimed": lower without claims (the holder
    # gave up, the budget is spent)
    mode: str = "claim"
    held: Optional[str] = None

    def __call__(self, compilable):
        return _lower(self, compilable)


def _lower(store, compilable):
    """A task's run, where GT4Py runs it (a worker process, a thread, the
    submitting thread): the alias as this process sees it now, the claim,
    then a hit or the translation alias's turn (_translate)."""
    step = store.inner.compilation
    try:
        prefix = _identity.prefix(store.inner, step, store.program)
        alias = _identity.alias(prefix, _identity.build_view(step))
    except Exception as e:
        _fallback("no key for it here (%s: %s)" % (type(e).__name__, e))
        return store.inner(compilable)
    claims = []
    try:
        found = _claimed(store, alias, claims)
        if found is not None:
            return found
        return _translate(store, compilable, step, prefix, alias, claims)
    finally:
        for c in claims:    # a no-op for those the build published
            c.end()


def _claimed(store, alias, claims, publish=None):
    """The claim on alias when the task is to take it (store.mode, held):
    the hit's artifact (publish: this rank's GT4Py alias, pointed at its
    entry too), Deferred (another process holds it), or None: produce the
    program, holding the claim when kilnd granted it (added to claims,
    which the task ends)."""
    if store.mode == "unclaimed" or alias == store.held:
        return None
    claim = _claims.Claim(alias, store)
    claims.append(claim)
    try:
        got = claim.try_take()
    except Exception as e:   # kiln's trouble is never the program's: lower it
        _fallback("kilnd's claim failed: %s: %s" % (type(e).__name__, e))
        return None
    if isinstance(got, _claims.Deferred):
        return _claims.Deferred(got.alias, publish)
    if got is None:
        return None
    artifact = _served(got[0], got[1], alias)
    if artifact is not None and publish is not None:
        _translated.republish(publish, got[1])
    return artifact


def _translate(store, compilable, step, prefix, alias, claims):
    """The GT4Py alias missed: GT4Py's IR passes, then the translation
    alias (kiln/_gt4py_translated.py), claimed as the GT4Py alias was; a
    hit is another rank's program, a miss lowers the rest and publishes
    both aliases. A translator kiln cannot split: GT4Py's workflow."""
    translated = _translated.of(store.inner, step, compilable)
    if translated is None:
        wrapped = dataclasses.replace(store.inner, compilation=_Compile(step, prefix, alias))
        return wrapped(compilable)
    try:
        ir_alias = _translated.alias(translated, step)
    except Exception as e:
        _fallback("no key for its IR here (%s: %s)" % (type(e).__name__, e))
        return store.inner(compilable)
    found = _claimed(store, ir_alias, claims, publish=alias)
    if found is not None:
        return found
    wrapped = dataclasses.replace(translated.executor, compilation=_Compile(
        step, prefix, alias, translated.prefix))
    return wrapped(translated.compilable)


# ---- storing: the compilation step of a task -------------------------------

@dataclasses.dataclass(frozen=True)
class _Compile:
    """The DaCe compilation step, building under the alias, which it
    computes again at the build (_AtBuild), with what loading needs as the
    alias's data."""

    inner: Any
    prefix: str
    alias: str      # the alias the task looked up and claimed
    ir_prefix: Optional[str] = None     # its translation alias's prefix, if any

    def __call__(self, inp):
        source = inp.program_source.source_code
        sdfg = json.loads(source) if isinstance(source, str) else source
        meta = {"name": sdfg["attributes"]["name"],
                "sdfg_json": json.dumps(source),
                "binding_source_code": inp.binding_source.source_code,
                "bind_func_name": self.inner.bind_func_name,
                "device_type": int(self.inner.device_type)}
        with kiln_dace.publishing(_AtBuild(self.prefix, self.alias, meta, self.ir_prefix)):
            return self.inner(inp)


class _AtBuild:
    """What kiln.dace's SDFG.compile asks for when GT4Py's DaCeCompiler
    compiles the program, inside the configuration it builds under: the
    alias as the build reads DaCe's configuration and the variables (a
    CXXFLAGS set since the lookup, a worker's environment that is not the
    submitter's), and the data to store with it (load_data). The library is
    published under that alias, whatever was claimed, and under its
    translation alias (ir_prefix's, as the build reads the configuration
    too) with the request in its data (kiln/_gt4py_translated.py)."""

    def __init__(self, prefix, claimed, meta, ir_prefix=None):
        self.prefix, self.claimed, self.meta = prefix, claimed, meta
        self.ir_prefix = ir_prefix

    def __call__(self):
        try:
            view = _identity.build_view(None, inside=True)
            alias = _identity.alias(self.prefix, view)
            ir_alias = _identity.alias(self.ir_prefix, view) if self.ir_prefix else None
        except Exception as e:
            _fallback("no key for its build (%s: %s)" % (type(e).__name__, e))
            return None
        if alias != self.claimed:
            _say_once("a build reads another configuration than its lookup did (a variable or "
                      "DaCe's configuration changed, or a compile worker's environment differs "
                      "from this process's): it is published under its own alias")
        more = None
        if ir_alias is not None:
            meta = dict(self.meta, alias=ir_alias)
            more = lambda request: [(ir_alias, _translated.data_with_request(meta, request))]  # noqa: E731
        return kiln_dace.Publication(alias, load_data(dict(self.meta, alias=alias)), more)


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
        _session.place(path, lib)
    stub = os.path.join(folder, "libdacestub_%s.so" % name)
    if not os.path.exists(stub):
        _session.place(_session.stub_path(), stub)
    return compilation.DaCeCompilationArtifact(
        library_path=pathlib.Path(lib), sdfg_json=meta["sdfg_json"],
        binding_source_code=meta["binding_source_code"], bind_func_name=meta["bind_func_name"],
        device_type=core_defs.DeviceType(meta["device_type"]))
