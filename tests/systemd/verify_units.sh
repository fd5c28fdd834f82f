#!/usr/bin/env bash
# Runs `systemd-analyze verify` on kiln's units as built (systemd/), with
# ExecStart/ExecStop pointing at the kilnd and kiln under test so that the
# executables exist. verify exits 0 even when it ignores a line it cannot
# parse, so any message at all fails the test. Needs systemd-analyze (77
# without); no running systemd.
# Usage: verify_units.sh UNIT_DIR KILND KILN
set -u
units=$1 kilnd=$2 kiln=$3
command -v systemd-analyze >/dev/null || { echo "SKIP: systemd-analyze is not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/run" && chmod 700 "$tmp/run"
for u in kilnd.service kilnd.socket kilnd@.service kilnd@.socket; do
	[ -f "$units/$u" ] || { echo "FAIL: $units/$u was not built"; exit 1; }
	name=${u/@./@alice.}
	sed -e "s|^\(Exec[A-Za-z]*=\)[^ ]*/kilnd |\1$kilnd |" \
	    -e "s|^\(Exec[A-Za-z]*=\)[^ ]*/kiln |\1$kiln |" "$units/$u" >"$tmp/$name"
done
# Root's metrics collector: its service (ExecStart at the script as built)
# and timer, as system units.
for u in kiln-node-metrics.service kiln-node-metrics.timer; do
	src=$units/$u
	[ -f "$src" ] || src=$(dirname "$0")/../../systemd/$u
	[ -f "$src" ] || { echo "FAIL: $units/$u was not built"; exit 1; }
	sed -e "s|^ExecStart=.*/kiln-node-metrics|ExecStart=/bin/true|" "$src" >"$tmp/$u"
done
fail=0
check() {
	local out
	out=$("$@" 2>&1)
	echo "\$ ${*}"
	if [ -n "$out" ]; then
		printf '%s\n' "$out"
		fail=1
	fi
}
cd "$tmp"
check env XDG_RUNTIME_DIR="$tmp/run" systemd-analyze --user verify --man=no ./kilnd.socket ./kilnd.service
check systemd-analyze verify --man=no ./kilnd@alice.socket ./kilnd@alice.service
check systemd-analyze verify --man=no ./kiln-node-metrics.timer ./kiln-node-metrics.service
# The check itself must be able to fail: a broken copy has to be reported.
sed 's/^Type=notify/Type=notifyy/' kilnd.service >broken.service
out=$(XDG_RUNTIME_DIR="$tmp/run" systemd-analyze --user verify --man=no ./broken.service 2>&1)
[ -n "$out" ] || { echo "FAIL: systemd-analyze did not notice a broken unit"; fail=1; }
[ "$fail" = 0 ] && echo "units verified"
exit "$fail"
