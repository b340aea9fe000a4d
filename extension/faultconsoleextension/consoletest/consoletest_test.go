package consoletest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/internal/ownership"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestController(t *testing.T) {
	ctx := context.Background()
	c := New(console.Breaker{Tripped: true, Used: 2, Budget: 2, Window: time.Hour}, console.QuarantinedNode{Node: "n1"})
	op := console.Operator{Name: "al", Reason: "why"}
	require.NoError(t, c.ResetBreaker(ctx, op))
	b, err := c.Breaker(ctx)
	require.NoError(t, err)
	assert.False(t, b.Tripped)
	assert.Zero(t, b.Used)
	require.Len(t, b.History, 1)
	assert.Equal(t, "al", b.History[0].By)
	_, err = c.Release(ctx, "n2", op)
	require.ErrorContains(t, err, `node "n2" is not quarantined`)
	detail, err := c.Release(ctx, "n1", op)
	require.NoError(t, err)
	assert.Contains(t, detail, "n1")
	nodes, err := c.Quarantined(ctx)
	require.NoError(t, err)
	assert.Empty(t, nodes)
	require.NoError(t, c.Acknowledge(ctx, "f1", op))
	assert.Equal(t, []Call{{"ResetBreaker", "", op}, {"Release", "n1", op}, {"Acknowledge", "f1", op}}, c.Calls())
	c.SetErr(errors.New("boom"))
	require.EqualError(t, c.Acknowledge(ctx, "f1", op), "boom")
	_, err = c.Quarantined(ctx)
	require.EqualError(t, err, "boom")
	assert.Len(t, c.Calls(), 3)
}

// A standby refuses every change, naming the owner, and records none.
func TestControllerStandby(t *testing.T) {
	ctx := context.Background()
	c := New(console.Breaker{Tripped: true}, console.QuarantinedNode{Node: "n1"})
	standby := console.Role{Election: console.ElectionGPUFaults, Status: ownership.Status{Role: ownership.RoleStandby,
		Self: ownership.Member{Name: "gw-1"}, Owner: ownership.Member{Name: "gw-0", Console: "https://gw-0:8787"}}}
	c.SetRole(standby)
	assert.Equal(t, standby, c.Role())
	op := console.Operator{Name: "al", Reason: "why"}
	var notOwner *console.NotOwnerError
	require.ErrorAs(t, c.ResetBreaker(ctx, op), &notOwner)
	assert.Equal(t, "gw-0", notOwner.Role.Owner.Name)
	_, err := c.Release(ctx, "n1", op)
	require.ErrorAs(t, err, &notOwner)
	require.ErrorAs(t, c.Acknowledge(ctx, "f1", op), &notOwner)
	assert.Empty(t, c.Calls())
	nodes, err := c.Quarantined(ctx)
	require.NoError(t, err, "reads are served on a standby")
	assert.Len(t, nodes, 1)
}
