package loadtest

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/golang/snappy"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// Sinks are accept-all stand-ins for the gateway's backends that count what
// arrives: Tempo (OTLP gRPC), Loki (OTLP/HTTP) and Prometheus (remote
// write, answered 204).
type Sinks struct {
	TempoAddr string // host:port
	LokiURL   string // base URL, the exporter appends /v1/logs
	PromURL   string // remote-write URL

	Spans       SpanCounts
	Logs        atomic.Int64
	Samples     atomic.Int64
	BadRequests atomic.Int64 // bodies that did not decode: a failure of the harness or the gateway
	// RemoteWriteHeld counts remote-write requests that waited on
	// HoldRemoteWrite.
	RemoteWriteHeld atomic.Int64

	opts    SinkOptions
	mu      sync.Mutex
	gate    chan struct{} // non-nil: remote-write requests wait for it to close
	grpcSrv *grpc.Server
	httpSrv *http.Server
	wg      sync.WaitGroup
}

// SpanCounts are what Tempo received.
type SpanCounts struct {
	mu         sync.Mutex
	total      int64
	errors     int64
	slowRoots  int64
	verdicts   int64
	rankTraces map[pcommon.TraceID]int // rank spans per step trace
}

// SpanSnapshot is a copy of the counts.
type SpanSnapshot struct {
	Total, Errors, SlowRoots, Verdicts int64
	// StepTraces is how many step traces had at least one rank span at
	// Tempo; RankSpans how many rank spans arrived.
	StepTraces, RankSpans int64
	// RankSpansOf counts the rank spans that arrived per step trace.
	RankSpansOf map[pcommon.TraceID]int
}

func (c *SpanCounts) add(td ptrace.Traces) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rankTraces == nil {
		c.rankTraces = map[pcommon.TraceID]int{}
	}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				c.total++
				if sp.Status().Code() == ptrace.StatusCodeError {
					c.errors++
				}
				if v, ok := sp.Attributes().Get(semconv.AttrStepSlow); ok && v.Bool() {
					c.slowRoots++
				}
				if _, ok := sp.Attributes().Get(semconv.AttrStragglerVerdict); ok {
					c.verdicts++
				}
				if sp.Name() == semconv.SpanTrainStep && !sp.ParentSpanID().IsEmpty() {
					c.rankTraces[sp.TraceID()]++
				}
			}
		}
	}
}

// Snapshot returns the counts so far.
func (c *SpanCounts) Snapshot() SpanSnapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := SpanSnapshot{Total: c.total, Errors: c.errors, SlowRoots: c.slowRoots, Verdicts: c.verdicts,
		StepTraces: int64(len(c.rankTraces)), RankSpansOf: make(map[pcommon.TraceID]int, len(c.rankTraces))}
	for id, n := range c.rankTraces {
		s.RankSpans += int64(n)
		s.RankSpansOf[id] = n
	}
	return s
}

// SinkOptions change how the sinks answer.
type SinkOptions struct {
	// OnSeries, when set, receives every remote-write request's series.
	OnSeries func([]Series)
}

// StartSinks listens on loopback ports for the three backends.
func StartSinks() (*Sinks, error) { return StartSinksWith(SinkOptions{}) }

// StartSinksWith is StartSinks with options.
func StartSinksWith(opts SinkOptions) (*Sinks, error) {
	s := &Sinks{opts: opts}
	grpcLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("loadtest: tempo sink: %w", err)
	}
	httpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		grpcLn.Close()
		return nil, fmt.Errorf("loadtest: http sinks: %w", err)
	}
	s.TempoAddr = grpcLn.Addr().String()
	s.LokiURL = "http://" + httpLn.Addr().String() + "/otlp"
	s.PromURL = "http://" + httpLn.Addr().String() + "/api/v1/write"

	s.grpcSrv = grpc.NewServer(grpc.MaxRecvMsgSize(64 << 20))
	ptraceotlp.RegisterGRPCServer(s.grpcSrv, &tempoSink{counts: &s.Spans})
	mux := http.NewServeMux()
	mux.HandleFunc("/otlp/v1/logs", s.serveLoki)
	mux.HandleFunc("/api/v1/write", s.serveRemoteWrite)
	s.httpSrv = &http.Server{Handler: mux}

	s.wg.Add(2)
	go func() { defer s.wg.Done(); _ = s.grpcSrv.Serve(grpcLn) }()
	go func() { defer s.wg.Done(); _ = s.httpSrv.Serve(httpLn) }()
	return s, nil
}

// HoldRemoteWrite makes remote-write requests wait, unanswered, until
// release is called: a test can catch a batch in flight.
func (s *Sinks) HoldRemoteWrite() (release func()) {
	gate := make(chan struct{})
	s.mu.Lock()
	s.gate = gate
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.gate = nil
			s.mu.Unlock()
			close(gate)
		})
	}
}

// Close stops both servers.
func (s *Sinks) Close() {
	s.grpcSrv.Stop()
	_ = s.httpSrv.Shutdown(context.Background())
	s.wg.Wait()
}

type tempoSink struct {
	ptraceotlp.UnimplementedGRPCServer
	counts *SpanCounts
}

func (t *tempoSink) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	t.counts.add(req.Traces())
	return ptraceotlp.NewExportResponse(), nil
}

func readBody(r *http.Request) ([]byte, error) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		body = zr
	}
	return io.ReadAll(body)
}

func (s *Sinks) serveLoki(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	req := plogotlp.NewExportRequest()
	if err == nil {
		err = req.UnmarshalProto(body)
	}
	if err != nil {
		s.BadRequests.Add(1)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.Logs.Add(int64(req.Logs().LogRecordCount()))
	resp, _ := plogotlp.NewExportResponse().MarshalProto()
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(resp)
}

func (s *Sinks) serveRemoteWrite(w http.ResponseWriter, r *http.Request) {
	compressed, err := io.ReadAll(r.Body)
	var n int64
	var body []byte
	if err == nil {
		if body, err = snappy.Decode(nil, compressed); err == nil {
			n, err = countSamples(body)
		}
	}
	var series []Series
	if err == nil && s.opts.OnSeries != nil {
		series, err = DecodeRemoteWrite(body)
	}
	if err != nil {
		s.BadRequests.Add(1)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		s.RemoteWriteHeld.Add(1)
		select {
		case <-gate:
		case <-r.Context().Done():
			return // the sender went away: nothing was answered, nothing counted
		}
	}
	if s.opts.OnSeries != nil {
		s.opts.OnSeries(series)
	}
	s.Samples.Add(n)
	w.WriteHeader(http.StatusNoContent)
}

// countSamples counts the samples of a remote-write 1.0 WriteRequest
// (timeseries = 1, and in each TimeSeries samples = 2) without the
// Prometheus module.
func countSamples(b []byte) (int64, error) {
	var n int64
	err := eachField(b, func(num protowire.Number, v []byte) error {
		if num != 1 {
			return nil
		}
		return eachField(v, func(num protowire.Number, _ []byte) error {
			if num == 2 {
				n++
			}
			return nil
		})
	})
	return n, err
}

var errBadProto = errors.New("loadtest: malformed protobuf")

// eachField calls fn with every length-delimited field of b; other wire
// types are skipped.
func eachField(b []byte, fn func(protowire.Number, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errBadProto
		}
		b = b[n:]
		if typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return errBadProto
			}
			if err := fn(num, v); err != nil {
				return err
			}
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return errBadProto
		}
		b = b[n:]
	}
	return nil
}

func (c *SpanCounts) count() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// Series is one remote-write time series: its labels and its samples'
// timestamps (Unix milliseconds).
type Series struct {
	Labels     map[string]string
	Timestamps []int64
}

// DecodeRemoteWrite decodes a remote-write 1.0 WriteRequest (uncompressed):
// TimeSeries (1) with Label (1: name 1, value 2) and Sample (2: value 1,
// timestamp 2).
func DecodeRemoteWrite(b []byte) ([]Series, error) {
	var out []Series
	err := eachField(b, func(num protowire.Number, ts []byte) error {
		if num != 1 {
			return nil
		}
		s := Series{Labels: map[string]string{}}
		err := eachField(ts, func(num protowire.Number, v []byte) error {
			switch num {
			case 1:
				var name, value string
				err := eachField(v, func(num protowire.Number, f []byte) error {
					if num == 1 {
						name = string(f)
					} else if num == 2 {
						value = string(f)
					}
					return nil
				})
				s.Labels[name] = value
				return err
			case 2:
				t, err := sampleTimestamp(v)
				s.Timestamps = append(s.Timestamps, t)
				return err
			}
			return nil
		})
		out = append(out, s)
		return err
	})
	return out, err
}

// sampleTimestamp reads field 2 (varint) of a Sample.
func sampleTimestamp(b []byte) (int64, error) {
	var ts int64
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, errBadProto
		}
		b = b[n:]
		if num == 2 && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, errBadProto
			}
			ts = int64(v)
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return 0, errBadProto
		}
		b = b[n:]
	}
	return ts, nil
}
