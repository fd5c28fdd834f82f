"""
The exceptions of the kiln package: one class per libkiln status code, all
under KilnError, each carrying the code, its name and libkiln's detailed
text (kiln_errmsg). Where a built-in exception means the same thing, the
class derives from it too, so that `except ValueError` or `except
ConnectionError` catch what they should.
"""

from . import _lib

__all__ = [
    "KilnError", "InvalidRequest", "OutOfMemory", "ConnectError", "ProtocolError",
    "KilnIOError", "NotFound", "BuildError", "BuildTimeout", "LoadError", "Refused",
    "Denied", "Busy", "DaemonError", "CudaError", "Claimed", "Held",
]


class KilnError(Exception):
    """A libkiln call failed.

    code     the status code (a negative int, e.g. -7)
    name     its name in kiln.h (e.g. "KILN_EBUILD")
    reason   kiln_strerror(code), a short description
    message  kiln_errmsg(), the detailed text of the failure
    """

    code = None

    def __init__(self, code, message, reason=None):
        self.code = code
        self.name = _lib.STATUS_NAMES.get(code, "KILN_E(%d)" % code)
        self.message = message or ""
        self.reason = reason or self.name
        super().__init__(self.message)

    def __str__(self):
        if self.message:
            return "%s: %s" % (self.reason, self.message)
        return self.reason

    def __repr__(self):
        return "%s(%s, %r)" % (type(self).__name__, self.name, self.message)

    # Exceptions are pickled by their args; keep the code.
    def __reduce__(self):
        return (type(self), (self.code, self.message, self.reason))


class InvalidRequest(KilnError, ValueError):
    """KILN_EINVAL: the request breaks a rule (source name, argument such as
    -o, alias, NUL in a text); nothing was sent."""


class OutOfMemory(KilnError, MemoryError):
    """KILN_ENOMEM."""


class ConnectError(KilnError, ConnectionError):
    """KILN_ECONNECT: no kilnd answers at the socket."""


class ProtocolError(KilnError):
    """KILN_EPROTO: kilnd speaks another protocol version, or sent garbage."""


class KilnIOError(KilnError, OSError):
    """KILN_EIO: the connection broke during the call; the next call
    reconnects."""


class NotFound(KilnError, LookupError):
    """KILN_ENOTFOUND: lookup() found no entry for the alias."""


class BuildError(KilnError):
    """KILN_EBUILD: the compiler (or the daemon's load check) failed.

    summary      the daemon's one-line summary
    diagnostics  the compiler's output ("" when the daemon sent none)
    """

    def __init__(self, code, message, reason=None):
        super().__init__(code, message, reason)
        summary, sep, rest = self.message.partition("\n")
        self.summary = summary
        self.diagnostics = rest if sep else ""


class BuildTimeout(KilnError, TimeoutError):
    """KILN_ETIMEDOUT: the build ran past kilnd's --build-timeout."""


class LoadError(KilnError, OSError):
    """KILN_ELOAD: dlopen of the artifact failed in this process (the text
    has dlerror()); OSError, as for ctypes.CDLL."""


class Refused(KilnError, ValueError):
    """KILN_EREFUSED: kilnd refused the request (unknown toolchain, a limit)."""


class Denied(KilnError, PermissionError):
    """KILN_EDENIED: kilnd does not serve this user."""


class Busy(KilnError):
    """KILN_EBUSY: kilnd is overloaded or shutting down; retry later."""


class DaemonError(KilnError):
    """KILN_EDAEMON: kilnd failed internally (disk full, I/O error)."""


class CudaError(KilnError):
    """KILN_ECUDA: the CUDA driver failed (libkiln-cuda)."""


class Claimed(NotFound):
    """KILN_ECLAIMED: lookup(claim=True) missed and this connection now
    holds the claim on the alias: produce the program (a get with that
    alias publishes it and wakes the waiters), or release(alias)."""


class Held(NotFound):
    """KILN_EHELD: lookup_data(claim=True) missed and another client holds
    the claim (the wait, if any, ran out): its producer is at work."""


_BY_CODE = {
    _lib.KILN_EINVAL: InvalidRequest,
    _lib.KILN_ENOMEM: OutOfMemory,
    _lib.KILN_ECONNECT: ConnectError,
    _lib.KILN_EPROTO: ProtocolError,
    _lib.KILN_EIO: KilnIOError,
    _lib.KILN_ENOTFOUND: NotFound,
    _lib.KILN_EBUILD: BuildError,
    _lib.KILN_ETIMEDOUT: BuildTimeout,
    _lib.KILN_ELOAD: LoadError,
    _lib.KILN_EREFUSED: Refused,
    _lib.KILN_EDENIED: Denied,
    _lib.KILN_EBUSY: Busy,
    _lib.KILN_EDAEMON: DaemonError,
    _lib.KILN_ECUDA: CudaError,
    _lib.KILN_ECLAIMED: Claimed,
    _lib.KILN_EHELD: Held,
}


def error_for(code, message):
    """The exception for a status code and libkiln's text (not raised)."""
    reason = _lib.decode(_lib.load().kiln_strerror(code))
    return _BY_CODE.get(code, KilnError)(code, message, reason)


def invalid(message):
    """An InvalidRequest raised by the package itself, before any call."""
    return error_for(_lib.KILN_EINVAL, message)
