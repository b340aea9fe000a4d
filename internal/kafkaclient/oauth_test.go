package kafkaclient

import (
	"context"
	"encoding/base64"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/kafka/configkafka"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"golang.org/x/oauth2"
)

// tokenExtension is an extension giving OAUTHBEARER tokens, as contrib's
// oauth2client does.
type tokenExtension struct {
	component.StartFunc
	component.ShutdownFunc
	token string
	err   error
}

func (e tokenExtension) Token(context.Context) (*oauth2.Token, error) {
	if e.err != nil {
		return nil, e.err
	}
	return &oauth2.Token{AccessToken: e.token}, nil
}

type hostWith map[component.ID]component.Component

func (h hostWith) GetExtensions() map[component.ID]component.Component { return h }

// firstMessage is what the mechanism sends first: for OAUTHBEARER
// (RFC 7628) "n,,\x01auth=Bearer <token>\x01\x01".
func firstMessage(t *testing.T, s *configkafka.SASLConfig, h *Host) (string, error) {
	t.Helper()
	m, err := saslMechanism(context.Background(), s, h)
	require.NoError(t, err)
	assert.Equal(t, "OAUTHBEARER", m.Name())
	_, msg, err := m.Authenticate(context.Background(), "broker:9092")
	return string(msg), err
}

// Issue 31: OAUTHBEARER takes its token from the extension
// oauthbearer_token_source names (configured as contrib's Kafka components
// configure it), at each authentication, once the component has started.
func TestOAuthBearerTokenFromTheExtension(t *testing.T) {
	id := component.MustNewID("oauth2client")
	s := &configkafka.SASLConfig{Mechanism: "OAUTHBEARER", OAuthBearerTokenSource: id}

	h := &Host{}
	_, err := firstMessage(t, s, h)
	assert.ErrorContains(t, err, "the component has not started")

	h.Set(hostWith{id: tokenExtension{token: "tok-123"}})
	msg, err := firstMessage(t, s, h)
	require.NoError(t, err)
	assert.Contains(t, msg, "auth=Bearer tok-123")

	h.Set(hostWith{id: tokenExtension{err: errors.New("expired")}})
	_, err = firstMessage(t, s, h)
	assert.ErrorContains(t, err, "expired")

	h.Set(componenttest.NewNopHost())
	_, err = firstMessage(t, s, h)
	assert.ErrorContains(t, err, "extension oauth2client is not configured")

	h.Set(hostWith{id: struct {
		component.StartFunc
		component.ShutdownFunc
	}{}})
	_, err = firstMessage(t, s, h)
	assert.ErrorContains(t, err, "gives no tokens")
}

// AWS MSK IAM signs a token for the region with the default credentials
// chain (here the environment's keys): a presigned kafka-cluster:Connect
// request, base64url, as the Bearer token.
func TestAWSMSKIAMSignsAToken(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	s := &configkafka.SASLConfig{Mechanism: "AWS_MSK_IAM_OAUTHBEARER", AWSMSK: configkafka.AWSMSKConfig{Region: "eu-west-1"}}
	msg, err := firstMessage(t, s, nil)
	require.NoError(t, err)
	_, token, ok := strings.Cut(msg, "auth=Bearer ")
	require.True(t, ok, msg)
	token = strings.TrimRight(token, "\x01")
	raw, err := base64.RawURLEncoding.DecodeString(token)
	require.NoError(t, err)
	u, err := url.Parse(string(raw))
	require.NoError(t, err)
	assert.Equal(t, "kafka.eu-west-1.amazonaws.com", u.Host)
	assert.Equal(t, "kafka-cluster:Connect", u.Query().Get("Action"))
	assert.Contains(t, u.Query().Get("X-Amz-Credential"), "AKIDEXAMPLE/")
}
