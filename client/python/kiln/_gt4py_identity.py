"""
kiln.gt4py's alias of a program (docs/gt4py.md, "What the alias covers"):
GT4Py's strict fingerprint of the program, what that key leaves out for a
cache shared by jobs and nodes (the workflow's steps and settings with every
callable by its code: steps_id, _settings_fingerprint; GT4Py's, DaCe's and
kiln's code, Python, the CPU, the compilers: code), and what the build reads
as it reads it (build_view). Pure: no connection, no patch.
"""

import json
import os
import sys

from . import _session

_state = {"code": None, "fingerprinter": None}

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


def code():
    """What decides a program and cannot change while the process runs,
    once per process: GT4Py's and DaCe's code, kiln's, Python, the CPU,
    the compilers."""
    import hashlib
    import gt4py

    if _state["code"] is None:
        h = hashlib.sha256(b"kiln.gt4py 2\0")
        h.update(("gt4py %s\0python %s\0" % (gt4py.__version__, sys.version)).encode())
        _session.package_id(h, gt4py)
        # kiln's code (every module of the package) is in DaCe's identity
        h.update(_session.dace_code().encode())
        h.update(_cpu().encode())
        _state["code"] = h.hexdigest()
    return _state["code"]


def build_view(step, inside=False):
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
            return build_view(step, inside=True)
    from gt4py.next import config as gt_config

    config = _session.dace_config()
    gt = sorted([n, str(v)] for n, v in vars(gt_config).items()
                if n.isupper() and not n.startswith("_") and n not in _CONFIG_LEFT_OUT
                and not callable(v) and not isinstance(v, type))
    return "\0".join((
        _session.environment_id(), _session.config_file_id(),
        json.dumps(sorted([k, v] for k, v in os.environ.items()
                          if k.upper().startswith("GT4PY_") and k not in _ENV_LEFT_OUT)),
        json.dumps([[k, os.environ.get(k)] for k in _BUILD_ENV]),
        json.dumps(gt), json.dumps(config, sort_keys=True)))


def steps_id(executor, step):
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


def _sha256_aggregator(deconstruction):
    """GT4Py's fingerprint aggregator (fingerprinting.fingerprint_aggregator)
    with SHA-256 in place of xxh64: a 64-bit digest that is not meant to
    resist collisions must not decide which library a program gets."""
    import hashlib

    h = hashlib.sha256(b"node\0")
    state = deconstruction.state
    h.update(state.encode() if isinstance(state, str) else bytes(state))
    h.update(b"pieces\0")
    for digest in deconstruction.pieces:   # fixed-length digests: unambiguous
        h.update(digest.encode("ascii"))
    return h.hexdigest()


def fingerprint(obj):
    """GT4Py's strict fingerprint of obj (its deconstruction: a program with
    its argument types, static arguments, column axis and offset provider,
    connectivity tables by content), aggregated with SHA-256."""
    if _state.get("fingerprinter") is None:
        from gt4py.next import fingerprinting
        _state["fingerprinter"] = fingerprinting.make_fingerprinter(
            deconstructor=fingerprinting.strict_fingerprint_deconstructor,
            aggregator=_sha256_aggregator)
    return _state["fingerprinter"](obj)


def prefix(executor, step, program):
    """The part of a program's alias that its lowering cannot change
    (program: fingerprint() of what GT4Py lowers, or of what its IR passes
    made of it: kiln/_gt4py_translated.py)."""
    import hashlib

    h = hashlib.sha256(b"kiln.gt4py prefix 3\0")
    for part in (code(), steps_id(executor, step), program):
        h.update(part.encode() + b"\0")
    return h.hexdigest()


def alias(prefix, view):
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
        _session.file_id(h, real)
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
            _session.file_id(h, os.path.realpath(path))
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
        _FINGERPRINTER.append(fp.make_fingerprinter(deconstructor=deconstructor,
                                                    aggregator=_sha256_aggregator))
    try:
        return _FINGERPRINTER[0](obj)
    except Unidentified as e:
        raise Unidentified("its workflow's settings hold code kiln cannot identify (%s)"
                           % e) from None


