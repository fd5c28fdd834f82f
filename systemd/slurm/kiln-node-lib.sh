# kiln-node-lib.sh: what kiln-node-prolog.sh, kiln-node-epilog.sh and
# kiln-task-prolog.sh share: the site's settings and the job's paths.
#
# Settings: a bash file of NAME=value lines, $KILN_SLURM_CONF, else
# /etc/kiln/slurm-node.conf (optional; when the prolog or epilog runs as
# root, it must belong to root and be writable by nobody else):
#   KILN_KILND               kilnd (default: the one installed with these
#                            scripts, PREFIX/bin/kilnd, else kilnd on PATH)
#   KILN_CLI                 kiln (likewise)
#   KILN_NODE_RUNDIR         node-local directory of each user, {uid} replaced
#                            (default /tmp/kiln-{uid}); the socket is
#                            RUNDIR/job-JOBID/kilnd.sock
#   KILN_NODE_CACHE_DIR      the user's cache on the node, {uid} and {rundir}
#                            replaced (default {rundir}/cache; kept across jobs)
#   KILN_KILND_OPTIONS       more kilnd options, e.g. "--jobs 32 --upstream /scratch/kiln/{uid}"
#                            ({uid} replaced)
#   KILN_NODE_STATE_DIR      where the prolog notes each job's daemon for the
#                            epilog and the task prolog (default /run/kiln-slurm)
#   KILN_NODE_START_TIMEOUT  seconds for kilnd to answer (default 60)
#   KILN_NODE_STRICT=1       a kilnd that does not start fails the prolog (Slurm
#                            then drains the node and requeues the job); by
#                            default the job runs without kiln and it is logged
#   KILN_NODE_USERS_MIN_UID  start no kilnd for jobs of users below this uid
#                            (default 0: every user, root included)
#   KILN_NODE_METRICS_DIR    node_exporter's textfile directory: the prolog and
#                            the epilog then write one file per user's kilnd
#                            there (kiln-node-metrics; default: none)
#   KILN_NODE_METRICS        that script (default: the one installed with these
#                            scripts, PREFIX/libexec/kiln-node-metrics)

# The variables set here are for the scripts that source this file.
# shellcheck disable=SC2034

kiln_node_log() {
	echo "kiln-slurm: $*" >&2
	logger -t kiln-slurm -- "$*" 2>/dev/null || true
}

# Prints the path of program $1: PREFIX/bin/$1 when these scripts are
# installed in PREFIX/share/kiln/slurm, else $1 on PATH, else $1.
kiln_node_find() {
	local bin
	bin=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../../../bin/$1
	if [ -x "$bin" ]; then
		readlink -f "$bin"
	else
		command -v "$1" || echo "$1"
	fi
}

# Reads the settings. $1 = 1 when running as root, which trusts only a file
# that nobody but root can change.
kiln_node_load_conf() {
	local conf=${KILN_SLURM_CONF:-/etc/kiln/slurm-node.conf} owner_mode
	if [ -e "$conf" ]; then
		if [ "$1" = 1 ]; then
			owner_mode=$(stat -L -c '%u %a' "$conf") || return 1
			if [ "${owner_mode%% *}" != 0 ] || [ $((8#${owner_mode#* } & 8#022)) -ne 0 ]; then
				kiln_node_log "$conf must belong to root and not be writable by group or others"
				return 1
			fi
		fi
		# shellcheck source=/dev/null
		. "$conf" || return 1
	fi
	KILN_KILND=${KILN_KILND:-$(kiln_node_find kilnd)}
	KILN_CLI=${KILN_CLI:-$(kiln_node_find kiln)}
	KILN_NODE_RUNDIR=${KILN_NODE_RUNDIR:-/tmp/kiln-\{uid\}}
	KILN_NODE_CACHE_DIR=${KILN_NODE_CACHE_DIR:-\{rundir\}/cache}
	KILN_KILND_OPTIONS=${KILN_KILND_OPTIONS:-}
	KILN_NODE_STATE_DIR=${KILN_NODE_STATE_DIR:-/run/kiln-slurm}
	KILN_NODE_START_TIMEOUT=${KILN_NODE_START_TIMEOUT:-60}
	KILN_NODE_USERS_MIN_UID=${KILN_NODE_USERS_MIN_UID:-0}
	KILN_NODE_METRICS_DIR=${KILN_NODE_METRICS_DIR:-}
	KILN_NODE_METRICS=${KILN_NODE_METRICS:-$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../../../libexec/kiln-node-metrics}
	return 0
}

# Writes the metrics of every user's kilnd on the node (and removes those
# of kilnds that are gone), when the site asks for them. Never fails.
kiln_node_metrics() {
	[ -n "$KILN_NODE_METRICS_DIR" ] || return 0
	if [ ! -x "$KILN_NODE_METRICS" ]; then
		kiln_node_log "KILN_NODE_METRICS_DIR is set, but $KILN_NODE_METRICS is missing"
		return 0
	fi
	KILN_METRICS_DIR=$KILN_NODE_METRICS_DIR "$KILN_NODE_METRICS" --kiln "$KILN_CLI" >/dev/null 2>&1 ||
		kiln_node_log "kiln-node-metrics failed for $KILN_NODE_METRICS_DIR"
	return 0
}

# Sets kiln_rundir, kiln_socket, kiln_cache and kiln_state for uid $1 and
# job $2.
kiln_node_paths() {
	kiln_rundir=${KILN_NODE_RUNDIR//\{uid\}/$1}
	kiln_cache=${KILN_NODE_CACHE_DIR//\{uid\}/$1}
	kiln_cache=${kiln_cache//\{rundir\}/$kiln_rundir}
	kiln_socket=$kiln_rundir/job-$2/kilnd.sock
	kiln_state=$KILN_NODE_STATE_DIR/job-$2
}

# Reads the state file the prolog wrote for job $1 into state_pid, state_uid,
# state_gid, state_socket and state_cache. Returns 1 when there is none.
kiln_node_read_state() {
	local key value
	state_pid='' state_uid='' state_gid='' state_socket='' state_cache=''
	[ -f "$KILN_NODE_STATE_DIR/job-$1" ] || return 1
	while IFS='=' read -r key value; do
		case $key in
		pid) state_pid=$value ;;
		uid) state_uid=$value ;;
		gid) state_gid=$value ;;
		socket) state_socket=$value ;;
		cache) state_cache=$value ;;
		esac
	done <"$KILN_NODE_STATE_DIR/job-$1"
	[ -n "$state_socket" ]
}

# Runs "$@" as uid $1 and gid $2 with a clean environment (setpriv from
# util-linux: no PAM session, no shell), without the privilege to gain
# privileges again.
kiln_node_as_user() {
	local uid=$1 gid=$2
	shift 2
	setpriv --reuid="$uid" --regid="$gid" --init-groups --reset-env --no-new-privs -- "$@"
}

# Closes every descriptor above 2: a daemon started from the prolog must not
# hold on to a pipe of slurmd's.
kiln_node_close_fds() {
	local fd
	for fd in "/proc/$$/fd/"*; do
		fd=${fd##*/}
		[ "$fd" -gt 2 ] 2>/dev/null && eval "exec $fd>&-"
	done
	return 0
}
