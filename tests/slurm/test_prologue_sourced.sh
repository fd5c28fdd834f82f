#!/usr/bin/env bash
# kiln-prologue.sh and kiln-job.sh must be sourced: run with bash (or fed to
# bash on stdin), or used from another shell, they start nothing (no srun),
# exit non-zero and say why; sourced from bash they still start a kilnd and
# export KILN_SOCKET. No Slurm needed: a stand-in srun on PATH records each
# call and runs the step's command on this host, as a one-node job would,
# with the real kilnd and kiln of this build (KILN_TEST_KILND, KILN_TEST_CLI).
set -u

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
scripts=$src/systemd/slurm
kilnd=${KILN_TEST_KILND:?KILN_TEST_KILND is not set (run through meson test)}
cli=${KILN_TEST_CLI:?KILN_TEST_CLI is not set}
command -v dash >/dev/null || { echo "SKIP: no dash (Debian's sh) to run the prologue with"; exit 77; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kiln-prologue-test.XXXXXX")
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	# A kilnd a failed case left: stop it through its socket.
	"$cli" --socket "$tmp/run/job-4242/kilnd.sock" stop >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$tmp/bin"
cat >"$tmp/bin/srun" <<EOF
#!/bin/bash
opts=
while [ "\$#" -gt 0 ] && [ "\${1#-}" != "\$1" ]; do opts="\$opts \$1"; shift; done
echo "srun\$opts \$1 ..." >>"$tmp/srun.calls"
exec "\$@"
EOF
chmod +x "$tmp/bin/srun"

export PATH="$tmp/bin:$PATH" KILN_KILND="$kilnd" KILN_CLI="$cli"
export SLURM_JOB_ID=4242 SLURM_JOB_NUM_NODES=1 SLURMD_NODENAME=testnode
export KILN_SLURM_RUNDIR="$tmp/run" KILN_START_TIMEOUT=60
unset KILN_SOCKET KILN_CACHE_DIR KILN_SLURM_NODE_DAEMON KILN_SLURM_MODE

fail=0
failed() { echo "FAIL: $*"; fail=1; }

# refused NAME WANT CMD...: CMD exits non-zero, says WANT, calls no srun and
# exports nothing (it prints KILN_SOCKET=... after a source that went on).
refused() {
	local name=$1 want=$2 out rc
	shift 2
	rm -f "$tmp/srun.calls"
	# Into a file, not $(...): a kilnd started anyway would hold the pipe.
	"$@" >"$tmp/out" 2>&1 </dev/null
	rc=$?
	out=$(cat "$tmp/out")
	echo "$name: exit $rc: $out"
	[ "$rc" -ne 0 ] || failed "$name: exit status 0"
	grep -qF -- "$want" <<<"$out" || failed "$name: no '$want' in its output"
	[ ! -e "$tmp/srun.calls" ] || failed "$name: srun was called: $(cat "$tmp/srun.calls")"
	! grep -q '^KILN_SOCKET=' <<<"$out" || failed "$name: went on after the refusal"
	[ ! -e "$tmp/run" ] || failed "$name: made $tmp/run"
	# What a start that went on left: its kilnd, stopped here.
	"$cli" --socket "$tmp/run/job-4242/kilnd.sock" stop >/dev/null 2>&1
	rm -rf "$tmp/run"
}

cd "$tmp" || exit 1
refused "bash kiln-prologue.sh" "must be sourced, not run" bash "$scripts/kiln-prologue.sh"
refused "bash <kiln-prologue.sh" "must be sourced, not run" bash -c "bash <'$scripts/kiln-prologue.sh'"
refused "sh kiln-prologue.sh" "needs bash" dash "$scripts/kiln-prologue.sh"
refused "sh: . kiln-prologue.sh" "needs bash" \
	dash -c ". '$scripts/kiln-prologue.sh' || exit \$?; echo KILN_SOCKET=\$KILN_SOCKET"
refused "bash kiln-job.sh" "must be sourced, not run" bash "$src/scripts/slurm/kiln-job.sh"

# Sourced from bash it works: one kilnd, KILN_SOCKET exported, stopped by
# the epilogue.
rm -f "$tmp/srun.calls"
bash -c "source '$scripts/kiln-prologue.sh' || exit 1
	echo KILN_SOCKET=\$KILN_SOCKET
	\"\$KILN_CLI\" status >/dev/null && echo status-answers
	source '$scripts/kiln-epilogue.sh'" >"$tmp/out" 2>&1 </dev/null
rc=$?
out=$(cat "$tmp/out")
echo "source kiln-prologue.sh: exit $rc: $out"
[ "$rc" -eq 0 ] || failed "sourced: exit status $rc"
grep -qx "KILN_SOCKET=$tmp/run/job-4242/kilnd.sock" <<<"$out" || failed "sourced: KILN_SOCKET not exported"
grep -qx "status-answers" <<<"$out" || failed "sourced: no kilnd answered on KILN_SOCKET"
grep -q "all 1 daemons stopped" <<<"$out" || failed "sourced: the epilogue did not stop the daemon"

# kiln-job.sh sources the prologue from a sourced file: still allowed.
rm -rf "$tmp/run"
KILN_SOCKET="$tmp/run/job-4242/kilnd.sock" KILN_CACHE_DIR="$tmp/run/cache" \
	bash -c "source '$src/scripts/slurm/kiln-job.sh' || exit 1
	kiln_job_start || exit 1
	\"\$KILN_CLI\" status >/dev/null && echo status-answers
	kiln_job_stop" >"$tmp/out" 2>&1 </dev/null
rc=$?
out=$(cat "$tmp/out")
echo "source kiln-job.sh: exit $rc: $out"
[ "$rc" -eq 0 ] || failed "kiln-job.sh sourced: exit status $rc"
grep -qx "status-answers" <<<"$out" || failed "kiln-job.sh sourced: no kilnd answered"

[ "$fail" = 0 ] && echo "PASS"
exit "$fail"
