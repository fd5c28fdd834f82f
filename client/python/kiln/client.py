"""
Kiln, a connection to kilnd, and Program, a loaded artifact: the Python face
of struct kiln and struct kiln_program. Requests are built as the C structs
of kiln.h, with every buffer they point into held by Python until the call
returns. ctypes drops the GIL around each libkiln call, so threads sharing
one Kiln really do have their requests in flight together, as in C.
"""

import base64
import collections
import contextlib
import ctypes
import os
import threading
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _lib
from .errors import error_for, invalid

# libkiln's malloc'ed strings go back to the C library's free().
_libc_free = ctypes.CDLL(None).free
_libc_free.argtypes = [ctypes.c_void_p]
_libc_free.restype = None

__all__ = ["Kiln", "Program", "KilnStats"]

KilnStats = collections.namedtuple("KilnStats", "requests local_hits loads")
KilnStats.__doc__ = """Counters of one Kiln (kiln_get_stats): requests sent to the
daemon, calls answered by the process-local alias table, artifacts loaded."""

# dlopen mode that finds an object already loaded in the process and never
# loads one (ctypes adds RTLD_NOW).
_NOLOAD = getattr(os, "RTLD_NOLOAD", 4) | getattr(os, "RTLD_LOCAL", 0)


def _noload(names):
    """A ctypes.CDLL for an object that libkiln already loaded, or None.

    libkiln does not hand out its dlopen handle, so take a second reference
    to the same object: dlopen with RTLD_NOLOAD returns the loaded object
    that the name belongs to, and never loads anything. Program.release()
    drops it when libkiln unloads the program.
    """
    for name in names:
        try:
            return ctypes.CDLL(name, mode=_NOLOAD)
        except OSError:
            continue
    return None


class _KilnSymbols(ctypes.CDLL):
    """A ctypes.CDLL whose symbols come from kiln_sym instead of a dlopen
    handle of its own; only used where RTLD_NOLOAD found nothing, and only
    while the Kiln is open."""

    def __init__(self, kiln, handle, name):
        # handle=0: CDLL must not dlopen anything; __getitem__ resolves.
        super().__init__(name, handle=0)
        self._kiln_owner = kiln
        self._kiln_program = handle

    def __getitem__(self, name_or_ordinal):
        if not isinstance(name_or_ordinal, str):
            raise TypeError("symbols are looked up by name")
        with self._kiln_owner._using():
            addr = self._kiln_owner._c.kiln_sym(self._kiln_program, name_or_ordinal.encode())
        if not addr:
            raise AttributeError("%s: undefined symbol: %s" % (self._name, name_or_ordinal))
        func = self._FuncPtr(addr)
        func.__name__ = name_or_ordinal
        return func


class Program:
    """A program (artifact) that kilnd built or found, loaded in this process
    (or, from get(..., load=False), only got as a file).

    key     the artifact's key, 64 hex digits
    path    its real path in the cache (read-only: load it, or copy it)
    fd      a read-only descriptor of it, open until the Kiln is closed
            (-1 after)
    output  "shared", or for nvcc "cubin", "fatbin" or "ptx"
    loaded  False for a program got with load=False (lib and data None)
    lib     for a loaded shared library, a ctypes.CDLL of the loaded object:
            lib.entry or lib["entry"] is a function with restype c_int,
            whose restype and argtypes you set as with any CDLL; None for
            GPU outputs
    data    for a GPU output, its bytes; None for a shared library
    log     the compiler's output of the build that made it (warnings;
            "" when the compiler said nothing), None when the cache no
            longer has it

    A Program stays usable after its Kiln is closed: the object is not
    unloaded unless release() gives back its last reference, and everything
    above was taken while the Kiln was open. Programs are made by Kiln.get,
    get_many and lookup only; one artifact is one Program object per Kiln.
    """

    __slots__ = ("key", "path", "output", "lib", "loaded", "_kiln", "_handle", "_data_addr",
                 "_data_size", "_data", "__weakref__")

    def __init__(self, kiln, handle, loaded=True):
        c = kiln._c
        raw_path = c.kiln_program_path(handle)
        self._kiln = kiln
        self._handle = handle
        self.key = _lib.decode(c.kiln_program_key(handle))
        self.path = os.fsdecode(raw_path)
        self.output = _lib.decode(c.kiln_program_output(handle)) or "shared"
        self.loaded = loaded
        self.lib = None
        self._data = None
        self._data_addr = None
        self._data_size = 0
        if not loaded:
            return
        if self.output == "shared":
            fd = c.kiln_program_fd(handle)
            # libkiln loaded the path, or, when the path no longer named the
            # file it was sent, /proc/self/fd/N, keeping N open for good.
            # The path goes first: a /proc name that libkiln did not load
            # would match the object by inode and be added to its names,
            # and after N is closed and reused, a later dlopen of that name
            # (libkiln's own too) would return this object for another file.
            names = [self.path] + (["/proc/self/fd/%d" % fd] if fd >= 0 else [])
            self.lib = _noload(names) or _KilnSymbols(kiln, handle, self.path)
        else:
            size = ctypes.c_size_t(0)
            self._data_addr = c.kiln_program_data(handle, ctypes.byref(size))
            self._data_size = size.value

    @property
    def fd(self):
        """The artifact's read-only descriptor (kiln_program_fd), valid
        while the Kiln is open; -1 once it is closed."""
        if self._kiln.closed:
            return -1
        return self._kiln._c.kiln_program_fd(self._handle)

    @property
    def log(self) -> Optional[str]:
        """The compiler's output of the build that made this program, as
        `kiln log KEY` prints it: read from the cache's logs/KEY.log (the
        store's layout: objects/xx/KEY.ext beside logs/). "" when the
        compiler said nothing; None when the log is gone (an imported
        entry, or one evicted since)."""
        objects = os.path.dirname(os.path.dirname(self.path))
        log = os.path.join(os.path.dirname(objects), "logs", self.key + ".log")
        try:
            with open(log, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return None

    @property
    def data(self):
        """The bytes of a GPU output (a copy of libkiln's read-only mapping,
        which lasts for the life of the process); None for a shared
        library."""
        if self._data is None and self._data_addr:
            self._data = ctypes.string_at(self._data_addr, self._data_size)
        return self._data

    def release(self) -> None:
        """Gives back one reference to the loaded program (kiln_release):
        every get, get_many and lookup that returned it loaded took one.
        When the last goes, the program leaves the process (its library is
        closed, here and in libkiln), lib and data become None and loaded
        False; a later get loads it afresh, with fresh globals, as a new
        Program. Do not call into the library after that. Raises
        InvalidRequest when the program holds no reference."""
        c = self._kiln._c
        with self._kiln._using() as k:
            rc = c.kiln_release(k, self._handle)
            if rc != _lib.KILN_OK:
                raise self._kiln._fail(rc, k)
            if c.kiln_program_loaded(self._handle):
                return
        lib, self.lib = self.lib, None
        self.loaded = False
        self._data = self._data_addr = None
        self._data_size = 0
        # The second reference _noload took: without it the object stays.
        if lib is not None and not isinstance(lib, _KilnSymbols) and lib._handle:
            import _ctypes
            _ctypes.dlclose(lib._handle)

    def sym(self, name: str) -> Optional[int]:
        """The address of a symbol as an int (kiln_sym), None when the
        program has none of that name or is a GPU output."""
        if self.lib is None:
            return None
        try:
            f = self.lib[name]
        except AttributeError:
            return None
        return ctypes.cast(f, ctypes.c_void_p).value

    def __repr__(self):
        return "<kiln.Program %s %s %s>" % (self.output, self.key[:12], self.path)


def _cstr(value, what):
    """str (or bytes) as NUL-free bytes for a char * field; None stays None."""
    if value is None:
        return None
    if isinstance(value, str):
        value = value.encode("utf-8")
    elif not isinstance(value, bytes):
        raise TypeError("%s must be a str, not %s" % (what, type(value).__name__))
    if b"\0" in value:
        raise invalid("%s contains a NUL character" % what)
    return value


def _source(src, name, value):
    """Fills one struct kiln_source; returns the Python objects it points into."""
    src.name = _cstr(name, "a source name")
    if isinstance(value, (str, bytes, bytearray, memoryview)):
        text = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        # A NUL in the text is refused by libkiln itself (len covers it).
        src.text = text
        src.len = len(text)
        return (src.name, text)
    if isinstance(value, os.PathLike):
        path = os.fsencode(os.path.abspath(os.fspath(value)))
        if b"\0" in path:
            raise invalid("the path of source %r contains a NUL character" % name)
        src.path = path
        return (src.name, path)
    raise TypeError("source %r must be text (str or bytes) or a path (pathlib.Path), not %s"
                    % (name, type(value).__name__))


def _strings(values, field, kind, what, keep):
    """A char *[] for a list of strings (its pointer and length), kept alive
    in keep; (None, 0) for an empty one."""
    if isinstance(values, (str, bytes)):
        raise TypeError("%s must be %s, not one string" % (field, kind))
    cvals = [_cstr(v, what) for v in (values or ())]
    if not cvals:
        return None, 0
    arr = (ctypes.c_char_p * len(cvals))(*cvals)
    keep += [arr, cvals]
    return arr, len(cvals)


def _fill_request(req, toolchain=None, sources=None, args=(), output="shared",
                  alias=None, label=None, pch=(), host_compiler=None):
    """Fills a struct kiln_request; returns what must stay alive during the
    call."""
    keep = []
    req.toolchain = _cstr(toolchain, "toolchain")
    req.output = _cstr(output, "output")
    req.alias = _cstr(alias, "alias")
    req.label = _cstr(label, "label")
    req.host_compiler = _cstr(host_compiler, "host_compiler")
    req.args, req.nargs = _strings(args, "args", "a list of arguments", "an argument", keep)
    req.pch, req.npch = _strings(pch, "pch", "a list of header names", "a pch header", keep)
    items = list(dict(sources or {}).items())
    if items:
        arr = (_lib.Source * len(items))()
        for i, (name, value) in enumerate(items):
            keep.append(_source(arr[i], name, value))
        req.sources = arr
        req.nsources = len(items)
        keep.append(arr)
    keep += [req.toolchain, req.output, req.alias, req.label, req.host_compiler]
    return keep


class Kiln:
    """A connection to kilnd (struct kiln), shared by all threads.

    Kiln(socket=None) connects to the kilnd at socket: a path, else
    $KILN_SOCKET, else $XDG_RUNTIME_DIR/kiln/kilnd.sock, else
    /tmp/kiln-<uid>/kilnd.sock. With autospawn=True (or $KILN_AUTOSPAWN=1) a
    kilnd is started when none answers: kilnd names the one to start (else
    $KILN_KILND, else the installed one), cache_dir its --cache-dir.
    timeout is the deadline, in seconds, for a kilnd that sends nothing
    while a call waits (stopped, wedged or gone: KilnIOError); kilnd sends a
    heartbeat every 5 s, so long builds never trip it. Default
    $KILN_TIMEOUT, else 60; 0 waits for ever (kiln_set_timeout).
    Raises ConnectError when no daemon answers.

    Use it as a context manager, or call close(). Every method is
    thread-safe; close() waits for calls in progress in other threads.
    """

    def __init__(self, socket: Optional[str] = None, *, autospawn: bool = False,
                 kilnd: Optional[str] = None, cache_dir: Optional[str] = None,
                 timeout: Optional[float] = None) -> None:
        self._c = _lib.load()
        self._k = None
        self._cond = threading.Condition()
        self._busy = 0
        self._closed = True
        self._programs = {}
        handle = _lib.KilnP()
        sock = os.fsencode(socket) if socket is not None else None
        if autospawn or kilnd is not None or cache_dir is not None:
            opts = _lib.Options()
            opts.socket_path = sock
            opts.autospawn = 1 if autospawn else 0
            opts.kilnd_path = os.fsencode(kilnd) if kilnd is not None else None
            opts.cache_dir = os.fsencode(cache_dir) if cache_dir is not None else None
            rc = self._c.kiln_open_with(ctypes.byref(opts), ctypes.byref(handle))
        else:
            rc = self._c.kiln_open(sock, ctypes.byref(handle))
        if rc != _lib.KILN_OK:
            raise error_for(rc, _lib.decode(self._c.kiln_errmsg(None)))
        self._k = handle.value
        self._closed = False
        self.socket = os.fsdecode(socket) if socket is not None else None
        if timeout is not None:
            try:
                self.set_timeout(timeout)
            except BaseException:
                self.close()
                raise

    def set_timeout(self, seconds: float) -> None:
        """Sets the deadline for a silent kilnd (kiln_set_timeout): a call
        fails with KilnIOError when kilnd sends nothing for this long; 0
        waits for ever. Raises InvalidRequest for a negative value."""
        with self._using() as k:
            rc = self._c.kiln_set_timeout(k, float(seconds))
            if rc != _lib.KILN_OK:
                raise self._fail(rc, k)

    # The handle's life: calls count themselves in and out, so that close()
    # never frees it under a call (kiln.h forbids that).
    @contextlib.contextmanager
    def _using(self):
        with self._cond:
            if self._closed:
                raise ValueError("operation on a closed Kiln")
            self._busy += 1
        try:
            yield self._k
        finally:
            with self._cond:
                self._busy -= 1
                if self._busy == 0:
                    self._cond.notify_all()

    def _fail(self, rc, k):
        # kiln_errmsg is per thread, and this is the thread that failed.
        return error_for(rc, _lib.decode(self._c.kiln_errmsg(k)))

    def _program(self, handle, loaded=True):
        with self._cond:
            prog = self._programs.get(handle)
        # A program got as a file before is replaced once it is loaded.
        if prog is None or (loaded and not prog.loaded):
            new = Program(self, handle, loaded)
            with self._cond:
                prog = self._programs.get(handle)
                if prog is None or (loaded and not prog.loaded):
                    self._programs[handle] = prog = new
        return prog

    @property
    def closed(self):
        return self._closed

    def close(self) -> None:
        """Closes the connection (kiln_close). Loaded programs stay loaded
        and their Program objects usable. Idempotent; waits for calls that
        other threads have in progress."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            while self._busy:
                self._cond.wait()
            k, self._k = self._k, None
        self._c.kiln_close(k)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        # Only reached with no call in progress: a call holds a reference.
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        state = "closed" if self._closed else "open"
        return "<kiln.Kiln %s socket=%r>" % (state, self.socket)

    def get(self, toolchain: Optional[str] = None,
            sources: Optional[Mapping[str, Union[str, bytes, "os.PathLike[str]"]]] = None,
            args: Sequence[str] = (), output: str = "shared", alias: Optional[str] = None,
            label: Optional[str] = None, load: bool = True,
            pch: Sequence[str] = (), host_compiler: Optional[str] = None,
            alias_data: Optional[bytes] = None) -> "Program":
        """Gets the program for a request, building it in kilnd if needed,
        and loads it (kiln_get); with load=False only gets it as a file
        (kiln_get_file: Program.fd and Program.path, for a framework that
        loads libraries itself).

        toolchain  a toolchain kilnd is configured with: "cc", "c++",
                   "nvcc"; or a compiler by absolute path
                   ("/opt/gcc/bin/g++"), which kilnd identifies on first use
                   (docs/client.md says who may name which); None (the
                   default) picks one by the first compiled source's
                   extension, as the CLI and libkiln do: "c++" for .cpp,
                   .cc, .cxx, .C, "nvcc" for .cu, else "cc"
        host_compiler  nvcc's host compiler by absolute path (nvcc's
                   -ccbin); None: kilnd's NVCC_CCBIN, else gcc on its PATH
        sources    {file name: text (str or bytes) or pathlib.Path}; the
                   file name's extension picks the language; a Path is sent
                   as an absolute path for kilnd to read
        args       extra compiler arguments, e.g. ["-O3", "-DN=64"]
        output     "shared" (default); for nvcc "cubin", "fatbin", "ptx"
        alias      optional stable name of the program (e.g. a code
                   generator's hash); later lookups need no sources
        label      optional human-readable name for `kiln ls`
        pch        optional headers for kilnd to precompile once and use in
                   later builds with the same toolchain and arguments, named
                   as #include <...> names them (["dace/dace.h"]); they are
                   included first in every compiled source of their language
                   (gcc's -include; docs/pch.md)
        alias_data bytes stored with alias (at most 3 MiB; with alias and
                   load=False only): what using the program needs besides
                   the artifact, returned by lookup_data() while the alias
                   names this artifact (docs/protocol.md, "alias_data")

        Returns a Program. Raises BuildError with the compiler's output,
        InvalidRequest (a ValueError) for a request libkiln refuses before
        sending it, Refused for one kilnd refuses, and the other KilnErrors.
        """
        req = _lib.Request()
        keep = _fill_request(req, toolchain, sources, args, output, alias, label, pch,
                             host_compiler)
        out = _lib.ProgramP()
        if alias_data is not None and (load or alias is None):
            raise ValueError("alias_data= goes with alias= and load=False")
        data = base64.b64encode(bytes(alias_data)) if alias_data is not None else None
        with self._using() as k:
            if data is not None:
                rc = self._c.kiln_get_file_data(k, ctypes.byref(req), data, ctypes.byref(out))
            else:
                call = self._c.kiln_get if load else self._c.kiln_get_file
                rc = call(k, ctypes.byref(req), ctypes.byref(out))
            if rc != _lib.KILN_OK:
                raise self._fail(rc, k)
            del keep
            return self._program(out.value, loaded=load)

    def get_many(self, requests: Iterable[Mapping[str, Any]],
                 return_exceptions: bool = False) -> List[Any]:
        """Gets many programs at once (kiln_get_many): all requests are in
        flight together, so kilnd builds the missing ones in parallel.

        requests is a list of dicts of get()'s keyword arguments. Returns
        the Programs in order. When one fails, raises the error of the
        first failing one (by index), whose message starts "request I: ";
        with return_exceptions=True, the list holds the exception in place
        of each failed Program instead (libkiln has the detailed text for
        the first failure only; the others carry their status).
        """
        requests = list(requests)
        n = len(requests)
        if n == 0:
            return []
        reqs = (_lib.Request * n)()
        keep = [_fill_request(reqs[i], **r) for i, r in enumerate(requests)]
        out = (_lib.ProgramP * n)()
        status = (ctypes.c_int * n)()
        with self._using() as k:
            rc = self._c.kiln_get_many(k, reqs, n, out, status)
            first = self._fail(rc, k) if rc != _lib.KILN_OK else None
            del keep
            result = []
            for i in range(n):
                if status[i] == _lib.KILN_OK and out[i]:
                    result.append(self._program(out[i]))
                elif first is not None and first.code == status[i] and \
                        first.message.startswith("request %d: " % i):
                    result.append(first)
                else:
                    code = status[i] if status[i] != _lib.KILN_OK else _lib.KILN_EIO
                    result.append(error_for(code, "request %d failed" % i))
        if first is not None and not return_exceptions:
            raise first
        return result

    def lookup(self, alias: str, load: bool = True,
               toolchain: Optional[str] = None,
               host_compiler: Optional[str] = None,
               claim: bool = False, wait: float = 0.0) -> "Program":
        """Finds the program an alias names and loads it (kiln_lookup);
        never builds. Answered from the process when the alias was loaded
        here before, else by kilnd. With load=False it is only got as a
        file (kiln_lookup_file, always asking kilnd), and toolchain, when
        given, takes only an entry that toolchain, as kilnd has it now,
        built (with host_compiler, for nvcc, that host compiler). Raises
        NotFound on a miss.

        claim=True (kiln_lookup_claim): one producer per alias on the node,
        and with kilnd --upstream and a toolchain across the job's nodes.
        On a miss this connection claims the alias and Claimed (a
        NotFound) is raised: produce the program and get it with this
        alias, or release() it. When another client holds the claim, the
        call waits up to wait seconds (at most 600; 0: not at all) for it
        to publish the alias (then returns it); when that client's
        connection closes first, this one takes the claim over (Claimed);
        when it releases the claim, or the wait runs out, NotFound (the
        caller produces it without a claim). With load=True a program
        found is then loaded (kiln_lookup)."""
        a = _cstr(alias, "alias")
        if a is None:
            raise TypeError("lookup needs an alias")
        if (toolchain is not None or host_compiler is not None) and load:
            raise ValueError("toolchain= goes with load=False (kiln_lookup_file)")
        if not claim and wait:
            raise ValueError("wait= goes with claim=True")
        if not 0 <= wait <= 600:
            raise ValueError("wait must be between 0 and 600 seconds")
        out = _lib.ProgramP()
        with self._using() as k:
            # ctypes lets the GIL go for each call: a wait blocks no thread.
            if claim:
                rc = self._c.kiln_lookup_claim(k, a, _cstr(toolchain, "toolchain"),
                                               _cstr(host_compiler, "host_compiler"),
                                               int(round(wait * 1000)), ctypes.byref(out))
                if rc == _lib.KILN_OK and load:
                    rc = self._c.kiln_lookup(k, a, ctypes.byref(out))
            elif load:
                rc = self._c.kiln_lookup(k, a, ctypes.byref(out))
            else:
                rc = self._c.kiln_lookup_file_host(k, a, _cstr(toolchain, "toolchain"),
                                                   _cstr(host_compiler, "host_compiler"),
                                                   ctypes.byref(out))
            if rc != _lib.KILN_OK:
                raise self._fail(rc, k)
            return self._program(out.value, loaded=load)

    def lookup_data(self, alias: str, toolchain: Optional[str] = None,
                    host_compiler: Optional[str] = None, claim: bool = False,
                    wait: float = 0.0) -> Tuple["Program", Optional[bytes]]:
        """As lookup(alias, load=False, ...), and what is stored with the
        alias (get's alias_data; None when it has none): (Program, bytes or
        None) (kiln_lookup_data)."""
        a = _cstr(alias, "alias")
        if a is None:
            raise TypeError("lookup_data needs an alias")
        if not claim and wait:
            raise ValueError("wait= goes with claim=True")
        if not 0 <= wait <= 600:
            raise ValueError("wait must be between 0 and 600 seconds")
        out = _lib.ProgramP()
        raw = ctypes.c_void_p()
        with self._using() as k:
            rc = self._c.kiln_lookup_data(k, a, _cstr(toolchain, "toolchain"),
                                          _cstr(host_compiler, "host_compiler"), int(claim),
                                          int(round(wait * 1000)), ctypes.byref(out),
                                          ctypes.byref(raw))
            data = None
            if raw.value:
                try:
                    data = base64.b64decode(ctypes.string_at(raw.value))
                finally:
                    _libc_free(raw.value)
            if rc != _lib.KILN_OK:
                raise self._fail(rc, k)
            return self._program(out.value, loaded=False), data

    def release(self, alias: str) -> bool:
        """Gives this connection's claim on alias up (kiln_release_claim):
        the waiting clients produce it themselves; False when it held none
        (never claimed here, or published since). Closing the connection
        does it too."""
        a = _cstr(alias, "alias")
        if a is None:
            raise TypeError("release needs an alias")
        with self._using() as k:
            rc = self._c.kiln_release_claim(k, a)
            if rc < 0:
                raise self._fail(rc, k)
            return rc == 1

    # The name kiln.gt4py calls, kept beside release().
    release_claim = release

    def stats(self) -> "KilnStats":
        """The connection's counters (kiln_get_stats) as a KilnStats."""
        st = _lib.Stats()
        with self._using() as k:
            self._c.kiln_get_stats(k, ctypes.byref(st))
        return KilnStats(st.requests, st.local_hits, st.loads)
