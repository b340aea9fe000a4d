package faultconsoleextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension"

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/config/configtls"
)

// Defaults of the configuration.
const (
	defaultEndpoint          = "localhost:8787"
	defaultMaxFaults         = 10000
	defaultResolvedRetention = 24 * time.Hour
	defaultMaxJobs           = 64
	defaultHeatmapSteps      = 120
	defaultMaxRanks          = 16384
	defaultMaxHeatmapCells   = 8 << 20
	// minTokenLen is the shortest bearer token accepted.
	minTokenLen = 16
	// defaultForwardTimeout bounds a control forwarded to the owner: above
	// the owner's own bound on a controller call (controllerTimeout), so
	// that its answer comes back, and below the server's write timeout.
	defaultForwardTimeout = 40 * time.Second
	// maxForwardTimeout keeps forward::timeout under the server's write
	// timeout (60 s), so the relayed answer can still be written.
	maxForwardTimeout = 55 * time.Second
)

// Config is the configuration of the faultconsole extension. Worst-case
// memory is about max_faults x 2 KiB plus max_heatmap_cells x 16 bytes
// (README.md).
type Config struct {
	// Endpoint is the host:port the console listens on. Default
	// localhost:8787. Every address of the machine (0.0.0.0, ::, or no
	// host) only with tls: the console never serves plain HTTP to the
	// network at large.
	Endpoint string `mapstructure:"endpoint"`
	// TLS serves HTTPS (configtls server settings: cert_file, key_file,
	// reload_interval for rotated certificates, min_version,
	// client_ca_file for mutual TLS). Absent: plain HTTP, on a loopback or
	// one named address only.
	TLS *configtls.ServerConfig `mapstructure:"tls"`
	// TokenFile is the file holding the bearer token every /api/ request
	// must carry (leading and trailing white space ignored). Required; the
	// token must be at least 16 bytes. Read at Start.
	TokenFile string `mapstructure:"token_file"`
	// TraceURL is an optional link template for a fault's trace; it must
	// contain {trace_id} (e.g. http://tempo:3200/trace/{trace_id}).
	TraceURL string `mapstructure:"trace_url"`
	// LogsURL is an optional link template for a fault's logs; it must
	// contain {fault_id}.
	LogsURL string `mapstructure:"logs_url"`
	// MaxFaults bounds the faults kept (open and resolved); beyond it the
	// oldest resolved one, else the oldest open one, is forgotten. Default
	// 10000.
	MaxFaults int `mapstructure:"max_faults"`
	// ResolvedRetention is how long a resolved fault is kept after its last
	// record. Default 24h.
	ResolvedRetention time.Duration `mapstructure:"resolved_retention"`
	// MaxJobs bounds the (job, attempt) heatmaps kept; the least recently
	// updated is forgotten. Default 64.
	MaxJobs int `mapstructure:"max_jobs"`
	// HeatmapSteps is how many of the latest steps each heatmap keeps.
	// Default 120.
	HeatmapSteps int `mapstructure:"heatmap_steps"`
	// MaxRanks bounds the ranks of one heatmap; steps of further ranks are
	// dropped. Default 16384.
	MaxRanks int `mapstructure:"max_ranks"`
	// MaxHeatmapCells bounds the cells (a rank in a step, 16 B each) of all
	// heatmaps together; the least recently updated jobs are forgotten
	// first. Default 8388608 (128 MiB): a 16384-rank job's 120 steps are
	// 2 million cells.
	MaxHeatmapCells int `mapstructure:"max_heatmap_cells"`
	// Forward: on a standby, forward the controls (release, breaker reset,
	// acknowledge) to the owner's console instead of refusing them, so that
	// a Service reaching any replica serves them. Off by default.
	Forward ForwardConfig `mapstructure:"forward"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// ForwardConfig is how a standby forwards a control to the owner.
type ForwardConfig struct {
	// Enabled forwards controls received on a standby to the console URL
	// the owner advertises to the gpu_faults group (its receiver's
	// console_url), with the caller's bearer token; the owner checks it,
	// acts and audits, and its answer is relayed. Off: a standby answers
	// 409 naming the owner.
	Enabled bool `mapstructure:"enabled"`
	// Timeout bounds one forwarded control, connection to answer. Default
	// 40s; at most 55s (under the server's write timeout).
	Timeout time.Duration `mapstructure:"timeout"`
	// TLS verifies the owner's certificate (configtls client settings):
	// ca_file or ca_pem is required, the CA that signed the consoles'
	// certificates; the system's roots and insecure_skip_verify are
	// refused, since the caller's token goes to whoever answers. cert_file
	// and key_file present a client certificate (the owner's
	// client_ca_file). An owner advertising http:// is reached only on a
	// loopback address.
	TLS configtls.ClientConfig `mapstructure:"tls"`
}

// validate checks forward's keys when it is enabled (from Config's
// Validate, so that the messages name forward::).
func (f *ForwardConfig) validate() error {
	if !f.Enabled {
		return nil
	}
	var errs []error
	if f.Timeout <= 0 || f.Timeout > maxForwardTimeout {
		errs = append(errs, fmt.Errorf("forward::timeout must be above 0 and at most %s, got %q", maxForwardTimeout, f.Timeout.String()))
	}
	if f.TLS.CAFile == "" && f.TLS.CAPem == "" {
		errs = append(errs, errors.New("forward::tls::ca_file (or ca_pem) is required with forward::enabled: the caller's bearer token goes to the owner's advertised URL, verified against the CA that signed the consoles' certificates"))
	}
	if f.TLS.InsecureSkipVerify {
		errs = append(errs, errors.New("forward::tls::insecure_skip_verify: true is refused: the caller's bearer token would go to whoever answers at the owner's advertised URL"))
	}
	if f.TLS.IncludeSystemCACertsPool {
		errs = append(errs, errors.New("forward::tls::include_system_ca_certs_pool: true is refused: a public certificate for any name would pass, and the owner's URL is what a group member advertises; name the consoles' CA only"))
	}
	if f.TLS.Insecure {
		errs = append(errs, errors.New("forward::tls::insecure: true is refused: the scheme is the owner's advertised URL's, and plain http:// is used only on a loopback address"))
	}
	return errors.Join(errs...)
}

// Validate checks the configuration. Messages name the key and the bad value.
func (cfg *Config) Validate() error {
	var errs []error
	if err := validateEndpoint(cfg.Endpoint); err != nil {
		errs = append(errs, err)
	} else if host, _, _ := net.SplitHostPort(cfg.Endpoint); cfg.TLS == nil && everyAddress(host) {
		errs = append(errs, fmt.Errorf("endpoint %q listens on every address of the machine over plain HTTP: set tls (cert_file, key_file), or listen on localhost or one address", cfg.Endpoint))
	}
	if strings.TrimSpace(cfg.TokenFile) == "" {
		errs = append(errs, errors.New("token_file is required: name a file holding the bearer token (at least 16 bytes) that API clients must send"))
	}
	if err := validateTemplate("trace_url", cfg.TraceURL, "{trace_id}"); err != nil {
		errs = append(errs, err)
	}
	if err := validateTemplate("logs_url", cfg.LogsURL, "{fault_id}"); err != nil {
		errs = append(errs, err)
	}
	if cfg.ResolvedRetention <= 0 {
		errs = append(errs, fmt.Errorf("resolved_retention must be greater than 0, got %q", cfg.ResolvedRetention.String()))
	}
	for _, limit := range []struct {
		key             string
		value, smallest int
	}{
		{"max_faults", cfg.MaxFaults, 1},
		{"max_jobs", cfg.MaxJobs, 1},
		{"heatmap_steps", cfg.HeatmapSteps, 1},
		{"max_ranks", cfg.MaxRanks, 1},
		{"max_heatmap_cells", cfg.MaxHeatmapCells, 1},
	} {
		if limit.value < limit.smallest {
			errs = append(errs, fmt.Errorf("%s must be at least %d, got %d", limit.key, limit.smallest, limit.value))
		}
	}
	errs = append(errs, cfg.Forward.validate())
	return errors.Join(errs...)
}

// everyAddress: host names no address, so the listener takes them all.
func everyAddress(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

func validateEndpoint(endpoint string) error {
	if endpoint == "" {
		return errors.New("endpoint must be host:port, got an empty string")
	}
	_, port, err := net.SplitHostPort(endpoint)
	if err != nil {
		return fmt.Errorf("endpoint must be host:port, got %q: %w", endpoint, err)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || (p == 0 && port != "0") {
		return fmt.Errorf("endpoint %q: port %q is not a number from 0 to 65535", endpoint, port)
	}
	return nil
}

func validateTemplate(key, tmpl, placeholder string) error {
	if tmpl == "" {
		return nil
	}
	if !strings.Contains(tmpl, placeholder) {
		return fmt.Errorf("%s %q must contain %s", key, tmpl, placeholder)
	}
	u, err := url.Parse(strings.ReplaceAll(tmpl, placeholder, "x"))
	if err != nil {
		return fmt.Errorf("%s %q is not a URL: %w", key, tmpl, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%s %q must be an http:// or https:// URL", key, tmpl)
	}
	return nil
}
