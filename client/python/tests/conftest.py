"""
Fixtures of the Python binding's tests: one real kilnd for the session
($KILN_TEST_KILND, as meson test provides it), with its socket, cache and
log in a temporary directory that is removed at the end, and a Kiln per test.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

import kiln


class Daemon:
    def __init__(self, base, extra=()):
        self.dir = base
        self.extra = list(extra)    # more kilnd options (--upstream DIR)
        self.socket = os.path.join(base, "kilnd.sock")
        self.cache = os.path.join(base, "cache")
        self.log = os.path.join(base, "kilnd.log")
        self.out = os.path.join(base, "kilnd.out")
        self.proc = None

    def answers(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(self.socket)
            return True
        except OSError:
            return False
        finally:
            s.close()

    def start(self):
        env = dict(os.environ)
        # Under ASan (see run.py) kilnd is instrumented itself: it gets the
        # caller's options back, leak checking included, and no preload.
        if "KILN_TEST_KILND_ASAN_OPTIONS" in env:
            env["ASAN_OPTIONS"] = env.pop("KILN_TEST_KILND_ASAN_OPTIONS")
            env.pop("LD_PRELOAD", None)
        argv = [os.environ["KILN_TEST_KILND"], "--socket", self.socket, "--cache-dir",
                self.cache, "--log-file", self.log, "--log-level", "debug"]
        if os.environ.get("KILN_TEST_NVCC"):
            argv += ["--toolchain", "nvcc=" + os.environ["KILN_TEST_NVCC"]]
        argv += self.extra
        with open(self.out, "wb") as out:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, env=env)
        end = time.monotonic() + 30
        while not self.answers():
            if self.proc.poll() is not None:
                raise RuntimeError("kilnd exited (status %d) before its socket answered:\n%s"
                                   % (self.proc.returncode, self.tail(self.out)))
            if time.monotonic() > end:
                self.proc.kill()
                self.proc.wait()
                raise RuntimeError("kilnd's socket did not answer within 30 s:\n%s"
                                   % self.tail(self.out))
            time.sleep(0.01)

    def stop(self):
        """SIGTERM, and kilnd must exit cleanly within 30 s; returns its
        status."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return "killed after 30 s"

    @staticmethod
    def tail(path, n=3000):
        try:
            with open(path, "rb") as f:
                return f.read().decode("utf-8", "replace")[-n:]
        except OSError:
            return "(no %s)" % path


def _remove_tree(base):
    # kilnd may leave read-only directories; make them removable first.
    for root, dirs, _ in os.walk(base):
        for d in dirs:
            try:
                os.chmod(os.path.join(root, d), 0o700)
            except OSError:
                pass
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def daemon(request):
    tmp = os.environ.get("TMPDIR")
    # Socket paths are limited to 108 bytes: keep the directory short.
    if not tmp or len(tmp) > 40:
        tmp = "/tmp"
    d = Daemon(tempfile.mkdtemp(prefix="kiln-py-", dir=tmp))
    try:
        d.start()
        yield d
    finally:
        status = d.stop()
        failed = request.session.testsfailed or status != 0
        if failed:
            sys.__stderr__.write("--- kilnd output (%s):\n%s\n--- kilnd log (%s):\n%s\n---\n"
                                 % (d.out, d.tail(d.out), d.log, d.tail(d.log)))
        if os.environ.get("KILN_TEST_KEEP"):
            sys.__stderr__.write("kept %s\n" % d.dir)
        else:
            _remove_tree(d.dir)
        assert status == 0, "kilnd did not exit cleanly on SIGTERM: %s" % status


@pytest.fixture
def k(daemon):
    with kiln.Kiln(daemon.socket) as handle:
        yield handle
