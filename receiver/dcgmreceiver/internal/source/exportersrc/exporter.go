// Package exportersrc is the dcgm receiver's `exporter` source: it scrapes
// an existing dcgm-exporter /metrics endpoint (GPU Operator clusters
// already run one) and translates the page into the shared model.
//
// dcgm-exporter only shows the last XID of each GPU, so this source reports
// an XID when that value changes between scrapes (see xidTracker); it
// cannot see a GPU repeating the same XID.
package exportersrc // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/exportersrc"

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source"
)

const (
	// DefaultTimeout bounds one scrape when New is given no timeout.
	DefaultTimeout = 5 * time.Second
	// maxBodyBytes caps a page: 8 GPUs with every field are about 64 KiB,
	// so anything near this is not a dcgm-exporter page.
	maxBodyBytes = 16 << 20
	// Ask for the text format: it is what dcgm-exporter serves and the only
	// one Translate reads.
	acceptHeader = "text/plain;version=0.0.4;q=1,*/*;q=0.1"
)

// Source scrapes a dcgm-exporter endpoint. It implements source.Metrics.
type Source struct {
	endpoint string
	timeout  time.Duration
	logger   *zap.Logger
	// ownHost is this node's name; samples of a page naming another node
	// (its Hostname label) are refused.
	ownHost string
	// foreignLogged: the first refused page is logged, later ones counted.
	foreignLogged bool // guarded by scrapeSlot

	transport *http.Transport
	client    *http.Client

	// scrapeSlot lets one Collect run at a time, so XID changes are seen in
	// the order the pages were served.
	scrapeSlot chan struct{}

	mu       sync.Mutex
	started  bool
	redacted string // endpoint without credentials, for errors and logs
	sink     source.XIDSink
	xids     xidTracker // guarded by scrapeSlot
}

var _ source.Metrics = (*Source)(nil)

// New returns a source that scrapes endpoint (e.g.
// http://localhost:9400/metrics), each scrape bounded by timeout
// (DefaultTimeout when zero or negative), refusing samples whose Hostname
// names another node than ownHost (none when ownHost is empty). It does no
// I/O; Start validates the endpoint.
func New(endpoint string, timeout time.Duration, ownHost string, logger *zap.Logger) *Source {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	// An own transport, so Shutdown closes only this source's connections.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	return &Source{
		endpoint:   endpoint,
		timeout:    timeout,
		ownHost:    ownHost,
		logger:     logger,
		transport:  transport,
		client:     &http.Client{Transport: transport},
		scrapeSlot: make(chan struct{}, 1),
	}
}

// ValidateEndpoint checks that endpoint is an absolute http or https URL,
// for the receiver's config validation.
func ValidateEndpoint(endpoint string) error {
	_, err := parseEndpoint(endpoint)
	return err
}

func parseEndpoint(endpoint string) (*url.URL, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("dcgmreceiver: exporter: endpoint: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("dcgmreceiver: exporter: endpoint %q: scheme must be http or https", u.Redacted())
	}
	if u.Host == "" {
		return nil, fmt.Errorf("dcgmreceiver: exporter: endpoint %q: no host", u.Redacted())
	}
	return u, nil
}

// Start validates the endpoint and keeps xids for the XIDs later scrapes
// see. It makes no network call: an exporter that is not up yet is only an
// error for the scrapes that find it so.
func (s *Source) Start(_ context.Context, xids source.XIDSink) error {
	u, err := parseEndpoint(s.endpoint)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.redacted = u.Redacted()
	s.sink = xids
	s.started = true
	s.logger.Info("Scraping dcgm-exporter", zap.String("endpoint", s.redacted), zap.Duration("timeout", s.timeout))
	return nil
}

// Collect scrapes the endpoint once and returns the requested fields of
// every GPU; an empty fields list means every field on the page. GPUs left
// without a value are left out. XID changes found on the page go to the
// sink given to Start, whatever fields were asked for.
func (s *Source) Collect(ctx context.Context, fields []model.FieldID) (model.Snapshot, error) {
	select {
	case s.scrapeSlot <- struct{}{}:
		defer func() { <-s.scrapeSlot }()
	case <-ctx.Done():
		return model.Snapshot{}, fmt.Errorf("dcgmreceiver: exporter: waiting for the previous scrape: %w", ctx.Err())
	}

	s.mu.Lock()
	started, endpoint, sink := s.started, s.redacted, s.sink
	s.mu.Unlock()
	if !started {
		return model.Snapshot{}, errors.New("dcgmreceiver: exporter: Collect called before Start")
	}

	body, err := s.scrape(ctx)
	if err != nil {
		return model.Snapshot{}, fmt.Errorf("dcgmreceiver: exporter: scraping %s: %w", endpoint, err)
	}
	snap, stats, err := Translate(bytes.NewReader(body), time.Now(), s.ownHost)
	if err != nil {
		return model.Snapshot{}, fmt.Errorf("dcgmreceiver: exporter: scraping %s: %w", endpoint, err)
	}
	if stats.Foreign > 0 && !s.foreignLogged {
		s.foreignLogged = true
		s.logger.Warn("dcgmreceiver: exporter: refusing samples of another node (the page's Hostname label); an agent reports only its own node's GPUs: point the endpoint at this node's dcgm-exporter, or set host_name to the name it reports (counted in otelcol_dcgm_foreign_samples)",
			zap.String("endpoint", endpoint), zap.String("page_hostname", stats.ForeignHost),
			zap.String("host_name", s.ownHost), zap.Int("samples", stats.Foreign))
	}
	s.logger.Debug("Scraped dcgm-exporter",
		zap.String("endpoint", endpoint),
		zap.Int("gpus", len(snap.GPUs)),
		zap.Int("values", stats.Values),
		zap.Int("unknown", stats.Unknown),
		zap.Int("sentinels", stats.Sentinels),
		zap.Int("bad", stats.Bad),
		zap.Int("duplicates", stats.Duplicates))

	for _, event := range s.xids.observe(snap) {
		if sink != nil {
			sink(event)
		}
	}
	return filterFields(snap, fields), nil
}

// scrape GETs the page, bounded by ctx and the source's timeout.
func (s *Source) scrape(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.endpoint, http.NoBody)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", acceptHeader)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10)) // lets the connection be reused
		return nil, fmt.Errorf("HTTP status %s", resp.Status)
	}
	switch expfmt.ResponseFormat(resp.Header).FormatType() {
	case expfmt.TypeProtoCompact, expfmt.TypeProtoDelim, expfmt.TypeProtoText:
		return nil, fmt.Errorf("content type %q is not the text format", resp.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading body: %w", err)
	}
	if len(body) > maxBodyBytes {
		return nil, fmt.Errorf("body larger than %d bytes", maxBodyBytes)
	}
	return body, nil
}

// filterFields keeps the requested fields, dropping GPUs left empty. It
// edits snap in place: the snapshot is this scrape's own.
func filterFields(snap model.Snapshot, fields []model.FieldID) model.Snapshot {
	if len(fields) == 0 {
		return snap
	}
	gpus := snap.GPUs[:0]
	for _, sample := range snap.GPUs {
		sample.Values = slices.DeleteFunc(sample.Values, func(v model.Value) bool {
			return !slices.Contains(fields, v.Field)
		})
		if len(sample.Values) > 0 {
			gpus = append(gpus, sample)
		}
	}
	snap.GPUs = gpus
	return snap
}

// Shutdown closes idle connections. It never blocks: a scrape in flight
// ends with its own context or timeout.
func (s *Source) Shutdown(context.Context) error {
	s.mu.Lock()
	s.started = false
	s.sink = nil
	s.mu.Unlock()
	s.transport.CloseIdleConnections()
	return nil
}
