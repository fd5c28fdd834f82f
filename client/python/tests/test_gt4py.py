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
