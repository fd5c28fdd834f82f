# kiln-prologue.sh: one kilnd per node for the length of a Slurm batch job.
# Source it from a bash batch script, before the job steps that use kiln:
#
#   source /usr/local/share/kiln/slurm/kiln-prologue.sh || exit 1
#   srun ./my_simulation                  # the ranks find kilnd through $KILN_SOCKET
#   source /usr/local/share/kiln/slurm/kiln-epilogue.sh
#
# It starts kilnd on every node of the allocation, returns once every one of
# them answers, and exports KILN_SOCKET and KILN_CACHE_DIR for the job steps.
# It returns 1, with the reason on stderr, when a daemon cannot be started.
# Run rather than sourced (bash kiln-prologue.sh), or sourced by a shell other
# than bash, it starts nothing and exits 2 saying so.
#
# Why a job step of its own, and not `srun ... kilnd --daemonize`: Slurm ends
# a step when its tasks have exited, and what happens to a process that
# detached itself from the step depends on the site's ProctrackType. With
# proctrack/cgroup it is killed with the step, so the daemon would be gone
# before the first rank asks for anything; with proctrack/linuxproc or pgid it
# escapes tracking and outlives the job (nothing stops it when the job is
# cancelled or runs out of time). So kilnd runs in the foreground as the task
# of a background step, `srun --overlap --ntasks-per-node=1 ... &`: it runs
# until the epilogue stops it, whatever the proctrack plugin, and Slurm still
# stops it (SIGTERM) when the job is cancelled or runs out of time first. --overlap lets the other steps use the
# same CPUs; the step asks for all the job's CPUs on each node, so that
# under task/affinity or task/cgroup the compilers kilnd runs may use all of
# them, and not one core, while they stay off the CPUs of other jobs.
#
# Settings, all optional (environment variables):
#   KILN_SLURM_RUNDIR     node-local directory for the socket and the cache
#                         (default /tmp/kiln-UID; created mode 0700)
#   KILN_SLURM_SOCKET     the socket (default RUNDIR/job-JOBID/kilnd.sock); a
#                         KILN_SOCKET inherited from the submitting shell is
#                         replaced, since it names a path on the login node
#   KILN_SLURM_CACHE_DIR  the cache (default RUNDIR/cache: it stays on the node
#                         for the user's next job). Must be node-local.
#   KILN_KILND_OPTIONS    more kilnd options, e.g. "--jobs 16 --upstream DIR"
#   KILN_START_TIMEOUT    seconds to wait for every daemon (default 60)
#   KILN_KILND, KILN_CLI  the kilnd and kiln programs (default: on PATH, else
#                         PREFIX/bin when this file is in PREFIX/share/kiln/slurm)
#   KILN_SLURM_DEFINE_ONLY=1  only define kiln_slurm_start, start nothing
#
# If a node prolog (kiln-node-prolog.sh) already runs a kilnd for this job,
# its TaskProlog has exported KILN_SOCKET and KILN_SLURM_NODE_DAEMON=1: then
# this only checks that every node's daemon answers, and the epilogue leaves
# stopping them to the node epilog.
#
# It exports PYTHONHASHSEED=0 unless the job has set PYTHONHASHSEED (any
# value; "random" keeps Python's randomization): see docs/dace.md.
#
# A second job of the same user on a node that already runs a kilnd of the
# user on the same cache directory (shared nodes) cannot open that cache:
# its daemon then uses a cache of its own, CACHE_DIR-job-JOBID, removed at
# the end of the job.

# shellcheck shell=bash disable=SC2016 # the per-node scripts expand their variables there

# Run instead of sourced (`bash kiln-prologue.sh`), it would start the
# daemons and export KILN_SOCKET into a shell that exits at once: the job's
# ranks would not find them and would each build alone, while the daemons
# idle until the job ends. So it refuses, as virtualenv's activate does, and
# starts nothing. `(return 0)` succeeds only in a sourced file (or a
# function); bash also fails it for `bash <kiln-prologue.sh`. Other shells
# are refused outright: the rest is bash, and POSIX sh cannot tell sourced
# from run (dash allows return at a script's top level).
if [ -z "${BASH_VERSION:-}" ]; then
	echo "kiln: kiln-prologue.sh needs bash: source it from a bash batch script" \
		"(#!/bin/bash; source kiln-prologue.sh)" >&2
	# shellcheck disable=SC2317 # reached where return cannot return
	return 2 2>/dev/null || exit 2
fi
if ! (return 0 2>/dev/null); then
	echo "kiln: kiln-prologue.sh must be sourced, not run: put" \
		"'source ${BASH_SOURCE[0]:-kiln-prologue.sh} || exit 1' in the batch script" \
		"(run in a shell of its own, the KILN_SOCKET it exports would never reach the" \
		"job's steps); nothing was started" >&2
	exit 2
fi

# The per-node part of the daemon step. It runs kilnd in the foreground,
# prints "kiln-ready NODE PID CACHE" once the socket answers and then waits
# for kilnd, so that the step ends when kilnd does. On failure it prints
# "kiln-failed NODE REASON" and exits 1.
_kiln_slurm_node_daemon='
node=${SLURMD_NODENAME:-$(hostname -s)}
jobdir=$(dirname "$KILN_SOCKET")
private=${KILN_CACHE_DIR%/}-job-$SLURM_JOB_ID
# What kilnd leaves when it exits: the socket lock, the job directory when
# it is the default one, and a private cache if one was needed.
cleanup() {
	rm -f "$KILN_SOCKET.lock"
	rm -rf "$private"
	[ "${jobdir##*/}" = "job-$SLURM_JOB_ID" ] && rmdir "$jobdir" 2>/dev/null
}
fail() { echo "kiln-failed $node $*"; echo "kiln: $node: $*" >&2; cleanup; exit 1; }
umask 077
for dir in "$KILN_SLURM_RUNDIR" "$jobdir"; do
	mkdir -p "$dir" || fail "cannot create $dir"
	# A directory that someone else made for us would let them take the
	# socket over: refuse it.
	[ -O "$dir" ] && [ ! -L "$dir" ] || fail "$dir is not owned by $(id -un)"
done
cache=$KILN_CACHE_DIR
deadline=$((SECONDS + ${KILN_START_TIMEOUT:-60}))
while :; do
	mkdir -p "$cache" || fail "cannot create $cache"
	# shellcheck disable=SC2086 # KILN_KILND_OPTIONS is a list of words
	"$KILN_KILND" --socket "$KILN_SOCKET" --cache-dir "$cache" \
		--log-file "$cache/kilnd.log" $KILN_KILND_OPTIONS </dev/null &
	pid=$!
	while ! "$KILN_CLI" --socket "$KILN_SOCKET" status >/dev/null 2>&1; do
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid"
			rc=$?
			break
		fi
		if [ "$SECONDS" -ge "$deadline" ]; then
			kill "$pid" 2>/dev/null
			fail "kilnd did not answer on $KILN_SOCKET within ${KILN_START_TIMEOUT:-60} s (log: $cache/kilnd.log)"
		fi
		sleep 0.1
	done
	kill -0 "$pid" 2>/dev/null && break
	# kilnd exits 3 without serving when another kilnd serves the cache
	# directory on another socket: another job of this user on this node
	# (0 when one serves it on this very socket). Use a private one.
	if { [ "$rc" = 3 ] || [ "$rc" = 0 ]; } && [ "$cache" = "$KILN_CACHE_DIR" ]; then
		cache=$private
		echo "kiln: $node: $KILN_CACHE_DIR is in use by another kilnd; this job uses $cache" >&2
		continue
	fi
	fail "kilnd exited with status $rc (log: $cache/kilnd.log)"
done
echo "kiln-ready $node $pid $cache"
# When Slurm ends the step (the job was cancelled or ran out of time), it
# signals kilnd and this shell alike; kilnd stops cleanly on SIGTERM.
trap "kill -TERM $pid 2>/dev/null" TERM INT
rc=0
while kill -0 "$pid" 2>/dev/null; do
	wait "$pid"
	rc=$?
done
cleanup
exit "$rc"
'

# The per-node check when a node prolog provides the daemons.
_kiln_slurm_node_check='
node=${SLURMD_NODENAME:-$(hostname -s)}
for _ in $(seq $((${KILN_START_TIMEOUT:-60} * 10))); do
	if "$KILN_CLI" --socket "$KILN_SOCKET" status >/dev/null 2>&1; then
		echo "kiln-ready $node node-prolog $KILN_CACHE_DIR"
		exit 0
	fi
	sleep 0.1
done
echo "kiln-failed $node no kilnd answers on $KILN_SOCKET"
exit 1
'

# The smallest CPU count of the job's nodes, from SLURM_JOB_CPUS_PER_NODE
# ("72(x4)" or "36,72(x2)").
_kiln_slurm_min_cpus() {
	local list=${SLURM_JOB_CPUS_PER_NODE:-${SLURM_CPUS_ON_NODE:-1}} item n min=
	for item in ${list//,/ }; do
		n=${item%%[!0-9]*}
		[ -n "$n" ] || continue
		if [ -z "$min" ] || [ "$n" -lt "$min" ]; then
			min=$n
		fi
	done
	echo "${min:-1}"
}

# Runs "$@" once on every node of the job, as a step that shares the job's
# CPUs with the other steps.
_kiln_slurm_per_node() {
	local nodes=${SLURM_JOB_NUM_NODES:-${SLURM_NNODES:-1}}
	srun --nodes="$nodes" --ntasks="$nodes" --ntasks-per-node=1 \
		--cpus-per-task="$(_kiln_slurm_min_cpus)" --overlap \
		--mpi=none --kill-on-bad-exit=0 --input=none --job-name=kiln "$@"
}

# Starts one kilnd per node with "$@" as more kilnd options; returns 0 once
# every node's daemon answers, 1 otherwise.
# shellcheck disable=SC2120 # kiln-job.sh passes arguments
kiln_slurm_start() {
	local nodes ready out timeout deadline bindir
	if [ -z "${SLURM_JOB_ID:-}" ]; then
		echo "kiln: not in a Slurm job (no SLURM_JOB_ID)" >&2
		return 1
	fi
	bindir=$(dirname "${BASH_SOURCE[0]}")/../../../bin
	KILN_KILND=${KILN_KILND:-$(command -v kilnd || command -v "$bindir/kilnd")}
	KILN_CLI=${KILN_CLI:-$(command -v kiln || command -v "$bindir/kiln")}
	export KILN_KILND KILN_CLI
	# DaCe's transformations depend on Python's hash randomization: with a
	# random seed per process, ranks generate one program in two variants,
	# each built (docs/dace.md, "One program, one variant"). A fixed seed
	# unless the job set one (PYTHONHASHSEED=random keeps randomization).
	if [ -z "${PYTHONHASHSEED+x}" ]; then
		export PYTHONHASHSEED=0
	fi
	if [ -z "$KILN_KILND" ] || [ -z "$KILN_CLI" ]; then
		echo "kiln: kilnd or kiln is not on PATH (or set KILN_KILND and KILN_CLI)" >&2
		return 1
	fi
	nodes=${SLURM_JOB_NUM_NODES:-${SLURM_NNODES:-1}}
	timeout=${KILN_START_TIMEOUT:-60}
	export KILN_START_TIMEOUT=$timeout
	out=$(mktemp "${TMPDIR:-/tmp}/kiln-prologue.XXXXXX") || return 1

	if [ "${KILN_SLURM_NODE_DAEMON:-}" = 1 ] && [ -n "${KILN_SOCKET:-}" ]; then
		export KILN_SLURM_MODE=node
		_kiln_slurm_per_node bash -c "$_kiln_slurm_node_check" >"$out"
	else
		export KILN_SLURM_MODE=step
		export KILN_SLURM_RUNDIR=${KILN_SLURM_RUNDIR:-/tmp/kiln-$(id -u)}
		export KILN_SOCKET=${KILN_SLURM_SOCKET:-$KILN_SLURM_RUNDIR/job-$SLURM_JOB_ID/kilnd.sock}
		export KILN_CACHE_DIR=${KILN_SLURM_CACHE_DIR:-$KILN_SLURM_RUNDIR/cache}
		# The options as one string: the step's shell splits them.
		KILN_KILND_OPTIONS="${KILN_KILND_OPTIONS:-}${*:+ $*}"
		export KILN_KILND_OPTIONS
		_kiln_slurm_per_node bash -c "$_kiln_slurm_node_daemon" >"$out" &
		KILN_SLURM_STEP_PID=$!
		export KILN_SLURM_STEP_PID
		deadline=$((SECONDS + timeout + 30))
		while :; do
			ready=$(grep -c '^kiln-ready ' "$out")
			[ "$ready" -ge "$nodes" ] && break
			if ! kill -0 "$KILN_SLURM_STEP_PID" 2>/dev/null || grep -q '^kiln-failed ' "$out" ||
				[ "$SECONDS" -ge "$deadline" ]; then
				echo "kiln: $ready of $nodes daemons started:" >&2
				grep '^kiln-failed ' "$out" >&2
				kill "$KILN_SLURM_STEP_PID" 2>/dev/null
				wait "$KILN_SLURM_STEP_PID" 2>/dev/null
				unset KILN_SLURM_STEP_PID
				rm -f "$out"
				return 1
			fi
			sleep 0.2
		done
	fi
	ready=$(grep -c '^kiln-ready ' "$out")
	awk '$1 == "kiln-ready" {
		cache = $0
		sub(/^kiln-ready [^ ]* [^ ]* /, "", cache)
		how = $3 == "node-prolog" ? "started by the node prolog" : "pid " $3
		print "kiln: kilnd on " $2 " (" how "), cache " cache
	}' "$out"
	if [ "$ready" -lt "$nodes" ]; then
		echo "kiln: only $ready of $nodes nodes have a kilnd:" >&2
		grep '^kiln-failed ' "$out" >&2
		rm -f "$out"
		return 1
	fi
	rm -f "$out"
	echo "kiln: $nodes node(s) ready, KILN_SOCKET=$KILN_SOCKET"
	return 0
}

if [ "${KILN_SLURM_DEFINE_ONLY:-}" != 1 ]; then
	# With "source kiln-prologue.sh" and no arguments, bash passes the
	# batch script's own arguments: kilnd options go in KILN_KILND_OPTIONS.
	# shellcheck disable=SC2119
	kiln_slurm_start
fi
