package verify

import (
	"context"

	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// GPU is one GPU a check covers.
type GPU struct {
	UUID  string
	Index int // the driver's (NVML's) index, as nvidia-smi and dcgmi -i take it
}

// Request is one check of a verification, for the given GPUs.
type Request struct {
	Spec repair.CheckSpec
	GPUs []GPU
}

// Runner runs one kind of check. Run blocks until the check ends or ctx
// ends (then it stops what it started and returns ctx's error). A check
// that could not run (DCGM unavailable, a command missing) returns an
// error; a check that ran and found a fault returns a result with Passed
// false. Either way the node is not released.
type Runner interface {
	Run(ctx context.Context, req Request) ([]repair.CheckResult, error)
}
