#!/bin/bash
# kiln-node-prolog.sh: a cluster-wide node prolog that starts one kilnd per
# node for every job, as the job's user. In slurm.conf:
#
#   PrologFlags=Alloc                               # run at allocation, on every node
#   Prolog=/usr/local/share/kiln/slurm/kiln-node-prolog.sh
#   Epilog=/usr/local/share/kiln/slurm/kiln-node-epilog.sh
#   TaskProlog=/usr/local/share/kiln/slurm/kiln-task-prolog.sh
#
# (or call them from the site's existing prolog, epilog and task prolog). slurmd
# runs it as root with SLURM_JOB_ID, SLURM_JOB_UID and SLURM_JOB_USER set. It
# starts `kilnd --daemonize` as that user (setpriv: real and effective uid and
# gid, the user's groups, a clean environment), with the socket in
# RUNDIR/job-JOBID/kilnd.sock and the cache in RUNDIR/cache on the node, and
# returns once kilnd answers. It notes the daemon in KILN_NODE_STATE_DIR for
# kiln-task-prolog.sh, which exports KILN_SOCKET to every task (and to the
# batch script), and for kiln-node-epilog.sh, which stops it.
#
# Every directory and the daemon are created by the user, not by root, so
# root never writes into a directory that the user controls. A kilnd started
# here is not part of the job's steps: it lives until the node epilog stops
# it, whatever the ProctrackType. (Under proctrack/cgroup it sits in
# slurmd's cgroup, so its compilers are not counted against the job's CPU
# and memory limits.)
#
# Settings: see kiln-node-lib.sh (/etc/kiln/slurm-node.conf). A kilnd that
# fails to start is logged (stderr and syslog) and the job runs without it,
# unless KILN_NODE_STRICT=1.
# shellcheck source-path=SCRIPTDIR

set -u
# shellcheck source=kiln-node-lib.sh
. "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/kiln-node-lib.sh"
kiln_node_close_fds

# The user's part: make the directories, start kilnd, check that it answers
# on this job's socket. Prints "PID CACHE".
# shellcheck disable=SC2016 # expanded by the user's shell
user_start='
kilnd=$1 cli=$2 socket=$3 cache=$4 rundir=$5 timeout=$6 job=$7
shift 7
umask 077
for dir in "$rundir" "${socket%/*}"; do
	mkdir -p "$dir" 2>/dev/null
	if [ ! -d "$dir" ] || [ -L "$dir" ] || [ ! -O "$dir" ]; then
		echo "$dir is not a directory of $(id -un)" >&2
		exit 1
	fi
done
answers() { "$cli" --socket "$socket" status >/dev/null 2>&1; }
start() {
	local dir=$1
	shift
	mkdir -p "$dir" || return 1
	timeout "$timeout" "$kilnd" --daemonize --socket "$socket" --cache-dir "$dir" \
		--log-file "$dir/kilnd.log" "$@"
}
pid=$(start "$cache" "$@")
rc=$?
[ "$rc" = 0 ] || [ "$rc" = 3 ] || exit 1
if [ "$rc" = 3 ] || ! answers; then
	# kilnd refuses (exit 3) a cache another kilnd serves on another
	# socket: the user has another job on this node. This job gets a cache
	# of its own.
	cache=${cache%/}-job-$job
	echo "the shared cache is in use by kilnd $pid; this job uses $cache" >&2
	pid=$(start "$cache" "$@") || exit 1
	answers || { echo "kilnd (pid $pid) does not answer on $socket" >&2; exit 1; }
fi
echo "$pid $cache"
'

fail() {
	kiln_node_log "prolog, job ${SLURM_JOB_ID:-?}: $*"
	[ "${KILN_NODE_STRICT:-0}" = 1 ] && exit 1
	exit 0
}

kiln_node_load_conf 1 || fail "cannot read the settings"
job=${SLURM_JOB_ID:-}
uid=${SLURM_JOB_UID:-}
case "$job:$uid" in
*[!0-9:]* | :* | *:) fail "SLURM_JOB_ID and SLURM_JOB_UID must be numbers (not run by slurmd?)" ;;
esac
[ "$uid" -ge "$KILN_NODE_USERS_MIN_UID" ] || exit 0
user=${SLURM_JOB_USER:-$(id -nu "$uid" 2>/dev/null)}
gid=${SLURM_JOB_GID:-$(id -g "$uid" 2>/dev/null)}
[ -n "$gid" ] || fail "no group for uid $uid"
kiln_node_paths "$uid" "$job"
install -d -m 0755 "$KILN_NODE_STATE_DIR" || fail "cannot create $KILN_NODE_STATE_DIR"

# shellcheck disable=SC2086 # KILN_KILND_OPTIONS is a list of words
out=$(kiln_node_as_user "$uid" "$gid" bash -c "$user_start" kiln-node-prolog \
	"$KILN_KILND" "$KILN_CLI" "$kiln_socket" "$kiln_cache" "$kiln_rundir" \
	"$KILN_NODE_START_TIMEOUT" "$job" ${KILN_KILND_OPTIONS//\{uid\}/$uid} 2>&1)
status=$?
result=$(printf '%s\n' "$out" | tail -n 1)
[ "$status" -eq 0 ] || fail "no kilnd for $user: $out"
pid=${result%% *}
cache=${result#* }
printf '%s\n' "$out" | sed '$d' | while read -r line; do kiln_node_log "job $job: $line"; done

tmp=$kiln_state.tmp.$$
if ! printf 'pid=%s\nuid=%s\ngid=%s\nuser=%s\nsocket=%s\ncache=%s\n' \
	"$pid" "$uid" "$gid" "$user" "$kiln_socket" "$cache" >"$tmp" ||
	! chmod 0644 "$tmp" || ! mv -f "$tmp" "$kiln_state"; then
	rm -f "$tmp"
	# Without the note the epilog would not find the daemon: stop it now.
	kiln_node_as_user "$uid" "$gid" "$KILN_CLI" --socket "$kiln_socket" stop >/dev/null 2>&1
	fail "cannot write $kiln_state"
fi
kiln_node_log "job $job: kilnd (pid $pid) for $user on $kiln_socket, cache $cache"
kiln_node_metrics
exit 0
