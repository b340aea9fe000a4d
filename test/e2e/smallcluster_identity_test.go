//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Per-node identity in the small-cluster mode (issue 29): the central's
// tokens file gives node A and node B a token each. Holding A's token (as
// whoever is root on A does), a sender sends the central straight what
// claims node B: an XID 79 record and a volatile DBE counter growing
// 0 -> 3 on B's GPU. The central binds each request to its token's node:
// the claims are renamed under forged. and counted in the central's own
// telemetry, and no fault record, decision or audit entry names B or its
// GPU, while the same token's XID 79 about A's own GPU, sent after them,
// is decided (the control). Then A's line is removed from the tokens
// file: A is refused (Unauthenticated), B still accepted.
func TestSmallClusterNodeIdentity(t *testing.T) {
	gatewayBin := smallClusterGateway(t)
	pki := newTestPKI(t, t.TempDir())
	const (
		nodeA = "ident-a"
		nodeB = "ident-b"
		gpuA  = "GPU-1de0a000-0000-4000-8000-000000000000"
		gpuB  = "GPU-1de0b000-0000-4000-8000-000000000000"
	)
	tokenA := fmt.Sprintf("token-of-%s-%x", nodeA, time.Now().UnixNano())
	tokenB := fmt.Sprintf("token-of-%s-%x", nodeB, time.Now().UnixNano())
	tokensFile := filepath.Join(t.TempDir(), "agent-tokens")
	writeTokens := func(lines string) {
		// Replaced whole (write, then rename), as docs/small-cluster.md says.
		tmp := tokensFile + ".new"
		if err := os.WriteFile(tmp, []byte(lines), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, tokensFile); err != nil {
			t.Fatal(err)
		}
	}
	writeTokens(tokenA + " " + nodeA + "\n" + tokenB + " " + nodeB + "\n")

	loki := newFaultSink(t)
	central := newSmallClusterCentral(t, gatewayBin, newLogSink(t)+"/api/v1/write", pki, tokensFile, loki.url)
	central.start(t)
	telemetry := "http://" + central.telemetry + "/metrics"

	// A's token, B's hardware.
	if err := sendCentral(central, pki, tokenA, xid79(nodeB, gpuB), nil); err != nil {
		t.Fatalf("A's token claiming B: %v", err)
	}
	for _, v := range []int64{0, 3} {
		if err := sendCentral(central, pki, tokenA, nil, dbeCounter(nodeB, gpuB, v)); err != nil {
			t.Fatalf("A's token claiming B: %v", err)
		}
	}
	// The claims the central renamed, as the agent counts them
	// (TestProvenanceAtTheAgent): host.name of the XID record and both DBE
	// readings; their gpu.uuid (no GPU claim holds in a forged resource);
	// the record's event name, event.name, gpu.xid and gpu.xid.source, and
	// each reading's metric name and gpu.ecc.type.
	want := map[string]float64{"host_name": 3, "gpu": 3, "hardware_signal": 8}
	eventually(t, 30*time.Second, "the central counts A's claims about B", func() error {
		got := map[string]float64{}
		for reason := range want {
			got[reason] = telemetrySum(t, telemetry, "otelcol_processor_provenance_rejected_claims", `reason="`+reason+`"`)
		}
		for reason, n := range want {
			if got[reason] != n {
				return fmt.Errorf("rejected claims %v, want %v", got, want)
			}
		}
		return nil
	}, central.proc)

	// The control, after the forgery: A's token about A's own GPU is
	// decided.
	if err := sendCentral(central, pki, tokenA, xid79(nodeA, gpuA), nil); err != nil {
		t.Fatalf("A's own record: %v", err)
	}
	var control auditEntry
	eventually(t, 60*time.Second, "the dry-run decision on A's own XID 79", func() error {
		for _, e := range auditEntries(t, central.audit) {
			if e.Node == nodeA {
				control = e
				return nil
			}
		}
		return fmt.Errorf("no audit entry for %s", nodeA)
	}, central.proc)
	raw, err := os.ReadFile(central.audit)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.Contains(line, nodeB) || strings.Contains(line, gpuB) {
			t.Errorf("the audit names B: %s", line)
		}
	}
	eventually(t, 30*time.Second, "the control's fault record in Loki", func() error {
		records, _, _ := loki.snapshot()
		for _, r := range records {
			if r.GPUUUID == gpuA {
				return nil
			}
		}
		return fmt.Errorf("%d fault records, none on %s", len(records), gpuA)
	}, central.proc)
	records, _, bad := loki.snapshot()
	for _, err := range bad {
		t.Errorf("a fault record does not parse: %v", err)
	}
	for _, r := range records {
		if r.HostName != nodeA || r.GPUUUID == gpuB {
			t.Errorf("fault %s (%s, rule %s) names host %q, GPU %q: only %s's own XID was genuine", r.ID, r.Type, r.Rule, r.HostName, r.GPUUUID, nodeA)
		}
	}
	t.Logf("A's claims about B renamed and counted; A's own fault %s decided (%s); %d fault records, none about B", control.FaultID, control.Decision, len(records))

	// Revocation: A's line removed, B's kept.
	writeTokens(tokenB + " " + nodeB + "\n")
	eventually(t, 30*time.Second, "A refused once its line is gone", func() error {
		err := sendCentral(central, pki, tokenA, nil, dbeCounter(nodeA, gpuA, 0))
		if status.Code(err) != codes.Unauthenticated {
			return fmt.Errorf("A's token: %v, want Unauthenticated", err)
		}
		return nil
	}, central.proc)
	if err := sendCentral(central, pki, tokenB, nil, dbeCounter(nodeB, gpuB, 0)); err != nil {
		t.Errorf("B's token after A's revocation: %v", err)
	}
	if got := telemetrySum(t, telemetry, "otelcol_nodeauth_refused", `reason="unknown_token"`); got < 1 {
		t.Errorf("otelcol_nodeauth_refused{reason=unknown_token} = %v after A's refusal", got)
	}
	if t.Failed() {
		central.proc.dumpLog(t, 40)
	}
}

// sendCentral sends one OTLP/gRPC logs request (logs, OTLP/HTTP protobuf
// as xid79 returns it) or metrics request to the central over TLS with
// token.
func sendCentral(c *smallClusterCentral, pki *testPKI, token string, logs, metrics []byte) error {
	creds := credentials.NewTLS(&tls.Config{RootCAs: pki.roots, MinVersion: tls.VersionTLS12, ServerName: "127.0.0.1"})
	conn, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	if logs != nil {
		req := plogotlp.NewExportRequest()
		if err := req.UnmarshalProto(logs); err != nil {
			return err
		}
		_, err = plogotlp.NewGRPCClient(conn).Export(ctx, req)
		return err
	}
	req := pmetricotlp.NewExportRequest()
	if err := req.UnmarshalProto(metrics); err != nil {
		return err
	}
	_, err = pmetricotlp.NewGRPCClient(conn).Export(ctx, req)
	return err
}
