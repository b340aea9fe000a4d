package nodeauthextension

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodeauthextension/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// startFile starts the extension on a tokens file with lines.
func startFile(t *testing.T, tt *componenttest.Telemetry, lines string) (*nodeAuth, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent-tokens")
	require.NoError(t, os.WriteFile(path, []byte(lines), 0o600))
	set := nopSettings()
	set.TelemetrySettings = tt.NewTelemetrySettings()
	ext, err := NewFactory().Create(context.Background(), set, &Config{TokensFile: path})
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { assert.NoError(t, ext.Shutdown(context.Background())) })
	return ext.(*nodeAuth), path
}

func bearer(token string) map[string][]string {
	return map[string][]string{"authorization": {"Bearer " + token}}
}

// nodeOf is the node Authenticate bound to ctx ("" and the error when it
// refused).
func nodeOf(t *testing.T, a *nodeAuth, headers map[string][]string) (string, error) {
	t.Helper()
	ctx, err := a.Authenticate(context.Background(), headers)
	if err != nil {
		return "", err
	}
	auth := client.FromContext(ctx).Auth
	require.NotNil(t, auth)
	node, ok := auth.GetAttribute(semconv.AuthAttrNode).(string)
	require.True(t, ok)
	assert.NotEmpty(t, auth.GetAttribute(semconv.AuthAttrSubject))
	assert.ElementsMatch(t, []string{semconv.AuthAttrNode, semconv.AuthAttrSubject}, auth.GetAttributeNames())
	return node, nil
}

func refused(t *testing.T, tt *componenttest.Telemetry) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	m, err := tt.GetMetric("otelcol_nodeauth_refused")
	if err != nil {
		return out
	}
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		r, _ := dp.Attributes.Value(attribute.Key(metadata.TelemetryAttrReason))
		out[r.AsString()] = dp.Value
	}
	return out
}

func TestTokensFileBindsTheNode(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	a, _ := startFile(t, tt, tokenA+" gpu-a\n"+tokenB+" gpu-b\n")

	node, err := nodeOf(t, a, bearer(tokenA))
	require.NoError(t, err)
	assert.Equal(t, "gpu-a", node)
	// HTTP's canonical header and another case of the scheme.
	node, err = nodeOf(t, a, map[string][]string{"Authorization": {"bearer " + tokenB}})
	require.NoError(t, err)
	assert.Equal(t, "gpu-b", node)

	for name, headers := range map[string]map[string][]string{
		"no header":       {},
		"no scheme":       {"authorization": {tokenA}},
		"basic":           {"authorization": {"Basic " + tokenA}},
		"two headers":     {"authorization": {"Bearer " + tokenA, "Bearer " + tokenB}},
		"both key spells": {"authorization": {"Bearer " + tokenA}, "Authorization": {"Bearer " + tokenA}},
		"empty token":     {"authorization": {"Bearer "}},
	} {
		_, err := nodeOf(t, a, headers)
		require.Error(t, err, name)
		assert.Equal(t, codes.Unauthenticated, status.Code(err), name)
	}
	_, err = nodeOf(t, a, bearer("not-a-listed-token-at-all"))
	assert.Equal(t, codes.Unauthenticated, status.Code(err))
	assert.NotContains(t, err.Error(), "not-a-listed-token-at-all", "the error never echoes a token")
	assert.Equal(t, map[string]int64{metadata.ReasonMissingToken: 6, metadata.ReasonUnknownToken: 1}, refused(t, tt))
}

// Removing a node's line revokes that node alone, once the file is
// re-read; a bad file keeps the tokens in force and says so.
func TestTokensFileRevocation(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	a, path := startFile(t, tt, tokenA+" gpu-a\n"+tokenB+" gpu-b\n")

	// Written in place, as an editor does.
	require.NoError(t, os.WriteFile(path, []byte(tokenB+" gpu-b\n"), 0o600))
	require.Eventually(t, func() bool {
		_, err := nodeOf(t, a, bearer(tokenA))
		return status.Code(err) == codes.Unauthenticated
	}, 30*time.Second, 20*time.Millisecond, "gpu-a's token still accepted after its line was removed")
	node, err := nodeOf(t, a, bearer(tokenB))
	require.NoError(t, err)
	assert.Equal(t, "gpu-b", node)

	// Replaced atomically (a rename over it): gpu-a is back.
	tmp := path + ".new"
	require.NoError(t, os.WriteFile(tmp, []byte(tokenA+" gpu-a\n"+tokenB+" gpu-b\n"), 0o600))
	require.NoError(t, os.Rename(tmp, path))
	require.Eventually(t, func() bool {
		node, err := nodeOf(t, a, bearer(tokenA))
		return err == nil && node == "gpu-a"
	}, 30*time.Second, 20*time.Millisecond, "the renamed file was not read")

	// A bad file: refused, the previous tokens stay, and it is counted.
	require.NoError(t, os.WriteFile(path, []byte(tokenB+"\n"), 0o600))
	require.Eventually(t, func() bool {
		m, err := tt.GetMetric("otelcol_nodeauth_tokens_file_reloads")
		if err != nil {
			return false
		}
		for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
			if r, _ := dp.Attributes.Value(attribute.Key(metadata.TelemetryAttrResult)); r.AsString() == metadata.ResultInvalid {
				return dp.Value >= 1
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond, "the bad file's reload was not counted")
	node, err = nodeOf(t, a, bearer(tokenA))
	require.NoError(t, err)
	assert.Equal(t, "gpu-a", node)
}

// A bad tokens file stops the start, naming the file and line.
func TestTokensFileBadAtStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent-tokens")
	require.NoError(t, os.WriteFile(path, []byte(tokenA+" gpu-a\n"+tokenB+"\n"), 0o600))
	ext, err := NewFactory().Create(context.Background(), nopSettings(), &Config{TokensFile: path})
	require.NoError(t, err)
	err = ext.Start(context.Background(), componenttest.NewNopHost())
	require.ErrorContains(t, err, path+" line 2: a token without its node's name")
	require.NoError(t, ext.Shutdown(context.Background()))

	ext, err = NewFactory().Create(context.Background(), nopSettings(), &Config{TokensFile: path + ".missing"})
	require.NoError(t, err)
	require.ErrorContains(t, ext.Start(context.Background(), componenttest.NewNopHost()), "no such file")
	require.NoError(t, ext.Shutdown(context.Background()))
}

// What a TokenReview's status must say for a token to name a node.
func TestJudgeReview(t *testing.T) {
	r := newReviewer(KubernetesConfig{ServiceAccount: "otelcol-gpu/otelcol-gpu-agent", Audience: "otelcol-gpu-central", CacheSize: 1}, nil, time.Now, func(string) {})
	agent := authenticationv1.UserInfo{
		Username: "system:serviceaccount:otelcol-gpu:otelcol-gpu-agent",
		Extra: map[string]authenticationv1.ExtraValue{
			extraNodeName: {"gpu-a"}, extraPodName: {"otelcol-gpu-agent-x7k2p"},
		},
	}
	ok := authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: []string{"otelcol-gpu-central"}, User: agent}
	v := r.judge(ok)
	assert.Empty(t, v.refusal)
	assert.Equal(t, "gpu-a", v.node)
	assert.Equal(t, "system:serviceaccount:otelcol-gpu:otelcol-gpu-agent pod=otelcol-gpu-agent-x7k2p", v.subject)

	mutate := func(f func(*authenticationv1.TokenReviewStatus)) authenticationv1.TokenReviewStatus {
		st := *ok.DeepCopy()
		f(&st)
		return st
	}
	for want, st := range map[string]authenticationv1.TokenReviewStatus{
		metadata.ReasonNotAuthenticated: {Authenticated: false, Error: "token has been invalidated"},
		metadata.ReasonWrongAudience: mutate(func(st *authenticationv1.TokenReviewStatus) {
			st.Audiences = []string{"https://kubernetes.default.svc"}
		}),
		metadata.ReasonWrongServiceAccount: mutate(func(st *authenticationv1.TokenReviewStatus) {
			st.User.Username = "system:serviceaccount:training:default"
		}),
		metadata.ReasonNoNode: mutate(func(st *authenticationv1.TokenReviewStatus) { delete(st.User.Extra, extraNodeName) }),
	} {
		assert.Equal(t, want, r.judge(st).refusal, want)
	}
	// Bound to a Node object, not a pod: anyone allowed to mint the
	// agents' tokens could bind one to any node.
	assert.Equal(t, metadata.ReasonNoNode, r.judge(mutate(func(st *authenticationv1.TokenReviewStatus) { delete(st.User.Extra, extraPodName) })).refusal)
	assert.Equal(t, metadata.ReasonNoNode, r.judge(mutate(func(st *authenticationv1.TokenReviewStatus) {
		st.User.Extra[extraNodeName] = authenticationv1.ExtraValue{"gpu-a", "gpu-b"}
	})).refusal)
}

func TestTokenExpiry(t *testing.T) {
	// {"exp":1700000000}
	exp, ok := tokenExpiry("eyJhbGciOiJSUzI1NiJ9.eyJleHAiOjE3MDAwMDAwMDB9.c2ln")
	require.True(t, ok)
	assert.Equal(t, time.Unix(1_700_000_000, 0), exp)
	for _, bad := range []string{"", "opaque-token", "a.b", "a.!!!.c", "a.e30.c"} {
		_, ok := tokenExpiry(bad)
		assert.False(t, ok, bad)
	}
}

// The API server unreachable: nothing is decided about the token, the
// request is answered Unavailable (the agent keeps it and retries) and
// counted as review_error.
func TestReviewErrorIsUnavailable(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: central}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600))
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	set := nopSettings()
	set.TelemetrySettings = tt.NewTelemetrySettings()
	cfg := createDefaultConfig().(*Config)
	cfg.Kubernetes.ServiceAccount = "otelcol-gpu/otelcol-gpu-agent"
	cfg.Kubernetes.Kubeconfig = kubeconfig
	ext, err := NewFactory().Create(context.Background(), set, cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { assert.NoError(t, ext.Shutdown(context.Background())) })

	_, err = nodeOf(t, ext.(*nodeAuth), bearer("header.payload.signature"))
	require.Error(t, err)
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.Equal(t, map[string]int64{metadata.ReasonReviewError: 1}, refused(t, tt))
}
