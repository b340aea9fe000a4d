package decisionlog

import (
	"context"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/kafka/configkafka"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/config/configtls"
)

func TestClientOptions(t *testing.T) {
	base := configkafka.NewDefaultClientConfig()
	ctx := context.Background()

	_, err := ClientOptions(ctx, configkafka.ClientConfig{})
	require.ErrorContains(t, err, "brokers")

	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		c := base
		c.Authentication.SASL = &configkafka.SASLConfig{Mechanism: mech, Username: "u", Password: "p"}
		opts, err := ClientOptions(ctx, c)
		require.NoError(t, err, mech)
		assert.Greater(t, len(opts), 1)
	}
	for _, mech := range []string{"OAUTHBEARER", "AWS_MSK_IAM_OAUTHBEARER"} {
		c := base
		c.Authentication.SASL = &configkafka.SASLConfig{Mechanism: mech}
		_, err := ClientOptions(ctx, c)
		require.ErrorContains(t, err, "auth.sasl.mechanism", mech)
	}
	c := base
	c.Authentication.Kerberos = &configkafka.KerberosConfig{}
	_, err = ClientOptions(ctx, c)
	require.ErrorContains(t, err, "auth.kerberos")

	c = base
	c.TLS = &configtls.ClientConfig{Config: configtls.Config{CAFile: "/nonexistent/ca.pem"}}
	_, err = ClientOptions(ctx, c)
	require.ErrorContains(t, err, "tls")

	c = base
	c.ProtocolVersion = "not-a-version"
	_, err = ClientOptions(ctx, c)
	require.ErrorContains(t, err, "protocol_version")
}
