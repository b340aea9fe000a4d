package frdump // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"

import (
	"fmt"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle"
)

// parsePickle decodes the form torch writes to disk: a protocol-2 pickle of
// one dict, decoded by the data-only decoder (objects and code refused).
// With Options.Entry the decoder hands over each entry as soon as it is
// complete (pickle.Options.Stream), which maps and passes it on: the
// entries are never all decoded at once, and MaxTreeBytes counts only the
// rest of the dump and what is being decoded.
func parsePickle(data []byte, opts Options) (*Dump, []Warning, error) {
	p := newParser(len(data), opts)
	popts := opts.Pickle
	popts.MaxInputBytes = opts.MaxBytes
	popts.MaxTreeBytes = opts.MaxTreeBytes
	// A mapping error (an entry that is not one, past MaxEntries, over the
	// output budget) is kept and decoding goes on without mapping: a
	// decoder error found later comes first, as without streaming. An
	// error of Options.Entry stops the decode at once.
	var mapErr, entryErr error
	if opts.Entry != nil {
		popts.StreamKey = "entries"
		popts.Stream = func(item any) error {
			if mapErr != nil {
				return nil
			}
			i := p.entryCount
			switch {
			case i == p.opts.MaxEntries:
				mapErr = fmt.Errorf("%w: entries: more than %d entries (MaxEntries)", ErrLimit, p.opts.MaxEntries)
			case !p.charge(1, entryBytes, "entries"):
				mapErr = p.overErr
			default:
				mapErr, entryErr = p.streamOne(i, -1, item)
			}
			return entryErr
		}
	}
	v, err := pickle.DecodeWithOptions(data, popts)
	switch {
	case entryErr != nil:
		return nil, nil, entryErr // the caller's, as it is
	case err != nil:
		return nil, nil, fmt.Errorf("frdump: decoding pickle: %w", err)
	case mapErr != nil:
		return nil, nil, mapErr
	}
	return p.mapDump(v)
}
