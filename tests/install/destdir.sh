# shellcheck shell=bash disable=SC2154 # build: the sourcing script's
# Sourced by the install tests: a temporary directory removed at exit (with
# the kilnd of $kilnd_pid, if one was started), fail(), and the build
# installed into $tmp/root with meson install --destdir.
# Needs: build (the build directory).
tmp=$(mktemp -d)
kilnd_pid=
cleanup() {
	[ -n "$kilnd_pid" ] && kill "$kilnd_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

meson install -C "$build" --no-rebuild --quiet --destdir "$tmp/root" >"$tmp/install.log" 2>&1 ||
	{ cat "$tmp/install.log"; fail "meson install"; }
