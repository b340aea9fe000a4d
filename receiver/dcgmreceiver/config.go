package dcgmreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver"

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/interval"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/podlabels"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/exportersrc"
)

// Sources of GPU fields.
const (
	SourceDCGM     = "dcgm"
	SourceNVML     = "nvml"
	SourceExporter = "exporter"
)

// DCGM connection modes.
const (
	ModeStandalone = "standalone"
	ModeEmbedded   = "embedded"
)

// Metric naming schemes.
const (
	NamingOTel         = "otel"
	NamingDCGMExporter = "dcgm_exporter"
)

// Config is the configuration of the dcgm receiver.
type Config struct {
	// Source is where GPU fields come from: dcgm (default), nvml or exporter.
	Source string `mapstructure:"source"`
	// Mode is the DCGM connection mode: standalone (default: connect to the
	// nv-hostengine the GPU Operator runs) or embedded (load libdcgm.so.4
	// in-process, for bare-metal nodes without a host engine).
	Mode string `mapstructure:"mode"`
	// Endpoint is, for dcgm standalone, the host engine's host:port or unix
	// socket path (default localhost:5555); for exporter, the URL of a
	// dcgm-exporter /metrics page (default http://localhost:9400/metrics).
	Endpoint string `mapstructure:"endpoint"`

	// KMsg also reads XIDs from the kernel log, alongside any source.
	KMsg bool `mapstructure:"kmsg"`
	// KMsgPath is the kernel log device; default /dev/kmsg.
	KMsgPath string `mapstructure:"kmsg_path"`

	// Naming is otel (default: OpenTelemetry hw.gpu.* / gpu.* names,
	// docs/semconv.md) or dcgm_exporter (DCGM_FI_* names and dcgm-exporter's
	// labels, for dashboards built on dcgm-exporter).
	Naming string `mapstructure:"naming"`

	// Collectors is the path of a dcgm-exporter counters CSV (the file of
	// dcgm-exporter's -f / DCGM_EXPORTER_COLLECTORS) choosing the fields to
	// report, with its gauge/counter/label semantics; any DCGM field name is
	// accepted. Empty (default): the built-in catalogue.
	Collectors string `mapstructure:"collectors"`

	// CollectionInterval is the interval of device fields (default 10s).
	CollectionInterval time.Duration `mapstructure:"collection_interval"`
	// ProfilingInterval is the interval of DCGM_FI_PROF_* fields (default
	// 30s); 0 turns profiling fields off.
	ProfilingInterval time.Duration `mapstructure:"profiling_interval"`
	// CallTimeout bounds one call to the driver for one GPU (default 5s):
	// a GPU whose call hangs is reported unresponsive. Shutdown waits at
	// most two of them, whatever the driver does.
	CallTimeout time.Duration `mapstructure:"call_timeout"`

	// XIDCatalogue overrides or adds entries of the built-in XID table.
	XIDCatalogue []XIDEntryConfig `mapstructure:"xid_catalogue"`

	// Attribution labels each GPU with the pod or Slurm job that owns it.
	Attribution AttributionConfig `mapstructure:"attribution"`

	// HostName overrides the host.name resource attribute; default
	// os.Hostname().
	HostName string `mapstructure:"host_name"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// XIDEntryConfig is one row of the XID table.
type XIDEntryConfig struct {
	Code     int    `mapstructure:"code"`
	Name     string `mapstructure:"name"`
	Severity string `mapstructure:"severity"` // info | warning | error | critical
	Action   string `mapstructure:"action"`
}

// AttributionConfig selects the sources of GPU ownership.
type AttributionConfig struct {
	// RefreshInterval is how often ownership is re-read (default 30s).
	RefreshInterval time.Duration `mapstructure:"refresh_interval"`
	// Kubernetes reads the kubelet pod-resources API.
	Kubernetes KubernetesAttributionConfig `mapstructure:"kubernetes"`
	// Slurm reads the GPU's processes' cgroups and environment, and
	// dcgm-exporter's HPC job-mapping directory.
	Slurm SlurmAttributionConfig `mapstructure:"slurm"`
}

// KubernetesAttributionConfig configures the kubelet pod-resources source.
type KubernetesAttributionConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// Socket is the pod-resources socket; default
	// /var/lib/kubelet/pod-resources/kubelet.sock.
	Socket string `mapstructure:"socket"`
	// PodLabels also puts the Kubernetes labels of each GPU's pod on its
	// series, read from the API server (get, list, watch pods of NodeName
	// only): under naming dcgm_exporter named as dcgm-exporter's
	// --kubernetes-enable-pod-labels names them (app.kubernetes.io/name
	// becomes app_kubernetes_io_name), under otel naming
	// k8s.pod.label.<key>. Bounded per pod (internal/podlabels).
	PodLabels bool `mapstructure:"pod_labels"`
	// PodLabelAllowlist, when not empty, keeps only the pod labels whose
	// key matches one of these regular expressions (dcgm-exporter's
	// --kubernetes-pod-label-allowlist-regex).
	PodLabelAllowlist []string `mapstructure:"pod_label_allowlist"`
	// NodeName is this node's Kubernetes name (the downward API's
	// spec.nodeName); required with pod_labels.
	NodeName string `mapstructure:"node_name"`
}

// SlurmAttributionConfig configures the Slurm sources.
type SlurmAttributionConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// ProcRoot is where procfs is mounted; default /proc.
	ProcRoot string `mapstructure:"proc_root"`
	// JobMappingDir is dcgm-exporter's HPC job-mapping directory (files named
	// by GPU index holding job ids); empty to skip.
	JobMappingDir string `mapstructure:"job_mapping_dir"`
}

// Validate checks the configuration; messages name the key and the value.
func (cfg *Config) Validate() error {
	var errs []error
	switch cfg.Source {
	case SourceDCGM:
		if cfg.Mode != ModeStandalone && cfg.Mode != ModeEmbedded {
			errs = append(errs, fmt.Errorf("mode: %q is not one of %s, %s", cfg.Mode, ModeStandalone, ModeEmbedded))
		}
		if cfg.Mode == ModeStandalone && cfg.Endpoint == "" {
			errs = append(errs, errors.New("endpoint: must be set for source dcgm in standalone mode (host:port or a unix socket path)"))
		}
	case SourceNVML:
	case SourceExporter:
		// The same check the source makes in Start, worded for the config.
		if exportersrc.ValidateEndpoint(cfg.Endpoint) != nil {
			errs = append(errs, fmt.Errorf("endpoint: %q is not an http(s) URL of a dcgm-exporter /metrics page", cfg.Endpoint))
		}
	default:
		errs = append(errs, fmt.Errorf("source: %q is not one of %s, %s, %s", cfg.Source, SourceDCGM, SourceNVML, SourceExporter))
	}
	if cfg.Naming != NamingOTel && cfg.Naming != NamingDCGMExporter {
		errs = append(errs, fmt.Errorf("naming: %q is not one of %s, %s", cfg.Naming, NamingOTel, NamingDCGMExporter))
	}
	if cfg.Naming == NamingDCGMExporter {
		// the drop-in: dcgm-exporter's own settings, carried over, are
		// honoured or refused, never ignored (exporterenv.go)
		errs = append(errs, refusedExporterEnv(os.Environ())...)
	}
	if cfg.Collectors != "" {
		if _, err := newFieldSet(cfg.Collectors, cfg.Naming); err != nil {
			errs = append(errs, fmt.Errorf("collectors: %w", err))
		}
	}
	if err := interval.Check("collection_interval", cfg.CollectionInterval, false); err != nil {
		errs = append(errs, err)
	}
	if err := interval.Check("profiling_interval", cfg.ProfilingInterval, true); err != nil {
		errs = append(errs, err)
	}
	if cfg.CallTimeout <= 0 {
		errs = append(errs, fmt.Errorf("call_timeout: must be greater than 0, got %s", cfg.CallTimeout))
	}
	if cfg.KMsg && cfg.KMsgPath == "" {
		errs = append(errs, errors.New("kmsg_path: must be set when kmsg is true"))
	}
	if err := interval.Check("attribution::refresh_interval", cfg.Attribution.RefreshInterval, false); err != nil {
		errs = append(errs, err)
	}
	if cfg.Attribution.Kubernetes.Enabled && cfg.Attribution.Kubernetes.Socket == "" {
		errs = append(errs, errors.New("attribution::kubernetes::socket: must be set when kubernetes attribution is enabled"))
	}
	if k := cfg.Attribution.Kubernetes; k.PodLabels {
		if !k.Enabled {
			errs = append(errs, errors.New("attribution::kubernetes::pod_labels: needs attribution::kubernetes::enabled (the pod of each GPU)"))
		}
		if k.NodeName == "" {
			errs = append(errs, errors.New("attribution::kubernetes::node_name: must be set when pod_labels is true (the downward API's spec.nodeName)"))
		}
	}
	if _, err := podlabels.CompileAllowlist(cfg.Attribution.Kubernetes.PodLabelAllowlist); err != nil {
		errs = append(errs, fmt.Errorf("attribution::kubernetes::pod_label_allowlist: %w", err))
	}
	if cfg.Attribution.Slurm.Enabled && cfg.Attribution.Slurm.ProcRoot == "" {
		errs = append(errs, errors.New("attribution::slurm::proc_root: must be set when slurm attribution is enabled"))
	}
	if _, err := newXIDCatalogue(cfg.XIDCatalogue); err != nil {
		errs = append(errs, fmt.Errorf("xid_catalogue: %w", err))
	}
	return errors.Join(errs...)
}
