// Package sysfs reads the InfiniBand part of a Linux sysfs tree
// (<root>/class/infiniband/<device>/...) into plain structs, in the spirit of
// github.com/prometheus/procfs/sysfs/class_infiniband.go.
//
// The package starts no goroutines and knows nothing about the receiver's
// configuration. Between calls a Reader keeps a reusable read buffer, the
// listings and paths of the device it read last and, made with
// NewHeldReader, that device's files open (within a FileBudget), read
// again with pread until the device or its ports change (held.go).
// Problems with single files (missing permissions, "N/A (no PMA)",
// garbage) are recorded next to the value they concern instead of failing
// the whole device, so that the caller can decide how to report them.
package sysfs // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/sysfs"
