package consoleclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClientNodeLifecycle(t *testing.T) {
	var uri string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uri = r.RequestURI
		_, _ = w.Write([]byte(`{"node":"n/1","fault_ids":["f1"],"actions":["drain"],"reason":"P1","since":"2026-12-06T04:00:00Z","release_pending":false,
			"lifecycle":{"step":"verifying","since":"2026-12-06T04:10:00Z","in_step_seconds":75.5,"repair":"gpu_reset","attempt":1,"alarm":false,
			"history":[{"step":"quarantined","at":"2026-12-06T04:00:00Z","detail":"drain"},{"step":"verifying","at":"2026-12-06T04:10:00Z"}],
			"verifications":[{"at":"2026-12-06T04:05:00Z","checks":"dcgm_diag level 1","passed":false,"detail":"pcie"},
			{"at":"2026-12-06T04:09:00Z","checks":"dcgm_diag level 1","passed":true}]}}`))
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL, Token: "tok"}
	n, _, err := c.Node(context.Background(), "n/1")
	require.NoError(t, err)
	assert.Equal(t, "/api/v1/nodes/n%2F1", uri)
	require.NotNil(t, n.Lifecycle)
	at := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	assert.Equal(t, Lifecycle{Step: "verifying", Since: at.Add(10 * time.Minute), InStepSeconds: 75.5, Repair: "gpu_reset", Attempt: 1,
		History: []LifecycleStep{{Step: "quarantined", At: at, Detail: "drain"}, {Step: "verifying", At: at.Add(10 * time.Minute)}},
		Verifications: []Verification{{At: at.Add(5 * time.Minute), Checks: "dcgm_diag level 1", Detail: "pcie"},
			{At: at.Add(9 * time.Minute), Checks: "dcgm_diag level 1", Passed: true}}}, *n.Lifecycle)
	assert.Equal(t, &n.Lifecycle.Verifications[1], n.Lifecycle.LastVerification(), "the newest")
	assert.Nil(t, (&Lifecycle{}).LastVerification())
	assert.Nil(t, (*Lifecycle)(nil).LastVerification())
}
