package faultconsoletest

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
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
