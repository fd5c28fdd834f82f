"""
kiln.dace against the real DaCe (the vendored copy that run.py --dace
unpacks; meson test py_dace): several processes, each with its own build
folder as DaCe's ranks have, build two programs once between them, load
and run them; fresh processes afterwards build nothing; a program that does
not compile raises DaCe's own CompilationError with the compiler's output.
Skipped where DaCe cannot be imported.
"""

import json
import os
import re
import subprocess
import sys
import textwrap
import time

import pytest

dace = pytest.importorskip("dace")
import dace.library  # noqa: E402  (after the skip: DaCe may be absent)

PROGRAMS = textwrap.dedent('''
    import sys
    import numpy as np
    import dace
    import kiln.dace
    kiln.dace.install(socket=sys.argv[1])
    N = dace.symbol("N")

    @dace.program
    def axpy(a: dace.float64, x: dace.float64[N], y: dace.float64[N]):
        y[:] = a * x + y

    @dace.program
    def jacobi(A: dace.float64[N, N], B: dace.float64[N, N]):
        for t in range(4):
            B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[:-2, 1:-1] + A[2:, 1:-1] +
                                   A[1:-1, :-2] + A[1:-1, 2:])
            A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[:-2, 1:-1] + B[2:, 1:-1] +
                                   B[1:-1, :-2] + B[1:-1, 2:])

    x = np.arange(16, dtype=np.float64)
    y = np.ones(16)
    axpy(2.0, x, y)
    assert np.allclose(y, 2.0 * np.arange(16) + 1.0), y
    A = np.fromfunction(lambda i, j: (i * 7 + j * 3) % 11, (12, 12))
    B = np.zeros((12, 12))
    want_a, want_b = A.copy(), B.copy()
    for t in range(4):
        want_b[1:-1, 1:-1] = 0.2 * (want_a[1:-1, 1:-1] + want_a[:-2, 1:-1] + want_a[2:, 1:-1] +
                                    want_a[1:-1, :-2] + want_a[1:-1, 2:])
        want_a[1:-1, 1:-1] = 0.2 * (want_b[1:-1, 1:-1] + want_b[:-2, 1:-1] +
                                    want_b[2:, 1:-1] + want_b[1:-1, :-2] + want_b[1:-1, 2:])
    jacobi(A, B)
    assert np.allclose(A, want_a) and np.allclose(B, want_b)
    print("built", kiln.dace.stats["built"], "looked_up", kiln.dace.stats["looked_up"],
          "fallbacks", kiln.dace.stats["fallbacks"])
''')

BROKEN = textwrap.dedent('''
    import sys
    import dace
    from dace.codegen.exceptions import CompilationError
    import kiln.dace
    kiln.dace.install(socket=sys.argv[1])
    sdfg = dace.SDFG("broken")
    st = sdfg.add_state()
    sdfg.add_array("A", [1], dace.float64)
    t = st.add_tasklet("t", {}, {"o"}, "o = kiln_undeclared_thing;",
                       language=dace.Language.CPP)
    st.add_edge(t, "o", st.add_write("A"), None, dace.Memlet("A[0]"))
    try:
        sdfg.compile()
    except CompilationError as e:
        print("CompilationError", "kiln_undeclared_thing" in str(e))
''')


def run_ranks(daemon, tmp_path, script, ranks, tag, name="programs", extra_env=None):
    # One script file for every run, as the ranks of a job share theirs: the
    # SDFG's hash in include/hash.h covers the Python file's path (its debug
    # information), so a program from another file is another key.
    path = tmp_path / ("%s.py" % name)
    path.write_text(script)
    procs = []
    for r in range(ranks):
        env = dict(os.environ)
        # DaCe's per-rank build folders, and its node-wide cache kept private.
        env["DACE_default_build_folder"] = str(tmp_path / ("%s_rank%d" % (tag, r)))
        env["DACE_BUILD_CACHE_DIR"] = str(tmp_path / "dace-node-cache")
        for var, value in (extra_env or {}).items():
            if value is None:
                env.pop(var, None)
            else:
                env[var] = value
        procs.append(subprocess.Popen([sys.executable, str(path), daemon.socket], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, cwd=str(tmp_path)))
    outs = [p.communicate(timeout=600)[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out
    return outs


def counts(out):
    """(built, looked_up, fallbacks) that a script printed."""
    m = re.search(r"built (\d+) looked_up (\d+) fallbacks (\d+)", out)
    assert m, out
    return tuple(int(g) for g in m.groups())


def builds(daemon):
    out = subprocess.run([os.environ["KILN_TEST_CLI"], "--socket", daemon.socket, "--json",
                          "status"], stdout=subprocess.PIPE, text=True, check=True).stdout
    return json.loads(out)["builds_started"]


def quiet_builds(daemon):
    """builds(daemon) once nothing is in flight or queued: a baseline that a
    background build still to start (the precompiled <dace/dace.h>, queued
    behind the programs that asked for it) cannot move later."""
    deadline = time.monotonic() + 120
    while True:
        out = subprocess.run([os.environ["KILN_TEST_CLI"], "--socket", daemon.socket, "--json",
                              "status", "-v"], stdout=subprocess.PIPE, text=True,
                             check=True).stdout
        st = json.loads(out)
        busy = st["queued"] + st["in_flight"] + sum(st["flights"].values())
        if busy == 0:
            return st["builds_started"]
        assert time.monotonic() < deadline, ("kilnd still busy after 120 s", st["flights"])
        time.sleep(0.1)


def test_ranks_build_each_program_once(daemon, tmp_path):
    before = builds(daemon)
    outs = run_ranks(daemon, tmp_path, PROGRAMS, 3, "cold")
    for out in outs:
        # Through kiln, each: built, or found by content when another rank's
        # build of it had ended before this rank generated its code.
        b, l, f = counts(out)
        assert b + l == 2 and f == 0, out
    # axpy, jacobi, DaCe's loader stub and the precompiled <dace/dace.h>
    # (DaCe's compiler.precompiled_header is on; built in the background,
    # nobody waits for it): once each for all ranks.
    deadline = time.monotonic() + 120
    while True:
        ls = json.loads(subprocess.run([os.environ["KILN_TEST_CLI"], "--socket",
                                        daemon.socket, "--json", "ls"],
                                       stdout=subprocess.PIPE, text=True, check=True).stdout)
        entries = ls if isinstance(ls, list) else ls["entries"]
        pch = [e for e in entries if e["output"] == "pch"]
        if pch or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert len(pch) == 1 and pch[0]["label"] == "precompiled dace/dace.h", entries
    assert builds(daemon) - before == 4
    # Fresh processes and folders: everything from kiln, nothing compiled.
    warm = quiet_builds(daemon)
    outs = run_ranks(daemon, tmp_path, PROGRAMS, 2, "warm")
    assert builds(daemon) == warm
    # Found by content before code generation: nothing generated, nothing sent.
    for out in outs:
        assert counts(out) == (0, 2, 0), out


def test_compile_error_is_dace_s(daemon, tmp_path):
    out = run_ranks(daemon, tmp_path, BROKEN, 1, "broken", name="broken")[0]
    assert "CompilationError True" in out, out


# A program whose result is a macro of the compile line: what it returns shows
# which configuration its library was built with.
KVAL = textwrap.dedent('''
    import sys
    import numpy as np
    import dace
    import kiln.dace
    kiln.dace.install(socket=sys.argv[1])
    sdfg = dace.SDFG("kval")
    sdfg.add_array("A", [1], dace.int64)
    st = sdfg.add_state()
    t = st.add_tasklet("t", {}, {"o"}, "o = KVAL;", language=dace.Language.CPP)
    st.add_edge(t, "o", st.add_write("A"), None, dace.Memlet("A[0]"))
    A = np.zeros(1, dtype=np.int64)
    sdfg(A=A)
    print("kval", int(A[0]))
    print("built", kiln.dace.stats["built"], "looked_up", kiln.dace.stats["looked_up"],
          "fallbacks", kiln.dace.stats["fallbacks"])
''')


def kval_runs(daemon, tmp_path, configure):
    """Runs KVAL in fresh processes, each with its own build folder, with
    configure(kval) giving the environment that sets -DKVAL=kval: KVAL=1,
    then 2, then 1 again; each result must be what its configuration says,
    and the third is found by content (the alias is still shared across
    folders)."""
    def run(kval, tag):
        out = run_ranks(daemon, tmp_path, KVAL, 1, tag, name="kval",
                        extra_env=configure(kval))[0]
        m = re.search(r"kval (-?\d+)", out)
        assert m, out
        return int(m.group(1)), counts(out), out

    got, c, out = run(1, "kval1")
    assert (got, c) == (1, (1, 0, 0)), out
    # The same program under another configuration: without the override in
    # the alias, this run finds KVAL=1's library by content and returns 1.
    got, c, out = run(2, "kval2")
    assert (got, c) == (2, (1, 0, 0)), out
    got, c, out = run(1, "kval1_again")
    assert (got, c) == (1, (0, 1, 0)), out


def test_alias_covers_dace_environment_overrides(daemon, tmp_path):
    """DaCe's Config.get reads DACE_<section>_<key> before its stored
    configuration: DACE_compiler_cpu_args="... -DKVAL=2" must be a miss for
    the program built with -DKVAL=1, not a hit that returns 1."""
    args = dace.config.Config.get_default("compiler", "cpu", "args")
    kval_runs(daemon, tmp_path, lambda kval: {
        "DACE_compiler_cpu_args": "%s -DKVAL=%d" % (args, kval), "DACE_CONFIG": None})


def test_alias_covers_dace_config_file(daemon, tmp_path):
    """The configuration file DaCe reads (here named by DACE_CONFIG), edited
    between two processes: the second process gets its own build."""
    args = dace.config.Config.get_default("compiler", "cpu", "args")
    conf = tmp_path / "kval.conf"

    def configure(kval):
        # JSON is YAML: DaCe reads it as its configuration file.
        conf.write_text(json.dumps({"compiler": {"cpu": {"args": "%s -DKVAL=%d"
                                                          % (args, kval)}}}))
        return {"DACE_CONFIG": str(conf), "DACE_compiler_cpu_args": None}

    kval_runs(daemon, tmp_path, configure)


def test_alias_covers_every_dace_variable_and_the_config_file(monkeypatch, tmp_path):
    """In one process: every variable whose name starts with DACE_ in any
    case, set or unset or empty, the variable that names the configuration
    file, and the file DaCe read (its path and content) change the alias;
    the build folder's variables and DaCe's own advisory build cache do
    not."""
    import kiln.dace
    from dace.config import Config

    for var in [v for v in os.environ if v.upper().startswith("DACE_")]:
        monkeypatch.delenv(var)
    monkeypatch.setattr(Config._data, "_cfg_filename", None)
    sdfg = dace.SDFG("alias_probe")
    sdfg.add_state()

    def alias():
        a = kiln.dace._content_alias(sdfg)
        assert a is not None
        return a

    base = alias()
    # Left out: they do not change the generated code or its build.
    monkeypatch.setenv("DACE_default_build_folder", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("DACE_BUILD_CACHE_DIR", str(tmp_path / "node-cache"))
    assert alias() == base
    monkeypatch.delenv("DACE_default_build_folder")
    monkeypatch.delenv("DACE_BUILD_CACHE_DIR")
    assert alias() == base

    seen = {base}

    def changed():
        a = alias()
        assert a not in seen
        seen.add(a)

    monkeypatch.setenv("DACE_compiler_cpu_args", "")
    changed()                                   # set but empty is not unset
    monkeypatch.setenv("DACE_compiler_cpu_args", "-DKVAL=2")
    changed()
    monkeypatch.delenv("DACE_compiler_cpu_args")
    assert alias() == base
    for var in ("dace_compiler_cpu_args", "DACE_COMPILER_CPU_ARGS", "Dace_compiler_cpu_args"):
        monkeypatch.setenv(var, "-DKVAL=2")
        changed()
        monkeypatch.delenv(var)
    monkeypatch.setenv("DACE_some_future_key", "1")
    changed()
    monkeypatch.delenv("DACE_some_future_key")
    conf = tmp_path / "dace.conf"
    monkeypatch.setenv("DACE_CONFIG", str(conf))
    changed()
    monkeypatch.delenv("DACE_CONFIG")
    assert alias() == base
    # The file DaCe read: its content, and its path.
    conf.write_text("compiler:\n  cpu:\n    args: -DKVAL=1\n")
    monkeypatch.setattr(Config._data, "_cfg_filename", str(conf))
    changed()
    conf.write_text("compiler:\n  cpu:\n    args: -DKVAL=2\n")
    changed()
    other = tmp_path / "other.conf"
    other.write_text(conf.read_text())
    monkeypatch.setattr(Config._data, "_cfg_filename", str(other))
    changed()
    other.unlink()
    changed()                                   # read, and gone since


# An SDFG asked to be instrumented: what its library reports shows whether it
# was built with the instrumentation (DaCe writes <build folder>/perf/report-*
# only then).
TIMED = textwrap.dedent('''
    import os, sys
    import numpy as np
    import dace
    import kiln.dace
    kiln.dace.install(socket=sys.argv[1])
    N = dace.symbol("N")

    @dace.program
    def timed(x: dace.float64[N]):
        x[:] = x + 1.0

    sdfg = timed.to_sdfg()
    if os.environ.get("TIMED_INSTRUMENT") == "1":
        sdfg.instrument = dace.InstrumentationType.Timer
    x = np.zeros(8)
    sdfg(x=x, N=8)
    assert np.allclose(x, 1.0), x
    report = sdfg.get_latest_report()
    path = sdfg.get_latest_report_path()
    print("report", report is not None,
          "own_folder", path is not None and os.path.abspath(path).startswith(
              os.path.abspath(sdfg.build_folder) + os.sep))
    print("built", kiln.dace.stats["built"], "looked_up", kiln.dace.stats["looked_up"],
          "fallbacks", kiln.dace.stats["fallbacks"])
''')


def test_instrumented_program_is_not_served_the_uninstrumented_library(daemon, tmp_path):
    """The same program, built plain first, then asked for with
    sdfg.instrument = Timer in fresh processes with their own folders: each
    instrumented run is generated and built with its instrumentation (its
    report is written, into its own folder), not served the plain library
    found by content (no report: SDFG.hash_sdfg leaves every "instrument"
    key out); the plain program is still found."""
    def run(tag, instrument):
        out = run_ranks(daemon, tmp_path, TIMED, 1, tag, name="timed",
                        extra_env={"TIMED_INSTRUMENT": instrument})[0]
        m = re.search(r"report (\w+) own_folder (\w+)", out)
        assert m, out
        return m.groups(), counts(out), out

    got, c, out = run("plain", "0")
    assert got == ("False", "False") and c == (1, 0, 0), out
    got, c, out = run("timer", "1")
    assert got == ("True", "True") and c == (1, 0, 0), out
    # another folder: the library writes its report into the folder it was
    # generated for, so it is not shared with the first instrumented run
    got, c, out = run("timer_again", "1")
    assert got == ("True", "True") and c == (1, 0, 0), out
    got, c, out = run("plain_again", "0")
    assert got == ("False", "False") and c == (0, 1, 0), out


def test_alias_covers_every_instrumentation_setting(tmp_path):
    """In one process: every instrumentation DaCe's code generation reads
    (the SDFG's, a state's, its symbol instrumentation, a map's, a
    tasklet's, a nested SDFG's, an access node's data instrumentation Save
    and Restore, GPU trace markers, an instrumentation condition) changes
    kiln.dace's alias; an instrumented program's alias holds its build
    folder (the generated code writes its report there), a plain one's
    does not."""
    import kiln.dace

    def make():
        N = dace.symbol("N")

        @dace.program
        def inner(y: dace.float64[N]):
            y[:] = y * 2.0

        @dace.program
        def probe(x: dace.float64[N], y: dace.float64[N]):
            for i in dace.map[0:N]:
                y[i] = x[i] + 1.0
            inner(y)

        sdfg = probe.to_sdfg(simplify=False)
        sdfg.build_folder = str(tmp_path / "probe")
        return sdfg

    def alias(sdfg):
        a = kiln.dace._content_alias(sdfg)
        assert a is not None
        return a

    def first(sdfg, kind):
        for node, parent in sdfg.all_nodes_recursive():
            if isinstance(node, kind):
                return node, parent
        raise AssertionError("no %s in the probe" % kind.__name__)

    It, Dt = dace.dtypes.InstrumentationType, dace.dtypes.DataInstrumentationType
    nodes = dace.sdfg.nodes
    edits = {
        "sdfg Timer": lambda s: setattr(s, "instrument", It.Timer),
        "sdfg GPU_TX_MARKERS": lambda s: setattr(s, "instrument", It.GPU_TX_MARKERS),
        "state Timer": lambda s: setattr(s.start_state, "instrument", It.Timer),
        "state symbol_instrument": lambda s: setattr(s.start_state, "symbol_instrument",
                                                     Dt.Save),
        "map Timer": lambda s: setattr(first(s, nodes.MapEntry)[0].map, "instrument", It.Timer),
        "map GPU_TX_MARKERS": lambda s: setattr(first(s, nodes.MapEntry)[0].map, "instrument",
                                                It.GPU_TX_MARKERS),
        "tasklet Timer": lambda s: setattr(first(s, nodes.Tasklet)[0], "instrument", It.Timer),
        "nested SDFG Timer": lambda s: setattr(first(s, nodes.NestedSDFG)[0], "instrument",
                                               It.Timer),
        "access node Save": lambda s: setattr(first(s, nodes.AccessNode)[0], "instrument",
                                              Dt.Save),
        "access node Restore": lambda s: setattr(first(s, nodes.AccessNode)[0], "instrument",
                                                 Dt.Restore),
    }
    plain = make()
    base = alias(plain)
    moved = make()
    moved.build_folder = str(tmp_path / "elsewhere")
    assert alias(moved) == base            # a plain program's alias has no folder
    seen = {base}
    for what, edit in edits.items():
        sdfg = make()
        edit(sdfg)
        a = alias(sdfg)
        assert a not in seen, what
        seen.add(a)
        sdfg.build_folder = str(tmp_path / "elsewhere")
        assert alias(sdfg) != a, what + ": the report's folder"
    # a condition on data instrumentation
    sdfg = make()
    node = first(sdfg, nodes.AccessNode)[0]
    node.instrument = Dt.Save
    saved = alias(sdfg)
    node.instrument_condition = dace.properties.CodeBlock("N > 4")
    assert alias(sdfg) != saved


AUTO = textwrap.dedent('''
    import site
    import sys
    site.addsitedir(sys.argv[2])   # where kiln-dace.pth is, as in site-packages
    import numpy as np
    import dace
    N = dace.symbol("N")

    @dace.program
    def triple(x: dace.float64[N]):
        x[:] = 3 * x

    x = np.ones(8)
    triple(x)
    assert (x == 3).all(), x
    import kiln.dace
    print("built", kiln.dace.stats["built"], "looked_up", kiln.dace.stats["looked_up"],
          "fallbacks", kiln.dace.stats["fallbacks"])
''')


@pytest.mark.parametrize("switch", ["1", "0"])
def test_environment_switch(daemon, tmp_path, switch):
    """KILN_DACE=1 and the installed kiln-dace.pth switch DaCe over without
    a line of code; KILN_DACE=0 leaves DaCe's own build."""
    script = tmp_path / "auto.py"
    script.write_text(AUTO)
    env = dict(os.environ, KILN_DACE=switch, KILN_SOCKET=daemon.socket)
    env["DACE_default_build_folder"] = str(tmp_path / "auto")
    env["DACE_BUILD_CACHE_DIR"] = str(tmp_path / "dace-node-cache")
    pth_dir = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    before = builds(daemon)
    p = subprocess.run([sys.executable, str(script), daemon.socket, pth_dir], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       cwd=str(tmp_path), timeout=600)
    assert p.returncode == 0, p.stdout
    b, l, f = counts(p.stdout)
    assert (b + l, f) == ((1, 0) if switch == "1" else (0, 0)), p.stdout
    # switched on: one line at exit says so, and where the program came from
    said = [l for l in p.stdout.splitlines() if l.startswith("kiln: on in this process")]
    assert len(said) == (1 if switch == "1" else 0), p.stdout
    # The program, and DaCe's stub and the .gch of dace.h unless an earlier
    # test built them (the .gch in the background: maybe not started yet).
    assert builds(daemon) - before in ((1, 2, 3) if switch == "1" else (0,))


def run_switched(daemon, tmp_path, folder, stderr, **extra):
    """AUTO under KILN_DACE=1 with the package's kiln-dace.pth, DaCe building
    in tmp_path/folder, extra variables set; stderr: subprocess.PIPE, or
    subprocess.STDOUT to read both as one."""
    script = tmp_path / "auto.py"
    script.write_text(AUTO)
    env = dict(os.environ, KILN_DACE="1", KILN_SOCKET=daemon.socket, **extra)
    env["DACE_default_build_folder"] = str(tmp_path / folder)
    env["DACE_BUILD_CACHE_DIR"] = str(tmp_path / "dace-node-cache")
    pth_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return subprocess.run([sys.executable, str(script), daemon.socket, pth_dir], env=env,
                          stdout=subprocess.PIPE, stderr=stderr, text=True,
                          cwd=str(tmp_path), timeout=600)


def test_a_missing_libkiln_falls_back_with_one_line(daemon, tmp_path):
    """KILN_DACE=1 where libkiln cannot be loaded (not on the loader path, a
    $KILN_LIBRARY that names nothing): the program still runs, built by
    DaCe's own CMake, after one line on stderr that names the library and
    the remedy. Before, the first build raised OSError and the job died."""
    before = quiet_builds(daemon)
    p = run_switched(daemon, tmp_path, "nolib", subprocess.PIPE,
                     KILN_LIBRARY=str(tmp_path / "nowhere" / "libkiln.so.0"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert counts(p.stdout) == (0, 0, 1), p.stdout + p.stderr
    said = [l for l in p.stderr.splitlines() if "libkiln" in l]
    assert len(said) == 1, p.stderr
    assert "cannot load" in said[0] and "KILN_LIBRARY" in said[0], said
    assert "DaCe builds as usual" in said[0], said
    # the switch's line at exit: on, and where the program came from
    assert ("kiln: on in this process" in p.stderr and
            "0 built or found by kilnd, 0 found before code generation, 1 built by DaCe's "
            "CMake" in p.stderr), p.stderr
    assert builds(daemon) == before


def test_refused_arguments_fall_back_to_cmake(daemon, tmp_path):
    """An argument kiln's allow-list refuses (here -Wl,-Map=, which writes a file, in DaCe's
    compiler.cpu.args) is no error: DaCe's own CMake build runs instead,
    and one line on stderr says why."""
    before = quiet_builds(daemon)
    p = run_switched(daemon, tmp_path, "refused", subprocess.STDOUT,
                     DACE_compiler_cpu_args="-O2 -fPIC -Wl,-Map=kiln-test.map")
    assert p.returncode == 0, p.stdout
    assert counts(p.stdout) == (0, 0, 1), p.stdout
    assert "kiln.dace: building with DaCe's CMake: kiln refuses the request" in p.stdout
    assert "-Map" in p.stdout
    assert builds(daemon) == before


GPU = textwrap.dedent('''
    import ctypes, os, sys
    import numpy as np
    import dace
    import kiln.dace
    kiln.dace.install(socket=sys.argv[1])
    N = dace.symbol("N")

    @dace.program
    def gaxpy(a: dace.float64, x: dace.float64[N], y: dace.float64[N]):
        y[:] = a * x + y

    sdfg = gaxpy.to_sdfg()
    sdfg.apply_gpu_transformations()
    csdfg = sdfg.compile()
    print("built", kiln.dace.stats["built"], "looked_up", kiln.dace.stats["looked_up"],
          "fallbacks", kiln.dace.stats["fallbacks"])
    lib = ctypes.CDLL(csdfg.filename)
    print("symbols", all(hasattr(lib, s) for s in ("__dace_init_gaxpy", "__program_gaxpy",
                                                   "__dace_init_cuda")))
    if os.environ.get("KILN_TEST_RUN_GPU") == "1":
        x = np.arange(64, dtype=np.float64)
        y = np.ones(64)
        csdfg(a=2.0, x=x, y=y, N=64)
        assert np.allclose(y, 2.0 * np.arange(64) + 1.0), y
        print("ran on the GPU")
''')


def test_gpu_program_through_nvcc(daemon, tmp_path):
    """A GPU program (src/cpu/*.cpp and src/cuda/*.cu in one library) goes
    through kilnd's nvcc toolchain, once for two ranks, and the library has
    DaCe's entry points. Without a GPU it is built and loaded, not run (the
    CUDA runtime inside needs a device only when DaCe initialises it); with
    KILN_TEST_RUN_GPU=1 on a GPU node it runs and is checked."""
    import shutil
    if shutil.which("nvcc") is None:
        pytest.skip("no nvcc on PATH: kilnd has no nvcc toolchain")
    script = tmp_path / "gpu.py"
    script.write_text(GPU)
    before = builds(daemon)
    outs = []
    procs = []
    for r in range(2):
        env = dict(os.environ, DACE_compiler_cuda_backend="cuda")
        env.setdefault("DACE_compiler_cuda_cuda_arch", "80")
        env["DACE_default_build_folder"] = str(tmp_path / ("gpu_rank%d" % r))
        env["DACE_BUILD_CACHE_DIR"] = str(tmp_path / "dace-node-cache")
        procs.append(subprocess.Popen([sys.executable, str(script), daemon.socket], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, cwd=str(tmp_path)))
    for p in procs:
        outs.append(p.communicate(timeout=900)[0])
        assert p.returncode == 0, outs[-1]
    for out in outs:
        b, l, f = counts(out)
        assert b + l == 1 and f == 0, out
        assert "symbols True" in out, out
    # One nvcc build for both ranks, plus DaCe's stub if no earlier test built
    # it, plus the .gch of dace/dace.h for nvcc's host compiler, which compiles
    # the .cpp itself (docs/cuda.md, "Host sources"; built in the background).
    assert builds(daemon) - before in (1, 2, 3)


MANY = textwrap.dedent('''
    import sys
    import numpy as np
    import dace
    import kiln.dace
    kiln.dace.install(socket=sys.argv[1])
    N = dace.symbol("N")

    @dace.program
    def scale(x: dace.float64[N]):
        x[:] = 3.0 * x

    @dace.program
    def shift(x: dace.float64[N]):
        x[:] = x + 5.0

    @dace.program
    def square(x: dace.float64[N]):
        x[:] = x * x

    progs = kiln.dace.compile_many([scale.to_sdfg(), shift.to_sdfg(), square.to_sdfg()])
    x = np.arange(8, dtype=np.float64)
    progs[0](x=x, N=8)
    progs[1](x=x, N=8)
    progs[2](x=x, N=8)
    assert np.allclose(x, (3.0 * np.arange(8) + 5.0) ** 2), x
    print("built", kiln.dace.stats["built"], "looked_up", kiln.dace.stats["looked_up"],
          "fallbacks", kiln.dace.stats["fallbacks"])
''')


def test_compile_many_sends_the_builds_together(daemon, tmp_path):
    """kiln.dace.compile_many generates code for each SDFG, has every build
    in flight at once, loads each; the results are right, and a second
    process builds nothing."""
    before = builds(daemon)
    out = run_ranks(daemon, tmp_path, MANY, 1, "many", name="many")[0]
    assert counts(out) == (3, 0, 0), out
    grew = builds(daemon) - before
    # three programs (the stub and the .gch may come from earlier tests)
    assert 3 <= grew <= 5, grew
    warm = quiet_builds(daemon)
    out = run_ranks(daemon, tmp_path, MANY, 1, "many_warm", name="many")[0]
    assert counts(out) == (3, 0, 0), out
    assert builds(daemon) == warm


# What GT4Py's DaCe backend does with a program (gt4py.next, program_processors/
# runners/dace/workflow/compilation.py, DaCeCompiler.__call__): the SDFG arrives
# as JSON, is compiled inside a temporary DaCe configuration with GT4Py's
# settings, and called. GT4Py itself cannot be installed here (no PyPI); these
# are the exact DaCe entry points it calls.
GT4PY = textwrap.dedent('''
    import json, os, sys
    import numpy as np
    import dace
    import kiln.dace
    kiln.dace.install(socket=sys.argv[1])
    N = dace.symbol("N")

    @dace.program
    def diffuse(a: dace.float64[N], b: dace.float64[N]):
        b[1:-1] = a[1:-1] + 0.25 * (a[:-2] - 2.0 * a[1:-1] + a[2:])

    source = json.dumps(diffuse.to_sdfg().to_json())   # GT4Py's program_source
    gpu = os.environ.get("GT4PY_DEVICE") == "gpu"
    sdfg = dace.SDFG.from_json(json.loads(source))
    if gpu:
        sdfg.apply_gpu_transformations()
    with dace.config.temporary_config():
        dace.config.Config.set("compiler.build_type", value="Debug")
        dace.config.Config.set("compiler.use_cache", value=True)
        dace.config.Config.set("compiler.cpu.args", value="-std=c++14 -fPIC -O3 -march=native "
                               "-Wall -Wextra -Wno-unused-parameter -Wno-unused-label")
        dace.config.Config.set("compiler.cuda.args", value="-Xcompiler -O3 -Xcompiler "
                               "-march=native -Xcompiler -Wno-unused-parameter")
        dace.config.Config.set("compiler.cuda.max_concurrent_streams", value=1)
        dace.config.Config.set("instrumentation", "report_each_invocation", value=True)
        program = sdfg.compile(validate=False)
    print("built", kiln.dace.stats["built"], "looked_up", kiln.dace.stats["looked_up"],
          "fallbacks", kiln.dace.stats["fallbacks"])
    if not gpu:
        a = np.arange(10, dtype=np.float64) ** 2
        b = np.zeros(10)
        program(a=a, b=b, N=10)
        want = np.zeros(10)
        want[1:-1] = a[1:-1] + 0.25 * (a[:-2] - 2.0 * a[1:-1] + a[2:])
        assert np.allclose(b, want), b
        print("ran")
''')


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_gt4py_entry_points(daemon, tmp_path, device):
    """A program compiled the way GT4Py's DaCe backend compiles it (SDFG from
    JSON, GT4Py's configuration, sdfg.compile(validate=False)) goes through
    kiln.dace: built by kilnd, no fallback; on the CPU it runs and is
    checked; the GPU variant (GT4Py's "-Xcompiler -O3 ..." nvcc arguments)
    is built through nvcc."""
    import shutil
    if device == "gpu" and shutil.which("nvcc") is None:
        pytest.skip("no nvcc on PATH: kilnd has no nvcc toolchain")
    script = tmp_path / "gt4py_like.py"
    script.write_text(GT4PY)
    env = dict(os.environ, GT4PY_DEVICE=device, DACE_compiler_cuda_backend="cuda")
    env.setdefault("DACE_compiler_cuda_cuda_arch", "80")
    env["DACE_default_build_folder"] = str(tmp_path / ("gt4py_" + device))
    env["DACE_BUILD_CACHE_DIR"] = str(tmp_path / "dace-node-cache")
    p = subprocess.run([sys.executable, str(script), daemon.socket], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       cwd=str(tmp_path), timeout=900)
    assert p.returncode == 0, p.stdout
    assert counts(p.stdout) == (1, 0, 0), p.stdout
    assert ("ran" in p.stdout.split()) == (device == "cpu"), p.stdout


@dace.library.environment
class KilnPlainEnv:
    """A library environment kiln.dace can translate: includes, libraries, flags."""
    cmake_minimum_version = None
    cmake_packages = []
    cmake_variables = {}
    cmake_includes = ["/opt/kiln-test/include"]
    cmake_libraries = ["m", "/opt/kiln-test/lib/libkt.so"]
    cmake_compile_flags = ["-DKILN_ENV=1"]
    cmake_link_flags = ["-Wl,--as-needed"]
    cmake_files = []
    headers = []
    state_fields = []
    init_code = ""
    finalize_code = ""
    dependencies = []


@dace.library.environment
class KilnCMakeEnv:
    """One that needs CMake's find_package: kiln.dace falls back."""
    cmake_minimum_version = None
    cmake_packages = ["BLAS"]
    cmake_variables = {}
    cmake_includes = []
    cmake_libraries = []
    cmake_compile_flags = []
    cmake_link_flags = []
    cmake_files = []
    headers = []
    state_fields = []
    init_code = ""
    finalize_code = ""
    dependencies = []


def test_library_environments(tmp_path):
    """dace_environments.csv: includes, libraries and flags become arguments;
    an environment that needs CMake (find_package), or one DaCe does not
    know, is a fallback with its reason, never an error."""
    import kiln.dace

    def envs(*names):
        (tmp_path / "dace_environments.csv").write_text("".join(n + "\n" for n in names))
        return kiln.dace._environments(str(tmp_path))

    assert envs() == ([], None)
    args, why = envs(KilnPlainEnv.full_class_path())
    assert why is None
    assert args == ["-I/opt/kiln-test/include", "-DKILN_ENV=1", "/opt/kiln-test/lib/libkt.so",
                    "-lm", "-Wl,--as-needed"], args
    args, why = envs(KilnPlainEnv.full_class_path(), KilnCMakeEnv.full_class_path())
    assert args is None and "needs CMake" in why, why
    args, why = envs("no.such.Environment")
    assert args is None and "no.such.Environment" in why, why


def module_compiler(tmp_path, name="g++"):
    """A compiler outside /usr/bin, as a module system puts it (the system's
    g++ behind a script in <tmp>/opt/gcc/bin), by absolute path."""
    d = tmp_path / "opt" / "gcc" / "bin"
    d.mkdir(parents=True, exist_ok=True)
    cxx = d / name
    cxx.write_text('#!/bin/sh\nexec /usr/bin/g++ "$@"\n')
    cxx.chmod(0o755)
    return str(cxx)


def test_module_compiler_in_cxx_builds_through_kiln(daemon, tmp_path):
    """CXX names a compiler outside /usr/bin (a module's): kilnd builds with
    that compiler, named by path; nothing falls back to DaCe's CMake, and a
    second rank builds nothing."""
    cxx = module_compiler(tmp_path)
    before = builds(daemon)
    outs = run_ranks(daemon, tmp_path, PROGRAMS, 2, "module",
                     extra_env={"CXX": cxx, "CC": None})
    built = [counts(o) for o in outs]
    assert all(f == 0 for _, _, f in built), outs
    assert sum(b + l for b, l, _ in built) == 4, outs
    assert all("not c++" not in o for o in outs), outs
    out = subprocess.run([os.environ["KILN_TEST_CLI"], "--socket", daemon.socket, "--json", "ls"],
                         stdout=subprocess.PIPE, text=True, check=True).stdout
    toolchains = {e.get("toolchain") for e in json.loads(out)}
    assert cxx in toolchains, toolchains
    # two programs and DaCe's stub with that compiler, and maybe its .gch
    assert builds(daemon) - before in (3, 4), outs


def test_no_kilnd_builds_with_dace_and_says_so_once(tmp_path):
    """No kilnd answers (and no autospawn): DaCe builds as usual, one line
    on stderr says so, no traceback."""
    path = tmp_path / "programs.py"
    path.write_text(PROGRAMS)
    env = dict(os.environ)
    env.pop("KILN_AUTOSPAWN", None)
    env["DACE_default_build_folder"] = str(tmp_path / "nokilnd")
    env["DACE_BUILD_CACHE_DIR"] = str(tmp_path / "dace-node-cache")
    p = subprocess.run([sys.executable, str(path), str(tmp_path / "no-such.sock")], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       cwd=str(tmp_path), timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    lines = [l for l in p.stderr.splitlines() if l.startswith("kiln.dace:")]
    assert len(lines) == 1 and "no kilnd" in lines[0], p.stderr
    assert counts(p.stdout) == (0, 0, 2), p.stdout
