#!/usr/bin/env bash
# bench/load.sh: the bounded load test (bench/load) against a fresh kilnd
# whose socket, cache and log live in a temporary directory. Writes the
# table to bench/results/load.txt and the figures to load.json beside it.
# meson test runs it as it_load (--test, a small fleet).
set -eu

usage() {
	cat <<'EOF'
Usage: bench/load.sh [OPTION]... [-- LOAD-OPTION...]
Starts kilnd in a temporary directory, runs bench/load against it (by default
256 clients x 1000 requests), stops kilnd, and writes the report.

  --build-dir DIR   build to use (default build-rel; configured as a release
                    build without tests when missing, then built with ninja)
  --kilnd PATH      use this kilnd (and the kiln-exec beside it), no build
  --load PATH       use this load executable, no build
  --jobs N          kilnd --jobs (default: online CPUs)
  --kilnd-opt OPT   one more kilnd option, e.g. --kilnd-opt --max-pending=64
                    (repeatable)
  --out FILE        the report (default bench/results/load.txt; "-": none,
                    the JSON goes to FILE with .json for .txt)
  --test            meson test mode: exit 77, saying why, when something
                    optional is missing; $KILN_TEST_KILND names kilnd
  --keep            keep the temporary directory
  -h, --help        show this help

Everything after -- goes to bench/load (see bench/load --help).
Exit status: bench/load's (0 pass, 1 fail, 2 could not run), 77 skipped.
EOF
}

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-rel
out=$root/bench/results/load.txt
kilnd=
load=
jobs=$(nproc 2>/dev/null || echo 2)
keep=0
test_mode=0
kilnd_opts=()

while [ $# -gt 0 ]; do
	case $1 in
	--build-dir) build=$2; shift 2 ;;
	--kilnd) kilnd=$2; shift 2 ;;
	--load) load=$2; shift 2 ;;
	--jobs) jobs=$2; shift 2 ;;
	--kilnd-opt) kilnd_opts+=("$2"); shift 2 ;;
	--out) out=$2; shift 2 ;;
	--test) test_mode=1; shift ;;
	--keep) keep=1; shift ;;
	--) shift; break ;;
	-h|--help) usage; exit 0 ;;
	*) echo "load.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
	esac
done

skip() {
	echo "load.sh: SKIP: $*"
	exit 77
}

die() {
	echo "load.sh: $*" >&2
	exit 2
}

if [ $test_mode = 1 ] && [ -z "$kilnd" ]; then
	kilnd=${KILN_TEST_KILND:-}
	[ -n "$kilnd" ] || skip "KILN_TEST_KILND is not set (run through meson test)"
fi
# The one toolchain the test uses; without a C compiler nothing can build.
cc=$(command -v cc || true)
if [ -z "$cc" ]; then
	[ $test_mode = 1 ] && skip "no C compiler (cc) on PATH"
	die "no C compiler (cc) on PATH"
fi

if [ -z "$kilnd" ] || [ -z "$load" ]; then
	if [ ! -f "$build/build.ninja" ]; then
		echo "load.sh: configuring $build (release, no tests)" >&2
		meson setup "$build" --buildtype release -Dtests=disabled -Dmpi=disabled >&2
	fi
	ninja -C "$build" daemon/kilnd daemon/kiln-exec bench/load >&2
	[ -n "$kilnd" ] || kilnd=$build/daemon/kilnd
	[ -n "$load" ] || load=$build/bench/load
fi
[ -x "$kilnd" ] || die "no kilnd at $kilnd"
[ -x "$load" ] || die "no load executable at $load"

work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-load.XXXXXX")
sock=$work/kilnd.sock
pid=
kilnd_status=

# Stops kilnd with SIGTERM and keeps its exit status (SIGKILL after 30 s).
stop_kilnd() {
	[ -n "$pid" ] || return 0
	kill -TERM "$pid" 2>/dev/null || true
	i=0
	while kill -0 "$pid" 2>/dev/null && [ $i -lt 300 ]; do
		# a zombie still answers kill -0: wait reaps it below
		[ "$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' "/proc/$pid/status" 2>/dev/null)" = Z ] && break
		sleep 0.1
		i=$((i + 1))
	done
	if [ $i -ge 300 ]; then
		echo "load.sh: kilnd $pid did not stop on SIGTERM within 30 s; SIGKILL" >&2
		kill -KILL "$pid" 2>/dev/null || true
	fi
	kilnd_status=0
	wait "$pid" || kilnd_status=$?
	pid=
}

# shellcheck disable=SC2317 # called by the trap
cleanup() {
	stop_kilnd
	if [ "$keep" = 1 ]; then
		echo "load.sh: kept $work" >&2
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 256 connections, their descriptors and the artifacts' in flight.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# Under AddressSanitizer the quarantine keeps freed memory, so RSS says
# nothing about leaks there: report it, do not check it. LeakSanitizer
# checks kilnd's exit instead.
rss_opt=
if grep -q __asan_init "$kilnd" 2>/dev/null; then
	rss_opt=--rss-limit=0
	echo "load.sh: kilnd is built with AddressSanitizer: RSS reported, not checked" >&2
fi

# In the foreground, so that its exit status and sanitizer reports count.
"$kilnd" --socket "$sock" --cache-dir "$work/cache" --log-file "$work/kilnd.log" \
	--jobs "$jobs" --toolchain "cc=$cc" "${kilnd_opts[@]}" </dev/null >"$work/kilnd.out" 2>&1 &
pid=$!
echo "load.sh: kilnd $pid on $sock, --jobs $jobs${kilnd_opts[*]:+ ${kilnd_opts[*]}}" >&2

rc=0
"$load" --json "$work/load.json" --pid "$pid" $rss_opt "$@" "$sock" >"$work/load.txt" || rc=$?
stop_kilnd
cat "$work/load.txt"
if [ "$kilnd_status" = 0 ]; then
	echo "kilnd exited with status 0 after SIGTERM"
else
	echo "kilnd exited with status $kilnd_status after SIGTERM (0 expected): FAIL"
	[ $rc -eq 0 ] && rc=1
fi
if grep -q -E 'runtime error:|Sanitizer' "$work/kilnd.out" 2>/dev/null; then
	echo "kilnd's output has sanitizer reports: FAIL"
	[ $rc -eq 0 ] && rc=1
fi
if [ $rc -ne 0 ]; then
	echo "load.sh: exit $rc; kilnd's output and the end of its log:" >&2
	tail -n 60 "$work/kilnd.out" >&2 2>/dev/null || true
	tail -n 30 "$work/kilnd.log" >&2 2>/dev/null || true
fi

if [ "$out" != "-" ] && [ $test_mode = 0 ]; then
	mkdir -p "$(dirname "$out")"
	buildtype=unknown
	if [ -f "$(dirname "$kilnd")/../meson-info/intro-buildoptions.json" ]; then
		buildtype=$(python3 -c 'import json,sys
print(next((o["value"] for o in json.load(open(sys.argv[1])) if o["name"] == "buildtype"), "unknown"))' \
			"$(dirname "$kilnd")/../meson-info/intro-buildoptions.json" 2>/dev/null || echo unknown)
	fi
	{
		echo "# bench/load.sh: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores," \
			"$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
		echo "# kilnd $kilnd ($buildtype), --jobs $jobs${kilnd_opts[*]:+ ${kilnd_opts[*]}}, toolchain cc=$cc;" \
			"load options: ${*:-(defaults)}"
		cat "$work/load.txt"
		echo "kilnd exited with status $kilnd_status after SIGTERM"
	} >"$out"
	cp "$work/load.json" "${out%.txt}.json" 2>/dev/null || true
	echo "load.sh: wrote $out" >&2
fi
exit $rc
