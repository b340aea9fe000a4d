package ncclflightreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver"

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// Storage keys.
const (
	stateKey     = "ncclflight.state"
	inspectorKey = "ncclflight.inspector"
	// decodingKey names the dumps of the batch being read, written before
	// the first is decoded and deleted after the batch: found at start, it
	// names the batch that killed the process, whose dumps are then
	// poisoned instead of read again.
	decodingKey = "ncclflight.decoding"
	// Bounds of what is remembered: enough for every dump path and finding
	// of a long job, small enough to rewrite on every dump.
	maxRememberedFiles    = 4096
	maxRememberedFindings = 4096
)

// persistedState is what a restart must not forget, so that nothing is
// emitted twice: which dump versions were read, how far each rank's entries
// were emitted, and which findings were reported.
type persistedState struct {
	// Dumps: dump path → the version of it last read. One entry a path,
	// however often the job rewrites the dump (every few steps), so that
	// the state saved after every dump stays small. (Versions before
	// 0.1.0 kept every version read under "files"; that key is ignored:
	// Ranks alone keeps entries from being emitted twice.)
	Dumps map[string]readVersion `json:"dumps"`
	// Ranks: "<directory>/<rank>" → emission progress.
	Ranks map[string]*rankProgress `json:"ranks"`
	// Findings: deduplication key → when reported (unix s).
	Findings map[string]int64 `json:"findings"`
	// Poisoned: dump path → the version of it whose decoding never ended
	// (the process died while decoding it). That version is not read
	// again; a new version of the file is.
	Poisoned map[string]readVersion `json:"poisoned,omitempty"`
}

// readVersion is the version of a dump that was read (watch.File.Key:
// path, inode, size, mtime) and when (unix s).
type readVersion struct {
	Key string `json:"key"`
	At  int64  `json:"at"`
}

// rankProgress tracks one rank's entries. Record ids grow on a rank across
// all its process groups; an id at or below Watermark was emitted, unless it
// is still Pending (seen scheduled or started, waiting for a later dump).
type rankProgress struct {
	Watermark int64   `json:"watermark"`
	Pending   []int64 `json:"pending,omitempty"`
}

func newPersistedState() *persistedState {
	return &persistedState{Dumps: map[string]readVersion{}, Ranks: map[string]*rankProgress{}, Findings: map[string]int64{},
		Poisoned: map[string]readVersion{}}
}

func (p *rankProgress) clone() *rankProgress {
	return &rankProgress{Watermark: p.Watermark, Pending: append([]int64(nil), p.Pending...)}
}

func (s *persistedState) rank(key string) *rankProgress {
	p := s.Ranks[key]
	if p == nil {
		p = &rankProgress{Watermark: -1}
		s.Ranks[key] = p
	}
	return p
}

// trim forgets the oldest dump paths and findings beyond the bounds.
func (s *persistedState) trim() {
	trimOldest(s.Dumps, maxRememberedFiles, func(v readVersion) int64 { return v.At })
	trimOldest(s.Findings, maxRememberedFindings, func(at int64) int64 { return at })
	trimOldest(s.Poisoned, maxRememberedFiles, func(v readVersion) int64 { return v.At })
}

func trimOldest[V any](m map[string]V, limit int, at func(V) int64) {
	if len(m) <= limit {
		return
	}
	type kv struct {
		k string
		v int64
	}
	all := make([]kv, 0, len(m))
	for k, v := range m {
		all = append(all, kv{k, at(v)})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v < all[j].v || all[i].v == all[j].v && all[i].k < all[j].k })
	for _, e := range all[:len(all)-limit] {
		delete(m, e.k)
	}
}

func loadState(ctx context.Context, c storage.Client) (*persistedState, error) {
	data, err := c.Get(ctx, stateKey)
	if err != nil {
		return nil, fmt.Errorf("ncclflightreceiver: reading state from storage: %w", err)
	}
	st := newPersistedState()
	if data == nil {
		return st, nil
	}
	if err := json.Unmarshal(data, st); err != nil {
		// A damaged state must not stop the receiver: start afresh (at the
		// cost of emitting again what the dumps still hold).
		return newPersistedState(), fmt.Errorf("ncclflightreceiver: state in storage is damaged, starting afresh: %w", err)
	}
	if st.Dumps == nil {
		st.Dumps = map[string]readVersion{}
	}
	if st.Ranks == nil {
		st.Ranks = map[string]*rankProgress{}
	}
	if st.Findings == nil {
		st.Findings = map[string]int64{}
	}
	if st.Poisoned == nil {
		st.Poisoned = map[string]readVersion{}
	}
	return st, nil
}

// decodingMark is the batch of dumps being read (decodingKey). Versions
// 0.2.0 and earlier wrote one dump, in Path and Key.
type decodingMark struct {
	Path  string       `json:"path,omitempty"`
	Key   string       `json:"key,omitempty"`
	Batch []markedDump `json:"batch,omitempty"`
	At    int64        `json:"at"`
}

// markedDump is one version of a dump (watch.File.Key).
type markedDump struct {
	Path string `json:"path"`
	Key  string `json:"key"`
}

// dumps lists the marked dumps, whichever form the mark has.
func (m *decodingMark) dumps() []markedDump {
	if m.Path != "" {
		return append([]markedDump{{Path: m.Path, Key: m.Key}}, m.Batch...)
	}
	return m.Batch
}

// markDecoding records, before a batch is decoded, which dumps it holds.
func markDecoding(ctx context.Context, c storage.Client, m decodingMark) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := c.Set(ctx, decodingKey, data); err != nil {
		return fmt.Errorf("ncclflightreceiver: saving the dump being decoded: %w", err)
	}
	return nil
}

// clearDecoding records that the batch being read was read.
func clearDecoding(ctx context.Context, c storage.Client) error {
	if err := c.Delete(ctx, decodingKey); err != nil {
		return fmt.Errorf("ncclflightreceiver: clearing the dump being decoded: %w", err)
	}
	return nil
}

// loadDecoding returns the batch a previous process started reading and
// never finished, if any.
func loadDecoding(ctx context.Context, c storage.Client) (*decodingMark, error) {
	data, err := c.Get(ctx, decodingKey)
	if err != nil || data == nil {
		return nil, err
	}
	var m decodingMark
	if err := json.Unmarshal(data, &m); err != nil || len(m.dumps()) == 0 || slices.ContainsFunc(m.dumps(), func(d markedDump) bool { return d.Path == "" }) {
		return nil, fmt.Errorf("ncclflightreceiver: the record of the dumps being decoded is damaged (%.200q)", data)
	}
	return &m, nil
}

func saveState(ctx context.Context, c storage.Client, st *persistedState) error {
	st.trim()
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if err := c.Set(ctx, stateKey, data); err != nil {
		return fmt.Errorf("ncclflightreceiver: saving state: %w", err)
	}
	return nil
}

func unixNow(now func() time.Time) int64 { return now().Unix() }
