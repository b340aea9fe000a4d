package dcgmsrc

// MIG: a GPU in MIG mode is reported as itself plus one sample per MIG GPU
// instance, right after it, carrying the parent's identity (index, UUID,
// PCI bus id, device node: as dcgm-exporter labels MIG instances) and
// GPU.MIG = {GPU instance id, compute instance id, profile}.
//
//   - The layout comes from DCGM's MIG hierarchy, read when a connection
//     generation starts (Start and every reconnect). Re-partitioning a GPU
//     needs it idle; until DCGM reconnects the old layout is kept, and a
//     destroyed instance reads as blanks (dropped).
//   - The GPU instances (DCGM_FE_GPU_I entities) of a GPU form a group of
//     their own, watched with the same field groups and intervals as the
//     GPU. DCGM measures only some fields per instance (framebuffer and
//     profiling fields); the rest read blank and are dropped.
//   - The sample is the GPU instance; its compute instance id is that of its
//     only compute instance, or 0 when it has none or several (DCGM samples
//     GPU instances; dcgm-exporter does not print GPU_CI_ID).
//   - The profile is the instance's DCGM_FI_DEV_NAME (e.g. "1g.10gb", what
//     dcgm-exporter prints as GPU_I_PROFILE), empty when DCGM does not say.
//   - MIG calls run in the parent GPU's guarded call: a hung GPU makes its
//     instances Unresponsive too. A failed MIG read leaves the instances
//     without values (logged once) and never costs the parent its values.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// migInstance is one MIG GPU instance of a GPU on one generation.
type migInstance struct {
	entity uint // DCGM's DCGM_FE_GPU_I entity id
	id     model.MIGInstance
}

// migInstancesOf picks gpu's GPU instances out of DCGM's hierarchy, ordered
// by GPU instance id.
func migInstancesOf(gpu uint, hierarchy []gpuInstance) []migInstance {
	var out []migInstance
	for _, gi := range hierarchy {
		if gi.GPU != gpu || slices.ContainsFunc(out, func(m migInstance) bool { return m.entity == gi.Entity }) {
			continue
		}
		ci := 0
		if len(gi.ComputeInstanceIDs) == 1 {
			ci = int(gi.ComputeInstanceIDs[0])
		}
		out = append(out, migInstance{entity: gi.Entity, id: model.MIGInstance{
			GPUInstanceID:     int(gi.InstanceID),
			ComputeInstanceID: ci,
			Profile:           migProfile(gi.Profile),
		}})
	}
	slices.SortFunc(out, func(a, b migInstance) int {
		return cmp.Or(cmp.Compare(a.id.GPUInstanceID, b.id.GPUInstanceID), cmp.Compare(a.entity, b.entity))
	})
	return out
}

// migProfile returns the profile in a GPU instance's DCGM_FI_DEV_NAME:
// the name itself ("1g.10gb"), or what follows " MIG " in a device-style
// name ("NVIDIA A100-SXM4-40GB MIG 1g.5gb"); "" for DCGM's string sentinels
// ("<<<NULL>>>", "<<<NOT_SUPPORTED>>>", ...).
func migProfile(name string) string {
	name = strings.TrimSpace(name)
	if strings.HasPrefix(name, "<<<") {
		return ""
	}
	if i := strings.LastIndex(name, " MIG "); i >= 0 {
		name = strings.TrimSpace(name[i+len(" MIG "):])
	}
	return name
}

// migNames describes instances for the log.
func migNames(migs []migInstance) []string {
	names := make([]string, len(migs))
	for i, m := range migs {
		names[i] = fmt.Sprintf("GI %d CI %d %s", m.id.GPUInstanceID, m.id.ComputeInstanceID, m.id.Profile)
	}
	return names
}

// collectMIG reads g's MIG instances into r. It runs inside the guard's
// call for g, after the GPU itself was read.
func (s *Source) collectMIG(conn *Connection, st *genState, g *gpuState, req collectRequest, r *gpuResult) {
	gen := st.gen
	entities := make([]uint, len(g.migs))
	index := make(map[uint]int, len(g.migs))
	for i, m := range g.migs {
		entities[i], index[m.entity] = m.entity, i
	}
	err := ensureGroup(conn, gen, g, &g.mig, func(a api) (handle, error) {
		return a.CreateGPUInstanceGroup(s.objectName(gen, gpuKey(g.id)+"_mig", 0), entities)
	})
	if err != nil {
		r.migErr = fmt.Errorf("creating the MIG instance group: %w", err)
		return
	}
	read := func(fields []model.FieldID) func(api) ([]fieldValue, error) {
		return func(a api) ([]fieldValue, error) { return a.GPUInstanceValues(entities, fields) }
	}
	r.migValues = make([][]model.Value, len(g.migs))
	add := func(raw []fieldValue) {
		for _, v := range raw {
			i, known := index[v.GPU]
			if mv, ok := v.toModel(); known && ok {
				r.migValues[i] = append(r.migValues[i], mv)
			}
		}
	}

	if len(req.device) > 0 {
		raw, err := s.watchAndRead(conn, st, g, &g.mig, req.device, s.cfg.CollectionInterval, false, req.profEpoch, read(req.device))
		if err != nil {
			r.migErr = err
			return
		}
		add(raw)
	}

	// Profiling support is the parent's; once the parent's counters are
	// refused, the instances' are left alone until the back-off ends.
	fields, _ := g.profilingFields(req.profiling)
	if !req.profilingOn || len(fields) == 0 || r.profErr != nil {
		return
	}
	raw, err := s.watchAndRead(conn, st, g, &g.mig, fields, s.cfg.ProfilingInterval, true, req.profEpoch, read(fields))
	if err != nil {
		r.profErr = err
		return
	}
	add(raw)
	r.profRead = true
}

// migSamples returns one sample per MIG instance of g: the parent's
// identity and responsiveness, the instance's ids and values.
func migSamples(g *gpuState, parent model.GPUSample, r gpuResult) []model.GPUSample {
	out := make([]model.GPUSample, len(g.migs))
	for i, m := range g.migs {
		gpu := parent.GPU
		id := m.id // each sample its own copy
		gpu.MIG = &id
		out[i] = model.GPUSample{GPU: gpu, Unresponsive: parent.Unresponsive}
		if i < len(r.migValues) {
			out[i].Values = r.migValues[i]
		}
	}
	return out
}

// setMIGHealthLocked logs when reading a GPU's MIG instances starts or
// stops failing.
func (s *Source) setMIGHealthLocked(gpu model.GPU, err error) {
	id := uint(gpu.Index)
	failing := err != nil
	if s.migFailing[id] == failing {
		return
	}
	s.migFailing[id] = failing
	if failing {
		s.logger.Warn("Reading the MIG instances of GPU failed; reporting them without values", gpuFields(gpu), zap.Error(err))
	} else {
		s.logger.Info("MIG instances of GPU answer again", gpuFields(gpu))
	}
}
