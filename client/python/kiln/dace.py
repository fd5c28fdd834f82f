"""
kiln.dace: DaCe's builds through kiln (docs/dace.md).

    import kiln.dace
    kiln.dace.install()          # before DaCe compiles anything

replaces DaCe's `configure_and_compile` (dace/codegen/compiler.py; DaCe
calls it through the module, so the one assignment reroutes every build).
For a CPU program it sends the generated tree as it is (src/cpu/<name>.cpp
and include/*.h under their folder names, so "../../include/hash.h"
resolves), with DaCe's compiler configuration translated into arguments
(its CPU arguments, the build type's flags, the C++ standard, OpenMP, the
runtime include directory), and <dace/dace.h> named as the header for kilnd
to precompile (DaCe's compiler.precompiled_header). Per-folder content is
made folder-independent first: include/hash.h holds the SDFG's hash, which
covers the build folder's path, so it is rewritten from the SDFG without
that path; then every rank's copy of a program, whatever its folder, is one
key and one build per node.

kilnd builds (or finds) the library and hands it over without loading it
(Kiln.get(load=False)); the library is copied to where DaCe's loader looks
(compiler.get_binary_name: <folder>/build/lib<name>.so), with DaCe's loader
stub beside it (itself built through kiln, once), so DaCe loads, reloads
and unloads as it always does, and nothing ever writes into kiln's cache.
A compiler failure raises DaCe's own CompilationError with the compiler's
output.

A GPU program (DaCe's CUDA backend: src/cpu/*.cpp and src/cuda/*.cu in one
library) goes to nvcc with the flags DaCe's CMake gives nvcc, the host flags
forwarded with -Xcompiler=.

kilnd builds with the compilers DaCe would have used, named by path: the
host compiler DaCe chose (compiler.cpu.executable, else $CXX, else c++ on
PATH), and for GPU programs the nvcc of compiler.cuda.path (else nvcc on
PATH, else /usr/local/cuda) with that host compiler as nvcc's -ccbin. kilnd
identifies each on first use and keys by it (docs/client.md).

What kiln cannot express falls back to DaCe's own CMake build, with one
line on stderr saying why: targets other than cpu and cuda (and HIP), library
environments that need CMake (find_package, .cmake files), a compiler that
is not there, arguments kiln's allow-list refuses, a compiler kilnd does not
let this user name (docs/client.md).
"""

import contextlib
import dataclasses
import gzip
import json
import os
import pathlib
import shlex
import threading
from typing import Any, Callable, Iterable, List, Optional, Tuple

from . import _gt4py_patches, _session
from .errors import BuildError, InvalidRequest, KilnError

_lock = threading.Lock()
_state = {"original": None, "compile": None}
# Per process: what went through kiln (built, or found by content before
# code generation), what fell back (for tests and logs).
stats = {"built": 0, "looked_up": 0, "fallbacks": 0}


def install(socket: Optional[str] = None) -> None:
    """Routes DaCe's builds through kiln (idempotent). socket: kilnd's socket
    (default: libkiln's, $KILN_SOCKET or the per-user default)."""
    import dace
    from dace.codegen import compiler

    from dace.sdfg.sdfg import SDFG

    from ._versions import unsupported
    why = unsupported("dace", getattr(dace, "__version__", "unknown"))
    if why is not None:
        with _lock:
            stats["fallbacks"] += 1
            said = _state.get("version_said")
            _state["version_said"] = True
        if not said:
            _say("DaCe builds as usual: " + why)
        return
    with _lock:
        if _state["original"] is None:
            _state["original"] = compiler.configure_and_compile
            compiler.configure_and_compile = configure_and_compile
            _state["compile"] = SDFG.compile
            SDFG.compile = _compile
    _session.set_socket(socket)
    # GT4Py's compile workers, started with "spawn", install kiln.dace too
    # (kiln/_gt4py_patches.py).
    _gt4py_patches.patch_workers(socket)


def uninstall() -> None:
    """Gives DaCe its own build back, and GT4Py's compile workers their own
    initializer."""
    from dace.codegen import compiler

    from dace.sdfg.sdfg import SDFG

    with _lock:
        if _state["original"] is not None:
            compiler.configure_and_compile = _state["original"]
            SDFG.compile = _state["compile"]
            _state["original"] = None
    _gt4py_patches.restore_workers()


def _kiln():
    return _session.connection()


def _say(msg):
    _session.say(msg)


def _compiled_files(folder):
    """The translation units DaCe would compile: dace_files.csv's rows
    (target, target type, file) under src/."""
    files = []
    with open(os.path.join(folder, "dace_files.csv")) as f:
        for line in f:
            if not line.strip():
                continue
            target, ttype, name = line.strip().split(",")
            files.append((target, os.path.join("src", target, ttype, name) if ttype
                          else os.path.join("src", target, name)))
    return files


def _normalise_hash(folder, name):
    """Rewrites include/hash.h with the SDFG's hash computed without the
    build folder (the only per-folder part of a CPU program's tree)."""
    import dace

    path = os.path.join(folder, "program.sdfgz")
    if not os.path.exists(path):
        return
    with gzip.open(path, "rt") as f:
        j = json.load(f)
    j.get("attributes", {}).pop("build_folder", None)
    text = '#define __HASH_%s "%s"\n' % (name, dace.SDFG.hash_sdfg(None, jsondict=j))
    with open(os.path.join(folder, "include", "hash.h"), "w") as f:
        f.write(text)


def _sources(folder, compiled):
    """The tree kiln gets: the compiled files and every header under src/
    and include/, named relative to the program folder."""
    names = {rel for _, rel in compiled}
    for top in ("src", "include"):
        for root, _, files in os.walk(os.path.join(folder, top)):
            for fn in files:
                if fn.endswith((".h", ".hpp", ".hh", ".inl")):
                    names.add(os.path.relpath(os.path.join(root, fn), folder))
    return {n: pathlib.Path(folder, n).read_bytes() for n in sorted(names)}


def _runtime_include():
    from dace.codegen import compiler

    return os.path.join(os.path.dirname(os.path.dirname(compiler.__file__)), "runtime", "include")


def _libs(targets):
    """compiler.<target>.libs of the targets as linker arguments, or (None,
    why): -lname and absolute paths pass; a bare name becomes -lname."""
    from dace.config import Config

    out = []
    for t in sorted(targets):
        try:
            libs = shlex.split(Config.get("compiler", t, "libs") or "")
        except KeyError:
            continue
        for lib in libs:
            if lib.startswith("-l") or os.path.isabs(lib):
                out.append(lib)
            elif lib.replace("_", "").replace("-", "").replace(".", "").replace("+", "").isalnum():
                out.append("-l" + lib)
            else:
                return None, "compiler.%s.libs entry %r is not a library" % (t, lib)
    return out, None


def _environments(folder):
    """The library environments of dace_environments.csv as arguments, or
    (None, why) for what only CMake can read (packages, .cmake files,
    variables)."""
    import dace.library
    from dace.codegen import compiler

    path = os.path.join(folder, "dace_environments.csv")
    names = set()
    if os.path.exists(path):
        with open(path) as f:
            names = {l.strip() for l in f if l.strip()}
    if not names:
        return [], None
    try:
        envs = dace.library.get_environments_and_dependencies(names)
    except Exception as e:  # an environment DaCe does not know (KeyError), a cycle
        return None, "DaCe's library environments %s: %s" % (", ".join(sorted(names)), e)
    args = []
    for env in envs:
        get = compiler._get_or_eval
        name = getattr(env, "__name__", str(env))
        if get(env.cmake_packages) or get(env.cmake_files) or get(env.cmake_variables):
            return None, "library environment %s needs CMake (find_package, .cmake files)" % name
        args += ["-I" + i for i in sorted(get(env.cmake_includes))]
        args += sorted(get(env.cmake_compile_flags))
        for lib in sorted(get(env.cmake_libraries)):
            args.append(lib if lib.startswith("-") or os.path.isabs(lib) else "-l" + lib)
        args += sorted(get(env.cmake_link_flags))
    return args, None


def _cpu_arguments():
    """DaCe's CPU compile configuration as arguments, or (None, why)."""
    from dace.config import Config
    from dace.codegen import compiler, compiler_family

    args = ["-I" + _runtime_include()] + shlex.split(compiler_family.cpu_args())
    args += compiler.build_type_flags()
    args += ["-fopenmp", "-std=c++%s" % Config.get("compiler", "cpp_standard"), "-lpthread"]
    return args, None


def _cuda_arch_args():
    """-arch or -gencode for compiler.cuda.cuda_arch ("80" or "70,80");
    none when empty: kilnd then targets its --cuda-arch or the node's GPUs."""
    from dace.config import Config

    archs = [a.strip() for a in (Config.get("compiler", "cuda", "cuda_arch") or "").split(",")
             if a.strip()]
    if len(archs) == 1:
        return ["-arch=sm_%s" % archs[0]]
    out = []
    for a in archs:
        out += ["-gencode", "arch=compute_%s,code=sm_%s" % (a, a)]
    return out


def _cuda_arguments():
    """A CPU + CUDA program (src/cpu/*.cpp and src/cuda/*.cu in one library)
    through kilnd's "nvcc" toolchain: the host flags DaCe forwards to nvcc
    go with -Xcompiler= to both, as DaCe's CMake does for the .cu. (None,
    why) for what is not translated."""
    from dace.config import Config
    from dace.codegen import common, compiler
    from dace.codegen.targets import cuda as dace_cuda

    backend = common.get_gpu_backend()
    if backend != "cuda":
        return None, "GPU backend %s is not translated" % backend
    args = ["-I" + _runtime_include(), "-std=c++%s" % Config.get("compiler", "cpp_standard"),
            "--expt-relaxed-constexpr", "-DWITH_CUDA"]
    args += shlex.split(Config.get("compiler", "cuda", "args") or "")
    args += compiler.build_type_flags() + _cuda_arch_args()
    # The standard is DaCe's compiler.cpp_standard (nvcc's -std= above sets
    # the host compiler's too); a -std= in compiler.cpu.args loses to it, as
    # CMake's CXX_STANDARD flag, which comes last, wins in DaCe's build.
    args += ["-Xcompiler=" + f for f in dace_cuda.forwarded_host_args()
             if not f.startswith("-std=")]
    args += ["-Xcompiler=-fopenmp", "-lgomp", "-lpthread"]
    return args, None


def _translate(folder, compiled):
    """({toolchain, host_compiler}, arguments, None) for the program, or
    (None, None, why)."""
    targets = {t for t, _ in compiled}
    cuda = [rel for t, rel in compiled if t == "cuda"]
    if targets - {"cpu", "cuda"}:
        return None, None, "targets %s are not translated" % ", ".join(
            sorted(targets - {"cpu", "cuda"}))
    if cuda and not all(rel.startswith(os.path.join("src", "cuda", "")) and rel.count(os.sep) == 2
                        for rel in cuda):
        return None, None, "HIP sources are not translated"
    tools, why = _session.compilers(bool(cuda))
    args, why = (_cuda_arguments() if cuda else _cpu_arguments()) if tools else (None, why)
    env, why = _environments(folder) if args is not None else (None, why)
    libs, why = _libs(targets) if env is not None else (None, why)
    if libs is None:
        return None, None, why
    return tools, args + env + libs, None


def _pch():
    """DaCe's precompiled runtime header, when its configuration asks for
    one (compiler.precompiled_header, on by default): kilnd precompiles
    <dace/dace.h> once per toolchain and arguments and force-includes it,
    as DaCe's CMake build does with its own .gch (docs/pch.md)."""
    from dace.config import Config

    return ["dace/dace.h"] if Config.get_bool("compiler", "precompiled_header") else []


def _fallback(why, *a, **kw):
    stats["fallbacks"] += 1
    _say("building with DaCe's CMake: " + why)
    return _state["original"](*a, **kw)


class _Build:
    """One program's build through kiln: DaCe's call and kiln's request."""

    def __init__(self, call, folder, name, lib, request, more=None):
        self.call, self.folder, self.name = call, folder, name
        self.lib, self.request, self.more = lib, request, more
        self.prog = self.stub = self.error = None

    def fetch(self, k):
        """The kiln calls (thread-safe; blocking calls release the GIL)."""
        try:
            self.prog = k.get(**self.request)
            self.stub = _session.stub(k)
        except KilnError as e:
            self.error = e
            return
        self._publish_more(k)

    def _publish_more(self, k):
        """The publication's further aliases, each pointed at the entry just
        built by the same request again (sent by digest: kilnd answers it
        from its index, no compiler). A failure costs that alias only."""
        try:
            more = list(self.more(self.request)) if self.more is not None else []
        except Exception as e:
            _say("a build's further aliases were not computed: %s: %s" % (type(e).__name__, e))
            return
        for alias, data in more:
            try:
                k.get(**dict(self.request, alias=alias, alias_data=data))
            except KilnError as e:
                _say("a build's further alias was not published: %s" % e)

    def finish(self):
        """Places the library for DaCe's loader, or falls back, or raises
        DaCe's CompilationError; the library's path."""
        from dace.codegen.exceptions import CompilationError

        e = self.error
        if isinstance(e, BuildError):
            raise CompilationError("Compiler failure:\n" + (e.diagnostics or e.message))
        if isinstance(e, InvalidRequest):
            return _fallback("kiln refuses the request: %s" % e.message, *self.call)
        if e is not None:
            return _fallback("kiln failed: %s" % e, *self.call)
        _session.place(self.prog.path, self.lib)
        _session.place(self.stub.path, os.path.join(os.path.dirname(self.lib),
                                            "libdacestub_%s.so" % self.name))
        stats["built"] += 1
        return pathlib.Path(self.lib)


# What this thread's SDFG.compile hands on to its configure_and_compile
# (DaCe calls one from the other, with nothing of ours in between): the
# target, and kiln.gt4py's publication (publishing()).
_batch = threading.local()


@dataclasses.dataclass(frozen=True)
class Publication:
    """What a build is published under besides its key (docs/protocol.md,
    "Alias data"): an alias, and the data kilnd keeps with it; more, when
    given, is called with the request once the build succeeded and names
    further (alias, data) pairs to point at the same entry (kiln.gt4py's
    translation alias, whose data holds the request)."""

    alias: str
    data: Optional[bytes] = None
    more: Optional[Callable[[dict], Iterable[Tuple[str, bytes]]]] = None


@dataclasses.dataclass(frozen=True)
class _Target:
    """The program SDFG.compile is building (its folder and name, as
    configure_and_compile is called for it) and its publication."""

    folder: str
    name: str
    alias: str
    data: Optional[bytes] = None
    more: Optional[Callable[[dict], Iterable[Tuple[str, bytes]]]] = None


@contextlib.contextmanager
def publishing(resolve):
    """Within it, this thread's next SDFG.compile builds its program under
    resolve()'s Publication, called inside that compile (in the DaCe
    configuration it builds under), without looking the program up by its
    content first; when resolve() returns None, as any other program.
    kiln.gt4py's compilation step (kiln/gt4py.py, _Compile) is the user."""
    _batch.publish = resolve
    try:
        yield
    finally:
        _batch.publish = None


def configure_and_compile(program_folder, program_name=None, output_stream=None,
                          folder_mode=None):
    """DaCe's configure_and_compile, through kiln (same arguments, same
    result: the library's path). Inside compile_many it only records the
    build; compile_many sends them all at once."""
    from dace.codegen import compiler

    call = (program_folder, program_name, output_stream, folder_mode)
    folder = os.path.abspath(program_folder)
    name = program_name or os.path.basename(folder)
    compiled = _compiled_files(folder)
    tools, args, why = _translate(folder, compiled)
    if tools is None:
        return _fallback(why, *call)
    _normalise_hash(folder, name)
    target = getattr(_batch, "target", None)
    if target is None or (target.folder, target.name) != (folder, name):
        target = None   # another program's build (DaCe renamed this one)
    sources = _sources(folder, compiled)
    request = dict(sources=sources, args=args, label="dace " + name,
                   load=False, pch=_pch(), alias=target and target.alias, **tools)
    if target is not None and target.data is not None:
        request["alias_data"] = target.data
    lib = str(compiler.get_binary_name(folder, name, folder_mode=folder_mode))
    b = _Build(call, folder, name, lib, request, target and target.more)
    pending = getattr(_batch, "pending", None)
    if pending is not None:
        pending.append(b)
        return pathlib.Path(lib)
    k = _kiln()
    if k is None:
        stats["fallbacks"] += 1
        return _state["original"](*call)
    b.fetch(k)
    return b.finish()


def compile_many(sdfgs: Iterable[Any]) -> List[Any]:
    """Compiles several SDFGs with their kiln builds in flight together, so
    that kilnd builds the missing ones in parallel (up to its --jobs)
    instead of one after another: code generation runs for each in turn
    (DaCe's code generator is not thread-safe), then every build is sent at
    once, then each program is loaded. Returns their CompiledSDFGs, in
    order. A build that fails raises DaCe's CompilationError (the first, in
    order) once all are back."""
    from concurrent.futures import ThreadPoolExecutor
    import copy
    from dace.codegen import compiler

    sdfgs = list(sdfgs)
    if _state["original"] is None:
        install()
    made = []
    _batch.pending = []
    try:
        for s in sdfgs:
            before = len(_batch.pending)
            s.compile(return_program_handle=False)
            made.append(_batch.pending[before] if len(_batch.pending) > before else None)
    finally:
        pending, _batch.pending = _batch.pending, None
    k = _kiln()
    if pending and k is None:
        # No kilnd: each one as DaCe builds it, to the same place.
        for b in pending:
            stats["fallbacks"] += 1
            _state["original"](*b.call)
        pending = []
    if pending:
        with ThreadPoolExecutor(max_workers=min(len(pending), 64)) as ex:
            list(ex.map(lambda b: b.fetch(k), pending))
    for b in pending:
        b.finish()
    out = []
    for s, b in zip(sdfgs, made):
        if b is None:
            # Nothing to build (DaCe's own cache had it): as SDFG.compile.
            out.append(s.compile())
            continue
        loaded = s
        if b.name != s.name:
            # DaCe renamed the copy it built (a program of that name was
            # loaded already): load under the built name.
            loaded = copy.deepcopy(s)
            loaded.name = b.name
        out.append(compiler.load_precompiled_sdfg(folder=b.folder, sdfg=loaded))
    return out


# Looking a program up before code generation (docs/dace.md, "Found before
# code generation" and "What the alias covers"). The alias names what the
# generated code and its build depend on: the SDFG (its JSON less the
# build folder and the random guids, plus its name; an instrumented one's
# build folder too: _sdfg_id); DaCe's configuration as
# Config.get answers it at that moment, which is three inputs: the stored
# configuration (the file DaCe read, its defaults, every Config.set) but
# the build folder, every DACE_* environment variable (Config.get returns
# os.environ["DACE_" + "_".join(keys)] before the stored value), and the
# configuration file itself (its path and content); the few other variables
# DaCe's code reads that can change code or arguments ($CXX, the GPU
# backend's and library environments' roots); DaCe's code (every file of the
# package by size and mtime), kiln.dace's own code, and the compilers on
# PATH. kilnd answers it only with an entry that the toolchain as configured
# now built and whose every recorded input still holds; anything else is a
# miss, and DaCe generates the code as usual.

# Keys of an SDFG's JSON that code generation never reads: "guid", each
# element's random identity (DaCe's transformations key dictionaries by it
# within one process; nothing generated names it), and "hash", which to_json
# adds on request and which is computed from the rest. Everything else of
# to_json is in the alias, unlike SDFG.hash_sdfg, which also drops every
# "instrument" (an instrumented program generates other code: timers,
# markers, Save/Restore of data) and every "name" (nested SDFGs' names are
# identifiers in the generated code).
_SDFG_JSON_LEFT_OUT = frozenset(("guid", "hash"))


def _without(obj, keys):
    """obj (JSON) with every dictionary's keys in keys removed, at any depth."""
    if isinstance(obj, dict):
        return {k: _without(v, keys) for k, v in obj.items() if k not in keys}
    if isinstance(obj, (list, tuple)):
        return [_without(v, keys) for v in obj]
    return obj


def _instrumented(obj):
    """Whether an SDFG's JSON asks for any instrumentation (an "instrument"
    or "symbol_instrument" of the SDFG, a state, a node, a map, an access
    node's data instrumentation) other than No_Instrumentation: its
    generated code then names the build folder (the report's folder,
    <build folder>/perf; data instrumentation's <build folder>/data)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if (isinstance(k, str) and k.endswith("instrument") and isinstance(v, str)
                    and v not in ("", "No_Instrumentation")):
                return True
            if isinstance(v, (dict, list)) and _instrumented(v):
                return True
    elif isinstance(obj, list):
        return any(_instrumented(v) for v in obj)
    return False


def _sdfg_id(sdfg):
    """What code generation reads of sdfg, as a digest: its JSON (to_json:
    every property, instrumentation included) less the guids, its hash and
    its build folder; plus, for an instrumented program, the build folder
    by absolute path (the generated code writes its reports there, so
    such a program is one alias per folder)."""
    import hashlib

    j = sdfg.to_json()
    j.get("attributes", {}).pop("build_folder", None)
    j = _without(j, _SDFG_JSON_LEFT_OUT)
    h = hashlib.sha256(json.dumps(j, sort_keys=True, default=str).encode())
    if _instrumented(j):
        h.update(b"\0instrumented in " + os.path.abspath(sdfg.build_folder).encode())
    return h.hexdigest()


def _content_alias(sdfg):
    """The alias of sdfg's program, or None when it cannot be computed."""
    import hashlib
    from dace.config import Config

    try:
        config = json.loads(json.dumps(Config._data._config, default=str))
        config.pop("default_build_folder", None)
        h = hashlib.sha256(b"sdfg json 2\0")
        for part in (_sdfg_id(sdfg), sdfg.name, _session.dace_code(),
                     json.dumps(config, sort_keys=True), _session.environment_id(), _session.config_file_id()):
            h.update(part.encode() + b"\0")
        return "dace:" + h.hexdigest()
    except Exception:  # an SDFG that does not serialise: no alias, no harm
        return None


def _uses_gpu(sdfg):
    """Whether kiln.dace will build sdfg with nvcc (a guess before code
    generation; a wrong one only makes the lookup miss)."""
    text = json.dumps(sdfg.to_json())
    return "GPU_Device" in text or "GPU_Global" in text


def _found(sdfg, alias):
    """sdfg's program found under alias and placed for DaCe's loader, with
    its CompiledSDFG; None on a miss."""
    from dace.codegen import compiler

    folder = os.path.abspath(sdfg.build_folder)
    mode = compiler.get_folder_mode(folder, probe=True)
    from dace.config import Config
    mode = mode or Config.get("compiler", "build_folder_mode")
    lib = str(compiler.get_binary_name(folder, sdfg.name, folder_mode=mode))
    if os.path.exists(lib) or sdfg.is_loaded(folder_mode=mode):
        return None  # DaCe's own cache, or a second copy: DaCe decides
    k = _kiln()
    if k is None:
        return None
    try:
        tools, _ = _session.compilers(_uses_gpu(sdfg))
        if tools is None:
            return None
        prog = k.lookup(alias, load=False, **tools)
        stub = _session.stub(k)
    except KilnError:
        return None
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "FOLDER_MODE"), "w") as f:
        f.write(mode + "\n")
    _session.place(prog.path, lib)
    _session.place(stub.path, os.path.join(os.path.dirname(lib), "libdacestub_%s.so" % sdfg.name))
    stats["looked_up"] += 1
    return compiler.load_precompiled_sdfg(folder=folder, sdfg=sdfg)


def _compile(self, output_file=None, validate=True, return_program_handle=True):
    """SDFG.compile through kiln: first by content (no code generation),
    else as DaCe does, with the content alias recorded for next time."""
    resolve, _batch.publish = getattr(_batch, "publish", None), None
    publication = resolve() if callable(resolve) else None
    if publication is not None:
        # kiln.gt4py's program: built under its alias, with its data
        return _compile_as(self, publication, output_file, validate, return_program_handle)
    alias = _content_alias(self) if self.regenerate_code else None
    lookup = os.environ.get("KILN_DACE_LOOKUP", "1") != "0"
    if alias is not None and lookup and return_program_handle and output_file is None:
        try:
            found = _found(self, alias)
        except OSError:
            found = None
        if found is not None:
            return found
    if alias is None:
        return _state["compile"](self, output_file, validate, return_program_handle)
    return _compile_as(self, Publication(alias), output_file, validate, return_program_handle)


def _compile_as(sdfg, publication, output_file, validate, return_program_handle):
    """DaCe's SDFG.compile, its build published under publication."""
    _batch.target = _Target(os.path.abspath(sdfg.build_folder), sdfg.name,
                            publication.alias, publication.data, publication.more)
    try:
        return _state["compile"](sdfg, output_file, validate, return_program_handle)
    finally:
        _batch.target = None
