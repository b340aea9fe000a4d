package policy

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// Verify is a rule's verification before a repaired node returns to
// service: DCGM diagnostics at DiagLevel (0: level 1) on the node's GPUs,
// and, when LinksSteady is set, the node's NVLink and InfiniBand error
// counters steady over that window.
type Verify struct {
	DiagLevel   int           `mapstructure:"diag_level"`
	LinksSteady time.Duration `mapstructure:"links_steady"`
}

// DefaultDiagLevel is the DCGM diagnostic level of a rule that names none:
// level 1 (quick, about a minute); memory faults ask for level 2.
const DefaultDiagLevel = 1

func (v Verify) validate() error {
	var errs []error
	if v.DiagLevel < 0 || v.DiagLevel > 3 {
		errs = append(errs, fmt.Errorf("verify.diag_level %d: want 1, 2 or 3 (0: %d)", v.DiagLevel, DefaultDiagLevel))
	}
	if v.LinksSteady < 0 {
		errs = append(errs, fmt.Errorf("verify.links_steady %v: must not be negative", v.LinksSteady))
	}
	return errors.Join(errs...)
}

// Checks are the verification's checks, DCGM diagnostics first.
func (v Verify) Checks() []repair.CheckSpec {
	level := v.DiagLevel
	if level == 0 {
		level = DefaultDiagLevel
	}
	out := []repair.CheckSpec{{Check: repair.CheckDiag, Level: level}}
	if v.LinksSteady > 0 {
		out = append(out, repair.CheckSpec{Check: repair.CheckLinksSteady, Window: v.LinksSteady})
	}
	return out
}

// validateRepair checks a repair ladder: known actions, each once, rma
// never listed (it always ends the ladder).
func validateRepair(ladder []string) error {
	var errs []error
	for i, a := range ladder {
		switch repair.Action(a) {
		case repair.ActionGPUReset, repair.ActionReboot:
			if slices.Contains(ladder[:i], a) {
				errs = append(errs, fmt.Errorf("repair: %q listed twice", a))
			}
		case repair.ActionRMA:
			errs = append(errs, errors.New("repair: rma always ends the ladder; do not list it"))
		default:
			errs = append(errs, fmt.Errorf("repair: unknown action %q (want gpu_reset or reboot)", a))
		}
	}
	return errors.Join(errs...)
}
