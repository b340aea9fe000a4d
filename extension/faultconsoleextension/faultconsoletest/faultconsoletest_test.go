package faultconsoletest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoletest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStartServesTheAPIWithTheToken(t *testing.T) {
	c := Start(t, "test", nil)
	req, err := http.NewRequest(http.MethodGet, c.BaseURL+"/api/v1/status", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+Token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp, err = http.Get(c.BaseURL + "/api/v1/status")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	http.DefaultClient.CloseIdleConnections()
}

// A node's repair loop in a fake controller reaches a client through the
// real extension.
func TestLifecycleThroughTheExtension(t *testing.T) {
	c := Start(t, "test", nil)
	at := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	ctrl := consoletest.New(console.Breaker{}, console.QuarantinedNode{Node: "n1", Since: at})
	require.NoError(t, ctrl.Step("n1", repair.StepQuarantined, at, "cordon"))
	require.NoError(t, ctrl.Repair("n1", repair.ActionGPUReset, at.Add(time.Minute), "GPU 0"))
	c.Extension.(console.Console).Attach(ctrl)
	ns, _, err := c.Client(t).Nodes(context.Background())
	require.NoError(t, err)
	require.Len(t, ns.Nodes, 1)
	l := ns.Nodes[0].Lifecycle
	require.NotNil(t, l)
	assert.Equal(t, "repairing", l.Step)
	assert.Equal(t, "gpu_reset", l.Repair)
	assert.Equal(t, 1, l.Attempt)
	assert.Len(t, l.History, 2)
	assert.Positive(t, l.InStepSeconds)
	assert.Len(t, ns.Steps, len(repair.Steps))
}
