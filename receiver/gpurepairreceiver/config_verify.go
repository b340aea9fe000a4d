package gpurepairreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver"

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/verify"
)

// Backends of the dcgm_diag check (verify::diag::backend).
const (
	// DiagBackendCommand runs verify::diag::command (dcgmi diag -j) and
	// parses its JSON: the default, it needs only dcgmi and the host engine.
	DiagBackendCommand = "command"
	// DiagBackendDCGM calls the DCGM library (go-dcgm); a build without cgo
	// cannot, and every diagnostic then fails to run.
	DiagBackendDCGM = "dcgm"
)

// Modes of the DCGM library backend (verify::diag::dcgm::mode), as the
// dcgm receiver's.
const (
	DCGMModeStandalone = "standalone" // connect to an nv-hostengine at endpoint
	DCGMModeEmbedded   = "embedded"   // start a host engine in this process
)

// Defaults of verify::diag and verify::links.
const (
	DefaultDCGMEndpoint = "localhost:5555"
	DefaultNodeStateID  = "nodestate"
	DefaultLinksGrace   = verify.DefaultLinksGrace
	DefaultLinksPoll    = verify.DefaultLinksPoll
)

// Placeholders of verify::diag::command.
const (
	PlaceholderLevel = "{level}" // the DCGM diagnostic level, 1 to 3
	PlaceholderGPUs  = "{gpus}"  // the GPUs' driver indexes, comma-separated
)

// DefaultDiagCommand is dcgmi against the local host engine, JSON out, on
// the GPUs verified.
var DefaultDiagCommand = slices.Clone(verify.DefaultDiagCommand)

// DiagConfig is how the dcgm_diag check runs.
type DiagConfig struct {
	// Backend is command (default) or dcgm.
	Backend string `mapstructure:"backend"`
	// Command is the program and its arguments of the command backend, run
	// without a shell in a process group of its own; {level} and {gpus} (both
	// required: a fixed level would pass a weaker check than the one asked,
	// and without {gpus} DCGM would test GPUs the job does not hold) are the
	// only placeholders. Its stdout must be `dcgmi diag -j`'s JSON.
	Command []string `mapstructure:"command"`
	// DCGM is where the dcgm backend finds DCGM.
	DCGM DCGMConfig `mapstructure:"dcgm"`
	// Timeouts bound one diagnostic per level (default 10m, 30m, 2h). The
	// verification's own verify::timeout (default 1h) bounds its checks
	// together: raise it for level 3 diagnostics.
	Timeouts DiagTimeoutsConfig `mapstructure:"timeouts"`
	// KillGrace is how long a cancelled dcgmi has after SIGTERM before its
	// process group is killed (default 10s).
	KillGrace time.Duration `mapstructure:"kill_grace"`
	// AllowWarn lets a test DCGM passed with a warning pass (default false:
	// a node returns only on a clean run).
	AllowWarn bool `mapstructure:"allow_warn"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// DCGMConfig is the DCGM library backend's connection.
type DCGMConfig struct {
	// Mode is standalone (default: the nv-hostengine at endpoint) or
	// embedded.
	Mode string `mapstructure:"mode"`
	// Endpoint is host:port, /path or unix:///path of the host engine
	// (standalone; default localhost:5555).
	Endpoint string `mapstructure:"endpoint"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// DiagTimeoutsConfig bounds one diagnostic per level.
type DiagTimeoutsConfig struct {
	Level1 time.Duration `mapstructure:"level1"`
	Level2 time.Duration `mapstructure:"level2"`
	Level3 time.Duration `mapstructure:"level3"`

	// prevent unkeyed literal initialization
	_ struct{}
}

func (t DiagTimeoutsConfig) verify() verify.DiagTimeouts {
	return verify.DiagTimeouts{Quick: t.Level1, Medium: t.Level2, Long: t.Level3}
}

// LinksConfig is the links_steady check.
type LinksConfig struct {
	// Enabled offers the check (default true). Off, a verification asking
	// for links_steady ends refused, never passed.
	Enabled bool `mapstructure:"enabled"`
	// NodeState is the id of the nodestate extension the check reads, and
	// the confirm endpoint too (default nodestate). Named, it must be
	// configured, else the receiver does not start. Empty: no links_steady
	// check, and the confirm endpoint confirms nothing.
	NodeState string `mapstructure:"nodestate"`
	// Grace is how long after the window the check waits for the readings
	// that close it (default 2m).
	Grace time.Duration `mapstructure:"grace"`
	// Poll is how often it looks for them meanwhile (default 5s).
	Poll time.Duration `mapstructure:"poll"`
	// RequireIB fails the check on a node with no InfiniBand port reading
	// (default false: such a node is judged by its NVLinks).
	RequireIB bool `mapstructure:"require_ib"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// nodeStateID is the parsed NodeState; ok false when empty.
func (l LinksConfig) nodeStateID() (component.ID, bool, error) {
	if strings.TrimSpace(l.NodeState) == "" {
		return component.ID{}, false, nil
	}
	var id component.ID
	if err := id.UnmarshalText([]byte(l.NodeState)); err != nil {
		return component.ID{}, false, err
	}
	return id, true, nil
}

func defaultVerifyChecks() (DiagConfig, LinksConfig) {
	return DiagConfig{
			Backend:   DiagBackendCommand,
			Command:   slices.Clone(DefaultDiagCommand),
			DCGM:      DCGMConfig{Mode: DCGMModeStandalone, Endpoint: DefaultDCGMEndpoint},
			Timeouts:  DiagTimeoutsConfig{Level1: verify.DefaultDiagTimeouts.Quick, Level2: verify.DefaultDiagTimeouts.Medium, Level3: verify.DefaultDiagTimeouts.Long},
			KillGrace: verify.DefaultKillGrace,
		}, LinksConfig{
			Enabled:   true,
			NodeState: DefaultNodeStateID,
			Grace:     DefaultLinksGrace,
			Poll:      DefaultLinksPoll,
		}
}

func (d DiagConfig) validate() []error {
	var errs []error
	switch d.Backend {
	case DiagBackendCommand:
		if err := checkDiagCommand(d.Command); err != nil {
			errs = append(errs, fmt.Errorf("verify::diag::command: %w", err))
		}
	case DiagBackendDCGM:
		switch d.DCGM.Mode {
		case DCGMModeStandalone:
			if strings.TrimSpace(d.DCGM.Endpoint) == "" {
				errs = append(errs, errors.New("verify::diag::dcgm::endpoint must not be empty in standalone mode"))
			}
		case DCGMModeEmbedded:
		default:
			errs = append(errs, fmt.Errorf("verify::diag::dcgm::mode must be %s or %s, got %q", DCGMModeStandalone, DCGMModeEmbedded, d.DCGM.Mode))
		}
	default:
		errs = append(errs, fmt.Errorf("verify::diag::backend must be %s or %s, got %q", DiagBackendCommand, DiagBackendDCGM, d.Backend))
	}
	for _, t := range []struct {
		key string
		d   time.Duration
	}{{"level1", d.Timeouts.Level1}, {"level2", d.Timeouts.Level2}, {"level3", d.Timeouts.Level3}} {
		if t.d <= 0 {
			errs = append(errs, fmt.Errorf("verify::diag::timeouts::%s must be greater than 0, got %q", t.key, t.d.String()))
		}
	}
	if d.KillGrace <= 0 {
		errs = append(errs, fmt.Errorf("verify::diag::kill_grace must be greater than 0, got %q", d.KillGrace.String()))
	}
	return errs
}

// checkDiagCommand refuses an empty program, a placeholder other than
// {level} and {gpus}, and a command missing either.
func checkDiagCommand(argv []string) error {
	if len(argv) == 0 || strings.TrimSpace(argv[0]) == "" {
		return fmt.Errorf("must name a program (default %q)", DefaultDiagCommand)
	}
	level, gpus := false, false
	for i, a := range argv {
		level = level || strings.Contains(a, PlaceholderLevel)
		gpus = gpus || strings.Contains(a, PlaceholderGPUs)
		rest := strings.ReplaceAll(strings.ReplaceAll(a, PlaceholderLevel, ""), PlaceholderGPUs, "")
		if j := strings.IndexAny(rest, "{}"); j >= 0 {
			return fmt.Errorf("argument %d %q: unknown placeholder near %q (known: %s, %s)", i, a, rest[j:], PlaceholderLevel, PlaceholderGPUs)
		}
	}
	if !level || !gpus {
		return fmt.Errorf("%q must hold %s and %s: a fixed level would pass a weaker check than the one asked, and without the GPUs DCGM tests GPUs the job does not hold", argv, PlaceholderLevel, PlaceholderGPUs)
	}
	return nil
}

func (l LinksConfig) validate() []error {
	var errs []error
	if _, _, err := l.nodeStateID(); err != nil {
		errs = append(errs, fmt.Errorf("verify::links::nodestate %q is not a component id: %w", l.NodeState, err))
	}
	if l.Grace <= 0 {
		errs = append(errs, fmt.Errorf("verify::links::grace must be greater than 0, got %q", l.Grace.String()))
	}
	if l.Poll <= 0 {
		errs = append(errs, fmt.Errorf("verify::links::poll must be greater than 0, got %q", l.Poll.String()))
	}
	return errs
}
