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
  jobs and nodes (_environment: the workflow's steps and settings, GT4Py's
  and DaCe's versions and code, DaCe's configuration, Python, the CPU, the
  compilers; docs/gt4py.md, "What the alias covers").
- It asks kilnd for that alias, claiming it (docs/protocol.md, lookup's
  claim): when another process of the node claimed it first, this one waits
  for its result instead of lowering the same program again.
- A hit: the library's file is placed in a private folder under GT4Py's
  cache (with DaCe's loader stub beside it), and GT4Py gets the
  DaCeCompilationArtifact it would have built: no translation, no code
  generation, no compiler. What loading needs besides the library (the
  SDFG, the binding source and function, the device type) travels inside
  the library, in a section of its own (.kiln_gt4py), so that the entry is
  one file kilnd holds like any other (single flight, descriptors,
  eviction, kiln ls).
- A miss: GT4Py's workflow runs as always (in its worker, thread or this
  thread), with kiln.dace building the code, and the compilation step adds
  that section to the build and names the alias, so that kilnd publishes
  the alias with the program.

What kiln.gt4py cannot serve runs as GT4Py runs it, after one line on
stderr (counted in stats["fallbacks"]): another backend, a workflow of
another shape, a key that cannot be computed, no kilnd.
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
from .errors import Claimed, KilnError, NotFound

_RUNNERS = "gt4py.next.otf.runners"
SECTION = ".kiln_gt4py"
MAGIC = b"KILNGT4PY\x01"
META_SOURCE = "kiln_gt4py_meta.cpp"

_lock = threading.Lock()
_state = {"socket": None, "get_runner": None, "wrapped": None, "env": None, "stub": None,
          "said": set()}
_local = threading.local()

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
    reaches GT4Py's compile workers."""
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
    """Gives GT4Py its own runner back (kiln.dace stays installed)."""
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
    with a finished future; any other is GT4Py's, with the alias added."""

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
            done = concurrent.futures.Future()
            done.set_result(artifact)
            return done
        stats["lowered"] += 1
        task = dataclasses.replace(task, executor=_Store(task.executor, plan.alias))
        try:
            future = self.inner.submit(task)
        except BaseException:
            plan.release()
            raise
        future.add_done_callback(lambda _f: plan.release())
        return future

    def shutdown(self, wait=True):
        return self.inner.shutdown(wait)


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


def _wait_s():
    """How long a process waits for another's claim (KILN_GT4PY_WAIT,
    seconds; default 600): past it, it lowers the program itself."""
    try:
        return min(600.0, max(0.0, float(os.environ.get("KILN_GT4PY_WAIT", "600"))))
    except ValueError:
        return 600.0


class _Plan:
    """One program's way through kilnd: its alias, the claim if this
    process holds it."""

    def __init__(self, alias, gpu):
        self.alias, self.gpu = alias, gpu
        self.claimed = None     # the connection holding the claim

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
            alias = _alias(task.executor, step, task.construct_compilable(False))
        except Exception as e:  # a program GT4Py's fingerprint refuses: GT4Py's own way
            _fallback("no key for it (%s: %s)" % (type(e).__name__, e))
            return None
        return cls(alias, step.device_type != core_defs.DeviceType.CPU)

    def find(self):
        """The program's artifact from kilnd, or None (then this process
        lowers it, holding the claim when kilnd granted one)."""
        k = _claims_kiln()
        if k is None:
            return None
        try:
            tools, _ = kiln_dace._compilers(self.gpu)
        except Exception:   # DaCe's configuration names no usable compiler
            tools = None
        if tools is None:
            return None
        try:
            prog = k.lookup(self.alias, load=False, claim=True, wait=_wait_s(), **tools)
        except Claimed:
            # The connection now holds the claim: it is this program's,
            # until release() (from GT4Py's callback thread) closes it.
            self.claimed, _local.kiln = k, None
            return None
        except NotFound:
            return None
        except KilnError as e:
            _fallback("kilnd's lookup failed: %s" % e)
            return None
        try:
            artifact = _artifact(prog, self.alias)
        except (OSError, ValueError, KilnError) as e:
            _state["stub"] = None   # the stub's file may be what went (evicted): ask again
            _fallback("kilnd's entry for it cannot be used: %s" % e)
            return None
        stats["hits"] += 1
        return artifact

    def release(self):
        """The claim ends (a no-op for kilnd once the alias is published;
        after a failure or a fallback, the waiting processes lower the
        program themselves, at once, not one after another)."""
        k, self.claimed = self.claimed, None
        if k is not None:
            try:
                k.release_claim(self.alias)
            except KilnError:
                pass    # the claim ends with the connection anyway
            k.close()


def _claims_kiln():
    """This thread's connection for lookups that claim and wait: its own,
    so that a wait never holds the connection kiln.dace builds over. A
    claim granted on it takes the connection with it (the thread opens
    another): a claim lives as long as its connection, and a process that
    dies gives its claims up with it."""
    k = getattr(_local, "kiln", None)
    if k is None and kiln_dace._kiln() is not None:
        from .client import Kiln
        try:
            k = _local.kiln = Kiln(_state["socket"]) if _state["socket"] else Kiln()
        except KilnError:
            return None
    return k


# ---- the alias ------------------------------------------------------------

# GT4PY_* variables that cannot change a program: where GT4Py keeps its
# caches and for how long, how many workers compile and how. Every other
# GT4PY_* variable is in the alias (GT4Py reads most at import, into
# gt4py.next.config; a new one costs at most a miss).
_ENV_LEFT_OUT = frozenset(("GT4PY_BUILD_CACHE_DIR", "GT4PY_BUILD_CACHE_LIFETIME",
                           "GT4PY_BUILD_JOBS", "GT4PY_BUILD_JOBS_MODE"))

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


def _environment():
    """What decides a program and may change while the process runs, at
    each alias (a few hundred microseconds): GT4PY_* and DACE_* variables,
    CUDAARCHS, DaCe's configuration file, and DaCe's stored configuration as
    it is now (a Config.set after GT4Py's backend was made changes DaCe's
    code generation and kiln.dace's arguments; GT4Py's own key holds the
    configuration of when the backend was made)."""
    from dace.config import Config

    config = json.loads(json.dumps(Config._data._config, default=str))
    config.pop("default_build_folder", None)
    return "\0".join((
        _code(), kiln_dace._environment_id(), kiln_dace._config_file_id(),
        json.dumps(sorted([k, v] for k, v in os.environ.items()
                          if k.upper().startswith("GT4PY_") and k not in _ENV_LEFT_OUT)),
        "CUDAARCHS=%s" % os.environ.get("CUDAARCHS"),
        json.dumps(config, sort_keys=True)))


def _steps_id(executor, step):
    """The workflow's steps and their settings, as GT4Py fingerprints them
    (its translation cache: the bare translation step; its build folder:
    the compilation step's non-default DaCe configuration), without where
    GT4Py keeps its caches."""
    from gt4py.next import config, fingerprinting

    translation = getattr(executor.translation, "step", executor.translation)
    nondefaults = json.loads(json.dumps(step.dace_config_nondefaults, default=str))
    compiler = nondefaults.get("compiler")
    if isinstance(compiler, dict):
        for k in _DACE_CONFIG_LEFT_OUT:
            compiler.pop(k, None)
    nondefaults.pop("default_build_folder", None)
    return fingerprinting.lenient_fingerprinter((
        config.BUILD_CACHE_VERSION_ID, translation, executor.bindings, step.bind_func_name,
        str(step.device_type), str(step.cmake_build_type), step.add_gpu_trace_markers,
        json.dumps(nondefaults, sort_keys=True)))


def _alias(executor, step, compilable):
    import hashlib
    from gt4py.next import fingerprinting

    h = hashlib.sha256()
    for part in (_environment(), _steps_id(executor, step),
                 fingerprinting.strict_fingerprinter(compilable)):
        h.update(part.encode() + b"\0")
    return "gt4py:" + h.hexdigest()


# ---- storing: the compilation step of a miss ------------------------------

@dataclasses.dataclass(frozen=True)
class _Store:
    """GT4Py's workflow with its compilation step wrapped (picklable: the
    process runner ships it to a worker)."""

    inner: Any
    alias: str

    def __call__(self, compilable):
        wrapped = _Compile(self.inner.compilation, self.alias)
        return dataclasses.replace(self.inner, compilation=wrapped)(compilable)


@dataclasses.dataclass(frozen=True)
class _Compile:
    """The DaCe compilation step, building with the section and the alias."""

    inner: Any
    alias: str

    def __call__(self, inp):
        source = inp.program_source.source_code
        sdfg = json.loads(source) if isinstance(source, str) else source
        meta = {"alias": self.alias, "name": sdfg["attributes"]["name"],
                "sdfg_json": json.dumps(source),
                "binding_source_code": inp.binding_source.source_code,
                "bind_func_name": self.inner.bind_func_name,
                "device_type": int(self.inner.device_type)}
        kiln_dace._batch.gt4py = (self.alias, META_SOURCE, meta_source(meta))
        try:
            return self.inner(inp)
        finally:
            kiln_dace._batch.gt4py = None


def meta_source(meta):
    """C++ source of a section (.kiln_gt4py) holding meta: MAGIC, the
    length of the rest (8 bytes, little-endian), meta as zlib'd JSON."""
    blob = zlib.compress(json.dumps(meta, sort_keys=True).encode(), 6)
    data = MAGIC + struct.pack("<Q", len(blob)) + blob
    lines = []
    for i in range(0, len(data), 32):
        lines.append('    "%s"' % "".join("\\%03o" % b for b in data[i:i + 32]))
    return ("// kiln.gt4py: what GT4Py needs to load this program (kiln/gt4py.py)\n"
            "__attribute__((used, section(\"%s\")))\n"
            "extern const char kiln_gt4py_meta[];\n"
            "__attribute__((used, section(\"%s\")))\n"
            "const char kiln_gt4py_meta[] =\n%s;\n" % (SECTION, SECTION, "\n".join(lines))
            ).encode()


# ---- a hit: the artifact from the library ---------------------------------

def read_meta(path):
    """The .kiln_gt4py section's meta of an ELF shared object (ValueError
    when it has none or it is damaged)."""
    with open(path, "rb") as f:
        ident = f.read(64)
        if len(ident) < 64 or ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] != 1:
            raise ValueError("not a 64-bit little-endian ELF file")
        shoff, = struct.unpack_from("<Q", ident, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", ident, 0x3A)
        if shentsize < 64 or shnum == 0 or shstrndx >= shnum:
            raise ValueError("no section headers")
        f.seek(shoff)
        table = f.read(shentsize * shnum)
        if len(table) != shentsize * shnum:
            raise ValueError("section headers cut short")

        def header(i):
            name, _t, _fl, _a, off, size = struct.unpack_from("<IIQQQQ", table, i * shentsize)
            return name, off, size

        _, stroff, strsize = header(shstrndx)
        f.seek(stroff)
        names = f.read(strsize)
        want = SECTION.encode() + b"\0"
        for i in range(shnum):
            name, off, size = header(i)
            if names[name:name + len(want)] == want:
                f.seek(off)
                data = f.read(size)
                break
        else:
            raise ValueError("no %s section" % SECTION)
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 8:
        raise ValueError("%s section damaged" % SECTION)
    n, = struct.unpack_from("<Q", data, len(MAGIC))
    blob = data[len(MAGIC) + 8:len(MAGIC) + 8 + n]
    if len(blob) != n:
        raise ValueError("%s section cut short" % SECTION)
    return json.loads(zlib.decompress(blob))


def _hit_folder(key, name):
    """A private folder for a found program, under GT4Py's cache (removed
    with a session's cache at exit; kept with a persistent one), named by
    the entry's key: an alias may come to name another entry (its program
    rebuilt after a header changed), a key never does."""
    from gt4py.next import config
    from gt4py.next.otf.compilation import cache

    base = cache.get_cache_base_path(config.BUILD_CACHE_LIFETIME)
    return os.path.join(str(base), "kiln", "%s_%s" % (name, key[:32]))


def _stub_path():
    """DaCe's loader stub, through kiln once per process."""
    if _state.get("stub") is None:
        _state["stub"] = kiln_dace._stub(kiln_dace._kiln()).path
    return _state["stub"]


def _artifact(prog, alias):
    """GT4Py's DaCeCompilationArtifact for kilnd's library prog, placed in
    a private folder."""
    from gt4py._core import definitions as core_defs
    from gt4py.next.program_processors.runners.dace.workflow import compilation

    path = prog.path
    meta = read_meta(path)
    if meta.get("alias") != alias:
        raise ValueError("the entry's section names another program (%.40s)" % meta.get("alias"))
    name = meta["name"]
    if not isinstance(name, str) or not name.replace("_", "a").isalnum():
        raise ValueError("the entry's section names no program")
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
