//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/test/testbed"
)

// A node whose agent comes up with a volatile DBE already counted (issue
// 18). The real agent's first scrape of its dcgm-exporter page shows 2
// volatile DBEs on GPU 0: the real gateway (dry run) puts on gpu_faults a
// P1 gpu.memory.dbe record for GPU 0 marked fault.present_at_start=true,
// with the agent's start as its onset, and remediation decides the P1
// quarantine (policy rule p1_hardware) in its dry-run audit. The control:
// GPU 1 on the same page shows 0 at start and then 1, an ordinary DBE
// fault without the mark.
func TestPresentAtStartDBE(t *testing.T) {
	root := repoRoot(t)
	agentBin := binary(t, "otelcol-gpu-agent")
	gatewayBin := binary(t, "otelcol-gpu-gateway")
	brokerBin := buildBroker(t)

	brokerAddr := freeAddr(t)
	broker := startProcess(t, "kfakebroker", nil, brokerBin,
		"-listen", brokerAddr, "-advertise", brokerAddr,
		"-topics", "otlp_spans,otlp_metrics,otlp_logs,gpu_faults,gpu_fault_decisions", "-partitions", "3")
	all := []*process{broker}

	// The page shows the DBE count before anything reads it.
	const host = "atstart-n0"
	const counted, control = 0, 1
	page := newGPUPage(host, 2)
	page.set(counted, func(s *gpuState) { s.dbe = 2 })
	pageAddr := freeAddr(t)
	pageSrv := &http.Server{Addr: pageAddr, Handler: page, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = pageSrv.ListenAndServe() }()
	t.Cleanup(func() { _ = pageSrv.Close() })

	sink := newLogSink(t)
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	gwHealth := freeAddr(t)
	gateway := startProcess(t, "gateway", []string{
		"KAFKA_BROKERS=" + brokerAddr,
		"PROMETHEUS_REMOTE_WRITE_URL=" + sink + "/api/v1/write",
		"LOKI_OTLP_ENDPOINT=" + sink,
		"TEMPO_OTLP_ENDPOINT=" + freeAddr(t),
		"REMEDIATION_DRY_RUN=true",
		"REMEDIATION_AUDIT_FILE=" + audit,
		"OTELCOL_GPU_STORAGE_DIR=" + t.TempDir(),
		"OTELCOL_GPU_HEALTH_ENDPOINT=" + gwHealth,
		"OTELCOL_GPU_TELEMETRY_PORT=" + port(freeAddr(t)),
	}, gatewayBin, "--config", filepath.Join(root, "distributions", "gateway", "config.yaml"))
	all = append(all, gateway)
	waitHTTP(t, "http://"+gwHealth+"/", gateway)
	faults := consumeKeyedFaults(t, brokerAddr)

	// Onsets are written to the second or finer; the receiver starts after this.
	agentStart := time.Now().Truncate(time.Second)
	addrs := testbed.AgentAddrs{Health: freeAddr(t), OTLPHTTP: freeAddr(t), OTLPGRPC: freeAddr(t), Telemetry: freeAddr(t)}
	node := testbed.NodeInputs{Host: host, JobID: "atstart-job", GPUUUIDs: page.uuids, PageURL: "http://" + pageAddr + "/metrics",
		SysfsRoot: filepath.Join(root, "receiver", "ibreceiver", "testdata", "procfs-sys"), FRDir: t.TempDir()}
	env, err := node.AgentEnv(brokerAddr, t.TempDir(), addrs, true)
	if err != nil {
		t.Fatal(err)
	}
	agent := startProcess(t, "agent", env, agentBin,
		"--config", filepath.Join(root, "distributions", "agent", "config.yaml"))
	all = append(all, agent)
	waitHTTP(t, "http://"+addrs.Health+"/", agent)

	// The count already there opens a fault, marked.
	var atStart keyedFault
	eventually(t, 90*time.Second, "GPU 0's DBE present at start on gpu_faults", func() error {
		var ok bool
		if atStart, ok = faults.opened(page.uuids[counted], fault.TypeGPUMemoryDBE); !ok {
			return fmt.Errorf("no open %s record for %s", fault.TypeGPUMemoryDBE, page.uuids[counted])
		}
		return nil
	}, all...)
	t.Logf("present-at-start fault %s: onset %s, on gpu_faults %s after the agent started",
		atStart.ID, atStart.FirstSeen.Format(time.RFC3339Nano), atStart.arrived.Sub(agentStart).Round(100*time.Millisecond))
	if !atStart.PresentAtStart {
		t.Errorf("GPU 0's DBE fault %s lacks %s=true", atStart.ID, fault.AttrPresentAtStart)
	}
	if atStart.Severity != fault.SeverityP1 || atStart.Rule != "dbe_alone" || atStart.HostName != host {
		t.Errorf("GPU 0's DBE fault: severity %s, rule %q, host %q; want P1, dbe_alone, %s",
			atStart.Severity, atStart.Rule, atStart.HostName, host)
	}
	// Its onset is the series' start (the agent's receiver start), not the
	// moment the gateway read it.
	if atStart.FirstSeen.Before(agentStart) || atStart.FirstSeen.After(atStart.arrived) {
		t.Errorf("GPU 0's DBE fault: onset %s, want between the agent's start %s and the record's arrival %s",
			atStart.FirstSeen, agentStart, atStart.arrived)
	}

	// The gateway has read the first scrape (GPU 1 at 0 with it): GPU 1's
	// count now grows, an ordinary DBE fault.
	if rec, ok := faults.opened(page.uuids[control], fault.TypeGPUMemoryDBE); ok {
		t.Fatalf("GPU 1 (0 DBEs at start) has a DBE fault %s before its count grew", rec.ID)
	}
	page.set(control, func(s *gpuState) { s.dbe = 1 })
	var grown keyedFault
	eventually(t, 60*time.Second, "GPU 1's DBE growth 0 -> 1 on gpu_faults", func() error {
		var ok bool
		if grown, ok = faults.opened(page.uuids[control], fault.TypeGPUMemoryDBE); !ok {
			return fmt.Errorf("no open %s record for %s", fault.TypeGPUMemoryDBE, page.uuids[control])
		}
		return nil
	}, all...)
	if grown.PresentAtStart {
		t.Errorf("GPU 1's DBE fault %s (0 at start, then 1) is marked %s", grown.ID, fault.AttrPresentAtStart)
	}
	if grown.Severity != fault.SeverityP1 || grown.ID == atStart.ID {
		t.Errorf("GPU 1's DBE fault %s: severity %s; want P1 and an id other than GPU 0's", grown.ID, grown.Severity)
	}
	// By now the gateway has evaluated many more scrapes of GPU 0's
	// unchanged count: it opened GPU 0's fault once, always marked.
	for _, r := range faults.all(page.uuids[counted], fault.TypeGPUMemoryDBE) {
		if r.State == fault.StateOpen && (r.ID != atStart.ID || !r.PresentAtStart) {
			t.Errorf("GPU 0: an open DBE record %s with present_at_start %t; want only %s, marked", r.ID, r.PresentAtStart, atStart.ID)
		}
	}

	// Remediation (dry run) decides the P1 quarantine of the fault present
	// at start, by the policy's p1_hardware rule.
	var decided auditEntry
	eventually(t, 60*time.Second, "the dry-run P1 quarantine of the fault present at start in the audit", func() error {
		for _, e := range auditEntries(t, audit) {
			if e.FaultID == atStart.ID && e.Step == "quarantine" {
				decided = e
				return nil
			}
		}
		return fmt.Errorf("no quarantine entry for fault %s", atStart.ID)
	}, all...)
	if decided.Decision != "dry_run" || decided.Rule != "p1_hardware" || decided.Severity != string(fault.SeverityP1) || decided.Node != host {
		t.Errorf("audit entry of fault %s: decision %q, rule %q, severity %q, node %q; want dry_run, p1_hardware, P1, %s",
			atStart.ID, decided.Decision, decided.Rule, decided.Severity, decided.Node, host)
	}
	if !slices.Contains(decided.Actions, "cordon") || !strings.Contains(decided.Reason, page.uuids[counted]) {
		t.Errorf("audit entry of fault %s: actions %v, reason %q; want a cordon of GPU 0's node naming %s",
			atStart.ID, decided.Actions, decided.Reason, page.uuids[counted])
	}
	t.Logf("audit: %s %s by %s on %s, actions %v", decided.Step, decided.Decision, decided.Rule, decided.Node, decided.Actions)
}

// all is every record of the GPU's faults of type typ, in arrival order.
func (kf *keyedFaults) all(uuid string, typ fault.Type) []keyedFault {
	kf.mu.Lock()
	defer kf.mu.Unlock()
	var out []keyedFault
	for _, r := range kf.records {
		if r.GPUUUID == uuid && r.Type == typ {
			out = append(out, r)
		}
	}
	return out
}
