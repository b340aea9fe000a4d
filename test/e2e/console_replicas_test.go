//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"
)

// consoleReplica is one real gateway replica with its console, as the
// console ownership tests run it.
type consoleReplica struct {
	name, audit, console, metrics string
	client                        *consoleclient.Client
	proc                          *process
}

// consoleReplicas is two gateway replicas on one Kafka-protocol broker,
// each with the console (dry run, its audit in its own file).
type consoleReplicas struct {
	brokerAddr string
	replicas   []*consoleReplica
	procs      []*process // the broker and both replicas
}

// startConsoleReplicas starts the broker and two gateway replicas with
// the shipped config and console.yaml, then extraConfigs. scheme is the
// consoles' ("http" or "https"); hc is the client their console clients
// use (nil: the default).
func startConsoleReplicas(t *testing.T, token, tokenFile, scheme string, hc *http.Client, extraConfigs ...string) *consoleReplicas {
	t.Helper()
	root := repoRoot(t)
	gatewayBin := binary(t, "otelcol-gpu-gateway")
	brokerBin := buildBroker(t)

	brokerAddr := freeAddr(t)
	broker := startProcess(t, "kfakebroker", nil, brokerBin,
		"-listen", brokerAddr, "-advertise", brokerAddr,
		"-topics", "otlp_spans,otlp_metrics,otlp_logs,gpu_faults,gpu_fault_decisions", "-partitions", "2")
	sink := newLogSink(t)
	configs := []string{"--config", filepath.Join(root, "distributions", "gateway", "config.yaml"),
		"--config", filepath.Join(root, "distributions", "gateway", "console.yaml")}
	for _, c := range extraConfigs {
		configs = append(configs, "--config", c)
	}

	rs := &consoleReplicas{brokerAddr: brokerAddr, replicas: make([]*consoleReplica, 2), procs: []*process{broker}}
	for i := range rs.replicas {
		r := &consoleReplica{name: fmt.Sprintf("gateway-%d", i), audit: filepath.Join(t.TempDir(), "audit.jsonl")}
		health, telemetry, consoleAddr := freeAddr(t), freeAddr(t), freeAddr(t)
		r.console, r.metrics = scheme+"://"+consoleAddr, "http://"+telemetry+"/metrics"
		r.client = &consoleclient.Client{BaseURL: r.console, Token: token, HTTP: hc}
		r.proc = startProcess(t, r.name, []string{
			"KAFKA_BROKERS=" + brokerAddr,
			"KAFKA_GROUP_INSTANCE_ID=" + r.name,
			"KAFKA_SESSION_TIMEOUT=6s",
			"REMEDIATION_SESSION_TIMEOUT=6s",
			"REMEDIATION_HEARTBEAT_INTERVAL=500ms",
			"REMEDIATION_DRY_RUN=true",
			"REMEDIATION_AUDIT_FILE=" + r.audit,
			"PROMETHEUS_REMOTE_WRITE_URL=" + sink + "/api/v1/write",
			"LOKI_OTLP_ENDPOINT=" + sink,
			"TEMPO_OTLP_ENDPOINT=" + freeAddr(t),
			"OTELCOL_GPU_STORAGE_DIR=" + t.TempDir(),
			"OTELCOL_GPU_HEALTH_ENDPOINT=" + health,
			"OTELCOL_GPU_TELEMETRY_HOST=" + host(telemetry),
			"OTELCOL_GPU_TELEMETRY_PORT=" + port(telemetry),
			"OTELCOL_GPU_CONSOLE_ENDPOINT=" + consoleAddr,
			"OTELCOL_GPU_CONSOLE_TOKEN_FILE=" + tokenFile,
			"OTELCOL_GPU_CONSOLE_ADVERTISE_URL=" + r.console,
		}, gatewayBin, configs...)
		rs.replicas[i] = r
		rs.procs = append(rs.procs, r.proc)
		waitHTTP(t, "http://"+health+"/", r.proc)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range rs.replicas {
				r.proc.dumpLog(t, 40)
			}
		}
	})
	return rs
}

// ownerAndStandby waits until one replica's status says owner and the
// other's says standby, naming it as isOwner judges.
func (rs *consoleReplicas) ownerAndStandby(t *testing.T, isOwner func(standby consoleclient.Status, owner *consoleReplica) bool) (owner, standby *consoleReplica) {
	t.Helper()
	ctx := context.Background()
	eventually(t, 60*time.Second, "one owner, one standby naming it", func() error {
		var st [2]consoleclient.Status
		for i, r := range rs.replicas {
			var err error
			if st[i], _, err = r.client.Status(ctx); err != nil {
				return err
			}
		}
		for i, j := range []int{1, 0} {
			if st[i].Role == "owner" && st[j].Role == "standby" && st[j].Owner != nil && isOwner(st[j], rs.replicas[i]) {
				owner, standby = rs.replicas[i], rs.replicas[j]
				return nil
			}
		}
		return fmt.Errorf("roles %q (owner %+v) and %q (owner %+v)", st[0].Role, st[0].Owner, st[1].Role, st[1].Owner)
	}, rs.procs...)
	return owner, standby
}

// heldFault injects an XID 79 of node and waits until owner holds the node
// (a dry-run quarantine); it returns the fault's id.
func (rs *consoleReplicas) heldFault(t *testing.T, owner *consoleReplica, node injected) string {
	t.Helper()
	prod := newAgentProducer(t, rs.brokerAddr)
	prod.xid79(t, node)
	var faultID string
	eventually(t, 90*time.Second, "the owner holds the node", func() error {
		nodes, _, err := owner.client.Nodes(context.Background())
		if err != nil {
			return err
		}
		for _, n := range nodes.Nodes {
			if n.Node == node.host && len(n.FaultIDs) > 0 {
				faultID = n.FaultIDs[0]
				return nil
			}
		}
		return fmt.Errorf("%d nodes held, not %s", len(nodes.Nodes), node.host)
	}, rs.procs...)
	return faultID
}

// buildCtl builds cmd/otelcol-gpu-ctl into a temporary directory.
func buildCtl(t *testing.T) string {
	t.Helper()
	ctl := filepath.Join(t.TempDir(), "otelcol-gpu-ctl")
	build := exec.Command("go", "build", "-o", ctl, "./cmd/otelcol-gpu-ctl")
	build.Dir = repoRoot(t)
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building cmd/otelcol-gpu-ctl: %v\n%s", err, msg)
	}
	return ctl
}
