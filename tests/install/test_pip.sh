#!/bin/bash
# `pip install` of the Python package (client/python) into a virtual
# environment: kiln-dace.pth is installed beside the package, so that
# KILN_DACE=1 routes DaCe's builds through kiln as after `meson install`
# (docs/dace.md). Skips (77) without Debian's venv and pip.
set -u
src=$1
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! "$py" -m venv --system-site-packages "$tmp/venv" >"$tmp/venv.log" 2>&1 ||
   [ ! -x "$tmp/venv/bin/pip" ]; then
	echo "SKIP: $py cannot make a virtual environment with pip (Debian's python3-venv, python3-pip)"
	exit 77
fi
# A copy: pip's build leaves build/ and *.egg-info where it builds.
cp -r "$src/client/python" "$tmp/pkg"
if ! "$tmp/venv/bin/pip" install -q --no-build-isolation --no-deps --no-index "$tmp/pkg" \
	>"$tmp/pip.log" 2>&1; then
	echo "FAIL: pip install failed:"; cat "$tmp/pip.log"; exit 1
fi
site=$("$tmp/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
[ -f "$site/kiln-dace.pth" ] || { echo "FAIL: pip left out kiln-dace.pth ($site)"; ls "$site"; exit 1; }
cd "$tmp"
on=$(KILN_DACE=1 "$tmp/venv/bin/python" -c 'import sys; print("kiln._autodace" in sys.modules)')
off=$("$tmp/venv/bin/python" -c 'import sys; print("kiln._autodace" in sys.modules)')
[ "$on" = True ] || { echo "FAIL: KILN_DACE=1 did not load kiln._autodace after pip install"; exit 1; }
[ "$off" = False ] || { echo "FAIL: kiln._autodace loaded without KILN_DACE"; exit 1; }
echo "ok: pip installs kiln-dace.pth; KILN_DACE=1 switches kiln.dace on, its absence off"

# A venv without the system's packages: its setuptools (ensurepip's) may build
# wheels only with the separate wheel package, which it lacks; then pip's
# --no-build-isolation must say what is missing, not "invalid command".
"$py" -m venv "$tmp/bare" >"$tmp/bare.log" 2>&1 || { echo "ok: (no bare venv to try)"; exit 0; }
if "$tmp/bare/bin/python" -c 'import setuptools' 2>/dev/null &&
   ! "$tmp/bare/bin/python" -c 'import wheel' 2>/dev/null &&
   ! "$tmp/bare/bin/python" -c 'from setuptools.command import bdist_wheel' 2>/dev/null; then
	rm -rf "$tmp/pkg" && cp -r "$src/client/python" "$tmp/pkg"
	if "$tmp/bare/bin/pip" install -q --no-build-isolation --no-deps --no-index "$tmp/pkg" \
		>"$tmp/bare-pip.log" 2>&1; then
		echo "FAIL: pip install without wheel succeeded?"; cat "$tmp/bare-pip.log"; exit 1
	fi
	grep -q "needs the 'wheel' package" "$tmp/bare-pip.log" ||
		{ echo "FAIL: pip's failure without wheel does not say what is missing:"; cat "$tmp/bare-pip.log"; exit 1; }
	echo "ok: without wheel, pip install --no-build-isolation says it needs the 'wheel' package"
else
	echo "ok: (the bare venv's setuptools builds wheels by itself, or has none)"
fi
