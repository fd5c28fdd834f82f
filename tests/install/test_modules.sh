#!/usr/bin/env bash
# The module files meson install writes for its prefix, loaded with Debian's
# Lmod (the Lua one, and the Tcl one of Environment Modules, which Lmod reads
# too): after `module load kiln`, the CLI and kilnd run from PATH, MANPATH names the man
# pages and pkg-config finds kiln, the README's C example builds with pkg-config and
# runs against that kilnd (libkiln from LD_LIBRARY_PATH, no rpath), and
# Debian's python3 imports the installed kiln package, with KILN_GT4PY=1
# switching it on through the bootstrap (kiln._autodace imported at start-up)
# and without it not. The install goes to a temporary root (--destdir); the
# module files name the real prefix, which is rewritten to that root, the
# one thing a real install does not need.
# Usage: test_modules.sh BUILD_DIR SOURCE_DIR
set -u
build=$1 src=$2
lmod_init=$(find /usr/share/lmod -path "*/init/bash" 2>/dev/null | sort | head -n 1)
if [ -z "$lmod_init" ]; then
	echo "skipped: Lmod is not installed (Debian's lmod; scripts/test installs it)"
	exit 77
fi
# shellcheck source=tests/install/destdir.sh
source "$(dirname "${BASH_SOURCE[0]}")/destdir.sh"
prefix=$(meson introspect "$build" --buildoptions |
	python3 -c 'import json, sys; print({o["name"]: o["value"] for o in json.load(sys.stdin)}["prefix"])')
version=$(meson introspect "$build" --projectinfo | python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')
lua=$tmp/root$prefix/share/lmod/modulefiles/kiln/$version.lua
tcl=$tmp/root$prefix/share/modulefiles/kiln/$version
[ -f "$lua" ] || fail "no Lmod module file at $lua"
[ -f "$tcl" ] || fail "no Tcl module file at $tcl"
grep -q "\"$prefix" "$lua" || fail "$lua does not name the prefix $prefix"

# The README's C example, as a user copies it.
awk '/^```c$/ { on = 1; next } /^```$/ { if (on) exit } on' "$src/README.md" >"$tmp/axpy.c"
grep -q kiln_get "$tmp/axpy.c" || fail "no C example in README.md"

# Under AddressSanitizer (scripts/test --sanitize) the installed libkiln
# needs the ASan runtime first: the example is built with it, and python3,
# which is not, runs with it preloaded and leak checking off.
extra= asan=
libkiln=$(find "$tmp/root$prefix" -name libkiln.so.0 | head -n 1)
asan=$(ldd "$libkiln" | awk '$1 ~ /^libasan\.so/ { print $3 }')
[ -n "$asan" ] && extra="-fsanitize=address,undefined"

for kind in lua tcl; do
	mods=$tmp/modules-$kind
	mkdir -p "$mods/kiln"
	if [ "$kind" = lua ]; then
		sed "s#$prefix#$tmp/root$prefix#g" "$lua" >"$mods/kiln/$version.lua"
	else
		sed "s#$prefix#$tmp/root$prefix#g" "$tcl" >"$mods/kiln/$version"
	fi
	# shellcheck disable=SC2016 # the inner script expands its own arguments
	out=$(env -i HOME="$tmp" PATH=/usr/bin:/bin TMPDIR="$tmp" bash --norc --noprofile -c '
		set -e
		source "$1"
		module use "$2"
		module load kiln
		echo "module: $(module -t list 2>&1 | grep kiln)"
		kiln --version
		ls "${MANPATH%%:*}/man1/kiln.1"
		pkg-config --modversion kiln
		export PKG_CONFIG_SYSROOT_DIR="$5"   # the .pc names the real prefix, as the module did
		cc $6 -o "$3/axpy-$4" "$3/axpy.c" $(pkg-config --cflags --libs kiln)
		kilnd --socket "$3/$4.sock" --cache-dir "$3/cache-$4" --daemonize >/dev/null
		KILN_SOCKET="$3/$4.sock" "$3/axpy-$4"
		kiln --socket "$3/$4.sock" stop >/dev/null
		[ -z "$7" ] || export LD_PRELOAD="$7" ASAN_OPTIONS=detect_leaks=0
		/usr/bin/python3 -c "import kiln, sys; print(\"kiln from\", kiln.__file__)"
		KILN_GT4PY=1 /usr/bin/python3 -c "import sys; print(\"switch\", \"kiln._autodace\" in sys.modules)"
		/usr/bin/python3 -c "import sys; print(\"unswitched\", \"kiln._autodace\" in sys.modules)"
	' bash "$lmod_init" "$mods" "$tmp" "$kind" "$tmp/root" "$extra" "$asan" 2>&1) || fail "$kind: $out"
	grep -q "^module: kiln/$version" <<<"$out" || fail "$kind: module list: $out"
	grep -q "^kiln $version " <<<"$out" || fail "$kind: kiln --version: $out"
	grep -q "^$tmp/root$prefix/.*man1/kiln.1$" <<<"$out" || fail "$kind: MANPATH: $out"
	grep -qx "$version" <<<"$out" || fail "$kind: pkg-config: $out"
	grep -qx "7" <<<"$out" || fail "$kind: the README's example did not print 7: $out"
	grep -q "^kiln from $tmp/root$prefix/" <<<"$out" || fail "$kind: python3's kiln: $out"
	grep -qx "switch True" <<<"$out" || fail "$kind: KILN_GT4PY=1 did not switch kiln on: $out"
	grep -qx "unswitched False" <<<"$out" || fail "$kind: kiln switched on without the variable: $out"
	echo "$kind module file: module load kiln; kiln, man, pkg-config, the README's C example, python3 (switch on with KILN_GT4PY=1, off without)"
done
