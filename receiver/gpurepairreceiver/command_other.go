//go:build !unix

package gpurepairreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver"

import "os/exec"

// killGroupOnCancel leaves exec's default: the process is killed when the
// context ends (no process groups here; the receiver resets GPUs on Linux).
func killGroupOnCancel(*exec.Cmd) {}
