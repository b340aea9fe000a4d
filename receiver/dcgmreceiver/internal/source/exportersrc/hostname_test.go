package exportersrc

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// hostPage is one GPU's temperature and power as dcgm-exporter on host
// would serve them (no Hostname label when host is empty).
func hostPage(host string) string {
	label := ""
	if host != "" {
		label = `,Hostname="` + host + `"`
	}
	return "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\nDCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-0\"" + label + "} 40\n" +
		"# TYPE DCGM_FI_DEV_POWER_USAGE gauge\nDCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-0\"" + label + "} 300\n"
}

// An agent speaks only for its own node: a page whose Hostname names
// another node is refused and counted, never relabelled as this one's.
func TestTranslateRefusesAnotherNodesPage(t *testing.T) {
	for _, tc := range []struct {
		page, own string
		foreign   bool
	}{
		{hostPage("node-b"), "node-a", true},
		{hostPage("node-a"), "node-a", false},
		{hostPage("NODE-A"), "node-a", false},
		{hostPage("node-a.cluster.example"), "node-a", false}, // the short name and its FQDN
		{hostPage("node-a"), "node-a.cluster.example", false},
		{hostPage("node-a.one.example"), "node-a.two.example", true},
		{hostPage("node-ab"), "node-a", true},
		{hostPage(""), "node-a", false}, // no label: dcgm-exporter omits it when told to
		{hostPage("node-b"), "", false}, // no own name to check against
	} {
		snap, stats, err := Translate(strings.NewReader(tc.page), time.Unix(1, 0), tc.own)
		require.NoError(t, err)
		if tc.foreign {
			assert.Empty(t, snap.GPUs, "%s on %q", tc.page, tc.own)
			assert.Equal(t, 2, stats.Foreign)
			assert.Equal(t, 2, snap.ForeignSamples)
			assert.NotEmpty(t, stats.ForeignHost)
			assert.Zero(t, stats.Values)
		} else {
			require.Len(t, snap.GPUs, 1, "%s on %q", tc.page, tc.own)
			assert.Zero(t, stats.Foreign)
			assert.Equal(t, 2, stats.Values)
		}
	}
}

func TestCollectWarnsOnceAboutAnotherNodesPage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(hostPage("node-b")))
	}))
	t.Cleanup(srv.Close)
	core, logs := observer.New(zap.WarnLevel)
	src := New(srv.URL+"/metrics", time.Second, "node-a", zap.New(core))
	require.NoError(t, src.Start(context.Background(), nil))
	defer func() { require.NoError(t, src.Shutdown(context.Background())) }()
	for range 3 {
		snap, err := src.Collect(context.Background(), nil)
		require.NoError(t, err)
		assert.Empty(t, snap.GPUs)
		assert.Equal(t, 2, snap.ForeignSamples, "counted at every scrape")
	}
	warned := logs.FilterMessageSnippet("refusing samples of another node").All()
	require.Len(t, warned, 1, "logged once")
	assert.Equal(t, "node-b", warned[0].ContextMap()["page_hostname"])
	assert.Equal(t, "node-a", warned[0].ContextMap()["host_name"])
}
