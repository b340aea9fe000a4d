//go:build tools

// Package tools pins the etcd server that envtest runs (see ../build.sh).
package tools // import "github.com/otelcol-gpu/otelcol-gpu/tools/envtest/etcd"

import (
	_ "go.etcd.io/etcd/server/v3"
)
