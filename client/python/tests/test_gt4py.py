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


def test_gt4py_programs_lowered_once_per_node_then_never(daemon, tmp_path):
    """Three ranks at once, six programs (two of the example, four icon4py
    diffusion stencils), each rank its own GT4Py folder: every result
    matches NumPy, each program is lowered once on the node (the others
    wait for its claim) and compiled once; then three fresh ranks with new
    folders lower nothing and compile nothing: each program is found."""
    before = {e["key"] for e in entries(daemon)}
    s0 = status(daemon)
    results, lowerings = run_ranks(daemon, tmp_path, 3, "cold")
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
    assert s1["claims"] - s0["claims"] == ALL_PROGRAMS

    results, lowerings = run_ranks(daemon, tmp_path, 3, "warm")
    for res in results:
        assert all(res["ok"].values()), res
        assert res["kiln_gt4py"] == {"hits": ALL_PROGRAMS, "lowered": 0, "fallbacks": 0}, res
    assert lowerings == 0
    assert status(daemon)["builds_started"] == s1["builds_started"]


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
