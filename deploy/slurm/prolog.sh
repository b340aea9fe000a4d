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

# The job id on everything: the agent's ncclflight receiver (job_id) and the
# SDK (training.job.id; it also reads SLURM_JOB_ID).
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
export_default TORCH_NCCL_DEBUG_INFO_TEMP_FILE "$fr_dir/nccl_trace_rank_"

# The NCCL inspector plugin (NCCL >= 2.28), where it is installed.
if [[ -r $inspector_plugin ]]; then
	export_default NCCL_PROFILER_PLUGIN "$inspector_plugin"
	export_default NCCL_INSPECTOR_ENABLE 1
	export_default NCCL_INSPECTOR_DUMP_DIR "$inspector_dir"
	export_default NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS 1000000
fi
exit 0
