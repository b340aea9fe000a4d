// Package testbed is the fault-injection simulator of the detection-quality
// suite (issue 6). It simulates training jobs on GPU nodes and injects
// faults at the raw inputs the agent reads — dcgm-exporter pages, sysfs
// InfiniBand counter files, PyTorch flight-recorder dumps and OTLP step
// spans — then runs the real receivers, processors and connectors in one
// in-process collector and scores the fault records that come out against
// the expected outcomes of scenarios.yaml: per fault type precision, recall
// and time from onset to the first open record.
//
// Time is real: a simulated step lasts Options.StepPeriod and the receivers
// scrape at Options.ScrapeInterval, so the latencies measured are the
// pipeline's own. Randomness comes from one seed per run, logged and
// reported, so a run can be repeated.
package testbed // import "github.com/otelcol-gpu/otelcol-gpu/test/testbed"

import (
	_ "embed"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

//go:embed scenarios.yaml
var scenariosYAML []byte

// Injection kinds (scenarios.yaml explains each).
const (
	InjectComputeStraggler  = "compute_straggler"
	InjectSlowLink          = "slow_link"
	InjectNVLinkDegradation = "nvlink_degradation"
	InjectDBE               = "dbe"
	InjectThermal           = "thermal"
	InjectIBFlap            = "ib_flap"
	InjectHang              = "hang"
	InjectLossNaN           = "loss_nan"
	InjectSilentNode        = "silent_node"
)

// Scenario is one simulated job and what the pipeline must conclude.
// Injects adds injections into the same job beside Inject (cmd/demo runs
// two faults in one job; the committed suite injects one per job).
type Scenario struct {
	Name         string        `yaml:"name"`
	HardNegative bool          `yaml:"hard_negative"`
	Nodes        int           `yaml:"nodes"`
	GPUsPerNode  int           `yaml:"gpus_per_node"`
	Steps        int           `yaml:"steps"`
	Jitter       float64       `yaml:"jitter"`
	Inject       *Injection    `yaml:"inject"`
	Injects      []Injection   `yaml:"injects"`
	Noise        Noise         `yaml:"noise"`
	Expect       []Expectation `yaml:"expect"`
	Allow        []Expectation `yaml:"allow"`

	// Issue 20 (scenarios.yaml's header explains each).
	DataLag        time.Duration   `yaml:"data_lag"`
	ClockSkew      []time.Duration `yaml:"clock_skew"`
	NoStepSpans    bool            `yaml:"no_step_spans"`
	Overlap        string          `yaml:"overlap"`
	PhaseScale     float64         `yaml:"phase_scale"`
	MaxDetectSteps int             `yaml:"max_detect_steps"`
	// MaxOtherFaults bounds the faults opened besides the expected ones
	// (allowed ones included); nil: no bound.
	MaxOtherFaults *int `yaml:"max_other_faults"`
	// ShareNodesWith names a scenario whose nodes this job's ranks share
	// for the flight recorder (issue 22): node n's ranks dump below that
	// job's node n's dump directory, which one agent reads.
	ShareNodesWith string `yaml:"share_nodes_with"`

	// Issue 30 (scenarios.yaml's header explains each).
	//
	// MaxFirstSeenError bounds how far each expectation's first open
	// record's fault.first_seen may lie from the injection's onset on the
	// injected node's clock; 0: no bound.
	MaxFirstSeenError time.Duration `yaml:"max_first_seen_error"`
	// Warnings are the straggler processor's job warnings the run must log
	// naming this job, by kind (WarningKinds); a kind not listed: none.
	Warnings map[string]int `yaml:"warnings"`
	// KeepSize: the job keeps its own size when a run sets Options.Ranks
	// (issue 30: a two-rank job stays a two-rank job at -ranks 1024).
	KeepSize bool `yaml:"keep_size"`
}

// Overlap modes of the phase contract (scenarios.yaml: overlap).
const (
	OverlapComputeOnly = "compute_only"
	OverlapLegacy      = "legacy"
)

// Injection is the fault a scenario injects from AtStep on.
type Injection struct {
	Kind         string  `yaml:"kind"`
	AtStep       int     `yaml:"at_step"`
	Node         int     `yaml:"node"`
	GPU          int     `yaml:"gpu"`
	Factor       float64 `yaml:"factor"`
	CRCPerScrape float64 `yaml:"crc_per_scrape"`
	DelaySteps   int     `yaml:"delay_steps"`
	PeriodSteps  int     `yaml:"period_steps"`
}

// Noise is what healthy jobs do that must not look like a fault.
type Noise struct {
	CheckpointEvery  int       `yaml:"checkpoint_every"`
	CheckpointFactor float64   `yaml:"checkpoint_factor"`
	HiccupProb       float64   `yaml:"hiccup_prob"`
	HiccupFactor     float64   `yaml:"hiccup_factor"`
	PPStages         []float64 `yaml:"pp_stages"`
	SeqLenSigma      float64   `yaml:"seqlen_sigma"`
	// PPUnlabelled: the ranks do not report training.pp_stage.
	PPUnlabelled bool `yaml:"pp_unlabelled"`
	// PPStageRanks ranks per stage; the stages' levels cycle through
	// PPStages. 0: PPStages split the job in len(PPStages) equal stages.
	PPStageRanks int `yaml:"pp_stage_ranks"`
	// SlowShare of the ranks compute SlowFactor [min, max] slower for the
	// whole run.
	SlowShare  float64   `yaml:"slow_share"`
	SlowFactor []float64 `yaml:"slow_factor"`

	// Issue 30 (scenarios.yaml's header explains each).
	// NoisyRanks compute x lognormal(0, NoisySigma) every step, on top of
	// the jitter every rank has.
	NoisyRanks []int   `yaml:"noisy_ranks"`
	NoisySigma float64 `yaml:"noisy_sigma"`
	// SpikeRanks compute SpikeFactor slower for SpikeSteps steps from
	// SpikeAtStep, then return to their level.
	SpikeRanks  []int   `yaml:"spike_ranks"`
	SpikeAtStep int     `yaml:"spike_at_step"`
	SpikeSteps  int     `yaml:"spike_steps"`
	SpikeFactor float64 `yaml:"spike_factor"`
}

// Expectation names a fault type and the entity it must (expect) or may
// (allow) be opened on. Node, GPU, Device and Port select within the
// scenario's job; unset ones match anything.
type Expectation struct {
	Type   fault.Type `yaml:"type"`
	Entity string     `yaml:"entity"` // gpu, rank, node, ib_port, job or any
	Node   *int       `yaml:"node"`
	GPU    *int       `yaml:"gpu"`
	Device string     `yaml:"device"`
	Port   string     `yaml:"port"`
	// Evidence are signals the record's evidence must hold (issue 20: a
	// hang names its collective, nccl.hang.collective).
	Evidence []string `yaml:"evidence"`
}

type scenarioFile struct {
	Defaults  Scenario   `yaml:"defaults"`
	Scenarios []Scenario `yaml:"scenarios"`
}

// Scenarios returns the committed scenarios with the defaults applied.
func Scenarios() ([]Scenario, error) {
	return parseScenarios(scenariosYAML)
}

// ParseScenarios reads a scenarios document in the format of the
// committed scenarios.yaml (Options.ScenariosYAML runs one).
func ParseScenarios(doc []byte) ([]Scenario, error) {
	return parseScenarios(doc)
}

func parseScenarios(doc []byte) ([]Scenario, error) {
	var f scenarioFile
	if err := yaml.Unmarshal(doc, &f); err != nil {
		return nil, fmt.Errorf("testbed: scenarios.yaml: %w", err)
	}
	seen := map[string]bool{}
	var errs []error
	for i := range f.Scenarios {
		s := &f.Scenarios[i]
		if s.Nodes == 0 {
			s.Nodes = f.Defaults.Nodes
		}
		if s.GPUsPerNode == 0 {
			s.GPUsPerNode = f.Defaults.GPUsPerNode
		}
		if s.Steps == 0 {
			s.Steps = f.Defaults.Steps
		}
		if s.Jitter == 0 {
			s.Jitter = f.Defaults.Jitter
		}
		if err := s.validate(); err != nil {
			errs = append(errs, fmt.Errorf("testbed: scenarios.yaml: scenario %d (%q): %w", i, s.Name, err))
		}
		if seen[s.Name] {
			errs = append(errs, fmt.Errorf("testbed: scenarios.yaml: scenario %q defined twice", s.Name))
		}
		seen[s.Name] = true
	}
	for i := range f.Scenarios {
		s := &f.Scenarios[i]
		if s.ShareNodesWith == "" {
			continue
		}
		j := slices.IndexFunc(f.Scenarios, func(o Scenario) bool { return o.Name == s.ShareNodesWith })
		switch {
		case s.ShareNodesWith == s.Name:
			errs = append(errs, fmt.Errorf("testbed: scenarios.yaml: scenario %q: share_nodes_with: itself", s.Name))
		case j < 0:
			errs = append(errs, fmt.Errorf("testbed: scenarios.yaml: scenario %q: share_nodes_with: no scenario %q", s.Name, s.ShareNodesWith))
		case f.Scenarios[j].ShareNodesWith != "":
			errs = append(errs, fmt.Errorf("testbed: scenarios.yaml: scenario %q: share_nodes_with: %q shares another's nodes itself", s.Name, s.ShareNodesWith))
		case f.Scenarios[j].Nodes != s.Nodes:
			errs = append(errs, fmt.Errorf("testbed: scenarios.yaml: scenario %q: share_nodes_with: %q has %d nodes, not %d", s.Name, s.ShareNodesWith, f.Scenarios[j].Nodes, s.Nodes))
		}
	}
	return f.Scenarios, errors.Join(errs...)
}

func (s *Scenario) validate() error {
	switch {
	case s.Name == "":
		return errors.New("name: empty")
	case s.Nodes <= 0 || s.GPUsPerNode <= 0 || s.Steps <= 0:
		return errors.New("nodes, gpus_per_node and steps must be positive")
	case s.HardNegative && (len(s.injections()) > 0 || len(s.Expect) > 0 || len(s.Allow) > 0):
		return errors.New("a hard negative injects, expects and allows nothing")
	case !s.HardNegative && (len(s.injections()) == 0 || len(s.Expect) == 0):
		return errors.New("a fault scenario needs inject and expect")
	}
	if s.Inject != nil {
		if err := s.Inject.validate(s); err != nil {
			return fmt.Errorf("inject%w", err)
		}
	}
	for i := range s.Injects {
		if err := s.Injects[i].validate(s); err != nil {
			return fmt.Errorf("injects[%d]%w", i, err)
		}
	}
	if err := s.validateShape(); err != nil {
		return err
	}
	for _, e := range append(append([]Expectation{}, s.Expect...), s.Allow...) {
		if !e.Type.Valid() {
			return fmt.Errorf("expect/allow: unknown fault type %q", e.Type)
		}
		switch e.Entity {
		case "gpu", "rank", "node", "ib_port", "job", "any":
		default:
			return fmt.Errorf("expect/allow: unknown entity %q", e.Entity)
		}
		for _, sig := range e.Evidence {
			if sig == "" {
				return errors.New("expect/allow: evidence: empty signal")
			}
		}
	}
	return nil
}

// validateShape checks the fields of issue 20.
func (s *Scenario) validateShape() error {
	n := s.Noise
	switch {
	case s.DataLag < 0:
		return errors.New("data_lag: negative")
	case s.Overlap != "" && s.Overlap != OverlapComputeOnly && s.Overlap != OverlapLegacy:
		return fmt.Errorf("overlap: unknown %q (compute_only or legacy)", s.Overlap)
	case s.PhaseScale < 0:
		return errors.New("phase_scale: negative")
	case s.MaxDetectSteps < 0:
		return errors.New("max_detect_steps: negative")
	case s.MaxOtherFaults != nil && *s.MaxOtherFaults < 0:
		return errors.New("max_other_faults: negative")
	case s.MaxFirstSeenError < 0:
		return errors.New("max_first_seen_error: negative")
	case n.PPStageRanks < 0 || (n.PPStageRanks > 0 && len(n.PPStages) == 0):
		return errors.New("noise.pp_stage_ranks: needs pp_stages and a positive count")
	case n.PPUnlabelled && len(n.PPStages) == 0:
		return errors.New("noise.pp_unlabelled: needs pp_stages")
	case n.SlowShare < 0 || n.SlowShare > 1:
		return errors.New("noise.slow_share: outside [0, 1]")
	case n.SlowShare > 0 && (len(n.SlowFactor) != 2 || n.SlowFactor[0] <= 0 || n.SlowFactor[1] < n.SlowFactor[0]):
		return errors.New("noise.slow_factor: want [min, max], 0 < min <= max")
	case len(n.NoisyRanks) > 0 && !(n.NoisySigma > 0 && n.NoisySigma <= 1):
		return fmt.Errorf("noise.noisy_sigma: %v must be in (0, 1] with noisy_ranks", n.NoisySigma)
	case len(n.NoisyRanks) == 0 && n.NoisySigma != 0:
		return errors.New("noise.noisy_sigma: needs noisy_ranks")
	case len(n.SpikeRanks) > 0 && (n.SpikeAtStep < 0 || n.SpikeSteps <= 0 || n.SpikeAtStep+n.SpikeSteps > s.Steps || !(n.SpikeFactor > 0)):
		return fmt.Errorf("noise.spike_*: steps [%d, %d) must lie within the run's %d steps and spike_factor %v be positive",
			n.SpikeAtStep, n.SpikeAtStep+n.SpikeSteps, s.Steps, n.SpikeFactor)
	case len(n.SpikeRanks) == 0 && (n.SpikeSteps != 0 || n.SpikeFactor != 0 || n.SpikeAtStep != 0):
		return errors.New("noise.spike_*: needs spike_ranks")
	}
	for _, rs := range []struct {
		key   string
		ranks []int
	}{{"noise.noisy_ranks", n.NoisyRanks}, {"noise.spike_ranks", n.SpikeRanks}} {
		for _, r := range rs.ranks {
			if r < 0 || r >= s.Ranks() {
				return fmt.Errorf("%s: rank %d is outside the job's %d ranks", rs.key, r, s.Ranks())
			}
		}
	}
	for kind, n := range s.Warnings {
		if _, ok := WarningKinds[kind]; !ok {
			return fmt.Errorf("warnings: unknown kind %q (%s)", kind, strings.Join(slices.Sorted(maps.Keys(WarningKinds)), ", "))
		}
		if n < 0 {
			return fmt.Errorf("warnings: %s: negative count %d", kind, n)
		}
	}
	return nil
}

func (in *Injection) validate(s *Scenario) error {
	switch in.Kind {
	case InjectComputeStraggler, InjectSlowLink, InjectNVLinkDegradation, InjectDBE, InjectThermal,
		InjectIBFlap, InjectHang, InjectLossNaN, InjectSilentNode:
	default:
		return fmt.Errorf(".kind: unknown %q", in.Kind)
	}
	if in.AtStep <= 0 || in.AtStep >= s.Steps {
		return fmt.Errorf(".at_step: %d is outside the run's %d steps", in.AtStep, s.Steps)
	}
	if in.Node < 0 || in.Node >= s.Nodes || in.GPU < 0 || in.GPU >= s.GPUsPerNode {
		return fmt.Errorf(": node %d gpu %d is outside %d nodes x %d GPUs", in.Node, in.GPU, s.Nodes, s.GPUsPerNode)
	}
	return nil
}

// injections lists every injection of the scenario: inject, then injects.
func (s *Scenario) injections() []*Injection {
	var out []*Injection
	if s.Inject != nil {
		out = append(out, s.Inject)
	}
	for i := range s.Injects {
		out = append(out, &s.Injects[i])
	}
	return out
}

// Ranks is the scenario's world size.
func (s *Scenario) Ranks() int { return s.Nodes * s.GPUsPerNode }
