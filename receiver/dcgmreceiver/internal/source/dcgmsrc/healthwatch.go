package dcgmsrc

// DCGM's health watches: set once per connection generation on one group
// of every GPU (and NVSwitch), checked at each collection.

import (
	"context"
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// healthGuardKey serialises the health calls of a source in its guard.
const healthGuardKey = "health"

// gpuHealthSystems are the systems watched on every GPU; nvSwitchSystems
// those watched where the node has NVSwitches.
const (
	gpuHealthSystems = healthPCIe | healthMemory | healthInforom | healthThermal | healthPower | healthNVLink
	nvSwitchSystems  = healthNVSwitchFatal | healthNVSwitchNonFatal
)

// healthSystemNames names each watched system as the receiver writes it
// (semconv.AttrGPUHealthSystem), in the order the receiver reports them.
var healthSystemNames = []struct {
	bit  healthSystems
	name string
}{
	{healthPCIe, semconv.HealthSystemPCIe},
	{healthMemory, semconv.HealthSystemMemory},
	{healthInforom, semconv.HealthSystemInforom},
	{healthThermal, semconv.HealthSystemThermal},
	{healthPower, semconv.HealthSystemPower},
	{healthNVLink, semconv.HealthSystemNVLink},
	{healthNVSwitchFatal, semconv.HealthSystemNVSwitchFatal},
	{healthNVSwitchNonFatal, semconv.HealthSystemNVSwitchNonFatal},
}

// names returns the names of the systems in s.
func (s healthSystems) names() []string {
	var out []string
	for _, n := range healthSystemNames {
		if s&n.bit != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// healthWatch is the health group of one generation.
type healthWatch struct {
	group    handle
	set      bool
	systems  healthSystems // what HealthSet accepted
	switches []uint        // the NVSwitches in the group
}

// take empties w, returning its group if it had one.
func (w *healthWatch) take() (handle, bool) {
	g, ok := w.group, w.set
	*w = healthWatch{}
	return g, ok
}

// healthCodeName returns the DCGM_FR_* name of code.
func healthCodeName(code int) string {
	if n, ok := healthCodeNames[code]; ok {
		return n
	}
	return fmt.Sprintf("DCGM_FR_%d", code)
}

// CheckHealth implements source.Health. It sets the watches the first time
// in each connection generation (DCGM's first check after that reports
// nothing: it records the state to compare with) and returns what they
// report now.
func (s *Source) CheckHealth(ctx context.Context) (model.HealthReport, error) {
	conn := s.conn.Load()
	if conn == nil {
		return model.HealthReport{}, fmt.Errorf("dcgmreceiver: dcgm: health check before start")
	}
	gen, err := conn.connect(ctx)
	if err != nil {
		return model.HealthReport{}, err
	}
	s.mu.Lock()
	st, err := s.stateLocked(ctx, conn, gen)
	s.mu.Unlock()
	if err != nil {
		return model.HealthReport{}, err
	}
	if len(st.gpus) == 0 {
		// Nothing watched: no news, not every incident cleared.
		return model.HealthReport{Time: s.now(), Baseline: true}, nil
	}

	var (
		incidents []healthIncident
		watched   healthWatch
		baseline  bool
	)
	err = s.guard.Do(ctx, healthGuardKey, s.cfg.CallTimeout, func() error {
		baseline = !st.health.set
		if err := s.setHealthWatches(conn, st); err != nil {
			return err
		}
		watched = st.health
		return conn.do(gen, func(a api) error {
			var err error
			incidents, err = a.HealthCheck(st.health.group)
			return err
		})
	})
	if err != nil {
		return model.HealthReport{}, fmt.Errorf("dcgmreceiver: dcgm: health check: %w", err)
	}

	gpus := s.identifyHealthGPUs(ctx, conn, st)
	rep := model.HealthReport{
		Time:       s.now(),
		GPUSystems: (watched.systems & gpuHealthSystems).names(),
		NVSwitches: slices.Clone(watched.switches),
		Baseline:   baseline,
	}
	if len(watched.switches) > 0 {
		rep.NVSwitchSystems = (watched.systems & nvSwitchSystems).names()
	}
	for _, g := range st.gpus {
		rep.GPUs = append(rep.GPUs, gpus[g.id])
	}
	for _, in := range incidents {
		var result model.HealthResult
		switch {
		case in.Result >= healthResultFail:
			result = model.HealthFail
		case in.Result >= healthResultWarn:
			result = model.HealthWarn
		default:
			continue // a pass is no incident
		}
		names := in.System.names()
		if len(names) != 1 {
			continue // not one of the systems the source set
		}
		inc := model.HealthIncident{
			System:   names[0],
			Result:   result,
			Code:     in.Code,
			CodeName: healthCodeName(in.Code),
			Message:  in.Message,
		}
		if in.OnSwitch {
			inc.OnNVSwitch, inc.NVSwitch = true, in.Entity
		} else if g, ok := gpus[in.Entity]; ok {
			inc.GPU = g
		} else {
			inc.GPU = model.GPU{Index: int(in.Entity)}
		}
		rep.Incidents = append(rep.Incidents, inc)
	}
	return rep, nil
}

// setHealthWatches creates the generation's health group and sets its
// watches, once. When DCGM refuses the NVSwitch systems, the GPU systems
// are set alone (logged once per source). It runs inside the guard's
// health calls.
func (s *Source) setHealthWatches(conn *Connection, st *genState) error {
	if st.health.set {
		return nil
	}
	ids := make([]uint, len(st.gpus))
	for i, g := range st.gpus {
		ids[i] = g.id
	}
	var switches []uint
	if err := conn.do(st.gen, func(a api) error {
		var err error
		switches, err = a.NVSwitches()
		return err
	}); err != nil {
		s.logNVSwitchRefused("listing the NVSwitches failed", err)
		switches = nil
	}
	try := func(switches []uint, systems healthSystems) error {
		return conn.do(st.gen, func(a api) error {
			group, err := a.CreateHealthGroup(s.objectName(st.gen, "health", 0), ids, switches)
			if err != nil {
				return err
			}
			if err := a.HealthSet(group, systems); err != nil {
				_ = a.DestroyGPUGroup(group)
				return err
			}
			st.health = healthWatch{group: group, set: true, systems: systems, switches: switches}
			return nil
		})
	}
	if len(switches) > 0 {
		err := try(switches, gpuHealthSystems|nvSwitchSystems)
		if err == nil {
			return nil
		}
		if gen, up := conn.generation(); !up || gen != st.gen {
			return err // the connection went, not the NVSwitch watches
		}
		s.logNVSwitchRefused("DCGM refused the NVSwitch health watches", err)
	}
	return try(nil, gpuHealthSystems)
}

func (s *Source) logNVSwitchRefused(msg string, err error) {
	if s.nvSwitchRefusedLogged.CompareAndSwap(false, true) {
		s.logger.Warn("dcgmreceiver: "+msg+"; watching the GPUs' health without the NVSwitches", zap.Error(err))
	}
}

// identifyHealthGPUs returns the identity of every GPU of st, first
// reading it for those no collection has identified yet: each is named in
// the report.
func (s *Source) identifyHealthGPUs(ctx context.Context, conn *Connection, st *genState) map[uint]model.GPU {
	values := make([]fieldValue, len(st.gpus))
	for i, g := range st.gpus {
		values[i] = fieldValue{GPU: g.id}
	}
	return s.identifyXIDGPUs(ctx, conn, st, values)
}
