#!/usr/bin/env bash
# End-to-end test of systemd/slurm/ under a real Slurm: munged, slurmctld
# and slurmd from Debian (slurm-wlm, munge) on this host, every file of
# theirs in a temporary directory, then systemd/slurm/example.sbatch with 4
# tasks (and a small job twice):
#   1. as root, with kiln-prologue.sh/kiln-epilogue.sh in the batch script
#      (one kilnd step per node);
#   2. two overlapping jobs of root on the node, with the prologue: the
#      second's kilnd finds the cache served by the first's and gets a cache
#      of its own (kilnd exits 3 there); both daemons answer;
#   3. as "nobody" (as root where nobody cannot run the build tree), with
#      kiln-node-prolog.sh, kiln-node-epilog.sh and kiln-task-prolog.sh as
#      the cluster's Prolog=, Epilog= and TaskProlog= (PrologFlags=Alloc),
#      kilnd running as the job's user.
# Each time a step of one task per node warms its kilnd with one program
# (kiln warm), then every task asks for the same 3 programs with the kiln CLI and 3
# more through libkiln (examples/stencil_demo, loaded and run); the test
# checks that every task got every program, that each program was built
# exactly once (the epilogue's builds_started), that the epilogue printed
# its statistics and that no kilnd process and no socket are left.
#
# Needs root and slurmctld, slurmd, munged, sbatch (apt-get install
# slurm-wlm munge); exits 77 otherwise, and also, with the reason, when
# Slurm itself cannot run a trivial job here. meson passes the programs
# under test: KILN_TEST_KILND, KILN_TEST_CLI, KILN_TEST_LIBDIR (libkiln's
# directory) and KILN_TEST_DEMO (stencil_demo, optional). Bounded by
# KILN_TEST_SLURM_TIMEOUT seconds (default 150); KILN_TEST_KEEP=1 keeps the
# temporary directory.

set -u
export LC_ALL=C

# The whole test is bounded: it runs again under timeout(1), whose SIGTERM
# the trap below turns into a failure with a full clean-up. Every command
# in it is bounded too, so that the trap runs promptly.
limit=${KILN_TEST_SLURM_TIMEOUT:-150}
if [ -z "${KILN_TEST_SLURM_INNER:-}" ]; then
	KILN_TEST_SLURM_INNER=1 exec timeout -k 30 "$limit" bash "${BASH_SOURCE[0]}" "$@"
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
scripts=$(cd "$here/../../systemd/slurm" && pwd)
started=$SECONDS

skip() {
	echo "SKIP: $*"
	exit 77
}

[ "$(id -u)" = 0 ] || skip "needs root: it starts munged, slurmctld and slurmd"
for prog in munged slurmctld slurmd sbatch srun sinfo squeue scontrol scancel setpriv timeout; do
	command -v "$prog" >/dev/null ||
		skip "$prog is not installed (Debian: apt-get install slurm-wlm munge)"
done
for var in KILN_TEST_KILND KILN_TEST_CLI; do
	if [ ! -x "${!var:-}" ]; then
		echo "FAIL: $var does not name a program (run this through meson test)"
		exit 1
	fi
done

T=$(mktemp -d /tmp/kiln-slurm-test.XXXXXX) || exit 1
chmod 0755 "$T"
pids=()
phase=setup

# Stops everything this test started, whatever state it is in.
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	local pid p
	trap - EXIT INT TERM
	if [ -n "${SLURM_CONF:-}" ] && [ -e "$SLURM_CONF" ]; then
		for p in $(timeout 5 squeue -h -o %i 2>/dev/null); do
			timeout 5 scancel "$p" 2>/dev/null
		done
	fi
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null
	done
	[ -f "$T/munge/munged.pid" ] && kill "$(cat "$T/munge/munged.pid")" 2>/dev/null
	for _ in $(seq 50); do
		alive=0
		for pid in "${pids[@]}"; do
			kill -0 "$pid" 2>/dev/null && alive=1
		done
		[ "$alive" = 0 ] && break
		sleep 0.1
	done
	for pid in "${pids[@]}"; do
		kill -9 "$pid" 2>/dev/null
	done
	# Anything else that still names the directory: a kilnd or a
	# slurmstepd a failed run left behind.
	for p in /proc/[0-9]*; do
		pid=${p#/proc/}
		[ "$pid" = $$ ] && continue
		if tr "\\0" " " 2>/dev/null <"$p/cmdline" | grep -qF "$T"; then
			kill -9 "$pid" 2>/dev/null
		fi
	done
	wait 2>/dev/null
	if [ "${KILN_TEST_KEEP:-0}" = 1 ]; then
		echo "kept $T"
	else
		rm -rf "$T"
	fi
}
trap cleanup EXIT
trap 'echo "FAIL: stopped during $phase ($((SECONDS - started)) s; limit $limit s)"; logs; exit 1' INT TERM

logs() {
	local f
	for f in "$T"/log/*; do
		[ -s "$f" ] || continue
		echo "---- ${f#"$T"/} (last 25 lines)"
		tail -n 25 "$f"
	done
}

fail() {
	echo "FAIL ($phase): $*"
	logs
	exit 1
}

set_phase() {
	phase=$1
	echo "$phase" >"$T/phase"
	echo "== $phase ($((SECONDS - started)) s)"
}

# The job output files are written by the job's user.
mkdir -p "$T/munge" "$T/munge-key" "$T/spool" "$T/state" "$T/log" "$T/out" "$T/run" "$T/bin"
chmod 0755 "$T/munge" "$T/bin" "$T/log"
chmod 0700 "$T/munge-key" "$T/state"
chmod 1777 "$T/out" "$T/run"

# ---------------------------------------------------------------- munge
set_phase munge
if command -v mungekey >/dev/null; then
	mungekey --create --keyfile="$T/munge-key/munge.key" >/dev/null 2>&1
elif command -v create-munge-key >/dev/null; then
	create-munge-key -f -k "$T/munge-key/munge.key" >/dev/null 2>&1
fi
[ -s "$T/munge-key/munge.key" ] ||
	dd if=/dev/urandom of="$T/munge-key/munge.key" bs=1024 count=1 2>/dev/null
chmod 0400 "$T/munge-key/munge.key"
timeout 20 munged --force --socket="$T/munge/munge.sock" --key-file="$T/munge-key/munge.key" \
	--log-file="$T/log/munged.log" --pid-file="$T/munge/munged.pid" \
	--seed-file="$T/munge/munged.seed" >"$T/log/munged.out" 2>&1 ||
	skip "munged does not start here: $(tail -n 3 "$T/log/munged.out" "$T/log/munged.log" 2>/dev/null | tr '\n' ' ')"

# ---------------------------------------------------------------- slurm
set_phase slurm
node=$(hostname -s)
[ -n "$node" ] || node=localhost
# Two free TCP ports, so that a Slurm already running here is not disturbed.
port_free() {
	local hex
	hex=$(printf ':%04X ' "$1")
	! grep -q "$hex" /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
for _ in $(seq 50); do
	ctld_port=$((20000 + RANDOM % 20000))
	slurmd_port=$((ctld_port + 1))
	port_free "$ctld_port" && port_free "$slurmd_port" && break
done

# Prolog, Epilog and TaskProlog run kiln's node scripts only while the
# node-prolog phase has switched them on; TaskProlog prints nothing without
# a daemon of the node prolog anyway.
cat >"$T/kiln-node.conf" <<EOF
KILN_KILND=$KILN_TEST_KILND
KILN_CLI=$KILN_TEST_CLI
KILN_NODE_RUNDIR=$T/run/kiln-{uid}
KILN_NODE_CACHE_DIR={rundir}/node-cache
KILN_NODE_STATE_DIR=$T/kiln-state
KILN_NODE_START_TIMEOUT=30
EOF
chmod 0644 "$T/kiln-node.conf"
for hook in prolog epilog; do
	cat >"$T/bin/$hook" <<EOF
#!/bin/bash
[ -e "$T/node-prolog.on" ] || exit 0
export KILN_SLURM_CONF=$T/kiln-node.conf
exec bash "$scripts/kiln-node-$hook.sh" >>"$T/log/node-$hook.log" 2>&1
EOF
done
cat >"$T/bin/task-prolog" <<EOF
#!/bin/bash
export KILN_SLURM_CONF=$T/kiln-node.conf
exec bash "$scripts/kiln-task-prolog.sh"
EOF
chmod 0755 "$T/bin/"*

# CPUs=4 on any machine (config_overrides): 4 tasks fit on one node.
cat >"$T/slurm.conf" <<EOF
ClusterName=kilntest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$T/munge/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
MpiDefault=none
SwitchType=switch/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MailProg=/bin/true
ReturnToService=2
SlurmdParameters=config_overrides
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=600
PrologFlags=Alloc
Prolog=$T/bin/prolog
Epilog=$T/bin/epilog
TaskProlog=$T/bin/task-prolog
PrologEpilogTimeout=60
NodeName=$node NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
chmod 0644 "$T/slurm.conf"
export SLURM_CONF=$T/slurm.conf

slurmctld -D -f "$SLURM_CONF" >"$T/log/slurmctld.out" 2>&1 &
pids+=("$!")
slurmd -D -N "$node" -f "$SLURM_CONF" >"$T/log/slurmd.out" 2>&1 &
pids+=("$!")

# The node is idle once slurmd has registered with slurmctld.
state=
for _ in $(seq 100); do
	for pid in "${pids[@]}"; do
		kill -0 "$pid" 2>/dev/null ||
			skip "Slurm does not run here: $(grep -hE 'error|fatal' "$T"/log/slurm*.out "$T"/log/slurm*.log 2>/dev/null | grep -v pmix | tail -n 3 | tr '\n' ' ')"
	done
	state=$(timeout 5 sinfo -h -N -n "$node" -o %T 2>/dev/null)
	[ "$state" = idle ] && break
	sleep 0.3
done
[ "$state" = idle ] || skip "slurmd did not come up here (node state '$state'): $(grep -hE 'error|fatal' "$T"/log/slurmd.log 2>/dev/null | grep -v pmix | tail -n 3 | tr '\n' ' ')"

# A trivial job: if Slurm cannot run one here, the fault is not kiln's.
set_phase probe
probe=$(cd "$T/out" && timeout 30 srun -N1 -n2 --overlap echo probe 2>&1)
[ "$(printf '%s\n' "$probe" | grep -c '^probe$')" = 2 ] ||
	skip "Slurm cannot run a job here: $(printf '%s' "$probe" | tail -n 3 | tr '\n' ' ') $(grep -hE 'error' "$T"/log/slurmd.log | grep -v pmix | tail -n 2 | tr '\n' ' ')"

# ---------------------------------------------------------------- jobs
kilnd_dir=$(dirname "$KILN_TEST_KILND")
cli_dir=$(dirname "$KILN_TEST_CLI")
job_path=$kilnd_dir:$cli_dir:/usr/local/bin:/usr/bin:/bin
programs=(axpy dot scale)
stencils=()
if [ -n "${KILN_TEST_DEMO:-}" ] && [ -x "$KILN_TEST_DEMO" ]; then
	stencils=(laplace_2d diffusion_x diffusion_y)
fi
ntasks=4
# The batch script's per-node warm step (srun --ntasks-per-node=1 kiln warm)
# builds one program more on each node.
warmed=1
nprograms=$((${#programs[@]} + ${#stencils[@]} + warmed))

# Waits until job $1 has ended; fails unless it COMPLETED.
wait_done() {
	local job=$1 name=$2 jstate deadline=$((SECONDS + 90))
	while :; do
		jstate=$(timeout 5 scontrol show job -o "$job" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
		case $jstate in
		COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE | PREEMPTED)
			break ;;
		esac
		[ "$SECONDS" -lt "$deadline" ] || fail "job $job ($name) still $jstate after 90 s"
		sleep 0.3
	done
	if [ "$jstate" != COMPLETED ]; then
		echo "---- $name.out"
		cat "$T/out/$name.out"
		echo "---- $name.err"
		cat "$T/out/$name.err"
		fail "job $job ($name) ended $jstate"
	fi
}

# Submits example.sbatch as user $1 with output in $T/out/$2.out and waits
# for it; sets job.
run_job() {
	local user=$1 name=$2 out
	out=$(cd "$T/out" && timeout 30 setpriv --reuid="$user" --regid="$(id -g "$user")" --clear-groups \
		env -i PATH="$job_path" SLURM_CONF="$SLURM_CONF" HOME="$T/out" \
		LD_LIBRARY_PATH="${KILN_TEST_LIBDIR:-}" \
		KILN_SLURM_SCRIPTS="$scripts" KILN_SLURM_RUNDIR="$T/run/kiln-$(id -u "$user")" \
		KILN_EXAMPLE_DEMO="${stencils:+$KILN_TEST_DEMO}" KILN_START_TIMEOUT=30 \
		sbatch --parsable -N1 -n "$ntasks" -J "$name" -o "$T/out/$name.out" -e "$T/out/$name.err" \
		-D "$T/out" --time=5 "$scripts/example.sbatch" 2>&1) ||
		fail "sbatch: $out"
	job=${out%%;*}
	wait_done "$job" "$name"
	echo "job $job ($name, user $user): COMPLETED"
}

# Checks the output of example.sbatch in $1: every task got every program,
# each program was built once, the epilogue printed its statistics.
check_output() {
	local f=$1 r p n total
	grep -q '^kiln-task .*failed' "$f" && fail "a task failed: $(grep '^kiln-task .*failed' "$f" | head -n 3)"
	for ((r = 0; r < ntasks; r++)); do
		for p in "${programs[@]}"; do
			grep -q "^kiln-task rank=$r program=$p how=[a-z]* path=/" "$f" ||
				fail "task $r did not get $p through the kiln CLI"
		done
		for p in "${stencils[@]}"; do
			grep -qE "^rank $r +$p +(built|cached) .* checksum [0-9.]+$" "$f" ||
				fail "task $r did not get, load and run $p through libkiln"
		done
	done
	# Exactly one task saw its request build each program; the others joined
	# that build or found it cached.
	for p in "${programs[@]}"; do
		n=$(grep -c "^kiln-task rank=[0-9]* program=$p how=built " "$f")
		[ "$n" = 1 ] || fail "$p was built by $n tasks, not 1"
	done
	n=$(grep -c "^kiln-warm node=[^ ]* warmed 1 of 1 programs .*: 1 built, 0 cached, 0 failed$" "$f")
	[ "$n" = 1 ] || fail "the per-node warm step did not warm the node once: $(grep '^kiln-warm' "$f")"
	[ "$(grep -c '^kiln-stats node=' "$f")" = 1 ] || fail "no per-node statistics from the epilogue"
	total=$(grep '^kiln-stats total ' "$f")
	[ -n "$total" ] || fail "no kiln-stats total line from the epilogue"
	echo "$total"
	case " $total " in
	*" builds_started=$nprograms "*) ;;
	*) fail "expected builds_started=$nprograms (one build per program): $total" ;;
	esac
	case " $total " in
	*" builds_ok=$nprograms builds_failed=0 "*) ;;
	*) fail "expected $nprograms good builds: $total" ;;
	esac
	# One variant per program, and no report of more.
	case " $total " in
	*" variants=0 "*) ;;
	*) fail "expected variants=0 in the summary: $total" ;;
	esac
	grep -q 'more than one variant' "$f" && fail "a variant report for one variant per program"
	grep -q '^kiln-env PYTHONHASHSEED=0$' "$f" ||
		fail "the prologue did not export PYTHONHASHSEED=0: $(grep '^kiln-env' "$f")"
}

# No kilnd of the test is running (zombies aside: nothing reaps them in some
# containers), and no socket is left under $T/run.
check_nothing_left() {
	local p pid state left=
	for p in /proc/[0-9]*; do
		pid=${p#/proc/}
		[ "$(basename "$(readlink "$p/exe" 2>/dev/null)")" = kilnd ] || continue
		state=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "$p/status" 2>/dev/null)
		[ "$state" = Z ] && continue
		tr "\\0" " " 2>/dev/null <"$p/cmdline" | grep -qF "$T/run/" && left="$left $pid"
	done
	[ -z "$left" ] || fail "kilnd still running after the job:$left"
	left=$(find "$T/run" -type s 2>/dev/null)
	[ -z "$left" ] || fail "sockets left behind: $left"
	left=$(find "$T/run" -maxdepth 2 -name 'job-*' 2>/dev/null)
	[ -z "$left" ] || fail "job directories left behind: $left"
}

# 1. The batch script starts and stops the daemons (kiln-prologue.sh).
set_phase "job-step"
run_job root job-step
check_output "$T/out/job-step.out"
grep -q '^kiln: all 1 daemons stopped, no socket left$' "$T/out/job-step.out" ||
	fail "the epilogue did not report a clean stop"
grep -q '^kiln: kilnd on .* (pid [0-9]*), cache '"$T/run/kiln-0/cache"'$' "$T/out/job-step.out" ||
	fail "the prologue did not report the daemon"
check_nothing_left
[ -s "$T/run/kiln-0/cache/kilnd.log" ] || fail "no kilnd log in the node-local cache"

# 2. Two overlapping jobs of one user on one node (a shared node): the
# second job's kilnd finds the shared cache served by the first job's on
# another socket (kilnd exits 3) and gets a cache of its own; both jobs'
# daemons answer, and both are stopped at their job's end.
set_phase "two-jobs"
cat >"$T/out/hold.sbatch" <<'HOLD'
#!/bin/bash
source "$KILN_SLURM_SCRIPTS/kiln-prologue.sh" || exit 1
kiln --socket "$KILN_SOCKET" status >/dev/null && echo "kiln-hold status ok"
for _ in $(seq 600); do
	[ -e "$KILN_HOLD_RELEASE" ] && break
	sleep 0.1
done
source "$KILN_SLURM_SCRIPTS/kiln-epilogue.sh"
HOLD
# Submits hold.sbatch as root, released by the file $2; prints the job id.
submit_hold() {
	local name=$1 release=$2 out
	out=$(cd "$T/out" && timeout 30 env -i PATH="$job_path" SLURM_CONF="$SLURM_CONF" \
		HOME="$T/out" LD_LIBRARY_PATH="${KILN_TEST_LIBDIR:-}" KILN_SLURM_SCRIPTS="$scripts" \
		KILN_SLURM_RUNDIR="$T/run/kiln-0" KILN_START_TIMEOUT=30 KILN_HOLD_RELEASE="$release" \
		sbatch --parsable -N1 -n 1 -J "$name" -o "$T/out/$name.out" -e "$T/out/$name.err" \
		-D "$T/out" --time=5 "$T/out/hold.sbatch" 2>&1) || fail "sbatch: $out"
	echo "${out%%;*}"
}
job_a=$(submit_hold hold-a "$T/out/release-a")
for _ in $(seq 300); do
	grep -q '^kiln-hold status ok$' "$T/out/hold-a.out" 2>/dev/null && break
	sleep 0.1
done
grep -q '^kiln-hold status ok$' "$T/out/hold-a.out" 2>/dev/null ||
	fail "the first job's kilnd did not answer: $(tail -n 5 "$T/out/hold-a.out" "$T/out/hold-a.err" 2>/dev/null)"
touch "$T/out/release-b"
job_b=$(submit_hold hold-b "$T/out/release-b")
wait_done "$job_b" hold-b
grep -q '^kiln-hold status ok$' "$T/out/hold-b.out" ||
	fail "the second job's kilnd did not answer: $(tail -n 5 "$T/out/hold-b.out")"
cat "$T/out/hold-b.out" "$T/out/hold-b.err" 2>/dev/null |
	grep -q "in use by another kilnd; this job uses $T/run/kiln-0/cache-job-$job_b" ||
	fail "the second job did not take a cache of its own: $(tail -n 5 "$T/out/hold-b.err")"
[ ! -e "$T/run/kiln-0/cache-job-$job_b" ] || fail "the second job's own cache was left behind"
touch "$T/out/release-a"
wait_done "$job_a" hold-a
check_nothing_left
echo "two jobs of one user on one node: jobs $job_a and $job_b, both daemons answered"

# 3. The cluster's node prolog starts kilnd as the job's user.
set_phase "node-prolog"
# As "nobody" where that user can run the programs under test (not when the
# build tree is in a private home directory, say).
user=root
if id -u nobody >/dev/null 2>&1 &&
	setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups \
		test -x "$KILN_TEST_KILND" -a -x "$KILN_TEST_CLI" -a -r "$scripts/example.sbatch" \
		-a \( -z "${stencils[*]}" -o -x "${KILN_TEST_DEMO:-}" \) 2>/dev/null; then
	user=nobody
else
	echo "note: nobody cannot run the programs under test; the node-prolog job runs as root"
fi
uid=$(id -u "$user")
touch "$T/node-prolog.on"
run_job "$user" job-node
check_output "$T/out/job-node.out"
grep -q "^kiln: kilnd on .* (started by the node prolog), cache $T/run/kiln-$uid/node-cache\$" "$T/out/job-node.out" ||
	fail "the batch script did not find the node prolog's daemon through KILN_SOCKET"
grep -q "kiln-slurm: job $job: kilnd (pid [0-9]*) for $user on $T/run/kiln-$uid/job-$job/kilnd.sock" \
	"$T/log/node-prolog.log" || fail "the node prolog did not start kilnd"
[ "$(stat -c %U "$T/run/kiln-$uid/node-cache/index.db")" = "$user" ] ||
	fail "kilnd did not run as $user"
# The job is COMPLETED once the epilog has run; wait for its log anyway.
for _ in $(seq 100); do
	grep -q "kiln-slurm: job $job: kilnd (pid [0-9]*) stopped" "$T/log/node-epilog.log" 2>/dev/null && break
	sleep 0.1
done
grep -q "kiln-slurm: kiln-stats job=$job node=$node pid=[0-9]* builds_started=$nprograms " \
	"$T/log/node-epilog.log" || fail "the node epilog did not log the statistics"
grep -q "kiln-slurm: job $job: kilnd (pid [0-9]*) stopped" "$T/log/node-epilog.log" ||
	fail "the node epilog did not stop kilnd"
[ ! -e "$T/kiln-state/job-$job" ] || fail "the node epilog left its state file"
check_nothing_left

set_phase "done"
echo "PASS: both variants, $ntasks tasks x $nprograms programs, $((SECONDS - started)) s"
exit 0
