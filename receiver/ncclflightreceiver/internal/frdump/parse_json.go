package frdump // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// parseJSON decodes the form torch's dump_nccl_trace_json handler returns.
// It differs from the pickle in ways mapDump absorbs: process_group is a
// list, unknown watchdog times are 0 rather than None, pg_status values are
// decimal strings, there are no frames, and entries is omitted when empty.
// Numbers stay json.Number so that ns timestamps keep all their digits.
func parseJSON(data []byte, opts Options) (*Dump, []Warning, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, nil, fmt.Errorf("frdump: decoding JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("frdump: decoding JSON: data after the top-level object at offset %d", dec.InputOffset())
	}
	return mapDump(v, len(data), opts)
}
