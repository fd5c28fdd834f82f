# kiln-epilogue.sh: the end of kiln-prologue.sh. Source it (or run it with
# bash) at the end of the batch script, after the last job step that uses kiln:
#
#   source /usr/local/share/kiln/slurm/kiln-epilogue.sh
#
# On every node it prints the daemon's statistics as one line,
#   kiln-stats node=NODE pid=PID builds_started=N builds_ok=N builds_failed=N
#              hits=N misses=N joined=N entries=N bytes=N requests=N variants=N
# then stops kilnd with `kiln stop` (which waits until it has exited) and
# checks that no kilnd process of the job and no socket are left; it removes
# the job's socket directory. Then it prints the sums over the nodes,
#   kiln-stats total nodes=N builds_started=N ...
# after a node's line, one line per build that failed there (the latest 8),
#   kiln-failed-build node=NODE LABEL (kiln log RKEY)
# and, when a program was built in more than one variant (nondeterministic
# code generation), a line saying how many, why and what to do;
# and "kiln: all N daemons stopped, no socket left" when all went well.
# It returns (or exits with) 0 then, 1 otherwise.
#
# When the daemons belong to a node prolog (KILN_SLURM_MODE=node), it prints
# the statistics and leaves stopping them to the node epilog.

# shellcheck disable=SC2016 # the per-node script expands its variables there

# The per-node part: statistics, stop, checks. field() pulls one number out of
# the one-line JSON of `kiln --json status` (no jq needed on the nodes).
_kiln_slurm_node_stop='
node=${SLURMD_NODENAME:-$(hostname -s)}
field() { printf "%s" "$json" | grep -o "\"$1\":[0-9.]*" | head -n 1 | cut -d: -f2; }
# The counters are kept in the cache across kilnds; "this_run" has those
# this kilnd (the job) counted itself, where the kilnd has them.
run_field() {
	local run
	run=$(printf "%s" "$json" | sed -n "s/.*\"this_run\":{\([^}]*\)}.*/\1/p")
	if [ -n "$run" ]; then printf "%s" "$run" | grep -o "\"$1\":[0-9.]*" | head -n 1 | cut -d: -f2
	else field "$1"; fi
}
if ! json=$("$KILN_CLI" --socket "$KILN_SOCKET" --json status 2>&1); then
	echo "kiln-failed $node no kilnd answers on $KILN_SOCKET: $json"
	exit 1
fi
line="kiln-stats node=$node"
for f in pid builds_started builds_ok builds_failed hits misses joined entries bytes requests variants; do
	case $f in
	pid | entries | bytes) line="$line $f=$(field "$f")" ;;
	*) line="$line $f=$(run_field "$f")" ;;
	esac
done
echo "$line"
# The builds that failed in this job, by name and what kiln log takes.
if [ "$(run_field builds_failed)" != 0 ]; then
	"$KILN_CLI" --socket "$KILN_SOCKET" status 2>/dev/null | sed -n "s/^failed build: *//p" |
		while IFS= read -r f; do echo "kiln-failed-build node=$node $f"; done
fi
[ "$KILN_SLURM_MODE" = node ] && exit 0
pid=$(field pid)
if ! msg=$("$KILN_CLI" --socket "$KILN_SOCKET" stop 2>&1); then
	echo "kiln-failed $node kiln stop: $msg"
	exit 1
fi
# kiln stop returns once kilnd has let go of its socket; the process may
# still be on its way out for a moment.
for _ in $(seq 100); do
	state=$(sed -n "s/^State:[[:space:]]*\([A-Z]\).*/\1/p" "/proc/$pid/status" 2>/dev/null)
	[ -z "$state" ] || [ "$state" = Z ] && break
	sleep 0.1
done
if [ -n "$state" ] && [ "$state" != Z ]; then
	echo "kiln-failed $node kilnd (pid $pid) is still running after kiln stop"
	exit 1
fi
if [ -e "$KILN_SOCKET" ]; then
	echo "kiln-failed $node the socket $KILN_SOCKET is left behind"
	exit 1
fi
# The socket directory made for this job holds only the socket lock now. A
# private cache (made when the shared one was busy) goes too.
dir=$(dirname "$KILN_SOCKET")
rm -f "$KILN_SOCKET.lock"
rm -rf "${KILN_CACHE_DIR%/}-job-$SLURM_JOB_ID"
[ "${dir##*/}" = "job-$SLURM_JOB_ID" ] && rmdir "$dir" 2>/dev/null
echo "kiln-stopped $node pid=$pid"
'

kiln_slurm_stop() {
	local nodes out status=0 stopped failed _
	if [ -z "${KILN_SOCKET:-}" ] || [ -z "${KILN_SLURM_MODE:-}" ]; then
		echo "kiln: kiln-prologue.sh did not run in this job (no KILN_SLURM_MODE)" >&2
		return 1
	fi
	nodes=${SLURM_JOB_NUM_NODES:-${SLURM_NNODES:-1}}
	KILN_CLI=${KILN_CLI:-$(command -v kiln)}
	export KILN_CLI KILN_SLURM_MODE KILN_SOCKET KILN_CACHE_DIR
	# The same step options as the prologue's (_kiln_slurm_per_node), which
	# may not be defined when this file is run on its own.
	out=$(srun --nodes="$nodes" --ntasks="$nodes" --ntasks-per-node=1 \
		--overlap --mpi=none --kill-on-bad-exit=0 --input=none --job-name=kiln \
		bash -c "$_kiln_slurm_node_stop") || status=1
	printf '%s\n' "$out" | grep -v '^kiln-stopped '
	printf '%s\n' "$out" | awk '
		$1 == "kiln-stats" {
			n++
			for (i = 3; i <= NF; i++) {
				split($i, kv, "=")
				sum[kv[1]] += kv[2]
			}
		}
		END {
			printf "kiln-stats total nodes=%d", n
			split("builds_started builds_ok builds_failed hits misses joined entries bytes requests variants", k, " ")
			for (i = 1; i in k; i++)
				printf " %s=%.0f", k[i], sum[k[i]]
			printf "\n"
			if (sum["variants"] > 0)
				printf "kiln: %.0f programs were built in more than one variant: two processes generated different code for one program, most likely nondeterministic code generation (DaCe under Python hash randomization); kilnd'"'"'s log names them. Remedy: PYTHONHASHSEED=0 (docs/dace.md)\n", sum["variants"]
		}'
	failed=$(printf '%s\n' "$out" | grep -c '^kiln-failed ')
	if [ "$KILN_SLURM_MODE" = node ]; then
		[ "$failed" -eq 0 ] || status=1
		return "$status"
	fi
	stopped=$(printf '%s\n' "$out" | grep -c '^kiln-stopped ')
	# The daemon step ends once every node's kilnd has exited.
	if [ -n "${KILN_SLURM_STEP_PID:-}" ]; then
		for _ in $(seq 300); do
			kill -0 "$KILN_SLURM_STEP_PID" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$KILN_SLURM_STEP_PID" 2>/dev/null; then
			echo "kiln: the kilnd step did not end; cancelling it" >&2
			kill "$KILN_SLURM_STEP_PID" 2>/dev/null
			status=1
		fi
		wait "$KILN_SLURM_STEP_PID" 2>/dev/null
		unset KILN_SLURM_STEP_PID
	fi
	if [ "$stopped" -eq "$nodes" ] && [ "$failed" -eq 0 ] && [ "$status" -eq 0 ]; then
		echo "kiln: all $nodes daemons stopped, no socket left"
	else
		echo "kiln: $stopped of $nodes daemons stopped cleanly" >&2
		status=1
	fi
	return "$status"
}

if [ "${KILN_SLURM_DEFINE_ONLY:-}" != 1 ]; then
	if [ "${BASH_SOURCE[0]}" = "$0" ]; then
		kiln_slurm_stop
		exit
	fi
	kiln_slurm_stop
fi
