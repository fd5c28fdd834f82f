#!/usr/bin/env bash
# Installs the build into a temporary root (meson install --destdir), then
# checks what a user gets: binaries, libraries exporting only kiln_*,
# headers, pkg-config files, man pages, systemd units, bash completion; and
# builds a small client against the installed pkg-config files and runs it
# against the installed kilnd.
# Usage: test_install.sh BUILD_DIR SOURCE_DIR
set -u
build=$1 src=$2
# shellcheck source=tests/install/destdir.sh
source "$(dirname "${BASH_SOURCE[0]}")/destdir.sh"
prefix=$(meson introspect "$build" --buildoptions | python3 -c '
import json, sys
opts = {o["name"]: o["value"] for o in json.load(sys.stdin)}
print(opts["prefix"]); print(opts["libdir"]); print(opts["bindir"]); print(opts["mandir"])')
mapfile -t p <<<"$prefix"
root=$tmp/root${p[0]}
libdir=$root/${p[1]} bindir=$root/${p[2]} mandir=$root/${p[3]}

for f in "$bindir/kilnd" "$bindir/kiln" "$libdir/libkiln.so.0" "$root/include/kiln/kiln.h" \
	"$root/include/kiln/kiln_version.h" "$libdir/pkgconfig/kiln.pc" "$mandir/man1/kiln.1" \
	"$mandir/man8/kilnd.8"; do
	[ -e "$f" ] || fail "$f is not installed"
done
# The version, written only in meson.build, reaches every place that says it.
version=$(meson introspect "$build" --projectinfo | python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')
grep -q "#define KILN_VERSION \"$version\"" "$root/include/kiln/kiln_version.h" ||
	fail "kiln_version.h does not say $version"
for m in "$mandir/man1/kiln.1" "$mandir/man8/kilnd.8"; do
	grep -q "\"kiln $version\"" "$m" || fail "$m does not say kiln $version"
done
LD_LIBRARY_PATH=$libdir "$bindir/kiln" --version | grep -q "^kiln $version " ||
	fail "kiln --version does not say $version"
find "$tmp/root" -name kilnd.service -path '*systemd/user*' | grep -q . || fail "no kilnd.service user unit"
find "$tmp/root" -name kilnd.socket | grep -q . || fail "no kilnd.socket"
find "$tmp/root" -name 'kilnd@.service' -path '*systemd/system*' | grep -q . || fail "no kilnd@.service"
find "$tmp/root" -path '*bash-completion/completions/kiln' | grep -q . || fail "no bash completion"
find "$tmp/root" -name kiln-exec -perm -u+x | grep -q . || fail "no kiln-exec"
# The interposer sits next to kiln-exec, where kilnd looks for it.
exec_dir=$(dirname "$(find "$tmp/root" -name kiln-exec -perm -u+x | head -n 1)")
[ -e "$exec_dir/kiln-observe.so" ] || fail "no kiln-observe.so next to kiln-exec"
echo "installed: $(find "$tmp/root" -type f | wc -l) files"

# Only kiln_* is exported by the libraries (linker version script).
for lib in "$libdir"/libkiln*.so.0; do
	other=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ && $3 !~ /^kiln_/ && $3 != "KILN_0" { print $3 }')
	[ -z "$other" ] || fail "$(basename "$lib") exports more than kiln_*: $other"
done
echo "exports: only kiln_* in $(ls "$libdir"/libkiln*.so.0 | wc -l) libraries"

# A client built against the installed pkg-config files.
export PKG_CONFIG_SYSROOT_DIR=$tmp/root PKG_CONFIG_PATH=$libdir/pkgconfig
cflags=$(pkg-config --cflags kiln) && libs=$(pkg-config --libs kiln) || fail "pkg-config kiln"
extra=
ldd "$libdir/libkiln.so.0" | grep -q libasan && extra="-fsanitize=address,undefined"
cc $extra $cflags -o "$tmp/client" "$src/tests/install/client.c" $libs -Wl,-rpath,"$libdir" ||
	fail "cannot build a client with pkg-config kiln"
for pc in kiln-mpi kiln-cuda; do
	[ -e "$libdir/pkgconfig/$pc.pc" ] || continue
	pkg-config --cflags --libs "$pc" >/dev/null || fail "pkg-config $pc"
	echo "pkg-config $pc: ok"
done

# ... and run against the installed kilnd.
sock=$tmp/run/kilnd.sock
"$bindir/kilnd" --socket "$sock" --cache-dir "$tmp/cache" --log-file "$tmp/kilnd.log" &
kilnd_pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
out=$(LD_LIBRARY_PATH=$libdir "$tmp/client" "$sock" 2>&1) || { cat "$tmp/kilnd.log"; fail "client: $out"; }
[ "$out" = "answer 42" ] || fail "client printed: $out"
# The installed daemon records builds by observation, not dependency files.
st=$(LD_LIBRARY_PATH=$libdir "$bindir/kiln" --socket "$sock" status -v) || fail "kiln status -v"
grep -q "inputs recorded by observation" <<<"$st" || fail "the installed kilnd does not observe: $st"
grep -q "^not observed: *0" <<<"$st" || fail "a build ran a program kiln could not observe: $st"
LD_LIBRARY_PATH=$libdir "$bindir/kiln" --socket "$sock" stop >/dev/null || fail "kiln stop"
wait "$kilnd_pid"
kilnd_pid=
echo "client built with pkg-config kiln: $out"
