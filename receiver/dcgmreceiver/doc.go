// Package dcgmreceiver reads NVIDIA GPUs: DCGM device and profiling fields
// (or NVML, or an existing dcgm-exporter page), every XID occurrence as a
// log record (also from the kernel log), and the pod or Slurm job that owns
// each GPU. See README.md for configuration and docs/semconv.md for names.
package dcgmreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver"
