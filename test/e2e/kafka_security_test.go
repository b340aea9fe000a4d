//go:build e2e

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// The agent and the gateway with distributions/*/kafka-tls-sasl.yaml merged
// over their configs, against a broker that serves only TLS and requires
// SCRAM-SHA-512: the agent's InfiniBand metrics reach otlp_metrics, the
// gateway commits its consumer group's offsets, and a client without
// credentials is refused.
func TestKafkaTLSAndSASL(t *testing.T) {
	root := repoRoot(t)
	agentBin := binary(t, "otelcol-gpu-agent")
	gatewayBin := binary(t, "otelcol-gpu-gateway")
	brokerBin := buildBroker(t)

	dir := t.TempDir()
	caFile, certFile, keyFile := writeTestCertificates(t, dir)
	const user, password = "otelcol-gpu", "s3cret-for-the-test"
	brokerAddr := freeAddr(t)
	broker := startProcess(t, "kfakebroker", nil, brokerBin,
		"-listen", brokerAddr, "-advertise", brokerAddr,
		"-topics", "otlp_spans,otlp_metrics,otlp_logs,gpu_faults,gpu_fault_decisions", "-partitions", "3",
		"-tls-cert", certFile, "-tls-key", keyFile,
		"-sasl-user", user, "-sasl-password", password, "-sasl-mechanism", "SCRAM-SHA-512")

	security := []string{
		"KAFKA_BROKERS=" + brokerAddr,
		"KAFKA_SASL_USERNAME=" + user,
		"KAFKA_SASL_PASSWORD=" + password,
		"KAFKA_TLS_CA_FILE=" + caFile,
	}
	sink := newLogSink(t)
	gwHealth := freeAddr(t)
	gateway := startProcess(t, "gateway", append([]string{
		"PROMETHEUS_REMOTE_WRITE_URL=" + sink + "/api/v1/write",
		"LOKI_OTLP_ENDPOINT=" + sink,
		"TEMPO_OTLP_ENDPOINT=" + freeAddr(t),
		"OTELCOL_GPU_HEALTH_ENDPOINT=" + gwHealth,
		"OTELCOL_GPU_TELEMETRY_PORT=" + port(freeAddr(t)),
		"OTELCOL_GPU_STORAGE_DIR=" + t.TempDir(),
	}, security...), gatewayBin,
		"--config", filepath.Join(root, "distributions", "gateway", "config.yaml"),
		"--config", filepath.Join(root, "distributions", "gateway", "kafka-tls-sasl.yaml"))
	agentHealth := freeAddr(t)
	agent := startProcess(t, "agent", append([]string{
		"SYSFS_ROOT=" + filepath.Join(root, "receiver", "ibreceiver", "testdata", "procfs-sys"),
		"IB_COLLECTION_INTERVAL=1s",
		"GPU_KMSG=false",
		"OTELCOL_GPU_STORAGE_DIR=" + t.TempDir(),
		"OTLP_GRPC_ENDPOINT=" + freeAddr(t),
		"OTLP_HTTP_ENDPOINT=" + freeAddr(t),
		"OTELCOL_GPU_HEALTH_ENDPOINT=" + agentHealth,
		"OTELCOL_GPU_TELEMETRY_PORT=" + port(freeAddr(t)),
	}, security...), agentBin,
		"--config", filepath.Join(root, "distributions", "agent", "config.yaml"),
		"--config", filepath.Join(root, "distributions", "agent", "kafka-tls-sasl.yaml"))
	all := []*process{broker, gateway, agent}
	waitHTTP(t, "http://"+gwHealth+"/", gateway)
	waitHTTP(t, "http://"+agentHealth+"/", agent)

	tlsCfg := clientTLS(t, caFile)
	authed := []kgo.Opt{kgo.SeedBrokers(brokerAddr), kgo.DialTLSConfig(tlsCfg),
		kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha512Mechanism())}

	t.Run("the agent's metrics reach the topic", func(t *testing.T) {
		client, err := kgo.NewClient(append(authed, kgo.ConsumeTopics("otlp_metrics"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		var un pmetric.ProtoUnmarshaler
		points := 0
		for points == 0 && ctx.Err() == nil {
			fetches := client.PollFetches(ctx)
			fetches.EachRecord(func(r *kgo.Record) {
				md, err := un.UnmarshalMetrics(r.Value)
				if err != nil {
					t.Errorf("otlp_metrics: not OTLP metrics: %v", err)
					return
				}
				points += md.DataPointCount()
			})
		}
		if points == 0 {
			t.Fatalf("no data point on otlp_metrics through TLS and SASL: %v", ctx.Err())
		}
	})

	t.Run("the gateway commits its offsets", func(t *testing.T) {
		client, err := kgo.NewClient(authed...)
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		eventually(t, 90*time.Second, "gateway offsets committed", func() error {
			req := kmsg.NewPtrOffsetFetchRequest()
			req.Group = "otelcol-gpu-gateway-metrics"
			resp, err := req.RequestWith(context.Background(), client)
			if err != nil {
				return err
			}
			var committed int64
			for _, topic := range resp.Topics {
				for _, p := range topic.Partitions {
					if p.Offset > 0 {
						committed += p.Offset
					}
				}
			}
			if committed == 0 {
				return fmt.Errorf("group %s has committed nothing", req.Group)
			}
			return nil
		}, all...)
	})

	t.Run("remediation reads gpu_faults and writes its decision log", func(t *testing.T) {
		// An XID 79 as an agent would write it: the gateway's correlator opens
		// a fault on gpu_faults, the gpu_faults receiver hands it to
		// remediation, whose decision reaches gpu_fault_decisions: all three
		// Kafka clients of the path authenticated.
		cl, err := kgo.NewClient(append(authed, kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		(&agentProducer{cl: cl}).xid79(t, injected{host: "tls-node-0", partition: 0})

		reader, err := kgo.NewClient(append(authed, kgo.ConsumeTopics("gpu_fault_decisions"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
		if err != nil {
			t.Fatal(err)
		}
		defer reader.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		decided := false
		for !decided && ctx.Err() == nil {
			reader.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				var dec decision
				if err := json.Unmarshal(r.Value, &dec); err != nil {
					t.Errorf("gpu_fault_decisions: %v", err)
					return
				}
				for _, e := range dec.Entries {
					if e.Step == "quarantine" && e.Decision == "dry_run" {
						decided = true
					}
				}
			})
		}
		if !decided {
			t.Fatalf("no dry-run quarantine on gpu_fault_decisions through TLS and SASL: %v", ctx.Err())
		}
	})

	t.Run("a client without credentials is refused", func(t *testing.T) {
		client, err := kgo.NewClient(kgo.SeedBrokers(brokerAddr), kgo.DialTLSConfig(tlsCfg),
			kgo.DefaultProduceTopic("otlp_metrics"), kgo.RecordRetries(1), kgo.RequestRetries(1))
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := client.ProduceSync(ctx, &kgo.Record{Value: []byte("forged")}).FirstErr(); err == nil {
			t.Error("the broker accepted a record from a client that did not authenticate")
		}
	})
	if t.Failed() {
		for _, p := range all {
			p.dumpLog(t, 30)
		}
	}
}

// writeTestCertificates writes a CA and a broker certificate for 127.0.0.1
// signed by it, as PEM files, and returns their paths.
func writeTestCertificates(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "otelcol-gpu test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kfakebroker"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("broker.pem", "CERTIFICATE", der), write("broker-key.pem", "EC PRIVATE KEY", keyDER)
}

func clientTLS(t *testing.T, caFile string) *tls.Config {
	pemBytes, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatal("test CA: no certificate")
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}
