// Package inspector reads the JSON Lines files of the NCCL inspector profiler
// plugin (NCCL >= 2.28, ext-profiler/inspector; RCCL ships a port): one
// compact object per completed collective or point-to-point operation,
// written to <dump_dir>/<hostname>-pid<pid>.log. ParseLine decodes one line;
// Tailer follows a set of such files as they grow and keeps offsets that
// survive a restart.
//
// Two layouts exist and are told apart by the keys present, never by
// inspector_output_format_version. In the released one (v4.0) every line
// carries "header" and "metadata" next to "coll_perf" or "p2p_perf". Newer
// plugin sources write a "dump_stats" marker line carrying header and
// metadata once per communicator and dump cycle, and the perf lines after it
// omit both: they inherit the marker's (Record.Inherit; the Tailer does it).
package inspector // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/inspector"

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Kind says what a line describes.
type Kind uint8

const (
	// KindOther is a well-formed line with none of the sections below, e.g.
	// the "proxy_trace" lines of newer plugins: callers skip it.
	KindOther      Kind = iota
	KindCollective      // the line has coll_perf
	KindP2P             // the line has p2p_perf
	KindDumpStats       // the line has dump_stats (a marker, no operation)
)

func (k Kind) String() string {
	switch k {
	case KindCollective:
		return "collective"
	case KindP2P:
		return "p2p"
	case KindDumpStats:
		return "dump_stats"
	default:
		return "other"
	}
}

// Header is the "header" section: the communicator and this rank in it.
type Header struct {
	CommID   string `json:"id"`        // communicator hash, e.g. "0x7f8c496ae9f661"
	CommName string `json:"comm_name"` // "" when not written; the plugin writes "unknown" when unset
	Rank     int    `json:"rank"`      // -1 when absent
	NRanks   int    `json:"n_ranks"`   // 0 when absent
	NNodes   int    `json:"nnodes"`    // 0 when absent
}

// Metadata is the "metadata" section: the process that wrote the line.
type Metadata struct {
	FormatVersion string    `json:"inspector_output_format_version"` // e.g. "v4.0"; informative only
	Hostname      string    `json:"hostname"`
	PID           int       `json:"pid"`            // 0 when absent
	GitRev        string    `json:"git_rev"`        // the plugin's git revision
	RecMechanism  string    `json:"rec_mechanism"`  // "profiler_plugin", "nccl_profiler_interface", ...
	DumpTimestamp time.Time `json:"dump_timestamp"` // when the plugin wrote the line; zero when absent
}

// DumpStats is the "dump_stats" marker: how many records the plugin wrote in
// this dump cycle and how many its ring buffers dropped (lost data).
type DumpStats struct {
	CollRecords, CollDroppedTotal, CollDroppedSinceLastDump int64
	P2PRecords, P2PDroppedTotal, P2PDroppedSinceLastDump    int64
}

// Record is one inspector line. Fields absent from the line keep the
// documented "unknown" value, so the caller can tell absent from zero.
type Record struct {
	Header
	Metadata
	HasHeader, HasMetadata bool // whether the line had these sections

	Kind Kind

	// From "coll_perf" or "p2p_perf".
	Op           string        // "AllReduce", "ReduceScatter", "Send", "Recv", ...
	Seq          int64         // coll_sn or p2p_sn; -1 when absent
	Peer         int           // p2p_peer; -1 for collectives or when absent
	MsgBytes     int64         // message size in bytes; 0 when absent
	ExecTime     time.Duration // execution time (microsecond resolution); 0 when absent
	TimingSource string        // "kernel_gpu", "kernel_cpu", "collective_cpu"; "" when absent
	AlgoBWGBs    float64       // algorithm bandwidth, GB/s; NaN when absent or written as "nan"
	BusBWGBs     float64       // bus bandwidth, GB/s; NaN when absent or written as "nan"
	Algo, Proto  string        // coll_algo / coll_proto (newer plugins); "" when absent

	// From the verbose event trace (NCCL_INSPECTOR_DUMP_VERBOSE=1); zero
	// when absent. Start/Stop are the operation's start and stop events on
	// the host; KernelStart/KernelStop span the GPU kernels of all channels.
	Start, Stop             time.Time
	KernelStart, KernelStop time.Time
	KernelChannels          int // number of kernel_events entries

	DumpStats DumpStats // KindDumpStats only
}

// Inherit fills the sections the line lacked from ctx, the last line of the
// same file that had them (a dump_stats marker in the newer layout).
func (r *Record) Inherit(ctx *Record) {
	if !r.HasHeader && ctx.HasHeader {
		r.Header, r.HasHeader = ctx.Header, true
	}
	if !r.HasMetadata && ctx.HasMetadata {
		r.Metadata, r.HasMetadata = ctx.Metadata, true
	}
}

// ParseLine decodes one inspector line (without or with its trailing
// newline). Sections and fields are recognised by their presence, not by the
// format version; unknown keys are skipped. It returns an error naming the
// problem for a line that is not one JSON object, holds a value of the wrong
// type, or has a perf section without an operation name. It never panics.
func ParseLine(line []byte) (Record, error) {
	r := Record{
		Header: Header{Rank: -1},
		Seq:    -1, Peer: -1, AlgoBWGBs: math.NaN(), BusBWGBs: math.NaN(),
	}
	s := scanner{b: line}
	if err := s.parseTop(&r); err != nil {
		return Record{}, fmt.Errorf("ncclflightreceiver: inspector line: %w", err)
	}
	return r, nil
}

func (s *scanner) parseTop(r *Record) error {
	err := s.object(func(key []byte) error {
		switch string(key) {
		case "header":
			r.HasHeader = true
			return s.parseHeader(r)
		case "metadata":
			r.HasMetadata = true
			return s.parseMetadata(r)
		case "coll_perf", "p2p_perf", "dump_stats":
			if r.Kind != KindOther {
				return s.errorf("a second operation section (the first was %s)", r.Kind)
			}
			switch key[0] {
			case 'c':
				r.Kind = KindCollective
			case 'p':
				r.Kind = KindP2P
			default:
				r.Kind = KindDumpStats
				return s.parseDumpStats(&r.DumpStats)
			}
			return s.parsePerf(r)
		default:
			return s.skip(1)
		}
	})
	if err != nil {
		return err
	}
	if s.peek() != 0 {
		return s.errorf("trailing data after the object")
	}
	if (r.Kind == KindCollective || r.Kind == KindP2P) && r.Op == "" {
		return fmt.Errorf("%s line has no operation name", r.Kind)
	}
	return nil
}

// object runs field for every key of the object that starts at the cursor.
// An error from field is prefixed with the key, so messages read as a path:
// "coll_perf: coll_sn: ...".
func (s *scanner) object(field func(key []byte) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	first := true
	for {
		key, err := s.nextKey(&first)
		if errors.Is(err, errEnd) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := field(key); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
}

// intField stores an integer that fits an int; absent or NaN leaves *dst.
func (s *scanner) intField(dst *int) error {
	v, ok, err := s.integer()
	if err != nil {
		return err
	}
	if ok {
		if v < math.MinInt32 || v > math.MaxInt32 {
			return s.errorf("%d out of range", v)
		}
		*dst = int(v)
	}
	return nil
}

func (s *scanner) int64Field(dst *int64) error {
	v, ok, err := s.integer()
	if err != nil {
		return err
	}
	if ok {
		*dst = v
	}
	return nil
}

func (s *scanner) floatField(dst *float64) error {
	v, ok, err := s.float()
	if err != nil {
		return err
	}
	if ok {
		*dst = v
	}
	return nil
}

func (s *scanner) textField(dst *string) error {
	v, err := s.text()
	if err != nil {
		return err
	}
	*dst = v
	return nil
}

// microsField stores an epoch timestamp in microseconds; 0 means unknown.
func (s *scanner) microsField(dst *time.Time) error {
	v, ok, err := s.integer()
	if err != nil {
		return err
	}
	if ok && v > 0 {
		*dst = time.UnixMicro(v)
	}
	return nil
}

func (s *scanner) parseHeader(r *Record) error {
	return s.object(func(key []byte) error {
		switch string(key) {
		case "id":
			return s.textField(&r.CommID)
		case "comm_name":
			return s.textField(&r.CommName)
		case "rank":
			return s.intField(&r.Rank)
		case "n_ranks":
			return s.intField(&r.NRanks)
		case "nnodes":
			return s.intField(&r.NNodes)
		default:
			return s.skip(2)
		}
	})
}

func (s *scanner) parseMetadata(r *Record) error {
	return s.object(func(key []byte) error {
		switch string(key) {
		case "inspector_output_format_version":
			return s.textField(&r.FormatVersion)
		case "hostname":
			return s.textField(&r.Hostname)
		case "pid":
			return s.intField(&r.PID)
		case "git_rev":
			return s.textField(&r.GitRev)
		case "rec_mechanism":
			return s.textField(&r.RecMechanism)
		case "dump_timestamp_us":
			return s.microsField(&r.DumpTimestamp)
		default:
			return s.skip(2)
		}
	})
}

// parsePerf reads coll_perf or p2p_perf. The two name their fields alike:
// "coll"/"p2p" for the operation, then "coll_"/"p2p_" and a common suffix.
func (s *scanner) parsePerf(r *Record) error {
	op := "coll"
	if r.Kind == KindP2P {
		op = "p2p"
	}
	return s.object(func(key []byte) error {
		if string(key) == op {
			return s.textField(&r.Op)
		}
		if string(key) == "event_trace_ts" {
			return s.parseEventTrace(r, op)
		}
		suffix, ok := cutPrefix(key, op)
		if !ok {
			return s.skip(2)
		}
		switch string(suffix) {
		case "sn":
			return s.int64Field(&r.Seq)
		case "peer":
			return s.intField(&r.Peer)
		case "msg_size_bytes":
			return s.int64Field(&r.MsgBytes)
		case "exec_time_us":
			return s.execTime(&r.ExecTime)
		case "timing_source":
			return s.textField(&r.TimingSource)
		case "algobw_gbs":
			return s.floatField(&r.AlgoBWGBs)
		case "busbw_gbs":
			return s.floatField(&r.BusBWGBs)
		case "algo":
			return s.textField(&r.Algo)
		case "proto":
			return s.textField(&r.Proto)
		default:
			return s.skip(2)
		}
	})
}

// cutPrefix returns what follows op + "_" in key.
func cutPrefix(key []byte, op string) ([]byte, bool) {
	if len(key) <= len(op)+1 || string(key[:len(op)]) != op || key[len(op)] != '_' {
		return nil, false
	}
	return key[len(op)+1:], true
}

func (s *scanner) parseDumpStats(d *DumpStats) error {
	return s.object(func(key []byte) error {
		switch string(key) {
		case "coll_records":
			return s.int64Field(&d.CollRecords)
		case "coll_dropped_total":
			return s.int64Field(&d.CollDroppedTotal)
		case "coll_dropped_since_last_dump":
			return s.int64Field(&d.CollDroppedSinceLastDump)
		case "p2p_records":
			return s.int64Field(&d.P2PRecords)
		case "p2p_dropped_total":
			return s.int64Field(&d.P2PDroppedTotal)
		case "p2p_dropped_since_last_dump":
			return s.int64Field(&d.P2PDroppedSinceLastDump)
		default:
			return s.skip(2)
		}
	})
}

// execTime accepts whole or fractional microseconds.
func (s *scanner) execTime(dst *time.Duration) error {
	v, ok, err := s.float()
	if err != nil {
		return err
	}
	if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	if v < 0 || v > float64(math.MaxInt64/int64(time.Microsecond)) {
		return s.errorf("%v out of range", v)
	}
	*dst = time.Duration(math.Round(v * float64(time.Microsecond)))
	return nil
}

// parseEventTrace reads event_trace_ts: the operation's start and stop
// timestamps (coll_start_ts or p2p_start_ts, ...) and one entry per channel
// in kernel_events.
func (s *scanner) parseEventTrace(r *Record, op string) error {
	return s.object(func(key []byte) error {
		if string(key) == "kernel_events" {
			return s.parseKernelEvents(r)
		}
		suffix, _ := cutPrefix(key, op)
		switch string(suffix) {
		case "start_ts":
			return s.microsField(&r.Start)
		case "stop_ts":
			return s.microsField(&r.Stop)
		default:
			return s.skip(3)
		}
	})
}

func (s *scanner) parseKernelEvents(r *Record) error {
	if err := s.expect('['); err != nil {
		return err
	}
	if s.peek() == ']' {
		s.i++
		return nil
	}
	for {
		var start, stop time.Time
		err := s.object(func(key []byte) error {
			switch string(key) {
			case "kernel_start_ts":
				return s.microsField(&start)
			case "kernel_stop_ts":
				return s.microsField(&stop)
			default:
				return s.skip(4)
			}
		})
		if err != nil {
			return err
		}
		r.KernelChannels++
		if !start.IsZero() && (r.KernelStart.IsZero() || start.Before(r.KernelStart)) {
			r.KernelStart = start
		}
		if stop.After(r.KernelStop) {
			r.KernelStop = stop
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return s.errorf("want ',' or ']' in kernel_events")
		}
	}
}
