//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"
)

// Two real gateway replicas, with the console, on one Kafka-protocol
// broker: only the owner of gpu_faults acts. A standby's console answers
// release, breaker reset and acknowledge with 409 naming the owner and
// its console; the owner's perform them; the audit files show that only
// the owner acted (the standby counts the refusals); otelcol-gpu-ctl
// given both consoles finds the owner and acts there.
func TestConsoleOnlyTheOwnerActs(t *testing.T) {
	ctl := buildCtl(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	const token = "e2e-console-owner-token-0123456789"
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	rs := startConsoleReplicas(t, token, tokenFile, "http", nil)
	ctx := context.Background()

	// Who owns: one says owner, the other standby naming it and its console.
	owner, standby := rs.ownerAndStandby(t, func(st consoleclient.Status, o *consoleReplica) bool {
		return *st.Owner == (consoleclient.Member{Name: o.name, Console: o.console})
	})
	t.Logf("%s owns gpu_faults; %s is a standby", owner.name, standby.name)

	// A fault the owner holds (a dry-run quarantine).
	node := injected{host: "own-n00", partition: 0, typ: "gpu.fell_off_bus"}
	faultID := rs.heldFault(t, owner, node)

	// The standby refuses every control, naming the owner.
	action := consoleclient.Action{Operator: "mallory", Reason: "from the standby"}
	refused := func(what string, err error) {
		t.Helper()
		ae, ok := err.(*consoleclient.APIError)
		if !ok {
			t.Fatalf("%s on the standby: want a 409, got %v", what, err)
		}
		if ae.Status != http.StatusConflict || ae.Owner == nil || ae.Owner.Name != owner.name || ae.Owner.Console != owner.console ||
			!strings.Contains(ae.Message, owner.name+" owns gpu_faults") {
			t.Errorf("%s on the standby: %d %q owner %+v; want 409 naming %s", what, ae.Status, ae.Message, ae.Owner, owner.name)
		}
	}
	_, _, err := standby.client.Release(ctx, node.host, action)
	refused("release", err)
	_, _, err = standby.client.ResetBreaker(ctx, action)
	refused("breaker reset", err)
	_, _, err = standby.client.Ack(ctx, faultID, action)
	refused("acknowledge", err)

	// The owner performs them.
	ack := consoleclient.Action{Operator: "alice", Reason: "seen"}
	if _, _, err := owner.client.Ack(ctx, faultID, ack); err != nil {
		t.Errorf("acknowledge on the owner: %v", err)
	}
	// The CLI with both consoles finds the owner for the release and the
	// reset.
	runCtl := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(ctl, append([]string{"--server", standby.console, "--server", owner.console, "--operator", "alice"}, args...)...)
		cmd.Env = append(os.Environ(), "OTELCOL_GPU_CONSOLE_TOKEN="+token)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("otelcol-gpu-ctl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := runCtl("status")
	for _, want := range []string{standby.console + " ", "standby", owner.console + " ", "owner"} {
		if !strings.Contains(out, want) {
			t.Errorf("otelcol-gpu-ctl status: no %q in\n%s", want, out)
		}
	}
	if out = runCtl("release", node.host, "--reason", "RMA done"); !strings.Contains(out, "released node "+node.host) {
		t.Errorf("otelcol-gpu-ctl release: %s", out)
	}
	if out = runCtl("breaker", "reset", "--reason", "checked"); !strings.Contains(out, "breaker reset by alice") {
		t.Errorf("otelcol-gpu-ctl breaker reset: %s", out)
	}

	// The audits: only the owner acted; the standby counted its refusals.
	controls := map[string]bool{"release": true, "breaker": true, "acknowledge": true}
	performed := func(r *consoleReplica) map[string]int {
		acted := map[string]int{}
		for _, e := range operatorEntries(t, r.audit) {
			if controls[e.Step] && (e.Decision == "acted" || e.Decision == "dry_run") {
				acted[e.Step+"/"+e.Operator]++
			}
		}
		return acted
	}
	ownerActed, standbyActed := performed(owner), performed(standby)
	if want := map[string]int{"release/alice": 1, "breaker/alice": 1, "acknowledge/alice": 1}; fmt.Sprint(ownerActed) != fmt.Sprint(want) {
		t.Errorf("the owner's audit: controls performed %v, want %v", ownerActed, want)
	}
	if len(standbyActed) != 0 {
		t.Errorf("the standby's audit: controls performed %v, want none", standbyActed)
	}
	if n := scrapeCounter(t, standby.metrics, "otelcol_faultconsole_refused_requests"); n != 3 {
		t.Errorf("the standby's refused requests: %v, want 3 (not_owner)", n)
	}
	t.Logf("owner %s performed %v; standby %s performed none", owner.name, ownerActed, standby.name)
}

// operatorEntry is the part of an audit entry a console control writes.
type operatorEntry struct {
	Step     string `json:"step"`
	Decision string `json:"decision"`
	Operator string `json:"operator"`
	Reason   string `json:"reason"`
}

func operatorEntries(t *testing.T, path string) []operatorEntry {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("audit file: %v", err)
	}
	var out []operatorEntry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e operatorEntry
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			out = append(out, e)
		}
	}
	return out
}
