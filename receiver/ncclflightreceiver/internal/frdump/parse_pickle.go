package frdump // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"

import (
	"fmt"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle"
)

// parsePickle decodes the form torch writes to disk: a protocol-2 pickle of
// one dict, decoded by the data-only decoder (objects and code refused).
func parsePickle(data []byte, opts Options) (*Dump, []Warning, error) {
	popts := opts.Pickle
	popts.MaxInputBytes = opts.MaxBytes
	popts.MaxTreeBytes = opts.MaxTreeBytes
	v, err := pickle.DecodeWithOptions(data, popts)
	if err != nil {
		return nil, nil, fmt.Errorf("frdump: decoding pickle: %w", err)
	}
	return mapDump(v, len(data), opts)
}
