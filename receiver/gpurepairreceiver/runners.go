package gpurepairreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver"

import (
	"go.opentelemetry.io/collector/receiver"

	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/verify"
)

// runnersFunc returns the verification checks the agent can run, by
// check. A check missing from the map is not available: a verification
// asking for it ends refused ("check ... is not available on this agent"),
// so the node is not released on a check that never ran.
type runnersFunc func(cfg *Config, set receiver.Settings) (map[repair.Check]verify.Runner, error)

// productionRunners is where the verify package's runners are plugged in
// (issue 33: DCGM diagnostics and the link counters steady over a window,
// built in internal/verify). Until they are, it offers no check, and every
// verification ends refused.
//
// To wire them: construct them here from cfg (add their settings under
// Config.Verify) and return
//
//	map[repair.Check]verify.Runner{
//		repair.CheckDiag:        verify.NewDiag(...),
//		repair.CheckLinksSteady: verify.NewLinksSteady(...),
//	}
func productionRunners(*Config, receiver.Settings) (map[repair.Check]verify.Runner, error) {
	return map[repair.Check]verify.Runner{}, nil
}

// withRunners replaces the runners (tests).
func withRunners(r map[repair.Check]verify.Runner) factoryOption {
	return func(o *factoryOptions) {
		o.runners = func(*Config, receiver.Settings) (map[repair.Check]verify.Runner, error) { return r, nil }
	}
}
