//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// markerAttr names the log attribute by which the test finds its own
// records on otlp_logs.
const markerAttr = "e2e.marker"

// The agent with distributions/agent/otlp-auth.yaml merged over its config
// and the token in a file mounted the way the kubelet mounts a Secret:
// OTLP over gRPC and HTTP without the token, or with a wrong one, is
// refused (Unauthenticated, 401) and never reaches Kafka; with the token
// it is accepted and reaches otlp_logs; after the Secret is rotated the
// new token is accepted and the old one refused, without a restart.
func TestOTLPBearerToken(t *testing.T) {
	root := repoRoot(t)
	agentBin := binary(t, "otelcol-gpu-agent")
	brokerBin := buildBroker(t)

	brokerAddr := freeAddr(t)
	broker := startProcess(t, "kfakebroker", nil, brokerBin,
		"-listen", brokerAddr, "-advertise", brokerAddr,
		"-topics", "otlp_spans,otlp_metrics,otlp_logs,gpu_faults", "-partitions", "3")

	const oldToken, newToken = "first-token-for-the-test", "second-token-for-the-test"
	secret := newSecretVolume(t)
	secret.write(t, oldToken+"\n")

	state := t.TempDir()
	grpcAddr, httpAddr, health := freeAddr(t), freeAddr(t), freeAddr(t)
	agent := startProcess(t, "agent", []string{
		"KAFKA_BROKERS=" + brokerAddr,
		"SYSFS_ROOT=" + filepath.Join(root, "receiver", "ibreceiver", "testdata", "procfs-sys"),
		"GPU_KMSG=false",
		"OTELCOL_GPU_HOST_NAME=node-a",
		"OTELCOL_GPU_STORAGE_DIR=" + state,
		"NCCL_FR_DIR=" + t.TempDir(),
		"NCCL_INSPECTOR_DIR=" + t.TempDir(),
		"OTLP_GRPC_ENDPOINT=" + grpcAddr,
		"OTLP_HTTP_ENDPOINT=" + httpAddr,
		"OTELCOL_GPU_HEALTH_ENDPOINT=" + health,
		"OTELCOL_GPU_TELEMETRY_PORT=" + port(freeAddr(t)),
		"OTLP_BEARER_TOKEN_FILE=" + secret.path(),
	}, agentBin,
		"--config", filepath.Join(root, "distributions", "agent", "config.yaml"),
		"--config", filepath.Join(root, "distributions", "agent", "otlp-auth.yaml"))
	all := []*process{broker, agent}
	waitHTTP(t, "http://"+health+"/", agent)

	markers := consumeMarkers(t, brokerAddr)
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	grpcClient := plogotlp.NewGRPCClient(conn)
	sendGRPC := func(marker, token string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if token != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		}
		_, err := grpcClient.Export(ctx, markedLogs(marker))
		return err
	}
	sendHTTP := func(marker, token string) (int, error) {
		body, err := markedLogs(marker).MarshalProto()
		if err != nil {
			return 0, err
		}
		req, err := http.NewRequest(http.MethodPost, "http://"+httpAddr+"/v1/logs", bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/x-protobuf")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	refusedGRPC := func(t *testing.T, marker, token string) {
		t.Helper()
		if err := sendGRPC(marker, token); status.Code(err) != codes.Unauthenticated {
			t.Errorf("gRPC export %s: got %v, want code Unauthenticated", marker, err)
		}
	}
	refusedHTTP := func(t *testing.T, marker, token string) {
		t.Helper()
		code, err := sendHTTP(marker, token)
		if err != nil {
			t.Fatal(err)
		}
		if code != http.StatusUnauthorized {
			t.Errorf("HTTP export %s: status %d, want 401", marker, code)
		}
	}

	var refused []string
	t.Run("without the token or with a wrong one the receiver refuses", func(t *testing.T) {
		refusedGRPC(t, "grpc-no-token", "")
		refusedGRPC(t, "grpc-wrong-token", "not-the-token")
		refusedHTTP(t, "http-no-token", "")
		refusedHTTP(t, "http-wrong-token", "not-the-token")
		refused = append(refused, "grpc-no-token", "grpc-wrong-token", "http-no-token", "http-wrong-token")
	})

	t.Run("with the token the data reaches Kafka", func(t *testing.T) {
		if err := sendGRPC("grpc-token", oldToken); err != nil {
			t.Fatalf("gRPC export with the token: %v", err)
		}
		code, err := sendHTTP("http-token", oldToken)
		if err != nil {
			t.Fatal(err)
		}
		if code != http.StatusOK {
			t.Fatalf("HTTP export with the token: status %d, want 200", code)
		}
		eventually(t, 60*time.Second, "accepted records on otlp_logs", func() error {
			return markers.want("grpc-token", "http-token")
		}, all...)
		// Same resource, same partition, sent before: had the refused
		// records been let through, they would be read by now.
		for _, m := range refused {
			if markers.seen(m) {
				t.Errorf("refused record %s reached otlp_logs", m)
			}
		}
	})

	t.Run("a rotated Secret takes effect without a restart", func(t *testing.T) {
		secret.write(t, newToken+"\n")
		eventually(t, 30*time.Second, "new token accepted", func() error {
			return sendGRPC("grpc-new-token", newToken)
		}, all...)
		refusedGRPC(t, "grpc-old-token", oldToken)
		refusedHTTP(t, "http-old-token", oldToken)
		code, err := sendHTTP("http-new-token", newToken)
		if err != nil {
			t.Fatal(err)
		}
		if code != http.StatusOK {
			t.Errorf("HTTP export with the new token: status %d, want 200", code)
		}
		eventually(t, 60*time.Second, "records sent with the new token on otlp_logs", func() error {
			return markers.want("grpc-new-token", "http-new-token")
		}, all...)
		for _, m := range []string{"grpc-old-token", "http-old-token"} {
			if markers.seen(m) {
				t.Errorf("record %s sent with the rotated-out token reached otlp_logs", m)
			}
		}
	})
	if t.Failed() {
		for _, p := range all {
			p.dumpLog(t, 30)
		}
	}
}

// markedLogs is one WARN log record (above the agent's per-node limit on
// INFO logs) carrying marker.
func markedLogs(marker string) plogotlp.ExportRequest {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "otlp-auth-e2e")
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
	lr.SetSeverityNumber(plog.SeverityNumberWarn)
	lr.SetSeverityText("WARN")
	lr.Body().SetStr("otlp auth test " + marker)
	lr.Attributes().PutStr(markerAttr, marker)
	return plogotlp.NewExportRequestFromLogs(ld)
}

// secretVolume lays out a token the way the kubelet mounts a Secret key:
// path() -> ..data/token, ..data -> a timestamped directory, replaced by
// an atomic rename of the ..data link on every update.
type secretVolume struct {
	dir string
	gen int
}

func newSecretVolume(t *testing.T) *secretVolume {
	s := &secretVolume{dir: t.TempDir()}
	if err := os.Symlink(filepath.Join("..data", "token"), s.path()); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *secretVolume) path() string { return filepath.Join(s.dir, "token") }

func (s *secretVolume) write(t *testing.T, content string) {
	t.Helper()
	s.gen++
	gen := fmt.Sprintf("..gen_%d", s.gen)
	if err := os.Mkdir(filepath.Join(s.dir, gen), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.dir, gen, "token"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(s.dir, "..data_tmp")
	if err := os.Symlink(gen, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	// The kubelet removes the previous generation after the swap.
	if s.gen > 1 {
		if err := os.RemoveAll(filepath.Join(s.dir, fmt.Sprintf("..gen_%d", s.gen-1))); err != nil {
			t.Fatal(err)
		}
	}
}

// markerConsumer reads otlp_logs from the start and remembers every marker
// it saw.
type markerConsumer struct {
	mu      sync.Mutex
	markers map[string]bool
}

func consumeMarkers(t *testing.T, broker string) *markerConsumer {
	client, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics("otlp_logs"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	mc := &markerConsumer{markers: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		var un plog.ProtoUnmarshaler
		for ctx.Err() == nil {
			client.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				ld, err := un.UnmarshalLogs(r.Value)
				if err != nil {
					t.Errorf("otlp_logs: a message that is not OTLP logs: %v", err)
					return
				}
				mc.add(ld)
			})
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		client.Close()
	})
	return mc
}

func (mc *markerConsumer) add(ld plog.Logs) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	for _, rl := range ld.ResourceLogs().All() {
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				if v, ok := lr.Attributes().Get(markerAttr); ok {
					mc.markers[v.Str()] = true
				}
			}
		}
	}
}

func (mc *markerConsumer) seen(marker string) bool {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	return mc.markers[marker]
}

func (mc *markerConsumer) want(markers ...string) error {
	for _, m := range markers {
		if !mc.seen(m) {
			return fmt.Errorf("record %s not on otlp_logs yet", m)
		}
	}
	return nil
}

// The mTLS block of docs/security.md ("The OTLP listener"), merged over the
// agent's config as the page says: a client without a certificate, or with
// one from another CA, is refused and its data never reaches Kafka; a
// client with a certificate from the configured CA is accepted.
func TestOTLPMutualTLS(t *testing.T) {
	root := repoRoot(t)
	agentBin := binary(t, "otelcol-gpu-agent")
	brokerBin := buildBroker(t)

	dir := t.TempDir()
	fragment := filepath.Join(dir, "otlp-mtls.yaml")
	if err := os.WriteFile(fragment, []byte(securityDocBlock(t, "client_ca_file")), 0o600); err != nil {
		t.Fatal(err)
	}
	pki := newTestPKI(t, dir)

	brokerAddr := freeAddr(t)
	broker := startProcess(t, "kfakebroker", nil, brokerBin,
		"-listen", brokerAddr, "-advertise", brokerAddr,
		"-topics", "otlp_spans,otlp_metrics,otlp_logs,gpu_faults", "-partitions", "3")
	grpcAddr, httpAddr, health := freeAddr(t), freeAddr(t), freeAddr(t)
	agent := startProcess(t, "agent", []string{
		"KAFKA_BROKERS=" + brokerAddr,
		"SYSFS_ROOT=" + filepath.Join(root, "receiver", "ibreceiver", "testdata", "procfs-sys"),
		"GPU_KMSG=false",
		"OTELCOL_GPU_HOST_NAME=node-a",
		"OTELCOL_GPU_STORAGE_DIR=" + t.TempDir(),
		"NCCL_FR_DIR=" + t.TempDir(),
		"NCCL_INSPECTOR_DIR=" + t.TempDir(),
		"OTLP_GRPC_ENDPOINT=" + grpcAddr,
		"OTLP_HTTP_ENDPOINT=" + httpAddr,
		"OTELCOL_GPU_HEALTH_ENDPOINT=" + health,
		"OTELCOL_GPU_TELEMETRY_PORT=" + port(freeAddr(t)),
		"OTLP_TLS_CERT_FILE=" + pki.serverCert,
		"OTLP_TLS_KEY_FILE=" + pki.serverKey,
		"OTLP_TLS_CLIENT_CA_FILE=" + pki.caFile,
	}, agentBin,
		"--config", filepath.Join(root, "distributions", "agent", "config.yaml"),
		"--config", fragment)
	all := []*process{broker, agent}
	waitHTTP(t, "http://"+health+"/", agent)
	markers := consumeMarkers(t, brokerAddr)

	clientTLS := func(cert *tls.Certificate) *tls.Config {
		cfg := &tls.Config{RootCAs: pki.roots, MinVersion: tls.VersionTLS12, ServerName: "127.0.0.1"}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		return cfg
	}
	sendGRPC := func(marker string, cert *tls.Certificate) error {
		conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(clientTLS(cert))))
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = plogotlp.NewGRPCClient(conn).Export(ctx, markedLogs(marker))
		return err
	}
	sendHTTP := func(marker string, cert *tls.Certificate) (int, error) {
		body, err := markedLogs(marker).MarshalProto()
		if err != nil {
			return 0, err
		}
		tr := &http.Transport{TLSClientConfig: clientTLS(cert)}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Post(
			"https://"+httpAddr+"/v1/logs", "application/x-protobuf", bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}

	refused := map[string]*tls.Certificate{"no-client-cert": nil, "other-ca-cert": &pki.rogueClient}
	for name, cert := range refused {
		if err := sendGRPC("grpc-"+name, cert); err == nil {
			t.Errorf("gRPC with %s: accepted", name)
		}
		if code, err := sendHTTP("http-"+name, cert); err == nil {
			t.Errorf("HTTPS with %s: status %d, want the TLS handshake refused", name, code)
		}
	}
	if err := sendGRPC("grpc-client-cert", &pki.client); err != nil {
		t.Fatalf("gRPC with a client certificate from the CA: %v", err)
	}
	code, err := sendHTTP("http-client-cert", &pki.client)
	if err != nil || code != http.StatusOK {
		t.Fatalf("HTTPS with a client certificate from the CA: status %d, %v", code, err)
	}
	eventually(t, 60*time.Second, "accepted records on otlp_logs", func() error {
		return markers.want("grpc-client-cert", "http-client-cert")
	}, all...)
	for name := range refused {
		for _, m := range []string{"grpc-" + name, "http-" + name} {
			if markers.seen(m) {
				t.Errorf("refused record %s reached otlp_logs", m)
			}
		}
	}
	if t.Failed() {
		for _, p := range all {
			p.dumpLog(t, 30)
		}
	}
}

// securityDocBlock is the ```yaml block of docs/security.md that contains
// needle, without the list indentation it is written with.
func securityDocBlock(t *testing.T, needle string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(doc), "\n")
	for i := 0; i < len(lines); i++ {
		fence := strings.TrimSpace(lines[i])
		if fence != "```yaml" {
			continue
		}
		indent := lines[i][:strings.Index(lines[i], "```")]
		var block []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			block = append(block, strings.TrimPrefix(lines[i], indent))
		}
		text := strings.Join(block, "\n") + "\n"
		if strings.Contains(text, needle) {
			return text
		}
	}
	t.Fatalf("docs/security.md has no yaml block with %q", needle)
	return ""
}

// testPKI: a CA, the agent's certificate for 127.0.0.1 and a client
// certificate signed by it, and a client certificate from another CA.
type testPKI struct {
	caFile, serverCert, serverKey string
	roots                         *x509.CertPool
	client, rogueClient           tls.Certificate
}

func newTestPKI(t *testing.T, dir string) *testPKI {
	t.Helper()
	newCA := func(name string) (*x509.Certificate, *ecdsa.PrivateKey) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		ca, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return ca, key
	}
	serial := int64(10)
	issue := func(ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		serial++
		now := time.Now()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
			KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	}
	pair := func(certPEM, keyPEM []byte) tls.Certificate {
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	ca, caKey := newCA("otelcol-gpu OTLP test CA")
	rogue, rogueKey := newCA("some other CA")
	serverCert, serverKey := issue(ca, caKey, "otelcol-gpu-agent", x509.ExtKeyUsageServerAuth)
	pki := &testPKI{
		caFile:      write("otlp-ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})),
		serverCert:  write("agent.pem", serverCert),
		serverKey:   write("agent-key.pem", serverKey),
		roots:       x509.NewCertPool(),
		client:      pair(issue(ca, caKey, "training-pod", x509.ExtKeyUsageClientAuth)),
		rogueClient: pair(issue(rogue, rogueKey, "training-pod", x509.ExtKeyUsageClientAuth)),
	}
	pki.roots.AddCert(ca)
	return pki
}
