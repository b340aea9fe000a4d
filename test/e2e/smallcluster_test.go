//go:build e2e

package e2e

import (
	"compress/gzip"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/test/testbed"
)

// smallClusterOutage is how long the central collector is down.
const smallClusterOutage = 30 * time.Second

// The small-cluster mode without Kafka (docs/small-cluster.md), with the
// real binaries: three agents (distinct simulated nodes: a dcgm-exporter
// page and a sysfs tree each) merged with distributions/agent/small-
// cluster.yaml send OTLP over TLS with their own bearer token to one
// central gateway merged with distributions/gateway/small-cluster.yaml,
// which writes a real Prometheus. A double-bit ECC error injected on one
// node is detected and decided (remediation's dry-run audit). Then the
// central is stopped for 30 s, another node's GPU fails meanwhile, and the
// central restarts on the same state directory: the agents' queues deliver
// every scrape of the outage (no gap in Prometheus) and the fault of the
// outage is decided, the first one not again.
func TestSmallClusterWithoutKafka(t *testing.T) {
	root := repoRoot(t)
	agentBin := binary(t, "otelcol-gpu-agent")
	gatewayBin := smallClusterGateway(t)
	prom := startPrometheus(t)
	pki := newTestPKI(t, t.TempDir())

	const nodes = 3
	hosts := make([]string, nodes)
	tokens := make([]string, nodes)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("small-n%d", i)
		tokens[i] = fmt.Sprintf("token-of-%s-%x", hosts[i], time.Now().UnixNano())
	}
	// One token per node, as docs/small-cluster.md recommends: a line each,
	// the node's name after the token as a comment.
	var lines strings.Builder
	for i := range tokens {
		fmt.Fprintf(&lines, "%s %s\n", tokens[i], hosts[i])
	}
	tokensFile := filepath.Join(t.TempDir(), "agent-tokens")
	if err := os.WriteFile(tokensFile, []byte(lines.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	central := newSmallClusterCentral(t, gatewayBin, prom.writeURL(), pki, tokensFile, newLogSink(t))
	central.start(t)

	pages := make([]*gpuPage, nodes)
	var all []*process
	for i, host := range hosts {
		pages[i] = newGPUPage(host, 2)
		for g := range pages[i].uuids {
			pages[i].uuids[g] = fmt.Sprintf("GPU-5a11c1a5-0000-4000-8000-%06d%06d", i, g)
		}
		pageAddr := freeAddr(t)
		srv := &http.Server{Addr: pageAddr, Handler: pages[i], ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.ListenAndServe() }()
		t.Cleanup(func() { _ = srv.Close() })

		sysfs := filepath.Join(t.TempDir(), "sys")
		copyTree(t, filepath.Join(root, "receiver", "ibreceiver", "testdata", "procfs-sys"), sysfs)
		tokenFile := filepath.Join(t.TempDir(), "central-token")
		if err := os.WriteFile(tokenFile, []byte(tokens[i]+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		addrs := testbed.AgentAddrs{Health: freeAddr(t), OTLPHTTP: freeAddr(t), OTLPGRPC: freeAddr(t), Telemetry: freeAddr(t)}
		node := testbed.NodeInputs{Host: host, JobID: host + "-job", GPUUUIDs: pages[i].uuids,
			PageURL: "http://" + pageAddr + "/metrics", SysfsRoot: sysfs, FRDir: t.TempDir()}
		// No broker: KAFKA_BROKERS names a port nobody listens on, so that
		// anything still sent to Kafka would be lost and the test would see it.
		env, err := node.AgentEnv(freeAddr(t), t.TempDir(), addrs, true)
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, centralEnv(central, pki, tokenFile)...)
		agent := startProcess(t, "agent-"+host, env, agentBin,
			"--config", filepath.Join(root, "distributions", "agent", "config.yaml"),
			"--config", filepath.Join(root, "distributions", "agent", "small-cluster.yaml"))
		all = append(all, agent)
		waitHTTP(t, "http://"+addrs.Health+"/", agent)
	}
	watch := func() []*process { return append([]*process{prom.proc, central.proc}, all...) }

	// Every node's GPU and InfiniBand metrics are queryable in Prometheus,
	// under the node's own host_name.
	eventually(t, 90*time.Second, "every node's metrics in Prometheus", func() error {
		for _, q := range []string{
			`count by (host_name) (hw_temperature_celsius{hw_sensor_location="gpu", host_name=~"small-n.*"})`,
			`count by (host_name) (` + xmitBytes + `)`,
		} {
			res, err := prom.query(q, time.Time{})
			if err != nil {
				return err
			}
			var got []string
			for _, s := range res {
				got = append(got, s.Labels["host_name"])
			}
			slices.Sort(got)
			if !slices.Equal(got, hosts) {
				return fmt.Errorf("%s: hosts %v, want %v", q, got, hosts)
			}
		}
		return nil
	}, watch()...)
	v, _, err := prom.scalar(onHost(xmitBytes, "small-n1"))
	if err != nil || v != float64(fixtureXmitWords*4) {
		t.Errorf("%s on small-n1 = %v (%v), want the fixture's %v", xmitBytes, v, err, float64(fixtureXmitWords*4))
	}

	t.Run("the central refuses what has no agent token", func(t *testing.T) {
		refusedByCentral(t, central, pki, prom, tokens[0], hosts[0])
	})

	// A DBE on node 1, GPU 0: a P1 fault, decided in dry run by the central.
	pages[1].set(0, func(s *gpuState) { s.dbe = 1 })
	first := waitQuarantine(t, central.audit, hosts[1], pages[1].uuids[0], watch()...)
	t.Logf("fault %s on %s decided: %s by %s, actions %v", first.FaultID, first.Node, first.Decision, first.Rule, first.Actions)

	// The central goes away; the agents queue on disk.
	stopped := time.Now()
	central.proc.stop(t)
	pages[2].set(1, func(s *gpuState) { s.dbe = 2 })
	time.Sleep(smallClusterOutage)
	restarted := time.Now()
	central.start(t)

	// What the agents scraped while the central was down arrives: every
	// node's IB series has a sample at least every 10 s across the 30 s
	// outage (scrapes are 1 s apart; the slack is for a loaded machine's
	// late collections, a lost outage leaves a 30 s hole).
	eventually(t, 2*time.Minute, "the outage's scrapes delivered from the agents' queues", func() error {
		for _, host := range hosts {
			if err := noGap(prom, onHost(xmitBytes, host), stopped, restarted.Add(5*time.Second), 10*time.Second); err != nil {
				return fmt.Errorf("%s: %w", host, err)
			}
		}
		return nil
	}, watch()...)

	// The fault that opened during the outage is decided after it...
	second := waitQuarantine(t, central.audit, hosts[2], pages[2].uuids[1], watch()...)
	if second.Time.Before(restarted) {
		t.Errorf("fault %s decided at %s, before the central restarted at %s", second.FaultID, second.Time, restarted)
	}
	// ...and the first is not decided again by the second life, which
	// replays the audit file.
	n := 0
	for _, q := range quarantines(t, central.audit) {
		if q.FaultID == first.FaultID {
			n++
		}
	}
	if n != 1 {
		t.Errorf("fault %s's quarantine audited %d times across the central's two lives, want once", first.FaultID, n)
	}
	for _, q := range quarantines(t, central.audit) {
		if !slices.Contains(hosts[1:], q.Node) {
			t.Errorf("quarantine of node %q (fault %s): only small-n1 and small-n2 have a faulty GPU", q.Node, q.FaultID)
		}
	}
	t.Logf("outage %s: queued scrapes of %d nodes delivered; fault %s decided after the restart", smallClusterOutage, nodes, second.FaultID)
	if t.Failed() {
		for _, p := range watch() {
			p.dumpLog(t, 30)
		}
	}
}

// The central does not start without the agents' tokens, with a tokens
// file whose lines do not each name one node, nor without its TLS
// certificate: an OTLP listener open to the network without these would
// let anyone (or any token holder) speak for every node, or carry the
// agents' tokens in clear.
func TestSmallClusterCentralNeedsTokenAndCertificate(t *testing.T) {
	gatewayBin := smallClusterGateway(t)
	pki := newTestPKI(t, t.TempDir())
	root := repoRoot(t)
	tokens := func(lines string) string {
		path := filepath.Join(t.TempDir(), "agent-tokens")
		if err := os.WriteFile(path, []byte(lines), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := tokens("0123456789abcdef0123456789abcdef node-a\n")
	for _, c := range []struct {
		name string
		env  []string
		want string
	}{
		{"no token", []string{"OTELCOL_GPU_AGENT_TOKENS_FILE=", "OTELCOL_GPU_AGENT_SERVICE_ACCOUNT="},
			"nodeauth/agents: set tokens_file"},
		// One token for every node, as the tokens file once allowed: a line
		// without its node is refused, naming the line.
		{"a token without its node", []string{"OTELCOL_GPU_AGENT_TOKENS_FILE=" + tokens("# the agents\n0123456789abcdef0123456789abcdef\n")},
			"line 2: a token without its node's name"},
		{"a token for two nodes", []string{"OTELCOL_GPU_AGENT_TOKENS_FILE=" + tokens("0123456789abcdef0123456789abcdef node-a\n0123456789abcdef0123456789abcdef node-b\n")},
			`line 2: the token of line 1 (node "node-a") again, for node "node-b"`},
		{"no certificate", []string{"OTELCOL_GPU_AGENT_TOKENS_FILE=" + good, "OTELCOL_GPU_CENTRAL_TLS_CERT_FILE=", "OTELCOL_GPU_CENTRAL_TLS_KEY_FILE="},
			"TLS configuration must include both certificate and key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(gatewayBin,
				"--config", filepath.Join(root, "distributions", "gateway", "config.yaml"),
				"--config", filepath.Join(root, "distributions", "gateway", "small-cluster.yaml"))
			cmd.Env = append(append(os.Environ(),
				"OTELCOL_GPU_CENTRAL_LISTEN="+freeAddr(t),
				"OTELCOL_GPU_CENTRAL_TLS_CERT_FILE="+pki.serverCert,
				"OTELCOL_GPU_CENTRAL_TLS_KEY_FILE="+pki.serverKey,
				"OTELCOL_GPU_STORAGE_DIR="+t.TempDir(),
				"OTELCOL_GPU_HEALTH_ENDPOINT="+freeAddr(t),
				"OTELCOL_GPU_TELEMETRY_PORT="+port(freeAddr(t))), c.env...)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the central started:\n%s", out)
			}
			if !strings.Contains(string(out), c.want) {
				t.Errorf("the central's error does not say %q:\n%s", c.want, out)
			}
		})
	}
}

// An agent with the small-cluster fragment but no central or no token
// refuses its configuration, naming what is missing, rather than start and
// queue for nobody.
func TestSmallClusterAgentNeedsCentralAndToken(t *testing.T) {
	root := repoRoot(t)
	agentBin := binary(t, "otelcol-gpu-agent")
	for _, c := range []struct {
		name, env, want string
	}{
		{"no central", "OTELCOL_GPU_CENTRAL_TOKEN=t", `exporters::otlp_grpc/central: requires a non-empty "endpoint"`},
		{"no token", "OTELCOL_GPU_CENTRAL_ENDPOINT=127.0.0.1:4317", "extensions::bearertokenauth/central: no bearer token provided"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(agentBin, "validate",
				"--config", filepath.Join(root, "distributions", "agent", "config.yaml"),
				"--config", filepath.Join(root, "distributions", "agent", "small-cluster.yaml"))
			cmd.Env = append(os.Environ(), "OTELCOL_GPU_CENTRAL_ENDPOINT=", "OTELCOL_GPU_CENTRAL_TOKEN=", "OTELCOL_GPU_CENTRAL_TOKEN_FILE=", c.env)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the agent accepted its configuration:\n%s", out)
			}
			if !strings.Contains(string(out), c.want) {
				t.Errorf("the agent's error does not say %q:\n%s", c.want, out)
			}
		})
	}
}

// smallClusterCentral is the gateway binary on config.yaml and
// small-cluster.yaml; start runs it (again) on the same state directory and
// audit file.
type smallClusterCentral struct {
	bin, addr, health, audit, telemetry string
	env                                 []string
	proc                                *process
}

// newSmallClusterCentral: remoteWrite is Prometheus's remote-write URL,
// tokensFile the agents' "<token> <node>" lines.
func newSmallClusterCentral(t *testing.T, bin, remoteWrite string, pki *testPKI, tokensFile, loki string) *smallClusterCentral {
	c := &smallClusterCentral{bin: bin, addr: freeAddr(t), health: freeAddr(t), audit: filepath.Join(t.TempDir(), "audit.jsonl"), telemetry: freeAddr(t)}
	c.env = []string{
		"OTELCOL_GPU_CENTRAL_LISTEN=" + c.addr,
		"OTELCOL_GPU_CENTRAL_TLS_CERT_FILE=" + pki.serverCert,
		"OTELCOL_GPU_CENTRAL_TLS_KEY_FILE=" + pki.serverKey,
		"OTELCOL_GPU_AGENT_TOKENS_FILE=" + tokensFile,
		"PROMETHEUS_REMOTE_WRITE_URL=" + remoteWrite,
		"LOKI_OTLP_ENDPOINT=" + loki,
		"TEMPO_OTLP_ENDPOINT=" + freeAddr(t),
		"REMEDIATION_DRY_RUN=true",
		"REMEDIATION_AUDIT_FILE=" + c.audit,
		"STRAGGLER_DECISION_WAIT=1500ms",
		"OTELCOL_GPU_STORAGE_DIR=" + t.TempDir(),
		"OTELCOL_GPU_HEALTH_ENDPOINT=" + c.health,
		"OTELCOL_GPU_TELEMETRY_PORT=" + port(c.telemetry),
	}
	return c
}

func (c *smallClusterCentral) start(t *testing.T) {
	root := repoRoot(t)
	c.proc = startProcess(t, "central", c.env, c.bin,
		"--config", filepath.Join(root, "distributions", "gateway", "config.yaml"),
		"--config", filepath.Join(root, "distributions", "gateway", "small-cluster.yaml"))
	waitHTTP(t, "http://"+c.health+"/", c.proc)
}

// smallClusterGateway is the gateway binary, which must hold the
// bearer-token extension the central's listener needs.
func smallClusterGateway(t *testing.T) string {
	bin := binary(t, "otelcol-gpu-gateway")
	out, err := exec.Command(bin, "components").CombinedOutput()
	if err != nil {
		t.Fatalf("%s components: %v\n%s", bin, err, out)
	}
	if !strings.Contains(string(out), "bearertokenauth") {
		t.Fatalf("%s has no bearertokenauth extension (distributions/gateway/manifest.yaml; rebuild with make build)", bin)
	}
	return bin
}

// refusedByCentral sends a metric naming host "intruder" to the central's
// listener without a token, with a token not in its file, and with a
// listed token over plaintext: each is refused, and Prometheus never shows
// the intruder. The same request with node's token over TLS is accepted
// (the control: the refusals are the token's, not the request's), and
// bound to node: its claim "small-probe" is kept only as forged.host.name.
func refusedByCentral(t *testing.T, c *smallClusterCentral, pki *testPKI, prom *prometheus, goodToken, node string) {
	send := func(host, token string, tlsOn bool) error {
		creds := insecure.NewCredentials()
		if tlsOn {
			creds = credentials.NewTLS(&tls.Config{RootCAs: pki.roots, MinVersion: tls.VersionTLS12, ServerName: "127.0.0.1"})
		}
		conn, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if token != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		}
		md := pmetric.NewMetrics()
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("host.name", host)
		m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName("smallcluster.probe")
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
		dp.SetIntValue(1)
		_, err = pmetricotlp.NewGRPCClient(conn).Export(ctx, pmetricotlp.NewExportRequestFromMetrics(md))
		return err
	}
	for name, err := range map[string]error{
		"no token":       send("intruder", "", true),
		"unlisted token": send("intruder", "not-a-node-token", true),
		"token in clear": send("intruder", goodToken, false),
	} {
		if err == nil {
			t.Errorf("%s: the central accepted the request", name)
			continue
		}
		if code := status.Code(err); name != "token in clear" && code != codes.Unauthenticated {
			t.Errorf("%s: %v, want Unauthenticated", name, err)
		}
		t.Logf("%s: refused: %v", name, err)
	}
	if err := send("small-probe", goodToken, true); err != nil {
		t.Fatalf("a listed token over TLS: %v", err)
	}
	eventually(t, 30*time.Second, "the accepted probe in Prometheus", func() error {
		res, err := prom.query(`smallcluster_probe`, time.Time{})
		if err != nil {
			return err
		}
		for _, s := range res {
			if s.Labels["host_name"] == "intruder" {
				return fmt.Errorf("a refused request reached Prometheus: %v", s.Labels)
			}
		}
		if len(res) != 1 || res[0].Labels["host_name"] != node || res[0].Labels["forged_host_name"] != "small-probe" {
			return fmt.Errorf("probe series %v, want %s's alone, its claim small-probe under forged_host_name", res, node)
		}
		return nil
	}, c.proc, prom.proc)
}

// waitQuarantine waits for the dry-run quarantine of the DBE fault of GPU
// uuid on host in the audit file and checks the decision.
func waitQuarantine(t *testing.T, audit, host, uuid string, watch ...*process) auditEntry {
	t.Helper()
	var decided auditEntry
	eventually(t, 90*time.Second, "the dry-run quarantine of "+host+"'s GPU "+uuid, func() error {
		for _, e := range quarantines(t, audit) {
			if e.Node == host && strings.Contains(e.Reason, uuid) {
				decided = e
				return nil
			}
		}
		return fmt.Errorf("no dry-run quarantine of %s naming %s in %s", host, uuid, audit)
	}, watch...)
	if decided.Rule != "p1_hardware" || !slices.Contains(decided.Actions, "cordon") {
		t.Errorf("quarantine of %s (fault %s): rule %q, actions %v; want p1_hardware with a cordon", host, decided.FaultID, decided.Rule, decided.Actions)
	}
	return decided
}

// noGap checks that series has samples from at most maxGap after from to
// at most maxGap before to, none further apart than maxGap.
func noGap(prom *prometheus, series string, from, to time.Time, maxGap time.Duration) error {
	window := to.Sub(from) + maxGap
	res, err := prom.query(fmt.Sprintf("%s[%ds]", series, int(window.Seconds())+1), to.Add(maxGap))
	if err != nil {
		return err
	}
	if len(res) != 1 {
		return fmt.Errorf("%s: %d series, want 1", series, len(res))
	}
	prev := from
	for _, s := range res[0].Values {
		at := sampleTime(s)
		if at.Before(from) {
			continue
		}
		if gap := at.Sub(prev); gap > maxGap {
			return fmt.Errorf("no sample between %s and %s (%s)", prev.Format(time.TimeOnly), at.Format(time.TimeOnly), gap.Round(time.Millisecond))
		}
		prev = at
		if !at.Before(to) {
			return nil
		}
	}
	return fmt.Errorf("the newest sample is at %s, want one after %s", prev.Format(time.TimeOnly), to.Format(time.TimeOnly))
}

// onHost adds a host_name matcher to a series selector with labels.
func onHost(series, host string) string {
	return strings.TrimSuffix(series, "}") + `,host_name="` + host + `"}`
}

// The all-in-one binary on its shipped config, as `make run` starts it:
// its metrics are readable without extra configuration on the Prometheus
// scrape endpoint, and with remote-write.yaml merged they reach a real
// Prometheus by remote write.
func TestSmallClusterAllInOneMetrics(t *testing.T) {
	root := repoRoot(t)
	bin := binary(t, "otelcol-gpu")
	out, err := exec.Command(bin, "components").CombinedOutput()
	if err != nil {
		t.Fatalf("%s components: %v\n%s", bin, err, out)
	}
	if !strings.Contains(string(out), "prometheusexporter") {
		t.Fatalf("%s has no prometheus exporter (builder-config.yaml; rebuild with make build)", bin)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	want := float64(fixtureXmitWords * 4)
	start := func(name string, extra []string, configs ...string) (scrape string, p *process) {
		scrape, health := freeAddr(t), freeAddr(t)
		env := append([]string{
			"SYSFS_ROOT=" + filepath.Join(root, "receiver", "ibreceiver", "testdata", "procfs-sys"),
			"NCCL_FR_DIR=" + filepath.Join(root, "receiver", "ncclflightreceiver", "internal", "frdump", "testdata", "dp8-straggler5-v2.10"),
			"NCCL_INSPECTOR_DIR=" + t.TempDir(),
			"OTELCOL_GPU_STORAGE_DIR=" + t.TempDir(),
			"OTELCOL_GPU_CAPTURE_FILE=" + filepath.Join(t.TempDir(), "capture.jsonl"),
			"OTELCOL_GPU_DEBUG_VERBOSITY=basic",
			"IB_COLLECTION_INTERVAL=1s",
			"OTELCOL_GPU_PROMETHEUS_ENDPOINT=" + scrape,
			"OTELCOL_GPU_HEALTH_ENDPOINT=" + health,
			"OTELCOL_GPU_TELEMETRY_PORT=" + port(freeAddr(t)),
			"OTLP_GRPC_ENDPOINT=" + freeAddr(t),
			"OTLP_HTTP_ENDPOINT=" + freeAddr(t),
		}, extra...)
		var args []string
		for _, c := range configs {
			args = append(args, "--config", filepath.Join(root, "distributions", "otelcol-gpu", c))
		}
		p = startProcess(t, name, env, bin, args...)
		waitHTTP(t, "http://"+health+"/", p)
		return scrape, p
	}

	// The shipped config alone: the scrape endpoint.
	scrape, p := start("all-in-one", nil, "config.yaml")
	eventually(t, 60*time.Second, "the fixture's counter on the all-in-one's scrape endpoint", func() error {
		return scrapedValue("http://"+scrape+"/metrics", host, want)
	}, p)
	p.stop(t)

	// With remote-write.yaml: a real Prometheus has it too.
	prom := startPrometheus(t)
	scrape, p = start("all-in-one-rw", []string{"PROMETHEUS_REMOTE_WRITE_URL=" + prom.writeURL()}, "config.yaml", "remote-write.yaml")
	eventually(t, 60*time.Second, "the fixture's counter in Prometheus by remote write", func() error {
		v, labels, err := prom.scalar(onHost(xmitBytes, host))
		if err != nil {
			return err
		}
		if v != want {
			return fmt.Errorf("%s = %v (labels %v), want %v", xmitBytes, v, labels, want)
		}
		return nil
	}, p, prom.proc)
	if err := scrapedValue("http://"+scrape+"/metrics", host, want); err != nil {
		t.Errorf("scrape endpoint with remote-write.yaml merged: %v", err)
	}
}

// scrapedValue finds the fixture's mlx5_0 port 1 transmit counter of host
// on a Prometheus scrape page and compares its value.
func scrapedValue(url, host string, want float64) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "hw_network_io_bytes_total{") {
			continue
		}
		ok := true
		for _, l := range []string{`ib_device="mlx5_0"`, `ib_port="1"`, `network_io_direction="transmit"`, `host_name="` + host + `"`} {
			ok = ok && strings.Contains(line, l)
		}
		if !ok {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return fmt.Errorf("%q: %w", line, err)
		}
		if v != want {
			return fmt.Errorf("%q: value %v, want %v", line, v, want)
		}
		return nil
	}
	return fmt.Errorf("%s has no hw_network_io_bytes_total of mlx5_0 port 1 transmit on host %s (%d bytes)", url, host, len(body))
}

// The detection suite's scenarios through the small-cluster mode: the
// testbed's simulated nodes (16-rank jobs, 2 nodes each: a compute
// straggler, an NVLink degradation and a healthy job), one real agent per
// node with small-cluster.yaml, one central, and the fault records read
// back from what the central sends Loki (there is no gpu_faults topic).
// Straggler detection, correlation and tail sampling run in the one
// central; every fault it opens is decided (dry run) by its remediation.
func TestSmallClusterDetection(t *testing.T) {
	root := repoRoot(t)
	agentBin := binary(t, "otelcol-gpu-agent")
	gatewayBin := smallClusterGateway(t)
	prom := startPrometheus(t)
	pki := newTestPKI(t, t.TempDir())

	cluster := newDetectionCluster(t)

	// One token per node, each in its node's own file.
	tokenFiles := map[string]string{}
	var lines strings.Builder
	for _, n := range cluster.Nodes() {
		token := fmt.Sprintf("token-of-%s-%x", n.Host, time.Now().UnixNano())
		fmt.Fprintf(&lines, "%s %s\n", token, n.Host)
		tokenFiles[n.Host] = filepath.Join(t.TempDir(), "central-token")
		if err := os.WriteFile(tokenFiles[n.Host], []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tokensFile := filepath.Join(t.TempDir(), "agent-tokens")
	if err := os.WriteFile(tokensFile, []byte(lines.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	loki := newFaultSink(t)
	central := newSmallClusterCentral(t, gatewayBin, prom.writeURL(), pki, tokensFile, loki.url)
	central.start(t)
	all := []*process{prom.proc, central.proc}

	otlpURL := map[string]string{}
	for _, n := range cluster.Nodes() {
		addrs := testbed.AgentAddrs{Health: freeAddr(t), OTLPHTTP: freeAddr(t), OTLPGRPC: freeAddr(t), Telemetry: freeAddr(t)}
		env, err := n.AgentEnv(freeAddr(t), t.TempDir(), addrs, true)
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, centralEnv(central, pki, tokenFiles[n.Host])...)
		agent := startProcess(t, "agent-"+n.Host, env, agentBin,
			"--config", filepath.Join(root, "distributions", "agent", "config.yaml"),
			"--config", filepath.Join(root, "distributions", "agent", "small-cluster.yaml"))
		all = append(all, agent)
		waitHTTP(t, "http://"+addrs.Health+"/", agent)
		otlpURL[n.Host] = "http://" + addrs.OTLPHTTP + "/v1/traces"
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := cluster.Drive(ctx, func(host string) string { return otlpURL[host] }); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Second) // records of the last steps: decision, correlation, the Loki queue
	records, arrivals, bad := loki.snapshot()
	for _, err := range bad {
		t.Errorf("a fault record sent to Loki does not parse: %v", err)
	}
	rep := cluster.Score(records, arrivals)
	var b strings.Builder
	rep.Write(&b)
	t.Logf("fault records sent to Loki: %d\n%s", len(records), b.String())

	opened := 0
	for _, s := range rep.Scenarios {
		opened += len(s.Opened)
		if s.HardNegative && len(s.Opened) > 0 {
			t.Errorf("hard negative %s opened %v", s.Name, s.Opened)
		}
		if len(s.FalsePositives) > 0 {
			t.Errorf("%s: false positives %v", s.Name, s.FalsePositives)
		}
		for i, d := range s.Found {
			if d < 0 {
				t.Errorf("%s: expectation %d never opened", s.Name, i)
			}
		}
	}
	if opened == 0 {
		t.Error("no fault opened")
	}
	if len(rep.Unattributed) > 0 {
		t.Errorf("records naming no simulated node: %v", rep.Unattributed)
	}
	// Every fault the central opened went through its remediation: an
	// audit entry per fault id.
	audited := map[string]bool{}
	for _, e := range auditEntries(t, central.audit) {
		audited[e.FaultID] = true
	}
	for _, r := range records {
		if r.State == fault.StateOpen && !audited[r.ID] {
			t.Errorf("fault %s (%s on %s) opened but not in the remediation audit", r.ID, r.Type, r.HostName)
		}
	}
	if t.Failed() {
		for _, p := range all {
			p.dumpLog(t, 30)
		}
	}
}

// faultSink is Loki's OTLP/HTTP logs endpoint for the central: it accepts
// every request and keeps the fault records (the correlator's scope) with
// their arrival times; the other logs are dropped.
type faultSink struct {
	url      string
	mu       sync.Mutex
	records  []fault.Record
	arrivals []time.Time
	bad      []error // fault records that do not parse
}

func newFaultSink(t *testing.T) *faultSink {
	fs := &faultSink{}
	addr := freeAddr(t)
	srv := &http.Server{Addr: addr, ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			defer zr.Close()
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var un plog.ProtoUnmarshaler
		ld, err := un.UnmarshalLogs(b)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fs.add(ld)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = srv.ListenAndServe() }()
	t.Cleanup(func() { _ = srv.Close() })
	fs.url = "http://" + addr + "/otlp"
	return fs
}

func (fs *faultSink) add(ld plog.Logs) {
	now := time.Now()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for i := 0; i < ld.ResourceLogs().Len(); i++ {
		sls := ld.ResourceLogs().At(i).ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			if sls.At(j).Scope().Name() != semconv.ScopeFaultRecords {
				continue
			}
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				r, err := fault.FromLogRecord(lrs.At(k))
				if err != nil {
					fs.bad = append(fs.bad, err)
					continue
				}
				fs.records = append(fs.records, r)
				fs.arrivals = append(fs.arrivals, now)
			}
		}
	}
}

func (fs *faultSink) snapshot() ([]fault.Record, []time.Time, []error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return append([]fault.Record(nil), fs.records...), append([]time.Time(nil), fs.arrivals...), append([]error(nil), fs.bad...)
}

// centralEnv points an agent running distributions/agent/small-cluster.yaml
// at the central, trusting the test's CA, with the token in tokenFile.
func centralEnv(central *smallClusterCentral, pki *testPKI, tokenFile string) []string {
	return []string{
		"OTELCOL_GPU_CENTRAL_ENDPOINT=" + central.addr,
		"OTELCOL_GPU_CENTRAL_CA_FILE=" + pki.caFile,
		"OTELCOL_GPU_CENTRAL_TOKEN_FILE=" + tokenFile,
	}
}
