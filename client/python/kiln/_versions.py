"""
The DaCe and GT4Py versions each integration supports (docs/python.md,
"Supported versions"; pyproject.toml's extras say the same, and py_kiln
holds the two together). install() outside them leaves the framework to
build as usual, after one line on stderr; KILN_ANY_VERSION=1 tries anyway.
"""

import os
import re

# name: (lowest release supported, first release not supported)
SUPPORTED = {"dace": ((2, 0), (2, 1)), "gt4py": ((1, 2), (1, 3))}
_LABEL = {"dace": "DaCe", "gt4py": "GT4Py"}


def release(version):
    """The leading numbers of a version string: "2.0.0a6" -> (2, 0, 0)."""
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", str(version))
    return tuple(int(p) for p in m.group(1).split(".")) if m else ()


def spec(name):
    """The range as pip writes it, the lowest release's pre-releases in
    (DaCe 2.0.0a6 is one): ">=2.0a0,<2.1"."""
    low, high = SUPPORTED[name]
    return ">=%sa0,<%s" % (".".join(map(str, low)), ".".join(map(str, high)))


def unsupported(name, version):
    """Why version of framework name is not supported, or None."""
    if os.environ.get("KILN_ANY_VERSION") == "1":
        return None
    low, high = SUPPORTED[name]
    r = release(version)
    if r and low <= r[:len(low)] < high:
        return None
    return ("%s %s is outside the versions this kiln supports (%s; KILN_ANY_VERSION=1 tries "
            "it anyway)" % (_LABEL[name], version, spec(name)))
