package decisionlog // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/decisionlog"

import (
	"context"
	"errors"
	"fmt"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/kafka/configkafka"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// ClientOptions maps contrib's Kafka client settings to franz-go options:
// brokers, client id, rack, timeouts, metadata age, protocol version, TLS
// and SASL PLAIN / SCRAM-SHA-256 / SCRAM-SHA-512. What it cannot map
// (Kerberos, OAUTHBEARER, AWS MSK IAM) is refused, naming the key, rather
// than connecting without the authentication the user asked for.
func ClientOptions(ctx context.Context, c configkafka.ClientConfig) ([]kgo.Opt, error) {
	if len(c.Brokers) == 0 {
		return nil, errors.New("brokers: none configured")
	}
	opts := []kgo.Opt{kgo.SeedBrokers(c.Brokers...)}
	if c.ClientID != "" {
		opts = append(opts, kgo.ClientID(c.ClientID))
	}
	if c.RackID != "" {
		opts = append(opts, kgo.Rack(c.RackID))
	}
	if c.DialTimeout > 0 {
		opts = append(opts, kgo.DialTimeout(c.DialTimeout))
	}
	if c.ConnIdleTimeout > 0 {
		opts = append(opts, kgo.ConnIdleTimeout(c.ConnIdleTimeout))
	}
	if c.Metadata.RefreshInterval > 0 {
		opts = append(opts, kgo.MetadataMaxAge(c.Metadata.RefreshInterval))
	}
	if c.ProtocolVersion != "" {
		v := kversion.FromString(c.ProtocolVersion)
		if v == nil {
			return nil, fmt.Errorf("protocol_version %q: unknown Kafka version", c.ProtocolVersion)
		}
		opts = append(opts, kgo.MaxVersions(v))
	}
	if c.TLS != nil {
		tc, err := c.TLS.LoadTLSConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		if tc != nil { // nil: tls.insecure, plaintext
			opts = append(opts, kgo.DialTLSConfig(tc))
		}
	}
	if c.Authentication.Kerberos != nil {
		return nil, errors.New("auth.kerberos: not supported by the decision log; use auth.sasl with PLAIN or SCRAM")
	}
	if s := c.Authentication.SASL; s != nil {
		switch s.Mechanism {
		case "PLAIN":
			opts = append(opts, kgo.SASL(plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()))
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism()))
		default:
			return nil, fmt.Errorf("auth.sasl.mechanism %q: not supported by the decision log (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", s.Mechanism)
		}
	}
	return opts, nil
}
