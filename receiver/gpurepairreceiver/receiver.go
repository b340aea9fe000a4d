package gpurepairreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
	"github.com/otelcol-gpu/otelcol-gpu/internal/hostname"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/verify"
)

// emitTimeout bounds handing one result record to the pipeline.
const emitTimeout = 10 * time.Second

// repairReceiver serves the repair API and emits each finished job as a
// log record.
type repairReceiver struct {
	cfg  *Config
	set  receiver.Settings
	next consumer.Logs
	opts factoryOptions
	tb   *metadata.TelemetryBuilder

	node    string
	devices Devices
	jobs    *jobs
	api     *api

	mu      sync.Mutex
	runners map[repair.Check]verify.Runner // closed at Shutdown
	server  *http.Server
	ln      net.Listener
	done    chan struct{}
}

func newReceiver(cfg *Config, set receiver.Settings, next consumer.Logs, opts factoryOptions) (*repairReceiver, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	return &repairReceiver{cfg: cfg, set: set, next: next, opts: opts, tb: tb}, nil
}

// Start reads the key, resolves the node, and serves. Any failure stops
// the collector's start: a repair endpoint that cannot check signatures
// must not run.
func (r *repairReceiver) Start(ctx context.Context, host component.Host) error {
	node, err := hostname.Resolve(r.cfg.HostName)
	if err != nil {
		return fmt.Errorf("gpurepair: host_name: %w", err)
	}
	if !repair.ValidNode(node) {
		return fmt.Errorf("gpurepair: host_name %q is not a node name the gateway can sign for", node)
	}
	keys, err := repair.LoadPublicKeys(r.cfg.PublicKeyFile)
	if err != nil {
		return fmt.Errorf("gpurepair: public_key_file: %w", err)
	}
	verifier, err := repair.NewVerifier(keys, r.cfg.MaxSkew, r.cfg.ReplayCapacity)
	if err != nil {
		return fmt.Errorf("gpurepair: %w", err)
	}
	var store nodestate.Store
	if r.cfg.NodeState != nil {
		if store, err = nodestate.FromHost(host, *r.cfg.NodeState); err != nil {
			return fmt.Errorf("gpurepair: nodestate: %w", err)
		}
	}
	// The links_steady check and the confirm endpoint read the node's own
	// readings: a named extension that is not there stops the start.
	var ownStore nodestate.Store
	if id, ok, err := r.cfg.Verify.Links.nodeStateID(); err != nil {
		return fmt.Errorf("gpurepair: verify::links::nodestate: %w", err)
	} else if ok {
		if ownStore, err = nodestate.FromHost(host, id); err != nil {
			return fmt.Errorf("gpurepair: verify::links::nodestate: %w (set it to \"\" to run without: no links_steady check, no confirmation)", err)
		}
	}
	runners, err := r.opts.runners(r.cfg, r.set, ownStore)
	if err != nil {
		return fmt.Errorf("gpurepair: %w", err)
	}
	r.mu.Lock()
	r.runners = runners
	r.mu.Unlock()
	r.node = node
	r.devices = r.opts.devices(r.cfg)
	busy := &busyChecker{devices: r.devices, store: store, smIdle: r.cfg.SMActiveIdle, maxAge: r.cfg.SMActiveMaxAge, now: r.opts.now}
	r.jobs = newJobs(r.cfg.MaxJobs, r.opts.now, r.emit)
	r.api = &api{
		node: node, procRoot: r.cfg.ProcRoot, verifier: verifier, busy: busy, jobs: r.jobs, now: r.opts.now,
		logger: r.set.Logger, tb: r.tb, logged: map[string]bool{}, inFlight: make(chan struct{}, MaxInFlight),
		confirm: newConfirmer(r.devices, ownStore),
		actions: &actions{
			busy: busy, devices: r.devices, runners: runners,
			verifyTimeout: r.cfg.Verify.Timeout, idleWait: r.cfg.Verify.IdleWait, idlePoll: r.cfg.Verify.IdlePollInterval,
			after: r.opts.after, beforeReset: r.opts.beforeReset,
		},
	}
	ln, err := r.cfg.ToListener(ctx)
	if err != nil {
		return fmt.Errorf("gpurepair: listening on endpoint %q: %w", r.cfg.NetAddr.Endpoint, err)
	}
	srv, err := r.cfg.ToServer(ctx, host.GetExtensions(), r.set.TelemetrySettings, r.api)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("gpurepair: %w", err)
	}
	done := make(chan struct{})
	r.mu.Lock()
	r.server, r.ln, r.done = srv, ln, done
	r.mu.Unlock()
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.set.Logger.Error("gpurepair: server stopped", zap.Error(err))
		}
	}()
	checks := make([]string, 0, len(runners))
	for c := range runners {
		checks = append(checks, string(c))
	}
	r.set.Logger.Info("gpurepair: serving the repair API", zap.String("endpoint", ln.Addr().String()),
		zap.Bool("tls", r.cfg.TLS.HasValue()), zap.String("node", node), zap.Int("public_keys", len(keys)),
		zap.Strings("checks", checks), zap.Bool("sm_activity", store != nil), zap.Bool("confirm", ownStore != nil))
	if ownStore == nil {
		r.set.Logger.Warn("gpurepair: verify::links::nodestate is empty: no links_steady check, and the confirm endpoint confirms no fault (the gateway repairs nothing it asks about)")
	}
	if !r.cfg.TLS.HasValue() {
		r.set.Logger.Warn("gpurepair: serving plain HTTP: requests are signed (no forgery, no replay) but readable on the network; set tls")
	}
	return nil
}

// Addr is the address the API listens on ("" before Start).
func (r *repairReceiver) Addr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ln == nil {
		return ""
	}
	return r.ln.Addr().String()
}

// Shutdown stops serving, cancels every job (a running reset command is
// killed) and waits for them, within ctx.
func (r *repairReceiver) Shutdown(ctx context.Context) error {
	r.mu.Lock()
	srv, done := r.server, r.done
	r.mu.Unlock()
	var errs []error
	if srv != nil {
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("gpurepair: stopping the server: %w", err))
			_ = srv.Close()
		}
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
	if r.jobs != nil {
		if err := r.jobs.stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	r.mu.Lock()
	runners := r.runners
	r.runners = nil // closed once
	r.mu.Unlock()
	if err := closeRunners(ctx, runners); err != nil {
		errs = append(errs, err)
	}
	if r.devices != nil {
		if err := r.devices.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("gpurepair: %w", err))
		}
	}
	return errors.Join(errs...)
}

// emit counts a finished job and sends it as a gpu.repair.result record.
func (r *repairReceiver) emit(j repair.Job) {
	r.tb.GpuRepairJobs.Add(context.Background(), 1, metric.WithAttributeSet(attribute.NewSet(
		attribute.String(metadata.TelemetryAttrKind, j.Kind), attribute.String(metadata.TelemetryAttrState, string(j.State)))))
	ctx, cancel := context.WithTimeout(context.Background(), emitTimeout)
	defer cancel()
	if err := r.next.ConsumeLogs(ctx, resultLogs(j, r.opts.now())); err != nil {
		r.set.Logger.Warn("gpurepair: the pipeline refused a job's result record; the gateway still reads the job over the API",
			zap.String("job", j.ID), zap.String("state", string(j.State)), zap.Error(err))
	}
}

// resultLogs is the record of a finished job: event gpu.repair.result on
// the node's resource, the job as JSON in the body.
func resultLogs(j repair.Job, now time.Time) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr(semconv.AttrHostName, j.Node)
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName(metadata.ScopeName)
	lr := sl.LogRecords().AppendEmpty()
	lr.SetTimestamp(pcommon.NewTimestampFromTime(j.Finished))
	lr.SetObservedTimestamp(pcommon.NewTimestampFromTime(now))
	lr.SetEventName(semconv.EventGPURepairResult)
	if j.State == repair.JobPassed {
		lr.SetSeverityNumber(plog.SeverityNumberInfo)
		lr.SetSeverityText("info")
	} else {
		lr.SetSeverityNumber(plog.SeverityNumberWarn)
		lr.SetSeverityText("warn")
	}
	a := lr.Attributes()
	a.PutStr(semconv.AttrEventName, semconv.EventGPURepairResult)
	a.PutStr(semconv.AttrGPURepairJobID, j.ID)
	a.PutStr(semconv.AttrGPURepairKind, j.Kind)
	a.PutStr(semconv.AttrGPURepairState, string(j.State))
	a.PutStr(semconv.AttrGPURepairFaultID, j.FaultID)
	if j.Detail != "" {
		a.PutStr(semconv.AttrGPURepairDetail, j.Detail)
	}
	body, err := json.Marshal(j)
	if err == nil {
		lr.Body().SetStr(string(body))
	}
	return ld
}
