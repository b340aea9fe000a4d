//go:build envtest

package k8s

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// testBreakerTrip: the exporter's quarantine cap trips the ConfigMap
// breaker. Two replicas trip at once: one writes the trip (compare and
// swap), the other finds it tripped; the reason is what State reports;
// nothing is admitted until Reset.
func testBreakerTrip(t *testing.T, cfg *rest.Config) {
	ctx := context.Background()
	const pool = "otelcol-gpu.io/test-pool"
	setup := newClient(t, cfg)
	for _, name := range []string{"trip-0", "trip-1", "trip-2"} {
		createGPUNode(t, setup, name, func(n *corev1.Node) { n.Labels[pool] = "trip" })
	}
	replicaCfg := func(c *Config) {
		c.GPUNodeSelector = pool + "=trip"
		c.Breaker.MaxShare = 1
		c.Breaker.Name = "breaker-trip"
	}
	replicas := []*Platform{newPlatform(t, newClient(t, cfg), replicaCfg), newPlatform(t, newClient(t, cfg), replicaCfg)}
	now := time.Date(2025, 3, 14, 9, 30, 0, 0, time.UTC)
	ok, err := replicas[0].Breaker().Admit(ctx, "trip-0", now)
	require.NoError(t, err)
	require.True(t, ok)

	reasons := []string{"tripped by the quarantine cap: replica 0", "tripped by the quarantine cap: replica 1"}
	results := make([]bool, 2)
	var wg sync.WaitGroup
	for i, p := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			results[i], err = p.Breaker().Trip(ctx, now.Add(time.Minute), reasons[i])
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	assert.ElementsMatch(t, []bool{true, false}, results, "exactly one replica trips it")
	winner := reasons[0]
	if results[1] {
		winner = reasons[1]
	}

	st, err := replicas[1].Breaker().State(ctx, now.Add(time.Minute))
	require.NoError(t, err)
	assert.True(t, st.Tripped)
	assert.Equal(t, now.Add(time.Minute), st.TrippedAt.UTC())
	assert.Equal(t, winner, st.Detail)
	assert.Equal(t, 1, st.Used, "the window is kept")
	cm, err := setup.CoreV1().ConfigMaps(DefaultNamespace).Get(ctx, "breaker-trip", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Contains(t, cm.Data[breakerStateKey], `"reason":"`+winner+`"`)

	ok, err = replicas[0].Breaker().Admit(ctx, "trip-1", now.Add(2*time.Minute))
	require.NoError(t, err)
	assert.False(t, ok, "tripped by the cap: nothing new is admitted")
	require.NoError(t, replicas[1].Breaker().Reset(ctx))
	st, err = replicas[0].Breaker().State(ctx, now.Add(3*time.Minute))
	require.NoError(t, err)
	assert.False(t, st.Tripped)
	assert.Empty(t, st.Detail)
	ok, err = replicas[0].Breaker().Admit(ctx, "trip-1", now.Add(3*time.Minute))
	require.NoError(t, err)
	assert.True(t, ok)
}
