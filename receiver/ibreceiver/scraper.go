package ibreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver"

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostname"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/sysfs"
)

type metricID uint8

const (
	mNetworkIO metricID = iota
	mNetworkPackets
	mErrors
	mXmitWait
	mHWCounter
	mPortState
	mPortPhysState
	mPortRate
	mDeviceInfo
	numMetrics
)

type metricDef struct {
	name, description, unit string
	sum                     bool // cumulative monotonic sum; otherwise gauge
}

var metricDefs = [numMetrics]metricDef{
	mNetworkIO:      {semconv.MetricHWNetworkIO, "Bytes sent and received by the port (port_xmit_data/port_rcv_data, 4-byte words, times 4).", "By", true},
	mNetworkPackets: {semconv.MetricHWNetworkPackets, "Packets sent and received by the port.", "{packet}", true},
	mErrors:         {semconv.MetricHWErrors, "Port error counters, by counter file name.", "{error}", true},
	mXmitWait:       {semconv.MetricIBPortXmitWait, "Ticks during which the port had data to send but no flow-control credits (port_xmit_wait).", "{tick}", true},
	mHWCounter:      {semconv.MetricIBPortHWCounter, "Driver hardware counters (ports/N/hw_counters), by file name.", "{event}", true},
	mPortState:      {semconv.MetricIBPortState, "Logical port state code (4 = ACTIVE); the text is in ib.state.", "{state}", false},
	mPortPhysState:  {semconv.MetricIBPortPhysState, "Physical port state code (5 = LinkUp); the text is in ib.phys_state.", "{state}", false},
	mPortRate:       {semconv.MetricIBPortRate, "Current link rate of the port.", "By/s", false},
	mDeviceInfo:     {semconv.MetricIBDeviceInfo, "Always 1; identifies the HCA in its attributes.", "{info}", false},
}

// Sources of a cumulative value: a change of source is treated as a reset.
const (
	srcCounters uint8 = iota
	srcCountersExt
	srcHWCounters
)

// counterDef maps a file of ports/N/counters (or counters_ext) to a metric.
type counterDef struct {
	metric  metricID
	attrKey string
	attrVal string
	ext     string // counters_ext file preferred over this one when it exists and parses
	scale   uint64 // multiplier to the metric's unit
}

var (
	counterDefs    = map[string]counterDef{}
	extCounterDefs = map[string]counterDef{}
)

func init() {
	dir := semconv.AttrNetworkIODirection
	counterDefs[sysfs.PortXmitData] = counterDef{mNetworkIO, dir, semconv.DirectionTransmit, sysfs.PortXmitData + "_64", 4}
	counterDefs[sysfs.PortRcvData] = counterDef{mNetworkIO, dir, semconv.DirectionReceive, sysfs.PortRcvData + "_64", 4}
	counterDefs[sysfs.PortXmitPackets] = counterDef{mNetworkPackets, dir, semconv.DirectionTransmit, sysfs.PortXmitPackets + "_64", 1}
	counterDefs[sysfs.PortRcvPackets] = counterDef{mNetworkPackets, dir, semconv.DirectionReceive, sysfs.PortRcvPackets + "_64", 1}
	counterDefs[sysfs.PortXmitWait] = counterDef{mXmitWait, "", "", "", 1}
	for _, n := range sysfs.ErrorCounterNames {
		counterDefs[n] = counterDef{mErrors, semconv.AttrErrorType, n, "", 1}
	}
	for _, def := range counterDefs {
		if def.ext != "" {
			extCounterDefs[def.ext] = counterDef{def.metric, def.attrKey, def.attrVal, "", def.scale}
		}
	}
}

// seriesKey identifies one cumulative series within a device.
type seriesKey struct {
	port   string
	metric metricID
	attr   string
}

type seriesState struct {
	last   uint64 // last raw value
	start  pcommon.Timestamp
	source uint8
	gen    uint64
}

// failKey identifies one file within a device: port "" is the device
// directory, dir "" the port directory.
type failKey struct {
	port, dir, name string
}

func (k failKey) rel() string {
	s := ""
	if k.port != "" {
		s = "ports/" + k.port + "/"
	}
	if k.dir != "" {
		s += k.dir + "/"
	}
	return s + k.name
}

type failState struct {
	gen  uint64
	opts metric.MeasurementOption
}

type deviceState struct {
	dev     sysfs.Device  // reused between scrapes; written by the read in flight
	reader  *sysfs.Reader // holds the device's files open between scrapes
	read    *deviceRead   // the read in flight, nil when none
	stuck   bool          // a read missed its deadline; logged, until one finishes
	series  map[seriesKey]seriesState
	failing map[failKey]*failState
	gen     uint64
	skipped map[string]metric.MeasurementOption // by reason
	// points and metrics are the counts of the last scrape's output, to
	// size the next one's slices (otel naming).
	points  [numMetrics]int
	metrics int
}

// deviceRead is one read of a device in its own goroutine: done is closed
// when ReadDevice returned, with err.
type deviceRead struct {
	done chan struct{}
	err  error

	// mu orders the end of the read against a close of the device's
	// files while it is in flight (closeDevice): whichever comes second
	// closes them.
	mu       sync.Mutex
	finished bool
	closing  bool
}

type ibScraper struct {
	logger *zap.Logger
	tb     *metadata.TelemetryBuilder
	reader *sysfs.Reader // lists the devices; each device has a Reader of its own
	// files bounds the sysfs files the devices' Readers hold open
	// between scrapes; past it, files are opened and closed every
	// scrape (counted, logged once).
	files       *sysfs.FileBudget
	filesLogged bool
	root        string
	readOpts    sysfs.ReadOptions
	// readTimeout bounds the reads of one scrape; newTimer makes its timer
	// (a seam for tests: the deadline fires when they say).
	readTimeout time.Duration
	newTimer    func(time.Duration) (<-chan time.Time, func() bool)
	include     map[string]struct{}
	exclude     map[string]struct{}
	hostName    string
	version     string
	now         func() time.Time

	startTime     pcommon.Timestamp // receiver start
	lastScrape    pcommon.Timestamp // timestamp of the previous scrape, 0 before the first
	gen           uint64
	devices       map[string]*deviceState
	missingLogged bool
	// nodeExporter: naming node_exporter (nodeexporter.go)
	nodeExporter bool
}

func newScraper(cfg *Config, set receiver.Settings) (*ibScraper, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	s := &ibScraper{
		logger:      set.Logger,
		tb:          tb,
		reader:      sysfs.NewReader(cfg.SysfsRoot),
		files:       sysfs.NewFileBudget(maxHeldFiles),
		root:        cfg.SysfsRoot,
		readTimeout: effectiveReadTimeout(cfg),
		newTimer: func(d time.Duration) (<-chan time.Time, func() bool) {
			t := time.NewTimer(d)
			return t.C, t.Stop
		},
		version: set.BuildInfo.Version,
		now:     time.Now,
		devices: map[string]*deviceState{},
	}
	if s.logger == nil {
		s.logger = zap.NewNop()
	}
	switch {
	case cfg.Naming == NamingNodeExporter:
		s.nodeExporter = true
		s.readOpts = nodeExporterReadOptions()
	case len(cfg.HWCounters) == 1 && cfg.HWCounters[0] == AllHWCounters:
		s.readOpts.AllHWCounters = true
	default:
		s.readOpts.HWCounters = cfg.HWCounters
	}
	if len(cfg.Devices.Include) > 0 {
		s.include = toSet(cfg.Devices.Include)
	}
	s.exclude = toSet(cfg.Devices.Exclude)
	s.hostName, err = hostname.Resolve(cfg.HostName)
	if err != nil {
		s.logger.Warn("ibreceiver: cannot determine the host name, host.name is left unset; set host_name", zap.Error(err))
	}
	s.startTime = pcommon.NewTimestampFromTime(s.now())
	return s, nil
}

func toSet(names []string) map[string]struct{} {
	m := make(map[string]struct{}, len(names))
	for _, n := range names {
		m[n] = struct{}{}
	}
	return m
}

func (s *ibScraper) start(context.Context, component.Host) error {
	s.startTime = pcommon.NewTimestampFromTime(s.now())
	return nil
}

// shutdown waits for reads still in flight, at most read_timeout (or until
// ctx ends): a read blocked in the kernel cannot be cancelled, and must not
// hold the collector's shutdown. One left behind is logged; its goroutine
// ends when the read returns, and closes its device's files then. The
// files of the others are closed before shutdown returns.
func (s *ibScraper) shutdown(ctx context.Context) error {
	defer s.tb.Shutdown()
	defer func() {
		for name, ds := range s.devices {
			s.closeDevice(ds)
			delete(s.devices, name)
		}
	}()
	var deadline <-chan time.Time
	for name, ds := range s.devices {
		if ds.read == nil {
			continue
		}
		if deadline == nil {
			c, stop := s.newTimer(s.readTimeout)
			defer stop()
			deadline = c
		}
		select {
		case <-ds.read.done:
		case <-deadline:
			s.logger.Warn("ibreceiver: shutting down with a sysfs read still blocked",
				zap.String(semconv.AttrIBDevice, name), zap.String("file", ds.reader.Current()))
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

func (s *ibScraper) selected(name string) bool {
	if s.include != nil {
		if _, ok := s.include[name]; !ok {
			return false
		}
	}
	_, excluded := s.exclude[name]
	return !excluded
}

// scrape reads every selected device and returns one ResourceMetrics per
// device. Unreadable values are skipped (logged once, counted); only a failure
// to list the class directory or a cancelled context is returned as an error.
//
// Devices are read in parallel, one goroutine per device, under one deadline
// (read_timeout) from the start of the reads: a device not read by then is
// skipped in this scrape (counted, logged once) and the others are emitted.
// Its read goes on in the background; until it returns the device is
// skipped without starting another, so a hung file holds at most one
// goroutine. A read that finishes after its scrape's deadline is stale and
// discarded; the next scrape reads the device again.
func (s *ibScraper) scrape(ctx context.Context) (pmetric.Metrics, error) {
	md := pmetric.NewMetrics()
	if err := ctx.Err(); err != nil {
		return md, err
	}
	now := pcommon.NewTimestampFromTime(s.now())
	// Start time of series that appear or reset in this scrape: the last
	// moment they were known not to have their current value.
	resetStart := s.lastScrape
	if resetStart == 0 {
		resetStart = s.startTime
	}
	defer func() { s.lastScrape = now }()

	names, err := s.reader.DeviceNames()
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if !s.missingLogged {
				s.logger.Info("ibreceiver: no InfiniBand devices, the class directory does not exist",
					zap.String("path", s.reader.ClassPath()))
				s.missingLogged = true
			}
			for name, ds := range s.devices {
				s.closeDevice(ds)
				delete(s.devices, name)
			}
			return md, nil
		}
		return md, wrapReadErr(s.reader.ClassPath(), err)
	}
	s.missingLogged = false
	s.gen++
	rms := md.ResourceMetrics()
	rms.EnsureCapacity(len(names))
	started := make([]string, 0, len(names))
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return pmetric.NewMetrics(), err
		}
		if !s.selected(name) {
			continue
		}
		ds := s.devices[name]
		if ds == nil {
			ds = &deviceState{series: map[seriesKey]seriesState{}, failing: map[failKey]*failState{}, reader: sysfs.NewHeldReader(s.root, s.files)}
			s.devices[name] = ds
		}
		if ds.read != nil {
			select {
			case <-ds.read.done: // finished after its scrape's deadline: stale, read again
				ds.read = nil
			default:
				ds.gen = s.gen
				s.skip(ctx, name, ds, metadata.ReasonReadPending)
				continue
			}
		}
		s.startRead(name, ds)
		started = append(started, name)
	}
	var deadline <-chan time.Time
	if len(started) > 0 {
		c, stop := s.newTimer(s.readTimeout)
		defer stop()
		deadline = c
	}
	expired := false
	var neb *nodeExporterMetrics // naming: node_exporter, one resource for the scrape
	for _, name := range started {
		ds := s.devices[name]
		if !expired {
			select {
			case <-ds.read.done:
			case <-deadline:
				expired = true
			case <-ctx.Done():
				return pmetric.NewMetrics(), ctx.Err() // the reads go on; the next scrape sees them
			}
		}
		if expired {
			select {
			case <-ds.read.done:
			default:
				ds.gen = s.gen
				s.skip(ctx, name, ds, metadata.ReasonReadTimeout)
				continue
			}
		}
		err := ds.read.err
		ds.read = nil
		if ds.stuck {
			ds.stuck = false
			s.logger.Info("ibreceiver: device read again within read_timeout", zap.String(semconv.AttrIBDevice, name))
		}
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // vanished since the listing: its state is dropped below
			}
			ds.gen = s.gen
			s.fail(ctx, name, ds, failKey{name: "."}, err)
			continue
		}
		ds.gen = s.gen
		if s.nodeExporter {
			if neb == nil {
				neb = s.newNodeExporterMetrics(md, now)
			}
			s.emitNodeExporter(neb, ds)
			continue
		}
		s.emitDevice(ctx, rms.AppendEmpty(), ds, now, resetStart)
	}
	for name, ds := range s.devices {
		if ds.gen != s.gen && !ds.reading() { // a state with a read in flight stays: one read at a time
			s.closeDevice(ds)
			delete(s.devices, name)
		}
	}
	s.countUnheld(ctx)
	return md, nil
}

// maxHeldFiles bounds the sysfs files held open between scrapes, all
// devices together: about 45 a device with the default hw_counters, up to
// about 110 with every mlx5 hw_counter ("*"), so 2048 holds the files of
// 18 devices or more, well below the descriptor limit the Go runtime
// raises to at start.
const maxHeldFiles = 2048

// countUnheld counts the reads of this scrape that opened and closed
// their file because maxHeldFiles were held, and logs it the first time.
func (s *ibScraper) countUnheld(ctx context.Context) {
	n := s.files.TakeRefused()
	if n == 0 {
		return
	}
	s.tb.IbFilesUnheld.Add(ctx, n)
	if !s.filesLogged {
		s.filesLogged = true
		s.logger.Warn("ibreceiver: holding the most sysfs files open that it will; the others are opened and closed every scrape",
			zap.Int("max_held_files", s.files.Max()), zap.Int64("unheld_reads", n))
	}
}

// closeDevice closes the files the device's Reader holds: now, or, when
// a read of it is in flight, as soon as that read returns.
func (s *ibScraper) closeDevice(ds *deviceState) {
	if rd := ds.read; rd != nil {
		rd.mu.Lock()
		finished := rd.finished
		rd.closing = true
		rd.mu.Unlock()
		if !finished {
			return // the read's goroutine closes them
		}
	}
	ds.reader.Close()
}

// reading says whether a read of the device has not returned yet.
func (ds *deviceState) reading() bool {
	if ds.read == nil {
		return false
	}
	select {
	case <-ds.read.done:
		return false
	default:
		return true
	}
}

// startRead reads the device in a goroutine of its own, into ds.dev.
func (s *ibScraper) startRead(name string, ds *deviceState) {
	rd := &deviceRead{done: make(chan struct{})}
	ds.read = rd
	go func() {
		defer close(rd.done)
		rd.err = ds.reader.ReadDevice(name, s.readOpts, &ds.dev)
		rd.mu.Lock()
		rd.finished = true
		closing := rd.closing
		rd.mu.Unlock()
		if closing {
			ds.reader.Close()
		}
	}()
}

// skip counts a device left out of this scrape, and logs the first time
// its reads miss the deadline, naming the file being read.
func (s *ibScraper) skip(ctx context.Context, name string, ds *deviceState, reason string) {
	if !ds.stuck {
		ds.stuck = true
		s.logger.Warn("ibreceiver: sysfs read did not finish within read_timeout; skipping the device until it does",
			zap.String(semconv.AttrIBDevice, name), zap.String("file", ds.reader.Current()),
			zap.Duration("read_timeout", s.readTimeout), zap.String("reason", reason))
	}
	if ds.skipped == nil {
		ds.skipped = map[string]metric.MeasurementOption{}
	}
	opt, ok := ds.skipped[reason]
	if !ok {
		opt = metric.WithAttributeSet(attribute.NewSet(
			attribute.String(metadata.TelemetryAttrDevice, name),
			attribute.String(metadata.TelemetryAttrReason, reason)))
		ds.skipped[reason] = opt
	}
	s.tb.IbDevicesSkipped.Add(ctx, 1, opt)
}

func wrapReadErr(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("ibreceiver: reading %s: %w", path, err)
}

// fail reports an unreadable value: logged once while it keeps failing,
// counted in otelcol_ib_read_errors every time.
func (s *ibScraper) fail(ctx context.Context, device string, ds *deviceState, k failKey, err error) {
	st := ds.failing[k]
	if st == nil {
		rel := k.rel()
		st = &failState{opts: metric.WithAttributeSet(attribute.NewSet(
			attribute.String(metadata.TelemetryAttrDevice, device),
			attribute.String(metadata.TelemetryAttrCounter, rel),
		))}
		ds.failing[k] = st
		fields := []zap.Field{zap.String(semconv.AttrIBDevice, device), zap.String("file", rel), zap.Error(err)}
		if errors.Is(err, sysfs.ErrNotAvailable) {
			s.logger.Info("ibreceiver: value not available, skipping it until it becomes readable", fields...)
		} else {
			s.logger.Warn("ibreceiver: cannot read value, skipping it until it becomes readable", fields...)
		}
	}
	st.gen = s.gen
	s.tb.IbReadErrors.Add(ctx, 1, st.opts)
}

// effectiveReadTimeout is read_timeout, or collection_interval when that is
// shorter: a scrape's reads end before the next scrape starts.
func effectiveReadTimeout(cfg *Config) time.Duration {
	if cfg.CollectionInterval > 0 && cfg.CollectionInterval < cfg.ReadTimeout {
		return cfg.CollectionInterval
	}
	return cfg.ReadTimeout
}
