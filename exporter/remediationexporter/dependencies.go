package remediationexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/decisionlog"
	"github.com/otelcol-gpu/otelcol-gpu/internal/kafkaclient"
	"github.com/otelcol-gpu/otelcol-gpu/internal/ownership"
)

// dependencies are what the factory (or a test) plugs in.
type dependencies struct {
	platform actuator.Platform // nil: no platform, webhook only
	// leader: nil elects at Start (ownership.go): the gpu_faults
	// receiver's owner, else alwaysLeader.
	leader actuator.Leader
	// id is the exporter's component ID (the follower the election
	// extension names); zero: the type's.
	id component.ID
	// election finds the election extension in the host; nil:
	// ownership.FromHost.
	election func(component.Host) (component.ID, ownership.Seam, error)
	clock    clock // nil: realClock
	// sleep waits between attempts (platform and webhook); nil waits on a
	// timer honouring ctx.
	sleep func(ctx context.Context, d time.Duration) error
	// decisions is the decision log (nil: off); replica is this process's
	// name in it.
	decisions *decisionlog.Log
	replica   string
	// agent reaches the node agents' repair API (repair.go); nil: none
	// (the loop then cannot verify, and waits into its timeouts).
	agent nodeAgent
	// kafkaHost gives the decision log's SASL OAUTHBEARER its token
	// extension at Start (nil: no decision log).
	kafkaHost *kafkaclient.Host
}

// clock is time, injectable so tests can fire the verification window.
type clock interface {
	Now() time.Time
	// AfterFunc runs f after d; the returned func stops it and reports
	// whether it stopped it before it ran.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}
