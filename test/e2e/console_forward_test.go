//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"
)

// Two real gateway replicas on one Kafka-protocol broker, their consoles
// over HTTPS with one certificate (as the chart's Secret) and forward on,
// as the chart runs them behind one ClusterIP Service: a release, a breaker
// reset and an acknowledgement sent to the standby are performed exactly
// once, by the owner, whose audit names the operator and the standby they
// came through; the standby's audit holds no control at all, and its
// console counts what it forwarded. otelcol-gpu-ctl given only the
// standby (a Service reaching any replica) acts through it.
func TestConsoleStandbyForwardsToTheOwner(t *testing.T) {
	ctl := buildCtl(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	const token = "e2e-console-forward-token-0123456789"
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	caFile, certFile, keyFile := writeTestCertificates(t, dir)
	// The chart's console-tls.yaml, on loopback.
	fragment := filepath.Join(dir, "console-tls.yaml")
	if err := os.WriteFile(fragment, []byte(fmt.Sprintf(`extensions:
  faultconsole:
    tls:
      cert_file: %s
      key_file: %s
    forward:
      enabled: true
      timeout: 20s
      tls:
        ca_file: %s
`, certFile, keyFile, caFile)), 0o600); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: clientTLS(t, caFile)}}
	t.Cleanup(hc.CloseIdleConnections)

	rs := startConsoleReplicas(t, token, tokenFile, "https", hc, fragment)
	owner, standby := rs.ownerAndStandby(t, func(st consoleclient.Status, o *consoleReplica) bool {
		return st.Owner.Name == o.name && st.ForwardsControls
	})
	ctx := context.Background()
	t.Logf("%s owns gpu_faults; %s is a standby that forwards", owner.name, standby.name)

	node := injected{host: "fwd-n00", partition: 1, typ: "gpu.fell_off_bus"}
	faultID := rs.heldFault(t, owner, node)

	// The controls, sent to the standby only.
	action := consoleclient.Action{Operator: "alice", Reason: "RMA done"}
	rel, _, err := standby.client.Release(ctx, node.host, action)
	if err != nil {
		t.Fatalf("release through the standby: %v", err)
	}
	if rel.Node != node.host || !strings.Contains(rel.Detail, "would call Release") {
		t.Errorf("release through the standby: %+v, want the owner's dry-run release of %s", rel, node.host)
	}
	if _, _, err := standby.client.ResetBreaker(ctx, action); err != nil {
		t.Errorf("breaker reset through the standby: %v", err)
	}
	// otelcol-gpu-ctl with the standby alone, as through a Service that
	// reaches any replica.
	cmd := exec.Command(ctl, "--server", standby.console, "--ca-file", caFile, "--operator", "alice", "ack", faultID, "--reason", "seen")
	cmd.Env = append(os.Environ(), "OTELCOL_GPU_CONSOLE_TOKEN="+token)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "acknowledged fault "+faultID) {
		t.Errorf("otelcol-gpu-ctl ack through the standby: %v\n%s", err, out)
	}
	// A token the owner does not hold is refused by the standby first.
	wrong := &consoleclient.Client{BaseURL: standby.console, Token: token + "x", HTTP: hc}
	if _, _, err := wrong.ResetBreaker(ctx, action); err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Errorf("a wrong token through the standby: %v, want 401", err)
	}

	// Exactly once, by the owner, naming the operator and the standby.
	type entry struct {
		Step, Decision, Operator string
		Via                      string `json:"operator.via"`
		ForwardedFor             string `json:"operator.forwarded_for"`
	}
	controls := map[string]bool{"release": true, "breaker": true, "acknowledge": true}
	entries := func(r *consoleReplica) []entry {
		data, err := os.ReadFile(r.audit)
		if err != nil {
			t.Fatalf("%s's audit: %v", r.name, err)
		}
		var out []entry
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var e entry
			if json.Unmarshal([]byte(line), &e) == nil && controls[e.Step] {
				out = append(out, e)
			}
		}
		return out
	}
	performed := map[string]int{}
	for _, e := range entries(owner) {
		if e.Decision == "acted" || e.Decision == "dry_run" {
			performed[e.Step+"/"+e.Operator+"/via "+e.Via]++
			if !strings.HasPrefix(e.ForwardedFor, "127.0.0.1:") {
				t.Errorf("the owner's %s entry: forwarded_for %q, want the caller's loopback address", e.Step, e.ForwardedFor)
			}
		}
	}
	via := "/via " + standby.name
	if want := map[string]int{"release/alice" + via: 1, "breaker/alice" + via: 1, "acknowledge/alice" + via: 1}; fmt.Sprint(performed) != fmt.Sprint(want) {
		t.Errorf("the owner's audit: controls performed %v, want %v", performed, want)
	}
	if got := entries(standby); len(got) != 0 {
		t.Errorf("the standby's audit: %+v, want no control at all", got)
	}
	if n := scrapeCounter(t, standby.metrics, "otelcol_faultconsole_forwarded_requests"); n != 3 {
		t.Errorf("the standby's forwarded requests: %v, want 3", n)
	}
	held, _, err := owner.client.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range held.Nodes {
		if n.Node == node.host {
			t.Errorf("the owner still holds %s after the release through the standby", node.host)
		}
	}
	t.Logf("owner %s performed %v; standby %s performed none", owner.name, performed, standby.name)
}
