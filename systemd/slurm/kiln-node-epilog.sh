#!/bin/bash
# kiln-node-epilog.sh: slurm.conf Epilog= for kiln-node-prolog.sh. slurmd runs
# it as root on every node when a job ends (also when it was cancelled or
# ran out of time). It logs the daemon's statistics (stderr and syslog, one
# "kiln-stats ..." line), stops it with `kiln stop` as the job's user, kills
# it if it does not stop, and removes the job's socket directory. Nothing to
# do (exit 0) when the prolog started no kilnd for the job. It always exits
# 0: a failure here must not drain the node.
# shellcheck source-path=SCRIPTDIR

set -u
# shellcheck source=kiln-node-lib.sh
. "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/kiln-node-lib.sh"
kiln_node_close_fds

kiln_node_load_conf 1 || exit 0
job=${SLURM_JOB_ID:-}
case "$job" in
'' | *[!0-9]*) exit 0 ;;
esac
kiln_node_read_state "$job" || exit 0
uid=$state_uid gid=$state_gid pid=$state_pid socket=$state_socket
node=${SLURMD_NODENAME:-$(hostname -s)}
as_user() { kiln_node_as_user "$uid" "$gid" "$@"; }

# The pid still names our kilnd: a process of the user running kilnd.
ours() {
	[ -n "$pid" ] && [ "$(stat -c %u "/proc/$pid" 2>/dev/null)" = "$uid" ] &&
		[ "$(basename "$(readlink "/proc/$pid/exe" 2>/dev/null)")" = kilnd ] &&
		[ "$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$pid/status" 2>/dev/null)" != Z ]
}

if json=$(as_user timeout 10 "$KILN_CLI" --socket "$socket" --json status 2>&1); then
	line="kiln-stats job=$job node=$node"
	# The counters are kept in the cache across jobs; "this_run" has this
	# job's kilnd's own.
	run=$(printf '%s' "$json" | sed -n 's/.*"this_run":{\([^}]*\)}.*/\1/p')
	for f in pid builds_started builds_ok builds_failed hits misses joined entries bytes requests; do
		case $f in pid | entries | bytes) from=$json ;; *) from=${run:-$json} ;; esac
		line="$line $f=$(printf '%s' "$from" | grep -o "\"$f\":[0-9.]*" | head -n 1 | cut -d: -f2)"
	done
	kiln_node_log "$line"
	as_user timeout 30 "$KILN_CLI" --socket "$socket" stop >/dev/null 2>&1 ||
		kiln_node_log "job $job: kiln stop failed"
else
	kiln_node_log "job $job: kilnd (pid $pid) does not answer on $socket: ${json:-no reply within 10 s}"
fi
for signal in TERM KILL; do
	for _ in $(seq 50); do
		ours || break
		sleep 0.1
	done
	ours || break
	kiln_node_log "job $job: kilnd (pid $pid) is still running; sending SIG$signal"
	kill -s "$signal" "$pid" 2>/dev/null
	kill -s CONT "$pid" 2>/dev/null	# a stopped process gets SIGTERM only then
done
sleep 0.1
ours && kiln_node_log "job $job: kilnd (pid $pid) survived SIGKILL"

# The socket directory is the user's: remove it as the user, and a cache
# made for this job alone (the shared one was busy) with it.
dir=${socket%/*}
if [ "${dir##*/}" = "job-$job" ]; then
	as_user rm -rf -- "$dir" || kiln_node_log "job $job: cannot remove $dir"
fi
case $state_cache in
*-job-"$job") as_user rm -rf -- "$state_cache" ;;
esac
rm -f "$KILN_NODE_STATE_DIR/job-$job"
ours || kiln_node_log "job $job: kilnd (pid $pid) stopped"
# The other kilnds' metrics refreshed, this one's file gone with it.
kiln_node_metrics
exit 0
