package testbed

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Baseline phase times of a simulated step. They are attributes the
// script reports, not the wall-clock length of the step (a step lasts
// Options.StepPeriod), so any step period can carry them.
var basePhases = [4]struct {
	name string // the contract's phase name (steprecord.PhaseKey gives its attribute)
	d    time.Duration
}{
	{"dataload", 20 * time.Millisecond},
	{"forward", 250 * time.Millisecond},
	{"backward", 500 * time.Millisecond},
	{"optimizer", 40 * time.Millisecond},
}

const (
	// collectivesPerStep all-reduces per step, each taking baseCollective
	// on a healthy link.
	collectivesPerStep = 4
	baseCollective     = 30 * time.Millisecond
)

// job is one scenario's simulated training job: its ranks' timings per
// step and the state of its nodes' hardware.
type job struct {
	sc    Scenario
	id    string
	seed  uint64
	rng   *rand.Rand
	nodes []*node
	// collSeq is the last collective sequence number of the job's default
	// process group (every rank runs the same collectives).
	collSeq int64
	// stopped: the job hung or crashed; no more steps.
	stopped bool
}

// rankStep is what one rank did in one step.
type rankStep struct {
	rank, node, gpu int
	phases          [4]time.Duration
	collectives     [collectivesPerStep]time.Duration
	ppStage         int
	hasStage        bool
	loss            float64
}

func (r *rankStep) compute() time.Duration {
	var c time.Duration
	for _, p := range r.phases {
		c += p
	}
	return c
}

func newJob(sc Scenario, runID string, seed uint64) *job {
	j := &job{
		sc:   sc,
		id:   "sim-" + sc.Name + "-" + runID,
		seed: seed,
		rng:  rand.New(rand.NewPCG(seed, hashSeed(sc.Name))),
	}
	for n := 0; n < sc.Nodes; n++ {
		j.nodes = append(j.nodes, newNode(j, n))
	}
	return j
}

func hashSeed(s string) uint64 {
	h := sha256.Sum256([]byte(s))
	var v uint64
	for _, b := range h[:8] {
		v = v<<8 | uint64(b)
	}
	return v
}

// hostName is the node's host.name; unique per scenario within a run.
func (j *job) hostName(n int) string { return fmt.Sprintf("%s-n%d", j.sc.Name, n) }

// gpuUUID is a stable, NVML-shaped UUID for the node's GPU.
func (j *job) gpuUUID(n, g int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", j.hostName(n), g)))
	x := hex.EncodeToString(h[:16])
	return "GPU-" + x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

func (j *job) rankOf(n, g int) int { return n*j.sc.GPUsPerNode + g }

// active lists the injections in effect at step.
func (j *job) active(step int) []*Injection {
	var out []*Injection
	for _, in := range j.sc.injections() {
		if step >= in.AtStep {
			out = append(out, in)
		}
	}
	return out
}

// targets reports whether the injection is aimed at this rank's GPU.
func (in *Injection) targets(n, g int) bool { return in.Node == n && in.GPU == g }

// simulateStep draws every rank's phases and collective times for step.
// Synchronous training: every rank waits in its collectives for the
// slowest rank, so a compute straggler waits least and its peers most.
func (j *job) simulateStep(step int) []rankStep {
	sc := j.sc
	out := make([]rankStep, 0, sc.Ranks())
	checkpoint := sc.Noise.CheckpointEvery > 0 && step > 0 && step%sc.Noise.CheckpointEvery == 0
	active := j.active(step)
	for n := 0; n < sc.Nodes; n++ {
		for g := 0; g < sc.GPUsPerNode; g++ {
			r := rankStep{rank: j.rankOf(n, g), node: n, gpu: g, loss: 2.5 * math.Exp(-float64(step)/200)}
			factor := 1.0
			if len(sc.Noise.PPStages) > 0 {
				r.ppStage = r.rank * len(sc.Noise.PPStages) / sc.Ranks()
				r.hasStage = true
				factor *= sc.Noise.PPStages[r.ppStage]
			}
			if sc.Noise.SeqLenSigma > 0 {
				factor *= math.Exp(j.rng.NormFloat64() * sc.Noise.SeqLenSigma)
			}
			if checkpoint {
				factor *= sc.Noise.CheckpointFactor
			}
			for _, in := range active {
				if in.targets(n, g) && (in.Kind == InjectComputeStraggler || in.Kind == InjectThermal) {
					factor *= in.Factor
				}
			}
			for p := range basePhases {
				f := factor * (1 + sc.Jitter*j.rng.NormFloat64())
				if p == 0 && sc.Noise.HiccupProb > 0 && j.rng.Float64() < sc.Noise.HiccupProb {
					// a data-loader stall: the whole step waits on input
					f *= sc.Noise.HiccupFactor * 10
				}
				r.phases[p] = time.Duration(max(f, 0.05) * float64(basePhases[p].d))
			}
			for _, in := range active {
				if in.Kind == InjectLossNaN {
					r.loss = math.NaN()
				}
			}
			out = append(out, r)
		}
	}
	// Collectives: the link's own transfer time, plus waiting for the
	// slowest compute of the step.
	var slowest time.Duration
	for i := range out {
		slowest = max(slowest, out[i].compute())
	}
	for i := range out {
		r := &out[i]
		link := 1.0
		for _, in := range active {
			switch {
			case in.Kind == InjectSlowLink && r.node == in.Node:
				link *= in.Factor
			case in.Kind == InjectNVLinkDegradation && in.targets(r.node, r.gpu):
				link *= in.Factor
			}
		}
		waitForPeers := slowest - r.compute()
		for c := range r.collectives {
			transfer := time.Duration(link * (1 + sc.Jitter*j.rng.NormFloat64()) * float64(baseCollective))
			r.collectives[c] = max(transfer, time.Millisecond) + waitForPeers/collectivesPerStep
		}
	}
	return out
}
