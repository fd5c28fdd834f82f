#!/bin/sh
# fuzz/run.sh FUZZER CORPUS SECONDS: a time-boxed libFuzzer run (meson test
# --suite fuzz in a clang build; scripts/test runs it). The fuzzer works on a
# copy of the seed corpus (with fuzz/NAME.dict when there is one), so the
# repository is not touched. A crasher is
# kept in $MESON_BUILD_ROOT/fuzz-crashes/ and printed as hex, to be added to
# fuzz/corpus/ once fixed; the test then fails.
set -u
fuzzer=$1 corpus=$2 seconds=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-fuzz.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus" "$work/out"
cp "$corpus"/* "$work/corpus/"
dict=$(dirname "$corpus")/../$(basename "$corpus").dict
set --
[ -f "$dict" ] && set -- -dict="$dict"
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
	-print_final_stats=1 -artifact_prefix="$work/out/" "$@" "$work/corpus"
rc=$?
if [ "$rc" -ne 0 ] || [ -n "$(ls "$work/out")" ]; then
	keep=${MESON_BUILD_ROOT:-.}/fuzz-crashes
	mkdir -p "$keep"
	for f in "$work/out"/*; do
		[ -e "$f" ] || continue
		cp "$f" "$keep/"
		echo "crasher $(basename "$f") (kept in $keep):"
		od -An -tx1 "$f" | head -20
	done
	[ "$rc" -ne 0 ] || rc=1
fi
exit "$rc"
