#!/usr/bin/env bash
# otelcol-gpu Slurm Epilog: removes the finished job's flight-recorder dumps
# and NCCL inspector files from this node once the agent has read them.
# slurm.conf:  Epilog=/usr/lib/otelcol-gpu/slurm/epilog.sh (the agent package)
#
# Runs as root on each node of the job after it ends. It always exits 0: a
# failing Epilog drains the node.
#
# "Read" is what the agent's ncclflight receiver guarantees: a dump is read
# once unchanged for settle_time (1s) and inspector files are polled every
# second. So a file of the job unchanged for OTELCOL_GPU_EPILOG_SETTLE
# seconds (10) has been read, provided the agent is up: if its health check
# fails, everything is left for it to read when it is back (the tmpfiles.d
# rule removes files after 7 days). The job's files are the dumps in its own
# directory, <fr_dir>/<job>/<attempt>/ (the prolog's layout), and, in the
# shared directories, the ones its user owns, modified since the job started.
# Files still changing after OTELCOL_GPU_EPILOG_MAX_WAIT seconds (30) are
# left too.
#
# Settings from /etc/otelcol-gpu/slurm.env (OTELCOL_GPU_SLURM_CONF):
# OTELCOL_GPU_FR_DIR, OTELCOL_GPU_INSPECTOR_DIR, OTELCOL_GPU_HEALTH_URL,
# OTELCOL_GPU_EPILOG_SETTLE, OTELCOL_GPU_EPILOG_MAX_WAIT.

conf=${OTELCOL_GPU_SLURM_CONF:-/etc/otelcol-gpu/slurm.env}
# shellcheck source=/dev/null
[[ -r $conf ]] && . "$conf"

fr_dir=${OTELCOL_GPU_FR_DIR:-/var/run/torch-fr}
inspector_dir=${OTELCOL_GPU_INSPECTOR_DIR:-/var/run/nccl-inspector}
health_url=${OTELCOL_GPU_HEALTH_URL:-http://127.0.0.1:13133/}
settle=${OTELCOL_GPU_EPILOG_SETTLE:-10}
max_wait=${OTELCOL_GPU_EPILOG_MAX_WAIT:-30}

log() { logger -t otelcol-gpu-epilog -- "$*" 2>/dev/null || echo "otelcol-gpu-epilog: $*" >&2; }

uid=${SLURM_JOB_UID:-}
[[ $uid =~ ^[0-9]+$ ]] || exit 0

# healthy: the agent's health_check answers 200 (curl, else wget; neither
# installed counts as "cannot tell", which leaves the files).
healthy() {
	if command -v curl >/dev/null; then
		curl -fsS --max-time 2 -o /dev/null "$health_url" 2>/dev/null
	elif command -v wget >/dev/null; then
		wget -q -T 2 -O /dev/null "$health_url" 2>/dev/null
	else
		return 1
	fi
}

if ! healthy; then
	log "job ${SLURM_JOB_ID:-?}: agent not healthy at $health_url, leaving its NCCL files"
	exit 0
fi

# The job's own dump directory, <fr_dir>/<job>/<attempt>/ (the prolog's
# layout); not followed when it is a symlink.
job_dir=
if [[ ${SLURM_JOB_ID:-} =~ ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$ && -d $fr_dir/$SLURM_JOB_ID && ! -L $fr_dir/$SLURM_JOB_ID ]]; then
	job_dir="$fr_dir/$SLURM_JOB_ID"
fi

# job_files [find predicates...]: the job's dumps and inspector files: those
# in its own directory (every attempt's), and those in the shared
# directories (dumps of jobs started before the per-job layout, or whose
# directory could not be made) that its user owns and wrote since it started.
job_files() {
	local dirs=()
	[[ -d $fr_dir ]] && dirs+=("$fr_dir")
	[[ -d $inspector_dir ]] && dirs+=("$inspector_dir")
	((${#dirs[@]})) || return 0
	local since=()
	[[ ${SLURM_JOB_START_TIME:-} =~ ^[0-9]+$ ]] && since=(-newermt "@$SLURM_JOB_START_TIME")
	find "${dirs[@]}" -maxdepth 1 -type f -uid "$uid" "${since[@]}" \
		\( -name '*nccl_trace_rank_*' -o -name '*comm_lib_trace_rank_*' -o -name '*-pid*.log' \) "$@"
	# find does not follow symlinks (-P): an attempt directory swapped for a
	# link to elsewhere is not entered.
	[[ -n $job_dir ]] && find "$job_dir" -mindepth 2 -maxdepth 2 -type f -uid "$uid" \
		\( -name '*nccl_trace_rank_*' -o -name '*comm_lib_trace_rank_*' -o -name '*_dump_*' \) "$@"
	return 0
}

# Wait (bounded) until none of the job's files changed within $settle s.
waited=0
while [[ -n $(job_files -newermt "$settle seconds ago" -print -quit) ]] && ((waited < max_wait)); do
	sleep 1
	waited=$((waited + 1))
done

removed=$(job_files ! -newermt "$settle seconds ago" -print -delete | wc -l)
left=$(job_files -print | wc -l)
# The job's directories, once empty (rmdir leaves any that are not).
if [[ -n $job_dir ]]; then
	find "$job_dir" -mindepth 1 -maxdepth 1 -type d -uid "$uid" -empty -delete 2>/dev/null
	rmdir "$job_dir" 2>/dev/null
fi
log "job ${SLURM_JOB_ID:-?}: removed $removed NCCL files read by the agent, left $left still changing"
exit 0
