"""
One "rank" of a GT4Py application, for test_gt4py.py and bench/gt4py: the
vendored example's two programs (a Cartesian Laplacian, icon4py's
calculate_nabla2_for_w) and four more of icon4py's diffusion stencils
(calculate_nabla2_for_z, calculate_nabla2_of_theta, update_theta_and_exner,
apply_nabla2_to_w) on a small made-up unstructured grid, each run once with
run_dace_cpu (run_dace_gpu with RANK_GPU=1) and checked against NumPy.

    python3 gt4py_programs.py [START_TIME]

Environment:
  RANK_KILN     "gt4py": kiln.gt4py.install(); "dace": kiln.dace.install();
                else GT4Py alone. Called inside main(), which GT4Py's
                spawned compile workers never run.
  RANK_LOG      a file: every lowering (GT4Py's DaCe translation step, in
                whichever process or thread it runs) appends a line; every
                run of its IR passes (apply_fieldview_transforms, the part
                that reads the connectivity tables) one to RANK_LOG.passes
  RANK_PROGRAMS comma-separated names to run (default: all)
  RANK_COEF     the Laplacian's centre coefficient the reference expects
                (default 4.0; the program says FT("-4.0"): a test edits it)
  RANK_FLOAT32  "1": the Laplacian on float32 fields (another argument type)
  RANK_GRID_SEED the unstructured grid's tables' seed (default 0: every
                rank alike); "per-rank": RANK_INDEX + 1 (each rank of a
                decomposed run its own tables)
  RANK_DACE_SET "section.key=integer": a dace.Config.set in main(), after
                GT4Py's backend was made
  RANK_SETENV   "NAME=value": os.environ[NAME] = value in main(), after
                GT4Py's backend was made (CXXFLAGS set from Python); with
                RANK_SETENV_AFTER=1, after the first program instead

Prints one line "RANK {json}": per program its first call's seconds and
whether it matched NumPy, kiln.gt4py's and kiln.dace's counters.
"""

import json
import os
import sys
import time

import numpy as np

import gt4py.next as gtx
from gt4py.next import neighbor_sum
from gt4py.next.program_processors.runners import dace as gtx_dace

# Module level, so that GT4Py's spawned compile workers (which import this
# file again) count their lowerings too.
if os.environ.get("RANK_LOG"):
    from gt4py.next.program_processors.runners.dace.workflow import translation as _tr

    _translate = _tr.DaCeTranslator.__call__

    def _counted(self, *a, **kw):
        with open(os.environ["RANK_LOG"], "a") as f:
            f.write("%d\n" % os.getpid())
        return _translate(self, *a, **kw)

    _tr.DaCeTranslator.__call__ = _counted
    _passes = _tr.itir_transforms.apply_fieldview_transforms

    def _counted_passes(*a, **kw):
        with open(os.environ["RANK_LOG"] + ".passes", "a") as f:
            f.write("%d\n" % os.getpid())
        return _passes(*a, **kw)

    _tr.itir_transforms.apply_fieldview_transforms = _counted_passes

BACKEND = gtx_dace.run_dace_gpu if os.environ.get("RANK_GPU") == "1" else gtx_dace.run_dace_cpu
COEF = float(os.environ.get("RANK_COEF", "4.0"))
FT = gtx.float32 if os.environ.get("RANK_FLOAT32") == "1" else gtx.float64
NP_FT = np.float32 if FT is gtx.float32 else np.float64

I = gtx.Dimension("I")
J = gtx.Dimension("J")


@gtx.field_operator
def laplacian(a: gtx.Field[gtx.Dims[I, J], FT]) -> gtx.Field[gtx.Dims[I, J], FT]:
    return FT("-4.0") * a + a(I + 1) + a(I - 1) + a(J + 1) + a(J - 1)


@gtx.program(backend=BACKEND)
def laplacian_program(a: gtx.Field[gtx.Dims[I, J], FT], out: gtx.Field[gtx.Dims[I, J], FT]):
    laplacian(a, out=out[1:-1, 1:-1])


def xp():
    """NumPy, or CuPy for the GPU backend's fields."""
    if os.environ.get("RANK_GPU") == "1":
        import cupy
        return cupy
    return np


def as_np(field):
    return field.asnumpy()


def run_laplacian():
    a_np = np.fromfunction(lambda i, j: np.sin(0.3 * i) + np.cos(0.2 * j) * i,
                           (24, 20)).astype(NP_FT)
    a = gtx.as_field([I, J], xp().asarray(a_np))
    out = gtx.as_field([I, J], xp().zeros((24, 20), dtype=NP_FT))
    t = time.monotonic()
    laplacian_program(a, out)
    dt = time.monotonic() - t
    ref = (-NP_FT(COEF) * a_np[1:-1, 1:-1] + a_np[2:, 1:-1] + a_np[:-2, 1:-1] + a_np[1:-1, 2:]
           + a_np[1:-1, :-2])
    return dt, bool(np.allclose(as_np(out)[1:-1, 1:-1], ref, rtol=1e-5))


class Grid:
    """A made-up unstructured grid: nc cells, ne edges, nk levels, tables
    with a fixed seed (the same in every rank unless RANK_GRID_SEED says
    otherwise; gt4py_granule.py seeds them by the rank)."""

    def __init__(self, seed=0, sizes=(40, 60, 6)):
        from icon4py.model.common import dimension as dims
        self.dims = dims
        self.nc, self.ne, self.nk = sizes
        rng = np.random.default_rng(seed)
        self.rng = rng
        self.c2e2co = np.column_stack([np.arange(self.nc)] +
                                      [rng.integers(0, self.nc, self.nc) for _ in range(3)])
        self.e2c = rng.integers(0, self.nc, (self.ne, 2))
        self.c2e = rng.integers(0, self.ne, (self.nc, 3))
        conn = lambda dom, local, cod, t: gtx.as_connectivity(  # noqa: E731
            [dom, local], codomain=cod, data=xp().asarray(t.astype(np.int32)))
        self.offsets = {
            "C2E2CO": conn(dims.CellDim, dims.C2E2CODim, dims.CellDim, self.c2e2co),
            "E2C": conn(dims.EdgeDim, dims.E2CDim, dims.CellDim, self.e2c),
            "C2E": conn(dims.CellDim, dims.C2EDim, dims.EdgeDim, self.c2e),
        }

    def field(self, dims_, shape):
        a = self.rng.random(shape)
        return a, gtx.as_field(dims_, xp().asarray(a))

    def zeros(self, dims_, shape):
        return gtx.as_field(dims_, xp().zeros(shape))

    def call(self, program, *args, offsets=()):
        t = time.monotonic()
        program.with_backend(BACKEND)(*args, offset_provider={k: self.offsets[k] for k in offsets})
        return time.monotonic() - t


def run_nabla2_for_w(g):
    from icon4py.model.atmosphere.diffusion.stencils.calculate_nabla2_for_w import (
        calculate_nabla2_for_w)
    d = g.dims
    w_np, w = g.field([d.CellDim, d.KDim], (g.nc, g.nk))
    geo_np, geo = g.field([d.CellDim, d.C2E2CODim], (g.nc, 4))
    out = g.zeros([d.CellDim, d.KDim], (g.nc, g.nk))
    dt = g.call(calculate_nabla2_for_w, w, geo, out, gtx.int32(0), gtx.int32(g.nc), gtx.int32(0),
                gtx.int32(g.nk), offsets=("C2E2CO",))
    ref = (w_np[g.c2e2co] * geo_np[:, :, None]).sum(axis=1)
    return dt, bool(np.allclose(as_np(out), ref))


def run_nabla2_for_z(g):
    from icon4py.model.atmosphere.diffusion.stencils.calculate_nabla2_for_z import (
        calculate_nabla2_for_z)
    d = g.dims
    kh_np, kh = g.field([d.EdgeDim, d.KDim], (g.ne, g.nk))
    inv_np, inv = g.field([d.EdgeDim], (g.ne,))
    th_np, th = g.field([d.CellDim, d.KDim], (g.nc, g.nk))
    out = g.zeros([d.EdgeDim, d.KDim], (g.ne, g.nk))
    dt = g.call(calculate_nabla2_for_z, kh, inv, th, out, gtx.int32(0), gtx.int32(g.ne),
                gtx.int32(0), gtx.int32(g.nk), offsets=("E2C",))
    ref = kh_np * inv_np[:, None] * (th_np[g.e2c[:, 1]] - th_np[g.e2c[:, 0]])
    return dt, bool(np.allclose(as_np(out), ref))


def run_nabla2_of_theta(g):
    from icon4py.model.atmosphere.diffusion.stencils.calculate_nabla2_of_theta import (
        calculate_nabla2_of_theta)
    d = g.dims
    z_np, z = g.field([d.EdgeDim, d.KDim], (g.ne, g.nk))
    geo_np, geo = g.field([d.CellDim, d.C2EDim], (g.nc, 3))
    out = g.zeros([d.CellDim, d.KDim], (g.nc, g.nk))
    dt = g.call(calculate_nabla2_of_theta, z, geo, out, gtx.int32(0), gtx.int32(g.nc),
                gtx.int32(0), gtx.int32(g.nk), offsets=("C2E",))
    ref = (z_np[g.c2e] * geo_np[:, :, None]).sum(axis=1)
    return dt, bool(np.allclose(as_np(out), ref))


def run_update_theta_and_exner(g):
    from icon4py.model.atmosphere.diffusion.stencils.update_theta_and_exner import (
        update_theta_and_exner)
    d = g.dims
    zt_np, zt = g.field([d.CellDim, d.KDim], (g.nc, g.nk))
    area_np, area = g.field([d.CellDim], (g.nc,))
    th_np, th = g.field([d.CellDim, d.KDim], (g.nc, g.nk))
    ex_np, ex = g.field([d.CellDim, d.KDim], (g.nc, g.nk))
    dt = g.call(update_theta_and_exner, zt, area, th, ex, 0.286, gtx.int32(0), gtx.int32(g.nc),
                gtx.int32(0), gtx.int32(g.nk))
    new_th = th_np + area_np[:, None] * zt_np
    new_ex = ex_np * (1.0 + 0.286 * (new_th / th_np - 1.0))
    return dt, bool(np.allclose(as_np(th), new_th) and np.allclose(as_np(ex), new_ex))


def run_apply_nabla2_to_w(g):
    from icon4py.model.atmosphere.diffusion.stencils.apply_nabla2_to_w import apply_nabla2_to_w
    d = g.dims
    area_np, area = g.field([d.CellDim], (g.nc,))
    zn_np, zn = g.field([d.CellDim, d.KDim], (g.nc, g.nk))
    geo_np, geo = g.field([d.CellDim, d.C2E2CODim], (g.nc, 4))
    w_np, w = g.field([d.CellDim, d.KDim], (g.nc, g.nk))
    dt = g.call(apply_nabla2_to_w, area, zn, geo, w, 0.25, gtx.int32(0), gtx.int32(g.nc),
                gtx.int32(0), gtx.int32(g.nk), offsets=("C2E2CO",))
    ref = w_np - 0.25 * (area_np * area_np)[:, None] * (zn_np[g.c2e2co] *
                                                         geo_np[:, :, None]).sum(axis=1)
    return dt, bool(np.allclose(as_np(w), ref))


PROGRAMS = {
    "laplacian": lambda g: run_laplacian(),
    "nabla2_for_w": run_nabla2_for_w,
    "nabla2_for_z": run_nabla2_for_z,
    "nabla2_of_theta": run_nabla2_of_theta,
    "update_theta_and_exner": run_update_theta_and_exner,
    "apply_nabla2_to_w": run_apply_nabla2_to_w,
}


def install_kiln():
    """RANK_KILN's integration and RANK_DACE_SET, in main() (gt4py_granule.py too)."""
    mode = os.environ.get("RANK_KILN", "")
    if mode == "gt4py":
        import kiln.gt4py
        kiln.gt4py.install()
    elif mode == "dace":
        import kiln.dace
        kiln.dace.install()
    if os.environ.get("RANK_DACE_SET"):
        import dace
        name, _, value = os.environ["RANK_DACE_SET"].partition("=")
        dace.Config.set(*name.split("."), value=int(value))


def wait_for_start():
    """Until the START_TIME of the command line (all ranks go at once)."""
    if len(sys.argv) > 1:
        start = float(sys.argv[1])
        while time.time() < start:
            time.sleep(0.001)


def kiln_stats(out):
    """kiln.gt4py's and kiln.dace's counters of this process into out."""
    for m in ("gt4py", "dace"):
        mod = sys.modules.get("kiln." + m)
        out["kiln_" + m] = dict(mod.stats) if mod is not None else None


def main():
    install_kiln()
    wait_for_start()
    names = [n for n in os.environ.get("RANK_PROGRAMS", ",".join(PROGRAMS)).split(",") if n]
    seed = os.environ.get("RANK_GRID_SEED", "0")
    if seed == "per-rank":
        seed = int(os.environ.get("RANK_INDEX", "0")) + 1
    g = Grid(int(seed)) if any(n != "laplacian" for n in names) else None
    setenv = os.environ.get("RANK_SETENV", "").partition("=")
    if setenv[0] and os.environ.get("RANK_SETENV_AFTER") != "1":
        os.environ[setenv[0]] = setenv[2]
    out = {"calls": {}, "ok": {}}
    for i, n in enumerate(names):
        out["calls"][n], out["ok"][n] = PROGRAMS[n](g)
        if i == 0 and setenv[0] and os.environ.get("RANK_SETENV_AFTER") == "1":
            os.environ[setenv[0]] = setenv[2]
    kiln_stats(out)
    print("RANK " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
