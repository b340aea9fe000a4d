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
	"sync"
	"time"

	"github.com/aws/aws-msk-iam-sasl-signer-go/signer"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/kafka/configkafka"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.opentelemetry.io/collector/component"
	"go.uber.org/zap"
	"golang.org/x/oauth2"
)

// SASL mechanisms, as contrib's Kafka components name them.
const (
	mechanismPlain       = "PLAIN"
	mechanismSCRAM256    = "SCRAM-SHA-256"
	mechanismSCRAM512    = "SCRAM-SHA-512"
	mechanismOAuthBearer = "OAUTHBEARER"
	mechanismAWSMSKIAM   = "AWS_MSK_IAM_OAUTHBEARER"
)

// Unsupported lists, as errors naming the key, what c asks for that this
// mapping cannot do (Kerberos, an unknown SASL mechanism, a mechanism
// without what it needs): a component refuses them at start-up rather than
// connect without the authentication the user asked for.
func Unsupported(c configkafka.ClientConfig) []error {
	var errs []error
	if c.Authentication.Kerberos != nil {
		errs = append(errs, errors.New("auth::kerberos: not supported; use auth::sasl"))
	}
	if s := c.Authentication.SASL; s != nil {
		switch s.Mechanism {
		case mechanismPlain, mechanismSCRAM256, mechanismSCRAM512:
			if s.Username == "" || s.Password == "" {
				errs = append(errs, fmt.Errorf("auth::sasl: username and password are required for %s", s.Mechanism))
			}
		case mechanismOAuthBearer:
			if s.OAuthBearerTokenSource == (component.ID{}) {
				errs = append(errs, errors.New("auth::sasl::oauthbearer_token_source: required for OAUTHBEARER (an extension that gives tokens, e.g. oauth2client)"))
			}
		case mechanismAWSMSKIAM:
			if s.AWSMSK.Region == "" {
				errs = append(errs, errors.New("auth::sasl::aws_msk::region: required for AWS_MSK_IAM_OAUTHBEARER"))
			}
		default:
			errs = append(errs, fmt.Errorf("auth::sasl::mechanism %q: not supported; use %s, %s, %s, %s or %s", s.Mechanism,
				mechanismPlain, mechanismSCRAM256, mechanismSCRAM512, mechanismOAuthBearer, mechanismAWSMSKIAM))
		}
	}
	return errs
}

// Host gives the OAUTHBEARER mechanism the extension named by
// auth::sasl::oauthbearer_token_source once the component has started:
// the client may be built before (the remediation exporter builds its
// decision log in its factory), the token is asked for at each SASL
// authentication. The zero Host has none yet.
type Host struct {
	mu   sync.Mutex
	host component.Host
}

// Set records the component's host (from Start).
func (h *Host) Set(host component.Host) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.host = host
}

func (h *Host) get() component.Host {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.host
}

// tokenSource is what an OAUTHBEARER token extension offers (contrib's
// oauth2client extension does).
type tokenSource interface {
	Token(context.Context) (*oauth2.Token, error)
}

// saslMechanism builds the franz-go mechanism of s (Unsupported has
// passed). AWS MSK IAM signs a token with the default AWS credentials
// chain of the region at each authentication, as contrib's components do.
func saslMechanism(ctx context.Context, s *configkafka.SASLConfig, host *Host) (sasl.Mechanism, error) {
	switch s.Mechanism {
	case mechanismPlain:
		return plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism(), nil
	case mechanismSCRAM256:
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism(), nil
	case mechanismSCRAM512:
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism(), nil
	case mechanismAWSMSKIAM:
		awsCfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(s.AWSMSK.Region))
		if err != nil {
			return nil, fmt.Errorf("auth::sasl: AWS credentials for region %s: %w", s.AWSMSK.Region, err)
		}
		region, creds := s.AWSMSK.Region, awsCfg.Credentials
		return oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
			token, _, err := signer.GenerateAuthTokenFromCredentialsProvider(ctx, region, creds)
			return oauth.Auth{Token: token}, err
		}), nil
	case mechanismOAuthBearer:
		id := s.OAuthBearerTokenSource
		return oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
			var h component.Host
			if host != nil {
				h = host.get()
			}
			if h == nil {
				return oauth.Auth{}, fmt.Errorf("auth::sasl::oauthbearer_token_source %s: the component has not started", id)
			}
			ext, ok := h.GetExtensions()[id]
			if !ok {
				return oauth.Auth{}, fmt.Errorf("auth::sasl::oauthbearer_token_source: extension %s is not configured", id)
			}
			ts, ok := ext.(tokenSource)
			if !ok {
				return oauth.Auth{}, fmt.Errorf("auth::sasl::oauthbearer_token_source: extension %s gives no tokens (no Token(context.Context))", id)
			}
			token, err := ts.Token(ctx)
			if err != nil {
				return oauth.Auth{}, fmt.Errorf("auth::sasl::oauthbearer_token_source %s: %w", id, err)
			}
			return oauth.Auth{Token: token.AccessToken}, nil
		}), nil
	}
	return nil, fmt.Errorf("auth::sasl::mechanism %q: not supported", s.Mechanism)
}

// Options returns the franz-go options for c: brokers, client id, rack,
// timeouts, metadata age and retries, protocol version, TLS and SASL.
// logger (may be nil) receives franz-go's log lines; host (may be nil:
// then OAUTHBEARER fails at authentication, naming the extension) gives
// OAUTHBEARER its token extension.
func Options(ctx context.Context, c configkafka.ClientConfig, host *Host, logger *zap.Logger) ([]kgo.Opt, error) {
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
		m, err := saslMechanism(ctx, s, host)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}
