package faultconsoleextension

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/internal/metadata"
)

func writeToken(t *testing.T, token string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(p, []byte(token), 0o600))
	return p
}

func testConfig(t *testing.T) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.Endpoint = "127.0.0.1:0"
	cfg.TokenFile = writeToken(t, testToken+"\n")
	require.NoError(t, cfg.Validate())
	return cfg
}

// host is a component.Host holding extensions.
type host struct {
	component.Host
	exts map[component.ID]component.Component
}

func (h host) GetExtensions() map[component.ID]component.Component { return h.exts }

func TestFactoryAndLifecycle(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, metadata.Type, f.Type())
	assert.Equal(t, component.StabilityLevelAlpha, f.Stability())
	ext, err := f.Create(context.Background(), nopSettings(), testConfig(t))
	require.NoError(t, err)

	// Other components find the console through the host.
	id := component.NewID(metadata.Type)
	c, err := console.FromHost(host{componenttest.NewNopHost(), map[component.ID]component.Component{id: ext}}, id)
	require.NoError(t, err)
	c.RecordFault(console.Fault{ID: "f1", Type: "xid_79", Severity: "P1", State: console.StateOpen, Node: "n1", Rank: -1, Step: -1})

	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	addr := ext.(interface{ Addr() string }).Addr()
	require.NotEmpty(t, addr)

	req, err := http.NewRequest("GET", "http://"+addr+"/api/v1/faults", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	var fs consoleclient.Faults
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&fs))
	resp.Body.Close()
	require.Len(t, fs.Faults, 1)
	assert.Equal(t, "f1", fs.Faults[0].ID)

	require.NoError(t, ext.Shutdown(context.Background()))
	_, err = http.DefaultClient.Do(req)
	require.Error(t, err, "the server is down after Shutdown")
	http.DefaultClient.CloseIdleConnections()
}

func TestShutdownWithoutStart(t *testing.T) {
	ext, err := NewFactory().Create(context.Background(), nopSettings(), testConfig(t))
	require.NoError(t, err)
	require.NoError(t, ext.Shutdown(context.Background()))
}

func TestFactoryWrongConfig(t *testing.T) {
	_, err := createExtension(context.Background(), nopSettings(), &struct{}{})
	require.ErrorIs(t, err, errConfigNotFaultConsole)
}

func TestStartTokenErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	for name, tc := range map[string]struct{ path, want string }{
		"missing":    {missing, `token_file "` + missing + `"`},
		"empty":      {writeToken(t, " \n"), "is empty"},
		"short":      {writeToken(t, "short-token"), "holds a token of 11 bytes, shorter than the 16 required"},
		"two tokens": {writeToken(t, "0123456789abcdef 0123456789abcdef"), "one line without white space"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.TokenFile = tc.path
			ext, err := newExtension(cfg, nopSettings())
			require.NoError(t, err)
			err = ext.Start(context.Background(), componenttest.NewNopHost())
			require.ErrorContains(t, err, tc.want)
			assert.Contains(t, err.Error(), tc.path)
			require.NoError(t, ext.Shutdown(context.Background()))
		})
	}
}

func TestStartPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	cfg := testConfig(t)
	cfg.Endpoint = ln.Addr().String()
	ext, err := newExtension(cfg, nopSettings())
	require.NoError(t, err)
	err = ext.Start(context.Background(), componenttest.NewNopHost())
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), `listening on endpoint "`+cfg.Endpoint+`" (is another process using the port?)`), err.Error())
	require.NoError(t, ext.Shutdown(context.Background()))
}

func TestShutdownForgetsController(t *testing.T) {
	ext, err := newExtension(testConfig(t), extension.Settings{ID: component.NewID(metadata.Type), TelemetrySettings: componenttest.NewNopTelemetrySettings()})
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	ext.Attach(newFixture(t, false).ctrl)
	require.NoError(t, ext.Shutdown(context.Background()))
	_, err = ext.controller()
	require.ErrorIs(t, err, console.ErrNoController)
}

// stuckController answers the node list only when released, whatever its
// context: a controller blocked on a platform that does not answer.
type stuckController struct {
	console.Controller
	entered, release chan struct{}
}

func (c stuckController) Quarantined(context.Context) ([]console.QuarantinedNode, error) {
	close(c.entered)
	<-c.release
	return nil, nil
}

// A request still in progress does not hold Shutdown: the collector's
// context never ends, and after shutdownWait its connection is closed.
func TestShutdownBoundsARequestInProgress(t *testing.T) {
	ext, err := newExtension(testConfig(t), extension.Settings{ID: component.NewID(metadata.Type), TelemetrySettings: componenttest.NewNopTelemetrySettings()})
	require.NoError(t, err)
	ext.logger = zap.NewNop()
	ext.shutdownWait = 20 * time.Millisecond
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	ctrl := stuckController{entered: make(chan struct{}), release: make(chan struct{})}
	ext.Attach(ctrl)
	req, err := http.NewRequest(http.MethodGet, "http://"+ext.Addr()+"/api/v1/nodes", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	answered := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	<-ctrl.entered
	require.NoError(t, ext.Shutdown(context.Background()))
	require.Error(t, <-answered, "the request's connection was closed")
	close(ctrl.release) // the handler returns into a closed connection
	http.DefaultClient.CloseIdleConnections()
}
