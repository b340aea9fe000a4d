// Package ibreceiver implements the "ib" receiver: it scrapes the InfiniBand
// (and RoCE) port counters, port states and link rates that Linux exposes
// under <sysfs_root>/class/infiniband and emits them as OpenTelemetry metrics,
// one resource per device (host.name, ib.device). See metadata.yaml for the
// metrics and attributes.
package ibreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver"
