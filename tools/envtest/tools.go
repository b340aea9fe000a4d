//go:build tools

// Package tools pins the envtest control-plane binaries this module builds
// (see build.sh).
package tools // import "github.com/otelcol-gpu/otelcol-gpu/tools/envtest"

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
