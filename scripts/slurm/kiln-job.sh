#!/usr/bin/env bash
# Helpers for a Slurm batch script: one kilnd per node for the whole job, on
# node-local storage. Use:
#   source /path/to/kiln/scripts/slurm/kiln-job.sh
#   kiln_job_start            # one kilnd per node, returns when all answer
#   srun ./my_simulation      # ranks find the daemon through $KILN_SOCKET
#   kiln_job_stop             # stops every node's kilnd
# kilnd runs as a job step of its own (srun --overlap), because Slurm ends the
# processes of a step, daemonized or not, when that step ends.

export KILN_SOCKET="${KILN_SOCKET:-/tmp/kiln-$(id -u)/job-${SLURM_JOB_ID:-0}/kilnd.sock}"
export KILN_CACHE_DIR="${KILN_CACHE_DIR:-/tmp/kiln-$(id -u)/cache}"

kiln_job_start() {
	srun --ntasks-per-node=1 --overlap --kill-on-bad-exit=0 \
		kilnd --socket "$KILN_SOCKET" --cache-dir "$KILN_CACHE_DIR" "$@" &
	KILN_JOB_STEP=$!
	# Wait until the daemon of every node answers (at most ~30 s).
	srun --ntasks-per-node=1 --overlap bash -c '
		for _ in $(seq 300); do
			kiln --socket "$KILN_SOCKET" status >/dev/null 2>&1 && exit 0
			sleep 0.1
		done
		echo "kilnd did not come up on $(hostname)" >&2; exit 1'
}

kiln_job_stop() {
	srun --ntasks-per-node=1 --overlap kiln --socket "$KILN_SOCKET" stop >/dev/null
	if [ -n "${KILN_JOB_STEP:-}" ]; then
		wait "$KILN_JOB_STEP" || true
	fi
}
