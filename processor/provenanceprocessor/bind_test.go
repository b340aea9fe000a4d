package provenanceprocessor

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/plogtest"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// nodeAuth is what the nodeauth extension binds to a request.
type nodeAuth map[string]any

func (a nodeAuth) GetAttribute(name string) any { return a[name] }
func (a nodeAuth) GetAttributeNames() []string {
	names := make([]string, 0, len(a))
	for k := range a {
		names = append(names, k)
	}
	return names
}

// as is a request context authenticated as node.
func as(node string) context.Context {
	return client.NewContext(context.Background(), client.Info{Auth: nodeAuth{semconv.AuthAttrNode: node, semconv.AuthAttrSubject: "tokens_file line 1"}})
}

// bound is a harness for the central: bind_to_auth, no host name, no
// inventory.
func bound(t *testing.T) *harness {
	h := newHarness(t, false)
	h.cfg = &Config{BindToAuth: true}
	return h
}

func TestBindConfig(t *testing.T) {
	cfg := loadConfig(t, "bind")
	require.NoError(t, confmap.Validate(cfg))
	assert.True(t, cfg.BindToAuth)

	id := component.MustNewID("nodestate")
	err := (&Config{BindToAuth: true, HostName: "central", NodeState: &id}).Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `host_name "central" with bind_to_auth`)
	assert.Contains(t, err.Error(), `nodestate "nodestate" with bind_to_auth`)
}

// What a node's own agent sends about it passes untouched, hardware
// signals and GPUs included: they come from that agent's receivers.
func TestBindOwnResourcePasses(t *testing.T) {
	h := bound(t)
	lp, lsink := h.logsProcessor(t)
	mp, msink := h.metrics(t)
	ld, md := xidLogs(own, ownGPUs[0]), dbeMetrics(own, ownGPUs[0])
	require.NoError(t, lp.ConsumeLogs(as(own), ld))
	require.NoError(t, mp.ConsumeMetrics(as(own), md))
	require.NoError(t, plogtest.CompareLogs(xidLogs(own, ownGPUs[0]), lsink.AllLogs()[0]))
	require.NoError(t, pmetrictest.CompareMetrics(dbeMetrics(own, ownGPUs[0]), msink.AllMetrics()[0]))
	assert.Empty(t, h.rejected(t))
}

// Node A's credential with records that name node B: treated exactly as
// the agent treats a script's claim about another node.
func TestBindForgedResource(t *testing.T) {
	h := bound(t)
	lp, lsink := h.logsProcessor(t)
	mp, msink := h.metrics(t)
	require.NoError(t, lp.ConsumeLogs(as(own), xidLogs(victim, victimGPU)))
	require.NoError(t, mp.ConsumeMetrics(as(own), dbeMetrics(victim, victimGPU)))

	rl := lsink.AllLogs()[0].ResourceLogs().At(0)
	res := rl.Resource().Attributes()
	assert.Equal(t, own, str(t, res, "host.name"), "the credential's node stamped")
	assert.Equal(t, victim, str(t, res, "forged.host.name"))
	assert.Equal(t, victimGPU, str(t, res, "forged.gpu.uuid"))
	assert.Equal(t, "<absent>", str(t, res, "gpu.uuid"))
	assert.Equal(t, "0", str(t, res, "forged.gpu.index"), "no inventory at the central: no GPU claim holds")
	lr := rl.ScopeLogs().At(0).LogRecords().At(0)
	assert.Equal(t, "forged.gpu.xid", lr.EventName())
	for _, k := range []string{"event.name", "gpu.xid", "gpu.xid.source"} {
		assert.Equal(t, "<absent>", str(t, lr.Attributes(), k), k)
		assert.NotEqual(t, "<absent>", str(t, lr.Attributes(), "forged."+k), k)
	}
	rm := msink.AllMetrics()[0].ResourceMetrics().At(0)
	assert.Equal(t, own, str(t, rm.Resource().Attributes(), "host.name"))
	assert.Equal(t, "forged.gpu.ecc.errors", rm.ScopeMetrics().At(0).Metrics().At(0).Name())
	got := h.rejected(t)
	assert.Equal(t, int64(2), got["host_name"])
	assert.Equal(t, int64(3), got["gpu"], "the log's uuid and index, the metric's uuid")
	assert.Positive(t, got["hardware_signal"])
}

// One request, two resources: the forged one is renamed, the own one not.
func TestBindMixedRequest(t *testing.T) {
	h := bound(t)
	p, sink := h.logsProcessor(t)
	ld := xidLogs(own, ownGPUs[0])
	xidLogs(victim, victimGPU).ResourceLogs().At(0).CopyTo(ld.ResourceLogs().AppendEmpty())
	require.NoError(t, p.ConsumeLogs(as(own), ld))
	out := sink.AllLogs()[0].ResourceLogs()
	assert.Equal(t, ownGPUs[0], str(t, out.At(0).Resource().Attributes(), "gpu.uuid"))
	assert.Equal(t, "gpu.xid", out.At(0).ScopeLogs().At(0).LogRecords().At(0).EventName())
	assert.Equal(t, "<absent>", str(t, out.At(0).Resource().Attributes(), "forged.host.name"))
	assert.Equal(t, victim, str(t, out.At(1).Resource().Attributes(), "forged.host.name"))
	assert.Equal(t, "forged.gpu.xid", out.At(1).ScopeLogs().At(0).LogRecords().At(0).EventName())
	assert.Equal(t, int64(1), h.rejected(t)["host_name"])
}

// Inside an own resource only host.name is judged: a record naming
// another node (which the correlator would read over the resource's)
// loses it; the record's hardware signals stand.
func TestBindHostNameBelowAnOwnResource(t *testing.T) {
	h := bound(t)
	p, sink := h.logsProcessor(t)
	ld := xidLogs(own, ownGPUs[0])
	ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Attributes().PutStr("host.name", victim)
	require.NoError(t, p.ConsumeLogs(as(own), ld))
	lr := sink.AllLogs()[0].ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
	assert.Equal(t, "<absent>", str(t, lr.Attributes(), "host.name"))
	assert.Equal(t, victim, str(t, lr.Attributes(), "forged.host.name"))
	assert.Equal(t, "gpu.xid", lr.EventName())
	assert.Equal(t, "79", str(t, lr.Attributes(), "gpu.xid"))
	assert.Equal(t, map[string]int64{"host_name": 1}, h.rejected(t))
}

// host.name absent or empty: the credential's node; of another type:
// forged. Repeated, it never reaches the binding: TestBindRepeatedHostName.
func TestBindResourceHostNameShapes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		set        func(res plog.ResourceLogs)
		wantForged string
		wantEvent  string
	}{
		{"absent", func(plog.ResourceLogs) {}, "<absent>", "gpu.xid"},
		{"empty", func(rl plog.ResourceLogs) { rl.Resource().Attributes().PutStr("host.name", "") }, "<absent>", "gpu.xid"},
		{"an int", func(rl plog.ResourceLogs) { rl.Resource().Attributes().PutInt("host.name", 7) }, "7", "forged.gpu.xid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := bound(t)
			p, sink := h.logsProcessor(t)
			ld := xidLogs(own, ownGPUs[0])
			ld.ResourceLogs().At(0).Resource().Attributes().Remove("host.name")
			tc.set(ld.ResourceLogs().At(0))
			require.NoError(t, p.ConsumeLogs(as(own), ld))
			rl := sink.AllLogs()[0].ResourceLogs().At(0)
			n := 0
			for k, v := range rl.Resource().Attributes().All() {
				if k == "host.name" {
					n++
					assert.Equal(t, own, v.AsString())
				}
			}
			assert.Equal(t, 1, n, "host.name entries")
			assert.Equal(t, tc.wantForged, str(t, rl.Resource().Attributes(), "forged.host.name"))
			assert.Equal(t, tc.wantEvent, rl.ScopeLogs().At(0).LogRecords().At(0).EventName())
		})
	}
}

// A resource naming host.name twice is not canonical: the central refuses
// the request whole before binding it, as the agent does (canonical.go),
// whichever node the second entry names.
func TestBindRepeatedHostName(t *testing.T) {
	for _, second := range []string{own, victim} {
		t.Run(second, func(t *testing.T) {
			h := bound(t)
			p, sink := h.logsProcessor(t)
			ld := xidLogs(own, ownGPUs[0])
			appendRepeated(ld.ResourceLogs().At(0), "host.name", second)
			err := p.ConsumeLogs(as(own), ld)
			require.Error(t, err)
			assert.True(t, consumererror.IsPermanent(err), "a refusal the agent must not retry: %v", err)
			assert.Empty(t, sink.AllLogs(), "nothing of the request passes")
			assert.Equal(t, map[string]int64{"repeated_key": 1}, h.rejected(t))
		})
	}
}

// appendRepeated adds key=value to a resource whose map already holds key:
// OTLP allows it and pdata keeps both, as a decoded request can hold it.
// Built through OTLP/JSON, whose attributes are a list.
func appendRepeated(rl plog.ResourceLogs, key, value string) {
	ld := plog.NewLogs()
	rl.CopyTo(ld.ResourceLogs().AppendEmpty())
	b, err := (&plog.JSONMarshaler{}).MarshalLogs(ld)
	if err != nil {
		panic(err)
	}
	head := `{"resourceLogs":[{"resource":{"attributes":[`
	if !strings.HasPrefix(string(b), head) {
		panic("unexpected OTLP/JSON: " + string(b))
	}
	extra := fmt.Sprintf(`{"key":%q,"value":{"stringValue":%q}},`, key, value)
	out, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs([]byte(head + extra + string(b)[len(head):]))
	if err != nil {
		panic(err)
	}
	out.ResourceLogs().At(0).CopyTo(rl)
}

// Without an authenticated node the request is refused whole, counted and
// logged once: the receiver has no nodeauth authenticator.
func TestBindWithoutCredential(t *testing.T) {
	h := bound(t)
	p, sink := h.logsProcessor(t)
	noNode := client.NewContext(context.Background(), client.Info{Auth: nodeAuth{semconv.AuthAttrSubject: "someone"}})
	for _, ctx := range []context.Context{context.Background(), noNode, as("")} {
		err := p.ConsumeLogs(ctx, xidLogs(victim, victimGPU))
		require.Error(t, err)
		assert.True(t, consumererror.IsPermanent(err))
		assert.Contains(t, err.Error(), "no authenticated node")
	}
	assert.Empty(t, sink.AllLogs())
	assert.Equal(t, map[string]int64{"no_credential": 3}, h.rejected(t))
	assert.Equal(t, 1, h.logs.FilterMessageSnippet("no authenticated node").Len())
}

// A job's rank whose resource names another node: that rank's resource
// is forged (step spans carry no hardware signal, but their host.name is
// what the straggler and the correlator read).
func TestBindTraces(t *testing.T) {
	h := bound(t)
	p, sink := h.traces(t)
	require.NoError(t, p.ConsumeTraces(as(own), stepTraces(victim, ownGPUs[0])))
	rss := sink.AllTraces()[0].ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		res := rss.At(i).Resource().Attributes()
		assert.Equal(t, own, str(t, res, "host.name"), "rank %d", i)
		if i == 3 {
			assert.Equal(t, victim, str(t, res, "forged.host.name"))
			assert.Equal(t, ownGPUs[0], str(t, res, "forged.gpu.uuid"), "in a forged resource no GPU claim holds")
		} else {
			assert.Equal(t, ownGPUs[0], str(t, res, "gpu.uuid"), "rank %d", i)
		}
	}
	assert.Equal(t, int64(1), h.rejected(t)["host_name"])
}
