#!/bin/sh
# Runs a client program (the Fortran test, or the Fortran demo) against a real
# kilnd started in a temporary directory, then stops the daemon and removes the
# directory whatever happened. Exit status: the program's, or 1 when kilnd did
# not start or did not stop cleanly. Set KILN_TEST_KEEP=1 to keep the directory.
#
# Usage: KILN_TEST_KILND=... KILN_TEST_CLI=... run.sh PROGRAM [ARG]...
set -u
# The program must talk to this test's daemon only.
unset KILN_AUTOSPAWN

if [ $# -lt 1 ] || [ -z "${KILN_TEST_KILND:-}" ] || [ -z "${KILN_TEST_CLI:-}" ]; then
	echo "usage: KILN_TEST_KILND=kilnd KILN_TEST_CLI=kiln $0 PROGRAM [ARG]..." >&2
	exit 2
fi

# A short path: a Unix socket path has at most 107 bytes.
dir=$(mktemp -d /tmp/kiln-f90.XXXXXX) || exit 1
sock=$dir/kilnd.sock
cache=$dir/cache
log=$dir/kilnd.log
out=$dir/kilnd.out
pid=

# True while the child pid exists and has not yet exited (a zombie has).
running() {
	state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
	[ -n "$state" ] && [ "$state" != Z ]
}

show_daemon() {
	echo "--- kilnd output ($out):" >&2
	tail -n 40 "$out" >&2 2>/dev/null
	echo "--- kilnd log ($log):" >&2
	tail -n 40 "$log" >&2 2>/dev/null
	echo "---" >&2
}

cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	fi
	# Anything else started in the directory (a kilnd that the program
	# autospawned and did not stop, its compilers) goes too.
	for p in /proc/[0-9]*; do
		case $(tr '\0' ' ' 2>/dev/null <"$p/cmdline") in
		*"$dir/"*) kill -KILL "${p#/proc/}" 2>/dev/null ;;
		esac
	done
	if [ "${KILN_TEST_KEEP:-0}" = 1 ]; then
		echo "kept $dir" >&2
	else
		rm -rf "$dir"
	fi
}
# Signals end the script through its EXIT trap, so that nothing is left.
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 141' PIPE
trap 'exit 143' TERM

"$KILN_TEST_KILND" --socket "$sock" --cache-dir "$cache" --log-file "$log" \
	--log-level debug </dev/null >"$out" 2>&1 &
pid=$!

# Wait up to 30 s (sanitizer builds start slowly) for the daemon to answer.
tries=0
until "$KILN_TEST_CLI" --socket "$sock" --cache-dir "$cache" status >/dev/null 2>&1; do
	if ! running "$pid"; then
		wait "$pid"
		echo "run.sh: kilnd exited with status $? before its socket answered" >&2
		show_daemon
		exit 1
	fi
	tries=$((tries + 1))
	if [ "$tries" -ge 300 ]; then
		echo "run.sh: kilnd did not answer at $sock within 30 s" >&2
		show_daemon
		exit 1
	fi
	sleep 0.1
done

KILN_SOCKET=$sock "$@"
rc=$?
if [ "$rc" -ne 0 ]; then
	echo "run.sh: $1 exited with status $rc" >&2
	show_daemon
fi

# A clean stop is part of the test: SIGTERM, exit status 0, socket removed.
kill -TERM "$pid"
tries=0
while running "$pid"; do
	tries=$((tries + 1))
	if [ "$tries" -ge 300 ]; then
		echo "run.sh: kilnd still runs 30 s after SIGTERM; killing it" >&2
		kill -KILL "$pid"
		break
	fi
	sleep 0.1
done
wait "$pid"
krc=$?
pid=
if [ "$krc" -ne 0 ] || [ -e "$sock" ]; then
	echo "run.sh: kilnd did not stop cleanly (status $krc)" >&2
	show_daemon
	[ "$rc" -eq 0 ] && rc=1
fi
exit "$rc"
