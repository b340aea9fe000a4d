package gpufaultsreceiver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/kafka/configkafka"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/config/configtls"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// The TLS and SASL keys reach the broker: a broker that requires them
// delivers to a receiver configured with them (what the gateway's
// kafka-tls-sasl.yaml overlay sets).
func TestTLSAndSASL(t *testing.T) {
	certPEM, keyPEM := selfSigned(t)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(caFile, certPEM, 0o600))
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)

	for _, tc := range []struct {
		mechanism string
		tls       bool
	}{
		{"PLAIN", false},
		{"SCRAM-SHA-256", false},
		{"SCRAM-SHA-512", true},
	} {
		t.Run(tc.mechanism, func(t *testing.T) {
			opts := []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, semconv.TopicFaults),
				kfake.EnableSASL(), kfake.Superuser(tc.mechanism, "gateway", "s3cret")}
			if tc.tls {
				opts = append(opts, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
			}
			c, err := kfake.NewCluster(opts...)
			require.NoError(t, err)
			t.Cleanup(c.Close)

			cfg := testConfig(c.ListenAddrs())
			cfg.Authentication.SASL = &configkafka.SASLConfig{Mechanism: tc.mechanism, Username: "gateway", Password: "s3cret"}
			if tc.tls {
				cfg.TLS = &configtls.ClientConfig{Config: configtls.Config{CAFile: caFile}}
			}
			require.NoError(t, cfg.Validate())
			// The broker does require them: a client without SASL is refused.
			bare, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RequestRetries(0))
			require.NoError(t, err)
			require.Error(t, bare.Ping(context.Background()), "the broker accepted a client without SASL")
			bare.Close()

			rc := newRecorder()
			startMember(t, "a", cfg, rc.member("a"))

			clientOpts := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner())}
			prodCfg := *cfg
			prodOpts, err := clientOptsForTest(t, &prodCfg)
			require.NoError(t, err)
			cl, err := kgo.NewClient(append(prodOpts, clientOpts...)...)
			require.NoError(t, err)
			defer cl.Close()
			produceRaw(t, cl, 0, marshalBody(t, "secured"))
			waitFor(t, "the record delivered over "+tc.mechanism, func() bool { return len(rc.deliveries()) == 1 })
			require.Equal(t, "secured", rc.deliveries()[0].body)
		})
	}
}

// selfSigned returns a certificate for 127.0.0.1 that is its own CA.
func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kfake"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}
