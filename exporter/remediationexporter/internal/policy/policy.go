// Package policy maps a fault record (type, severity, XID, recommended
// action) to what the remediation exporter does: node actions on the
// platform, a webhook and what it asks for, and whether a resolved record may
// return the node to service. It holds no state beyond the compiled rules.
package policy // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/policy"

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// Policy action names (config values). Node actions are actuator.Action
// values; webhook and none are the exporter's own.
const (
	ActionCordon      = string(actuator.ActionCordon)
	ActionTaint       = string(actuator.ActionTaint)
	ActionCondition   = string(actuator.ActionCondition)
	ActionEvict       = string(actuator.ActionEvict)
	ActionDrain       = string(actuator.ActionDrain)
	ActionDeviceTaint = string(actuator.ActionDeviceTaint)
	ActionWebhook     = "webhook"
	ActionNone        = "none"
)

// Request is what the webhook asks of its receiver.
type Request string

// Requests.
const (
	// RequestNotify tells the receiver what happened (page, chat, record).
	RequestNotify Request = "notify"
	// RequestRestartApp asks the job's owners to restart the application;
	// the node is left alone (XID 13/31, NCCL hangs).
	RequestRestartApp Request = "restart_app"
	// RequestHumanApproval asks a human to approve a destructive step (RMA).
	// Nothing is done automatically.
	RequestHumanApproval Request = "human_approval"
	// RequestBreakerTripped pages a human: the circuit breaker stopped
	// quarantining. Sent by the exporter, never chosen by a rule.
	RequestBreakerTripped Request = "breaker_tripped"
)

// Rule matches records and names the actions for them. Empty matcher lists
// match anything.
type Rule struct {
	// Name appears in the audit trail.
	Name string `mapstructure:"name"`
	// Types are fault.type values.
	Types []string `mapstructure:"types"`
	// Severities are P1..P4.
	Severities []string `mapstructure:"severities"`
	// XIDs match gpu.xid (records without one do not match a rule with XIDs).
	XIDs []int `mapstructure:"xids"`
	// FaultActions match the record's recommended fault.action.
	FaultActions []string `mapstructure:"fault_actions"`
	// Actions: cordon, taint, condition, evict, drain, webhook, none. The
	// platform keeps the node actions it has (docs: ForPlatform).
	Actions []string `mapstructure:"actions"`
	// Request is what the webhook asks: notify (default), restart_app,
	// human_approval.
	Request Request `mapstructure:"request"`
	// ReturnToService lets a resolved record release the node after the
	// verification window (never for the hold-for-human faults).
	ReturnToService bool `mapstructure:"return_to_service"`
	// Repair is the repair ladder, mildest first (gpu_reset, reboot): with
	// the exporter's repair loop on, a node quarantined for the fault is
	// repaired, verified and returned only once verification passes; past
	// the ladder it waits for a human (RMA review). Empty: no repair.
	Repair []string `mapstructure:"repair"`
	// Verify is the check before a repaired node returns (repair.go).
	Verify Verify `mapstructure:"verify"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// Config is the policy section of the exporter's configuration.
type Config struct {
	// Rules, first match wins. Empty: DefaultRules().
	Rules []Rule `mapstructure:"rules"`
	// HoldForHumanTypes and HoldForHumanXIDs add to the built-in faults
	// after which a node is never returned to service automatically
	// (gpu.memory.dbe, gpu.fell_off_bus; XID 48, 79, 94, 95). The built-in
	// ones cannot be removed.
	HoldForHumanTypes []string `mapstructure:"hold_for_human_types"`
	HoldForHumanXIDs  []int    `mapstructure:"hold_for_human_xids"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// builtinHoldTypes and builtinHoldXIDs wait for a human: memory that lost
// data (DBE, XID 48, 94, 95) or a GPU that left the PCIe bus (XID 79).
var (
	builtinHoldTypes = []string{string(fault.TypeGPUMemoryDBE), string(fault.TypeGPUFellOffBus)}
	builtinHoldXIDs  = []int{48, 79, 94, 95}
)

// DefaultRules is the shipped policy (README.md explains each line).
func DefaultRules() []Rule {
	quarantine := []string{ActionCordon, ActionTaint, ActionCondition, ActionDrain, ActionWebhook}
	resetThenReboot := []string{string(repair.ActionGPUReset), string(repair.ActionReboot)}
	reboot := []string{string(repair.ActionReboot)}
	memory := Verify{DiagLevel: 2}
	links := Verify{DiagLevel: 1, LinksSteady: 5 * time.Minute}
	return []Rule{
		{Name: "xid_app_restart", Types: []string{string(fault.TypeGPUXID)}, XIDs: []int{13, 31},
			Actions: []string{ActionWebhook}, Request: RequestRestartApp},
		{Name: "rma_review", FaultActions: []string{string(fault.ActionRMAReview)},
			Actions: []string{ActionWebhook}, Request: RequestHumanApproval},
		{Name: "app_restart", FaultActions: []string{string(fault.ActionRestartApp)},
			Actions: []string{ActionWebhook}, Request: RequestRestartApp},
		{Name: "p1_fell_off_bus", Severities: []string{"P1"}, Types: []string{string(fault.TypeGPUFellOffBus)},
			Actions: quarantine, ReturnToService: true, Repair: reboot},
		{Name: "p1_nvlink", Severities: []string{"P1"}, Types: []string{string(fault.TypeNVLinkDegraded)},
			Actions: quarantine, ReturnToService: true, Repair: resetThenReboot, Verify: links},
		{Name: "p1_ib", Severities: []string{"P1"}, Types: []string{string(fault.TypeIBLinkFlap)},
			Actions: quarantine, ReturnToService: true, Repair: reboot, Verify: links},
		{Name: "p1_unresponsive", Severities: []string{"P1"}, Types: []string{string(fault.TypeGPUUnresponsive)},
			Actions: quarantine, ReturnToService: true, Repair: resetThenReboot},
		{Name: "p1_hardware", Severities: []string{"P1"}, Types: []string{string(fault.TypeGPUMemoryDBE)},
			Actions: quarantine, ReturnToService: true, Repair: resetThenReboot, Verify: memory},
		{Name: "p1_xid_ecc", Severities: []string{"P1"}, Types: []string{string(fault.TypeGPUXID)}, XIDs: []int{48, 94, 95},
			Actions: quarantine, ReturnToService: true, Repair: resetThenReboot, Verify: memory},
		{Name: "p1_xid_fell_off_bus", Severities: []string{"P1"}, Types: []string{string(fault.TypeGPUXID)}, XIDs: []int{79},
			Actions: quarantine, ReturnToService: true, Repair: reboot},
		{Name: "p1_other", Severities: []string{"P1"}, Actions: []string{ActionWebhook}},
		{Name: "p2", Severities: []string{"P2"},
			Actions: []string{ActionTaint, ActionCondition, ActionWebhook}, ReturnToService: true},
		{Name: "p3_p4_record", Severities: []string{"P3", "P4"}, Actions: []string{ActionWebhook}},
	}
}

// Validate checks every rule and hold entry.
func (c Config) Validate() error {
	var errs []error
	for i, r := range c.Rules {
		if err := r.validate(); err != nil {
			errs = append(errs, fmt.Errorf("policy.rules[%d] (%s): %w", i, r.Name, err))
		}
	}
	for _, t := range c.HoldForHumanTypes {
		if !fault.Type(t).Valid() {
			errs = append(errs, fmt.Errorf("policy.hold_for_human_types: unknown fault type %q", t))
		}
	}
	for _, x := range c.HoldForHumanXIDs {
		if x <= 0 {
			errs = append(errs, fmt.Errorf("policy.hold_for_human_xids: %d is not a positive XID", x))
		}
	}
	return errors.Join(errs...)
}

func (r Rule) validate() error {
	var errs []error
	for _, t := range r.Types {
		if !fault.Type(t).Valid() {
			errs = append(errs, fmt.Errorf("unknown fault type %q", t))
		}
	}
	for _, s := range r.Severities {
		if !fault.Severity(s).Valid() {
			errs = append(errs, fmt.Errorf("unknown severity %q (want P1..P4)", s))
		}
	}
	for _, x := range r.XIDs {
		if x <= 0 {
			errs = append(errs, fmt.Errorf("xid %d is not positive", x))
		}
	}
	for _, a := range r.FaultActions {
		if !fault.Action(a).Valid() {
			errs = append(errs, fmt.Errorf("unknown fault action %q", a))
		}
	}
	if len(r.Actions) == 0 {
		errs = append(errs, errors.New("actions is empty (use [none] to do nothing)"))
	}
	for _, a := range r.Actions {
		switch a {
		case ActionCordon, ActionTaint, ActionCondition, ActionEvict, ActionDrain, ActionDeviceTaint, ActionWebhook:
		case ActionNone:
			if len(r.Actions) > 1 {
				errs = append(errs, errors.New("none cannot be combined with other actions"))
			}
		default:
			errs = append(errs, fmt.Errorf("unknown action %q", a))
		}
	}
	switch r.Request {
	case "", RequestNotify, RequestRestartApp, RequestHumanApproval:
	default:
		errs = append(errs, fmt.Errorf("unknown request %q (want notify, restart_app or human_approval)", r.Request))
	}
	errs = append(errs, validateRepair(r.Repair), r.Verify.validate())
	return errors.Join(errs...)
}

// Decision is what the policy says to do with one record.
type Decision struct {
	// Rule is the name of the matching rule; empty when none matched.
	Rule string
	// NodeActions are the node actions in rule order, before ForPlatform.
	NodeActions []actuator.Action
	// Webhook: send the record to the webhook.
	Webhook bool
	// Request is what the webhook asks.
	Request Request
	// ReturnToService: a resolved record may release the node.
	ReturnToService bool
	// HoldReason is set when the fault waits for a human before the node
	// returns to service; ReturnToService is then false.
	HoldReason string
	// Repair is the rule's repair ladder (empty: none); Checks are the
	// verification's checks (always at least the DCGM diagnostic).
	Repair []repair.Action
	Checks []repair.CheckSpec
}

// Policy is a compiled Config. Safe for concurrent use (read only).
type Policy struct {
	rules     []Rule
	holdTypes []string
	holdXIDs  []int
}

// New compiles cfg (validated by the caller or here).
func New(cfg Config) (*Policy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rules := cfg.Rules
	if len(rules) == 0 {
		rules = DefaultRules()
	}
	return &Policy{
		rules:     rules,
		holdTypes: append(slices.Clone(builtinHoldTypes), cfg.HoldForHumanTypes...),
		holdXIDs:  append(slices.Clone(builtinHoldXIDs), cfg.HoldForHumanXIDs...),
	}, nil
}

// Decide returns the decision for r. The first matching rule wins; none
// matching means do nothing (audited as such).
func (p *Policy) Decide(r fault.Record) Decision {
	var d Decision
	for _, rule := range p.rules {
		if !rule.matches(r) {
			continue
		}
		d.Rule = rule.Name
		d.Request = rule.Request
		if d.Request == "" {
			d.Request = RequestNotify
		}
		d.ReturnToService = rule.ReturnToService
		for _, a := range rule.Repair {
			d.Repair = append(d.Repair, repair.Action(a))
		}
		d.Checks = rule.Verify.Checks()
		for _, a := range rule.Actions {
			switch a {
			case ActionWebhook:
				d.Webhook = true
			case ActionNone:
			default:
				d.NodeActions = append(d.NodeActions, actuator.Action(a))
			}
		}
		break
	}
	// Nothing RMAs automatically: an RMA recommendation always asks a human.
	if r.Action == fault.ActionRMAReview {
		d.Request = RequestHumanApproval
	}
	if reason := p.holdReason(r); reason != "" {
		d.HoldReason = reason
		d.ReturnToService = false
	}
	return d
}

func (p *Policy) holdReason(r fault.Record) string {
	if slices.Contains(p.holdTypes, string(r.Type)) {
		return "fault type " + string(r.Type) + " waits for a human before return to service"
	}
	if r.XID != 0 && slices.Contains(p.holdXIDs, r.XID) {
		return fmt.Sprintf("XID %d waits for a human before return to service", r.XID)
	}
	return ""
}

func (r Rule) matches(rec fault.Record) bool {
	if len(r.Types) > 0 && !slices.Contains(r.Types, string(rec.Type)) {
		return false
	}
	if len(r.Severities) > 0 && !slices.Contains(r.Severities, string(rec.Severity)) {
		return false
	}
	if len(r.XIDs) > 0 && (rec.XID == 0 || !slices.Contains(r.XIDs, rec.XID)) {
		return false
	}
	if len(r.FaultActions) > 0 && !slices.Contains(r.FaultActions, string(rec.Action)) {
		return false
	}
	return true
}

// Platform names.
const (
	PlatformKubernetes = "kubernetes"
	PlatformSlurm      = "slurm"
)

// ForPlatform keeps the node actions the named platform has, in order and
// without duplicates: Kubernetes cordon, taint, condition, evict; Slurm
// drain, with cordon meaning DRAIN there too (so a cordon-only rule still
// quarantines a Slurm node). Any other name (no platform) keeps them all, so
// a dry run without a platform shows the whole rule.
func ForPlatform(actions []actuator.Action, platform string) []actuator.Action {
	out := make([]actuator.Action, 0, len(actions))
	add := func(a actuator.Action) {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	for _, a := range actions {
		switch platform {
		case PlatformKubernetes:
			switch a {
			case actuator.ActionCordon, actuator.ActionTaint, actuator.ActionCondition, actuator.ActionEvict, actuator.ActionDeviceTaint:
				add(a)
			}
		case PlatformSlurm:
			switch a {
			case actuator.ActionDrain, actuator.ActionCordon, actuator.ActionDeviceTaint:
				// Slurm cannot isolate one GPU: the node drains.
				add(actuator.ActionDrain)
			}
		default:
			add(a)
		}
	}
	return out
}

// Route is where a webhook receiver sends a record: P1 pages, P2 goes to
// chat, P3 and P4 are recorded only.
func Route(s fault.Severity) string {
	switch s {
	case fault.SeverityP1:
		return "page"
	case fault.SeverityP2:
		return "chat"
	default:
		return "record"
	}
}

// PreferDeviceTaint narrows a P1 or P2 fault of one GPU (blast radius gpu,
// with its UUID) from the node to the device: cordon and taint become one
// device_taint, the rest (condition, evict) stays. Other faults, and rules
// that neither cordon nor taint, keep their actions.
func PreferDeviceTaint(actions []actuator.Action, r fault.Record) []actuator.Action {
	if r.BlastRadius != fault.BlastGPU || r.GPUUUID == "" ||
		(r.Severity != fault.SeverityP1 && r.Severity != fault.SeverityP2) {
		return actions
	}
	if !slices.Contains(actions, actuator.ActionCordon) && !slices.Contains(actions, actuator.ActionTaint) {
		return actions
	}
	out := make([]actuator.Action, 0, len(actions))
	for _, a := range actions {
		switch a {
		case actuator.ActionCordon, actuator.ActionTaint:
			if !slices.Contains(out, actuator.ActionDeviceTaint) {
				out = append(out, actuator.ActionDeviceTaint)
			}
		default:
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
}
