package remediationexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/kafka/configkafka"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/decisionlog"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/k8s"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/slurm"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/webhook"
	"github.com/otelcol-gpu/otelcol-gpu/internal/kafkaclient"
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
		Webhook:            webhook.NewDefaultConfig(),
		Cooldown:           30 * time.Minute,
		VerificationWindow: 30 * time.Minute,
		MaxAttempts:        3,
		Backoff:            BackoffConfig{Initial: time.Second, Max: 30 * time.Second},
		Kubernetes:         KubernetesConfig{Config: k8s.NewDefaultConfig(), LeaseEnabled: true},
		Slurm:              SlurmConfig{Config: slurm.NewDefaultConfig()},

		MaxQuarantinedFraction:    0.1,
		QuarantineCapTripsBreaker: true,
		Decisions:                 defaultDecisionsConfig(),
		Repair:                    defaultRepairConfig(),
	}
}

// defaultDecisionsConfig: contrib's client defaults without brokers (the
// log is off until they are set).
func defaultDecisionsConfig() DecisionsConfig {
	client := configkafka.NewDefaultClientConfig()
	client.Brokers = nil
	client.ClientID = "otelcol-gpu-remediation"
	return DecisionsConfig{KafkaClientConfig: KafkaClientConfig(client), Topic: "gpu_fault_decisions",
		Retention: 7 * 24 * time.Hour, MaxKeys: 1_000_000, Timeout: 10 * time.Second}
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
	deps := dependencies{platform: platform, leader: leader, id: set.ID, replica: replicaID(set)}
	if deps.agent, err = newRepairAgent(c, set); err != nil {
		return nil, err
	}
	if c.Decisions.Enabled() {
		deps.kafkaHost = &kafkaclient.Host{}
		deps.decisions, err = decisionlog.New(context.Background(), decisionlog.Options{
			Client: configkafka.ClientConfig(c.Decisions.KafkaClientConfig), Topic: c.Decisions.Topic,
			Retention: c.Decisions.Retention, MaxKeys: c.Decisions.MaxKeys, Timeout: c.Decisions.Timeout, Logger: set.Logger,
			Host: deps.kafkaHost,
		})
		if err != nil {
			return nil, fmt.Errorf("remediationexporter: decisions: %w", err)
		}
	}
	return newRemediationExporter(c, set.TelemetrySettings, deps)
}

// replicaID names this process in the Lease and the decision log.
func replicaID(set exporter.Settings) string {
	host, _ := os.Hostname()
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + set.ID.String()
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
		if !c.Kubernetes.LeaseEnabled {
			// Something else elects the one acting replica (the gpu_faults
			// consumer group): every replica here acts on what it gets.
			return p, nil, nil
		}
		leader, err := k8s.NewLeader(client, c.Kubernetes.Lease, replicaID(set), set.Logger, nil)
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
