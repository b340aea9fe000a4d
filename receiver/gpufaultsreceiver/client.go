package gpufaultsreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpufaultsreceiver"

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// clientOpts maps the contrib client keys this receiver supports (Validate
// refuses the rest) to franz-go options. contrib's own builder is internal.
func clientOpts(ctx context.Context, c *Config, logger *zap.Logger) ([]kgo.Opt, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.ClientID(c.ClientID),
		kgo.WithLogger(kzapLogger{logger}),
	}
	if c.ProtocolVersion != "" {
		v := kversion.FromString(c.ProtocolVersion)
		if v == nil {
			return nil, fmt.Errorf("protocol_version %q: unknown", c.ProtocolVersion)
		}
		opts = append(opts, kgo.MaxVersions(v))
	}
	if c.TLS != nil {
		tlsCfg, err := c.TLS.LoadTLSConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		if tlsCfg != nil { // nil: tls::insecure, plain text
			opts = append(opts, kgo.DialTLSConfig(tlsCfg))
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
		default:
			return nil, fmt.Errorf("auth::sasl::mechanism %q: not supported", s.Mechanism)
		}
	}
	if c.RackID != "" {
		opts = append(opts, kgo.Rack(c.RackID))
	}
	if c.Metadata.RefreshInterval > 0 {
		opts = append(opts, kgo.MetadataMaxAge(c.Metadata.RefreshInterval))
	}
	if c.Metadata.Retry.Max > 0 {
		opts = append(opts, kgo.RequestRetries(c.Metadata.Retry.Max))
	}
	if b := c.Metadata.Retry.Backoff; b > 0 {
		opts = append(opts, kgo.RetryBackoffFn(func(tries int) time.Duration {
			d := b << min(tries, 5)
			return min(d, max(5*time.Second, b))
		}))
	}
	if c.ConnIdleTimeout > 0 {
		opts = append(opts, kgo.ConnIdleTimeout(c.ConnIdleTimeout))
	}
	if c.DialTimeout > 0 {
		opts = append(opts, kgo.DialTimeout(c.DialTimeout))
	}
	return opts, nil
}

// kzapLogger writes franz-go's log lines to the component's logger.
type kzapLogger struct{ l *zap.Logger }

func (k kzapLogger) Level() kgo.LogLevel {
	switch {
	case k.l.Core().Enabled(zapcore.DebugLevel):
		return kgo.LogLevelDebug
	case k.l.Core().Enabled(zapcore.InfoLevel):
		return kgo.LogLevelInfo
	case k.l.Core().Enabled(zapcore.WarnLevel):
		return kgo.LogLevelWarn
	default:
		return kgo.LogLevelError
	}
}

func (k kzapLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	fields := make([]zap.Field, 0, len(keyvals)/2)
	for i := 0; i+1 < len(keyvals); i += 2 {
		key, ok := keyvals[i].(string)
		if !ok {
			key = fmt.Sprint(keyvals[i])
		}
		fields = append(fields, zap.Any(key, keyvals[i+1]))
	}
	switch level {
	case kgo.LogLevelError:
		k.l.Error(msg, fields...)
	case kgo.LogLevelWarn:
		k.l.Warn(msg, fields...)
	case kgo.LogLevelInfo:
		k.l.Info(msg, fields...)
	default:
		k.l.Debug(msg, fields...)
	}
}
