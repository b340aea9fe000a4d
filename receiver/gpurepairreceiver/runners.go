package gpurepairreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver"

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.opentelemetry.io/collector/receiver"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/verify"
)

// runnersFunc returns the verification checks the agent can run, by
// check. store is the nodestate extension verify::links::nodestate names
// (nil when none). A check missing from the map is not available: a
// verification asking for it ends refused ("check ... is not available on
// this agent"), so the node is not released on a check that never ran.
type runnersFunc func(cfg *Config, set receiver.Settings, store nodestate.Store) (map[repair.Check]verify.Runner, error)

// productionRunners builds the checks of internal/verify from
// cfg.Verify: dcgm_diag always (the command or the DCGM library backend),
// links_steady when enabled and a nodestate store is there.
func productionRunners(cfg *Config, _ receiver.Settings, store nodestate.Store) (map[repair.Check]verify.Runner, error) {
	d := cfg.Verify.Diag
	opts := verify.DiagOptions{AllowWarn: d.AllowWarn}
	var diag *verify.DiagRunner
	var err error
	switch d.Backend {
	case DiagBackendCommand:
		diag, err = verify.NewCommandDiag(verify.CommandDiagOptions{
			Command: slices.Clone(d.Command), Timeouts: d.Timeouts.verify(), KillGrace: d.KillGrace, DiagOptions: opts})
	case DiagBackendDCGM:
		diag, err = verify.NewLibraryDiag(verify.NewDCGMLib(d.DCGM.Mode == DCGMModeEmbedded, d.DCGM.Endpoint),
			verify.LibraryDiagOptions{Timeouts: d.Timeouts.verify(), DiagOptions: opts})
	default:
		err = fmt.Errorf("verify::diag::backend %q is not %s or %s", d.Backend, DiagBackendCommand, DiagBackendDCGM)
	}
	if err != nil {
		return nil, fmt.Errorf("verify::diag: %w", err)
	}
	runners := map[repair.Check]verify.Runner{repair.CheckDiag: diag}
	if l := cfg.Verify.Links; l.Enabled && store != nil {
		links, err := verify.NewLinksRunner(store, verify.RealClock{}, verify.LinksOptions{Grace: l.Grace, Poll: l.Poll, RequireIB: l.RequireIB})
		if err != nil {
			return nil, fmt.Errorf("verify::links: %w", err)
		}
		runners[repair.CheckLinksSteady] = links
	}
	return runners, nil
}

// closer is a runner holding something until Close (verify.DiagRunner: a
// library diagnostic DCGM still runs).
type closer interface {
	Close(ctx context.Context) error
}

// closeRunners closes every runner that holds something, within ctx.
func closeRunners(ctx context.Context, runners map[repair.Check]verify.Runner) error {
	var errs []error
	for c, r := range runners {
		if cl, ok := r.(closer); ok {
			if err := cl.Close(ctx); err != nil {
				errs = append(errs, fmt.Errorf("gpurepair: closing the %s check: %w", c, err))
			}
		}
	}
	return errors.Join(errs...)
}

// withRunners replaces the runners (tests).
func withRunners(r map[repair.Check]verify.Runner) factoryOption {
	return func(o *factoryOptions) {
		o.runners = func(*Config, receiver.Settings, nodestate.Store) (map[repair.Check]verify.Runner, error) {
			return r, nil
		}
	}
}
