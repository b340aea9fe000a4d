package remediationexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/k8s"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/slurm"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/webhook"
)

var (
	errConfigNotRemediation = errors.New("remediationexporter: config is not a *remediationexporter.Config")
)

// NewFactory creates the factory of the remediation exporter.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(metadata.Type, createDefaultConfig,
		exporter.WithLogs(createLogs, metadata.LogsStability))
}

func createDefaultConfig() component.Config {
	return &Config{
		DryRun:             true,
		Webhook:            webhook.Config{Timeout: 5 * time.Second, Retries: 3},
		Cooldown:           30 * time.Minute,
		VerificationWindow: 30 * time.Minute,
		MaxAttempts:        3,
		Backoff:            BackoffConfig{Initial: time.Second, Max: 30 * time.Second},
		Kubernetes:         KubernetesConfig{Config: k8s.NewDefaultConfig()},
		Slurm:              SlurmConfig{Config: slurm.NewDefaultConfig()},

		MaxQuarantinedFraction: 0.1,
	}
}

func createLogs(_ context.Context, set exporter.Settings, cfg component.Config) (exporter.Logs, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, errConfigNotRemediation
	}
	platform, leader, err := newPlatform(c, set)
	if err != nil {
		return nil, err
	}
	return newRemediationExporter(c, set.TelemetrySettings, dependencies{platform: platform, leader: leader})
}

// newPlatform builds the enabled platform and its leader election; neither
// enabled means webhook only. Kubernetes elects one active remediator with
// a Lease; Slurm has no API for that, so a Slurm deployment runs one
// acting replica (README.md).
func newPlatform(c *Config, set exporter.Settings) (actuator.Platform, actuator.Leader, error) {
	switch {
	case c.Kubernetes.Enabled:
		client, err := k8s.NewClientset(c.Kubernetes.Config)
		if err != nil {
			return nil, nil, fmt.Errorf("remediationexporter: kubernetes: %w", err)
		}
		p, err := k8s.New(client, c.Kubernetes.Config, set.Logger)
		if err != nil {
			return nil, nil, fmt.Errorf("remediationexporter: kubernetes: %w", err)
		}
		host, _ := os.Hostname()
		identity := host + "-" + strconv.Itoa(os.Getpid()) + "-" + set.ID.String()
		leader, err := k8s.NewLeader(client, c.Kubernetes.Lease, identity, set.Logger, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("remediationexporter: kubernetes lease: %w", err)
		}
		return p, leader, nil
	case c.Slurm.Enabled:
		p, err := slurm.New(c.Slurm.Config, set.Logger)
		if err != nil {
			return nil, nil, fmt.Errorf("remediationexporter: slurm: %w", err)
		}
		return p, nil, nil
	}
	return nil, nil, nil
}
