#!/usr/bin/env bash
# otelcol-gpu Slurm TaskProlog: sets each task's environment so that the
# training job feeds the node's otelcol-gpu agent (deploy/README.md, "Slurm").
# slurm.conf:  TaskProlog=/usr/lib/otelcol-gpu/slurm/prolog.sh (the agent package)
#
# Slurm runs it as the job's user before every task and applies the
# `export NAME=value` lines it prints. A variable the job set itself is
# left alone. It never fails: telemetry must not stop a job.
#
# Site settings come from /etc/otelcol-gpu/slurm.env (OTELCOL_GPU_SLURM_CONF
# to use another file): OTELCOL_GPU_OTLP_ENDPOINT, OTELCOL_GPU_FR_DIR,
# OTELCOL_GPU_INSPECTOR_DIR, OTELCOL_GPU_INSPECTOR_PLUGIN,
# OTELCOL_GPU_FR_BUFFER_SIZE.

conf=${OTELCOL_GPU_SLURM_CONF:-/etc/otelcol-gpu/slurm.env}
# shellcheck source=/dev/null
[[ -r $conf ]] && . "$conf"

otlp_endpoint=${OTELCOL_GPU_OTLP_ENDPOINT:-http://127.0.0.1:4318}
fr_dir=${OTELCOL_GPU_FR_DIR:-/var/run/torch-fr}
inspector_dir=${OTELCOL_GPU_INSPECTOR_DIR:-/var/run/nccl-inspector}
inspector_plugin=${OTELCOL_GPU_INSPECTOR_PLUGIN:-/usr/local/lib/libnccl-profiler-inspector.so}
fr_buffer_size=${OTELCOL_GPU_FR_BUFFER_SIZE:-2000}

# Not a Slurm task: nothing to set.
[[ -n ${SLURM_JOB_ID:-} ]] || exit 0

# export_default NAME VALUE: print an export unless the job set NAME.
export_default() {
	if [[ -z ${!1+set} ]]; then
		printf 'export %s=%s\n' "$1" "$2"
	fi
}

# The job id on everything the job sends: the SDK (training.job.id; it also
# reads SLURM_JOB_ID). The agent takes a dump's job from its directory.
export_default TRAINING_JOB_ID "$SLURM_JOB_ID"
case ",${OTEL_RESOURCE_ATTRIBUTES:-}," in
*,training.job.id=*) ;;
,,) printf 'export OTEL_RESOURCE_ATTRIBUTES=training.job.id=%s\n' "$SLURM_JOB_ID" ;;
*) printf 'export OTEL_RESOURCE_ATTRIBUTES=%s,training.job.id=%s\n' "$OTEL_RESOURCE_ATTRIBUTES" "$SLURM_JOB_ID" ;;
esac

# Step spans and logs go to the agent on this node (OTLP/HTTP).
export_default OTEL_EXPORTER_OTLP_ENDPOINT "$otlp_endpoint"

# PyTorch's NCCL flight recorder: on, with durations, and its own dump on a
# watchdog timeout written where the agent reads (docs/training-scripts.md).
# The SDK's periodic dumps default to the same directory.
export_default TORCH_NCCL_TRACE_BUFFER_SIZE "$fr_buffer_size"
export_default TORCH_NCCL_ENABLE_TIMING 1
export_default TORCH_NCCL_DUMP_ON_TIMEOUT 1

# Each job's dumps go to <dir>/<job>/<attempt>/, the agent's default
# flight_recorder::job_path ({job}/{attempt}): the agent takes the job and
# the attempt from there, so two jobs on one node neither overwrite each
# other's dumps nor are analysed together. The attempt is Slurm's restart
# count. PyTorch does not create the directory, so this does, as the job's
# user; a directory someone else created first (or a symlink) is not used:
# its owner could read the dumps or plant some in the job's name. Then, and
# for a job id that is not a plain name, dumps go to <dir> itself, of the
# agent's job_id.
fr_prefix="$fr_dir/nccl_trace_rank_"
attempt=${SLURM_RESTART_COUNT:-0}
[[ $attempt =~ ^(0|[1-9][0-9]{0,8})$ ]] || attempt=0
if [[ $SLURM_JOB_ID =~ ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$ && -d $fr_dir ]]; then
	# One level at a time, never mkdir -p: that follows a symlink planted
	# at the job's name. In the sticky shared directory a directory the job's
	# user owns cannot be replaced by anyone else once checked.
	job_dir="$fr_dir/$SLURM_JOB_ID/$attempt"
	ours() { [[ ! -L $1 && -d $1 && -O $1 ]]; }
	mkdir -m 0755 "$fr_dir/$SLURM_JOB_ID" 2>/dev/null
	if ours "$fr_dir/$SLURM_JOB_ID" && { mkdir -m 0755 "$job_dir" 2>/dev/null; ours "$job_dir"; }; then
		fr_prefix="$job_dir/nccl_trace_rank_"
	else
		echo "otelcol-gpu prolog: cannot use $job_dir for the flight recorder's dumps (not created by this job's user); writing them to $fr_dir" >&2
	fi
fi
# TORCH_FR_DUMP_TEMP_FILE is the name PyTorch >= 2.7 reads; older versions
# read TORCH_NCCL_DEBUG_INFO_TEMP_FILE.
export_default TORCH_FR_DUMP_TEMP_FILE "$fr_prefix"
export_default TORCH_NCCL_DEBUG_INFO_TEMP_FILE "$fr_prefix"

# The NCCL inspector plugin (NCCL >= 2.28), where it is installed.
if [[ -r $inspector_plugin ]]; then
	export_default NCCL_PROFILER_PLUGIN "$inspector_plugin"
	export_default NCCL_INSPECTOR_ENABLE 1
	export_default NCCL_INSPECTOR_DUMP_DIR "$inspector_dir"
	export_default NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS 1000000
fi
exit 0
