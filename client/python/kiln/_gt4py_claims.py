"""
kiln.gt4py's claims (docs/gt4py.md, "Claims"): a task's claim on its alias,
taken when its lowering starts (Claim.try_take, never waiting: Deferred when
another process holds it), or waited for in the submitting process
(Claim.take) within the process's wait budget (Budget, KILN_GT4PY_WAIT, all
programs together) and no longer than the holder's heartbeat shows progress
(_Beats, KILN_GT4PY_STALL).
"""

import dataclasses
import json
import os
import struct
import threading
from typing import Optional

from . import _gt4py_report as _report, _session
from .errors import Claimed, Held, KilnError, NotFound

_state = {"budget": None}


@dataclasses.dataclass(frozen=True)
class Deferred:
    """A task's answer when another process holds its program's claim: the
    pool's worker goes on with the next task at once, and the submitting
    process waits for the program (_await)."""

    alias: str      # as the task's process saw it
    # a translation alias's wait: this rank's GT4Py alias, to point at the
    # entry once it is there (kiln/_gt4py_translated.py, republish)
    publish: Optional[str] = None


def _seconds(name, default, most):
    try:
        return min(most, max(0.0, float(os.environ.get(name, default))))
    except ValueError:
        return float(default)


def wait_s():
    """How long this process (with GT4Py's compile workers) waits for other
    processes' claims, all programs together (KILN_GT4PY_WAIT, seconds;
    default 600): past it, a program another process holds is lowered
    here at once."""
    return _seconds("KILN_GT4PY_WAIT", "600", 86400.0)


def stall_s():
    """How long a claim's holder may show no heartbeat before a process
    waiting for it lowers the program itself (KILN_GT4PY_STALL, seconds;
    default 60; 0: never)."""
    return _seconds("KILN_GT4PY_STALL", "60", 86400.0)


class Claim:
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
        k0 = _session.connection()
        tools = _session.tools(self.store.gpu) if k0 is not None else None
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
            return Deferred(self.alias)
        except NotFound:
            k.close()
            return None
        except KilnError as e:
            k.close()
            _report.fallback("kilnd's lookup failed: %s" % e)
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
        budget = Budget.at(self.store.budget, self.store.wait)
        allowed = budget.begin()
        try:
            if allowed <= 0:
                _report.say_once("the wait for other processes' claims (KILN_GT4PY_WAIT, %g s in all "
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
            _report.fallback("kilnd's lookup failed: %s" % value)
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
                    _report.say("%s: %s: lowering it here" % (self.alias[:22], why))
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


class Budget:
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


def budget_path():
    """This process's budget file (made at its first miss; removed at exit),
    or None (then each process keeps its own)."""
    if _state["budget"] is None:
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
