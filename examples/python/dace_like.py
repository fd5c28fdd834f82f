#!/usr/bin/env python3
"""
A generated program loaded the way DaCe loads a compiled SDFG, with kiln in
place of DaCe's own build and dlopen: the generated C++ exports
__dace_init_<name> (takes the symbols, returns a state handle),
__program_<name> (takes the handle, the arrays and the symbols) and
__dace_exit_<name> (frees the state, returns an error code), and Python
calls the three through ctypes, as dace.codegen.compiled_sdfg.CompiledSDFG
does. The alias is a hash of the generated code, as DaCe's SDFG hash would
be: on a warm cache, kiln.lookup finds the program without any build.

Run it against a kilnd (the README's five-minute tour starts one):

    KILN_SOCKET=/tmp/kiln-tour/kilnd.sock \
    KILN_LIBRARY=$PWD/build/client/libkiln.so.0 \
    python3 examples/python/dace_like.py

Standard library only: the arrays are ctypes arrays, not NumPy's.
"""

import argparse
import ctypes
import hashlib
import os
import pathlib
import sys

try:
    import kiln
except ImportError:
    # Run from a source tree: use the package next door.
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "client" / "python"))
    import kiln

# What DaCe's code generator emits for a one-state SDFG, reduced to the
# shape that matters here: a state struct with a persistent transient
# allocated by init, the program entry point, and exit.
TEMPLATE = r"""
#include <cstdint>
#include <cstdlib>

#define DACE_EXPORTED extern "C"

struct {name}_state_t {{
    double *__restrict__ tmp;   // a persistent transient, allocated once
}};

static void __program_{name}_internal({name}_state_t *__state,
        double *__restrict__ A, int64_t N, int64_t TSTEPS)
{{
    double *__restrict__ B = __state->tmp;
    for (int64_t t = 0; t < TSTEPS; ++t) {{
        B[0] = A[0];
        B[N - 1] = A[N - 1];
        for (int64_t i = 1; i < N - 1; ++i)
            B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1]);
        for (int64_t i = 0; i < N; ++i)
            A[i] = B[i];
    }}
}}

DACE_EXPORTED void __program_{name}({name}_state_t *__state, double *__restrict__ A,
        int64_t N, int64_t TSTEPS)
{{
    __program_{name}_internal(__state, A, N, TSTEPS);
}}

DACE_EXPORTED {name}_state_t *__dace_init_{name}(int64_t N)
{{
    int __result = 0;
    {name}_state_t *__state = new {name}_state_t();
    __state->tmp = static_cast<double *>(std::calloc(N, sizeof(double)));
    if (!__state->tmp)
        __result = 1;
    if (__result) {{
        delete __state;
        return nullptr;
    }}
    return __state;
}}

DACE_EXPORTED int __dace_exit_{name}({name}_state_t *__state)
{{
    int __err = 0;
    std::free(__state->tmp);
    delete __state;
    return __err;
}}
"""


def generate(name):
    """The "code generator": the source text and its content hash."""
    code = TEMPLATE.format(name=name)
    return code, hashlib.sha256(code.encode()).hexdigest()


def reference(a, tsteps):
    """The same computation in Python, to check the compiled one."""
    a = list(a)
    n = len(a)
    for _ in range(tsteps):
        b = [a[0]] + [0.33333 * (a[i - 1] + a[i] + a[i + 1]) for i in range(1, n - 1)] + [a[-1]]
        a = b
    return a


class CompiledProgram:
    """The part of DaCe's CompiledSDFG that loads and calls the library:
    the three entry points through ctypes, the state handle in between."""

    def __init__(self, program, name):
        lib = program.lib                     # a ctypes.CDLL, as DaCe's
        self._init = lib["__dace_init_" + name]
        self._init.restype = ctypes.c_void_p
        self._init.argtypes = [ctypes.c_int64]
        self._cfunc = lib["__program_" + name]
        self._cfunc.restype = None
        self._cfunc.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_double),
                                ctypes.c_int64, ctypes.c_int64]
        self._exit = lib["__dace_exit_" + name]
        self._exit.restype = ctypes.c_int
        self._exit.argtypes = [ctypes.c_void_p]
        self._libhandle = None

    def initialize(self, n):
        res = self._init(n)
        if not res:
            raise RuntimeError("DaCe application failed to initialize")
        self._libhandle = ctypes.c_void_p(res)

    def __call__(self, a, n, tsteps):
        self._cfunc(self._libhandle, a, n, tsteps)

    def finalize(self):
        if self._libhandle is not None:
            err = self._exit(self._libhandle)
            self._libhandle = None
            if err != 0:
                raise RuntimeError("__dace_exit returned %d" % err)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--socket", help="kilnd's socket (default: $KILN_SOCKET, else the default)")
    ap.add_argument("--name", default="jacobi_1d", help="the SDFG's name")
    ap.add_argument("-n", type=int, default=64, help="array size (symbol N)")
    ap.add_argument("--steps", type=int, default=10, help="time steps (symbol TSTEPS)")
    opts = ap.parse_args()

    code, digest = generate(opts.name)
    alias = "dace:%s:%s" % (opts.name, digest[:32])
    with kiln.Kiln(opts.socket) as k:
        # A warm cache answers by alias alone, before any code generation
        # would have to run; only a miss sends the source.
        try:
            prog, how = k.lookup(alias), "found by alias"
        except kiln.NotFound:
            try:
                prog = k.get(toolchain="c++", sources={opts.name + ".cpp": code},
                             args=["-O2", "-std=c++14"], alias=alias, label=opts.name)
                how = "got from kilnd"
            except kiln.BuildError as e:
                print("build failed: %s\n%s" % (e.summary, e.diagnostics), file=sys.stderr)
                return 1
    # The Kiln is closed: the program stays loaded and callable.
    print("program %s: %s, key %s" % (opts.name, how, prog.key[:16]))
    print("artifact %s" % os.path.basename(prog.path))

    n = opts.n
    data = [float((i * 7) % 13) for i in range(n)]
    a = (ctypes.c_double * n)(*data)
    sdfg = CompiledProgram(prog, opts.name)
    sdfg.initialize(n)
    try:
        sdfg(a, n, opts.steps)
    finally:
        sdfg.finalize()

    want = reference(data, opts.steps)
    err = max(abs(x - y) for x, y in zip(a, want))
    print("A[0:4] = %s" % ", ".join("%.6f" % x for x in a[:4]))
    print("checksum %.6f, max error %.3g against Python" % (sum(a), err))
    if err > 1e-9:
        print("MISMATCH", file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
