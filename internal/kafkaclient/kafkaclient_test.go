package kafkaclient

import (
	"context"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/kafka/configkafka"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/config/configtls"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestOptions(t *testing.T) {
	base := configkafka.NewDefaultClientConfig()
	ctx := context.Background()

	_, err := Options(ctx, configkafka.ClientConfig{}, nil, nil)
	require.ErrorContains(t, err, "brokers")

	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		c := base
		c.Authentication.SASL = &configkafka.SASLConfig{Mechanism: mech, Username: "u", Password: "p"}
		opts, err := Options(ctx, c, nil, nil)
		require.NoError(t, err, mech)
		assert.Greater(t, len(opts), 1)
	}
	for mech, want := range map[string]string{
		"OAUTHBEARER":             "auth::sasl::oauthbearer_token_source: required",
		"AWS_MSK_IAM_OAUTHBEARER": "auth::sasl::aws_msk::region: required",
		"GSSAPI":                  `auth::sasl::mechanism "GSSAPI": not supported`,
	} {
		c := base
		c.Authentication.SASL = &configkafka.SASLConfig{Mechanism: mech}
		_, err := Options(ctx, c, nil, nil)
		require.ErrorContains(t, err, want, mech)
	}
	c := base
	c.Authentication.Kerberos = &configkafka.KerberosConfig{}
	_, err = Options(ctx, c, nil, nil)
	require.ErrorContains(t, err, "auth::kerberos")

	c = base
	c.TLS = &configtls.ClientConfig{Config: configtls.Config{CAFile: "/nonexistent/ca.pem"}}
	_, err = Options(ctx, c, nil, nil)
	require.ErrorContains(t, err, "tls")

	c = base
	c.ProtocolVersion = "not-a-version"
	_, err = Options(ctx, c, nil, nil)
	require.ErrorContains(t, err, "protocol_version")
}

// SASL without a password would connect and fail at every request; it is
// refused at start-up instead.
func TestUnsupportedSASLWithoutCredentials(t *testing.T) {
	c := configkafka.NewDefaultClientConfig()
	c.Authentication.SASL = &configkafka.SASLConfig{Mechanism: "SCRAM-SHA-512", Username: "gateway"}
	errs := Unsupported(c)
	require.Len(t, errs, 1)
	assert.ErrorContains(t, errs[0], "auth::sasl: username and password are required for SCRAM-SHA-512")
}

// franz-go logs at the level the component's logger keeps, through it.
func TestZapLogger(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	l := ZapLogger{zap.New(core)}
	assert.Equal(t, kgo.LogLevelWarn, l.Level())
	l.Log(kgo.LogLevelInfo, "dropped")
	l.Log(kgo.LogLevelError, "kept", "broker", 1, 2, "odd")
	require.Equal(t, 1, logs.Len())
	e := logs.All()[0]
	assert.Equal(t, "kept", e.Message)
	assert.Equal(t, map[string]any{"broker": int64(1), "2": "odd"}, e.ContextMap())
}
