// Package faultconsoletest starts a real faultconsole extension for the
// tests of the components and tools around it (the CLI, the browser test,
// the straggler processor's benchmark).
package faultconsoletest // import "github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/faultconsoletest"

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"
)

// Token is the bearer token of the extensions Start starts.
const Token = "faultconsoletest-token-0123456789abcdef"

// Console is a started extension.
type Console struct {
	extension.Extension
	// BaseURL is http://<its loopback address>.
	BaseURL string
	// TokenFile holds Token.
	TokenFile string
}

// Start starts the extension on a free loopback port with Token, after
// configure (nil: the defaults) changed its configuration; it is shut down
// when the test ends.
func Start(tb testing.TB, version string, configure func(*faultconsoleextension.Config)) Console {
	tb.Helper()
	tokenFile := filepath.Join(tb.TempDir(), "token")
	require.NoError(tb, os.WriteFile(tokenFile, []byte(Token+"\n"), 0o600))
	f := faultconsoleextension.NewFactory()
	cfg := f.CreateDefaultConfig().(*faultconsoleextension.Config)
	cfg.Endpoint, cfg.TokenFile = "127.0.0.1:0", tokenFile
	if configure != nil {
		configure(cfg)
	}
	require.NoError(tb, cfg.Validate())
	ext, err := f.Create(context.Background(), extension.Settings{
		ID: component.NewID(f.Type()), TelemetrySettings: componenttest.NewNopTelemetrySettings(),
		BuildInfo: component.BuildInfo{Command: "otelcol-gpu", Version: version},
	}, cfg)
	require.NoError(tb, err)
	require.NoError(tb, ext.Start(context.Background(), componenttest.NewNopHost()))
	tb.Cleanup(func() { require.NoError(tb, ext.Shutdown(context.Background())) })
	return Console{Extension: ext, BaseURL: "http://" + ext.(interface{ Addr() string }).Addr(), TokenFile: tokenFile}
}

// Client is a client of c's API with Token; its idle connections are
// closed when the test ends. What a controller attached to c holds
// (consoletest's, with the nodes' repair loops) reaches it as the API
// answers it.
func (c Console) Client(tb testing.TB) *consoleclient.Client {
	tb.Helper()
	tr := &http.Transport{}
	tb.Cleanup(tr.CloseIdleConnections)
	return &consoleclient.Client{BaseURL: c.BaseURL, Token: Token, HTTP: &http.Client{Transport: tr}}
}
