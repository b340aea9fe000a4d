// Package sysfs reads the InfiniBand part of a Linux sysfs tree
// (<root>/class/infiniband/<device>/...) into plain structs, in the spirit of
// github.com/prometheus/procfs/sysfs/class_infiniband.go.
//
// The package is a pure parser: it starts no goroutines, keeps no state
// between calls other than a reusable read buffer, and knows nothing about
// the receiver's configuration. Problems with single files (missing
// permissions, "N/A (no PMA)", garbage) are recorded next to the value they
// concern instead of failing the whole device, so that the caller can decide
// how to report them.
package sysfs // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/sysfs"
