package shutdowndeadlineextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/shutdowndeadlineextension"

import (
	"fmt"
	"time"
)

// Defaults and bounds of the deadline.
const (
	// defaultDeadline is under 30 s, half the time the chart
	// (terminationGracePeriodSeconds) and the systemd units
	// (TimeoutStopSec) give a binary to stop, leaving the margin issue 29
	// asks for; it is above every bound a component keeps by itself
	// (docs/architecture.md, "Shutdown": 5 s flushes, 2 s and 5 s exporter
	// timeouts).
	defaultDeadline = 25 * time.Second
	// minDeadline: shorter would cut the bounded flushes (5 s) and the
	// sends in flight that persistent queues finish.
	minDeadline = time.Second
	// maxDeadline: any grace period a deployment gives; longer is a
	// deadline the SIGKILL always beats.
	maxDeadline = 10 * time.Minute
)

// Config is the configuration of the shutdown_deadline extension.
type Config struct {
	// Deadline is how long the collector may take to shut down, from the
	// start of its shutdown (before its receivers stop) to the end of its
	// extensions' Shutdown. Past it the process logs what still runs and
	// exits with status 124. Keep it under the time the process is given
	// to stop (Kubernetes' terminationGracePeriodSeconds, systemd's
	// TimeoutStopSec).
	Deadline time.Duration `mapstructure:"deadline"`

	// prevent unkeyed literal initialization
	_ struct{}
}

func createDefaultConfig() *Config { return &Config{Deadline: defaultDeadline} }

// Validate checks the configuration; the message names the key and the
// bad value.
func (cfg *Config) Validate() error {
	if cfg.Deadline < minDeadline || cfg.Deadline > maxDeadline {
		return fmt.Errorf("deadline %s: want %s to %s, under the time the process is given to stop (the chart's terminationGracePeriodSeconds and the systemd units' TimeoutStopSec are 60s)",
			cfg.Deadline, minDeadline, maxDeadline)
	}
	return nil
}
