//go:build cgo

package model

import (
	"testing"

	"github.com/NVIDIA/go-dcgm/pkg/dcgm"
)

// TestDCGMFieldsMatchGoDCGM checks the generated copy against go-dcgm's own
// table: after a go-dcgm upgrade, `go generate ./internal/model` refreshes it.
func TestDCGMFieldsMatchGoDCGM(t *testing.T) {
	if len(dcgmFieldIDs) < 500 {
		t.Fatalf("generated table has %d fields; go-dcgm has over 500", len(dcgmFieldIDs))
	}
	for name, id := range dcgmFieldIDs {
		got, ok := dcgm.GetFieldID(name)
		if !ok || FieldID(got) != id {
			t.Errorf("%s: generated id %d, go-dcgm says %d (found %v); run go generate ./internal/model", name, id, got, ok)
		}
	}
}
