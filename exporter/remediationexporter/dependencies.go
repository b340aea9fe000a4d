package remediationexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"

import (
	"context"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/decisionlog"
)

// dependencies are what the factory (or a test) plugs in.
type dependencies struct {
	platform actuator.Platform // nil: no platform, webhook only
	leader   actuator.Leader   // nil: alwaysLeader
	clock    clock             // nil: realClock
	// sleep waits between attempts (platform and webhook); nil waits on a
	// timer honouring ctx.
	sleep func(ctx context.Context, d time.Duration) error
	// decisions is the decision log (nil: off); replica is this process's
	// name in it.
	decisions *decisionlog.Log
	replica   string
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

// alwaysLeader is the Leader when none is configured: a single replica, or
// a platform without leader election. Documented in README.md.
type alwaysLeader struct{}

func (alwaysLeader) IsLeader() bool { return true }
