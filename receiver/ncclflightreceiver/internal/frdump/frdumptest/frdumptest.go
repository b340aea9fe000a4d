// Package frdumptest writes flight recorder dumps in the two forms torch
// produces, from a frdump.Dump, and builds synthetic dumps: for tests and
// benchmarks of the packages that read dumps.
//
// Pickle follows FlightRecorder::dump_dict and torch's pickler (see
// pickletest): keys in torch's insertion order, every frame dict memoized
// and shared, None for unknown watchdog times, a TUPLE2 process_group, ns
// timestamps as LONG1. JSON follows FlightRecorder::dump_json: keys sorted
// (nlohmann's std::map), process_group as a list, 0 for unknown times,
// pg_status values as strings, no frames, entries omitted when empty.
package frdumptest // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump/frdumptest"

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle/pickletest"
)

// v2_10 is the version that made thread_name/thread_id required and renamed
// nccl_version to comm_lib_version (real 2.9 dumps already carry the thread:
// it is written for any version when the entry has one).
var v2_10 = frdump.Version{Major: 2, Minor: 10, Raw: "2.10"}

// Pickle encodes d as torch writes it to disk. Entries with non-nil Frames
// get a frames list.
func Pickle(d *frdump.Dump) []byte {
	w := pickletest.NewWriter()
	w.BeginDict()
	w.String("version").String(d.Version.Raw)

	w.String("pg_config").BeginDict()
	for _, name := range sortedKeys(d.PGConfig) {
		c := d.PGConfig[name]
		w.String(name).BeginDict()
		w.String("name").String(c.Name)
		w.String("desc").String(c.Desc)
		w.String("ranks").String(RanksString(c.Ranks))
		w.EndDict()
	}
	w.EndDict()

	if key := commLibKey(d); key != "" {
		w.String(key).String(d.CommLibVersion)
	}

	w.String("pg_status").BeginDict()
	for _, id := range sortedKeys(d.PGStatus) {
		s := d.PGStatus[id]
		w.String(id).BeginDict()
		w.String("last_enqueued_collective").Int(s.LastEnqueued)
		w.String("last_started_collective").Int(s.LastStarted)
		w.String("last_completed_collective").Int(s.LastCompleted)
		w.EndDict()
	}
	w.EndDict()

	frameIDs := map[frdump.Frame]uint32{}
	w.String("entries").BeginList()
	for i := range d.Entries {
		e := &d.Entries[i]
		w.BeginDict()
		if e.Frames != nil {
			w.String("frames").BeginList()
			for _, f := range e.Frames {
				if id, ok := frameIDs[f]; ok {
					w.Get(id)
					continue
				}
				w.BeginDict()
				w.String("name").String(f.Name)
				w.String("filename").String(f.Filename)
				w.String("line").Int(f.Line)
				w.EndDict()
				frameIDs[f] = w.Memo()
			}
			w.EndList()
		}
		w.String("record_id").Int(e.RecordID)
		w.String("pg_id").Int(e.PGID)
		w.String("process_group").String(e.PGName).String(e.PGDesc).Tuple2()
		if !d.Version.Less(v2_10) || e.ThreadName != "" || e.ThreadID != "" {
			w.String("thread_name").String(e.ThreadName)
			w.String("thread_id").String(e.ThreadID)
		}
		w.String("collective_seq_id").Int(e.CollectiveSeqID)
		w.String("p2p_seq_id").Int(e.P2PSeqID)
		w.String("op_id").Int(e.OpID)
		w.String("profiling_name").String(e.ProfilingName)
		w.String("time_created_ns").Int(e.TimeCreatedNs)
		if e.HasDuration {
			w.String("duration_ms").Float(e.DurationMs)
		}
		w.String("input_sizes")
		writeSizes(w, e.InputSizes)
		w.String("input_dtypes")
		writeStrings(w, e.InputDtypes)
		w.String("output_sizes")
		writeSizes(w, e.OutputSizes)
		w.String("output_dtypes")
		writeStrings(w, e.OutputDtypes)
		w.String("state").String(e.State)
		w.String("time_discovered_started_ns")
		writeTime(w, e.TimeDiscoveredStartedNs)
		w.String("time_discovered_completed_ns")
		writeTime(w, e.TimeDiscoveredCompletedNs)
		w.String("retired").Bool(e.Retired)
		w.String("timeout_ms").Int(e.TimeoutMs)
		w.String("is_p2p").Bool(e.IsP2P)
		w.EndDict()
	}
	w.EndList()
	w.EndDict()
	return w.Bytes()
}

func writeSizes(w *pickletest.Writer, sizes [][]int64) {
	w.BeginList()
	for _, dims := range sizes {
		w.BeginList()
		for _, n := range dims {
			w.Int(n)
		}
		w.EndList()
	}
	w.EndList()
}

func writeStrings(w *pickletest.Writer, ss []string) {
	w.BeginList()
	for _, s := range ss {
		w.String(s)
	}
	w.EndList()
}

// writeTime writes a watchdog time; torch's None is frdump's 0.
func writeTime(w *pickletest.Writer, ns int64) {
	if ns == 0 {
		w.None()
	} else {
		w.Int(ns)
	}
}

// JSON encodes d as torch's dump_nccl_trace_json handler returns it. It
// fails only for a DurationMs that JSON cannot hold (NaN, ±Inf).
func JSON(d *frdump.Dump) ([]byte, error) {
	top := map[string]any{"version": d.Version.Raw}
	if key := commLibKey(d); key != "" {
		top[key] = d.CommLibVersion
	}
	cfg := map[string]map[string]string{}
	for name, c := range d.PGConfig {
		cfg[name] = map[string]string{"name": c.Name, "desc": c.Desc, "ranks": RanksString(c.Ranks)}
	}
	top["pg_config"] = cfg
	status := map[string]map[string]string{}
	for id, s := range d.PGStatus {
		status[id] = map[string]string{
			"last_enqueued_collective":  strconv.FormatInt(s.LastEnqueued, 10),
			"last_started_collective":   strconv.FormatInt(s.LastStarted, 10),
			"last_completed_collective": strconv.FormatInt(s.LastCompleted, 10),
		}
	}
	top["pg_status"] = status
	if len(d.Entries) > 0 {
		entries := make([]map[string]any, len(d.Entries))
		for i := range d.Entries {
			e := &d.Entries[i]
			j := map[string]any{
				"record_id":                    e.RecordID,
				"pg_id":                        e.PGID,
				"process_group":                []string{e.PGName, e.PGDesc},
				"collective_seq_id":            e.CollectiveSeqID,
				"p2p_seq_id":                   e.P2PSeqID,
				"op_id":                        e.OpID,
				"profiling_name":               e.ProfilingName,
				"time_created_ns":              e.TimeCreatedNs,
				"input_sizes":                  nonNilSizes(e.InputSizes),
				"input_dtypes":                 nonNilStrings(e.InputDtypes),
				"output_sizes":                 nonNilSizes(e.OutputSizes),
				"output_dtypes":                nonNilStrings(e.OutputDtypes),
				"state":                        e.State,
				"time_discovered_started_ns":   e.TimeDiscoveredStartedNs,
				"time_discovered_completed_ns": e.TimeDiscoveredCompletedNs,
				"retired":                      e.Retired,
				"timeout_ms":                   e.TimeoutMs,
				"is_p2p":                       e.IsP2P,
			}
			if e.HasDuration {
				j["duration_ms"] = e.DurationMs
			}
			if !d.Version.Less(v2_10) || e.ThreadName != "" || e.ThreadID != "" {
				j["thread_name"] = e.ThreadName
				j["thread_id"] = e.ThreadID
			}
			entries[i] = j
		}
		top["entries"] = entries
	}
	out, err := json.Marshal(top)
	if err != nil {
		return nil, fmt.Errorf("frdumptest: encoding JSON: %w", err)
	}
	return out, nil
}

func nonNilSizes(s [][]int64) [][]int64 {
	if s == nil {
		return [][]int64{}
	}
	return s
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// commLibKey is the key of the communication library's version for d's
// schema version, or "" when d has none.
func commLibKey(d *frdump.Dump) string {
	switch {
	case !d.Version.Less(v2_10):
		return "comm_lib_version"
	case d.CommLibVersion != "":
		return "nccl_version"
	}
	return ""
}

// RanksString renders ranks as torch does in pg_config: "[0, 1, 2]".
func RanksString(ranks []int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, r := range ranks {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(r))
	}
	b.WriteByte(']')
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// SyntheticConfig shapes a synthetic dump.
type SyntheticConfig struct {
	Rank, WorldSize int // default 0 of 8
	// Entries is the number of entries (default 2,000: torch's default
	// TORCH_NCCL_TRACE_BUFFER_SIZE).
	Entries int
	// Version is the schema version (default "2.10").
	Version string
	// Frames is the Python stack depth of each entry (default 16); frames
	// repeat across entries, as real stacks do.
	Frames int
	// NoTiming leaves duration_ms out (TORCH_NCCL_ENABLE_TIMING unset).
	NoTiming bool
	// T0Ns is the first enqueue time (default 2025-11-29T08:00:00Z).
	T0Ns int64
}

// Synthetic builds a data-parallel training dump: per step, a broadcast and
// four gradient all_reduces on the default process group, every collective
// completed and retired, with deterministic pseudo-random timings.
func Synthetic(cfg SyntheticConfig) *frdump.Dump {
	if cfg.WorldSize <= 0 {
		cfg.WorldSize = 8
	}
	if cfg.Entries <= 0 {
		cfg.Entries = 2000
	}
	if cfg.Version == "" {
		cfg.Version = "2.10"
	}
	if cfg.Frames <= 0 {
		cfg.Frames = 16
	}
	if cfg.T0Ns == 0 {
		cfg.T0Ns = 1764403200000000000
	}
	version, err := frdump.ParseVersion(cfg.Version)
	if err != nil {
		version = frdump.Version{Raw: cfg.Version}
	}
	ranks := make([]int, cfg.WorldSize)
	for i := range ranks {
		ranks[i] = i
	}
	d := &frdump.Dump{
		Version:  version,
		PGConfig: map[string]frdump.PGConfig{"0": {Name: "0", Desc: "default_pg", Ranks: ranks}},
		Entries:  make([]frdump.Entry, cfg.Entries),
	}
	if !version.Less(v2_10) {
		d.CommLibVersion = "2.27.3"
	} else {
		d.CommLibVersion = "2.21.5"
	}

	// A pool of frames: a shared outer stack and a few distinct inner ones.
	pool := make([]frdump.Frame, cfg.Frames+4)
	for i := range pool {
		pool[i] = frdump.Frame{
			Name:     fmt.Sprintf("fn_%d", i),
			Filename: fmt.Sprintf("site-packages/trainer/module_%d.py", i%7),
			Line:     int64(100 + 17*i),
		}
	}
	seed := uint64(cfg.Rank)*0x9e3779b97f4a7c15 + 1
	next := func() uint64 { // xorshift64: deterministic, no global state
		seed ^= seed << 13
		seed ^= seed >> 7
		seed ^= seed << 17
		return seed
	}
	now := cfg.T0Ns
	for i := range d.Entries {
		seq := int64(i + 1)
		name, sizes, dtype := "nccl:all_reduce", []int64{13107200}, "BFloat16"
		if i%5 == 0 {
			name, sizes, dtype = "nccl:broadcast", []int64{1}, "Float"
		}
		now += 150_000_000 + int64(next()%20_000_000)
		durMs := 9.0 + float64(next()%1000)/1000
		start := now + 20_000 + int64(next()%30_000)
		frames := make([]frdump.Frame, cfg.Frames)
		copy(frames, pool[i%4:i%4+cfg.Frames])
		e := frdump.Entry{
			RecordID:                  int64(i),
			PGID:                      0,
			PGName:                    "0",
			PGDesc:                    "default_pg",
			CollectiveSeqID:           seq,
			OpID:                      seq,
			ProfilingName:             name,
			TimeCreatedNs:             now,
			InputSizes:                [][]int64{sizes},
			OutputSizes:               [][]int64{sizes},
			InputDtypes:               []string{dtype},
			OutputDtypes:              []string{dtype},
			State:                     frdump.StateCompleted,
			TimeDiscoveredStartedNs:   start + 500_000,
			TimeDiscoveredCompletedNs: start + int64(durMs*1e6) + 700_000,
			Retired:                   true,
			TimeoutMs:                 600000,
			Frames:                    frames,
		}
		if !cfg.NoTiming {
			e.DurationMs, e.HasDuration = durMs, true
		}
		if !version.Less(v2_10) {
			e.ThreadName = "pt_nccl_watchdg"
			e.ThreadID = strconv.Itoa(140230000000000 + cfg.Rank)
		}
		d.Entries[i] = e
	}
	last := int64(cfg.Entries)
	d.PGStatus = map[string]frdump.PGStatus{"0": {LastEnqueued: last, LastStarted: last, LastCompleted: last}}
	return d
}
