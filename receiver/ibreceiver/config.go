package ibreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver"

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/otelcol-gpu/otelcol-gpu/internal/interval"
)

// DefaultReadTimeout is the default read_timeout: far above the
// milliseconds a healthy scrape takes, well below the default
// collection_interval.
const DefaultReadTimeout = 5 * time.Second

// AllHWCounters is the hw_counters entry that selects every file a device
// exposes under ports/<n>/hw_counters.
const AllHWCounters = "*"

// DefaultHWCounters is the default allow-list of mlx5 hw_counters: the
// transport retry, congestion control (RoCE ECN/CNP) and completion error
// counters that matter for collective communication performance.
var DefaultHWCounters = []string{
	"out_of_sequence",
	"packet_seq_err",
	"duplicate_request",
	"rnr_nak_retry_err",
	"implied_nak_seq_err",
	"local_ack_timeout_err",
	"out_of_buffer",
	"np_ecn_marked_roce_packets",
	"np_cnp_sent",
	"rp_cnp_handled",
	"rp_cnp_ignored",
	"roce_adp_retrans",
	"roce_adp_retrans_to",
	"roce_slow_restart",
	"roce_slow_restart_cnps",
	"req_cqe_error",
	"resp_cqe_error",
}

// Namings of the emitted series (Config.Naming).
const (
	NamingOTel         = "otel"
	NamingNodeExporter = "node_exporter"
)

// Config is the configuration of the ib receiver.
type Config struct {
	scraperhelper.ControllerConfig `mapstructure:",squash"`

	// SysfsRoot is the mount point of sysfs; devices are read from
	// <sysfs_root>/class/infiniband. Default "/sys".
	SysfsRoot string `mapstructure:"sysfs_root"`

	// Devices selects devices by name (e.g. mlx5_0).
	Devices DeviceFilter `mapstructure:"devices"`

	// HWCounters is the allow-list of ports/<n>/hw_counters file names to
	// emit as ib.port.hw_counter. The single entry "*" selects every file.
	HWCounters []string `mapstructure:"hw_counters"`

	// HostName overrides the host.name resource attribute; default
	// os.Hostname().
	HostName string `mapstructure:"host_name"`

	// Naming is otel (default: hw.network.*, ib.port.* with host.name and
	// ib.device, what the gateway's rules read) or node_exporter: the
	// series of node_exporter's infiniband collector, node_infiniband_*
	// with the labels device and port, for a node-local page that
	// node_exporter's dashboards and alerts read (standalone.yaml).
	// hw_counters does not apply under node_exporter (its set is fixed).
	Naming string `mapstructure:"naming"`

	// ReadTimeout bounds the sysfs reads of one scrape (default 5s; a
	// collection_interval shorter than it is the bound instead, so a scrape
	// always ends before the next one starts). Each device is read in a goroutine of its own;
	// a device whose reads have not finished by then (a hung driver read)
	// is left out of that scrape, counted in otelcol_ib_devices_skipped and
	// logged, and the other devices are emitted. A blocked read is never
	// started twice: until it returns, the device is skipped without a new
	// read, so at most one read per device (and file) is outstanding.
	ReadTimeout time.Duration `mapstructure:"read_timeout"`

	// Metrics turns single metrics off: metrics::<name>::enabled: false
	// (names of the otel naming; metricsconfig.go).
	Metrics map[string]MetricConfig `mapstructure:"metrics"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// DeviceFilter selects devices by exact name.
type DeviceFilter struct {
	// Include lists the devices to scrape; empty means all.
	Include []string `mapstructure:"include"`
	// Exclude lists devices to skip; applied after Include.
	Exclude []string `mapstructure:"exclude"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// Validate checks the configuration. Messages name the key and the bad value.
func (cfg *Config) Validate() error {
	var errs []error
	if err := interval.Check("collection_interval", cfg.CollectionInterval, false); err != nil {
		errs = append(errs, err)
	}
	if cfg.ReadTimeout <= 0 {
		errs = append(errs, fmt.Errorf("read_timeout must be greater than 0, got %q", cfg.ReadTimeout.String()))
	}
	if cfg.Naming != NamingOTel && cfg.Naming != NamingNodeExporter {
		errs = append(errs, fmt.Errorf("naming: %q is not one of %s, %s", cfg.Naming, NamingOTel, NamingNodeExporter))
	}
	if cfg.SysfsRoot == "" {
		errs = append(errs, errors.New(`sysfs_root must not be empty`))
	}
	for i, name := range cfg.HWCounters {
		switch {
		case name == "":
			errs = append(errs, fmt.Errorf("hw_counters[%d] must not be empty", i))
		case name == AllHWCounters && len(cfg.HWCounters) > 1:
			errs = append(errs, fmt.Errorf("hw_counters[%d]: %q must be the only entry", i, name))
		case strings.ContainsRune(name, '/') || name == "." || name == "..":
			errs = append(errs, fmt.Errorf("hw_counters[%d]: %q is not a file name", i, name))
		}
	}
	include := make(map[string]struct{}, len(cfg.Devices.Include))
	for i, name := range cfg.Devices.Include {
		if name == "" {
			errs = append(errs, fmt.Errorf("devices::include[%d] must not be empty", i))
		}
		include[name] = struct{}{}
	}
	for i, name := range cfg.Devices.Exclude {
		if name == "" {
			errs = append(errs, fmt.Errorf("devices::exclude[%d] must not be empty", i))
			continue
		}
		if _, ok := include[name]; ok {
			errs = append(errs, fmt.Errorf("devices: %q is in both include and exclude", name))
		}
	}
	errs = append(errs, cfg.validateMetrics()...)
	return errors.Join(errs...)
}
