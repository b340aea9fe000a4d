package frdump // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"

import (
	"fmt"
	"math/bits"
	"strconv"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle"
)

// Mapping of the entries: each entry dict onto an Entry.

func (p *parser) entries(val any) error {
	if val == nil {
		return nil
	}
	list, ok := val.([]any)
	if !ok {
		return &FieldError{Path: "entries", Want: "a list", Got: describe(val)}
	}
	if p.entryCount+len(list) > p.opts.MaxEntries { // entries streamed before count
		return tooManyEntries(p.entryCount+len(list), p.opts.MaxEntries)
	}
	if !p.charge(len(list), entryBytes, "entries") {
		return p.overErr
	}
	if p.opts.Entry == nil {
		p.dump.Entries = make([]Entry, len(list))
		for i, ev := range list {
			if err := p.entry(i, ev, &p.dump.Entries[i]); err != nil {
				return err
			}
			if p.overErr != nil {
				return p.overErr
			}
		}
		p.entryCount = len(list)
		return nil
	}
	first := p.entryCount // entries the decoder streamed (pickle) come first
	for i, ev := range list {
		// The decoded entry is not needed again: let it go as its Entry
		// is handed over, so that the tree shrinks as the mapping goes.
		list[i] = nil
		n := -1
		if first == 0 {
			n = len(list)
		}
		if err := p.stream(first+i, n, ev); err != nil {
			return err
		}
	}
	return nil
}

func tooManyEntries(n, limit int) error {
	return fmt.Errorf("%w: entries: %d entries, limit %d (MaxEntries)", ErrLimit, n, limit)
}

// stream maps entry i of n (-1: unknown) and hands it to Options.Entry.
func (p *parser) stream(i, n int, v any) error {
	mapErr, entryErr := p.streamOne(i, n, v)
	if mapErr != nil {
		return mapErr
	}
	return entryErr
}

// streamOne maps entry i of n and hands it to Options.Entry, reporting a
// mapping error and Options.Entry's apart.
func (p *parser) streamOne(i, n int, v any) (mapErr, entryErr error) {
	p.cur = Entry{}
	if err := p.entry(i, v, &p.cur); err != nil {
		return err, nil
	}
	return p.handOver(i, n)
}

// handOver hands p.cur, entry i of n, mapped, to Options.Entry.
func (p *parser) handOver(i, n int) (mapErr, entryErr error) {
	if p.overErr != nil {
		return p.overErr, nil
	}
	p.entryCount++
	if err := p.opts.Entry(i, n, &p.cur); err != nil {
		return nil, err
	}
	p.sizeArena.reset()
	p.sizeListArena.reset()
	p.frameArena.reset()
	p.stringArena.reset()
	return nil, nil
}

func (p *parser) entry(idx int, v any, e *Entry) error {
	fields, err := fieldsOf(v, func() string { return entryPath(idx, "") })
	if err != nil {
		return err
	}
	var seen uint32
	for _, field := range fields {
		key, val := field.Key.(string), field.Value
		var ok bool
		var want string
		var f int
		switch key {
		case "record_id":
			f, want = fRecordID, "an integer"
			e.RecordID, ok = asInt(val)
		case "pg_id":
			f, want = fPGID, "an integer"
			e.PGID, ok = asInt(val)
		case "process_group":
			f, want = fProcessGroup, "a (name, desc) pair of strings"
			pg, _ := asList(val)
			if len(pg) == 2 {
				var ok1, ok2 bool
				e.PGName, ok1 = pg[0].(string)
				e.PGDesc, ok2 = pg[1].(string)
				ok = ok1 && ok2
			}
		case "collective_seq_id":
			f, want = fCollectiveSeqID, "an integer"
			e.CollectiveSeqID, ok = asInt(val)
		case "p2p_seq_id":
			f, want = fP2PSeqID, "an integer"
			e.P2PSeqID, ok = asInt(val)
		case "op_id":
			f, want = fOpID, "an integer"
			e.OpID, ok = asInt(val)
		case "profiling_name":
			f, want = fProfilingName, "a string"
			e.ProfilingName, ok = val.(string)
		case "time_created_ns":
			f, want = fTimeCreated, "an integer"
			e.TimeCreatedNs, ok = asInt(val)
		case "duration_ms":
			f, want = fDuration, "a number"
			if val == nil {
				ok = true
			} else {
				e.DurationMs, ok = asFloat(val)
				e.HasDuration = ok
			}
		case "input_sizes":
			f, want = fInputSizes, "a list of lists of integers"
			e.InputSizes, ok = p.sizes(val)
		case "output_sizes":
			f, want = fOutputSizes, "a list of lists of integers"
			e.OutputSizes, ok = p.sizes(val)
		case "input_dtypes":
			f, want = fInputDtypes, "a list of strings"
			e.InputDtypes, ok = p.strings(val)
		case "output_dtypes":
			f, want = fOutputDtypes, "a list of strings"
			e.OutputDtypes, ok = p.strings(val)
		case "state":
			f, want = fState, "a string"
			e.State, ok = val.(string)
		case "time_discovered_started_ns":
			f, want = fDiscoveredStarted, "an integer or None"
			e.TimeDiscoveredStartedNs, ok = asTime(val)
		case "time_discovered_completed_ns":
			f, want = fDiscoveredCompleted, "an integer or None"
			e.TimeDiscoveredCompletedNs, ok = asTime(val)
		case "retired":
			f, want = fRetired, "a bool"
			e.Retired, ok = val.(bool)
		case "timeout_ms":
			f, want = fTimeout, "an integer"
			e.TimeoutMs, ok = asInt(val)
		case "is_p2p":
			f, want = fIsP2P, "a bool"
			e.IsP2P, ok = val.(bool)
		case "thread_name":
			f, want = fThreadName, "a string"
			e.ThreadName, ok = val.(string)
		case "thread_id":
			f, want = fThreadID, "a string"
			e.ThreadID, ok = asIDString(val)
		case "frames":
			f = fFrames
			if e.Frames, err = p.frames(idx, val); err != nil {
				return err
			}
			ok = true
		default:
			p.addUnknown("entries[]." + key)
			continue
		}
		if !ok {
			return &FieldError{Path: entryPath(idx, key), Want: want, Got: describe(val)}
		}
		seen |= 1 << f
	}
	for missing := ^seen & (1<<numEntryFields - 1); missing != 0; missing &= missing - 1 {
		p.missingEntry[bits.TrailingZeros32(missing)]++
	}
	return nil
}

func (p *parser) frames(idx int, val any) ([]Frame, error) {
	if val == nil {
		return nil, nil
	}
	items, ok := val.([]any)
	if !ok {
		return nil, &FieldError{Path: entryPath(idx, "frames"), Want: "a list", Got: describe(val)}
	}
	if len(items) > p.opts.MaxFramesPerEntry {
		items = items[:p.opts.MaxFramesPerEntry]
		p.truncatedFrames++
	}
	if !p.charge(len(items), frameBytes, "entries[].frames") {
		return nil, p.overErr
	}
	frames := p.frameArena.take(len(items))
	for i, fv := range items {
		// torch shares each distinct frame dict among all the entries
		// that show it: convert each once.
		d, shared := fv.(*pickle.Dict)
		if shared {
			if f, ok := p.frameCache[d]; ok {
				frames[i] = f
				continue
			}
		}
		path := func() string { return entryPath(idx, "frames") + "[" + strconv.Itoa(i) + "]" }
		fields, err := fieldsOf(fv, path)
		if err != nil {
			return nil, err
		}
		fr := &frames[i]
		for _, field := range fields {
			key, v := field.Key.(string), field.Value
			ok := true
			var want string
			switch key {
			case "name":
				want = "a string"
				fr.Name, ok = v.(string)
			case "filename":
				want = "a string"
				fr.Filename, ok = v.(string)
			case "line":
				want = "an integer"
				fr.Line, ok = asInt(v)
			default:
				p.addUnknown("entries[].frames[]." + key)
			}
			if !ok {
				return nil, &FieldError{Path: path() + "." + key, Want: want, Got: describe(v)}
			}
		}
		if shared {
			if p.frameCache == nil {
				p.frameCache = map[*pickle.Dict]Frame{}
			}
			p.frameCache[d] = *fr
		}
	}
	return frames, nil
}

// sizes reads input_sizes/output_sizes: one list of dimensions per tensor.
func (p *parser) sizes(val any) ([][]int64, bool) {
	outer, ok := val.([]any)
	if !ok || !p.charge(len(outer), sliceBytes, "input_sizes/output_sizes") {
		return nil, false
	}
	res := p.sizeListArena.take(len(outer))
	for i, inner := range outer {
		dims, ok := asList(inner)
		if !ok || !p.charge(len(dims), int64Bytes, "input_sizes/output_sizes") {
			return nil, false
		}
		row := p.sizeArena.take(len(dims))
		for j, d := range dims {
			if row[j], ok = asInt(d); !ok {
				return nil, false
			}
		}
		res[i] = row
	}
	return res, true
}

func (p *parser) strings(v any) ([]string, bool) {
	items, ok := asList(v)
	if !ok || !p.charge(len(items), stringBytes, "input_dtypes/output_dtypes") {
		return nil, false
	}
	out := p.stringArena.take(len(items))
	for i, it := range items {
		if out[i], ok = it.(string); !ok {
			return nil, false
		}
	}
	return out, true
}
