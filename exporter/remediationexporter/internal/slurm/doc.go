// Package slurm is the Slurm actuator.Platform and actuator.Repairer of the
// remediation exporter: it drains and resumes nodes (scontrol, or
// slurmrestd v0.0.39+), keeps the drain budget recounted from Slurm, and
// reboots a node it holds drained.
//
// The reboot is `scontrol reboot ASAP nextstate=DOWN reason=<ours> <node>`
// (repair.go). Issue 33 asked for nextstate=RESUME; per scontrol(1), RESUME
// (and ASAP without nextstate) returns the node to service as soon as its
// slurmd registers after the boot, before anything checked its GPUs. The
// repair loop verifies before it releases, so the node must stay out of
// service after the boot: with nextstate=DOWN it stays DOWN with our
// reason (slurmctld appends " : reboot complete") until the verification
// passed and the exporter's Release resumes it.
package slurm // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/slurm"
