#!/bin/bash
# kiln-task-prolog.sh: slurm.conf TaskProlog= for kiln-node-prolog.sh.
# slurmstepd runs it as the job's user before every task, the batch script
# included, and turns each "export NAME=value" line it prints into the
# task's environment. When the node prolog started a kilnd for this job, it
# prints
#   export KILN_SOCKET=RUNDIR/job-JOBID/kilnd.sock
#   export KILN_CACHE_DIR=...
#   export KILN_SLURM_NODE_DAEMON=1
# so that libkiln and the kiln CLI find the daemon, and kiln-prologue.sh in a
# batch script knows not to start another one. Otherwise it prints nothing.
# (Slurm takes the value up to the end of the line: the paths must not
# contain newlines; they contain no spaces with the default settings.)
# shellcheck source-path=SCRIPTDIR

# shellcheck source=kiln-node-lib.sh
. "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/kiln-node-lib.sh"
kiln_node_load_conf 0 2>/dev/null || exit 0
kiln_node_read_state "${SLURM_JOB_ID:-none}" || exit 0
[ "$state_uid" = "$(id -u)" ] && [ -S "$state_socket" ] || exit 0
echo "export KILN_SOCKET=$state_socket"
echo "export KILN_CACHE_DIR=$state_cache"
echo "export KILN_SLURM_NODE_DAEMON=1"
# One program, one variant (docs/dace.md): unless the job set its own.
[ -n "${PYTHONHASHSEED+x}" ] || echo "export PYTHONHASHSEED=0"
exit 0
