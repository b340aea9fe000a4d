package loadtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A collector that exits before it is healthy is an error with its log.
func TestWaitHealthyReportsAnEarlyExit(t *testing.T) {
	p, err := startProcess(t.TempDir(), "early", nil, "sh", "-c", "echo broken config >&2; exit 2")
	require.NoError(t, err)
	defer p.Stop(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = waitHealthy(ctx, p, "127.0.0.1:1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "loadtest: early exited at start (exit status 2):\nbroken config")
}

// A running child whose health endpoint answers 200 is healthy.
func TestWaitHealthy(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	p, err := startProcess(t.TempDir(), "sleeper", nil, "sleep", "60")
	require.NoError(t, err)
	defer p.Stop(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, waitHealthy(ctx, p, strings.TrimPrefix(srv.URL, "http://")))
}

func TestStartProcessErrorsSayLoadtest(t *testing.T) {
	_, err := startProcess(t.TempDir(), "missing", nil, "/no/such/collector")
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "loadtest: starting missing: "), err.Error())
}
