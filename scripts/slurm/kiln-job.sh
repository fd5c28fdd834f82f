#!/usr/bin/env bash
# Helpers for a Slurm batch script: one kilnd per node for the whole job, on
# node-local storage. Use:
#   source /path/to/kiln/scripts/slurm/kiln-job.sh
#   kiln_job_start            # one kilnd per node, returns when all answer
#   srun ./my_simulation      # ranks find the daemon through $KILN_SOCKET
#   kiln_job_stop             # prints each node's statistics, stops every kilnd
# A thin wrapper around systemd/slurm/kiln-prologue.sh and kiln-epilogue.sh,
# which say how it works (kilnd runs as a job step of its own, because Slurm
# ends the processes of a step, daemonized or not, when that step ends).
# Unlike those, it keeps a KILN_SOCKET or KILN_CACHE_DIR that is set already;
# the defaults are /tmp/kiln-UID/job-JOBID/kilnd.sock and /tmp/kiln-UID/cache.
# Arguments of kiln_job_start go to kilnd (e.g. --jobs 16 --upstream DIR).
# Run instead of sourced, it would define the functions in a shell that
# exits at once: it refuses (as kiln-prologue.sh does) and exits 2.
# shellcheck source-path=SCRIPTDIR

if ! (return 0 2>/dev/null); then
	echo "kiln: kiln-job.sh must be sourced, not run: 'source ${BASH_SOURCE[0]:-kiln-job.sh}'," \
		"then kiln_job_start and kiln_job_stop in the batch script" >&2
	exit 2
fi

_kiln_job_scripts=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../systemd/slurm" && pwd)
export KILN_SLURM_DEFINE_ONLY=1
# shellcheck source=../../systemd/slurm/kiln-prologue.sh
source "$_kiln_job_scripts/kiln-prologue.sh"
# shellcheck source=../../systemd/slurm/kiln-epilogue.sh
source "$_kiln_job_scripts/kiln-epilogue.sh"
unset KILN_SLURM_DEFINE_ONLY

export KILN_SOCKET="${KILN_SOCKET:-/tmp/kiln-$(id -u)/job-${SLURM_JOB_ID:-0}/kilnd.sock}"
export KILN_CACHE_DIR="${KILN_CACHE_DIR:-/tmp/kiln-$(id -u)/cache}"

kiln_job_start() {
	KILN_SLURM_SOCKET=$KILN_SOCKET KILN_SLURM_CACHE_DIR=$KILN_CACHE_DIR kiln_slurm_start "$@"
}

kiln_job_stop() {
	kiln_slurm_stop
}
