"""Installs kiln-dace.pth beside the package (site-packages' top level), so
that KILN_DACE=1 routes DaCe's builds through kiln after `pip install` as
after `meson install` (docs/dace.md). Everything else is pyproject.toml's."""

import os
import sys

import setuptools
from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "kiln-dace.pth"


class BuildPy(build_py):
    """build_py, plus the .pth at the top of the built tree: a wheel puts
    the top level into site-packages, where Python reads .pth files."""

    def run(self):
        super().run()
        here = os.path.dirname(os.path.abspath(__file__))
        self.copy_file(os.path.join(here, PTH), os.path.join(self.build_lib, PTH))

    def get_outputs(self, *args, **kwargs):
        return super().get_outputs(*args, **kwargs) + [os.path.join(self.build_lib, PTH)]


def _wheel_builder_missing():
    """Why a wheel cannot be built here, or None: setuptools before 70.1
    builds wheels only with the separate `wheel` package, which a virtual
    environment without the system's site packages lacks (pip then says
    only "invalid command 'bdist_wheel'")."""
    if not {"bdist_wheel", "dist_info", "editable_wheel"} & set(sys.argv[1:]):
        return None     # pip's metadata step (dist_info) needs bdist_wheel too
    try:
        import wheel  # noqa: F401
        return None
    except ImportError:
        pass
    try:
        from setuptools.command import bdist_wheel  # noqa: F401 (setuptools >= 70.1)
        return None
    except ImportError:
        return ("kiln-hpc: building the wheel needs the 'wheel' package with this setuptools "
                "(%s, before 70.1): install it into this environment (pip install wheel; "
                "Debian: python3-wheel, or a venv made with --system-site-packages), or "
                "leave out --no-build-isolation where pip may fetch it" % setuptools.__version__)


if _wheel_builder_missing():
    sys.exit(_wheel_builder_missing())

setup(cmdclass={"build_py": BuildPy})
