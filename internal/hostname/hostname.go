// Package hostname resolves the host.name an agent's components write and
// stamp: the configured one (the Kubernetes node name from the downward
// API, OTELCOL_GPU_HOST_NAME in the shipped configs), else the machine's.
// The receivers and the provenance processor share it so that what the
// agent's own receivers report and what it stamps on OTLP input name the
// node identically.
package hostname // import "github.com/otelcol-gpu/otelcol-gpu/internal/hostname"

import (
	"errors"
	"fmt"
	"os"
)

// osHostname is os.Hostname; tests replace it.
var osHostname = os.Hostname

// Resolve returns configured when it is not empty, else the machine's host
// name. An error means neither is known; callers decide whether to go on
// without one.
func Resolve(configured string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	h, err := osHostname()
	if err != nil {
		return "", fmt.Errorf("reading the machine's host name: %w", err)
	}
	if h == "" {
		return "", errors.New("the machine's host name is empty")
	}
	return h, nil
}
