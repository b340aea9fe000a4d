package gpufaultsreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpufaultsreceiver"

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/kafka/configkafka"

	"github.com/otelcol-gpu/otelcol-gpu/internal/interval"
	"github.com/otelcol-gpu/otelcol-gpu/internal/kafkaclient"
	"github.com/otelcol-gpu/otelcol-gpu/internal/ownership"
)

// Config is the receiver's configuration. The client part has the keys of
// contrib's Kafka components (brokers, client_id, tls, auth::sasl, ...), so
// the same overlay (distributions/gateway/kafka-tls-sasl.yaml) applies.
type Config struct {
	configkafka.ClientConfig `mapstructure:",squash"`

	// Topic holds the fault records (default gpu_faults).
	Topic string `mapstructure:"topic"`
	// GroupID is the consumer group every replica joins (default
	// otelcol-gpu-remediation); one member owns every partition.
	GroupID string `mapstructure:"group_id"`
	// SessionTimeout is how long the broker waits for a silent member
	// (killed, partitioned) before another one takes its partitions: the
	// failover time after a kill -9 (default 10s). A member that shuts down
	// leaves the group, and a standby takes over at once.
	SessionTimeout time.Duration `mapstructure:"session_timeout"`
	// HeartbeatInterval must be below session_timeout (default 1s).
	HeartbeatInterval time.Duration `mapstructure:"heartbeat_interval"`
	// InitialOffset is where a partition without a committed offset starts:
	// earliest (default) or latest.
	InitialOffset string `mapstructure:"initial_offset"`
	// RetryBackoff paces the retries of a record the next consumer refused
	// with a retryable error; the record is retried until it is accepted or
	// refused permanently, never skipped.
	RetryBackoff RetryBackoff `mapstructure:"retry_backoff"`
	// MemberName names this replica to the others in the group (the owner
	// is shown by name on every console); empty: the machine's host name.
	// Kubernetes: the StatefulSet pod name.
	MemberName string `mapstructure:"member_name"`
	// ConsoleURL is where this replica's fault console answers, advertised
	// to the others so that a standby's console and otelcol-gpu-ctl can
	// point at the owner's (http:// or https://; empty: none).
	ConsoleURL string `mapstructure:"console_url"`
}

// RetryBackoff is an exponential backoff without an end.
type RetryBackoff struct {
	InitialInterval time.Duration `mapstructure:"initial_interval"`
	MaxInterval     time.Duration `mapstructure:"max_interval"`
}

// Validate checks the configuration; errors name the key.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if err := c.ClientConfig.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Topic == "" {
		add("topic must not be empty")
	}
	if c.GroupID == "" {
		add("group_id must not be empty")
	}
	if c.SessionTimeout <= 0 {
		add("session_timeout (%s) must be positive", c.SessionTimeout)
	}
	if err := interval.Check("heartbeat_interval", c.HeartbeatInterval, false); err != nil {
		errs = append(errs, err)
	} else if c.HeartbeatInterval >= c.SessionTimeout {
		add("heartbeat_interval (%s) must be below session_timeout (%s)", c.HeartbeatInterval, c.SessionTimeout)
	}
	switch c.InitialOffset {
	case configkafka.EarliestOffset, configkafka.LatestOffset:
	default:
		add("initial_offset %q: want %q or %q", c.InitialOffset, configkafka.EarliestOffset, configkafka.LatestOffset)
	}
	if c.RetryBackoff.InitialInterval <= 0 {
		add("retry_backoff::initial_interval (%s) must be positive", c.RetryBackoff.InitialInterval)
	}
	if c.RetryBackoff.MaxInterval < c.RetryBackoff.InitialInterval {
		add("retry_backoff::max_interval (%s) must not be below initial_interval (%s)", c.RetryBackoff.MaxInterval, c.RetryBackoff.InitialInterval)
	}
	errs = append(errs, validateMember(c.MemberName, c.ConsoleURL)...)
	// What the contrib client builder supports and this receiver does not
	// map to franz-go is refused rather than ignored.
	errs = append(errs, kafkaclient.Unsupported(c.ClientConfig)...)
	if !c.UseLeaderEpoch {
		add("use_leader_epoch: false is not supported by the gpu_faults receiver")
	}
	return errors.Join(errs...)
}

// validateMember checks what this member advertises to the group: short,
// printable, a console URL that is one.
func validateMember(name, consoleURL string) []error {
	var errs []error
	if len(name) > ownership.MaxNameLen || strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }) >= 0 {
		errs = append(errs, fmt.Errorf("member_name %q: at most %d printable bytes without spaces", name, ownership.MaxNameLen))
	}
	if consoleURL == "" {
		return errs
	}
	u, err := url.Parse(consoleURL)
	switch {
	case len(consoleURL) > ownership.MaxConsoleLen:
		errs = append(errs, fmt.Errorf("console_url: longer than %d bytes", ownership.MaxConsoleLen))
	case err != nil:
		errs = append(errs, fmt.Errorf("console_url %q: %w", consoleURL, err))
	case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "":
		errs = append(errs, fmt.Errorf("console_url %q: want http(s)://host:port of this replica's fault console", consoleURL))
	}
	return errs
}
