"""
The process's kiln session, shared by kiln.dace and kiln.gt4py (docs/python.md,
"The integrations' layout"): the connection to kilnd, the compilers DaCe
names, where an artifact is placed for DaCe's loader, and the code identity
both integrations' aliases are built on. One owner, so that the two
integrations cannot disagree about which kilnd they talk to, which compiler a
program is built with, or what "kiln's code" is.

Nothing here patches a framework (kiln/_gt4py_patches.py does, for GT4Py;
kiln/dace.py for DaCe).
"""

import hashlib
import json
import os
import pathlib
import shutil
import sys
import threading

from .client import Kiln
from .errors import KilnError

_lock = threading.Lock()
_state = {"kiln": None, "socket": None, "unavailable": None, "dace_code": None,
          "kiln_code": None, "stub": None}


# ---- the connection --------------------------------------------------------

def set_socket(socket):
    """kilnd's socket for this process's session (None: libkiln's default,
    $KILN_SOCKET or the per-user one). A connection made already stays."""
    with _lock:
        _state["socket"] = socket


def socket():
    return _state["socket"]


def connection():
    """The process's connection to kilnd, or None when no kilnd answers
    (and none could be started: $KILN_AUTOSPAWN): then DaCe builds as it
    always does, after one line on stderr (docs/dace.md)."""
    with _lock:
        if _state["kiln"] is None and _state["unavailable"] is None:
            try:
                _state["kiln"] = Kiln(_state["socket"]) if _state["socket"] else Kiln()
            except KilnError as e:
                _state["unavailable"] = e.message or str(e)
                say("no kilnd: %s; DaCe builds as usual in this process"
                    % _state["unavailable"])
            except OSError as e:
                # libkiln itself is missing (not on the loader path, no
                # $KILN_LIBRARY): the job goes on, without kiln (issue 49)
                _state["unavailable"] = str(e)
                say("%s; DaCe builds as usual in this process" % e)
        return _state["kiln"]


def new_connection():
    """A connection of the caller's own (a claim held on it ends with it),
    or None."""
    try:
        return Kiln(_state["socket"]) if _state["socket"] else Kiln()
    except (KilnError, OSError):
        return None


def say(msg, who="kiln.dace"):
    print("%s: %s" % (who, msg), file=sys.stderr, flush=True)


# ---- the compilers ---------------------------------------------------------

def absolute(prog):
    """A compiler as DaCe names it (a path, or a name looked up on PATH), by
    absolute path as kilnd is given it; None when there is none."""
    if not prog:
        return None
    found = prog if os.sep in prog else shutil.which(prog)
    return os.path.abspath(found) if found and os.access(found, os.X_OK) else None


def host_compiler():
    """DaCe's host compiler (compiler_family.host_compiler: the
    configuration, else $CXX, else c++), by absolute path, or None."""
    from dace.codegen import compiler_family

    return absolute(compiler_family.host_compiler())


def nvcc():
    """The nvcc DaCe's CMake finds: compiler.cuda.path's, else nvcc on
    PATH, else CUDA's default place; by absolute path, or None."""
    from dace.config import Config

    toolkit = Config.get("compiler", "cuda", "path")
    if toolkit:
        return absolute(os.path.join(toolkit, "bin", "nvcc"))
    return absolute("nvcc") or absolute("/usr/local/cuda/bin/nvcc")


def compilers(cuda):
    """({"toolchain": ..., "host_compiler": ...}, None) for kilnd: DaCe's
    compilers by path; or (None, why) when one is missing."""
    from dace.codegen import compiler_family

    cxx = host_compiler()
    if cxx is None:
        return None, "DaCe's compiler %s is not found" % compiler_family.host_compiler()
    if not cuda:
        return {"toolchain": cxx}, None
    found = nvcc()
    if found is None:
        return None, "DaCe's nvcc is not found (compiler.cuda.path, PATH, /usr/local/cuda)"
    return {"toolchain": found, "host_compiler": cxx}, None


def tools(gpu):
    """compilers(gpu)'s request fields, or None (none usable, or DaCe's
    configuration names none)."""
    try:
        found, _ = compilers(gpu)
    except Exception:
        return None
    return found


# ---- placing an artifact for DaCe's loader ---------------------------------

def place(src, dst):
    """A private copy of kiln's artifact where DaCe loads it: never a link,
    so a loader that copies or unlinks it never touches kiln's cache."""
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    tmp = "%s.kiln%d" % (dst, os.getpid())
    shutil.copyfile(src, tmp)
    os.chmod(tmp, 0o755)
    os.replace(tmp, dst)


def stub(k):
    """DaCe's loader stub (the same for every program), built through kiln."""
    from dace.codegen import compiler

    src = os.path.join(os.path.dirname(compiler.__file__), "tools", "dacestub.cpp")
    return k.get(toolchain=host_compiler() or "c++", sources={"dacestub.cpp": pathlib.Path(src)},
                 args=["-O2", "-fopenmp", "-ldl"], label="dace stub", load=False)


def stub_path():
    """The loader stub's file, through kiln once per process."""
    with _lock:
        path = _state["stub"]
    if path is None:
        path = stub(connection()).path
        with _lock:
            _state["stub"] = path
    return path


def forget_stub():
    """The stub's file may be what went (evicted): ask kilnd again next time."""
    with _lock:
        _state["stub"] = None


# ---- code identity ---------------------------------------------------------

def file_id(h, path):
    """A file by real path, size and modification time into hash h."""
    try:
        st = os.stat(path)
        h.update(("%s\0%d\0%d\n" % (os.path.realpath(path), st.st_size, st.st_mtime_ns)).encode())
    except OSError:
        h.update(("%s\0missing\n" % path).encode())


def package_id(h, module):
    """A package's files by path below the package's real directory, size
    and modification time: one stat per file (os.scandir, the directory's
    real path resolved once), about what importing them costs. A file
    that is itself a symbolic link is named by its target's real path."""
    root = os.path.realpath(os.path.dirname(os.path.abspath(module.__file__)))
    h.update(("package %s\n" % root).encode())
    _tree_id(h, root, "")


def _tree_id(h, top, rel):
    try:
        with os.scandir(os.path.join(top, rel) if rel else top) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        h.update(("%s\0unreadable\n" % rel).encode())
        return
    for e in entries:
        name = os.path.join(rel, e.name) if rel else e.name
        try:
            if e.is_dir():
                if e.name != "__pycache__":
                    _tree_id(h, top, name)
                continue
            if e.name.endswith((".pyc", ".pyo")):
                continue
            st = e.stat()
        except OSError:
            h.update(("%s\0missing\n" % name).encode())
            continue
        if e.is_symlink():
            name = os.path.realpath(e.path)
        h.update(("%s\0%d\0%d\n" % (name, st.st_size, st.st_mtime_ns)).encode())


def kiln_code():
    """kiln's own Python code, every module of the package by content, once
    per process: an edit of any of them (the integrations, the session, the
    client) is another alias."""
    with _lock:
        if _state["kiln_code"] is None:
            h = hashlib.sha256(b"kiln python 1\0")
            root = os.path.dirname(os.path.abspath(__file__))
            for name in sorted(os.listdir(root)):
                if name.endswith(".py"):
                    with open(os.path.join(root, name), "rb") as f:
                        h.update(name.encode() + b"\0" + f.read() + b"\0")
            _state["kiln_code"] = h.hexdigest()
        return _state["kiln_code"]


def dace_code():
    """DaCe's and kiln's code and the compilers on PATH, once per process."""
    import dace

    with _lock:
        code = _state["dace_code"]
    if code is None:
        h = hashlib.sha256(("dace %s\n" % dace.__version__).encode())
        package_id(h, dace)
        h.update(kiln_code().encode())
        for prog in ("c++", "nvcc", "gcc"):
            file_id(h, shutil.which(prog) or prog)
        for prog in (host_compiler(), nvcc()):
            file_id(h, prog or "none")
        code = h.hexdigest()
        with _lock:
            _state["dace_code"] = code
    return code


# Variables DaCe reads itself (os.environ, not through Config) that decide
# the generated code or the arguments kiln.dace builds with: $CXX picks the
# host compiler when compiler.cpu.executable is empty (compiler_family);
# CUDA_HOME and HIP_PLATFORM pick the GPU backend when compiler.cuda.backend
# is "auto" (codegen/common.py); ROCM_PATH, MKLROOT, CONDA_PREFIX and
# HPTT_ROOT give library environments and instrumentation their include
# and library directories, which become arguments. Those DaCe reads that
# cannot change either are left out: the launchers' rank variables
# (SLURM_PROCID, OMPI_COMM_WORLD_RANK, ...) only name a per-rank build
# folder (sdfg.build_folder_root) and share an auto-tuner's work between
# ranks (optimization/utils), and TORCH_EXTENSIONS_DIR only says where
# PyTorch builds its own extensions; leaving the rank variables out is what
# lets every rank of a job share one alias.
ALIAS_ENV = ("CXX", "CUDA_HOME", "HIP_PLATFORM", "ROCM_PATH", "MKLROOT", "CONDA_PREFIX",
             "HPTT_ROOT")

# DACE_* variables left out of the alias, by the exact name DaCe reads
# (any other spelling of them is covered, at worst a miss): neither can
# change the generated code or its build. DACE_default_build_folder is the
# build folder, which the stored configuration's copy and the SDFG's hash
# leave out too (include/hash.h is rewritten without it; kiln.dace makes
# the tree folder-independent), so that ranks with their own folders share
# one alias. DACE_BUILD_CACHE_DIR is where DaCe's own CMake build keeps its
# advisory caches (configure results, its .gch, compile commands;
# compiler.build_cache_root: "a miss costs speed, never correctness"), and
# kiln.dace does not run that build: a fallback records no alias.
ALIAS_ENV_LEFT_OUT = frozenset(("DACE_default_build_folder", "DACE_BUILD_CACHE_DIR"))


def environment_id():
    """The environment variables that can decide DaCe's configuration or
    build, as JSON: every variable whose name starts with DACE_ in any case
    (DaCe reads the exact "DACE_<section>_<key>" only, but a variable that
    differs only in case or that names no key today costs at most a miss),
    and those of ALIAS_ENV. Name and value, sorted, so that a variable set
    to the empty string differs from one that is unset."""
    return json.dumps(sorted([k, v] for k, v in os.environ.items()
                             if (k.upper().startswith("DACE_") and k not in ALIAS_ENV_LEFT_OUT)
                             or k in ALIAS_ENV))


def config_file_id():
    """The configuration file this thread's DaCe read (config.py's
    _initialize: ./.dace.conf of the working directory, else $DACE_CONFIG,
    else ~/.dace.conf), by path and content digest. What DaCe took from it
    is in the stored configuration already; the file is covered as well so
    that another file, or the file edited since (which DaCe reads again on
    Config.load() and in every new thread, its configuration being
    thread-local), is a miss whatever the stored configuration's JSON copy
    (default=str) loses of YAML's types."""
    from dace.config import Config

    name = Config.cfg_filename()
    if name is None:
        return "config file: none read (defaults)"
    # DaCe names ./.dace.conf relative to the working directory it started
    # in; made absolute against today's, it may name another directory's
    # file: at worst a miss, as what DaCe read is in the stored configuration.
    path = os.path.abspath(name)
    try:
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
    except OSError:
        digest = "absent"
    return "config file: %s %s" % (path, digest)


def dace_config():
    """DaCe's stored configuration as JSON, less the build folder."""
    from dace.config import Config

    config = json.loads(json.dumps(Config._data._config, default=str))
    config.pop("default_build_folder", None)
    return config
