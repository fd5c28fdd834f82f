"""
One rank of an icon4py granule's start, for bench/gt4py (its default
scenarios) and bench_gt4py: icon4py's diffusion stencils and a Cartesian
Laplacian set up as icon4py's `model_options.setup_program()` does, ahead of
time, every static variant submitted to GT4Py's compile pool before
`gtx.wait_for_compilation()` waits for all of them; then one call of every
variant, checked against NumPy. Each rank has its own local grid: connectivity
tables of the same shapes, with contents derived from the rank number.

    python3 gt4py_granule.py [START_TIME]

icon4py's `model_options` is not vendored here (/tmp/gtv/icon4py holds the
diffusion stencils only); setup_program() below imitates it with what the
vendored GT4Py offers: the scalar constant arguments and the horizontal and
vertical sizes become one-value static arguments, the variants (here
`vertical_start`, for the Laplacian `j_start`) lists of them;
`Program.with_compilation_options(enable_jit=False).compile(offset_provider=...,
**static)` submits one compilation task per variant (CompiledProgramsPool.
compile, one `runner.submit` each, no wait) and the result is a
functools.partial binding the constant arguments, the sizes and the offset
provider. A call with a variant nobody compiled raises (enable_jit=False).

Environment (and gt4py_programs.py's RANK_KILN, RANK_LOG, RANK_GPU, which
this script shares):
  GRANULE_RANK      this rank's number (default 0): seeds its tables
  GRANULE_PROGRAMS  comma-separated names (default laplacian,nabla2_for_w,
                    nabla2_for_z; also apply_nabla2_to_w, nabla2_of_theta)
  GRANULE_VARIANTS  static variants per program (default 2: vertical_start
                    0, 1, ...)
  GRANULE_SIZES     "cells,edges,levels" of the local grid (default 40,60,6)

Prints one line "RANK {json}": init_s (the first compile() until
wait_for_compilation() returns), submit_s (until the last compile()
returned), per variant its first call's seconds and whether it matched NumPy,
kiln.gt4py's and kiln.dace's counters.
"""

import functools
import json
import os
import sys
import time

import numpy as np

import gt4py.next as gtx
import gt4py_programs as gp   # its lowering counter (RANK_LOG) counts here too
from gt4py_programs import FT, I, J, laplacian   # GT4Py's DSL wants bare names

RANK = int(os.environ.get("GRANULE_RANK", "0"))
VARIANTS = int(os.environ.get("GRANULE_VARIANTS", "2"))
NC, NE, NK = (int(x) for x in os.environ.get("GRANULE_SIZES", "40,60,6").split(","))


@gtx.program(backend=gp.BACKEND)
def laplacian_granule(a: gtx.Field[gtx.Dims[I, J], FT], out: gtx.Field[gtx.Dims[I, J], FT],
                      i_start: gtx.int32, i_end: gtx.int32,
                      j_start: gtx.int32, j_end: gtx.int32):
    laplacian(a, out=out, domain={I: (i_start, i_end), J: (j_start, j_end)})


def setup_program(program, constant_args=None, variants=None, horizontal_sizes=None,
                  vertical_sizes=None, offset_provider=None):
    """icon4py's model_options.setup_program, imitated (module docstring)."""
    constant_args = constant_args or {}
    horizontal_sizes = horizontal_sizes or {}
    vertical_sizes = vertical_sizes or {}
    offset_provider = offset_provider or {}
    static = {k: [v] for k, v in constant_args.items() if gtx.is_scalar_type(v)}
    static.update((k, [v]) for k, v in {**horizontal_sizes, **vertical_sizes}.items())
    static.update(variants or {})
    aot = program.with_backend(gp.BACKEND).with_compilation_options(enable_jit=False)
    aot.compile(offset_provider=offset_provider, **static)
    return functools.partial(aot, **constant_args, **horizontal_sizes, **vertical_sizes,
                             offset_provider=offset_provider)


class LocalGrid(gp.Grid):
    """This rank's part of a decomposed grid: NC cells, NE edges, NK levels,
    tables of fixed shapes whose contents depend on the rank (valid indices,
    a cell's own index first in C2E2CO as in ICON)."""

    def __init__(self, rank):
        super().__init__(seed=1000 + rank, sizes=(NC, NE, NK))

    def setup(self, program, offsets, end=NC, constant_args=None):
        """setup_program of an icon4py stencil over END cells or edges,
        all levels, its variants vertical_start = 0, 1, ..."""
        return setup_program(program, constant_args=constant_args,
                             variants={"vertical_start": levels()},
                             horizontal_sizes={"horizontal_start": gtx.int32(0),
                                               "horizontal_end": gtx.int32(end)},
                             vertical_sizes={"vertical_end": gtx.int32(NK)},
                             offset_provider={k: self.offsets[k] for k in offsets})


def levels():
    return [gtx.int32(v) for v in range(VARIANTS)]


def timed(prog, *args, **kwargs):
    """Seconds of one call (the first of a variant loads its library)."""
    t = time.monotonic()
    prog(*args, **kwargs)
    return time.monotonic() - t


def below(ref, v):
    """ref where a variant starting at level v writes, zeros above it."""
    out = np.zeros_like(ref)
    out[:, v:] = ref[:, v:]
    return out


# Each program: setup(grid) submits its variants and returns run(v), which calls
# variant v once with fresh fields: (seconds of the call, whether it matched NumPy).

def setup_laplacian(g):
    n = (24, 20)
    prog = setup_program(laplacian_granule, variants={"j_start": [gtx.int32(1 + v) for v in
                                                                   range(VARIANTS)]},
                         horizontal_sizes={"i_start": gtx.int32(1),
                                           "i_end": gtx.int32(n[0] - 1)},
                         vertical_sizes={"j_end": gtx.int32(n[1] - 1)})

    def run(v):
        a_np = np.fromfunction(lambda i, j: np.sin(0.3 * i) + np.cos(0.2 * j) * i,
                               n).astype(gp.NP_FT)
        a = gtx.as_field([gp.I, gp.J], gp.xp().asarray(a_np))
        out = gtx.as_field([gp.I, gp.J], gp.xp().zeros(n, dtype=gp.NP_FT))
        dt = timed(prog, a, out, j_start=gtx.int32(1 + v))
        ref = np.zeros(n, dtype=gp.NP_FT)
        ref[1:-1, 1 + v:-1] = (-gp.NP_FT(gp.COEF) * a_np[1:-1, 1 + v:-1]
                               + a_np[2:, 1 + v:-1] + a_np[:-2, 1 + v:-1]
                               + a_np[1:-1, 2 + v:] + a_np[1:-1, v:-2])
        return dt, bool(np.allclose(gp.as_np(out), ref, rtol=1e-5))
    return run


def setup_nabla2_for_w(g):
    from icon4py.model.atmosphere.diffusion.stencils.calculate_nabla2_for_w import (
        calculate_nabla2_for_w)
    d = g.dims
    prog = g.setup(calculate_nabla2_for_w, ("C2E2CO",))

    def run(v):
        w_np, w = g.field([d.CellDim, d.KDim], (NC, NK))
        geo_np, geo = g.field([d.CellDim, d.C2E2CODim], (NC, 4))
        out = g.zeros([d.CellDim, d.KDim], (NC, NK))
        dt = timed(prog, w, geo, out, vertical_start=gtx.int32(v))
        ref = (w_np[g.c2e2co] * geo_np[:, :, None]).sum(axis=1)
        return dt, bool(np.allclose(gp.as_np(out), below(ref, v)))
    return run


def setup_nabla2_for_z(g):
    from icon4py.model.atmosphere.diffusion.stencils.calculate_nabla2_for_z import (
        calculate_nabla2_for_z)
    d = g.dims
    prog = g.setup(calculate_nabla2_for_z, ("E2C",), end=NE)

    def run(v):
        kh_np, kh = g.field([d.EdgeDim, d.KDim], (NE, NK))
        inv_np, inv = g.field([d.EdgeDim], (NE,))
        th_np, th = g.field([d.CellDim, d.KDim], (NC, NK))
        out = g.zeros([d.EdgeDim, d.KDim], (NE, NK))
        dt = timed(prog, kh, inv, th, out, vertical_start=gtx.int32(v))
        ref = kh_np * inv_np[:, None] * (th_np[g.e2c[:, 1]] - th_np[g.e2c[:, 0]])
        return dt, bool(np.allclose(gp.as_np(out), below(ref, v)))
    return run


def setup_nabla2_of_theta(g):
    from icon4py.model.atmosphere.diffusion.stencils.calculate_nabla2_of_theta import (
        calculate_nabla2_of_theta)
    d = g.dims
    prog = g.setup(calculate_nabla2_of_theta, ("C2E",))

    def run(v):
        z_np, z = g.field([d.EdgeDim, d.KDim], (NE, NK))
        geo_np, geo = g.field([d.CellDim, d.C2EDim], (NC, 3))
        out = g.zeros([d.CellDim, d.KDim], (NC, NK))
        dt = timed(prog, z, geo, out, vertical_start=gtx.int32(v))
        ref = (z_np[g.c2e] * geo_np[:, :, None]).sum(axis=1)
        return dt, bool(np.allclose(gp.as_np(out), below(ref, v)))
    return run


def setup_apply_nabla2_to_w(g):
    """diff_multfac_w, a scalar constant argument, becomes static as in
    setup_program; w is updated in place."""
    from icon4py.model.atmosphere.diffusion.stencils.apply_nabla2_to_w import apply_nabla2_to_w
    d = g.dims
    fac = 0.25
    prog = g.setup(apply_nabla2_to_w, ("C2E2CO",), constant_args={"diff_multfac_w": fac})

    def run(v):
        area_np, area = g.field([d.CellDim], (NC,))
        zn_np, zn = g.field([d.CellDim, d.KDim], (NC, NK))
        geo_np, geo = g.field([d.CellDim, d.C2E2CODim], (NC, 4))
        w_np, w = g.field([d.CellDim, d.KDim], (NC, NK))
        dt = timed(prog, area, zn, geo, w, vertical_start=gtx.int32(v))
        ref = w_np - fac * (area_np * area_np)[:, None] * (zn_np[g.c2e2co] *
                                                           geo_np[:, :, None]).sum(axis=1)
        ref[:, :v] = w_np[:, :v]
        return dt, bool(np.allclose(gp.as_np(w), ref))
    return run


PROGRAMS = {
    "laplacian": setup_laplacian,
    "nabla2_for_w": setup_nabla2_for_w,
    "nabla2_for_z": setup_nabla2_for_z,
    "nabla2_of_theta": setup_nabla2_of_theta,
    "apply_nabla2_to_w": setup_apply_nabla2_to_w,
}
DEFAULT = "laplacian,nabla2_for_w,nabla2_for_z"


def main():
    gp.install_kiln()
    names = [n for n in os.environ.get("GRANULE_PROGRAMS", DEFAULT).split(",") if n]
    bad = [n for n in names if n not in PROGRAMS]
    if bad:
        sys.exit("gt4py_granule.py: unknown program %s (%s)" % (", ".join(bad),
                                                                 ", ".join(PROGRAMS)))
    g = LocalGrid(RANK)
    gp.wait_for_start()
    t0 = time.monotonic()
    runs = {n: PROGRAMS[n](g) for n in names}
    submitted = time.monotonic()
    gtx.wait_for_compilation()
    out = {"rank": RANK, "init_s": time.monotonic() - t0, "submit_s": submitted - t0,
           "calls": {}, "ok": {}}
    for n in names:
        for v in range(VARIANTS):
            key = "%s[%d]" % (n, v)
            out["calls"][key], out["ok"][key] = runs[n](v)
    gp.kiln_stats(out)
    print("RANK " + json.dumps(out), flush=True)
    if not all(out["ok"].values()):
        sys.exit("gt4py_granule.py: rank %d: wrong results: %s"
                 % (RANK, [k for k, ok in out["ok"].items() if not ok]))


if __name__ == "__main__":
    main()
