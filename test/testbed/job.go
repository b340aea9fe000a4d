package testbed

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
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
	// slow is each rank's constant factor (noise.slow_share); nil without.
	slow []float64
	// sentAt: when each step's inputs were written and sent (drive), the
	// job's own step clock for max_detect_steps.
	sentAt []time.Time
}

// rankStep is what one rank did in one step.
type rankStep struct {
	rank, node, gpu int
	phases          [4]time.Duration
	collectives     [collectivesPerStep]time.Duration
	ppStage         int
	hasStage        bool
	loss            float64
	// Timed steps (Scenario.timed): offsets from the step's start of each
	// collective's enqueue on this rank and of the rank's step end.
	// commWait is the rank's exposed wait for its peers (timed: for the
	// last all-reduce), training.phase.comm_wait_ns.
	enqueue  [collectivesPerStep]time.Duration
	end      time.Duration
	commWait time.Duration
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
	if share := sc.Noise.SlowShare; share > 0 {
		// its own stream: the other scenarios' draws stay as they were
		rng := rand.New(rand.NewPCG(seed, hashSeed(sc.Name+"/slow")))
		lo, hi := sc.Noise.SlowFactor[0], sc.Noise.SlowFactor[1]
		j.slow = make([]float64, sc.Ranks())
		for r := range j.slow {
			j.slow[r] = 1
			if math.Floor(float64(r+1)*share) > math.Floor(float64(r)*share) {
				j.slow[r] = lo + (hi-lo)*rng.Float64()
			}
		}
	}
	return j
}

// clockOffset is how far node n's data timestamps lie from the time they
// arrive: the job's consumer lag (in the past) plus the node clock's skew.
func (j *job) clockOffset(n int) time.Duration {
	off := -j.sc.DataLag
	if len(j.sc.ClockSkew) > 0 {
		off += j.sc.ClockSkew[n%len(j.sc.ClockSkew)]
	}
	return off
}

// timed reports whether the job's steps follow the overlap timeline
// (enqueue and completion of each all-reduce within the step).
func (sc *Scenario) timed() bool { return sc.Overlap != "" || sc.NoStepSpans }

func (sc *Scenario) phaseScale() float64 {
	if sc.PhaseScale > 0 {
		return sc.PhaseScale
	}
	return 1
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
	scale := sc.phaseScale()
	for n := 0; n < sc.Nodes; n++ {
		for g := 0; g < sc.GPUsPerNode; g++ {
			r := rankStep{rank: j.rankOf(n, g), node: n, gpu: g, loss: 2.5 * math.Exp(-float64(step)/200)}
			factor := 1.0
			if stages := sc.Noise.PPStages; len(stages) > 0 {
				if per := sc.Noise.PPStageRanks; per > 0 {
					r.ppStage = r.rank / per
					factor *= stages[r.ppStage%len(stages)]
				} else {
					r.ppStage = r.rank * len(stages) / sc.Ranks()
					factor *= stages[r.ppStage]
				}
				r.hasStage = !sc.Noise.PPUnlabelled
			}
			if j.slow != nil {
				factor *= j.slow[r.rank]
			}
			if sc.Noise.SeqLenSigma > 0 {
				factor *= math.Exp(j.rng.NormFloat64() * sc.Noise.SeqLenSigma)
			}
			if slices.Contains(sc.Noise.NoisyRanks, r.rank) {
				factor *= math.Exp(j.rng.NormFloat64() * sc.Noise.NoisySigma)
			}
			if n := sc.Noise; step >= n.SpikeAtStep && step < n.SpikeAtStep+n.SpikeSteps && slices.Contains(n.SpikeRanks, r.rank) {
				factor *= n.SpikeFactor
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
				r.phases[p] = time.Duration(max(f, 0.05) * scale * float64(basePhases[p].d))
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
		r.commWait = waitForPeers
		for c := range r.collectives {
			transfer := time.Duration(link * (1 + sc.Jitter*j.rng.NormFloat64()) * scale * float64(baseCollective))
			r.collectives[c] = max(transfer, time.Millisecond) + waitForPeers/collectivesPerStep
		}
	}
	if sc.timed() {
		j.overlapTimeline(out)
	}
	return out
}

// overlapTimeline lays a timed step out (scenarios.yaml: overlap): the
// backward's collectivesPerStep buckets each enqueue an all-reduce when
// their gradients are ready; all-reduce k completes once every rank has
// enqueued it and all-reduce k-1 is done, plus its transfer (the slowest
// rank's, drawn above as collectives[k] less the wait). A rank's optimizer
// waits for the last all-reduce. r.collectives becomes each rank's time
// from its enqueue to the completion; under the legacy contract the
// backward phase includes the wait.
func (j *job) overlapTimeline(out []rankStep) {
	var slowest time.Duration
	for i := range out {
		slowest = max(slowest, out[i].compute())
	}
	var done time.Duration // completion of the previous all-reduce
	var complete [collectivesPerStep]time.Duration
	for c := 0; c < collectivesPerStep; c++ {
		var lastEnqueue, transfer time.Duration
		for i := range out {
			r := &out[i]
			computeEnd := r.phases[0] + r.phases[1] + r.phases[2]*time.Duration(c+1)/collectivesPerStep
			r.enqueue[c] = computeEnd
			lastEnqueue = max(lastEnqueue, computeEnd)
			// the transfer drawn in simulateStep, without the old wait model
			transfer = max(transfer, r.collectives[c]-(slowest-r.compute())/collectivesPerStep)
		}
		done = max(lastEnqueue, done) + transfer
		complete[c] = done
	}
	last := complete[collectivesPerStep-1]
	for i := range out {
		r := &out[i]
		backwardEnd := r.phases[0] + r.phases[1] + r.phases[2]
		r.commWait = max(last-backwardEnd, 0)
		for c := range r.collectives {
			r.collectives[c] = complete[c] - r.enqueue[c]
		}
		r.end = max(backwardEnd, last) + r.phases[3]
		if j.sc.Overlap == OverlapLegacy {
			r.phases[2] += r.commWait
		}
	}
}
