"""
The ctypes declarations of libkiln: the structs of <kiln/kiln.h>, laid out
field for field as in the header, and the prototype of every function the
package calls. The library is loaded on first use, not at import, so that
`import kiln` works (and says what is wrong) where libkiln is missing.
"""

import ctypes
import os
import threading

# The soname of the libkiln this package is written against: found through
# the normal loader search path. Its version is the library's
# (kiln.__version__ asks kiln_version()).
SONAME = "libkiln.so.0"

# enum kiln_status of kiln.h.
KILN_OK = 0
KILN_EINVAL = -1
KILN_ENOMEM = -2
KILN_ECONNECT = -3
KILN_EPROTO = -4
KILN_EIO = -5
KILN_ENOTFOUND = -6
KILN_EBUILD = -7
KILN_ETIMEDOUT = -8
KILN_ELOAD = -9
KILN_EREFUSED = -10
KILN_EDENIED = -11
KILN_EBUSY = -12
KILN_EDAEMON = -13
KILN_ECUDA = -14
KILN_ECLAIMED = -15
KILN_EHELD = -16

STATUS_NAMES = {
    value: name for name, value in globals().items() if name.startswith("KILN_E")
}
STATUS_NAMES[KILN_OK] = "KILN_OK"


class Source(ctypes.Structure):
    """struct kiln_source: inline text (text, len) or an absolute path."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("text", ctypes.c_char_p),
        ("len", ctypes.c_size_t),
        ("path", ctypes.c_char_p),
    ]


class Request(ctypes.Structure):
    """struct kiln_request."""

    _fields_ = [
        ("toolchain", ctypes.c_char_p),
        ("output", ctypes.c_char_p),
        ("args", ctypes.POINTER(ctypes.c_char_p)),
        ("nargs", ctypes.c_size_t),
        ("sources", ctypes.POINTER(Source)),
        ("nsources", ctypes.c_size_t),
        ("alias", ctypes.c_char_p),
        ("label", ctypes.c_char_p),
        ("pch", ctypes.POINTER(ctypes.c_char_p)),
        ("npch", ctypes.c_size_t),
        ("host_compiler", ctypes.c_char_p),
    ]


class Options(ctypes.Structure):
    """struct kiln_options (for kiln_open_with)."""

    _fields_ = [
        ("socket_path", ctypes.c_char_p),
        ("autospawn", ctypes.c_int),
        ("kilnd_path", ctypes.c_char_p),
        ("cache_dir", ctypes.c_char_p),
    ]


class Stats(ctypes.Structure):
    """struct kiln_stats."""

    _fields_ = [
        ("requests", ctypes.c_uint64),
        ("local_hits", ctypes.c_uint64),
        ("loads", ctypes.c_uint64),
    ]


# Opaque handles: struct kiln * and struct kiln_program *.
KilnP = ctypes.c_void_p
ProgramP = ctypes.c_void_p

# name: (restype, argtypes). Every function is called through these
# declarations only, so that no pointer is ever truncated to an int.
_PROTOTYPES = {
    "kiln_open": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(KilnP)]),
    "kiln_open_with": (ctypes.c_int, [ctypes.POINTER(Options), ctypes.POINTER(KilnP)]),
    "kiln_close": (None, [KilnP]),
    "kiln_get": (ctypes.c_int, [KilnP, ctypes.POINTER(Request), ctypes.POINTER(ProgramP)]),
    "kiln_get_file": (ctypes.c_int, [KilnP, ctypes.POINTER(Request), ctypes.POINTER(ProgramP)]),
    "kiln_release": (ctypes.c_int, [KilnP, ProgramP]),
    "kiln_set_timeout": (ctypes.c_int, [KilnP, ctypes.c_double]),
    "kiln_lookup_file": (ctypes.c_int, [KilnP, ctypes.c_char_p, ctypes.c_char_p,
                                        ctypes.POINTER(ProgramP)]),
    "kiln_lookup_file_host": (ctypes.c_int, [KilnP, ctypes.c_char_p, ctypes.c_char_p,
                                             ctypes.c_char_p, ctypes.POINTER(ProgramP)]),
    "kiln_lookup_claim": (ctypes.c_int, [KilnP, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                         ctypes.c_uint, ctypes.POINTER(ProgramP)]),
    "kiln_release_claim": (ctypes.c_int, [KilnP, ctypes.c_char_p]),
    "kiln_get_file_data": (ctypes.c_int, [KilnP, ctypes.POINTER(Request), ctypes.c_char_p,
                                          ctypes.POINTER(ProgramP)]),
    "kiln_lookup_data": (ctypes.c_int, [KilnP, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                        ctypes.c_int, ctypes.c_uint, ctypes.POINTER(ProgramP),
                                        ctypes.POINTER(ctypes.c_void_p)]),
    "kiln_program_loaded": (ctypes.c_int, [ProgramP]),
    "kiln_get_many": (ctypes.c_int, [KilnP, ctypes.POINTER(Request), ctypes.c_size_t,
                                     ctypes.POINTER(ProgramP), ctypes.POINTER(ctypes.c_int)]),
    "kiln_lookup": (ctypes.c_int, [KilnP, ctypes.c_char_p, ctypes.POINTER(ProgramP)]),
    "kiln_sym": (ctypes.c_void_p, [ProgramP, ctypes.c_char_p]),
    "kiln_program_key": (ctypes.c_char_p, [ProgramP]),
    "kiln_program_path": (ctypes.c_char_p, [ProgramP]),
    "kiln_program_fd": (ctypes.c_int, [ProgramP]),
    "kiln_program_output": (ctypes.c_char_p, [ProgramP]),
    "kiln_program_data": (ctypes.c_void_p, [ProgramP, ctypes.POINTER(ctypes.c_size_t)]),
    "kiln_errmsg": (ctypes.c_char_p, [KilnP]),
    "kiln_strerror": (ctypes.c_char_p, [ctypes.c_int]),
    "kiln_version": (ctypes.c_char_p, []),
    "kiln_get_stats": (None, [KilnP, ctypes.POINTER(Stats)]),
}

_lock = threading.Lock()
_lib = None


def load():
    """Returns libkiln as a ctypes.CDLL with every prototype declared.

    $KILN_LIBRARY, when set, names the file to load (a build tree's
    libkiln, say); otherwise libkiln.so.0 is found like any shared library
    (LD_LIBRARY_PATH, the ld.so cache, the default directories).
    """
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        name = os.environ.get("KILN_LIBRARY") or SONAME
        try:
            lib = ctypes.CDLL(name)
        except OSError as e:
            raise OSError(
                "kiln: cannot load %s (%s); install libkiln, add its directory to "
                "LD_LIBRARY_PATH, or set KILN_LIBRARY to its path" % (name, e)) from e
        for fname, (restype, argtypes) in _PROTOTYPES.items():
            f = getattr(lib, fname)
            f.restype = restype
            f.argtypes = argtypes
        _lib = lib
        return lib


def decode(b):
    """A C string from libkiln as str (None stays None); never fails."""
    if b is None:
        return None
    return b.decode("utf-8", "replace")
