"""
kiln: get-or-build, load and call generated C/C++ code through kilnd, the
per-node compile-and-cache daemon, from Python.

    import kiln

    with kiln.Kiln() as k:                       # $KILN_SOCKET or the default
        prog = k.get(sources={"axpy.c": "double axpy(double a, double x, double y)"
                                        " { return a * x + y; }\\n"},
                     toolchain="cc", args=["-O2"], alias="example:axpy:v1")
    axpy = prog.lib.axpy                         # a ctypes function, as with CDLL
    axpy.restype = ctypes.c_double
    axpy.argtypes = [ctypes.c_double] * 3

A thin layer over libkiln (libkiln.so.0, found through the normal loader
search path, or $KILN_LIBRARY) through ctypes; standard library only. See
docs/python.md.
"""

from ._lib import SONAME
from .client import Kiln, KilnStats, Program
from .errors import (Busy, BuildError, BuildTimeout, ConnectError, CudaError, DaemonError,
                     Denied, InvalidRequest, KilnError, KilnIOError, LoadError, NotFound,
                     OutOfMemory, ProtocolError, Refused, Claimed, Held)


def __getattr__(name):
    """kiln.__version__: the version of the libkiln this package runs on
    (kiln_version()), the one meson's project() gives; loading libkiln on
    first use, like every other call."""
    if name == "__version__":
        from . import _lib
        return _lib.decode(_lib.load().kiln_version())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Kiln", "Program", "KilnStats", "strerror", "SONAME",
    "KilnError", "InvalidRequest", "OutOfMemory", "ConnectError", "ProtocolError",
    "KilnIOError", "NotFound", "BuildError", "BuildTimeout", "LoadError", "Refused",
    "Denied", "Busy", "DaemonError", "CudaError",
]


def strerror(code):
    """kiln_strerror(code): the short description of a status code."""
    from . import _lib
    return _lib.decode(_lib.load().kiln_strerror(code))
