// Package kafkaclient maps contrib's Kafka client settings
// (configkafka.ClientConfig: the keys every Kafka component of the
// distribution shares, so one TLS/SASL overlay applies to all) to franz-go
// options, for the components that talk to Kafka themselves: the gpu_faults
// receiver and the remediation exporter's decision log. contrib's own
// builder is internal to its module.
package kafkaclient // import "github.com/otelcol-gpu/otelcol-gpu/internal/kafkaclient"

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/kafka/configkafka"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.uber.org/zap"
)

// saslMechanisms are the SASL mechanisms mapped to franz-go.
var saslMechanisms = map[string]bool{"PLAIN": true, "SCRAM-SHA-256": true, "SCRAM-SHA-512": true}

// Unsupported lists, as errors naming the key, what c asks for that this
// mapping cannot do (Kerberos, OAUTHBEARER, AWS MSK IAM, SASL without
// credentials): a component refuses them at start-up rather than connect
// without the authentication the user asked for.
func Unsupported(c configkafka.ClientConfig) []error {
	var errs []error
	if c.Authentication.Kerberos != nil {
		errs = append(errs, errors.New("auth::kerberos: not supported; use auth::sasl with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"))
	}
	if s := c.Authentication.SASL; s != nil {
		if !saslMechanisms[s.Mechanism] {
			errs = append(errs, fmt.Errorf("auth::sasl::mechanism %q: not supported; use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.Mechanism))
		}
		if s.Username == "" || s.Password == "" {
			errs = append(errs, errors.New("auth::sasl: username and password are required"))
		}
	}
	return errs
}

// Options returns the franz-go options for c: brokers, client id, rack,
// timeouts, metadata age and retries, protocol version, TLS and SASL.
// logger (may be nil) receives franz-go's log lines.
func Options(ctx context.Context, c configkafka.ClientConfig, logger *zap.Logger) ([]kgo.Opt, error) {
	if len(c.Brokers) == 0 {
		return nil, errors.New("brokers: none configured")
	}
	if errs := Unsupported(c); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	opts := []kgo.Opt{kgo.SeedBrokers(c.Brokers...)}
	if logger != nil {
		opts = append(opts, kgo.WithLogger(ZapLogger{logger}))
	}
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
	if c.Metadata.Retry.Max > 0 {
		opts = append(opts, kgo.RequestRetries(c.Metadata.Retry.Max))
	}
	if b := c.Metadata.Retry.Backoff; b > 0 {
		opts = append(opts, kgo.RetryBackoffFn(func(tries int) time.Duration {
			return min(b<<min(tries, 5), max(5*time.Second, b))
		}))
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
		if tc != nil { // nil: tls::insecure, plain text
			opts = append(opts, kgo.DialTLSConfig(tc))
		}
	}
	if s := c.Authentication.SASL; s != nil {
		switch s.Mechanism {
		case "PLAIN":
			opts = append(opts, kgo.SASL(plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()))
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism()))
		}
	}
	return opts, nil
}
