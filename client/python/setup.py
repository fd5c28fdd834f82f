"""Installs kiln-dace.pth beside the package (site-packages' top level), so
that KILN_DACE=1 routes DaCe's builds through kiln after `pip install` as
after `meson install` (docs/dace.md). Everything else is pyproject.toml's."""

import os

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


setup(cmdclass={"build_py": BuildPy})
