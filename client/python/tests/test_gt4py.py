"""
kiln.dace under the real GT4Py (gt4py.next with its DaCe CPU backend, the
vendored copy of ../shared/vendor/gt4py; run.py --gt4py unpacks it and skips
with 77 where it cannot import). GT4Py compiles in worker processes it
starts with "spawn" (GT4PY_BUILD_JOBS_MODE=process, the default), in
threads, or in the calling thread: a kiln.dace.install() inside main(),
which a spawned worker never runs, must reach every one of them.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

PROGRAM = textwrap.dedent('''
    import sys
    import numpy as np
    import gt4py.next as gtx
    from gt4py.next.program_processors.runners.dace import run_dace_cpu

    I = gtx.Dimension("I")
    J = gtx.Dimension("J")

    @gtx.field_operator
    def laplacian(a: gtx.Field[gtx.Dims[I, J], gtx.float64]) -> gtx.Field[gtx.Dims[I, J], gtx.float64]:
        return -4.0 * a + a(I + 1) + a(I - 1) + a(J + 1) + a(J - 1)

    @gtx.program(backend=run_dace_cpu)
    def laplacian_program(a: gtx.Field[gtx.Dims[I, J], gtx.float64],
                          out: gtx.Field[gtx.Dims[I, J], gtx.float64]):
        laplacian(a, out=out[1:-1, 1:-1])

    def main():
        import kiln.dace
        kiln.dace.install(socket=sys.argv[1])   # inside main(): GT4Py's workers never run it
        a_np = np.fromfunction(lambda i, j: np.sin(0.3 * i) + np.cos(0.2 * j) * i, (12, 10))
        a = gtx.as_field([I, J], a_np)
        out = gtx.as_field([I, J], np.zeros((12, 10)))
        laplacian_program(a, out)
        ref = (-4 * a_np[1:-1, 1:-1] + a_np[2:, 1:-1] + a_np[:-2, 1:-1] + a_np[1:-1, 2:] +
               a_np[1:-1, :-2])
        print("result", np.allclose(out.asnumpy()[1:-1, 1:-1], ref))

    if __name__ == "__main__":
        main()
''')


def status(daemon):
    out = subprocess.run([os.environ["KILN_TEST_CLI"], "--socket", daemon.socket, "--json",
                          "status"], stdout=subprocess.PIPE, text=True, check=True).stdout
    return json.loads(out)


def dace_cmake_ran(dace_cache):
    """DaCe's own CMake build leaves its configure cache in
    DACE_BUILD_CACHE_DIR; kiln.dace's builds never make it."""
    return os.path.isdir(os.path.join(dace_cache, "dace_build_cache_root", "configure"))


@pytest.mark.parametrize("mode", ["process", "thread", "serial"])
def test_install_in_main_reaches_gt4py_compile_workers(daemon, tmp_path, mode):
    """install() inside main(): the program is built (or found) by kilnd in
    every GT4PY_BUILD_JOBS_MODE, DaCe's CMake never runs, the result is
    right. Before, a spawned worker built with DaCe's CMake."""
    script = tmp_path / "laplacian.py"
    script.write_text(PROGRAM)
    env = dict(os.environ, GT4PY_BUILD_JOBS_MODE=mode, GT4PY_BUILD_CACHE_LIFETIME="persistent")
    env["GT4PY_BUILD_CACHE_DIR"] = str(tmp_path / "gt4py-cache")
    env["DACE_BUILD_CACHE_DIR"] = str(tmp_path / "dace-node-cache")
    env.pop("KILN_DACE", None)
    before = status(daemon)
    p = subprocess.run([sys.executable, str(script), daemon.socket], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       cwd=str(tmp_path), timeout=900)
    assert p.returncode == 0, p.stdout
    assert "result True" in p.stdout, p.stdout
    assert "building with DaCe's CMake" not in p.stdout, p.stdout
    assert not dace_cmake_ran(env["DACE_BUILD_CACHE_DIR"]), p.stdout
    after = status(daemon)
    # built by kilnd, or found there (an earlier mode built it): asked for
    assert after["requests"] > before["requests"], p.stdout


# ---- kiln.gt4py: programs found before GT4Py lowers them -------------------

RANK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gt4py_programs.py")
ALL_PROGRAMS = 6
GRANULE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gt4py_granule.py")


def entries(daemon):
    out = subprocess.run([os.environ["KILN_TEST_CLI"], "--socket", daemon.socket, "--json",
                          "ls"], stdout=subprocess.PIPE, text=True, check=True).stdout
    return json.loads(out)


def run_ranks(daemon, tmp_path, n, tag, script=RANK, **env_extra):
    """n ranks of gt4py_programs.py at once, each with its own new GT4Py
    folder, kiln.gt4py installed inside main(); their results and the
    lowerings they ran (in any process: the translation step counts itself
    in GT4Py's spawned workers too)."""
    log = tmp_path / ("%s.lowerings" % tag)
    env = dict(os.environ, RANK_KILN="gt4py", KILN_SOCKET=daemon.socket,
               RANK_LOG=str(log), GT4PY_BUILD_CACHE_LIFETIME="persistent",
               DACE_BUILD_CACHE_DIR=str(tmp_path / "dace-node-cache"), **env_extra)
    for v in ("KILN_DACE", "KILN_GT4PY"):
        env.pop(v, None)
    procs = []
    for r in range(n):
        env["GT4PY_BUILD_CACHE_DIR"] = str(tmp_path / ("%s-rank%d" % (tag, r)))
        env["RANK_INDEX"] = env["GRANULE_RANK"] = str(r)
        procs.append(subprocess.Popen([sys.executable, str(script)], env=dict(env),
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, cwd=str(tmp_path)))
    results = []
    for p in procs:
        out = p.communicate(timeout=900)[0]
        lines = [line for line in out.splitlines() if line.startswith("RANK ")]
        assert p.returncode == 0 and lines, out[-4000:]
        assert "building with DaCe's CMake" not in out, out[-4000:]
        res = json.loads(lines[-1][5:])
        res["output"] = out
        results.append(res)
    lowerings = len(log.read_text().splitlines()) if log.exists() else 0
    return results, lowerings


def own_flags(tag):
    """GT4Py's CPU flags (workflow/common.py) with a macro of the test's own:
    $CXXFLAGS replaces them, so the test's programs are built with other
    arguments than an earlier test's identical code (identical code is one
    entry: docs/gt4py.md), and their builds are the test's to count."""
    return ("-fPIC -O3 -march=native -Wall -Wextra -Wno-unused-parameter "
            "-Wno-unused-label -DKILN_TEST_ROUND_%s" % tag)


def test_gt4py_programs_lowered_once_per_node_then_never(daemon, tmp_path):
    """Three ranks at once, six programs (two of the example, four icon4py
    diffusion stencils), each rank its own GT4Py folder: every result
    matches NumPy, each program is lowered once on the node (the others
    wait for its claim) and compiled once; then three fresh ranks with new
    folders lower nothing and compile nothing: each program is found."""
    before = {e["key"] for e in entries(daemon)}
    s0 = status(daemon)
    flags = own_flags("lowered_once")
    results, lowerings = run_ranks(daemon, tmp_path, 3, "cold", CXXFLAGS=flags)
    for res in results:
        assert all(res["ok"].values()), res
        assert res["kiln_gt4py"]["fallbacks"] == 0, res["output"][-3000:]
    assert lowerings == ALL_PROGRAMS, [r["kiln_gt4py"] for r in results]
    assert sum(r["kiln_gt4py"]["lowered"] for r in results) == ALL_PROGRAMS
    assert sum(r["kiln_gt4py"]["hits"] for r in results) == 2 * ALL_PROGRAMS
    new = [e for e in entries(daemon) if e["key"] not in before]
    programs = [e for e in new if (e.get("alias") or "").startswith("gt4py:")]
    assert len(programs) == ALL_PROGRAMS, new
    others = [e for e in new if e not in programs]   # DaCe's stub, the .gch, once
    assert all(e["label"] in ("dace stub", "precompiled dace/dace.h") for e in others), others
    s1 = status(daemon)
    assert s1["builds_started"] - s0["builds_started"] == ALL_PROGRAMS + len(others)
    # each lowering claims its GT4Py alias, then its translation alias
    assert s1["claims"] - s0["claims"] == 2 * ALL_PROGRAMS

    results, lowerings = run_ranks(daemon, tmp_path, 3, "warm", CXXFLAGS=flags)
    for res in results:
        assert all(res["ok"].values()), res
        assert res["kiln_gt4py"] == {"hits": ALL_PROGRAMS, "lowered": 0, "fallbacks": 0}, res
    assert lowerings == 0
    assert status(daemon)["builds_started"] == s1["builds_started"]


def passes(tmp_path, tag):
    """How many times run_ranks' round tag ran GT4Py's IR passes (the part
    of the translation that reads the connectivity tables), in any process."""
    log = tmp_path / ("%s.lowerings.passes" % tag)
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_ranks_with_their_own_tables_compile_identical_code_once(daemon, tmp_path):
    """Three ranks of a decomposed run, each with its own connectivity
    tables (other contents, the same shapes): GT4Py's key holds the tables,
    so each rank's GT4Py alias is its own and each rank runs GT4Py's IR
    passes, but what they leave is the same program: its translation alias
    is one, so one rank lowers the rest (SDFG, transformations, code) and
    builds it, the others find it; one entry per program, each rank's alias
    naming it with its own load data, and each rank's result right for its
    own tables. Then fresh ranks with the same tables find theirs (no IR
    passes, no lowering, no build), and a fourth rank with new tables runs
    only the IR passes. No variant is reported."""
    names = "nabla2_for_w,nabla2_for_z"
    before = {e["key"] for e in entries(daemon)}
    s0 = status(daemon)
    flags = own_flags("tables")
    results, lowerings = run_ranks(daemon, tmp_path, 3, "tables", RANK_PROGRAMS=names,
                                   RANK_GRID_SEED="per-rank", CXXFLAGS=flags)
    for res in results:
        assert all(res["ok"].values()), res
        assert res["kiln_gt4py"]["fallbacks"] == 0, res["output"][-3000:]
    assert lowerings == 2, [r["kiln_gt4py"] for r in results]
    assert passes(tmp_path, "tables") == 6
    assert sum(r["kiln_gt4py"]["lowered"] for r in results) == 2
    assert sum(r["kiln_gt4py"]["hits"] for r in results) == 4
    new = [e for e in entries(daemon) if e["key"] not in before]
    programs = [e for e in new if (e.get("label") or "").startswith("dace ") and
                e["label"] != "dace stub"]
    assert len(programs) == 2, new
    s1 = status(daemon)
    assert s1["builds_started"] - s0["builds_started"] == 2 + len(new) - len(programs), (s0, s1)
    assert s1["variants"] == s0["variants"], s1
    results, lowerings = run_ranks(daemon, tmp_path, 3, "tables-again", RANK_PROGRAMS=names,
                                   RANK_GRID_SEED="per-rank", CXXFLAGS=flags)
    all_found(results, 2)
    assert lowerings == 0 and passes(tmp_path, "tables-again") == 0
    assert status(daemon)["builds_started"] == s1["builds_started"]
    # rank 3's tables are new: its GT4Py aliases miss, its IR passes leave
    # the programs the others built
    results, lowerings = run_ranks(daemon, tmp_path, 4, "tables-new", RANK_PROGRAMS=names,
                                   RANK_GRID_SEED="per-rank", CXXFLAGS=flags)
    all_found(results, 2)
    assert lowerings == 0 and passes(tmp_path, "tables-new") == 2
    s2 = status(daemon)
    assert s2["builds_started"] == s1["builds_started"]
    assert s2["variants"] == s0["variants"], s2


def all_found(results, hits):
    """Every rank's results right, each of its programs found (hits of
    them): no lowering, no fallback."""
    for res in results:
        assert all(res["ok"].values()), res
        assert res["kiln_gt4py"] == {"hits": hits, "lowered": 0, "fallbacks": 0}, res


def test_granule_variants_ahead_of_time_with_per_rank_tables(daemon, tmp_path):
    """icon4py's setup_program pattern (gt4py_granule.py): two ranks, each
    with its own tables, compile calculate_nabla2_for_w's two static
    variants ahead of time (enable_jit=False, then wait_for_compilation()),
    and call each once: every variant of every rank matches NumPy (each
    variant writes from its own level down: one served for the other would
    not); each rank runs the IR passes of both (4), each variant is lowered
    and built once (2); fresh ranks find all four programs (no passes, no
    lowering, no build). No variant report: static variants and per-rank
    tables are programs of their own."""
    flags = own_flags("granule")
    before = {e["key"] for e in entries(daemon)}
    s0 = status(daemon)
    results, lowerings = run_ranks(daemon, tmp_path, 2, "granule", script=GRANULE,
                                   GRANULE_PROGRAMS="nabla2_for_w", CXXFLAGS=flags)
    for res in results:
        assert len(res["ok"]) == 2 and all(res["ok"].values()), res
        assert res["kiln_gt4py"]["fallbacks"] == 0, res["output"][-3000:]
    assert lowerings == 2 and passes(tmp_path, "granule") == 4, [r["kiln_gt4py"]
                                                                 for r in results]
    new = [e for e in entries(daemon) if e["key"] not in before]
    programs = [e for e in new if (e.get("label") or "").startswith("dace ") and
                e["label"] != "dace stub"]
    assert len(programs) == 2, new
    s1 = status(daemon)
    assert s1["builds_started"] - s0["builds_started"] == len(new), (s0, s1)
    assert s1["variants"] == s0["variants"], s1
    results, lowerings = run_ranks(daemon, tmp_path, 2, "granule-again", script=GRANULE,
                                   GRANULE_PROGRAMS="nabla2_for_w", CXXFLAGS=flags)
    for res in results:
        assert len(res["ok"]) == 2 and all(res["ok"].values()), res
        assert res["kiln_gt4py"] == {"hits": 2, "lowered": 0, "fallbacks": 0}, res
    assert lowerings == 0 and passes(tmp_path, "granule-again") == 0
    assert status(daemon)["builds_started"] == s1["builds_started"]


def test_an_alias_published_upstream_is_a_hit_on_a_fresh_node(tmp_path):
    """Two nodes' kilnds on one --upstream directory: a rank on the first
    lowers and builds the Laplacian; a rank on the second, whose cache is
    empty, finds it through the tier (the alias record, its data and the
    entry, checked against that node's toolchain): no lowering, no build
    there, the right result. A rank there with another compiler (a wrapper
    of c++ elsewhere, as $CXX) is a miss and lowers."""
    from conftest import Daemon
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    nodes = [Daemon(str(tmp_path / n), ["--upstream", str(upstream)]) for n in ("a", "b")]
    for n in nodes:
        os.makedirs(n.dir)
        n.start()
    try:
        env = dict(RANK_PROGRAMS="laplacian", CXXFLAGS=own_flags("upstream"))
        res, lowerings = run_ranks(nodes[0], tmp_path, 1, "node-a", **env)
        assert res[0]["ok"] == {"laplacian": True}, res[0]["output"][-3000:]
        assert res[0]["kiln_gt4py"]["lowered"] == 1 and lowerings == 1
        before = status(nodes[1])["builds_started"]
        res, lowerings = run_ranks(nodes[1], tmp_path, 1, "node-b", **env)
        assert res[0]["ok"] == {"laplacian": True}, res[0]["output"][-3000:]
        assert res[0]["kiln_gt4py"] == {"hits": 1, "lowered": 0, "fallbacks": 0}, res[0]
        assert lowerings == 0
        st = status(nodes[1])
        assert st["upstream_alias_hits"] >= 1, st
        # the loader stub may be built there; the program is not
        assert st["builds_started"] - before <= 1, (before, st["builds_started"])
        cxx = tmp_path / "bin" / "c++"
        cxx.parent.mkdir()
        cxx.write_text("#!/bin/sh\nexec '%s' \"$@\"\n" % os.path.realpath(shutil.which("c++")))
        cxx.chmod(0o755)
        res, lowerings = run_ranks(nodes[1], tmp_path, 1, "node-b-cxx", CXX=str(cxx), **env)
        assert res[0]["ok"] == {"laplacian": True}, res[0]["output"][-3000:]
        assert res[0]["kiln_gt4py"]["lowered"] == 1 and lowerings == 1, res[0]["kiln_gt4py"]
    finally:
        for n in nodes:
            n.stop()


# A lowering made nondeterministic after GT4Py's key: a constant whose value
# is the process's own (RANK_NOISE, no variable the alias reads) joins the
# SDFG, so the same input (one GT4Py key, one alias) gives other code.
NOISE = textwrap.dedent('''
    import os
    from gt4py.next.program_processors.runners.dace.workflow import translation as _noise_tr

    _noise_generate = _noise_tr.DaCeTranslator._generate_sdfg_without_configuring_dace

    def _noisy(self, *a, **kw):
        sdfg = _noise_generate(self, *a, **kw)
        sdfg.add_constant("kiln_test_noise", int(os.environ["RANK_NOISE"]))
        return sdfg

    _noise_tr.DaCeTranslator._generate_sdfg_without_configuring_dace = _noisy
''')


def test_a_nondeterministic_lowering_is_reported_once(daemon, tmp_path):
    """One program lowered into other code by a second process (the same
    GT4Py key, so the same alias; the first process's entry removed in
    between, as when two lower side by side): kilnd builds it under a second
    request key and reports the alias once as built in more than one
    variant, with the PYTHONHASHSEED remedy; a third variant is not said
    again. The static variants and per-rank tables of the other tests are
    never reported."""
    script = tmp_path / "noisy" / "gt4py_programs.py"
    script.parent.mkdir()
    text = open(RANK).read()
    head = "# Module level, so that GT4Py's spawned compile workers"
    assert text.count(head) == 1
    script.write_text(text.replace(head, NOISE + "\n\n" + head))
    env = dict(RANK_PROGRAMS="laplacian", GT4PY_BUILD_JOBS_MODE="serial")
    s0 = status(daemon)
    said0 = open(daemon.log).read().count("is built in more than one variant")
    aliases = set()
    before = {e["key"] for e in entries(daemon)}   # earlier tests' Laplacians
    for noise in ("1", "2", "3"):
        results, lowerings = run_ranks(daemon, tmp_path, 1, "noise" + noise, script=script,
                                       RANK_NOISE=noise, **env)
        res = results[0]
        assert res["ok"] == {"laplacian": True}, res["output"][-3000:]
        assert res["kiln_gt4py"]["lowered"] == 1 and lowerings == 1, res["kiln_gt4py"]
        mine = [e for e in entries(daemon) if (e.get("alias") or "").startswith("gt4py:")
                and (e.get("label") or "").startswith("dace laplacian")
                and e["key"] not in before | {k for _, k in aliases}]
        assert len(mine) == 1, mine
        aliases.add((mine[0]["alias"], mine[0]["key"]))
        # the next process finds no entry under the alias: it lowers again
        subprocess.run([os.environ["KILN_TEST_CLI"], "--socket", daemon.socket, "rm",
                        mine[0]["key"]], check=True, stdout=subprocess.DEVNULL)
    assert len({a for a, _ in aliases}) == 1, aliases      # one input, one alias
    assert len({k for _, k in aliases}) == 3, aliases      # three programs
    s1 = status(daemon)
    assert s1["variants"] - s0["variants"] == 1, (s0["variants"], s1["variants"])
    log = open(daemon.log).read()
    assert log.count("is built in more than one variant") - said0 == 1, log[-3000:]
    assert "PYTHONHASHSEED=0" in log


@pytest.mark.parametrize("mode", ["thread", "serial", "process"])
def test_environment_switch_reaches_every_build_mode(daemon, tmp_path, mode):
    """KILN_GT4PY=1 with kiln-dace.pth (a site directory) and no line of
    code: in each GT4PY_BUILD_JOBS_MODE a new program is lowered once and
    stored, and a fresh process finds it."""
    pth_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = tmp_path / "switched.py"
    # A program of its own per mode (its script path is in GT4Py's key).
    script.write_text("import site, sys\nsite.addsitedir(%r)\n" % pth_dir +
                      open(RANK).read().replace('os.environ.get("RANK_KILN", "")', '""'))
    common = dict(KILN_GT4PY="1", GT4PY_BUILD_JOBS_MODE=mode, RANK_PROGRAMS="laplacian")
    for round_, want in (("first", (0, 1)), ("again", (1, 0))):
        env = dict(os.environ, KILN_SOCKET=daemon.socket, **common)
        env["GT4PY_BUILD_CACHE_DIR"] = str(tmp_path / round_)
        env["GT4PY_BUILD_CACHE_LIFETIME"] = "persistent"
        env["DACE_BUILD_CACHE_DIR"] = str(tmp_path / "dace-node-cache")
        p = subprocess.run([sys.executable, str(script)], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, cwd=str(tmp_path), timeout=900)
        lines = [line for line in p.stdout.splitlines() if line.startswith("RANK ")]
        assert p.returncode == 0 and lines, p.stdout[-4000:]
        res = json.loads(lines[-1][5:])
        assert res["ok"] == {"laplacian": True}, res
        g = res["kiln_gt4py"]
        assert g is not None, "KILN_GT4PY=1 did not install kiln.gt4py:\n" + p.stdout[-3000:]
        assert (g["hits"], g["lowered"], g["fallbacks"]) == want + (0,), (round_, g)
        assert "building with DaCe's CMake" not in p.stdout, p.stdout[-3000:]


def test_changed_definition_is_never_served_the_old_program(daemon, tmp_path):
    """The same script path, edited: a changed literal in the field
    operator, then another argument type, then DaCe's configuration changed
    at run time. Each is lowered and built anew and computes its own result;
    the unchanged program is still found."""
    prog = tmp_path / "prog"
    prog.mkdir()
    script = prog / "gt4py_programs.py"
    text = open(RANK).read()
    old, new = 'return FT("-4.0") * a', 'return FT("-3.0") * a'
    assert text.count(old) == 1
    script.write_text(text)
    env = dict(RANK_PROGRAMS="laplacian", GT4PY_BUILD_JOBS_MODE="serial")

    def one(tag, **extra):
        results, lowerings = run_ranks(daemon, tmp_path, 1, tag, script=script,
                                       **dict(env, **extra))
        res = results[0]
        assert res["ok"] == {"laplacian": True}, (tag, res["output"][-3000:])
        return res["kiln_gt4py"]["lowered"], res["kiln_gt4py"]["hits"], lowerings

    assert one("original") == (1, 0, 1)
    assert one("original-again") == (0, 1, 0)
    script.write_text(text.replace(old, new))
    assert one("edited", RANK_COEF="3.0") == (1, 0, 1)
    assert one("float32", RANK_COEF="3.0", RANK_FLOAT32="1") == (1, 0, 1)
    assert one("edited-again", RANK_COEF="3.0") == (0, 1, 0)
    assert one("dace-config", RANK_COEF="3.0",
               RANK_DACE_SET="compiler.max_stack_array_size=32768") == (1, 0, 1)
    # any GT4PY_* variable (GT4Py reads its configuration from them) is in
    # the alias, but where and how GT4Py builds (its folder, jobs, mode)
    assert one("gt4py-env", RANK_COEF="3.0", GT4PY_KILN_TEST_SETTING="1") == (1, 0, 1)
    assert one("gt4py-jobs", RANK_COEF="3.0", GT4PY_BUILD_JOBS="1") == (0, 1, 0)


GPU_COMPILE = textwrap.dedent('''
    import json, sys
    import kiln.gt4py
    import gt4py.next as gtx
    from gt4py.next.program_processors.runners.dace import run_dace_gpu

    I = gtx.Dimension("I")
    J = gtx.Dimension("J")

    @gtx.field_operator
    def lap(a: gtx.Field[gtx.Dims[I, J], gtx.float64]) -> gtx.Field[gtx.Dims[I, J], gtx.float64]:
        return -4.0 * a + a(I + 1) + a(I - 1) + a(J + 1) + a(J - 1)

    @gtx.program(backend=run_dace_gpu)
    def lap_program(a: gtx.Field[gtx.Dims[I, J], gtx.float64],
                    out: gtx.Field[gtx.Dims[I, J], gtx.float64]):
        lap(a, out=out[1:-1, 1:-1])

    def main():
        kiln.gt4py.install(socket=sys.argv[1])
        lap_program.compile(offset_provider={})   # built and loaded, not run
        from gt4py.next.otf import compiled_program
        compiled_program.wait_for_compilation()
        print("STATS " + json.dumps(kiln.gt4py.stats))

    if __name__ == "__main__":
        main()
''')


def test_gpu_program_is_found_without_a_gpu(daemon, tmp_path):
    """run_dace_gpu, compiled (not run: no GPU here) in GT4Py's process mode:
    kiln.dace builds the .cpp and .cu halves with nvcc, the .kiln_gt4py
    section rides along, and a fresh process with a new folder finds the
    program without lowering it."""
    import shutil
    nvcc_dir = "/usr/local/cuda/bin"
    if shutil.which("nvcc") is None and not os.path.exists(os.path.join(nvcc_dir, "nvcc")):
        pytest.skip("no nvcc: kiln.dace cannot build GPU programs here")
    script = tmp_path / "gpu_compile.py"
    script.write_text(GPU_COMPILE)
    for round_, want in (("first", (0, 1)), ("again", (1, 0))):
        env = dict(os.environ, DACE_compiler_cuda_cuda_arch="80",
                   GT4PY_BUILD_CACHE_LIFETIME="persistent",
                   GT4PY_BUILD_CACHE_DIR=str(tmp_path / round_),
                   DACE_BUILD_CACHE_DIR=str(tmp_path / "dace-node-cache"))
        env["PATH"] = env.get("PATH", "") + os.pathsep + nvcc_dir
        for v in ("KILN_DACE", "KILN_GT4PY"):
            env.pop(v, None)
        p = subprocess.run([sys.executable, str(script), daemon.socket], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           cwd=str(tmp_path), timeout=900)
        lines = [line for line in p.stdout.splitlines() if line.startswith("STATS ")]
        assert p.returncode == 0 and lines, p.stdout[-4000:]
        g = json.loads(lines[-1][6:])
        assert (g["hits"], g["lowered"], g["fallbacks"]) == want + (0,), (round_, g)
        assert "building with DaCe's CMake" not in p.stdout, p.stdout[-3000:]


# ---- issue 47: what the alias covers, and claims ---------------------------

INNER_LAPLACIAN = textwrap.dedent('''
    @gtx.program(backend=BACKEND)
    def laplacian_inner(a: gtx.Field[gtx.Dims[I, J], FT], out: gtx.Field[gtx.Dims[I, J], FT]):
        laplacian(a, out=out[2:-2, 2:-2])


    def run_laplacian_inner(g):
        a_np = np.fromfunction(lambda i, j: np.sin(0.3 * i) + np.cos(0.2 * j) * i,
                               (24, 20)).astype(NP_FT)
        a = gtx.as_field([I, J], xp().asarray(a_np))
        out = gtx.as_field([I, J], xp().zeros((24, 20), dtype=NP_FT))
        t = time.monotonic()
        laplacian_inner(a, out)
        dt = time.monotonic() - t
        ref = (-NP_FT(COEF) * a_np[2:-2, 2:-2] + a_np[3:-1, 2:-2] + a_np[1:-3, 2:-2]
               + a_np[2:-2, 3:-1] + a_np[2:-2, 1:-3])
        return dt, bool(np.allclose(as_np(out)[2:-2, 2:-2], ref, rtol=1e-5))


    PROGRAMS["laplacian_inner"] = run_laplacian_inner
''')


def test_compiler_flags_set_at_run_time_are_in_the_alias(daemon, tmp_path):
    """CXXFLAGS set from Python after GT4Py's backend was made (GT4Py reads
    it at every build, into DaCe's configuration): lowered and built anew,
    the same value again is found, the plain program too.
    In GT4Py's process mode a variable set after its worker started is not
    what the worker builds with: the worker looks the program up as it
    builds it (here: found, built earlier without the flags), and a later
    process that sets the flags from the start is not served that library."""
    prog = tmp_path / "prog"
    prog.mkdir()
    script = prog / "gt4py_programs.py"
    text = open(RANK).read()
    guard = 'if __name__ == "__main__":'
    assert text.count(guard) == 1
    # one more program of this script's own (icon4py's are found if an
    # earlier test built them, and a hit starts no worker)
    script.write_text(text.replace(guard, INNER_LAPLACIAN + "\n\n" + guard))
    env = dict(RANK_PROGRAMS="laplacian", GT4PY_BUILD_JOBS_MODE="serial")
    contract = "CXXFLAGS=-fPIC -O3 -march=native -ffp-contract=off"

    def one(tag, **extra):
        results, lowerings = run_ranks(daemon, tmp_path, 1, tag, script=script,
                                       **dict(env, **extra))
        res = results[0]
        assert all(res["ok"].values()), (tag, res["output"][-3000:])
        g = res["kiln_gt4py"]
        assert g["fallbacks"] == 0, (tag, res["output"][-3000:])
        return g["lowered"], g["hits"], lowerings

    assert one("plain") == (1, 0, 1)
    assert one("cxxflags", RANK_SETENV=contract) == (1, 0, 1)
    assert one("cxxflags-again", RANK_SETENV=contract) == (0, 1, 0)
    assert one("plain-again") == (0, 1, 0)
    # process mode, one worker, started by the first program (lowered: a
    # program of this script's only); the flags are set after it: the
    # worker builds the Laplacian without them, as the plain runs did, and
    # finds that program
    o2 = "CXXFLAGS=-fPIC -O2 -march=native"
    assert one("worker", RANK_PROGRAMS="laplacian_inner,laplacian", RANK_SETENV=o2,
               RANK_SETENV_AFTER="1", GT4PY_BUILD_JOBS_MODE="process",
               GT4PY_BUILD_JOBS="1") == (1, 1, 1)
    assert one("o2-from-the-start", RANK_SETENV=o2) == (1, 0, 1)


HOOKS = textwrap.dedent('''
    import dace

    SCALE = {scale}


    def _value():
        return {value} * SCALE


    def post(sdfg):
        # one more state, last: out[0, 0] (a cell the program leaves alone)
        # gets the mark, so the result says which hook built the library
        last = sdfg.add_state("kiln_hook_mark")
        for block in list(sdfg.sink_nodes()):
            if block is not last:
                sdfg.add_edge(block, last, dace.InterstateEdge())
        t = last.add_tasklet("mark", {{}}, {{"o"}}, "o = %r" % (_value() + {literal}))
        last.add_edge(t, "o", last.add_write("out"), None, dace.Memlet("out[0, 0]"))
''')

HOOKED = textwrap.dedent('''
    import json, os, sys
    import numpy as np
    import gt4py.next as gtx
    from gt4py.next.program_processors.runners.dace import make_dace_backend
    from gt4py.next.program_processors.runners.dace.transformations import auto_optimize as ao
    import hooks

    I = gtx.Dimension("I")
    J = gtx.Dimension("J")
    BACKEND = make_dace_backend(gpu=False, optimization_args={
        "optimization_hooks": {ao.GT4PyAutoOptHook.TopLevelDataFlowPost: hooks.post}})

    @gtx.field_operator
    def lap(a: gtx.Field[gtx.Dims[I, J], gtx.float64]) -> gtx.Field[gtx.Dims[I, J], gtx.float64]:
        return -4.0 * a + a(I + 1) + a(I - 1) + a(J + 1) + a(J - 1)

    @gtx.program(backend=BACKEND)
    def lap_program(a: gtx.Field[gtx.Dims[I, J], gtx.float64],
                    out: gtx.Field[gtx.Dims[I, J], gtx.float64]):
        lap(a, out=out[1:-1, 1:-1])

    def main():
        import kiln.gt4py
        kiln.gt4py.install()
        a = gtx.as_field([I, J], np.ones((8, 6)))
        out = gtx.as_field([I, J], np.zeros((8, 6)))
        lap_program(a, out)
        print("RANK " + json.dumps({"ok": {"lap": bool(np.allclose(out.asnumpy()[1:-1, 1:-1], 0))},
                                    "mark": float(out.asnumpy()[0, 0]),
                                    "kiln_gt4py": dict(kiln.gt4py.stats)}))

    if __name__ == "__main__":
        main()
''')


def test_edited_optimization_hook_is_never_served_the_old_program(daemon, tmp_path):
    """An optimization hook of GT4Py's DaCe backend, in the user's module
    under the same name, edited between runs in fresh folders: its own
    literal, a global it reads. Each edit is lowered
    anew and the result is its own (the mark the hook writes); the
    unchanged hook is found again. GT4Py's lenient fingerprint counts an
    importable function by its name, so each edit was served the library
    of the first hook."""
    prog = tmp_path / "hooked"
    prog.mkdir()
    script = prog / "hooked.py"
    script.write_text(HOOKED)

    def one(tag, scale=1, value=7.0, literal=0.0):
        (prog / "hooks.py").write_text(HOOKS.format(scale=scale, value=value, literal=literal))
        results, lowerings = run_ranks(daemon, tmp_path, 1, tag, script=script,
                                       GT4PY_BUILD_JOBS_MODE="serial",
                                       PYTHONPATH=os.pathsep.join(
                                           [str(prog), os.environ.get("PYTHONPATH", "")]))
        res = results[0]
        assert res["ok"] == {"lap": True}, (tag, res["output"][-3000:])
        g = res["kiln_gt4py"]
        assert g["fallbacks"] == 0, (tag, res["output"][-3000:])
        return res["mark"], g["lowered"], g["hits"]

    assert one("hook") == (7.0, 1, 0)
    assert one("hook-again") == (7.0, 0, 1)
    assert one("literal", literal=1.0) == (8.0, 1, 0)
    assert one("global", scale=2) == (14.0, 1, 0)
    assert one("hook-once-more") == (7.0, 0, 1)
    # (a helper it calls, and the other kinds of callables: in-process,
    # test_settings_callables_count_by_code)


def test_build_view_reads_the_flags_as_the_build_does(monkeypatch):
    """In one process: what the alias holds of the build is DaCe's
    configuration inside the configuration GT4Py builds under, read now:
    CXXFLAGS, CUDAFLAGS and HIPFLAGS set after the backend was made are
    DaCe's compiler.cpu.args, compiler.cuda.args and compiler.cuda.hip_args
    there, and each changes it; outside that configuration they are not."""
    import kiln.gt4py
    from dace.config import Config
    from gt4py.next.program_processors.runners.dace import run_dace_cpu
    from gt4py.next.program_processors.runners.dace.workflow import common as wfcommon

    step = run_dace_cpu.executor.compilation
    for var in ("CXXFLAGS", "CUDAFLAGS", "HIPFLAGS", "CUDAARCHS", "HIPARCHS"):
        monkeypatch.delenv(var, raising=False)
    seen = {kiln._gt4py_identity.build_view(step)}
    for var, key in (("CXXFLAGS", ("compiler", "cpu", "args")),
                     ("CUDAFLAGS", ("compiler", "cuda", "args")),
                     ("HIPFLAGS", ("compiler", "cuda", "hip_args"))):
        outside = Config.get(*key)
        monkeypatch.setenv(var, "-O1 -ffp-contract=off")
        assert Config.get(*key) == outside
        with wfcommon.dace_context(device_type=step.device_type,
                                   cmake_build_type=step.cmake_build_type):
            assert Config.get(*key) == "-O1 -ffp-contract=off"
        view = kiln._gt4py_identity.build_view(step)
        assert view not in seen, var
        seen.add(view)
        monkeypatch.delenv(var)
    monkeypatch.setenv("CUDAARCHS", "90")
    assert kiln._gt4py_identity.build_view(step) not in seen


def _steps(hook, **more):
    """kiln.gt4py's fingerprint of the workflow's settings of a DaCe
    backend with hook as an optimization hook (in-process: nothing is
    lowered)."""
    import kiln.gt4py
    from gt4py.next.program_processors.runners.dace import make_dace_backend
    from gt4py.next.program_processors.runners.dace.transformations import auto_optimize as ao

    args = dict(more, optimization_hooks={ao.GT4PyAutoOptHook.TopLevelDataFlowPost: hook})
    b = make_dace_backend(gpu=False, optimization_args=args)
    return kiln._gt4py_identity.steps_id(b.executor, b.executor.compilation)


def _module(name, source):
    """A module of the user's (a file of its own name), as a fresh process
    imports it: the same name, the text as it is now."""
    import types
    m = types.ModuleType(name)
    m.__file__ = "/nonexistent/%s.py" % name
    sys.modules[name] = m
    exec(compile(source, m.__file__, "exec"), m.__dict__)
    return m


def test_settings_callables_count_by_code(monkeypatch):
    """Every callable in the workflow's settings counts by its code, not by
    its name: an importable function edited under the same name, a helper
    it calls, a global it reads, lambdas, closures (their cells), default
    arguments, partials, bound methods (their objects), callable objects
    (their class's __call__), dataclasses, lru_cache wrappers, a callable
    deep in a nested setting. The same code is the same fingerprint."""
    import functools

    for name in [n for n in sys.modules if n.startswith("kiln_probe_")]:
        monkeypatch.delitem(sys.modules, name)
    seen = set()

    def new(fp):
        assert fp not in seen
        seen.add(fp)
        return fp

    one = new(_steps(_module("kiln_probe_a", "def post(sdfg):\n    return 1\n").post))
    assert _steps(_module("kiln_probe_a", "def post(sdfg):\n    return 1\n").post) == one
    new(_steps(_module("kiln_probe_a", "def post(sdfg):\n    return 2\n").post))
    helper = "K = %d\ndef helper():\n    return K * %d\ndef post(sdfg):\n    return helper()\n"
    new(_steps(_module("kiln_probe_b", helper % (1, 1)).post))
    new(_steps(_module("kiln_probe_b", helper % (1, 2)).post))     # the helper's code
    m = _module("kiln_probe_b", helper % (1, 1))
    m.K = 3
    new(_steps(m.post))                                             # a global it reads
    uses = "import kiln_probe_b\ndef post(sdfg):\n    return kiln_probe_b.helper()\n"
    new(_steps(_module("kiln_probe_c", uses).post))
    _module("kiln_probe_b", helper % (5, 1))
    new(_steps(_module("kiln_probe_c", uses).post))                 # through another module
    new(_steps(lambda sdfg: 1))
    new(_steps(lambda sdfg: 2))

    def closure(v):
        def post(sdfg):
            return v
        return post

    new(_steps(closure(1)))
    assert _steps(closure(1)) in seen
    new(_steps(closure(2)))
    new(_steps(_module("kiln_probe_d", "def post(sdfg, k=1):\n    return k\n").post))
    new(_steps(_module("kiln_probe_d", "def post(sdfg, k=2):\n    return k\n").post))
    g = _module("kiln_probe_e", "def g(sdfg, k):\n    return k\n").g
    new(_steps(functools.partial(g, k=1)))
    new(_steps(functools.partial(g, k=2)))
    cls = "class H:\n    def __init__(self, v):\n        self.v = v\n" \
          "    def hook(self, sdfg):\n        return self.v %s\n    def __call__(self, sdfg):\n" \
          "        return self.v %s\n"
    m = _module("kiln_probe_f", cls % ("", ""))
    new(_steps(m.H(1).hook))
    new(_steps(m.H(2).hook))                                        # the method's object
    new(_steps(m.H(1)))
    new(_steps(_module("kiln_probe_f", cls % ("", "+ 1")).H(1)))    # __call__ edited
    dc = "import dataclasses\n@dataclasses.dataclass(frozen=True)\nclass H:\n    k: int = 1\n" \
         "    def __call__(self, sdfg):\n        return self.k %s\n"
    new(_steps(_module("kiln_probe_g", dc % "").H()))
    new(_steps(_module("kiln_probe_g", dc % "").H(k=2)))
    new(_steps(_module("kiln_probe_g", dc % "* 2").H()))
    lru = "import functools\n@functools.lru_cache\ndef post(sdfg):\n    return %d\n"
    new(_steps(_module("kiln_probe_h", lru % 1).post))
    new(_steps(_module("kiln_probe_h", lru % 2).post))
    deep = "def f(sdfg):\n    return %d\n"
    new(_steps(print, kiln_more=[{"x": (_module("kiln_probe_i", deep % 1).f,)}]))
    new(_steps(print, kiln_more=[{"x": (_module("kiln_probe_i", deep % 2).f,)}]))
    # Python's own and installed code counts by name (with the Python
    # version, an installed module's file): accepted, stable
    import numpy as np
    assert _steps(print) == _steps(print)
    assert _steps(np.sqrt) == _steps(np.sqrt)


def test_settings_without_code_identity_are_not_aliased(capsys):
    """A callable whose code kiln cannot identify (a C function pointer, a
    function that reads a lock) in the workflow's settings: kiln.gt4py
    neither looks the program up nor stores it under an alias (GT4Py's
    task goes to GT4Py's runner as it is), and says why on stderr."""
    import concurrent.futures
    import ctypes
    import threading
    import kiln.gt4py
    from gt4py.next.otf import runners
    from gt4py.next.program_processors.runners.dace import make_dace_backend
    from gt4py.next.program_processors.runners.dace.transformations import auto_optimize as ao

    lock = threading.Lock()

    def locked(sdfg):
        with lock:
            return sdfg

    class Inner:
        def __init__(self):
            self.tasks = []

        def submit(self, task):
            self.tasks.append(task)
            f = concurrent.futures.Future()
            f.set_result(None)
            return f

    for hook in (ctypes.CDLL(None).abs, locked):
        with pytest.raises(kiln.gt4py.Unidentified):
            _steps(hook)
        b = make_dace_backend(gpu=False, optimization_args={
            "optimization_hooks": {ao.GT4PyAutoOptHook.TopLevelDataFlowPost: hook}})
        task = runners.CompilationTask(name="probe", construct_compilable=lambda refs: "probe",
                                       executor=b.executor)
        inner = Inner()
        before = kiln.gt4py.stats["fallbacks"]
        kiln.gt4py._Runner(inner).submit(task)
        assert inner.tasks == [task]         # GT4Py's own task: no lookup, no alias
        assert kiln.gt4py.stats["fallbacks"] == before + 1
    err = capsys.readouterr().err
    assert "GT4Py builds this program as usual: its workflow's settings hold code kiln " \
           "cannot identify" in err, err


CLAIMS = textwrap.dedent('''
    import json, os, signal, subprocess, sys, time
    import numpy as np
    import gt4py.next as gtx
    from gt4py.next.otf import compiled_program
    from gt4py.next.program_processors.runners.dace import run_dace_cpu
    from gt4py.next.program_processors.runners.dace.workflow import translation as _tr

    I = gtx.Dimension("I")
    EVENTS = os.environ["CLAIMS_EVENTS"]
    HOLD = os.environ.get("CLAIMS_HOLD", "")

    def event(what):
        with open(EVENTS, "a") as f:
            f.write("%s %d\\n" % (what, os.getpid()))

    def events():
        with open(EVENTS) as f:
            return f.read().split()

    def claims_held():
        out = subprocess.run([os.environ["KILN_TEST_CLI"], "--socket", os.environ["KILN_SOCKET"],
                              "--json", "status"], stdout=subprocess.PIPE, text=True).stdout
        return json.loads(out)["claims_held"]

    _translate = _tr.DaCeTranslator.__call__
    _first = []

    def _lowering(self, inp):
        event("lowering")
        if HOLD == "count" and not _first:
            _first.append(1)
            while "submitted" not in events():    # every variant submitted
                time.sleep(0.02)
            event("held_at_first_lowering_%d" % claims_held())
        elif HOLD == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
        elif HOLD == "block":
            while not os.path.exists(os.environ["CLAIMS_GO"]):
                time.sleep(0.05)
        return _translate(self, inp)

    _tr.DaCeTranslator.__call__ = _lowering

    @gtx.field_operator
    def scaled(a: gtx.Field[gtx.Dims[I], gtx.float64],
               k: gtx.float64) -> gtx.Field[gtx.Dims[I], gtx.float64]:
        return a * k

    @gtx.program(backend=run_dace_cpu)
    def scaled_program(a: gtx.Field[gtx.Dims[I], gtx.float64], k: gtx.float64,
                       out: gtx.Field[gtx.Dims[I], gtx.float64]):
        scaled(a, k, out=out)

    def main():
        import kiln.gt4py
        kiln.gt4py.install()
        ks = [float(k) for k in os.environ["CLAIMS_KS"].split(",")]
        event("held_before_%d" % claims_held())
        scaled_program.compile(offset_provider={}, k=ks)    # static variants, not run
        event("submitted")
        compiled_program.wait_for_compilation()
        event("compiled")
        ok = {}
        for k in ks:
            out = gtx.as_field([I], np.zeros(5))
            scaled_program(gtx.as_field([I], np.arange(5.0)), k, out, offset_provider={})
            ok[str(k)] = bool(np.allclose(out.asnumpy(), k * np.arange(5.0)))
        print("RANK " + json.dumps({"ok": ok, "kiln_gt4py": dict(kiln.gt4py.stats)}))

    if __name__ == "__main__":
        main()
''')


def claims_script(tmp_path):
    script = tmp_path / "claims" / "variants.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text(CLAIMS)
    return script


def start_rank(daemon, tmp_path, script, tag, **env_extra):
    env = dict(os.environ, KILN_SOCKET=daemon.socket, GT4PY_BUILD_CACHE_LIFETIME="persistent",
               GT4PY_BUILD_CACHE_DIR=str(tmp_path / tag),
               DACE_BUILD_CACHE_DIR=str(tmp_path / "dace-node-cache"),
               CLAIMS_EVENTS=str(tmp_path / ("%s.events" % tag)), **env_extra)
    for v in ("KILN_DACE", "KILN_GT4PY"):
        env.pop(v, None)
    return subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=str(tmp_path))


def finish_rank(p):
    out = p.communicate(timeout=900)[0]
    lines = [line for line in out.splitlines() if line.startswith("RANK ")]
    assert p.returncode == 0 and lines, out[-4000:]
    assert "building with DaCe's CMake" not in out, out[-4000:]
    res = json.loads(lines[-1][5:])
    res["output"] = out
    return res


def read_events(tmp_path, tag):
    path = tmp_path / ("%s.events" % tag)
    return path.read_text().split() if path.exists() else []


def wait_for_events(p, tmp_path, tag, word, n):
    """Until the rank's events hold word n times (or it ended: then its
    output says why). No duration is asserted: the bound only keeps a
    broken run from hanging the suite."""
    import time
    end = time.monotonic() + 600
    while read_events(tmp_path, tag).count(word) < n:
        if p.poll() is not None:
            raise AssertionError(p.communicate()[0][-4000:])
        assert time.monotonic() < end, "no %d x %s in %s" % (n, word, read_events(tmp_path, tag))
        time.sleep(0.05)


def test_claim_is_taken_when_lowering_starts_not_at_submission(daemon, tmp_path):
    """compile(..., enable_jit=False) of three static variants with one
    compile thread: while the first is lowering (holding the claims on its
    GT4Py alias and its translation alias), the other two are queued
    and hold no claim (another rank lowers them meanwhile instead of
    waiting for this one's queue); all three are right."""
    script = claims_script(tmp_path)
    p = start_rank(daemon, tmp_path, script, "queue", CLAIMS_HOLD="count", CLAIMS_KS="1,2,3",
                   GT4PY_BUILD_JOBS_MODE="thread", GT4PY_BUILD_JOBS="1")
    res = finish_rank(p)
    assert all(res["ok"].values()) and len(res["ok"]) == 3, res
    ev = read_events(tmp_path, "queue")
    before = [int(e.rsplit("_", 1)[1]) for e in ev if e.startswith("held_before_")]
    during = [int(e.rsplit("_", 1)[1]) for e in ev if e.startswith("held_at_first_lowering_")]
    assert len(before) == 1 and len(during) == 1, ev
    # the first's two: its GT4Py alias and its translation alias
    assert during[0] - before[0] == 2, (ev, res["output"][-3000:])
    assert res["kiln_gt4py"] == {"hits": 0, "lowered": 3, "fallbacks": 0}, res


def test_waiter_takes_over_from_a_claimer_without_heartbeat(daemon, tmp_path):
    """A rank claims a program and stops (SIGSTOP: its connection, and so
    kilnd's claim, stay): another rank waiting for it sees no heartbeat
    past its stall bound (KILN_GT4PY_STALL, short here) and lowers the
    program itself, while the first is still stopped, instead of waiting
    out KILN_GT4PY_WAIT."""
    import signal
    script = claims_script(tmp_path)
    a = start_rank(daemon, tmp_path, script, "stopped", CLAIMS_HOLD="stop", CLAIMS_KS="4",
                   GT4PY_BUILD_JOBS_MODE="serial", KILN_GT4PY_STALL="1")
    try:
        wait_for_events(a, tmp_path, "stopped", "lowering", 1)
        b = start_rank(daemon, tmp_path, script, "waiter", CLAIMS_KS="4",
                       GT4PY_BUILD_JOBS_MODE="serial", KILN_GT4PY_STALL="1",
                       KILN_GT4PY_WAIT="120")
        res = finish_rank(b)
        with open("/proc/%d/stat" % a.pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        assert state == "T", state           # the claimer is still stopped
        assert res["ok"] == {"4.0": True}, res
        assert res["kiln_gt4py"]["lowered"] == 1, res
        assert "no heartbeat" in res["output"], res["output"][-3000:]
    finally:
        a.send_signal(signal.SIGKILL)
        a.communicate()


def test_a_submission_another_rank_holds_returns_at_once(daemon, tmp_path):
    """A rank holds the claims of three variants and takes long (alive,
    beating, its lowerings blocked). Another rank's compile(...,
    enable_jit=False) of the same three returns at once, in serial mode
    too (the mode in which a task runs in the submitting thread): GT4Py's
    pool gets pending futures, and no lowering starts there. When the
    holder publishes, the waiting rank's futures are done with its
    programs: found, none lowered, each right."""
    script = claims_script(tmp_path)
    go = tmp_path / "go"
    a = start_rank(daemon, tmp_path, script, "holder", CLAIMS_HOLD="block", CLAIMS_KS="5,6,7",
                   CLAIMS_GO=str(go), GT4PY_BUILD_JOBS_MODE="thread", GT4PY_BUILD_JOBS="3")
    try:
        wait_for_events(a, tmp_path, "holder", "lowering", 3)
        b = start_rank(daemon, tmp_path, script, "pending", CLAIMS_KS="5,6,7",
                       GT4PY_BUILD_JOBS_MODE="serial", KILN_GT4PY_WAIT="600",
                       KILN_GT4PY_STALL="0")
        wait_for_events(b, tmp_path, "pending", "submitted", 1)
        # submitted while the holder still holds all three: nothing waited
        assert not go.exists() and a.poll() is None
        assert "lowering" not in read_events(tmp_path, "pending")
        assert "compiled" not in read_events(tmp_path, "pending")
    finally:
        go.write_text("")
    res = finish_rank(b)
    assert all(res["ok"].values()) and len(res["ok"]) == 3, res
    assert res["kiln_gt4py"] == {"hits": 3, "lowered": 0, "fallbacks": 0}, res
    assert "lowering" not in read_events(tmp_path, "pending")
    res = finish_rank(a)
    assert all(res["ok"].values()) and len(res["ok"]) == 3, res


def test_a_rank_waits_side_by_side_within_one_budget(daemon, tmp_path):
    """A rank holds the claims of three variants and takes long: another
    rank compiling the same three waits for all three side by side (one
    wait each, at once: its pool is not held), until its budget
    (KILN_GT4PY_WAIT, the rank's in all) is spent, then lowers all three
    itself."""
    script = claims_script(tmp_path)
    go = tmp_path / "go"
    a = start_rank(daemon, tmp_path, script, "holder", CLAIMS_HOLD="block", CLAIMS_KS="5,6,7",
                   CLAIMS_GO=str(go), GT4PY_BUILD_JOBS_MODE="thread", GT4PY_BUILD_JOBS="3")
    try:
        wait_for_events(a, tmp_path, "holder", "lowering", 3)
        s0 = status(daemon)
        b = start_rank(daemon, tmp_path, script, "budget", CLAIMS_KS="5,6,7",
                       GT4PY_BUILD_JOBS_MODE="serial", KILN_GT4PY_WAIT="2",
                       KILN_GT4PY_STALL="0")
        res = finish_rank(b)
        s1 = status(daemon)
        assert not go.exists() and a.poll() is None     # the holder is still blocked
        assert all(res["ok"].values()) and len(res["ok"]) == 3, res
        assert res["kiln_gt4py"]["lowered"] == 3, res
        assert s1["claim_waits"] - s0["claim_waits"] == 3, (s0, s1, res["output"][-3000:])
        assert s1["claim_timeouts"] - s0["claim_timeouts"] == 3, (s0, s1)
    finally:
        go.write_text("")
    res = finish_rank(a)
    assert all(res["ok"].values()) and len(res["ok"]) == 3, res


def test_wait_budget_is_spent_once_by_waits_side_by_side(monkeypatch, tmp_path):
    """The budget counts the seconds during which at least one of the
    rank's waits is in progress (through a file its GT4Py workers share):
    two waits side by side spend it once, time with no wait spends
    nothing."""
    import time
    import kiln.gt4py

    now = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    path = tmp_path / "budget"
    path.write_bytes(b"")
    a = kiln._gt4py_claims.Budget.at(str(path), 10.0)
    b = kiln._gt4py_claims.Budget.at(str(path), 10.0)      # another process's view of the file
    assert a.begin() == 10.0
    now[0] += 2
    assert b.begin() == 8.0
    now[0] += 3
    a.end()
    now[0] += 2
    b.end()                                          # 7 s with a wait in progress
    now[0] += 50                                     # none: nothing spent
    assert a.begin() == 3.0
    now[0] += 3
    a.end()
    assert b.begin() == 0.0
    b.end()


VERSION_CHECK = textwrap.dedent('''
    import sys
    import gt4py
    gt4py.__version__ = sys.argv[1]
    from gt4py.next.otf import runners
    from dace.codegen import compiler
    before = (runners.get_default_runner, compiler.configure_and_compile)
    import kiln.gt4py
    kiln.gt4py.install()
    kiln.gt4py.install()
    after = (runners.get_default_runner, compiler.configure_and_compile)
    print("UNCHANGED" if after == before else "PATCHED", kiln.gt4py.stats["fallbacks"])
''')


def test_install_outside_the_supported_versions_falls_back_with_one_line(tmp_path):
    """kiln.gt4py.install() under a GT4Py outside kiln/_versions.py's range
    patches nothing (GT4Py builds as usual) and says why once; with
    KILN_ANY_VERSION=1 it installs."""
    script = tmp_path / "version.py"
    script.write_text(VERSION_CHECK)
    env = dict(os.environ)
    env.pop("KILN_ANY_VERSION", None)
    p = subprocess.run([sys.executable, str(script), "9.0.0"], env=env, text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.split() == ["UNCHANGED", "2"], p.stdout
    lines = [l for l in p.stderr.splitlines() if "outside the versions" in l]
    assert len(lines) == 1 and lines[0].startswith("kiln.gt4py: GT4Py builds this program "
                                                   "as usual: GT4Py 9.0.0"), p.stderr
    env["KILN_ANY_VERSION"] = "1"
    p = subprocess.run([sys.executable, str(script), "9.0.0"], env=env, text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    assert p.returncode == 0 and p.stdout.split()[0] == "PATCHED", (p.stdout, p.stderr[-3000:])


UNINSTALL = textwrap.dedent('''
    from gt4py.next.otf import runners
    from dace.codegen import compiler
    from dace.sdfg.sdfg import SDFG
    names = [(runners, "get_default_runner"), (runners, "_pool_worker_initializer"),
             (runners, "reset_default_runner"), (compiler, "configure_and_compile"),
             (SDFG, "compile")]
    before = [getattr(o, n) for o, n in names]
    import kiln.gt4py, kiln.dace
    kiln.gt4py.install()
    patched = [n for (o, n), b in zip(names, before) if getattr(o, n) is not b]
    kiln.gt4py.uninstall()
    kiln.dace.uninstall()
    left = [n for (o, n), b in zip(names, before) if getattr(o, n) is not b]
    print("PATCHED", ",".join(patched))
    print("LEFT", ",".join(left) or "-")
''')


UNINSTALL_EARLY = textwrap.dedent('''
    import sys
    import kiln.gt4py, kiln.dace, kiln._gt4py_patches
    kiln.gt4py.install()
    assert "gt4py.next.otf.runners" not in sys.modules
    kiln.gt4py.uninstall()
    kiln.dace.uninstall()
    from gt4py.next.otf import runners
    print("EARLY", ",".join(kiln._gt4py_patches.patched()) or "-")
''')


def test_uninstall_restores_every_patched_name(tmp_path):
    """install() patches GT4Py's runner and its reset, GT4Py's worker
    initializer, DaCe's build and SDFG.compile; kiln.gt4py.uninstall() and kiln.dace.uninstall()
    give every one back."""
    script = tmp_path / "uninstall.py"
    script.write_text(UNINSTALL)
    p = subprocess.run([sys.executable, str(script)], text=True, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    out = dict(l.split(" ", 1) for l in p.stdout.splitlines())
    assert set(out["PATCHED"].split(",")) == {"get_default_runner", "_pool_worker_initializer",
                                              "reset_default_runner", "configure_and_compile",
                                              "compile"}, p.stdout
    assert out["LEFT"] == "-", p.stdout
    # installed and uninstalled before GT4Py's runners module is imported:
    # the hooks waiting for its import patch nothing then
    script.write_text(UNINSTALL_EARLY)
    p = subprocess.run([sys.executable, str(script)], text=True, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.split() == ["EARLY", "-"], p.stdout
