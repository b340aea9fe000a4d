package ncclflightreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver"

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-gpu/otelcol-gpu/internal/interval"
)

// Config is the configuration of the ncclflight receiver. Each input is
// optional; at least one must be on.
type Config struct {
	FlightRecorder FlightRecorderConfig `mapstructure:"flight_recorder"`
	Inspector      InspectorConfig      `mapstructure:"inspector"`
	RAS            RASConfig            `mapstructure:"ras"`

	// JobID is training.job.id on what carries no job of its own: dumps
	// directly in a flight_recorder directory (not below it, see
	// flight_recorder::job_path), inspector records and RAS findings;
	// default empty.
	JobID string `mapstructure:"job_id"`
	// HostName is host.name on everything emitted; default os.Hostname().
	// Set it where the collector's own host name is not the node's (a
	// collector outside the node's network namespace, the testbed).
	HostName string `mapstructure:"host_name"`
	// Storage is a storage extension (e.g. file_storage) that remembers
	// what was read, so a restart does not emit it again. Without one, the
	// receiver remembers in memory only.
	Storage *component.ID `mapstructure:"storage"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// FlightRecorderConfig watches PyTorch flight recorder dumps.
type FlightRecorderConfig struct {
	// Directories to watch; empty turns the input off.
	Directories []string `mapstructure:"directories"`
	// Patterns of dump file names. The rank is the trailing digits of the
	// name (users put host names in the prefix).
	Patterns []string `mapstructure:"patterns"`
	// JobPath says where a dump's job and attempt are: the directory
	// levels below each directory, {job}, {attempt}, * (any name) or a
	// plain name, separated by /. Default {job}/{attempt}, the layout the
	// Slurm prolog writes (TORCH_FR_DUMP_TEMP_FILE=<dir>/<job>/<attempt>/rank_).
	// Dumps directly in a directory are of job_id; empty: only those are
	// read. Two jobs' dumps are analysed apart.
	JobPath string `mapstructure:"job_path"`
	// Rank for dumps whose names carry none (TORCH_FR_DUMP_DYNAMIC_FILE_NAME);
	// -1: unknown.
	Rank int `mapstructure:"rank"`
	// RescanInterval lists the directories in full (default 10s) besides
	// file notifications.
	RescanInterval time.Duration `mapstructure:"rescan_interval"`
	// SettleTime: a dump is complete once unchanged this long (default 1s).
	SettleTime time.Duration `mapstructure:"settle_time"`
	// MaxFileSize caps a dump's size (default 12 MiB, frdump.DefaultMaxJSONBytes;
	// pickle dumps are capped at 8 MiB by the parser); bigger ones are
	// skipped unread.
	MaxFileSize int64 `mapstructure:"max_file_size"`
	// DecodeBudget bounds, in bytes, what the flight recorder input holds
	// at once whatever the number of jobs, ranks and dumps: the dump being
	// decoded (its bytes, its decoded tree, the records built from it), the
	// records each rank keeps for the cross-rank analysis and the
	// operations waiting for a later dump. Dumps are decoded one at a
	// time, each with what the others' records leave free; one that needs
	// more is skipped (counted as over_decode_budget) and its job analysed
	// without it. 0 (the default): half of GOMEMLIMIT, else a quarter of
	// the cgroup's memory limit, else 64 MiB. At least 8 MiB when set.
	DecodeBudget int64 `mapstructure:"decode_budget"`
	// IncompleteAfter: a collective seen scheduled or started is emitted as
	// not completed once no newer dump of its rank completed it for this
	// long (default 2m).
	IncompleteAfter time.Duration `mapstructure:"incomplete_after"`
	// StallAfter: a rank whose dump was written at least this long after
	// its own newest enqueue had stopped (default 1m); the hang finding
	// names only such ranks. Both times come from the rank's node clock,
	// so a skewed clock or a late read does not matter. Lower it only
	// where dumps are rewritten often (a test bed whose steps last 1 s).
	StallAfter time.Duration `mapstructure:"stall_after"`
}

// InspectorConfig tails NCCL inspector plugin output.
type InspectorConfig struct {
	// Directories holding <hostname>-pid<pid>.log files; empty turns it off.
	Directories []string `mapstructure:"directories"`
	// PollInterval between reads of growing files (default 1s).
	PollInterval time.Duration `mapstructure:"poll_interval"`
}

// RASConfig polls NCCL's RAS service (off unless an endpoint is set).
type RASConfig struct {
	// Endpoint is host:port, e.g. localhost:28028; empty: off.
	Endpoint string `mapstructure:"endpoint"`
	// Interval between STATUS requests (default 30s).
	Interval time.Duration `mapstructure:"interval"`
	// Timeout of one request (default 5s).
	Timeout time.Duration `mapstructure:"timeout"`
}

// Validate checks the configuration; messages name the key and the value.
func (cfg *Config) Validate() error {
	var errs []error
	fr := cfg.FlightRecorder
	if len(fr.Directories) == 0 && len(cfg.Inspector.Directories) == 0 && cfg.RAS.Endpoint == "" {
		errs = append(errs, errors.New("no input: set flight_recorder::directories, inspector::directories or ras::endpoint"))
	}
	for i, p := range fr.Patterns {
		if _, err := filepath.Match(p, ""); err != nil || p == "" {
			errs = append(errs, fmt.Errorf("flight_recorder::patterns[%d]: %q is not a valid pattern", i, p))
		}
	}
	if _, err := parseJobPath(fr.JobPath); err != nil {
		errs = append(errs, fmt.Errorf("flight_recorder::job_path: %q %w", fr.JobPath, err))
	}
	if len(fr.Directories) > 0 && len(fr.Patterns) == 0 {
		errs = append(errs, errors.New("flight_recorder::patterns: must not be empty"))
	}
	for name, d := range map[string]time.Duration{
		"flight_recorder::settle_time":      fr.SettleTime,
		"flight_recorder::incomplete_after": fr.IncompleteAfter, "flight_recorder::stall_after": fr.StallAfter,
		"ras::timeout": cfg.RAS.Timeout,
	} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be greater than 0, got %s", name, d))
		}
	}
	// cadences: a bare number (nanoseconds) would spin on the files and the RAS socket
	for name, d := range map[string]time.Duration{
		"flight_recorder::rescan_interval": fr.RescanInterval, "inspector::poll_interval": cfg.Inspector.PollInterval,
		"ras::interval": cfg.RAS.Interval,
	} {
		if err := interval.Check(name, d, false); err != nil {
			errs = append(errs, err)
		}
	}
	if fr.MaxFileSize <= 0 {
		errs = append(errs, fmt.Errorf("flight_recorder::max_file_size: must be greater than 0, got %d", fr.MaxFileSize))
	}
	if fr.DecodeBudget < 0 || fr.DecodeBudget > 0 && fr.DecodeBudget < minDecodeBudget {
		errs = append(errs, fmt.Errorf("flight_recorder::decode_budget: %d bytes: want 0 (derived from the memory limit) or at least %d (8 MiB)", fr.DecodeBudget, minDecodeBudget))
	}
	if fr.Rank < -1 {
		errs = append(errs, fmt.Errorf("flight_recorder::rank: %d is not a rank (-1 for unknown)", fr.Rank))
	}
	if cfg.RAS.Endpoint != "" {
		if _, _, err := net.SplitHostPort(cfg.RAS.Endpoint); err != nil {
			errs = append(errs, fmt.Errorf("ras::endpoint: %q is not host:port", cfg.RAS.Endpoint))
		}
	}
	return errors.Join(errs...)
}
