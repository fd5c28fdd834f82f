"""
Tests of the Python package `kiln` against a real kilnd (conftest.py): what
a Python user sees from get, lookup, the program handle and the exceptions,
with threads, and the DaCe-style example run as a user would run it.
"""

import ctypes
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import pytest

import kiln
import kiln.client

AXPY = 'extern "C" double axpy(double a, double x, double y) { return a * x + y; }\n'


def unique(prefix):
    """A name no other test (or earlier session) uses: a fresh program."""
    return "%s_%s" % (prefix, uuid.uuid4().hex[:12])


def returns(value, name="f"):
    """C source of a function that returns value; distinct values are
    distinct programs."""
    return "int %s(void) { return %d; }\n" % (name, value)


def test_get_and_call(k):
    prog = k.get(sources={"axpy.cpp": AXPY}, args=["-O2"], label="axpy")
    assert len(prog.key) == 64 and all(c in "0123456789abcdef" for c in prog.key)
    assert os.path.isabs(prog.path) and prog.path.endswith(".so")
    assert os.path.exists(prog.path)
    assert prog.output == "shared"
    assert prog.data is None
    assert isinstance(prog.lib, ctypes.CDLL)
    axpy = prog.lib.axpy
    axpy.restype = ctypes.c_double
    axpy.argtypes = [ctypes.c_double] * 3
    assert axpy(2.0, 3.0, 1.0) == 7.0
    # As with any CDLL: attribute access is cached, item access is not.
    assert prog.lib.axpy is axpy
    other = prog.lib["axpy"]
    assert other is not axpy
    other.restype = ctypes.c_double
    other.argtypes = [ctypes.c_double] * 3
    assert other(1.0, 1.0, 1.0) == 2.0
    assert prog.sym("axpy") == ctypes.cast(axpy, ctypes.c_void_p).value
    assert prog.sym("no_such_symbol") is None
    with pytest.raises(AttributeError):
        prog.lib.no_such_symbol


def test_program_log_has_the_warnings(k):
    name = unique("warned")
    prog = k.get(sources={"w.c": "int %s(void) { int kiln_unused_local; return 3; }\n" % name},
                 args=["-Wall"])
    assert prog.log is not None and "kiln_unused_local" in prog.log
    quiet = k.get(sources={"q.c": returns(41, unique("quiet"))})
    assert quiet.log == ""


def test_timeout_is_set_and_checked(daemon):
    with kiln.Kiln(daemon.socket, timeout=30) as k:
        assert k.get(sources={"t.c": returns(5, unique("timed"))}).lib is not None
        k.set_timeout(0)
        with pytest.raises(kiln.InvalidRequest):
            k.set_timeout(-1)
    with pytest.raises(kiln.InvalidRequest):
        kiln.Kiln(daemon.socket, timeout=float("nan"))


def test_struct_layouts_match_kiln_h(k):
    # Built against the installed header itself: sizeof and offsetof of
    # every struct the package declares, as the C compiler lays them out.
    from kiln import _lib
    structs = {"kiln_source": _lib.Source, "kiln_request": _lib.Request,
               "kiln_options": _lib.Options, "kiln_stats": _lib.Stats}
    lines = ["#include <stddef.h>", "#include <kiln/kiln.h>",
             "const size_t layout[] = {"]
    want = []
    for cname, cls in structs.items():
        lines.append("sizeof(struct %s)," % cname)
        want.append(ctypes.sizeof(cls))
        for field, _ in cls._fields_:
            lines.append("offsetof(struct %s, %s)," % (cname, field))
            want.append(getattr(cls, field).offset)
    lines.append("};")
    # The headers' directories: the source tree's and the generated one's.
    includes = os.environ["KILN_TEST_INCLUDE"].split(os.pathsep)
    prog = k.get(toolchain="cc", sources={"layout.c": "\n".join(lines) + "\n"},
                 args=["-I" + d for d in includes])
    got = (ctypes.c_size_t * len(want)).in_dll(prog.lib, "layout")
    assert list(got) == want


def test_default_restype_is_int_as_with_cdll(k):
    prog = k.get(toolchain="cc", sources={"r.c": returns(-5)})
    assert prog.lib.f() == -5


def test_repeated_get_is_the_same_program(k, daemon):
    src = {"same.cpp": 'extern "C" int same(void) { return 11; }\n'}
    alias = unique("py:same")
    first = k.get(sources=src, args=["-O1"], alias=alias)
    before = k.stats()
    second = k.get(sources=src, args=["-O1"], alias=alias)
    after = k.stats()
    assert second is first
    # An alias loaded in this process is answered without IPC.
    assert after.local_hits == before.local_hits + 1
    assert after.requests == before.requests
    # Without an alias the daemon is asked, but the key is the same, and
    # the program is not loaded a second time.
    third = k.get(sources=src, args=["-O1"])
    assert third is first and k.stats().loads == after.loads
    # Another connection gets the same artifact from the cache.
    with kiln.Kiln(daemon.socket) as k2:
        again = k2.get(sources=src, args=["-O1"])
        assert again.key == first.key and again.path == first.path
        assert again.lib.same() == 11
    # A different argument is a different program.
    assert k.get(sources=src, args=["-O2"]).key != first.key


def test_sources_by_path(k, tmp_path, monkeypatch):
    main = tmp_path / "main.c"
    main.write_text('#include "defs.h"\nint scaled(void) { return FACTOR * 6; }\n')
    prog = k.get(toolchain="cc", sources={"main.c": main, "defs.h": "#define FACTOR 7\n"})
    assert prog.lib.scaled() == 42
    # A relative path is sent as an absolute one.
    monkeypatch.chdir(tmp_path)
    rel = k.get(toolchain="cc", sources={"main.c": pathlib.Path("main.c"),
                                         "defs.h": b"#define FACTOR 7\n"})
    assert rel is prog
    # The daemon reads the file, so a changed file is a new program.
    main.write_text('#include "defs.h"\nint scaled(void) { return FACTOR * 7; }\n')
    changed = k.get(toolchain="cc", sources={"main.c": main, "defs.h": "#define FACTOR 7\n"})
    assert changed.key != prog.key and changed.lib.scaled() == 49


def test_lookup_hit_and_miss(k, daemon):
    alias = unique("py:lookup")
    prog = k.get(toolchain="cc", sources={"l.c": returns(3)}, alias=alias, label="lookup")
    assert k.lookup(alias) is prog
    # A fresh connection has only the daemon to ask.
    with kiln.Kiln(daemon.socket) as k2:
        found = k2.lookup(alias)
        assert found.key == prog.key
        assert found.lib.f() == 3
        assert k2.stats().loads == 1
    with pytest.raises(kiln.NotFound) as e:
        k.lookup(unique("py:missing"))
    assert e.value.code == -6 and e.value.name == "KILN_ENOTFOUND"
    assert isinstance(e.value, LookupError) and isinstance(e.value, kiln.KilnError)
    assert "py:missing" in e.value.message


def test_alias_data_is_kept_per_alias(k, daemon):
    """get(alias_data=...) stores bytes with the alias; lookup_data returns
    them while the alias names that program; two aliases of one program
    keep their own; a claim another process holds is Held."""
    a0, a1 = unique("py:data"), unique("py:data")
    src = {"d.c": returns(41)}
    p0 = k.get(toolchain="cc", sources=src, alias=a0, load=False, alias_data=b"\x00rank 0")
    p1 = k.get(toolchain="cc", sources=src, alias=a1, load=False, alias_data=b"rank 1\xff")
    assert p0.key == p1.key
    prog, data = k.lookup_data(a0, toolchain="cc")
    assert prog.key == p0.key and data == b"\x00rank 0"
    assert k.lookup_data(a1)[1] == b"rank 1\xff"
    k.get(toolchain="cc", sources={"e.c": returns(42)}, alias=a1, load=False)
    prog, data = k.lookup_data(a1)
    assert prog.key != p0.key and data is None
    with pytest.raises(ValueError):
        k.get(toolchain="cc", sources=src, alias=a0, alias_data=b"x")      # load=True
    with pytest.raises(ValueError):
        k.get(toolchain="cc", sources=src, load=False, alias_data=b"x")    # no alias
    held = unique("py:held")
    with pytest.raises(kiln.Claimed):
        k.lookup_data(held, claim=True)
    with kiln.Kiln(daemon.socket) as k2:
        with pytest.raises(kiln.Held) as e:
            k2.lookup_data(held, claim=True)
        assert isinstance(e.value, kiln.NotFound)
        with pytest.raises(kiln.NotFound) as e:
            k2.lookup_data(unique("py:none"))
        assert not isinstance(e.value, kiln.Held)


def test_claims_one_producer_per_alias(k, daemon):
    """lookup(claim=True): the first to miss holds the claim (Claimed, a
    NotFound), a second waits and gets the program the first publishes; a
    released claim is taken over; a wait that runs out is NotFound."""
    alias = unique("py:claim")
    with pytest.raises(kiln.Claimed) as e:
        k.lookup(alias, load=False, claim=True)
    assert isinstance(e.value, kiln.NotFound) and e.value.name == "KILN_ECLAIMED"
    with kiln.Kiln(daemon.socket) as k2:
        with pytest.raises(kiln.NotFound) as e:
            k2.lookup(alias, load=False, claim=True, wait=0.2)
        assert not isinstance(e.value, kiln.Claimed)
        got = {}
        t = threading.Thread(target=lambda: got.setdefault(
            "p", k2.lookup(alias, load=False, claim=True, wait=60)))
        t.start()
        time.sleep(0.2)
        prog = k.get(toolchain="cc", sources={"c.c": returns(5)}, alias=alias, load=False)
        t.join(60)
        assert got["p"].key == prog.key
        other = unique("py:claim")
        with pytest.raises(kiln.Claimed):
            k2.lookup(other, load=False, claim=True)
        assert k.release(other) is False           # not its claim
        assert k2.release(other) is True
        assert k2.release_claim(other) is False    # kiln.gt4py's name for it
        with pytest.raises(kiln.Claimed):
            k.lookup(other, load=False, claim=True, wait=1)
    loaded = k.lookup(alias, claim=True)           # found: loaded
    assert loaded.loaded and loaded.key == prog.key
    with pytest.raises(ValueError):
        k.lookup(alias, load=False, claim=True, wait=601)


def test_build_error_carries_the_diagnostics(k):
    bad = "int ok(void) { return 1; }\nint broken(void) { return undeclared_name; }\n"
    with pytest.raises(kiln.BuildError) as e:
        k.get(toolchain="cc", sources={"broken.c": bad}, alias=unique("py:broken"))
    err = e.value
    assert err.code == -7 and err.name == "KILN_EBUILD"
    assert err.summary and "\n" not in err.summary
    # The compiler's own error line, with file and line number.
    assert "broken.c:2:" in err.diagnostics
    assert "undeclared_name" in err.diagnostics and "error" in err.diagnostics
    assert err.diagnostics in str(err)
    # Failures are not cached: asking again asks the daemon again.
    with pytest.raises(kiln.BuildError):
        k.get(toolchain="cc", sources={"broken.c": bad})


def test_invalid_requests(k):
    ok = {"x.c": returns(1)}
    with pytest.raises(kiln.InvalidRequest) as e:
        k.get(toolchain="cc", sources=ok, args=["-o", "x"])
    assert isinstance(e.value, ValueError) and e.value.code == -1
    assert '"-o"' in e.value.message
    with pytest.raises(kiln.InvalidRequest):
        k.get(sources={"a/../b.c": returns(1)})
    with pytest.raises(kiln.InvalidRequest):
        k.get(sources={"a": returns(1), "a/b.c": returns(2)})
    with pytest.raises(kiln.InvalidRequest):
        k.get(sources={})
    with pytest.raises(kiln.InvalidRequest):
        k.get(sources={"nul.c": "int f(void) { return 0; }\0\n"})
    with pytest.raises(kiln.InvalidRequest):
        k.get(sources=ok, alias="has\0nul")
    with pytest.raises(TypeError):
        k.get(sources=ok, args="-O2")
    with pytest.raises(TypeError):
        k.get(sources={"x.c": 42})
    with pytest.raises(TypeError):
        k.lookup(None)
    # Refused by the daemon, not by libkiln.
    with pytest.raises(kiln.Refused) as e:
        k.get(toolchain="no-such-compiler", sources=ok)
    assert isinstance(e.value, ValueError) and e.value.code == -10
    assert "no-such-compiler" in e.value.message


def test_get_many(k):
    reqs = [dict(toolchain="cc", sources={"m%d.c" % i: returns(100 + i)}) for i in range(4)]
    progs = k.get_many(reqs)
    assert [p.lib.f() for p in progs] == [100, 101, 102, 103]
    assert k.get_many([]) == []
    reqs[2] = dict(toolchain="cc", sources={"m2.c": "int f(void) { return }\n"})
    with pytest.raises(kiln.BuildError) as e:
        k.get_many(reqs)
    assert e.value.message.startswith("request 2: ")
    mixed = k.get_many(reqs, return_exceptions=True)
    assert isinstance(mixed[2], kiln.BuildError) and "m2.c" in mixed[2].diagnostics
    assert mixed[3] is progs[3]


@pytest.mark.skipif(not os.environ.get("KILN_TEST_NVCC"), reason="no nvcc (KILN_TEST_NVCC)")
def test_gpu_output_is_data(k):
    kernel = ('extern "C" __global__ void scale(float *x, float a, int n)\n'
              "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }\n")
    prog = k.get(toolchain="nvcc", output="ptx", sources={"scale.cu": kernel},
                 args=["-arch=sm_80"], alias=unique("py:ptx"))
    assert prog.output == "ptx" and prog.path.endswith(".ptx")
    assert prog.lib is None and prog.sym("scale") is None
    data = prog.data
    assert isinstance(data, bytes) and data is prog.data
    assert b".version" in data and b".entry scale" in data
    assert len(data) == os.path.getsize(prog.path)


def test_context_manager_closes(daemon):
    with kiln.Kiln(daemon.socket) as k:
        assert not k.closed
        prog = k.get(toolchain="cc", sources={"cm.c": returns(8)})
    assert k.closed and "closed" in repr(k)
    with pytest.raises(ValueError):
        k.lookup("anything")
    with pytest.raises(ValueError):
        k.stats()
    k.close()  # idempotent
    # The program outlives its Kiln: nothing is ever unloaded.
    assert prog.lib.f() == 8
    assert prog.lib["f"]() == 8 and prog.sym("f") is not None
    assert len(prog.key) == 64


def test_each_program_gets_its_own_object_across_connections(daemon):
    # Closing a Kiln closes its programs' descriptors, and the next
    # connection's programs reuse the numbers: prog.lib must still be the
    # object libkiln loaded for each program, never an older one.
    seen = []
    for i in range(4):
        with kiln.Kiln(daemon.socket) as k:
            progs = [k.get(toolchain="cc", sources={"fd%d.c" % j: returns(500 + 10 * i + j)})
                     for j in range(2)]
            seen += [(p, 500 + 10 * i + j) for j, p in enumerate(progs)]
    for p, want in seen:
        assert p.lib.f() == want, p


def test_connect_error(tmp_path):
    with pytest.raises(kiln.ConnectError) as e:
        kiln.Kiln(str(tmp_path / "nobody.sock"))
    assert isinstance(e.value, ConnectionError) and e.value.code == -3
    assert "nobody.sock" in e.value.message


@pytest.mark.skipif(not os.environ.get("KILN_TEST_CLI"), reason="no kiln CLI (KILN_TEST_CLI)")
def test_autospawn_starts_a_daemon():
    # A directory of its own, short enough for a socket path.
    base = tempfile.mkdtemp(prefix="kiln-py-spawn-", dir="/tmp")
    sock, cache = os.path.join(base, "s.sock"), os.path.join(base, "cache")
    try:
        with kiln.Kiln(sock, autospawn=True, kilnd=os.environ["KILN_TEST_KILND"],
                       cache_dir=cache) as k:
            prog = k.get(toolchain="cc", sources={"spawned.c": returns(61)})
            assert prog.lib.f() == 61
        assert prog.path.startswith(cache + "/")
    finally:
        stop = subprocess.run([os.environ["KILN_TEST_CLI"], "--socket", sock, "stop"],
                              capture_output=True, text=True, timeout=60)
        if stop.returncode != 0:
            _kill_daemon_of(cache)
        shutil.rmtree(base, ignore_errors=True)
    assert stop.returncode == 0, stop.stdout + stop.stderr


def _kill_daemon_of(cache):
    """SIGKILLs the kilnd that holds cache's lock (its pid is the lock file's
    first line), if its command line names that cache."""
    try:
        with open(os.path.join(cache, "kilnd.lock")) as f:
            pid = int(f.readline())
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            if cache.encode() in f.read():
                os.kill(pid, signal.SIGKILL)
    except (OSError, ValueError):
        pass


def test_threads_share_one_kiln(k):
    nthreads, rounds = 8, 3
    shared = {"shared.c": returns(77, "shared")}
    results, errors = {}, []
    start = threading.Barrier(nthreads)

    def work(i):
        try:
            start.wait()
            for r in range(rounds):
                p = k.get(toolchain="cc", sources={"t%d.c" % i: returns(1000 * i + r)})
                s = k.get(toolchain="cc", sources=shared, alias="py:threads:shared")
                results[(i, r)] = (p.lib.f(), s.lib.shared(), s)
            with pytest.raises(kiln.NotFound):
                k.lookup("py:threads:missing:%d" % i)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(nthreads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len(results) == nthreads * rounds
    for (i, r), (value, shared_value, _) in results.items():
        assert value == 1000 * i + r and shared_value == 77
    # Every thread got the one Program object of the shared artifact.
    assert len({id(s) for _, _, s in results.values()}) == 1


def test_close_waits_for_calls_in_flight(daemon):
    k = kiln.Kiln(daemon.socket)
    got = []
    # A build takes long enough that close() runs while the get is in flight.
    t = threading.Thread(target=lambda: got.append(
        k.get(sources={"slow.cpp": "#include <map>\n#include <string>\n"
                       "std::map<std::string, int> m;\nextern \"C\" int slow(void) { return 5; }\n"
                       "// %s\n" % uuid.uuid4().hex})))
    t.start()
    while not k._busy and t.is_alive():
        time.sleep(0.001)
    k.close()
    t.join(60)
    assert k.closed and len(got) == 1 and got[0].lib.slow() == 5


def test_symbols_without_rtld_noload(k, monkeypatch):
    # Where dlopen(RTLD_NOLOAD) finds nothing, symbols come from kiln_sym.
    monkeypatch.setattr(kiln.client, "_noload", lambda names: None)
    prog = k.get(toolchain="cc", sources={"nl.c": returns(31, "nl") + returns(32, "nl2")})
    assert isinstance(prog.lib, ctypes.CDLL)
    assert prog.lib.nl() == 31 and prog.lib["nl2"]() == 32
    assert prog.sym("missing") is None


def test_errors_and_strerror():
    assert kiln.strerror(-7) == "build failed"
    e = kiln.BuildError(-7, "the compiler exited with status 1\nx.c:1:1: error: boom\n")
    assert e.summary == "the compiler exited with status 1"
    assert e.diagnostics == "x.c:1:1: error: boom\n"
    assert issubclass(kiln.Busy, kiln.KilnError) and issubclass(kiln.Refused, ValueError)


def test_missing_library_is_explained():
    env = dict(os.environ, KILN_LIBRARY="/nonexistent/libkiln.so.0")
    r = subprocess.run([sys.executable, "-c", "import kiln; kiln.Kiln()"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "OSError" in r.stderr and "KILN_LIBRARY" in r.stderr


def test_dace_like_example(daemon):
    example = os.path.join(os.environ.get("KILN_TEST_EXAMPLES", ""), "dace_like.py")
    assert os.path.exists(example), example
    env = dict(os.environ, KILN_SOCKET=daemon.socket)
    name = unique("sdfg")
    runs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, example, "--name", name, "-n", "32", "--steps", "5"],
                           env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        runs.append(r.stdout)
    assert "got from kilnd" in runs[0] and "found by alias" in runs[1]
    for out in runs:
        assert "checksum" in out and out.splitlines()[-1] == "ok"


def test_supported_framework_versions_match_pyproject():
    """kiln/_versions.py and pyproject.toml's extras name the same ranges;
    pre-releases of the lowest release are in, the next release is out."""
    import re
    from kiln import _versions as v
    text = open(os.path.join(os.path.dirname(kiln.__file__), "..", "pyproject.toml")).read()
    for name in v.SUPPORTED:
        assert re.findall(r'"%s([^"]*)"' % name, text), name
        assert set(re.findall(r'"%s([^"]*)"' % name, text)) == {v.spec(name)}, name
    assert v.unsupported("dace", "2.0.0a6") is None
    assert v.unsupported("gt4py", "1.2.1.post12+gbfe883c16") is None
    assert "outside the versions" in v.unsupported("dace", "2.1.0")
    assert "outside the versions" in v.unsupported("gt4py", "1.1.9")
    assert "outside the versions" in v.unsupported("gt4py", "unknown")


def test_version_is_the_library_s(daemon):
    """kiln.__version__ is libkiln's (kiln_version()), the version kilnd,
    built from the same meson project, reports."""
    r = subprocess.run([os.environ["KILN_TEST_KILND"], "--version"], stdout=subprocess.PIPE,
                       text=True, check=True)
    assert r.stdout.split()[:2] == ["kilnd", kiln.__version__]
    with pytest.raises(AttributeError):
        kiln.__no_such_attribute__


def test_get_without_loading(k):
    """load=False gets the artifact as a file (kiln_get_file): a descriptor
    and a path, nothing loaded; a later get loads that same program."""
    name = unique("fileonly")
    src = {name + ".c": returns(5)}
    p = k.get(toolchain="cc", sources=src, load=False)
    assert not p.loaded and p.lib is None and p.sym("f") is None
    st = os.fstat(p.fd)
    assert st.st_ino == os.stat(p.path).st_ino and st.st_size > 0
    with open("/proc/self/maps") as maps:
        assert str(st.st_ino) not in maps.read()
    before = k.stats().loads
    q = k.get(toolchain="cc", sources=src)
    assert q.loaded and q.key == p.key
    assert k.stats().loads == before + 1
    assert k.get(toolchain="cc", sources=src) is q


def test_release_unloads_at_the_last_reference(k):
    """Each get takes a reference; release() gives one back, and the last
    one unloads the library (libkiln's handle and the Program's own); the
    next get loads a fresh copy, with fresh globals."""
    src = {unique("counter") + ".c": "int counter;\nint bump(void) { return ++counter; }\n"}
    p = k.get(toolchain="cc", sources=src)
    assert k.get(toolchain="cc", sources=src) is p
    assert p.lib.bump() == 1 and p.lib.bump() == 2
    ino = str(os.stat(p.path).st_ino)
    p.release()
    assert p.loaded and p.lib.bump() == 3
    p.release()
    assert not p.loaded and p.lib is None and p.sym("bump") is None
    with open("/proc/self/maps") as maps:
        assert ino not in maps.read()
    with pytest.raises(kiln.InvalidRequest, match="holds no reference"):
        p.release()
    q = k.get(toolchain="cc", sources=src)
    assert q is not p and q.loaded and q.key == p.key
    assert q.lib.bump() == 1


def test_pch(k, tmp_path):
    """pch=[...] names headers for kilnd to precompile; the program is the
    same, bad names are refused before sending."""
    (tmp_path / "big.h").write_text("#define BIG 40\n")
    src = {unique("pch") + ".c": "#include <big.h>\nint f(void) { return BIG + 2; }\n"}
    p = k.get(toolchain="cc", sources=src, args=["-I%s" % tmp_path], pch=["big.h"])
    assert p.lib.f() == 42
    with pytest.raises(kiln.InvalidRequest, match="pch"):
        k.get(toolchain="cc", sources=src, pch=["../big.h"])
    with pytest.raises(TypeError):
        k.get(toolchain="cc", sources=src, pch="big.h")


def test_pip_installable(tmp_path):
    """pip installs the package as the distribution kiln-hpc (offline, with
    the setuptools already there), with py.typed, at the version libkiln
    reports (meson.build's)."""
    import importlib.util
    if importlib.util.find_spec("pip") is None or importlib.util.find_spec("setuptools") is None:
        pytest.skip("pip or setuptools is not installed (apt-get install python3-pip "
                    "python3-setuptools)")
    src = tmp_path / "src"
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    shutil.copytree(here, src, ignore=shutil.ignore_patterns("tests", "__pycache__", "build",
                                                             "*.egg-info"))
    site = tmp_path / "site"
    p = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation",
                        "--no-deps", "--no-index", "--target", str(site), str(src)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert p.returncode == 0, p.stdout
    assert (site / "kiln" / "py.typed").exists()
    env = dict(os.environ, PYTHONPATH=str(site))
    p = subprocess.run([sys.executable, "-c",
                        "import importlib.metadata as m, kiln; "
                        "print(kiln.__file__, m.version('kiln-hpc'), kiln.__version__)"],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stdout
    path, dist_version, lib_version = p.stdout.split()
    assert path.startswith(str(site)), path
    assert dist_version == lib_version, p.stdout


def test_default_toolchain_follows_the_language(k):
    """No toolchain: chosen by the first compiled source, as the CLI does;
    C++ (std::map, libstdc++) links with c++."""
    cxx = k.get(sources={unique("map") + ".cpp":
                         "#include <map>\nextern \"C\" int f(void) { std::map<int, int> m; "
                         "m[1] = 41; return m[1] + 1; }\n"})
    cxx.lib.f.restype = ctypes.c_int
    assert cxx.lib.f() == 42
    c = k.get(sources={unique("plain") + ".c": returns(3)})
    assert c.lib.f() == 3


def test_compiler_named_by_path(k, tmp_path):
    """toolchain= a compiler's absolute path (a module's g++ behind a
    script): built and loaded; the same again is the same program; a host
    compiler with a toolchain that is not nvcc is refused by kilnd."""
    d = tmp_path / "opt" / "gcc" / "bin"
    d.mkdir(parents=True)
    cxx = d / "g++"
    cxx.write_text('#!/bin/sh\nexec /usr/bin/g++ "$@"\n')
    cxx.chmod(0o755)
    src = {"named.cpp": 'extern "C" int f(void) { return %d; }\n' % (uuid.uuid4().int % 1000)}
    prog = k.get(toolchain=str(cxx), sources=src)
    again = k.get(toolchain=str(cxx), sources=src, load=False)
    assert prog.key == again.key
    with pytest.raises(kiln.Refused) as e:
        k.get(toolchain=str(cxx), host_compiler="/usr/bin/g++", sources=src)
    assert "not nvcc" in e.value.message
    with pytest.raises(kiln.InvalidRequest):
        k.get(toolchain="/usr/bin/g\nx", sources=src)


def test_autospawn_failure_names_kiln_kilnd(tmp_path):
    """A kilnd that cannot be started: the error says to set KILN_KILND."""
    with pytest.raises(kiln.ConnectError) as e:
        kiln.Kiln(str(tmp_path / "s.sock"), autospawn=True, kilnd=str(tmp_path / "no-kilnd"))
    assert "KILN_KILND" in e.value.message, e.value.message


def test_switch_bootstrap_works_from_pythonpath_and_keeps_the_sites_own(tmp_path):
    """kiln found through PYTHONPATH (a module file, a prefix install, pip
    install -e), where Python reads no .pth: the bootstrap directory first
    on PYTHONPATH switches kiln on with KILN_GT4PY=1 or KILN_DACE=1, and only
    then; the sitecustomize it stands in front of (the site's own) still
    runs, once; a kiln that cannot be imported is one line, not a dead
    interpreter."""
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    boot = os.path.join(pkg, "bootstrap")
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import os\nos.environ['SITE_RAN'] = str(int(os.environ.get('SITE_RAN', '0')) + 1)\n")
    probe = ("import os, sys; print('autodace' if 'kiln._autodace' in sys.modules else 'off', "
             "os.environ.get('SITE_RAN'))")

    def run(pythonpath, **env):
        e = dict(os.environ, PYTHONPATH=os.pathsep.join(pythonpath), **env)
        for v in ("KILN_DACE", "KILN_GT4PY", "SITE_RAN"):
            if v not in env:
                e.pop(v, None)
        p = subprocess.run(["/usr/bin/python3", "-c", probe], env=e, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        assert p.returncode == 0, p.stderr
        return p.stdout.split(), p.stderr

    assert run([boot, pkg, str(site)], KILN_GT4PY="1")[0] == ["autodace", "1"]
    assert run([boot, pkg, str(site)], KILN_DACE="1")[0] == ["autodace", "1"]
    assert run([boot, pkg, str(site)], KILN_GT4PY="0")[0] == ["off", "1"]
    assert run([boot, pkg, str(site)])[0] == ["off", "1"]
    broken = tmp_path / "broken" / "kiln"     # a kiln that cannot be imported
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('a broken install')\n")
    out, err = run([boot, str(broken.parent), str(site)], KILN_GT4PY="1")
    assert out == ["off", "1"], (out, err)
    assert err.count("kiln is off in this process") == 1, err


def test_package_identity_sees_every_edit_with_one_stat_per_file(tmp_path, monkeypatch):
    """The code identity of a package (kiln._session.package_id: DaCe's and
    GT4Py's in every alias): another digest after an edit that keeps the
    size, a new file, a renamed one or a file in a subpackage; the same for
    a copy of __pycache__ and .pyc; named by the package's real directory
    (a symbolic link to it is the same package); one stat per file."""
    import hashlib
    import types
    from kiln import _session

    pkg = tmp_path / "pkg"
    (pkg / "sub" / "__pycache__").mkdir(parents=True)
    (pkg / "__init__.py").write_text("x = 1\n")
    (pkg / "sub" / "a.py").write_text("y = 2\n")
    (pkg / "data.txt").write_text("z\n")
    mod = types.SimpleNamespace(__file__=str(pkg / "__init__.py"))

    def digest(m=mod):
        h = hashlib.sha256()
        _session.package_id(h, m)
        return h.hexdigest()

    first = digest()
    assert digest() == first
    link = tmp_path / "link"
    link.symlink_to(pkg)
    assert digest(types.SimpleNamespace(__file__=str(link / "__init__.py"))) == first
    (pkg / "sub" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    (pkg / "sub" / "b.pyc").write_bytes(b"\0")
    assert digest() == first, "__pycache__ and .pyc are not the package's code"
    seen = {first}
    st = os.stat(pkg / "sub" / "a.py")
    (pkg / "sub" / "a.py").write_text("y = 3\n")           # same size
    os.utime(pkg / "sub" / "a.py", ns=(st.st_atime_ns, st.st_mtime_ns + 1000))
    seen.add(digest())
    (pkg / "sub" / "c.py").write_text("")
    seen.add(digest())
    (pkg / "sub" / "c.py").rename(pkg / "sub" / "d.py")
    seen.add(digest())
    assert len(seen) == 4, "an edit, a new file or a rename kept the package's identity"

    files = [os.path.join(r, f) for r, _, fs in os.walk(pkg) for f in fs
             if "__pycache__" not in r and not f.endswith(".pyc")]
    stats = []
    real_scandir = os.scandir

    class Counted:
        def __init__(self, e):
            self._e = e

        def __getattr__(self, name):
            return getattr(self._e, name)

        def stat(self, *a, **kw):
            stats.append(self._e.path)
            return self._e.stat(*a, **kw)

    class It:
        def __init__(self, path):
            self._it = real_scandir(path)

        def __enter__(self):
            return (Counted(e) for e in self._it)

        def __exit__(self, *exc):
            self._it.close()

    monkeypatch.setattr(os, "scandir", It)
    digest()
    assert sorted(stats) == sorted(files)
